"""Part 2: every answer and stream event the fake can produce, judged against the SDK's
response models; and the copied official-shaped fixtures.

The fake is driven directly over HTTP (and through the official client
`perplexity.Perplexity(base_url=<fake>)`) for a matrix of scenarios: create answers, GETs at
several moments (queued, in progress, terminal), every SSE frame of create streams and of
resumed streams, cancel answers, search answers, the model list. Rejections the suite
tolerates on purpose are in sdk.ALLOWANCES (the one table), each with its reason.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

import node_sdk
import sdk
from common import DUMMY_KEY, FIXTURES, ControlError, FakeUpstream, Tally

BASE = {"duration_ms": 200, "queued_ms": 30, "cancel_delay_ms": 100}
SOURCES5 = [{"title": f"Source {i}", "url": f"https://s{i}.example/page"} for i in range(1, 6)]
FINANCE = [{"symbol": "AAPL", "price": 190.12, "currency": "USD", "as_of": "2026-07-30T20:00:00Z"}]
FUNCTION_CALLS = [{"name": "lookup_weather", "arguments": {"city": "Paris"}},
                  {"name": "lookup_time", "arguments": "{\"tz\":\"CET\"}", "call_id": "call_custom_2"}]
FUNCTION_TOOLS = [{"type": "function", "name": "lookup_weather"}, {"type": "function", "name": "lookup_time"}]
OFFICIAL_EXTRA_ITEMS = [  # from fixture 07, the items the SDK's output union has
    {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "docs",
     "tools": [{"name": "search_docs", "input_schema": {"type": "object"}}]},
    {"type": "mcp_call", "id": "mcpc_1", "server_label": "docs", "name": "search_docs",
     "arguments": "{\"q\":\"x\"}", "output": "[]", "error": None},
    {"type": "sandbox_results", "call_id": "sb_1", "language": "python", "code": "print(2+2)", "status": "completed",
     "results": [{"status": "completed", "stdout": "4\n", "stderr": "", "exit_code": 0, "duration_ms": 41}]},
    {"type": "skill_loaded", "name": "office/xlsx"},
    {"type": "unknown", "item_name": "advisor_note", "payload": {"anything": True}},
]

# (name, scenario on top of BASE, extra create-body fields, new option?)
# Names starting with "legacy " are the deliberately off-contract options: the SDK must
# reject something in them (see sdk.ALLOWANCES).
MATRIX: list[tuple[str, dict, dict, bool]] = [
    ("default", {}, {}, False),
    ("sources with custom numeric ids", {"sources": [
        {"title": "Alpha", "url": "https://alpha.example/", "id": 7},
        {"title": "Beta", "url": "https://beta.example/", "id": 3},
        {"title": "Gamma", "url": "https://gamma.example/"}]}, {}, False),
    ("3 search batches, 2 fetch pages", {"sources": SOURCES5, "search_batches": 3, "fetch_pages": 2}, {}, False),
    ("no search, no fetch", {"search_batches": 0, "fetch_pages": 0}, {}, False),
    ("answer parts", {"answer_parts": ["Part one. ", "Part two [1]."]}, {}, False),
    ("failed", {"final_status": "failed", "error_message": "upstream model error"}, {}, False),
    ("incomplete", {"final_status": "incomplete"}, {}, False),
    ("function calls", {"function_calls": FUNCTION_CALLS}, {"tools": FUNCTION_TOOLS}, False),
    ("function calls, requires_action", {"function_calls": FUNCTION_CALLS, "function_call_status": "requires_action"},
     {"tools": FUNCTION_TOOLS}, False),
    ("finance results", {"finance_results": FINANCE}, {"tools": [{"type": "finance_search"}]}, False),
    ("legacy stream_terminal_full false", {"stream_terminal_full": False}, {}, False),
    ("sse_event_lines false", {"sse_event_lines": False}, {}, True),
    ("sse_event_lines true", {"sse_event_lines": True}, {}, True),
    ("running_output empty", {"running_output": "empty"}, {}, True),
    ("running_output progressive", {"running_output": "progressive"}, {}, True),
    ("failed_event_response false", {"final_status": "failed", "failed_event_response": False}, {}, True),
    ("legacy failed_event_response true", {"final_status": "failed", "failed_event_response": True}, {}, True),
    ("finance_item unknown", {"finance_results": FINANCE, "finance_item": "unknown"},
     {"tools": [{"type": "finance_search"}]}, True),
    ("legacy finance_item finance_results", {"finance_results": FINANCE, "finance_item": "finance_results"},
     {"tools": [{"type": "finance_search"}]}, True),
    ("extra_items", {"extra_items": OFFICIAL_EXTRA_ITEMS}, {}, True),
]
TERMINAL_EVENTS = {"response.completed", "response.failed", "response.cancelled", "response.incomplete"}


class Judge:
    """Validation with the allowance table, one check line per answer."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.legacy_rejections: dict[str, int] = {}
        self.frames = 0
        self.answers = 0
        # What the Python SDK accepted, for the Node SDK's types to judge too (deliberately
        # off-contract shapes, tolerated by an allowance, are the Python table's business).
        self.node = node_sdk.Batch()

    def json(self, name: str, adapters: tuple, obj: Any, context: str) -> bool:
        self.answers += 1
        rs = sdk.validate_all(adapters, obj)
        if rs and context.startswith("legacy"):
            self.legacy_rejections[context] = self.legacy_rejections.get(context, 0) + 1
        if not rs:
            kind = node_sdk.ANSWER_KINDS.get(adapters[0].name)
            if kind:
                self.node.add(kind, obj, name)
            return self.tally.check(name, True)
        allowance = sdk.allowed(context, obj, rs)
        if allowance:
            return self.tally.check(f"{name} (allowed: {allowance.key})", True)
        return self.tally.check(name, False, f"{len(rs)} SDK rejection(s)\n{sdk.describe(rs)}\n"
                                             f"answer: {json.dumps(obj)[:500]}")

    def stream(self, name: str, ans: Any, context: str, after: int = -1,
               event_lines: bool | None = None) -> list[dict]:
        """Checks one SSE answer; returns its events."""
        problems: list[str] = []
        if ans.status != 200:
            self.tally.check(name, False, f"HTTP {ans.status}: {ans.text[:300]}")
            return []
        ctype = ans.headers.get("content-type", "")
        if not ctype.startswith("text/event-stream"):
            problems.append(f"content-type {ctype!r}")
        frames, fmt = sdk.parse_sse(ans.text)
        problems += fmt
        events: list[dict] = []
        last_seq = after
        allowed_keys: set[str] = set()
        for i, f in enumerate(frames):
            self.frames += 1
            if f.problem:
                problems.append(f"frame {i}: {f.problem}")
                continue
            ev = f.json
            if not isinstance(ev, dict):
                problems.append(f"frame {i}: data is not a JSON object")
                continue
            events.append(ev)
            if f.event is not None and f.event != ev.get("type"):
                problems.append(f"frame {i}: `event: {f.event}` but type {ev.get('type')!r}")
            if event_lines is True and f.event is None:
                problems.append(f"frame {i}: no `event:` line (sse_event_lines true)")
            if event_lines is False and f.event is not None:
                problems.append(f"frame {i}: an `event:` line (sse_event_lines false)")
            seq = ev.get("sequence_number")
            if isinstance(seq, int):
                if seq <= last_seq:
                    problems.append(f"frame {i}: sequence_number {seq} after {last_seq}")
                last_seq = seq
            rs = sdk.validate_all(sdk.STREAM_CHUNK, ev)
            if not rs:
                self.node.add("chunk", ev, f"{name} frame {i} ({ev.get('type')})")
            if rs and context.startswith("legacy"):
                self.legacy_rejections[context] = self.legacy_rejections.get(context, 0) + 1
            if rs:
                allowance = sdk.allowed(context, ev, rs)
                if allowance:
                    allowed_keys.add(allowance.key)
                    inner = ev.get("response")
                    if isinstance(inner, dict) and allowance.key.startswith("event "):
                        irs = sdk.validate_all(sdk.RETRIEVE, inner)
                        if irs and not sdk.allowed(context, inner, irs):
                            problems.append(f"frame {i} ({ev.get('type')}): its response: {sdk.describe(irs, 4)}")
                else:
                    problems.append(f"frame {i} ({ev.get('type')}, seq {seq}):\n    "
                                    + sdk.describe(rs, 6).replace("\n", "\n    ")
                                    + f"\n    frame: {json.dumps(ev)[:300]}")
        if not events and after < 0:
            problems.append("no events")
        if events and events[-1].get("type") not in TERMINAL_EVENTS:
            problems.append(f"the stream ends with {events[-1].get('type')!r}, not a terminal event")
        label = f"{name} ({len(events)} frames)" + (f" (allowed: {', '.join(sorted(allowed_keys))})" if allowed_keys else "")
        self.tally.check(label, not problems, "\n".join(problems[:12]) + (
            f"\n... {len(problems) - 12} more" if len(problems) > 12 else ""))
        return events


