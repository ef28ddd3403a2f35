"""Part 1: every request the product sends, judged against the SDK's request types.

The real binary is driven over MCP stdio through every tool of its `tools/list` (a hand-made
spread per tool, plus calls derived from each published inputSchema), and as a CLI; every
request that reaches the fake (`GET /_control/requests`) is then validated:

- `POST /v1/agent`: ResponseCreateParams(Non)Streaming (types layer) and ResponsesRequestInput
  (client layer), strictly (unknown fields rejected at every level);
- `POST /search`: SearchCreateParams / ApiSearchRequestInput, strictly;
- `GET /v1/agent/{id}` (query `stream`, `starting_after` only), `POST /v1/agent/{id}/cancel`,
  `GET /v1/models`: no body;
- any other route: a failure.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

import node_sdk
import schema_calls
import sdk
from common import DUMMY_KEY, FakeUpstream, McpStdio, Tally, base_env, our_binary

DEFAULT_SCENARIO = {"duration_ms": 50}
LONG_SCENARIO = {"duration_ms": 8000}
REPORT = {
    "subquestions": ["How do heat pumps move heat?", "How cold is too cold for them?"],
    "answer": "They move heat rather than make it [1].",
    "key_findings": ["Efficiency drops as it gets colder."],
    "open_questions": [],
    "claims": [{"text": "Heat pumps move heat.", "urls": ["https://example.org/one"], "confidence": "high"}],
}
RESEARCH_SCENARIO = {"duration_ms": 50, "answer": json.dumps(REPORT)}
FUNCTION_SCENARIO = {
    "duration_ms": 50,
    "function_calls": [{"name": "lookup_weather", "arguments": {"city": "Paris"}, "call_id": "call_weather_1"}],
}
LONG_ANSWER_SCENARIO = {"duration_ms": 50, "answer": "Long answer. " * 400}
Q = "What is the tallest building in Europe?"
# The connector the operator allows in this suite (PERPLEXITY_ALLOWED_CONNECTORS).
CONNECTOR_ID = "conn_contract_drive"
FUNCTION_TOOL = {
    "type": "function", "name": "lookup_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False},
    "strict": True,
}
PNG_DATA_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
CONTRACT_PRESETS = ["fast", "low", "medium", "high", "xhigh", "wide-research"]
CONTRACT_EFFORTS = ["minimal", "low", "medium", "high", "xhigh"]

# ok: must succeed; reached: must reach the fake (an error answer is fine);
# refused: the product must refuse it locally; any: no expectation.
EXPECTATIONS = ("ok", "reached", "refused", "any")


@dataclass
class Call:
    tool: str
    args: Any                     # dict, or a function of the context
    label: str = ""
    expect: str = "ok"
    scenario: dict = field(default_factory=lambda: DEFAULT_SCENARIO)
    save: str | None = None       # keep the call's response id under this name
    after: Callable | None = None  # after(ctx, result) for anything else to keep
    origin: str = "spread"
    why: str = ""                 # why the expectation is what it is


@dataclass
class Outcome:
    name: str
    args: Any
    requests: list[dict]
    state: str                    # ok | error | refused
    detail: str = ""
    seconds: float = 0.0


def _text(result: dict) -> str:
    parts = result.get("content") or []
    return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict))


def _response_id(result: Any) -> str | None:
    if isinstance(result, dict):
        sc = result.get("structuredContent")
        if isinstance(sc, dict) and isinstance(sc.get("response_id"), str):
            return sc["response_id"]
    m = re.search(r"resp_[A-Za-z0-9]{8,}", json.dumps(result))
    return m.group(0) if m else None


# --- the hand-made spread --------------------------------------------------------------------
def _keep_function_call(ctx: dict, result: dict) -> None:
    sc = result.get("structuredContent") or {}
    calls = sc.get("function_calls") or []
    if calls:
        ctx["fc_call"] = calls[0]


def _continuation(ctx: dict, with_call_item: bool) -> dict:
    call = ctx.get("fc_call") or {}
    call_id = call.get("call_id", "call_weather_1")
    output = {"type": "function_call_output", "call_id": call_id, "output": "{\"temperature_c\": 21}",
              "name": call.get("name", "lookup_weather")}
    if call.get("thought_signature"):
        output["thought_signature"] = call["thought_signature"]
    items = [output]
    if with_call_item:
        item = {"type": "function_call", "call_id": call_id, "name": call.get("name", "lookup_weather"),
                "arguments": call.get("arguments", "{\"city\":\"Paris\"}")}
        if isinstance(item["arguments"], (dict, list)):
            item["arguments"] = json.dumps(item["arguments"])
        if call.get("thought_signature"):
            item["thought_signature"] = call["thought_signature"]
        items.insert(0, item)
    return {"input": items, "previous_response_id": ctx.get("fc_run", "resp_missing"), "tools": [FUNCTION_TOOL]}


def _truncated_key(ctx: dict, result: dict) -> None:
    m = re.search(r"\b[0-9a-f]{24}\b", json.dumps(result))
    if m:
        ctx["retrieve_key"] = m.group(0)


def spread(tools: dict[str, dict]) -> list[Call]:
    calls: list[Call] = []
    add = calls.append
    schema_text = json.dumps(tools.get("responses_create", {}).get("inputSchema", {}))

    # ids used by later calls
    add(Call("perplexity_agent", {"query": Q, "wait": False}, "wait=false (completed run for later calls)",
             save="completed"))
    add(Call("perplexity_agent", {"query": Q}, "defaults"))
    for p in CONTRACT_PRESETS:
        add(Call("perplexity_agent", {"query": Q, "preset": p}, f"preset={p}"))
    add(Call("perplexity_agent", {"query": Q, "preset": "high", "recency": "month",
                                  "domains": ["example.org", "wikipedia.org"]}, "preset+recency+allowlist"))
    add(Call("perplexity_agent", {"query": Q, "domains": ["-pinterest.com", "-quora.com"]}, "denylist"))

    # lifecycle: result / cancel
    add(Call("perplexity_agent_result", lambda c: {"response_id": c["completed"]}, "completed run"))
    add(Call("perplexity_agent_result", lambda c: {"response_id": c["completed"], "wait_seconds": 2},
             "completed run, wait 2"))
    add(Call("perplexity_agent", {"query": Q, "wait": False}, "wait=false (long run)", scenario=LONG_SCENARIO,
             save="running"))
    add(Call("perplexity_agent_result", lambda c: {"response_id": c["running"]}, "running run, check once"))
    add(Call("perplexity_agent_result", lambda c: {"response_id": c["running"], "wait_seconds": 1},
             "running run, wait 1"))
    add(Call("responses_retrieve", lambda c: {"response_id": c["running"]}, "running run"))
    add(Call("perplexity_agent_cancel", lambda c: {"response_id": c["running"]}, "running run"))
    add(Call("perplexity_agent_result", lambda c: {"response_id": c["running"], "wait_seconds": 2},
             "cancelled run", expect="any"))
    add(Call("perplexity_agent_cancel", lambda c: {"response_id": c["completed"]}, "completed run",
             expect="reached", why="a terminal run cannot be cancelled (400)"))
    add(Call("perplexity_agent_cancel", {"response_id": "resp_doesnotexist0000000000"}, "unknown id",
             expect="reached", why="404 upstream"))
    add(Call("perplexity_agent_result", {"response_id": "resp_doesnotexist0000000000"}, "unknown id",
             expect="reached", why="404 upstream"))

    # perplexity_ask
    add(Call("perplexity_ask", {"query": Q}, "defaults"))
    add(Call("perplexity_ask", {"query": Q, "model": "openai/gpt-5.5"}, "model"))
    add(Call("perplexity_ask", {"query": Q, "preset": "low", "recency": "day", "domains": ["example.org"]},
             "preset+recency+domains"))
    add(Call("perplexity_ask", {"query": Q, "domains": ["-example.com"]}, "denylist"))

    # perplexity_search
    add(Call("perplexity_search", {"query": Q}, "one query"))
    add(Call("perplexity_search", {"queries": [Q, "tallest skyscraper Europe 2026", "Europe tallest tower"]},
             "list of queries"))
    add(Call("perplexity_search", {"query": Q, "max_results": 20, "recency": "week",
                                   "domains": ["example.org", "wikipedia.org"], "languages": ["en", "de"],
                                   "country": "GB", "max_tokens_per_page": 512}, "every filter but dates"))
    add(Call("perplexity_search", {"query": Q, "domains": ["-example.com"], "published_after": "1/1/2025",
                                   "published_before": "12/31/2025", "updated_after": "2/1/2025",
                                   "updated_before": "11/30/2025"}, "dates + denylist"))
    add(Call("perplexity_search", {"query": "Jane Doe climate scientist", "search_type": "people",
                                   "max_results": 50}, "people, 50 results"))
    add(Call("perplexity_search", {"query": Q, "recency": "month", "published_after": "1/1/2025"},
             "recency + published date", expect="any",
             why="contract §4: the API answers 400; refusing locally is the right thing"))

    # deep_research
    add(Call("deep_research", {"question": "How do heat pumps work in cold climates?"}, "defaults",
             scenario=RESEARCH_SCENARIO))
    add(Call("deep_research", {"question": "How do heat pumps work in cold climates?", "num_subquestions": 2,
                               "max_results_per_subquestion": 3, "max_sources": 20,
                               "use_model_decomposition": True}, "model decomposition", scenario=RESEARCH_SCENARIO))

    # finance_search
    add(Call("finance_search", {"query": "How did Apple do last quarter?"}, "query only"))
    add(Call("finance_search", {"query": "Compare margins", "tickers": ["AAPL", "MSFT"],
                                "categories": ["earnings", "price history"]}, "tickers+categories",
             scenario={**DEFAULT_SCENARIO, "finance_results": [{"symbol": "AAPL", "price": 190.1}]}))

    # fetch_url (the local SSRF-guarded fetcher: loopback is refused, nothing goes upstream)
    add(Call("fetch_url", {"url": "http://127.0.0.1:9/page"}, "loopback url", expect="any",
             why="refused by the SSRF guard; must not reach the API"))
    add(Call("fetch_url", {"urls": ["http://127.0.0.1:9/a", "http://[::1]:9/b"], "max_urls": 2}, "urls",
             expect="any", why="refused by the SSRF guard; must not reach the API"))

    # responses_create
    rc = "responses_create"
    add(Call(rc, {"input": Q}, "string input"))
    add(Call(rc, {"input": [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "What is in these pictures?"},
        {"type": "input_image", "image_url": "https://example.org/cat.png"},
        {"type": "input_image", "image_url": PNG_DATA_URL}]}]}, "text + image url + image data url"))
    add(Call(rc, {"input": [
        {"type": "message", "role": "system", "content": "You are terse."},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "One line only."}]},
        {"type": "message", "role": "user", "content": "Name a large city."},
        {"type": "message", "role": "assistant", "content": "Tokyo."},
        {"type": "message", "role": "user", "content": "And in Europe?"}]}, "system/developer/assistant turns"))
    add(Call(rc, {"input": Q, "model": "openai/gpt-5.5"}, "model"))
    add(Call(rc, {"input": Q, "models": ["openai/gpt-5.5", "xai/grok-4-1", "google/gemini-3-pro"]},
             "models chain"))
    add(Call(rc, {"input": Q, "model": "anthropic/claude-sonnet-4-5", "max_output_tokens": 4096},
             "anthropic model + max_output_tokens"))
    add(Call(rc, {"input": Q, "preset": "high", "model": "openai/gpt-5.5"}, "preset + model"))
    for p in CONTRACT_PRESETS:
        add(Call(rc, {"input": Q, "preset": p}, f"preset={p}"))
    add(Call(rc, {"input": Q, "instructions": "Answer in German, two sentences.", "language_preference": "de"},
             "instructions + language_preference"))
    for e in CONTRACT_EFFORTS:
        add(Call(rc, {"input": Q, "reasoning": {"effort": e}}, f"reasoning.effort={e} (contract value)"))
    add(Call(rc, {"input": Q, "response_format": {"type": "json_schema", "json_schema": {
        "name": "city", "description": "A city and its country.", "strict": True,
        "schema": {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                   "required": ["city", "country"], "additionalProperties": False}}}},
        "response_format json_schema", scenario={**DEFAULT_SCENARIO, "answer": "{\"city\":\"Moscow\",\"country\":\"Russia\"}"}))
    for n in (1, 10, 100):
        add(Call(rc, {"input": Q, "max_steps": n}, f"max_steps={n} (contract: 1..100)"))
    add(Call(rc, {"input": Q, "max_output_tokens": 1}, "max_output_tokens=1"))
    add(Call(rc, {"input": Q, "store": False}, "store=false"))
    add(Call(rc, {"input": Q, "wait": False}, "wait=false", save="rc_started"))
    add(Call(rc, {"input": Q, "tools": [{"type": "web_search", "filters": {
        "search_domain_filter": ["example.org", "wikipedia.org"], "search_recency_filter": "week"},
        "max_tokens": 20000, "max_tokens_per_page": 2048,
        "user_location": {"country": "CH", "city": "Zurich", "region": "Zurich", "latitude": 47.37, "longitude": 8.54}}]},
        "web_search: domains, recency, token budgets, user_location"))
    add(Call(rc, {"input": Q, "tools": [{"type": "web_search", "search_context_size": "high", "filters": {
        "search_domain_filter": ["-example.com"], "search_after_date_filter": "1/1/2025",
        "search_before_date_filter": "12/31/2025", "last_updated_after_filter": "2/1/2025",
        "last_updated_before_filter": "11/30/2025"}}]}, "web_search: denylist, dates, search_context_size"))
    advertised_filters = _filters_of(tools)
    if advertised_filters:
        every = {k: _filter_sample(k) for k in advertised_filters}
        if any("date" in k for k in every):
            every.pop("search_recency_filter", None)
        add(Call(rc, {"input": Q, "tools": [{"type": "web_search", "filters": every}]},
                 "web_search: every advertised filter (recency dropped with dates)"))
    add(Call(rc, {"input": Q, "tools": [{"type": "fetch_url", "max_urls": 5}]}, "fetch_url tool"))
    add(Call(rc, {"input": Q, "tools": [{"type": "finance_search"}]}, "finance_search tool",
             scenario={**DEFAULT_SCENARIO, "finance_results": [{"symbol": "AAPL"}]}))
    add(Call(rc, {"input": "Who is the CTO of Example Corp?", "tools": [{"type": "people_search"}]},
             "people_search tool", expect="ok" if '"people_search"' in schema_text else "any",
             why="" if '"people_search"' in schema_text else "not advertised by the tool"))
    add(Call(rc, {"input": Q, "tools": [{"type": "web_search"}, {"type": "fetch_url"}, {"type": "finance_search"},
                                        FUNCTION_TOOL]}, "several tools"))
    # functions: the run asks for a call; then the continuation
    add(Call(rc, {"input": "What's the weather in Paris?", "tools": [FUNCTION_TOOL]}, "function tool -> call",
             scenario=FUNCTION_SCENARIO, save="fc_run", after=_keep_function_call))
    add(Call(rc, lambda c: _continuation(c, with_call_item=False), "continuation: function_call_output",
             scenario=FUNCTION_SCENARIO))
    add(Call(rc, {"input": "What's the weather in Paris?", "tools": [FUNCTION_TOOL]}, "function tool -> call (2)",
             scenario=FUNCTION_SCENARIO, save="fc_run", after=_keep_function_call))
    add(Call(rc, lambda c: _continuation(c, with_call_item=True),
             "continuation: function_call + function_call_output", scenario=FUNCTION_SCENARIO))
    add(Call(rc, lambda c: {"input": "And tomorrow?", "previous_response_id": c["completed"]},
             "previous_response_id + text"))
    # responses_retrieve
    add(Call("responses_retrieve", lambda c: {"response_id": c["rc_started"], "wait_seconds": 2}, "started run"))
    add(Call("responses_retrieve", lambda c: {"response_id": c["completed"]}, "completed run"))
    add(Call("responses_retrieve", {"response_id": "resp_doesnotexist0000000000"}, "unknown id",
             expect="reached", why="404 upstream"))

    # truncation -> retrieve; server_metrics
    add(Call("perplexity_agent", {"query": Q}, "long answer (truncated)", scenario=LONG_ANSWER_SCENARIO,
             after=_truncated_key))
    add(Call("retrieve", lambda c: {"retrieve_key": c.get("retrieve_key", "0" * 24)}, "a truncated result",
             expect="any", why="local only"))
    add(Call("retrieve", lambda c: {"retrieve_key": c.get("retrieve_key", "0" * 24), "offset": 1000},
             "with offset", expect="any", why="local only"))
    add(Call("server_metrics", {}, "no arguments"))
    return calls


def _filters_of(tools: dict[str, dict]) -> list[str]:
    try:
        branches = tools["responses_create"]["inputSchema"]["properties"]["tools"]["items"]["oneOf"]
    except KeyError:
        return []
    for b in branches:
        if b.get("properties", {}).get("type", {}).get("const") == "web_search":
            return list(b["properties"].get("filters", {}).get("properties", {}))
    return []


def _filter_sample(name: str) -> Any:
    if "date" in name:
        return "3/14/2025"
    if name == "search_recency_filter":
        return "year"
    return schema_calls.NAME_SAMPLES.get(name, ["en"])


# --- calls derived from the published schemas ----------------------------------------------------
# Schema sites whose derived call cannot stand alone here, with the expectation that applies.
DERIVED_EXPECT: dict[tuple[str, str], tuple[str, str]] = {
    ("responses_create", "$.functions"): ("refused", "needs gateway functions (no gateway configured here)"),
    ("responses_create", "$.auto_execute_functions"): ("any", "needs gateway functions"),
    ("responses_create", "$.max_function_rounds"): ("refused", "needs auto_execute_functions + gateway"),
    ("perplexity_agent_cancel", "$.response_id"): ("reached", "the run is already terminal (400)"),
    ("retrieve", "$.retrieve_key"): ("any", "local only"),
    ("retrieve", "$.offset"): ("any", "local only"),
    ("fetch_url", "*"): ("any", "loopback pages are refused by the SSRF guard; nothing goes upstream"),
}


def _fixup(tool: str, args: dict) -> dict:
    """Makes a derived call whole where one option needs another."""
    if tool == "responses_create":
        for t in args.get("tools") or []:
            if isinstance(t, dict) and t.get("type") == "connector":
                t["id"] = CONNECTOR_ID  # the one the operator allows here
        rf = args.get("response_format")
        if isinstance(rf, dict):
            if "json_schema" in rf:
                rf["type"] = "json_schema"
            elif rf.get("type") == "json_schema":
                rf["json_schema"] = {"name": "answer", "schema": schema_calls.NAME_SAMPLES["schema"]}
        if args.get("store") is False:
            args.pop("wait", None)
    if tool == "fetch_url":
        if "url" in args or "urls" not in args:
            args["url"] = "http://127.0.0.1:9/page"
        if "urls" in args:
            args["urls"] = ["http://127.0.0.1:9/a"]
            args["max_urls"] = max(args.get("max_urls", 1), 1)
    if tool == "perplexity_search":
        if not ("query" in args or "queries" in args):
            args["query"] = Q
        if args.get("max_results", 0) > 20 and "search_type" not in args:
            args["search_type"] = "people"  # more than 20 is for people search only
    return args


def _scenario_for(tool: str, args: dict) -> dict:
    if tool == "deep_research":
        return RESEARCH_SCENARIO
    if tool == "responses_create" and "response_format" in args:
        return {**DEFAULT_SCENARIO, "answer": "{\"answer\": \"Canberra\"}"}
    return DEFAULT_SCENARIO


def derived(tools: dict[str, dict], ctx: dict) -> list[Call]:
    bases: dict[str, dict] = {
        "perplexity_agent": {"query": Q},
        "perplexity_agent_result": {"response_id": ctx.get("completed", "")},
        "perplexity_agent_cancel": {"response_id": ctx.get("completed", "")},
        "perplexity_ask": {"query": Q},
        "perplexity_search": {},
        "deep_research": {"question": "How do heat pumps work in cold climates?"},
        "responses_create": {"input": Q},
        "responses_retrieve": {"response_id": ctx.get("completed", "")},
        "finance_search": {"query": "How did Apple do last quarter?"},
        "fetch_url": {},
        "retrieve": {"retrieve_key": ctx.get("retrieve_key", "0" * 24)},
        "server_metrics": {},
    }
    samples = {"previous_response_id": ctx.get("completed", ""), "response_id": ctx.get("completed", ""),
               "retrieve_key": ctx.get("retrieve_key", "0" * 24)}
    calls: list[Call] = []
    for name, tool in tools.items():
        schema = tool.get("inputSchema") or {}
        base = bases.get(name)
        if base is None:
            base = {k: schema_calls.minimal(schema.get("properties", {}).get(k, {}), k)
                    for k in schema.get("required", [])}
        for d in schema_calls.derive(schema, base, samples):
            expect, why = "ok", "advertised by the tool's inputSchema"
            root = re.match(r"^\$\.[A-Za-z0-9_]+", d.site)
            for key in ((name, root.group(0) if root else "$"), (name, "*")):
                if key in DERIVED_EXPECT:
                    expect, why = DERIVED_EXPECT[key]
                    break
            args = _fixup(name, d.args)
            calls.append(Call(name, args, f"schema {d.kind} {d.label}", expect=expect,
                              scenario=_scenario_for(name, args), origin="schema", why=why))
    return calls


# --- the CLI -------------------------------------------------------------------------------------
@dataclass
class CliRun:
    argv: list[str]
    label: str
    expect: str = "reached"       # reached | any
    ok_codes: tuple = (0,)
    scenario: dict = field(default_factory=lambda: DEFAULT_SCENARIO)
    save: str | None = None


def cli_runs(help_text: str) -> list[CliRun]:
    runs = [
        CliRun(["ask", Q], "ask"),
        CliRun(["ask", "--preset", "high", "--recency", "week", "--domains", "example.org,wikipedia.org", "--json", Q],
               "ask --preset --recency --domains --json"),
        CliRun(["ask", "--domains=-example.com", "--spotlight", Q], "ask --domains deny --spotlight"),
        CliRun(["ask", "--no-wait", Q], "ask --no-wait", ok_codes=(3,), save="cli_run", scenario=LONG_SCENARIO),
        CliRun(["result", "{cli_run}", "--json"], "result --json", ok_codes=(0, 3)),
        CliRun(["cancel", "{cli_run}", "--json"], "cancel --json", ok_codes=(0,)),
        CliRun(["result", "{cli_run}", "--wait", "3"], "result --wait", ok_codes=(0, 1, 3)),
        CliRun(["search", Q], "search"),
        CliRun(["search", "--max-results", "5", "--recency", "day", "--domains", "example.org", "--json", Q],
               "search --max-results --recency --domains --json"),
        CliRun(["research", "--subquestions", "2", "--timeout", "20", "--json",
                "How do heat pumps work in cold climates?"], "research --subquestions --json",
               scenario=RESEARCH_SCENARIO),
        CliRun(["fetch", "http://127.0.0.1:9/page"], "fetch (loopback, refused locally)", expect="any",
               ok_codes=(0, 1, 2)),
        CliRun(["doctor", "--json"], "doctor --json", expect="any", ok_codes=(0, 1, 2)),
    ]
    commands = set(re.findall(r"^\s{2}([a-z][a-z-]+)\s", help_text, re.M))
    if "models" in commands:
        runs.append(CliRun(["models"], "models"))
        runs.append(CliRun(["models", "--json"], "models --json"))
    known = {"serve", "ask", "result", "cancel", "fetch", "search", "research", "gateway", "install", "doctor",
             "tui", "help", "models"}
    runs.append(CliRun(["__unknown_commands__", *sorted(commands - known)], "unknown", expect="any"))
    return runs


# --- validating what reached the fake ---------------------------------------------------------------
ID = r"[A-Za-z0-9_-]+"
ROUTES = [
    ("POST", re.compile(r"^/v1/agent$"), "create"),
    ("GET", re.compile(rf"^/v1/agent/{ID}$"), "get"),
    ("POST", re.compile(rf"^/v1/agent/{ID}/cancel$"), "cancel"),
    ("POST", re.compile(r"^/search$"), "search"),
    ("GET", re.compile(r"^/v1/models$"), "models"),
]


def route_of(req: dict) -> str | None:
    for method, pattern, name in ROUTES:
        if req["method"] == method and pattern.match(req["path"]):
            return name
    return None


def judge(req: dict) -> tuple[list[tuple[str, sdk.Rejection]], list[str]]:
    """(SDK rejections, other problems) of one recorded request."""
    problems: list[str] = []
    rejections: list[tuple[str, sdk.Rejection]] = []
    route = route_of(req)
    headers = req.get("headers") or {}
    if route is None:
        problems.append(f"unknown route {req['method']} {req['path']} (not part of the contract)")
        return rejections, problems
    if headers.get("authorization") != f"Bearer {DUMMY_KEY}" and route != "models":
        problems.append(f"authorization header is {headers.get('authorization')!r}")
    if route in ("create", "search"):
        ctype = headers.get("content-type", "")
        if "application/json" not in ctype:
            problems.append(f"content-type {ctype!r}, not application/json")
        body = req.get("body_json")
        if not isinstance(body, dict):
            problems.append(f"body is not a JSON object: {req.get('body', '')[:200]!r}")
            return rejections, problems
        if route == "create":
            rejections += sdk.tolerate_differences(body, sdk.validate_all(sdk.create_params(body), body))
        else:
            rejections += sdk.validate_all((sdk.SEARCH_PARAMS, sdk.SEARCH_CLIENT), body)
            if body.get("search_recency_filter") and (body.get("search_after_date_filter")
                                                      or body.get("search_before_date_filter")):
                rejections.append(("contract §4", sdk.Rejection(
                    "$.search_recency_filter", "recency together with published-date bounds is a 400 upstream",
                    "semantic")))
        if req.get("query"):
            problems.append(f"unexpected query string {req['query']!r}")
    else:
        if req.get("body"):
            problems.append(f"{req['method']} {route} carries a body: {req['body'][:200]!r}")
        if route == "get" and req.get("query"):
            for pair in req["query"].split("&"):
                k, _, v = pair.partition("=")
                if k == "stream" and v == "true":
                    continue
                if k == "starting_after" and re.fullmatch(r"-?\d+", v):
                    continue
                problems.append(f"unexpected query parameter {pair!r}")
        elif req.get("query"):
            problems.append(f"unexpected query string {req['query']!r}")
    return rejections, problems


# --- running it all ---------------------------------------------------------------------------------
class Driver:
    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.fake = FakeUpstream()
        self.tmp = tempfile.mkdtemp(prefix="pplx-contract-")
        self.env = base_env({
            "HOME": self.tmp,
            "XDG_CONFIG_HOME": self.tmp + "/config",
            "PERPLEXITY_API_BASE": self.fake.base_url,
            "PERPLEXITY_API_KEY": DUMMY_KEY,
            "PERPLEXITY_AGENT_WAIT_SECONDS": "4",
            "PERPLEXITY_STORE_PATH": self.tmp + "/store",
            "PERPLEXITY_RATE_PER_MINUTE": "1000000",
            "PERPLEXITY_RATE_BURST": "100000",
            "PERPLEXITY_TOOLS": "all",
            # Each call here must reach the fake: the research cache would answer repeats.
            "PERPLEXITY_CACHE": "off",
            "PERPLEXITY_MAX_OUTPUT_CHARS": "1000",
            "PERPLEXITY_MAX_RETRIES": "1",
            "PERPLEXITY_ALLOWED_CONNECTORS": CONNECTOR_ID,
        })
        self.scenario: dict | None = None
        self.seen = 0
        self.outcomes: list[Outcome] = []
        self.refusals: list[tuple[str, str, str]] = []

    def use(self, scenario: dict) -> None:
        if scenario != self.scenario:
            self.fake.set_scenario(scenario)
            self.scenario = scenario

    def new_requests(self, settle: float = 0.0) -> list[dict]:
        if settle:
            time.sleep(settle)
        reqs = self.fake.requests()
        new = reqs[self.seen:]
        self.seen = len(reqs)
        return new

    def run_mcp(self, calls_of: Callable[[dict[str, dict], dict], list[Call]], mcp: McpStdio,
                tools: dict[str, dict], ctx: dict, counter: Counter) -> None:
        for call in calls_of(tools, ctx):
            counter[call.tool] += 1
            name = f"{call.tool}#{counter[call.tool]} {call.label}"
            if call.tool not in tools:
                continue
            try:
                args = call.args(ctx) if callable(call.args) else copy.deepcopy(call.args)
            except KeyError as exc:
                self.tally.check(f"call {name}", False, f"needs {exc} from an earlier call, which did not provide it")
                continue
            self.use(call.scenario)
            self.new_requests()
            t0 = time.monotonic()
            try:
                frame = mcp.request("tools/call", {"name": call.tool, "arguments": args}, timeout=60)
            except (TimeoutError, RuntimeError) as exc:
                self.tally.check(f"call {name}", False, f"{exc}; arguments {json.dumps(args)[:300]}")
                continue
            reqs = self.new_requests(settle=0.05)
            result = frame.get("result") or {}
            if "error" in frame:
                state, detail = "refused", f"JSON-RPC error {frame['error'].get('code')}: {frame['error'].get('message')}"
            elif result.get("isError"):
                state = "error" if reqs else "refused"
                detail = _text(result)[:400]
            else:
                state, detail = "ok", ""
            self.outcomes.append(Outcome(f"tools/call {name}", args, reqs, state, detail, time.monotonic() - t0))
            if state == "refused":
                self.refusals.append((name, call.expect, detail))
            if call.save:
                rid = _response_id(result)
                if rid:
                    ctx[call.save] = rid
                    if call.save in ("completed", "rc_started"):
                        self.fake.wait_terminal(rid, timeout=5)
            if call.after:
                call.after(ctx, result)
            self._expectation(f"call {name}", call.expect, state, detail, reqs, args, call.why)

    def _expectation(self, name: str, expect: str, state: str, detail: str, reqs: list, args: Any, why: str) -> None:
        argtext = json.dumps(args)[:400]
        if expect == "ok":
            self.tally.check(name, state == "ok",
                             f"believed valid ({why or 'contract'}) but {'refused by the product' if state == 'refused' else 'answered an error'}: "
                             f"{detail}\narguments: {argtext}")
        elif expect == "reached":
            self.tally.check(name, bool(reqs), f"nothing reached the fake ({state}: {detail})\narguments: {argtext}")
        elif expect == "refused":
            self.tally.check(name, state == "refused", f"expected a local refusal ({why}), got {state}\narguments: {argtext}")
        else:
            self.tally.check(name, True)

    def run_cli(self, runs: list[CliRun], ctx: dict) -> None:
        for run in runs:
            if run.argv[0] == "__unknown_commands__":
                if len(run.argv) > 1:
                    print(f"note: CLI commands not exercised by the contract suite: {', '.join(run.argv[1:])}")
                continue
            argv = [a.format(**ctx) if "{" in a else a for a in run.argv]
            if any("{" in a for a in argv):
                self.tally.check(f"cli {run.label}", False, "needs an id from an earlier command")
                continue
            self.use(run.scenario)
            self.new_requests()
            t0 = time.monotonic()
            try:
                proc = subprocess.run([our_binary(), *argv], env=self.env, stdin=subprocess.DEVNULL,
                                      capture_output=True, timeout=60)
            except subprocess.TimeoutExpired:
                self.tally.check(f"cli {run.label}", False, "timed out")
                continue
            reqs = self.new_requests(settle=0.05)
            out = proc.stdout.decode(errors="replace")
            err = proc.stderr.decode(errors="replace")
            state = "ok" if proc.returncode in run.ok_codes else "error"
            self.outcomes.append(Outcome(f"cli perplexity-agent {' '.join(argv)}"[:160], argv, reqs, state,
                                         (err or out)[:300], time.monotonic() - t0))
            if run.save:
                m = re.search(r"resp_[A-Za-z0-9]{8,}", out + err)
                if m:
                    ctx[run.save] = m.group(0)
            ok = proc.returncode in run.ok_codes and (bool(reqs) or run.expect == "any")
            self.tally.check(f"cli {run.label}", ok,
                             f"exit {proc.returncode} (want {run.ok_codes}), {len(reqs)} request(s) reached the fake"
                             f"\n{(err or out).strip()[:300]}")

    def stop(self) -> None:
        self.fake.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def run(tally: Tally) -> dict:
    drv = Driver(tally)
    summary: dict = {}
    mcp = None
    try:
        mcp = McpStdio(drv.env)
        init = mcp.init.get("result", {})
        tally.check("mcp initialize (2025-11-25)", init.get("protocolVersion") == "2025-11-25",
                    json.dumps(mcp.init)[:300])
        listed = mcp.request("tools/list", {}).get("result", {}).get("tools", [])
        tools = {t["name"]: t for t in listed}
        tally.check("tools/list", bool(tools), "no tools listed")
        print(f"tools: {', '.join(tools)}")
        ctx: dict = {}
        counter: Counter = Counter()
        drv.run_mcp(lambda t, c: spread(t), mcp, tools, ctx, counter)
        # every listed tool must have been called by the spread
        for name in tools:
            tally.check(f"spread covers {name}", counter[name] > 0,
                        "the hand-made spread has no call for this tool: add one to product_bodies.spread")
        drv.run_mcp(derived, mcp, tools, ctx, counter)
        mcp.close()
        mcp = None
        help_text = subprocess.run([our_binary(), "--help"], capture_output=True, env=drv.env).stdout.decode()
        drv.run_cli(cli_runs(help_text), ctx)
        summary = report(drv, tally)
    finally:
        if mcp is not None:
            mcp.close()
        drv.stop()
    return summary


def _norm(path: str) -> str:
    return re.sub(r"\[\d+\]", "[*]", path)


def report(drv: Driver, tally: Tally) -> dict:
    distinct: dict[tuple, list[str]] = defaultdict(list)
    counts = Counter()
    for o in drv.outcomes:
        for i, req in enumerate(o.requests):
            route = route_of(req) or "unknown"
            counts[route] += 1
            rejections, problems = judge(req)
            name = f"request {req['method']} {req['path']} <- {o.name}" + (f" [{i + 1}]" if len(o.requests) > 1 else "")
            if not rejections and not problems:
                tally.check(name, True)
                continue
            lines = [f"  {p}" for p in problems] + [f"  [{layer}] {r.path}: {r.msg}" for layer, r in rejections[:10]]
            if len(rejections) > 10:
                lines.append(f"  ... and {len(rejections) - 10} more")
            why = (f"{len(rejections)} SDK rejection(s), {len(problems)} other problem(s)\n"
                   f"arguments: {json.dumps(o.args)[:400]}\nbody: {req.get('body', '')[:600]}\n" + "\n".join(lines))
            tally.check(name, False, why)
            for layer, r in rejections:
                distinct[(layer, _norm(r.path), r.msg)].append(o.name)
            for p in problems:
                distinct[("request", "", p)].append(o.name)
    # The same bodies through the Node SDK's types.
    batch = node_sdk.Batch()
    for o in drv.outcomes:
        for i, req in enumerate(o.requests):
            route = route_of(req)
            if route in ("create", "search") and isinstance(req.get("body_json"), dict):
                batch.add(route, req["body_json"], f"request {req['method']} {req['path']} <- {o.name}"
                          + (f" [{i + 1}]" if len(o.requests) > 1 else ""))
    batch.report(tally, "request bodies")
    for d in sdk.REQUEST_DIFFERENCES:
        tally.check(f"request difference used: {d.key}", d.used > 0,
                    "stale: no recorded body needed it (remove it, or the spread lost the field)")
    refused_expected = sum(1 for _, e, _ in drv.refusals if e in ("refused", "any"))
    print()
    print(f"requests judged: {sum(counts.values())} ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    print(f"calls refused by the product itself: {len(drv.refusals)} "
          f"({refused_expected} expected, {len(drv.refusals) - refused_expected} believed valid)")
    for name, expect, detail in drv.refusals:
        print(f"  refused: {name} (expected: {expect}): {' '.join(detail.split())[:160]}")
    slow = sorted(drv.outcomes, key=lambda o: -o.seconds)[:3]
    print("slowest calls: " + "; ".join(f"{o.name[:70]} {o.seconds:.1f}s" for o in slow))
    if distinct:
        print("distinct request-contract failures (layer, path, message -> count, first call):")
        for (layer, path, msg), who in sorted(distinct.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"  [{layer}] {path}: {msg}  -> {len(who)}x, e.g. {who[0]}")
    return {"requests": sum(counts.values()), "distinct": distinct, "refusals": drv.refusals}
