"""Part 3: the suite can fail. Known-bad shapes must be rejected by the strict adapters."""

from __future__ import annotations

import json

import sdk
from common import Tally

DETAIL_BODY = {"input": [{"type": "message", "role": "user", "content": [
    {"type": "input_image", "image_url": "https://a/x.png", "detail": "auto"}]}], "preset": "fast"}
GOOD_BODY = {"input": [{"type": "message", "role": "user", "content": [
    {"type": "input_text", "text": "What is this?"}, {"type": "input_image", "image_url": "https://a/x.png"}]}],
    "preset": "fast", "tools": [{"type": "web_search", "filters": {"search_recency_filter": "week"}}],
    "reasoning": {"effort": "minimal"}, "max_steps": 100}
FAKE_LIKE = {"id": "resp_abc", "object": "response", "created_at": 1785100000, "model": "fake/model",
             "status": "completed", "output": [
                 {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                  "content": [{"type": "output_text", "text": "Hi.", "annotations": []}]}]}


def _names(rejections: list) -> str:
    return "; ".join(f"[{layer}] {r}" for layer, r in rejections) or "accepted"


def expect_rejected(tally: Tally, name: str, adapters: tuple, value: object, must_name: str) -> None:
    rs = sdk.validate_all(adapters, value)
    per_layer = {a.name: [r for layer, r in rs if layer == a.name] for a in adapters}
    ok = all(any(must_name in (r.path + " " + r.msg) for r in per_layer[a.name]) for a in adapters)
    tally.check(f"selftest rejects {name}", ok, f"every layer must reject it naming {must_name!r}: {_names(rs)}")


def expect_accepted(tally: Tally, name: str, adapters: tuple, value: object) -> None:
    rs = sdk.validate_all(adapters, value)
    tally.check(f"selftest accepts {name}", not rs, _names(rs))


def run(tally: Tally) -> None:
    create = sdk.create_params(DETAIL_BODY)
    expect_rejected(tally, "input_image.detail (unknown nested field)", create, DETAIL_BODY, "detail")
    rs = sdk.validate_all(create, DETAIL_BODY)
    tally.check("selftest names the JSON path of detail",
                any(r.path == "$.input[0].content[0].detail" for _, r in rs), _names(rs))
    two = {"input": [{"type": "message", "role": "user", "content": [
        {"type": "input_image", "image_url": "https://a/x.png", "detail": "auto"},
        {"type": "input_text", "text": "and"},
        {"type": "input_image", "image_url": "https://a/y.png", "detail": "low"}]}], "stream": True}
    rs = sdk.validate_all(sdk.create_params(two), two)
    want = {"$.input[0].content[0].detail", "$.input[0].content[2].detail"}
    for a in sdk.create_params(two):
        got = {r.path for layer, r in rs if layer == a.name}
        tally.check(f"selftest {a.name} reports every failing element of a list", got == want, _names(rs))
    expect_accepted(tally, "an official-shaped create body", sdk.create_params(GOOD_BODY), GOOD_BODY)
    stream_body = {**GOOD_BODY, "stream": True}
    expect_accepted(tally, "the same body with stream: true", sdk.create_params(stream_body), stream_body)
    for body, what, must in [
        ({"input": "q", "tools": [{"type": "web_search", "filters": {"search_language_filter": ["en"]}}]},
         "web_search.filters.search_language_filter", "search_language_filter"),
        ({"input": "q", "response_format": {"type": "text"}}, "response_format.type text", "response_format"),
        ({"input": "q", "reasoning": {"effort": "max"}}, "reasoning.effort max", "effort"),
        ({"input": "q", "bogus": 1}, "an unknown top-level field", "bogus"),
        ({"preset": "fast"}, "a body without input", "input"),
    ]:
        expect_rejected(tally, what, sdk.create_params(body), body, must)
    search = (sdk.SEARCH_PARAMS, sdk.SEARCH_CLIENT)
    expect_rejected(tally, "search body with queries (the field is query)", search, {"queries": ["a"]}, "quer")
    expect_accepted(tally, "a search body", search, {"query": ["a", "b"], "max_results": 5,
                                                      "search_domain_filter": ["example.org"]})

    expect_accepted(tally, "a fake-like response", sdk.RETRIEVE, FAKE_LIKE)
    no_created = {k: v for k, v in FAKE_LIKE.items() if k != "created_at"}
    expect_rejected(tally, "a response without created_at", sdk.RETRIEVE, no_created, "created_at")
    failed_no_error = {"type": "response.failed", "sequence_number": 7,
                       "response": {**FAKE_LIKE, "status": "failed"}}
    expect_rejected(tally, "response.failed without error", sdk.STREAM_CHUNK, failed_no_error, "error")
    expect_accepted(tally, "response.failed with error", sdk.STREAM_CHUNK,
                    {"type": "response.failed", "sequence_number": 7, "error": {"message": "boom", "code": "500"}})
    expect_rejected(tally, "a search result without id", sdk.RETRIEVE,
                    {**FAKE_LIKE, "output": [{"type": "search_results", "results": [
                        {"url": "https://a", "title": "A", "snippet": "s"}]}]}, "id")
    expect_rejected(tally, "cancel answered {id, object, status}", sdk.CANCEL,
                    {"id": "resp_abc", "object": "response", "status": "cancelling"}, "response_id")

    frames, problems = sdk.parse_sse("event: response.created\ndata: {\"a\":\n\ndata: {\"type\":\"x\"}\n\n")
    tally.check("selftest SSE parser flags non-JSON data", any(f.problem for f in frames) and len(frames) == 2,
                json.dumps([f.__dict__ for f in frames], default=str))
    run_judge(tally)
    run_node(tally)