def _create(fake: FakeUpstream, extra: dict, **body: Any) -> Any:
    return fake.http("POST", "/v1/agent", {"input": "What is the tallest building in Europe?", "preset": "fast",
                                           "background": True, **extra, **body})


REFUSED_SCENARIOS: set[str] = set()


def _scenario(tally: Tally, fake: FakeUpstream, name: str, scenario: dict, new: bool) -> bool:
    fake.control("POST", "reset", {})
    ok, text = fake.try_control("POST", "scenario", {**BASE, **scenario})
    if not ok:
        tally.check(f"fake accepts scenario {name}", False,
                    f"the fake refused {json.dumps(scenario)[:200]}: {text[:200]}"
                    + ("\n(a scenario option the fake is being given)" if new else ""))
        REFUSED_SCENARIOS.add(name)
        return False
    return True


def run_matrix(tally: Tally, fake: FakeUpstream, judge: Judge) -> dict:
    seen_status: dict[str, int] = {}
    for name, scenario, extra, new in MATRIX:
        if not _scenario(tally, fake, name, scenario, new):
            continue
        d = BASE["duration_ms"]
        # JSON mode: create, then GETs at three moments
        created = _create(fake, extra)
        t0 = time.monotonic()
        if created.status != 200 or not isinstance(created.json, dict):
            tally.check(f"fake {name}: create (JSON)", False, repr(created))
            continue
        judge.json(f"fake {name}: create (JSON)", sdk.CREATE_RESPONSE, created.json, name)
        rid = created.json.get("id", "")
        moments = [("at once", 0.0), ("at 0.7d", 0.7 * d / 1000)]
        got: list[tuple[str, Any]] = []
        for label, at in moments:
            time.sleep(max(0.0, at - (time.monotonic() - t0)))
            g = fake.http("GET", f"/v1/agent/{rid}")
            got.append((label, g))
        fake.wait_terminal(rid)
        got.append(("terminal", fake.http("GET", f"/v1/agent/{rid}")))
        for label, g in got:
            status = g.json.get("status") if isinstance(g.json, dict) else None
            seen_status[str(status)] = seen_status.get(str(status), 0) + 1
            if g.status != 200:
                tally.check(f"fake {name}: GET {label}", False, repr(g))
                continue
            judge.json(f"fake {name}: GET {label} ({status})", sdk.RETRIEVE, g.json, name)
            if name.startswith("running_output") and label == "at 0.7d" and status == "in_progress":
                out = g.json.get("output")
                want_empty = scenario["running_output"] == "empty"
                tally.check(f"fake {name}: a running run's GET output is {'[]' if want_empty else 'filled'}",
                            (out == []) if want_empty else bool(out), f"output: {json.dumps(out)[:300]}")
        # stream mode: create stream, then resume after event 1
        event_lines = scenario.get("sse_event_lines")
        stream = _create(fake, extra, stream=True)
        events = judge.stream(f"fake {name}: create stream", stream, name, event_lines=event_lines)
        sid = next((e.get("response", {}).get("id") for e in events if isinstance(e.get("response"), dict)
                    and e.get("response", {}).get("id")), None)
        if sid:
            fake.wait_terminal(sid)
            resumed = fake.http("GET", f"/v1/agent/{sid}?stream=true&starting_after=1")
            judge.stream(f"fake {name}: resumed stream starting_after=1", resumed, name, after=1,
                         event_lines=event_lines)
            if name == "default":
                full = fake.http("GET", f"/v1/agent/{sid}?stream=true")
                judge.stream(f"fake {name}: resumed stream from the start", full, name, event_lines=event_lines)
        elif events:
            tally.check(f"fake {name}: the stream names its run", False, "no response.id in any event")
    return seen_status


def run_cancel(tally: Tally, fake: FakeUpstream, judge: Judge) -> None:
    if not _scenario(tally, fake, "cancel", {"duration_ms": 3000, "cancel_delay_ms": 150}, False):
        return
    created = _create(fake, {})
    rid = created.json.get("id", "") if isinstance(created.json, dict) else ""
    # a live stream of another run, to see its response.cancelled
    live: dict = {}
    streamed = _create(fake, {}, stream=False)  # JSON create of a second run, then follow it live
    sid = streamed.json.get("id", "") if isinstance(streamed.json, dict) else ""

    def follow() -> None:
        live["ans"] = fake.http("GET", f"/v1/agent/{sid}?stream=true&starting_after=0", timeout=20)

    th = threading.Thread(target=follow)
    th.start()
    time.sleep(0.1)
    for run_id, label in ((rid, "first run"), (sid, "followed run")):
        c = fake.http("POST", f"/v1/agent/{run_id}/cancel")
        if c.status != 200:
            tally.check(f"fake cancel {label}: 200", False, repr(c))
            continue
        judge.json(f"fake cancel {label}: answer", sdk.CANCEL, c.json, "cancel")
        if isinstance(c.json, dict):
            tally.check(f"fake cancel {label}: answer names the run", c.json.get("response_id") == run_id,
                        f"answer {c.json}")
    g = fake.http("GET", f"/v1/agent/{rid}")
    judge.json(f"fake cancel: GET right after the cancel ({(g.json or {}).get('status')})", sdk.RETRIEVE, g.json,
               "cancel")
    fake.wait_terminal(rid)
    g = fake.http("GET", f"/v1/agent/{rid}")
    judge.json(f"fake cancel: GET when cancelled ({(g.json or {}).get('status')})", sdk.RETRIEVE, g.json, "cancel")
    th.join(timeout=20)
    if "ans" in live:
        judge.stream("fake cancel: live stream of a cancelled run", live["ans"], "cancel", after=0)
    resumed = fake.http("GET", f"/v1/agent/{rid}?stream=true&starting_after=0")
    judge.stream("fake cancel: resumed stream of a cancelled run", resumed, "cancel", after=0)
    again = fake.http("POST", f"/v1/agent/{rid}/cancel")
    tally.check("fake cancel of a terminal run: 400", again.status == 400, repr(again))
    _error_envelope(tally, "fake cancel of a terminal run: error body", again)
    unknown = fake.http("POST", "/v1/agent/resp_doesnotexist0000000000/cancel")
    tally.check("fake cancel of an unknown id: 404 (contract §3)", unknown.status == 404, repr(unknown))
    _error_envelope(tally, "fake cancel of an unknown id: error body", unknown)
    nf = fake.http("GET", "/v1/agent/resp_doesnotexist0000000000")
    tally.check("fake GET of an unknown id: 404", nf.status == 404, repr(nf))
    _error_envelope(tally, "fake GET of an unknown id: error body", nf)