def run_judge(tally: Tally) -> None:
    """The product part's judge itself bites: recorded requests that must fail."""
    import product_bodies as pb

    hdr = {"authorization": "Bearer pplx-contract-dummy", "content-type": "application/json"}
    cases = [
        ("a create body with input_image.detail", {"method": "POST", "path": "/v1/agent", "query": None,
                                                   "headers": hdr, "body": json.dumps(DETAIL_BODY),
                                                   "body_json": DETAIL_BODY}, "detail"),
        ("an unknown route", {"method": "POST", "path": "/v1/responses/x/files", "query": None, "headers": hdr,
                              "body": "", "body_json": None}, "unknown route"),
        ("a GET with a body", {"method": "GET", "path": "/v1/agent/resp_x", "query": None, "headers": hdr,
                               "body": "{}", "body_json": {}}, "carries a body"),
        ("a GET with an unknown query parameter", {"method": "GET", "path": "/v1/agent/resp_x",
                                                   "query": "stream=true&format=short", "headers": hdr,
                                                   "body": "", "body_json": None}, "format"),
        ("a search body with recency and dates", {"method": "POST", "path": "/search", "query": None,
                                                  "headers": hdr, "body": "",
                                                  "body_json": {"query": "q", "search_recency_filter": "week",
                                                                "search_after_date_filter": "1/1/2025"}}, "recency"),
        ("a create without the dummy key", {"method": "POST", "path": "/v1/agent", "query": None,
                                            "headers": {"content-type": "application/json"}, "body": "",
                                            "body_json": {"input": "q"}}, "authorization"),
    ]
    for what, req, must in cases:
        rejections, problems = pb.judge(req)
        text = " ".join(problems) + " " + " ".join(f"{r.path} {r.msg}" for _, r in rejections)
        tally.check(f"selftest judge flags {what}", must in text, text or "nothing flagged")
    ok_req = {"method": "POST", "path": "/v1/agent", "query": None, "headers": hdr, "body": "",
              "body_json": GOOD_BODY}
    rejections, problems = pb.judge(ok_req)
    tally.check("selftest judge passes an official create body", not rejections and not problems,
                f"{problems} {[str(r) for _, r in rejections]}")


def run_node(tally: Tally) -> None:
    """The Node SDK's checker bites: planted fields and wrong types fail, good shapes pass,
    and each verdict lands on its own entry."""
    import node_sdk
    why = node_sdk.problem()
    if why:
        tally.check("selftest node SDK installed", False, why)
        return
    with_new_fields = {**GOOD_BODY, "temperature": 0.2, "top_p": 0.9,
                       "profile": {"type": "custom", "id": "p", "version": "1"},
                       "tools": [{"type": "connector", "id": "c", "server_label": "drive"}]}
    cases = [
        ("accepts an official create body", "create", GOOD_BODY, None),
        ("accepts temperature, top_p, profile and a connector", "create", with_new_fields, None),
        ("rejects a planted top-level field", "create", {**GOOD_BODY, "planted": 1}, "planted"),
        ("rejects input_image.detail", "create", DETAIL_BODY, "detail"),
        ("rejects a planted connector field", "create",
         {"input": "q", "tools": [{"type": "connector", "id": "c", "server_label": "d", "server_url": "https://x"}]},
         "server_url"),
        ("rejects profile.type other than custom", "create",
         {"input": "q", "profile": {"type": "saved", "id": "p"}}, "saved"),
        ("accepts a search body", "search", {"query": "q", "max_results": 3}, None),
        ("rejects a planted search field", "search", {"query": "q", "planted": True}, "planted"),
        ("accepts a fake-like answer", "retrieve", FAKE_LIKE, None),
        ("rejects an answer with a string created_at", "retrieve", {**FAKE_LIKE, "created_at": "soon"}, "created_at"),
        ("rejects an answer without its id", "retrieve", {k: v for k, v in FAKE_LIKE.items() if k != "id"}, "id"),
        ("accepts an answer with a field the SDK lacks", "retrieve", {**FAKE_LIKE, "new_field": 1}, None),
    ]
    batch = node_sdk.Batch()
    for _, kind, body, _ in cases:
        batch.add(kind, body, "")
    results, unplaced = batch.judge()
    for (what, _, _, must), errors in zip(cases, results):
        text = " ".join(errors)
        ok = (not errors) if must is None else (must in text)
        tally.check(f"selftest node SDK {what}", ok, text or "nothing flagged")
    tally.check("selftest node SDK places every diagnostic", not unplaced, " ".join(unplaced))