def _error_envelope(tally: Tally, name: str, ans: Any) -> None:
    """Error bodies are not typed by the SDK (it keeps them as `body`); the documented
    envelope is {"error": {"message": str, "type"?: str, "code"?: ...}}."""
    body = ans.json
    ok = isinstance(body, dict) and isinstance(body.get("error"), dict) and isinstance(body["error"].get("message"), str)
    tally.check(name, ok, f"not the documented error envelope: {ans.text[:200]}")


def run_search(tally: Tally, fake: FakeUpstream, judge: Judge) -> None:
    fake.control("POST", "reset", {})
    for label, body in [("one query", {"query": "tallest building"}),
                        ("list of queries, max_results 2", {"query": ["a", "b"], "max_results": 2})]:
        a = fake.http("POST", "/search", body)
        if a.status != 200:
            tally.check(f"fake search {label}", False, repr(a))
            continue
        judge.json(f"fake search {label}", sdk.SEARCH_RESPONSE, a.json, "search")
    fake.set_scenario({"search_results": [{"title": "T", "url": "https://t.example/", "snippet": "", "date": None,
                                           "last_updated": None}]})
    a = fake.http("POST", "/search", {"query": "q"})
    judge.json("fake search with scenario results (empty snippet, null dates)", sdk.SEARCH_RESPONSE, a.json, "search")
    bad = fake.http("POST", "/search", {"query": "q", "max_results": -1})
    tally.check("fake search 422 has the FastAPI detail shape", bad.status == 422 and isinstance(bad.json, dict)
                and isinstance(bad.json.get("detail"), list), repr(bad))


def run_models(tally: Tally, fake: FakeUpstream, judge: Judge) -> None:
    a = fake.http("GET", "/v1/models", auth=False)
    if a.status != 200:
        tally.check("fake GET /v1/models (no authentication)", False, repr(a))
        return
    judge.json("fake GET /v1/models", sdk.MODEL_LIST, a.json, "models")
    ids = [m.get("id") for m in (a.json or {}).get("data", []) if isinstance(m, dict)]
    tally.check("fake model ids are provider/model slugs", bool(ids) and all(isinstance(i, str) and "/" in i for i in ids),
                f"ids: {ids}")


def run_faults(tally: Tally, fake: FakeUpstream, judge: Judge) -> None:
    fake.control("POST", "reset", {})
    ok, text = fake.try_control("POST", "faults", {"kind": "rate_limit", "route": "create"})
    if not ok:
        tally.check("fake accepts fault kind rate_limit", False, f"{text[:200]}\n(a fault kind the fake is being given)")
        return
    a = _create(fake, {})
    tally.check("fake rate_limit: 429", a.status == 429, repr(a))
    limits = [h for h in a.headers if h.startswith("x-ratelimit-")]
    tally.check("fake rate_limit: X-RateLimit-* headers", bool(limits), f"headers: {sorted(a.headers)}")
    if a.text.strip():
        _error_envelope(tally, "fake rate_limit: error body", a)


def run_strict_fields(tally: Tally, fake: FakeUpstream) -> None:
    fake.control("POST", "reset", {})
    ok, text = fake.try_control("POST", "scenario", {**BASE, "strict_fields": True})
    if not ok:
        tally.check("fake accepts scenario strict_fields", False, f"{text[:200]}\n(a scenario option the fake is being given)")
        return
    bad = fake.http("POST", "/v1/agent", {"input": [{"type": "message", "role": "user", "content": [
        {"type": "input_image", "image_url": "https://a/x.png", "detail": "auto"}]}], "preset": "fast"})
    tally.check("fake strict_fields: an unknown nested field is a 400 naming it",
                bad.status == 400 and "detail" in bad.text, repr(bad))
    good = fake.http("POST", "/v1/agent", {"input": "q", "preset": "fast", "background": True,
                                           "tools": [{"type": "web_search", "filters": {"search_recency_filter": "week"}}]})
    tally.check("fake strict_fields: an official body is accepted", good.status == 200, repr(good))


def run_sdk_client(tally: Tally, fake: FakeUpstream, judge: Judge) -> None:
    """The official client against the fake: its paths (/v1/responses, an alias of
    /v1/agent), its SSE reader, its error mapping."""
    import perplexity

    fake.control("POST", "reset", {})
    fake.set_scenario({**BASE})
    client = perplexity.Perplexity(api_key=DUMMY_KEY, base_url=fake.base_url, max_retries=0, timeout=20)

    def attempt(name: str, fn) -> Any:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - any SDK error is this check's failure
            tally.check(name, False, f"{type(exc).__name__}: {str(exc)[:300]}")
            return None

    raw = attempt("sdk client responses.create", lambda: client.responses.with_raw_response.create(
        input="What is the tallest building in Europe?", preset="fast", background=True))
    rid = None
    if raw is not None:
        body = raw.http_response.json()
        judge.json("sdk client responses.create (raw JSON)", sdk.CREATE_RESPONSE, body, "sdk")
        rid = body.get("id")
        parsed = attempt("sdk client responses.create parses", raw.parse)
        if parsed is not None:
            tally.check("sdk client responses.create parses", getattr(parsed, "id", None) == rid, repr(parsed)[:200])
    if rid:
        fake.wait_terminal(rid)
        raw = attempt("sdk client responses.retrieve", lambda: client.responses.with_raw_response.retrieve(rid))
        if raw is not None:
            judge.json("sdk client responses.retrieve (raw JSON)", sdk.RETRIEVE, raw.http_response.json(), "sdk")
        st = attempt("sdk client responses.retrieve(stream=True, starting_after=0)",
                     lambda: list(client.responses.retrieve(rid, stream=True, starting_after=0)))
        if st is not None:
            tally.check(f"sdk client resumed stream yields events ({len(st)})",
                        bool(st) and all(getattr(e, "type", None) for e in st), repr(st)[:300])
    # streaming create, through the SDK's own SSE reader
    events = attempt("sdk client responses.create(stream=True)", lambda: list(client.responses.create(
        input="What is the tallest building in Europe?", preset="fast", stream=True)))
    if events is not None:
        types = [getattr(e, "type", None) for e in events]
        tally.check(f"sdk client stream yields typed events ({len(events)})",
                    bool(types) and all(types) and types[-1] in TERMINAL_EVENTS, f"types: {types}")
        for e in events:
            judge.json(f"sdk client stream event {getattr(e, 'type', '?')} #{getattr(e, 'sequence_number', '?')}",
                       sdk.STREAM_CHUNK, e.to_dict() if hasattr(e, "to_dict") else e, "sdk")
    # cancel
    fake.set_scenario({"duration_ms": 3000})
    raw = attempt("sdk client create for cancel", lambda: client.responses.with_raw_response.create(
        input="q", preset="fast", background=True))
    if raw is not None:
        cid = raw.http_response.json().get("id")
        c = attempt("sdk client responses.cancel", lambda: client.responses.with_raw_response.cancel(cid))
        if c is not None:
            judge.json("sdk client responses.cancel (raw JSON)", sdk.CANCEL, c.http_response.json(), "sdk")
    # errors map to the SDK's exception classes
    def raises(name: str, call: Callable[[], Any], expected: type[BaseException]) -> None:
        try:
            call()
            tally.check(name, False, "no exception")
        except expected:
            tally.check(name, True)
        except Exception as exc:  # noqa: BLE001
            tally.check(name, False, f"{type(exc).__name__}: {exc}")

    raises("sdk client: unknown id is NotFoundError",
           lambda: client.responses.retrieve("resp_doesnotexist0000000000"), perplexity.NotFoundError)
    raises("sdk client: cancel of an unknown id is NotFoundError",
           lambda: client.responses.cancel("resp_doesnotexist0000000000"), perplexity.NotFoundError)
    ok, _ = fake.try_control("POST", "faults", {"kind": "rate_limit", "route": "create"})
    if ok:
        raises("sdk client: rate_limit is RateLimitError",
               lambda: client.responses.create(input="q", preset="fast", background=True),
               perplexity.RateLimitError)
    # search and models
    raw = attempt("sdk client search.create", lambda: client.search.with_raw_response.create(query="tallest building"))
    if raw is not None:
        judge.json("sdk client search.create (raw JSON)", sdk.SEARCH_RESPONSE, raw.http_response.json(), "sdk")
    if hasattr(client, "models"):
        raw = attempt("sdk client models.list", lambda: client.models.with_raw_response.list())
        if raw is not None:
            judge.json("sdk client models.list (raw JSON)", sdk.MODEL_LIST, raw.http_response.json(), "sdk")
    client.close()


def run_fixtures(tally: Tally, judge: Judge) -> None:
    index = json.loads((FIXTURES / "index.json").read_text())
    adapters = {"/v1/agent": sdk.CREATE_RESPONSE, "/v1/agent/{id}": sdk.RETRIEVE,
                "/v1/agent/{id}/cancel": sdk.CANCEL, "/search": sdk.SEARCH_RESPONSE}
    for entry in index:
        f = entry["file"]
        text = (FIXTURES / f).read_text()
        if f.endswith(".txt"):
            after = -1
            if "starting_after=" in entry["path"]:
                after = int(entry["path"].rsplit("=", 1)[1])

            class Ans:  # the fixture as an HTTP answer
                status = 200
                headers = {"content-type": entry["content_type"]}

            Ans.text = text
            judge.stream(f"fixture {f}", Ans, f"fixture {f}", after=after,
                         event_lines=None)
            continue
        body = json.loads(text)
        if entry["status"] != 200:
            if "detail" in body:
                tally.check(f"fixture {f} (FastAPI 422 shape)", isinstance(body["detail"], list), text[:200])
            else:
                class E:
                    json = body
                    text = ""
                _error_envelope(tally, f"fixture {f} (error envelope)", E)
            continue
        judge.json(f"fixture {f}", adapters[entry["path"]], body, f"fixture {f}")


def run(tally: Tally) -> None:
    judge = Judge(tally)
    run_fixtures(tally, judge)
    fake = FakeUpstream()
    try:
        seen = run_matrix(tally, fake, judge)
        for status in ("queued", "in_progress", "completed", "failed"):
            tally.check(f"fake GETs covered status {status}", seen.get(status, 0) > 0, f"statuses seen: {seen}")
        run_cancel(tally, fake, judge)
        run_search(tally, fake, judge)
        run_models(tally, fake, judge)
        run_faults(tally, fake, judge)
        run_strict_fields(tally, fake)
        run_sdk_client(tally, fake, judge)
    except ControlError as exc:
        tally.check("fake control endpoints", False, str(exc))
    finally:
        fake.stop()
    judge.node.report(tally, "answers")
    for name, _, _, _ in MATRIX:
        if name.startswith("legacy") and name not in REFUSED_SCENARIOS:
            n = judge.legacy_rejections.get(name, 0)
            tally.check(f"the SDK rejects {name} (the check bites)", n > 0,
                        "no SDK rejection seen for a deliberately off-contract option")
    for a in sdk.ALLOWANCES:
        if a.scenario in REFUSED_SCENARIOS:
            print(f"note: allowance {a.key!r} not exercised: the fake refused scenario {a.scenario!r}")
            continue
        tally.check(f"allowance used: {a.key}", a.used > 0,
                    "stale allowance: nothing needed it in this run (remove it, or the shape it covers is gone)")
    print(f"fake answers judged: {judge.answers} JSON bodies, {judge.frames} SSE frames")
