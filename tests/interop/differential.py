"""Differential test: the SAME raw JSON-RPC lines through our server
(PERPLEXITY_TOOLS=lifecycle) and through the peer zalez/perplexity-agent-mcp 0.4.0, each
against its own fresh loopback fake upstream with the same scenario, then compare the
frames (and the non-GET upstream requests).

Usage: python differential.py [-k SUBSTRING ...] [-v]
  -k  run only cases whose name contains one of the substrings
  -v  also print the frames of passing cases

Exit status 1 when any difference remains that is not in DOCUMENTED below.

How the peer is reached: it hard-codes API_BASE; peer_launcher.py reassigns that module
attribute in-process (as the peer's own tests do) to the fake's http://127.0.0.1:PORT.

Both servers get PERPLEXITY_AGENT_WAIT_SECONDS=2 (so still-running cases are quick) and
the key `pplx-interop-dummy`; every case closes stdin after its last line and reads
until EOF (both servers answer in-flight requests before exiting at EOF).
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from common import DUMMY_KEY, HERE, FakeUpstream, Tally, base_env, our_binary

W = 2  # PERPLEXITY_AGENT_WAIT_SECONDS for both servers

# =============================================================================
# DOCUMENTED DIFFERENCES (the allowlist)
#
# Two kinds:
#  * NORMALISERS rewrite every frame of BOTH sides before comparison: things that
#    legitimately differ everywhere (identity, randomness, wording the references
#    declare as ours). Each one that actually changed something in a case is named
#    in that case's output as "documented: <id>".
#  * PER-INPUT ALLOWANCES: an input line may be tagged with one allowance id; the
#    difference for that input is accepted only if the frames match the documented
#    shape exactly (checked by the allowance's predicate). Anything else is reported.
#
# References: MP = /work/shared/reference/mcp-protocol.md,
#             AT = /work/shared/reference/agent-tools-behaviour.md,
#             RM = docs/compatibility.md ("Beyond the reference peer").
# =============================================================================

NORMALISERS_DOC = {
    # Identity: name/title/version of serverInfo (legacy initialize result) and of
    # result._meta["io.modelcontextprotocol/serverInfo"] (modern). MP §1 ("relax the
    # version assertion when reusing the peer's tests").
    "serverInfo": "MP §1: serverInfo name/title/version are normalised",
    # Spotlight nonce: 16 random hex chars, fresh per wrapping. AT §11.
    "nonce": "AT §11: spotlight nonce is random",
    # Spotlight preamble wording: AT §11 gives OUR two preamble lines ("Everything
    # below ...") which differ in wording from the peer's ("The content below ...");
    # both must contain UNTRUSTED DATA (checked before normalising).
    "preamble": "AT §11: spotlight preamble wording is ours",
    # Run ids minted by the fake (resp_ + 24 alphanumerics) differ per side.
    "response-id": "response ids differ per fake",
    # Tool/property descriptions and the discover instructions differ in wording only.
    # AT §1 ("Descriptions below are ours; the peer's differ in wording only"), AT §12.
    # Kept: whether the wait_seconds description names the budget and says CLAMPED, and
    # whether the instructions name perplexity_agent_result and perplexity_agent_cancel.
    "descriptions": "AT §1/§12: tool descriptions and instructions wording are ours",
    # Legacy initialize: we add `instructions` and `capabilities.logging`.
    # AT §15.7, MP §1 and §4, RM.
    "initialize-extras": "AT §15.7 / MP §1,§4: instructions + logging capability in legacy initialize",
    # Once a run exists every error text of ours ends with the response_id and what to
    # do (AT §15.1); the peer's does not. Stripped from ours when the peer lacks it.
    "rid-suffix": "AT §15.1, the hostile-input hardening: response_id suffix on errors after a run exists (failed and cancelled runs, failed cancels included)",
    # Network error kinds: the peer prints Python exception names, we print a fixed set.
    # AT §6.5.
    "network-kind": "AT §6.5: network error kind names",
    # Progress: values and timing differ (we learn progress from the event stream,
    # the peer from polls). Compared: which tokens got >= 1 notification. Our frames
    # are additionally checked for strictly increasing `progress`, no `total`, and a
    # counts-only message. AT §9, §15.4.
    "progress": "AT §9/§15.4: progress timing/values",
    # Upstream request patterns: we stream (`stream: true` in the create body, then
    # GET ?stream=true resumes), the peer polls GET. Only non-GET requests are
    # compared, with `stream` removed from our create body. AT §15.4.
    "request-pattern": "AT §15.4: polling vs streaming request patterns",
    # Our schemas bound every string (security-controls.md §1 note: query <= 16,384,
    # preset <= 64, each domain <= 253); the peer's have no maximum. Removed only when
    # the value is exactly ours.
    "bounds": "SC §1: maxLength on query/preset/domains items",
    # We serve resources (the run template), prompts and completions; the peer
    # offers tools only. Removed from our capabilities only when they are empty objects.
    "surfaces": "the Streamable HTTP work: resources/prompts/completions capabilities",
    # Perplexity's official contract (perplexity-api-contract.md §5, RM "Beyond the
    # reference peer"), where the peer shares a contract bug and correctness wins:
    # row 7 — the peer always sends tools:[{"type":"web_search"}], which replaces each
    # preset's tuned search; we send no tools entry unless a filter is given. Removed
    # from the peer's create body only when it is exactly that bare entry.
    "bare-web-search": "contract §5 row 7: no bare web_search tool (the preset keeps its own)",
    # row 6 — the answer's [N] markers cite search_results[].id: we number sources by
    # that id (one line per id, in id order); the peer renumbers 1..k after URL
    # de-duplication. Compared on both sides: the set of distinct source URLs.
    "source-numbers": "contract §5 row 6: sources numbered by search_results id",
    # row 9 — a running GET may show output: [] (partial results arrive only on the
    # stream), so a poll that sees none says "working (…only on the stream)" where the
    # peer says "no intermediate results yet"; ours is mapped onto the peer's words.
    "unseen-progress": "contract §5 row 9: progress of a poll that sees no output",
}


def _err(frames: list, code: int) -> bool:
    return len(frames) == 1 and isinstance(frames[0].get("error"), dict) and frames[0]["error"].get("code") == code


def _text(frames: list) -> str | None:
    if len(frames) != 1:
        return None
    res = frames[0].get("result")
    if not isinstance(res, dict):
        return None
    content = res.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return content[0].get("text")
    return None


def _is_result(frames: list) -> bool:
    return len(frames) == 1 and "result" in frames[0]


@dataclass
class Allowance:
    ref: str
    why: str
    ok: Callable[[list, list], bool]  # (ours_frames, peer_frames) -> the documented shape?
    # True when our documented answer is a -32700 parse error: that frame carries id null,
    # so under the request's id we have no frame at all while the peer answered; the
    # extra id-null -32700 frame is then reconciled under the "null" key.
    parse: bool = False
    # Like `parse`, for another documented answer that carries id null instead of the
    # request's id: that frame, reconciled against the id-null group.
    null_frame: dict | None = None


def _parse_allow(o: list, p: list) -> bool:
    return (o == [] and len(p) == 1) or (o == p)


DOCUMENTED: dict[str, Allowance] = {
    # Our legacy era declares `logging` and answers logging/setLevel with {} (invalid
    # level -> -32602); the peer has no such method (-32601).
    "setlevel": Allowance(
        "MP §1 table, §4 ('Pick one and test it'); RM",
        "legacy logging/setLevel answered ({} or -32602 for a bad level); peer -32601",
        lambda o, p: _err(p, -32601) and (
            (_is_result(o) and o[0]["result"] == {}) or _err(o, -32602)),
    ),
    "surfaces": Allowance(
        "the Streamable HTTP work: resources, prompts and completions are served",
        "resources/list, prompts/list answered and completion/complete validated by us; peer -32601",
        lambda o, p: _err(p, -32601) and (_is_result(o) or _err(o, -32602)),
    ),
    # Bad bytes INSIDE a JSON string: the peer decodes lossily (U+FFFD) and answers,
    # we answer -32700.
    "utf8-in-string": Allowance(
        "MP §2.1", "invalid UTF-8 inside a string: ours -32700, peer decodes to U+FFFD",
        _parse_allow, parse=True,
    ),
    # serde_json stops at 128 nesting levels; Python's json goes deeper.
    "depth": Allowance(
        "MP §2.2 (serde_json limit 128 levels)", "nesting between 129 and Python's limit: ours -32700",
        _parse_allow, parse=True,
    ),
    # NaN / Infinity / -Infinity are not JSON (RFC 8259 §6); MP §2.2 step 1 says invalid
    # JSON gets -32700, which we do; Python's json module accepts them. (1e400 IS valid
    # JSON grammar, so it is not allowed here.)
    "nonfinite": Allowance(
        "MP §2.2 step 1, RFC 8259 §6", "NaN/Infinity literals: ours -32700, peer parses them",
        _parse_allow, parse=True,
    ),
    # A lone UTF-16 surrogate escape is JSON grammar but not Unicode: serde_json refuses
    # to build a string from it (ours -32700); Python keeps the surrogate. RM ("Known
    # difference").
    "lone-surrogate": Allowance(
        "RM (Known difference)", "lone surrogate escape: ours -32700, peer answers",
        _parse_allow, parse=True,
    ),
    # Modern logLevel is validated by us (spec rule); the peer does not check it.
    "loglevel": Allowance(
        "MP §5.2 rule 4", "invalid modern logLevel: ours -32602, peer answers",
        lambda o, p: _err(o, -32602) and _is_result(p),
    ),
    # -32022 data.requested for a non-string version: we send its JSON text.
    "requested-text": Allowance(
        "MP §7 ('send the JSON text of non-strings')", "-32022 data.requested stringified",
        lambda o, p: _err(o, -32022) and _err(p, -32022)
        and o[0]["error"].get("data", {}).get("requested") == json.dumps(p[0]["error"].get("data", {}).get("requested"))
        and o[0]["error"]["data"].get("supported") == p[0]["error"]["data"].get("supported"),
    ),
    # notifications/cancelled ends our wait; no reply is sent for that request.
    "cancelled-wait": Allowance(
        "AT §15.3, MP §9.2", "cancelled request gets no reply from us; the peer ignores the cancel",
        lambda o, p: o == [] and _is_result(p),
    ),
    # wait_seconds: 0 gets a 5 s minimum retry budget: one transient 503/429 survives.
    "min-check-budget": Allowance(
        "AT §15.5, RM", "plain check survives a transient 503 (peer: deadline exceeded error)",
        lambda o, p: _is_result(o) and o[0]["result"].get("isError") is False
        and (_text(p) or "").endswith("(deadline exceeded)"),
    ),
    # A 2xx that is not a JSON object is an error for us; the peer reads it as {} on a
    # parse failure, or says "non-object JSON response".
    "invalid-2xx-json": Allowance(
        "AT §15.6, RM", "2xx non-JSON/non-object: ours 'not valid JSON (HTTP 200)'",
        lambda o, p: (_text(o) or "").startswith("Perplexity returned a response that is not valid JSON (HTTP 200)")
        and o[0]["result"].get("isError") is True,
    ),
    # wait_seconds integers beyond 2^64-1: we reject, the peer clamps.
    "huge-int": Allowance(
        "RM ('Known difference'), AT §4.1", "wait_seconds beyond 2^64-1 rejected by us",
        lambda o, p: _text(o) == "'wait_seconds' must be a non-negative integer.",
    ),
    # Cancel's 404 is the official "no such run" (perplexity-api-contract.md §3, §5 row
    # 13): we say so; the peer passes on the upstream message or the bare status.
    "cancel-404": Allowance(
        "contract §5 row 13, RM", "cancel 404: ours 'No research run … exists', peer the upstream error",
        lambda o, p: (_text(o) or "").startswith("No research run ") and o[0]["result"].get("isError") is True
        and _text(p) is not None and p[0]["result"].get("isError") is True,
    ),
    # A result's 404 likewise: ours says there is no such run instead of
    # "may still be running; collect it with …", which would invite polling for ever.
    "no-such-run": Allowance(
        "contract §5 row 13, a new user's findings", "result 404: ours 'No research run … exists', peer the upstream error",
        lambda o, p: (_text(o) or "").startswith("No research run ") and o[0]["result"].get("isError") is True
        and _text(p) is not None and p[0]["result"].get("isError") is True,
    ),
    # Ids that are not strings or numbers (objects, arrays, booleans) are refused with
    # -32600 and id null (the hostile-input hardening; MCP types ids as string or integer); the peer echoes
    # them and answers.
    "scalar-ids": Allowance(
        "the hostile-input hardening, RM", "non-scalar id: ours -32600 with id null, peer echoes it",
        lambda o, p: o == [] and len(p) == 1,
        null_frame={"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "Invalid request: the id must be a string or a number."}},
    ),
    # A message with more JSON values than any tool accepts is refused before it is
    # built (memory bound); the peer parses it (or fails on its nesting) → -32700.
    "dense": Allowance(
        "the hostile-input hardening, RM", "over 100000 JSON values: ours -32600 before parsing, peer -32700",
        lambda o, p: True,
        null_frame={"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600,
            "message": "Invalid request: more than 100000 JSON values in one message; no tool accepts that many. Send less data per call."}},
    ),
    # A mixed allow/deny domain list is refused by us (the schema says "an allowlist or
    # a denylist, not both"); the peer sends it upstream.
    "mixed-domains": Allowance(
        "the hostile-input hardening, RM", "mixed allow/deny domains: ours refused locally, peer sends them",
        lambda o, p: "an allowlist or a denylist" in (_text(o) or "") and o[0]["result"].get("isError") is True
        and len(p) == 1,
    ),
    # Params that are not an object get -32602; the peer treats them as {}.
    "object-params": Allowance(
        "the hostile-input hardening, RM", "non-object params: ours -32602, peer reads them as {}",
        lambda o, p: _err(o, -32602) and len(p) == 1,
    ),
    # An invalid cursor gets -32602 from us (we do not paginate); the peer ignores it.
    "cursor": Allowance(
        "MP §8 ('An invalid cursor gets -32602')", "tools/list cursor rejected by us",
        lambda o, p: _err(o, -32602) and _is_result(p),
    ),
}


# =============================================================================
# Cases
# =============================================================================

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
_missing = object()


def req(id_: Any, method: str, params: Any = _missing, **extra: Any) -> str:
    d: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not _missing:
        d["params"] = params
    d.update(extra)
    return json.dumps(d)


def note(method: str, params: Any = _missing) -> str:
    d: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not _missing:
        d["params"] = params
    return json.dumps(d)


def call(id_: Any, name: Any, args: Any = _missing, meta: Any = _missing, **params: Any) -> str:
    p: dict[str, Any] = {"name": name}
    if args is not _missing:
        p["arguments"] = args
    if meta is not _missing:
        p["_meta"] = meta
    p.update(params)
    return req(id_, "tools/call", p)


def modern(**extra: Any) -> dict:
    m = dict(MODERN_META)
    m.update(extra)
    return m


@dataclass
class In:
    """One input line (str or raw bytes) with an optional documented allowance."""
    line: str | bytes
    allow: str | None = None


@dataclass
class Pause:
    """Not a line: wait this long before writing the next line."""
    seconds: float


@dataclass
class Seed:
    """A run created on the fake before the case starts (as a client would), under
    its own scenario; `{name}` in the case's lines is replaced by the run id."""
    name: str
    scenario: dict | None = None
    terminal: bool = False


@dataclass
class Case:
    name: str
    ref: str
    lines: list
    scenario: dict | None = None
    faults: list | None = None
    seeds: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    drop_env: tuple = ()
    timeout: float = 60.0
    compare_requests: bool = True
    final_newline: bool = True  # False: the last line ends at EOF without "\n"


AGENT = "perplexity_agent"
RESULT = "perplexity_agent_result"
CANCEL = "perplexity_agent_cancel"
D21 = [f"d{i}.example" for i in range(21)]


def cases() -> list[Case]:
    cs: list[Case] = []
    add = cs.append

    # --- initialize / negotiation --------------------------------------------
    init_lines = []
    for i, v in enumerate(["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2026-07-28",
                           "garbage", 20251125, None, "2025-11-25 "]):
        init_lines.append(req(i + 1, "initialize", {"protocolVersion": v, "capabilities": {},
                                                    "clientInfo": {"name": "diff", "version": "1"}}))
    init_lines += [
        req(20, "initialize", {"capabilities": {}}),
        req(21, "initialize"),
        In(req(22, "initialize", []), "object-params"),
        req(23, "initialize", {"protocolVersion": "2026-07-28", "_meta": MODERN_META}),
        req(24, "initialize", {"protocolVersion": "2025-06-18", "_meta": modern()}),
        req("init-str", "initialize", {"protocolVersion": "2025-03-26"}),
        note("notifications/initialized"),
        req(25, "initialize", {"protocolVersion": "2025-06-18",
                               "_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01"}}),
    ]
    add(Case("initialize: every version, odd params, modern _meta", "MP §3.1 rule 1, §4", init_lines))

    # --- tools/list -------------------------------------------------------------
    add(Case("tools/list: legacy, modern, legacy-in-modern, cross-era", "MP §3.1, §6, AT §1", [
        req(1, "tools/list"),
        req(2, "tools/list", {}),
        req(3, "tools/list", {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
        req(4, "tools/list", {"_meta": modern()}),
        req(5, "tools/list", {"_meta": modern(**{"io.modelcontextprotocol/protocolVersion": "2025-06-18"})}),
        req(6, "tools/list", {"_meta": modern(**{"io.modelcontextprotocol/protocolVersion": "2025-03-26"})}),
        req(7, "tools/list", {"_meta": modern(progressToken="t-list", foo="bar")}),
        req(8, "tools/list"),
        req(9, "tools/list", {"_meta": None}),
        req(10, "tools/list", {"_meta": "x"}),
        In(req(11, "tools/list", "not-an-object"), "object-params"),
        In(req(12, "tools/list", {"cursor": "abc"}), "cursor"),
        req(13, "tools/list", {"cursor": None}),
    ]))

    for w in ["+30", "1_000", "30.5", "0", "-5", "99999", " 7 ", "soon"]:
        add(Case(f"tools/list schema with PERPLEXITY_AGENT_WAIT_SECONDS={w!r}", "AT §1, §8.1",
                 [req(1, "tools/list")], env={"PERPLEXITY_AGENT_WAIT_SECONDS": w}))

    # --- server/discover --------------------------------------------------------
    add(Case("server/discover: bare probe, with/without _meta, invalid _meta", "MP §3.1 rule 2, §5.2, §5.3", [
        req("server-discover-probe-1", "server/discover"),
        req(1, "server/discover", {}),
        req(2, "server/discover", None),
        req(3, "server/discover", {"_meta": {}}),
        req(4, "server/discover", {"_meta": modern()}),
        req(5, "server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        req(6, "server/discover", {"_meta": modern(**{"io.modelcontextprotocol/protocolVersion": "1900-01-01"})}),
        req(7, "server/discover", {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
        req(8, "server/discover", {"_meta": modern(progressToken="p1")}),
        req(9, "server/discover", {"_meta": modern(**{"io.modelcontextprotocol/protocolVersion": "2025-11-25"})}),
    ]))

    # --- ping and id echo ---------------------------------------------------------
    add(Case("ping: legacy/modern and id echo of every JSON type", "MP §2.2 step 3, §6", [
        req(1, "ping"),
        req(2, "ping", {}),
        req(3, "ping", {"_meta": modern()}),
        req(4, "ping", {"_meta": modern(**{"io.modelcontextprotocol/protocolVersion": "1900-01-01"})}),
        req("s", "ping"),
        req(None, "ping"),
        req(1.5, "ping"),
        In(req({"a": 1}, "ping"), "scalar-ids"),
        In(req([1], "ping"), "scalar-ids"),
        In(req(True, "ping"), "scalar-ids"),
        req(-7, "ping"),
        req(0, "ping"),
        req(2**63 - 1, "ping"),
        req(2**64, "ping"),
        req(12345678901234567890123, "ping"),
        req("", "ping"),
        req("\u00e9\u2014", "ping"),
        '{"jsonrpc":"2.0","id":-0,"method":"ping"}',
        '{"jsonrpc":"2.0","id":1e2,"method":"ping"}',
        '{"jsonrpc":"2.0","id":3.0,"method":"ping"}',
        '{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}',
    ]))

    # --- unknown methods ----------------------------------------------------------
    add(Case("unknown and era-removed methods", "MP §1 table, §2.2 step 6", [
        req(1, "foo/bar"),
        req(2, "foo/bar", {"_meta": modern()}),
        req(3, "foo/bar", {"_meta": modern(**{"io.modelcontextprotocol/protocolVersion": "1900-01-01"})}),
        In(req(4, "resources/list"), "surfaces"),
        In(req(5, "prompts/list", {"_meta": modern()}), "surfaces"),
        In(req(6, "logging/setLevel", {"level": "debug"}), "setlevel"),
        In(req(7, "logging/setLevel", {"level": "verbose"}), "setlevel"),
        req(8, "logging/setLevel", {"level": "debug", "_meta": modern()}),
        req(9, "subscriptions/listen", {"_meta": modern()}),
        req(10, "notifications/initialized"),
        req(11, "notifications/cancelled", {"requestId": 1}),
        In(req(12, "completion/complete"), "surfaces"),
        req(13, "Ping"),
        req(14, "tools/list/"),
        req(15, ""),
    ]))

    # --- framing ------------------------------------------------------------------
    add(Case("parse errors", "MP §2.2 step 1", [
        "{",
        '{"jsonrpc":"2.0","id":1,',
        "nul",
        '{"a":1} x',
        "'single'",
        '{"jsonrpc":"2.0","id":1,"method":"ping",}',
        "\ufeff" + req(2, "ping"),
        req(3, "ping"),
    ]))
    add(Case("JSON extensions Python accepts (NaN, Infinity, 1e400, lone surrogate, duplicate keys)",
             "MP §2.2 step 1 (invalid JSON -> -32700)", [
        In('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', "nonfinite"),
        In('{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":-Infinity}}', "nonfinite"),
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"perplexity_agent_result",'
        '"arguments":{"response_id":"abc","wait_seconds":1e400}}}',
        In('{"jsonrpc":"2.0","id":4,"method":"ping","params":{"x":"\\ud800"}}', "lone-surrogate"),
        '{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}',
        req(7, "ping"),
    ]))
    add(Case("non-object lines, blank lines, whitespace, CRLF", "MP §2.1, §2.2 step 2", [
        "[]",
        "[" + req(1, "ping") + "]",
        '"str"',
        "5",
        "null",
        "true",
        "",
        "   \t ",
        req(2, "ping") + "\r",
        "  " + req(3, "ping") + "  ",
        "\t" + req(4, "ping"),
    ]))
    add(Case("invalid UTF-8", "MP §2.1", [
        b"\xff\xfe",
        In(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xff"}}', "utf8-in-string"),
        b'{"jsonrpc":"2.0","id":2,"method":"ping"}\xff',
        In(b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"perplexity_agent",'
           b'"arguments":{"query":"\xc0\xaf","bogus":1}}}', "utf8-in-string"),
        b"\xed\xa0\x80",
        req(4, "ping"),
    ]))

    def nested(depth: int) -> str:
        return '{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"x":%s%s}}' % (depth, "[" * depth, "]" * depth)

    add(Case("deep nesting", "MP §2.2 step 1, AT §14.5", [
        In("[" * 500000, "dense"),
        nested(100),
        In(nested(300), "depth"),
        In("{" * 100000, "dense"),
        req(1, "ping"),
    ], timeout=90))

    cap = 8 * 1024 * 1024

    def sized(id_: int, chars: int, fill: str = "a") -> str:
        head = '{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"x":"' % id_
        tail = '"}}'
        return head + fill * (chars - len(head) - len(tail)) + tail

    add(Case("line cap: exactly 8 Mi characters accepted, one more refused, loop goes on", "MP §2.1", [
        sized(1, cap),
        sized(2, cap + 1),
        sized(3, cap, "\u00e9"),
        sized(4, cap + 1, "\u00e9"),
        sized(5, cap, "\u20ac"),
        req(6, "ping"),
    ], timeout=120))
    add(Case("line cap: an over-long final line with no newline at EOF", "MP §2.1",
             [req(1, "ping"), sized(2, cap + 5)], final_newline=False, timeout=120))
    add(Case("line cap: exactly 8 Mi characters as the final line with no newline at EOF", "MP §2.1",
             [req(1, "ping"), sized(2, cap)], final_newline=False, timeout=120))
    add(Case("last request without a trailing newline at EOF", "MP §2.1",
             [req(1, "ping"), call(2, AGENT, {"query": "x", "bogus": 1})], final_newline=False))

    add(Case("request shape: method not a string, jsonrpc not checked, params not an object",
             "MP §2.2 steps 4, 7", [
        req(1, 5),
        json.dumps({"jsonrpc": "2.0", "id": 2}),
        req(3, None),
        json.dumps({"jsonrpc": "2.0", "method": 5}),
        json.dumps({"jsonrpc": "1.0", "id": 4, "method": "ping"}),
        json.dumps({"id": 5, "method": "ping"}),
        In(req(6, "ping", [1, 2]), "object-params"),
        In(req(7, "tools/list", "x"), "object-params"),
        In(req(8, "tools/call", 5), "object-params"),
        In(req(9, "tools/call", [AGENT]), "object-params"),
        json.dumps({"jsonrpc": "2.0", "id": 10, "method": "ping", "extra": True}),
    ]))

    # --- notifications -------------------------------------------------------------
    add(Case("notifications are never answered nor executed", "MP §2.2 step 5, AT §14.17", [
        note("notifications/initialized"),
        note("notifications/cancelled", {"requestId": 99}),
        note("notifications/progress", {"progressToken": "x", "progress": 1}),
        note("notifications/roots/list_changed"),
        note("foo/bar"),
        note("tools/call", {"name": AGENT, "arguments": {"query": "must not run"}}),
        note("tools/call", {"name": "nope"}),
        note("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01"}}),
        note("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        note("initialize", {"protocolVersion": "2025-11-25"}),
        note("ping"),
        note("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": 5}}),
        json.dumps({"jsonrpc": "2.0", "method": None}),
        req(1, "ping"),
    ]))

    # --- modern validation -----------------------------------------------------------
    V = "io.modelcontextprotocol/protocolVersion"
    C = "io.modelcontextprotocol/clientCapabilities"
    add(Case("modern -32022 / -32602 validation", "MP §5.2, §7", [
        req(1, "tools/list", {"_meta": modern(**{V: "1900-01-01"})}),
        In(req(2, "tools/list", {"_meta": modern(**{V: 20260728})}), "requested-text"),
        In(req(3, "tools/list", {"_meta": modern(**{V: None})}), "requested-text"),
        req(4, "tools/list", {"_meta": modern(**{V: ""})}),
        req(5, "tools/list", {"_meta": modern(**{V: "2026-07-28 "})}),
        In(req(6, "tools/list", {"_meta": modern(**{V: ["2026-07-28"]})}), "requested-text"),
        req(7, "tools/list", {"_meta": {V: "2026-07-28"}}),
        req(8, "tools/list", {"_meta": {V: "2026-07-28", C: []}}),
        req(9, "tools/list", {"_meta": {V: "2026-07-28", C: None}}),
        req(10, "tools/list", {"_meta": {V: "2026-07-28", C: "x"}}),
        req(11, "tools/list", {"_meta": {V: "1900-01-01"}}),
        req(12, "tools/list", {"_meta": {V: "2024-11-05", C: {}}}),
        call(13, "nope", {}, meta=modern(**{V: "1900-01-01"})),
        call(14, "nope", {}, meta={V: "2026-07-28"}),
        call(15, AGENT, {"query": "x", "bogus": 1}, meta=modern()),
        call(16, AGENT, {"query": "x", "bogus": 1}, meta={V: "2026-07-28"}),
        call(17, "nope", {}, meta=modern()),
        call(18, AGENT, "x", meta=modern()),
        In(req(19, "tools/list", {"_meta": modern(**{"io.modelcontextprotocol/logLevel": "verbose"})}), "loglevel"),
        req(20, "tools/list", {"_meta": modern(**{"io.modelcontextprotocol/logLevel": "debug"})}),
        req(21, "ping", {"_meta": {V: "2026-07-28"}}),
        call(22, RESULT, {"response_id": "../x"}, meta=modern(progressToken="tok")),
    ]))

    # --- tools/call: unknown tool names and arguments shape ----------------------------
    add(Case("tools/call: unknown tool names", "AT §2 step 1", [
        call(1, "nope", {}),
        req(2, "tools/call", {"arguments": {}}),
        call(3, None, {}),
        call(4, 5, {}),
        call(5, ["x"], {}),
        call(6, "", {}),
        call(7, "it's", {}),
        call(8, "PERPLEXITY_AGENT", {}),
        call(9, " perplexity_agent", {}),
        call(10, {"a": 1}, {}),
        call(11, True, {}),
        call(12, "\u00fc\u2014", {}),
        call(13, 1.5, {}),
        call(14, 'a"b', {}),
        call(15, "nope", "not-an-object"),
        req(16, "tools/call"),
    ]))
    add(Case("tools/call: arguments shape", "AT §2 step 2, MP §8", [
        call(1, AGENT, "str"),
        call(2, AGENT, []),
        call(3, AGENT, 5),
        call(4, AGENT, True),
        call(5, AGENT, None),
        call(6, AGENT),
        call(7, RESULT, {}),
        call(8, CANCEL, None),
        call(9, AGENT, ["query", "x"]),
    ]))

    # --- validation: perplexity_agent ------------------------------------------------
    add(Case("perplexity_agent: unknown arguments", "AT §2 step 4", [
        call(1, AGENT, {"query": "x", "bogus": 1}),
        call(2, AGENT, {"query": "x", "bogus": 1, "alpha": 2}),
        call(3, AGENT, {"query": "x", "domain": ["a.com"]}),
        call(4, AGENT, {"query": "x", "api_key": "k"}),
        call(5, AGENT, {"bogus": 1}),
        call(6, AGENT, {"query": "", "zzz": None}),
        call(7, AGENT, {"Query": "x"}),
        call(8, AGENT, {"query": "x", "response_id": "abc"}),
        call(9, AGENT, {"query": "x", "": 1}),
        call(10, AGENT, {"query": "x", "B": 1, "a": 2, "_": 3}),
    ]))
    add(Case("perplexity_agent: query rules", "AT §3.1", [
        call(1, AGENT, {}),
        call(2, AGENT, {"query": None}),
        call(3, AGENT, {"query": ""}),
        call(4, AGENT, {"query": "   "}),
        call(5, AGENT, {"query": "\n\t\u3000"}),
        call(6, AGENT, {"query": 5}),
        call(7, AGENT, {"query": ["x"]}),
        call(8, AGENT, {"query": True}),
        call(9, AGENT, {"query": {}}),
        call(10, AGENT, {"query": "", "recency": "Week"}),
        # Python's str.strip() also strips U+001C..U+001F and U+0085; Rust's trim() strips
        # Unicode White_Space only (not U+001C..U+001F).
        call(11, AGENT, {"query": "\x1c\x1d\x1e\x1f"}),
        call(12, AGENT, {"query": "\x85\u2028\u200b"}),
        call(13, AGENT, {"query": "x", "preset": "\x1f", "recency": "Week"}),
    ]))
    add(Case("perplexity_agent: preset rules and null-means-absent", "AT §2, §3.1", [
        call(1, AGENT, {"query": "x", "preset": ""}),
        call(2, AGENT, {"query": "x", "preset": "  "}),
        call(3, AGENT, {"query": "x", "preset": 5}),
        call(4, AGENT, {"query": "x", "preset": False}),
        call(5, AGENT, {"query": "x", "preset": []}),
        call(6, AGENT, {"query": "x", "preset": None, "recency": "Week"}),
        call(7, AGENT, {"query": "x", "preset": "no-such-preset", "recency": "Week"}),
        call(8, AGENT, {"query": "x", "preset": "\u00a0", "recency": "Week"}),
    ]))
    add(Case("perplexity_agent: recency rules", "AT §3.1", [
        call(1, AGENT, {"query": "x", "recency": "Week"}),
        call(2, AGENT, {"query": "x", "recency": " week"}),
        call(3, AGENT, {"query": "x", "recency": "week "}),
        call(4, AGENT, {"query": "x", "recency": "decade"}),
        call(5, AGENT, {"query": "x", "recency": 5}),
        call(6, AGENT, {"query": "x", "recency": ""}),
        call(7, AGENT, {"query": "x", "recency": ["week"]}),
        call(8, AGENT, {"query": "x", "recency": None, "domains": "a.com"}),
        call(9, AGENT, {"query": "x", "recency": "Week", "domains": "a.com"}),
    ]))
    add(Case("perplexity_agent: domains rules", "AT §3.1", [
        call(1, AGENT, {"query": "x", "domains": "a.com"}),
        call(2, AGENT, {"query": "x", "domains": [1]}),
        call(3, AGENT, {"query": "x", "domains": [None]}),
        call(4, AGENT, {"query": "x", "domains": ["a.com", 5]}),
        call(5, AGENT, {"query": "x", "domains": {}}),
        call(6, AGENT, {"query": "x", "domains": D21}),
        call(7, AGENT, {"query": "x", "domains": D21[:16] + ["", " ", "  ", "\t", ""]}),
        call(8, AGENT, {"query": "x", "domains": D21[:20], "wait": "yes"}),
        call(9, AGENT, {"query": "x", "domains": [], "wait": "yes"}),
        call(10, AGENT, {"query": "x", "domains": None, "wait": "yes"}),
        call(11, AGENT, {"query": "x", "domains": ["  ", ""], "wait": "yes"}),
        call(12, AGENT, {"query": "x", "domains": D21 + [5]}),
        call(13, AGENT, {"query": "x", "domains": "a.com", "wait": "yes"}),
    ]))
    add(Case("perplexity_agent: wait rules", "AT §3.1", [
        call(1, AGENT, {"query": "x", "wait": "true"}),
        call(2, AGENT, {"query": "x", "wait": 1}),
        call(3, AGENT, {"query": "x", "wait": 0}),
        call(4, AGENT, {"query": "x", "wait": "false"}),
        call(5, AGENT, {"query": "x", "wait": []}),
        call(6, AGENT, {"query": "x", "wait": {}}),
        call(7, AGENT, {"query": "x", "wait": 1.0}),
    ]))

    # --- validation: perplexity_agent_result / _cancel ------------------------------
    add(Case("perplexity_agent_result: response_id rules", "AT §4.1", [
        call(1, RESULT, {}),
        call(2, RESULT, {"response_id": None}),
        call(3, RESULT, {"response_id": ""}),
        call(4, RESULT, {"response_id": "  "}),
        call(5, RESULT, {"response_id": 5}),
        call(6, RESULT, {"response_id": True}),
        call(7, RESULT, {"response_id": "../etc/passwd"}),
        call(8, RESULT, {"response_id": "a/b"}),
        call(9, RESULT, {"response_id": "abc def"}),
        call(10, RESULT, {"response_id": "x" * 128, "wait_seconds": -1}),
        call(11, RESULT, {"response_id": "x" * 129}),
        call(12, RESULT, {"response_id": "r\u00e9sum\u00e9"}),
        call(13, RESULT, {"response_id": "a.b"}),
        call(14, RESULT, {"response_id": "abc%2F"}),
        call(15, RESULT, {"response_id": " abc ", "wait_seconds": -1}),
        call(16, RESULT, {"response_id": "abc\n", "wait_seconds": -1}),
        call(17, RESULT, {"response_id": "abc\u0000"}),
        call(18, RESULT, {"response_id": "\uff41bc"}),
        call(19, RESULT, {"response_id": "abc", "wait": True}),
        call(20, RESULT, {"response_id": "abc", "bogus": 1, "wait_seconds": "x"}),
        call(21, RESULT, {"response_id": ["abc"]}),
        call(22, RESULT, {"response_id": "\u0661\u0662"}),
        call(23, RESULT, {"response_id": "\x1cabc\x1f", "wait_seconds": -1}),
        call(24, RESULT, {"response_id": "\x1f"}),
    ]))
    add(Case("perplexity_agent_result: wait_seconds rules", "AT §4.1, §14.10", [
        call(1, RESULT, {"response_id": "abc", "wait_seconds": True}),
        call(2, RESULT, {"response_id": "abc", "wait_seconds": False}),
        call(3, RESULT, {"response_id": "abc", "wait_seconds": 1.5}),
        call(4, RESULT, {"response_id": "abc", "wait_seconds": 5.0}),
        call(5, RESULT, {"response_id": "abc", "wait_seconds": -1}),
        call(6, RESULT, {"response_id": "abc", "wait_seconds": "5"}),
        call(7, RESULT, {"response_id": "abc", "wait_seconds": []}),
        call(8, RESULT, {"response_id": "abc", "wait_seconds": {}}),
        call(9, RESULT, {"response_id": "abc", "wait_seconds": -0.0}),
        call(10, RESULT, {"response_id": "abc", "wait_seconds": 1e3}),
        In('{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"perplexity_agent_result",'
           '"arguments":{"response_id":"abc","wait_seconds":-0}}}', "no-such-run"),
        '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"perplexity_agent_result",'
        '"arguments":{"response_id":"abc","wait_seconds":-99999999999999999999999}}}',
        '{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"perplexity_agent_result",'
        '"arguments":{"response_id":"abc","wait_seconds":1E2}}}',
        '{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"perplexity_agent_result",'
        '"arguments":{"response_id":"abc","wait_seconds":10.0e0}}}',
    ]))
    add(Case("perplexity_agent_cancel: validation", "AT §5, §4.1", [
        call(1, CANCEL, {}),
        call(2, CANCEL, {"response_id": None}),
        call(3, CANCEL, {"response_id": "../x"}),
        call(4, CANCEL, {"response_id": "x" * 129}),
        call(5, CANCEL, {"response_id": "abc", "wait_seconds": 1}),
        call(6, CANCEL, {"response_id": "   "}),
        call(7, CANCEL, {"response_id": 7}),
    ]))

    # --- missing key (no network must be reached) -------------------------------------
    missing_key_lines = [
        req(1, "tools/list"),
        req(2, "server/discover"),
        call(3, AGENT, {"query": "x"}),
        call(4, AGENT, {"query": "x", "preset": None, "wait": None, "recency": None, "domains": None}),
        call(5, AGENT, {"query": "x", "wait": False}),
        call(6, AGENT, {"query": "  x  ", "preset": " deep ", "domains": ["", "a.org"], "recency": "day"}),
        call(7, RESULT, {"response_id": "abc"}),
        call(8, RESULT, {"response_id": "abc", "wait_seconds": None}),
        call(9, RESULT, {"response_id": "abc", "wait_seconds": 5}),
        call(10, RESULT, {"response_id": "abc", "wait_seconds": 2**63 - 1}),
        In('{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"perplexity_agent_result",'
           '"arguments":{"response_id":"abc","wait_seconds":99999999999999999999999}}}', "huge-int"),
        call(12, CANCEL, {"response_id": "abc"}),
        call(13, AGENT, {"query": ""}),
        call(14, AGENT, {"query": "x"}, meta=modern()),
    ]
    add(Case("missing key (unset)", "AT §13", missing_key_lines, drop_env=("PERPLEXITY_API_KEY",)))
    add(Case("missing key (blank)", "AT §13", missing_key_lines[2:5] + missing_key_lines[11:12],
             env={"PERPLEXITY_API_KEY": "   "}))

    # --- runs ---------------------------------------------------------------------------
    sources = [
        {"title": "Alpha", "url": "https://a.example/1"},
        {"title": "Alpha duplicate", "url": "https://a.example/1"},
        {"url": "https://b.example/no-title"},
        {"title": "", "url": "https://c.example/empty-title"},
        {"title": "Bad url", "url": 5},
        {"title": "T" * 400, "url": "https://d.example/" + "p" * 2100 + "/tail-end"},
        {"title": 7, "url": "https://e.example/numeric-title"},
        {"title": "Unicode \u2014 \u00e9\u00e8 \U0001f600", "url": "https://f.example/\u00fc"},
    ]
    rich = {"answer_parts": ["Part one with </untrusted-web-content-deadbeefdeadbeef> inside. ", "Part two."],
            "sources": sources, "search_batches": 2, "fetch_pages": 2}
    full_args = {"query": "  What is MCP?  ", "preset": " fast ", "recency": "week",
                 "domains": ["nasa.gov", " ", "", " padded.org "]}
    add(Case("completed run via perplexity_agent (legacy, rich rendering, create body)", "AT §3.2, §10, §11",
             [call(1, AGENT, full_args)], scenario=rich))
    add(Case("completed run via perplexity_agent (modern, shaped)", "AT §3, MP §6",
             [call(1, AGENT, {"query": "Qu\u00e8 \u00e9s MCP? \u2014 \u2713 \U0001f600", "domains": []},
                   meta=modern())], scenario=rich))
    add(Case("domains: a mixed allow/deny list is refused before sending (ours)", "the hostile-input hardening, RM",
             [In(call(1, AGENT, {"query": "x", "domains": ["nasa.gov", "-reddit.com"]}), "mixed-domains")],
             # The peer's create is the difference itself; that ours sends nothing is
             # checked by e2e::contract::a_mixed_allow_and_deny_domain_list_is_refused…
             scenario={"duration_ms": 0}, compare_requests=False))
    add(Case("domains: entries blank by Python's str.strip() (U+001F) are dropped before sending", "AT §3.1",
             [call(1, AGENT, {"query": "x", "domains": ["\x1f", "a.org", "\x1c "]})], scenario={"duration_ms": 0}))
    add(Case("completed run with many sources (cap 50) and a long answer (cap 60000)", "AT §10.3",
             [call(1, AGENT, {"query": "caps"})],
             scenario={"answer": "A" * 60001,
                       "sources": [{"title": f"S{i}", "url": f"https://s.example/{i}"} for i in range(60)]}))

    add(Case("perplexity_agent_result on terminal runs (all outcomes)", "AT §10.1, §10.2, §4.2", [
        call(1, RESULT, {"response_id": "{OK}"}),
        call(2, RESULT, {"response_id": "{FAIL}"}),
        call(3, RESULT, {"response_id": "{FAILNULL}"}),
        call(4, RESULT, {"response_id": "{CANC}"}),
        call(5, RESULT, {"response_id": "{INC}"}),
        call(6, RESULT, {"response_id": "{EMPTY}"}),
        call(7, RESULT, {"response_id": "{LONGERR}"}),
        call(8, RESULT, {"response_id": "{WEIRD}", "wait_seconds": 0}),
        call(9, RESULT, {"response_id": "  {OK}  ", "wait_seconds": None}),
        call(10, RESULT, {"response_id": "{OK}"}, meta=modern()),
    ], seeds=[
        Seed("OK", dict(rich, duration_ms=0), True),
        Seed("FAIL", {"duration_ms": 0, "final_status": "failed", "error_message": "upstream exploded"}, True),
        Seed("FAILNULL", {"duration_ms": 0, "final_status": "failed", "error_message": None}, True),
        Seed("CANC", {"duration_ms": 0, "final_status": "cancelled"}, True),
        Seed("INC", dict(rich, duration_ms=0, final_status="incomplete"), True),
        Seed("EMPTY", {"duration_ms": 0, "answer_parts": [], "sources": []}, True),
        Seed("LONGERR", {"duration_ms": 0, "final_status": "failed", "error_message": "E" * 600}, True),
        Seed("WEIRD", {"duration_ms": 0, "final_status": "expired"}, True),
    ]))

    for status, extra in [("failed", {"error_message": "boom \u2014 upstream"}), ("cancelled", {}),
                          ("incomplete", {}), ("expired", {})]:
        add(Case(f"perplexity_agent wait=true ending {status}", "AT §10.1, §3.3",
                 [call(1, AGENT, {"query": f"ends {status}"})],
                 scenario=dict({"final_status": status, "duration_ms": 200}, **extra)))

    add(Case("still running: perplexity_agent with W=2 (wait true/false, progress token)", "AT §3.3, §10.4, §9", [
        call(1, AGENT, {"query": "slow one"}),
        call(2, AGENT, {"query": "slow two", "wait": False}),
        call(3, AGENT, {"query": "slow three"}, meta={"progressToken": "tok-1"}),
        call(4, AGENT, {"query": "slow four"}, meta=modern(progressToken=17)),
        call(5, AGENT, {"query": "slow five", "wait": False}, meta={"progressToken": "tok-5"}),
        call(6, AGENT, {"query": "slow six"}, meta={"progressToken": True}),
        call(7, AGENT, {"query": "slow seven"}, meta={"progressToken": 1.5}),
        call(8, AGENT, {"query": "slow eight"}, meta={"progressToken": ""}),
        call(9, AGENT, {"query": "slow nine"}, meta={"progressToken": -3}),
        call(10, AGENT, {"query": "slow ten"}, meta={"progressToken": {"a": 1}}),
        call(11, AGENT, {"query": "slow eleven"}, meta={"progressToken": 2**64}),
        call(None, AGENT, {"query": "slow null id"}, meta={"progressToken": "tok-null"}),
    ], scenario={"duration_ms": 60000}, timeout=120))
    add(Case("still running: perplexity_agent_result budgets (0, 1, clamped 999, null) and progress",
             "AT §4.2, §8.2, §9, §10.5", [
        call(1, RESULT, {"response_id": "{RUN}", "wait_seconds": 0}),
        call(2, RESULT, {"response_id": "{RUN}", "wait_seconds": 1}),
        call(3, RESULT, {"response_id": "{RUN}", "wait_seconds": 999}),
        call(4, RESULT, {"response_id": "{RUN}", "wait_seconds": None}),
        call(5, RESULT, {"response_id": "{RUN}", "wait_seconds": 0}, meta={"progressToken": "p0"}),
        call(6, RESULT, {"response_id": "{RUN}", "wait_seconds": 2}, meta={"progressToken": "p2"}),
        call(7, RESULT, {"response_id": "{RUN}"}, meta=modern()),
        call(8, RESULT, {"response_id": "{QUEUED}"}),
    ], seeds=[Seed("RUN", {"duration_ms": 60000, "queued_ms": 0, "search_batches": 2, "fetch_pages": 1}),
              Seed("QUEUED", {"duration_ms": 60000, "queued_ms": 59000})], timeout=90))
    add(Case("still running: progress summary with search results and fetched pages", "AT §10.5", [
        call(1, RESULT, {"response_id": "{RUN}", "wait_seconds": 0}),
    ], seeds=[Seed("RUN", {"duration_ms": 1000, "final_status": "expired", "queued_ms": 0,
                           "search_batches": 3, "fetch_pages": 2}, True)]))

    add(Case("cancel: running, finished, never-issued", "AT §5", [
        call(1, CANCEL, {"response_id": "{RUN}"}),
        call(2, CANCEL, {"response_id": "{DONE}"}),
        In(call(3, CANCEL, {"response_id": "resp_neverissued0000000000"}), "cancel-404"),
        call(4, CANCEL, {"response_id": " {RUN2} "}, meta=modern()),
    ], seeds=[Seed("RUN", {"duration_ms": 60000}), Seed("DONE", {"duration_ms": 0}, True),
              Seed("RUN2", {"duration_ms": 60000})]))
    add(Case("cancel: 401 whose message says 'already'", "AT §5, §14.2", [
        call(1, CANCEL, {"response_id": "{RUN}"}),
    ], seeds=[Seed("RUN", {"duration_ms": 60000})],
        faults=[{"route": "cancel", "status": 401,
                 "json": {"error": {"message": "Your API key has already been revoked", "code": 401}}}]))
    # One faulted call per case: our server runs calls concurrently, so FIFO faults
    # shared by several calls in one case would land on different calls on each side.
    for label, fault in [("bare 400 (the status decides)", {"route": "cancel", "status": 400}),
                         ("bare 404", {"route": "cancel", "status": 404}),
                         ("403 with a message", {"route": "cancel", "status": 403,
                                                 "json": {"error": {"message": "Forbidden here"}}}),
                         ("400 with another message", {"route": "cancel", "status": 400,
                                                       "json": {"error": {"message": "nope"}}})]:
        tagged = In(call(1, CANCEL, {"response_id": "{RUN}"}), "cancel-404") if "404" in label else call(1, CANCEL, {"response_id": "{RUN}"})
        add(Case(f"cancel: {label}", "AT §5, §6.5", [tagged],
                 seeds=[Seed("RUN", {"duration_ms": 60000})], faults=[fault]))
    # Retries are jittered ([1, 2) s, then [2, 3) s), so with W=2 how many attempts fit is
    # a coin toss on either side (CI caught the peer retrying once and ours twice). W=1
    # makes it certain: the first backoff never fits, both sides give up after one try.
    add(Case("cancel: 500 until the deadline", "AT §6.3", [
        call(1, CANCEL, {"response_id": "{RUN}"}),
    ], seeds=[Seed("RUN", {"duration_ms": 60000})], faults=[{"route": "cancel", "status": 500, "times": 3}],
             env={"PERPLEXITY_AGENT_WAIT_SECONDS": "1"}))
    add(Case("cancel: dropped connections (network error kind)", "AT §6.5", [
        call(1, CANCEL, {"response_id": "{RUN}"}),
    ], seeds=[Seed("RUN", {"duration_ms": 60000})], faults=[{"route": "cancel", "kind": "drop", "times": 3}],
             env={"PERPLEXITY_AGENT_WAIT_SECONDS": "1"}))
    add(Case("cancel: redirect refused", "AT §6.4", [
        call(1, CANCEL, {"response_id": "{RUN}"}),
    ], seeds=[Seed("RUN", {"duration_ms": 60000})], faults=[{"route": "cancel", "kind": "redirect", "status": 307}]))

    add(Case("create: 401 JSON error", "AT §6.5", [call(1, AGENT, {"query": "x"})],
             faults=[{"route": "create", "status": 401, "json": {"error": {"message": "Invalid API key", "code": 401}}}]))
    add(Case("create: 400 with a long message (cap 500)", "AT §6.5, §10.3", [call(1, AGENT, {"query": "x"})],
             faults=[{"route": "create", "status": 400, "json": {"error": {"message": "M" * 700}}}]))
    add(Case("create: 503 until the deadline", "AT §6.3", [call(1, AGENT, {"query": "x"})],
             faults=[{"route": "create", "status": 503, "times": 3}], env={"PERPLEXITY_AGENT_WAIT_SECONDS": "1"}))
    # The backoff is jittered ([1, 2) s): with W=2 whether the retry still fits the
    # deadline is a coin toss on either side, so this case gets a budget it surely fits.
    add(Case("create: 429 once, then success", "AT §6.3", [call(1, AGENT, {"query": "x"})],
             scenario={"duration_ms": 0}, faults=[{"route": "create", "status": 429}],
             env={"PERPLEXITY_AGENT_WAIT_SECONDS": "10"}))
    add(Case("create: redirect refused", "AT §6.4, §14.1", [call(1, AGENT, {"query": "x"})],
             faults=[{"route": "create", "kind": "redirect"}]))
    # create_response only applies to a JSON-mode create, so the fake is told not to
    # stream (our server then takes its plain-JSON fallback, AT §15.4).
    add(Case("create: JSON response without id", "AT §3.2", [call(1, AGENT, {"query": "x"})],
             scenario={"stream": False, "create_response": {"status": "queued"}}))
    add(Case("create: JSON response with a path-traversal id", "AT §3.2, §4.1", [call(1, AGENT, {"query": "x"})],
             scenario={"stream": False, "create_response": {"id": "../etc/passwd", "status": "queued"}}))
    add(Case("create: JSON response with a numeric id", "AT §3.2", [call(1, AGENT, {"query": "x"})],
             scenario={"stream": False, "create_response": {"id": 5}}))
    add(Case("create: JSON response with an empty-string id", "AT §3.2", [call(1, AGENT, {"query": "x"})],
             scenario={"stream": False, "create_response": {"id": ""}}))
    add(Case("completed run when the upstream does not stream (our polling fallback)", "AT §15.4, §7, §10",
             [call(1, AGENT, full_args)], scenario=dict(rich, stream=False)))
    add(Case("still running when the upstream does not stream (our polling fallback)", "AT §15.4, §7, §9",
             [call(1, AGENT, {"query": "slow"}, meta={"progressToken": "fb"})],
             scenario={"stream": False, "duration_ms": 60000}))
    add(Case("completed run with the event stream cut after 2 events (resume)", "AT §15.4",
             [call(1, AGENT, {"query": "x"})], scenario=dict(rich, stream_drop_after=2, duration_ms=500)))
    add(Case("completed run with the event stream cut and no resume (polling fallback)", "AT §15.4",
             [call(1, AGENT, {"query": "x"})],
             scenario=dict(rich, stream_drop_after=2, resume=False, duration_ms=500)))
    add(Case("completed run whose stream terminal event is not full", "AT §15.4",
             [call(1, AGENT, {"query": "x"})], scenario=dict(rich, stream_terminal_full=False)))
    add(Case("create: 2xx body that is not JSON", "AT §15.6",
             [In(call(1, AGENT, {"query": "x"}), "invalid-2xx-json")],
             faults=[{"route": "create", "kind": "invalid_json"}]))
    add(Case("create: 2xx body that is a JSON array", "AT §15.6",
             [In(call(1, AGENT, {"query": "x"}), "invalid-2xx-json")],
             faults=[{"route": "create", "kind": "non_object_json"}]))
    add(Case("create: oversized error body", "AT §6.4",
             [call(1, AGENT, {"query": "x"})],
             faults=[{"route": "create", "kind": "oversized", "status": 500, "bytes": 33554433}]))

    add(Case("result: GET 401 (response_id suffix)", "AT §6.5, §15.1",
             [call(1, RESULT, {"response_id": "{RUN}"})], seeds=[Seed("RUN", {"duration_ms": 60000})],
             faults=[{"route": "get", "status": 401, "json": {"error": {"message": "Invalid API key", "code": 401}}}]))
    add(Case("result: unknown id (404 from upstream)", "AT §6.5, §15.1",
             [In(call(1, RESULT, {"response_id": "resp_doesnotexist000000000"}), "no-such-run")]))
    add(Case("result: GET redirect refused", "AT §6.4",
             [call(1, RESULT, {"response_id": "{RUN}"})], seeds=[Seed("RUN", {"duration_ms": 60000})],
             faults=[{"route": "get", "kind": "redirect", "status": 301}]))
    add(Case("result: wait_seconds 0 with one transient 503", "AT §15.5",
             [In(call(1, RESULT, {"response_id": "{RUN}"}), "min-check-budget")],
             seeds=[Seed("RUN", {"duration_ms": 0}, True)], faults=[{"route": "get", "status": 503}]))
    add(Case("result: 2xx body that is not JSON", "AT §15.6",
             [In(call(1, RESULT, {"response_id": "{RUN}"}), "invalid-2xx-json")],
             seeds=[Seed("RUN", {"duration_ms": 60000})], faults=[{"route": "get", "kind": "invalid_json"}]))
    add(Case("result: body of exactly 32 MiB (accepted)", "AT §6.4",
             [call(1, RESULT, {"response_id": "{RUN}"})], seeds=[Seed("RUN", {"duration_ms": 60000})],
             faults=[{"route": "get", "kind": "oversized", "bytes": 33554432}], timeout=120))
    add(Case("result: chunked body one byte over 32 MiB (refused)", "AT §6.4",
             [call(1, RESULT, {"response_id": "{RUN}"})], seeds=[Seed("RUN", {"duration_ms": 60000})],
             faults=[{"route": "get", "kind": "oversized", "bytes": 33554433, "chunked": True}], timeout=120))
    add(Case("result: status_sequence with a non-string status", "AT §7, §10.5",
             [call(1, RESULT, {"response_id": "{RUN}"})],
             seeds=[Seed("RUN", {"duration_ms": 60000, "status_sequence": [5]})]))

    add(Case("notifications/cancelled during a wait", "AT §15.3, MP §9.2", [
        In(call(7, AGENT, {"query": "cancel me"}), "cancelled-wait"),
        Pause(0.7),
        note("notifications/cancelled", {"requestId": 7, "reason": "user"}),
        note("notifications/cancelled", {"requestId": "7"}),
        req(8, "ping"),
    ], scenario={"duration_ms": 60000}))

    return cs


# =============================================================================
# Running one side
# =============================================================================

PEER_PY = sys.executable
PEER_LAUNCHER = str(HERE / "peer_launcher.py")


@dataclass
class Side:
    name: str
    fake: FakeUpstream

    def command(self) -> list[str]:
        return [our_binary()] if self.name == "ours" else [PEER_PY, PEER_LAUNCHER]

    def env(self, case: Case) -> dict[str, str]:
        common = {"PERPLEXITY_API_KEY": DUMMY_KEY, "PERPLEXITY_AGENT_WAIT_SECONDS": str(W)}
        if self.name == "ours":
            # The peer has no rate limit: give ours a bucket the cases cannot drain.
            common.update({"PERPLEXITY_API_BASE": self.fake.base_url, "PERPLEXITY_TOOLS": "lifecycle",
                           "PERPLEXITY_RATE_BURST": "100000", "PERPLEXITY_RATE_PER_MINUTE": "1000000"})
        else:
            common.update({"INTEROP_PEER_API_BASE": self.fake.base_url})
        common.update(case.env)
        return base_env(common, drop=case.drop_env)


@dataclass
class Outcome:
    frames: list = field(default_factory=list)  # parsed JSON (or {"__raw__": str})
    stderr: str = ""
    rc: int | None = None
    timed_out: bool = False
    requests: list = field(default_factory=list)
    seeds: dict = field(default_factory=dict)
    elapsed: float = 0.0
    error: str | None = None


def to_bytes(x: Any) -> bytes:
    if isinstance(x, In):
        x = x.line
    return x if isinstance(x, bytes) else x.encode("utf-8")


def run_side(side: Side, case: Case) -> Outcome:
    out = Outcome()
    try:
        side.fake.reset()
        for seed in case.seeds:
            side.fake.control("POST", "scenario", seed.scenario or {})
            rid = side.fake.create_run()
            out.seeds[seed.name] = rid
        for seed in case.seeds:
            if seed.terminal:
                side.fake.wait_terminal(out.seeds[seed.name])
        side.fake.control("POST", "scenario", case.scenario or {})
        if case.faults:
            side.fake.control("POST", "faults", case.faults)
        side.fake.clear_requests()

        chunks: list = []
        for line in case.lines:
            if isinstance(line, Pause):
                chunks.append(line)
                continue
            b = to_bytes(line)
            for name, rid in out.seeds.items():
                b = b.replace(("{" + name + "}").encode(), rid.encode())
            chunks.append(b + b"\n")
        if not case.final_newline and chunks and isinstance(chunks[-1], bytes):
            chunks[-1] = chunks[-1][:-1]
        t0 = time.monotonic()
        proc = subprocess.Popen(side.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=side.env(case))
        got: dict[str, bytes] = {}
        readers = [threading.Thread(target=lambda n=n, s=s: got.__setitem__(n, s.read()))
                   for n, s in (("out", proc.stdout), ("err", proc.stderr))]
        for r in readers:
            r.start()
        try:
            for c in chunks:
                if isinstance(c, Pause):
                    time.sleep(c.seconds)
                else:
                    proc.stdin.write(c)
                    proc.stdin.flush()
        except BrokenPipeError:
            pass
        finally:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            out.rc = proc.wait(timeout=case.timeout)
        except subprocess.TimeoutExpired:
            out.timed_out = True
            proc.kill()
            proc.wait()
        for r in readers:
            r.join()
        stdout, stderr = got.get("out", b""), got.get("err", b"")
        out.elapsed = time.monotonic() - t0
        out.stderr = stderr.decode("utf-8", "replace")
        for raw in stdout.split(b"\n"):
            if not raw.strip():
                continue
            try:
                out.frames.append(json.loads(raw.decode("utf-8")))
            except (ValueError, UnicodeDecodeError, RecursionError):
                out.frames.append({"__raw__": raw.decode("utf-8", "replace")})
        out.requests = side.fake.requests()
    except Exception as exc:  # noqa: BLE001
        out.error = f"{type(exc).__name__}: {exc}"
    return out


# =============================================================================
# Normalisation
# =============================================================================

NONCE_RE = re.compile(r"untrusted-web-content-[0-9a-f]{16}(?=>)")
RID_RE = re.compile(r"resp_[A-Za-z0-9]{24}")
PREAMBLE_RE = re.compile(r"(<untrusted-web-content-NONCE>\n)([^\n]*\n[^\n]*)(\n\n)")
# A failed or cancelled run's text ends with its id.
TERMINAL_RID_RE = re.compile(r" \(response_id: \S+\)\Z")
RID_SUFFIX_RE = re.compile(
    r" \u2014 run (?P<id>\S+) may still be running; collect it with "
    r'perplexity_agent_result\(response_id="(?P=id)"\) or stop it with '
    r'perplexity_agent_cancel\(response_id="(?P=id)"\)\.\Z'
)
NETKIND_RE = re.compile(r"network error \([^)]*\)")
# A "Sources:" block: lines "[N] <title> — <url>".
UNSEEN_PROGRESS = "working (Perplexity shows intermediate results only on the stream)"
SOURCES_RE = re.compile(r"(?m)^Sources:\n((?:\[\d+\] [^\n]*(?:\n|\Z))+)")


def _source_set(m: re.Match) -> str:
    lines = sorted({"[#] " + l.rsplit(" \u2014 ", 1)[-1] for l in m.group(1).splitlines() if l})
    return "Sources:\n" + "\n".join(lines) + ("\n" if m.group(1).endswith("\n") else "")
PROGRESS_MSG_RE = re.compile(
    r"\Astatus .+ after \d+s; "
    r"(no intermediate results yet|working \(Perplexity shows intermediate results only on the stream\)|\d+ search result\(s\) gathered(; \d+ page\(s\) fetched)?|\d+ page\(s\) fetched)\Z"
)


class Normaliser:
    def __init__(self, seeds: dict[str, str]) -> None:
        self.seeds = {v: "{" + k + "}" for k, v in seeds.items()}
        self.used: set[str] = set()
        self.notes: list[str] = []  # internal-check failures (ours)

    def text(self, s: str) -> str:
        for rid, ph in self.seeds.items():
            s = s.replace(rid, ph)
        s2 = RID_RE.sub("resp_<ID>", s)
        if s2 != s:
            self.used.add("response-id")
        s3 = NONCE_RE.sub("untrusted-web-content-NONCE", s2)
        if s3 != s2:
            self.used.add("nonce")
            m = PREAMBLE_RE.search(s3)
            if m:
                if "UNTRUSTED DATA" not in m.group(2):
                    self.notes.append("spotlight preamble lacks 'UNTRUSTED DATA'")
                s3 = PREAMBLE_RE.sub(r"\1<preamble>\3", s3)
                self.used.add("preamble")
        s4 = NETKIND_RE.sub("network error (<kind>)", s3)
        if s4 != s3:
            self.used.add("network-kind")
        s5 = SOURCES_RE.sub(_source_set, s4)
        if s5 != s4:
            self.used.add("source-numbers")
        s6 = s5.replace(UNSEEN_PROGRESS, "no intermediate results yet")
        if s6 != s5:
            self.used.add("unseen-progress")
        return s6

    def walk(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, list):
            return [self.walk(x) for x in v]
        if isinstance(v, dict):
            return {k: self.walk(x) for k, x in v.items()}
        return v

    def frame(self, f: dict, side: str) -> dict:
        f = copy.deepcopy(f)
        res = f.get("result")
        if isinstance(res, dict):
            if isinstance(res.get("serverInfo"), dict):
                res["serverInfo"] = "<serverInfo>"
                self.used.add("serverInfo")
            meta = res.get("_meta")
            if isinstance(meta, dict) and "io.modelcontextprotocol/serverInfo" in meta:
                meta["io.modelcontextprotocol/serverInfo"] = "<serverInfo>"
                self.used.add("serverInfo")
            if isinstance(res.get("instructions"), str):
                i = res["instructions"]
                ok = "perplexity_agent_result" in i and "perplexity_agent_cancel" in i
                res["instructions"] = "<instructions naming result+cancel>" if ok else f"<instructions MISSING names: {i!r}>"
                self.used.add("descriptions")
            if isinstance(res.get("tools"), list):
                for t in res["tools"]:
                    if not isinstance(t, dict):
                        continue
                    if "description" in t:
                        t["description"] = "<description>"
                        self.used.add("descriptions")
                    props = (t.get("inputSchema") or {}).get("properties") or {}
                    ours_bounds = {"query": 16384, "preset": 64}
                    for pname, bound in ours_bounds.items():
                        p = props.get(pname)
                        if isinstance(p, dict) and p.get("maxLength") == bound:
                            del p["maxLength"]
                            self.used.add("bounds")
                    items = (props.get("domains") or {}).get("items") if isinstance(props.get("domains"), dict) else None
                    if isinstance(items, dict) and items.get("maxLength") == 253:
                        del items["maxLength"]
                        self.used.add("bounds")
                    for pname, p in props.items():
                        if isinstance(p, dict) and isinstance(p.get("description"), str):
                            d = p["description"]
                            if pname == "wait_seconds":
                                p["description"] = "<description: names budget=%s, CLAMPED=%s>" % (
                                    bool(re.search(r"\b%s ?s\b" % re.escape(str(p.get("maximum"))), d)),
                                    "CLAMPED" in d)
                            else:
                                p["description"] = "<description>"
        return self.walk(f)


def strip_init_extras(ours: dict, peer: dict, used: set) -> None:
    """Documented: our legacy initialize adds instructions + logging capability."""
    ro, rp = ours.get("result"), peer.get("result")
    if not (isinstance(ro, dict) and isinstance(rp, dict) and "protocolVersion" in ro):
        return
    if "instructions" in ro and "instructions" not in rp:
        del ro["instructions"]
        used.add("initialize-extras")
    caps = ro.get("capabilities")
    if isinstance(caps, dict) and caps.get("logging") == {} and "logging" not in (rp.get("capabilities") or {}):
        del caps["logging"]
        used.add("initialize-extras")


def strip_surfaces(ours: dict, peer: dict, used: set) -> None:
    """Documented: we also advertise resources, prompts and completions."""
    ro, rp = ours.get("result"), peer.get("result")
    if not (isinstance(ro, dict) and isinstance(rp, dict)):
        return
    caps, peer_caps = ro.get("capabilities"), rp.get("capabilities")
    if not (isinstance(caps, dict) and isinstance(peer_caps, dict)):
        return
    for name in ("resources", "prompts", "completions"):
        if caps.get(name) == {} and name not in peer_caps:
            del caps[name]
            used.add("surfaces")


def strip_rid_suffix(ours: dict, peer: dict, used: set) -> None:
    """Documented (AT §15.1): ours appends the response_id to errors once a run exists."""
    to, tp = _text([ours]), _text([peer])
    if to is None or tp is None or to == tp:
        return
    m = RID_SUFFIX_RE.search(to) or TERMINAL_RID_RE.search(to)
    if m and not (RID_SUFFIX_RE.search(tp) or TERMINAL_RID_RE.search(tp)):
        ours["result"]["content"][0]["text"] = to[: m.start()]
        used.add("rid-suffix")


# =============================================================================
# Comparison
# =============================================================================

def id_key(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


@dataclass
class Diff:
    key: str
    input: str
    ours: list
    peer: list
    allow: str | None = None


def parse_input(line: Any) -> tuple[Any, bool]:
    """-> (parsed message or None, has_id)"""
    try:
        msg = json.loads(to_bytes(line).decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None, False
    return msg, isinstance(msg, dict) and "id" in msg


def short(x: Any, limit: int = 600) -> str:
    s = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)
    return s if len(s) <= limit else s[: limit - 20] + f"... [{len(s)} chars]"


def input_repr(line: Any) -> str:
    if isinstance(line, In):
        line = line.line
    if isinstance(line, bytes):
        return short(repr(line), 300)
    return short(line, 300)


def split_frames(frames: list) -> tuple[dict, list, list]:
    """-> ({id_key: [response frames]}, [progress notifications], [other frames])"""
    by_id: dict[str, list] = {}
    progress: list = []
    other: list = []
    for f in frames:
        if isinstance(f, dict) and "id" in f and "method" not in f and ("result" in f or "error" in f):
            by_id.setdefault(id_key(f["id"]), []).append(f)
        elif isinstance(f, dict) and f.get("method") == "notifications/progress" and "id" not in f:
            progress.append(f)
        else:
            other.append(f)
    return by_id, progress, other


def check_our_progress(progress: list, problems: list) -> None:
    by_tok: dict[str, list] = {}
    for f in progress:
        if set(f) != {"jsonrpc", "method", "params"} or not set(f.get("params") or {}) <= {
                "progressToken", "progress", "message"}:
            problems.append(f"our progress notification is shaped or has extra keys: {short(f)}")
        p = f.get("params") or {}
        by_tok.setdefault(id_key(p.get("progressToken")), []).append(p)
    for tok, ps in by_tok.items():
        vals = [p.get("progress") for p in ps]
        if not all(isinstance(v, (int, float)) for v in vals) or any(b <= a for a, b in zip(vals, vals[1:])):
            problems.append(f"our progress for token {tok} does not strictly increase: {vals}")
        if any("total" in p for p in ps):
            problems.append(f"our progress for token {tok} carries total")
        bad = [p.get("message") for p in ps if not (isinstance(p.get("message"), str) and PROGRESS_MSG_RE.match(p["message"]))]
        if bad:
            problems.append(f"our progress messages for token {tok} are not counts-only summaries: {bad}")


def upstream_summary(reqs: list, side: str, norm: Normaliser) -> tuple[list, int]:
    """Non-GET upstream requests, normalised; plus the count of all requests."""
    out = []
    for r in reqs:
        if r.get("method") == "GET":
            continue
        body = r.get("body_json")
        try:  # the raw body, to keep the key order (AT §3.2 fixes it)
            raw = json.loads(r.get("body") or "")
            if isinstance(raw, dict):
                body = raw
        except ValueError:
            pass
        if side == "peer" and isinstance(body, dict) and body.get("tools") == [{"type": "web_search"}]:
            body = {k: v for k, v in body.items() if k != "tools"}
            norm.used.add("bare-web-search")
        if side == "ours" and isinstance(body, dict) and body.get("stream") is True:
            body = {k: v for k, v in body.items() if k != "stream"}
            norm.used.add("request-pattern")
        auth = (r.get("headers") or {}).get("authorization")
        out.append({"method": r.get("method"), "path": norm.text(r.get("path") or ""),
                    "body_key_order": list(body) if isinstance(body, dict) else None,
                    "body": norm.walk(body) if body is not None else norm.text(r.get("body") or ""),
                    "auth_ok": auth == f"Bearer {DUMMY_KEY}"})
    out.sort(key=lambda x: json.dumps(x, sort_keys=True))
    return out, len(reqs)


def compare(case: Case, ours: Outcome, peer: Outcome) -> tuple[list[Diff], list[str], set]:
    problems: list[str] = []
    diffs: list[Diff] = []
    if ours.error or peer.error:
        problems.append(f"harness error: ours={ours.error} peer={peer.error}")
        return diffs, problems, set()
    if ours.timed_out:
        problems.append(f"our server did not exit within {case.timeout}s after EOF")
    if peer.timed_out:
        problems.append(f"peer did not exit within {case.timeout}s after EOF")
    if DUMMY_KEY in ours.stderr or any(DUMMY_KEY in json.dumps(f) for f in ours.frames):
        problems.append("the API key appears in our stdout/stderr")
    if ours.rc not in (0, None) and not ours.timed_out:
        problems.append(f"our server exited with status {ours.rc}: {ours.stderr[-500:]}")

    seeds = dict(ours.seeds)
    n_o, n_p = Normaliser(ours.seeds), Normaliser(peer.seeds)
    used: set = set()
    o_by, o_prog, o_other = split_frames(ours.frames)
    p_by, p_prog, p_other = split_frames(peer.frames)
    check_our_progress(o_prog, problems)

    # Inputs by id, and allowances.
    inputs_by_id: dict[str, Any] = {}
    allow_by_id: dict[str, str] = {}
    null_allows: list[str] = []
    order: list[str] = []
    for line in case.lines:
        if isinstance(line, Pause):
            continue
        msg, has_id = parse_input(line)
        allow = line.allow if isinstance(line, In) else None
        if has_id:
            k = id_key(msg["id"])
            inputs_by_id.setdefault(k, line)
            if allow:
                allow_by_id[k] = allow
            if k not in order:
                order.append(k)
        elif allow:
            null_allows.append(allow)
    for k in list(o_by) + list(p_by):
        if k not in order:
            order.append(k)

    parse_allowed: list[str] = []
    null_expected: list[str] = []
    for k in order:
        of = [n_o.frame(f, "ours") for f in o_by.get(k, [])]
        pf = [n_p.frame(f, "peer") for f in p_by.get(k, [])]
        for a, b in zip(of, pf):
            strip_init_extras(a, b, used)
            strip_surfaces(a, b, used)
            strip_rid_suffix(a, b, used)
        if k == "null":
            # id-null frames: order-insensitive (our replies may be concurrent), and
            # our documented -32700 answers to parse-kind allowances are reconciled here.
            of.sort(key=lambda f: json.dumps(f, sort_keys=True))
            pf.sort(key=lambda f: json.dumps(f, sort_keys=True))
            continue
        if of == pf:
            continue
        inp = inputs_by_id.get(k)
        inp_s = input_repr(inp) if inp is not None else "(no input with this id)"
        allow = allow_by_id.get(k)
        d = Diff(k, inp_s, of, pf)
        if allow and DOCUMENTED[allow].ok(of, pf):
            d.allow = allow
            if DOCUMENTED[allow].parse and of == []:
                parse_allowed.append(allow)
            elif DOCUMENTED[allow].null_frame is not None and of == []:
                null_expected.append(allow)
        diffs.append(d)

    of = sorted((n_o.frame(f, "ours") for f in o_by.get("null", [])), key=lambda f: json.dumps(f, sort_keys=True))
    pf = sorted((n_p.frame(f, "peer") for f in p_by.get("null", [])), key=lambda f: json.dumps(f, sort_keys=True))
    if of != pf:
        parse_err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error."}}
        trimmed = list(of)
        for _ in parse_allowed:
            if parse_err in trimmed:
                trimmed.remove(parse_err)
        for allow in null_expected:
            frame = DOCUMENTED[allow].null_frame
            if frame in trimmed:
                trimmed.remove(frame)
        # An id-less input whose documented answer is another id-null error than the
        # peer's -32700: ours stands in for the peer's parse error.
        for allow in null_allows:
            frame = DOCUMENTED[allow].null_frame
            if frame is not None and frame in trimmed:
                trimmed.remove(frame)
                trimmed.append(parse_err)
        trimmed.sort(key=lambda f: json.dumps(f, sort_keys=True))
        d = Diff("null", "(frames with id null: parse errors, non-objects, and requests sent with id null)", of, pf)
        if trimmed == pf and (parse_allowed or null_expected):
            d.allow = (parse_allowed or null_expected)[0]
        elif null_allows and trimmed == pf:
            d.allow = null_allows[0]
        diffs.append(d)

    # Other (non-response) frames.
    oo = [n_o.frame(f, "ours") for f in o_other]
    po = [n_p.frame(f, "peer") for f in p_other]
    if oo != po:
        diffs.append(Diff("(other frames)", "(non-response frames, e.g. notifications)", oo, po))

    # Progress: which tokens got at least one notification.
    ot = sorted({id_key((f.get("params") or {}).get("progressToken")) for f in o_prog})
    pt = sorted({id_key((f.get("params") or {}).get("progressToken")) for f in p_prog})
    if o_prog or p_prog:
        used.add("progress")
    if ot != pt:
        diffs.append(Diff("(progress)", "progress tokens that received >= 1 notifications/progress",
                          [{"tokens": ot, "count": len(o_prog)}], [{"tokens": pt, "count": len(p_prog)}]))

    # Upstream requests.
    if case.compare_requests:
        ou, o_all = upstream_summary(ours.requests, "ours", n_o)
        pu, p_all = upstream_summary(peer.requests, "peer", n_p)
        if p_all:
            used.add("request-pattern")
        if ou != pu or (p_all == 0) != (o_all == 0):
            diffs.append(Diff("(upstream)", "non-GET upstream requests (create/cancel), and whether any request was made",
                              [{"non_get": ou, "total_requests": o_all}], [{"non_get": pu, "total_requests": p_all}]))

    used |= n_o.used | n_p.used
    problems += [f"ours: {n}" for n in n_o.notes] + [f"peer: {n}" for n in n_p.notes]
    return diffs, problems, used


def render_diff(d: Diff) -> str:
    lines = [f"  -- id {d.key}", f"     input: {d.input}"]
    to, tp = _text(d.ours), _text(d.peer)
    if to is not None and tp is not None and to != tp:
        other_o = copy.deepcopy(d.ours)
        other_p = copy.deepcopy(d.peer)
        other_o[0]["result"]["content"][0]["text"] = "<see text diff>"
        other_p[0]["result"]["content"][0]["text"] = "<see text diff>"
        if other_o != other_p:
            lines.append(f"     ours: {short(other_o)}")
            lines.append(f"     peer: {short(other_p)}")
        lines.append("     text diff (--- peer, +++ ours):")
        for ln in difflib.unified_diff(tp.splitlines(), to.splitlines(), "peer", "ours", lineterm="", n=1):
            lines.append("       " + short(ln, 400))
    else:
        lines.append(f"     ours: {short(d.ours, 1200) if d.ours else '(no frame)'}")
        lines.append(f"     peer: {short(d.peer, 1200) if d.peer else '(no frame)'}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", action="append", default=[])
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()

    tally = Tally("differential")
    all_cases = [c for c in cases() if not args.k or any(k.lower() in c.name.lower() for k in args.k)]
    fakes = {"ours": FakeUpstream(), "peer": FakeUpstream()}
    sides = {n: Side(n, f) for n, f in fakes.items()}
    undocumented: list[tuple[Case, Diff]] = []
    documented_seen: dict[str, int] = {}
    try:
        for case in all_cases:
            results: dict[str, Outcome] = {}

            def go(n: str) -> None:
                results[n] = run_side(sides[n], case)

            ts = [threading.Thread(target=go, args=(n,)) for n in sides]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            diffs, problems, used = compare(case, results["ours"], results["peer"])
            bad = [d for d in diffs if d.allow is None]
            ok = not bad and not problems
            timing = f"(ours {results['ours'].elapsed:.1f}s, peer {results['peer'].elapsed:.1f}s)"
            tally.check(f"{case.name} {timing}", ok)
            for u in sorted(used):
                documented_seen[u] = documented_seen.get(u, 0) + 1
            for d in diffs:
                if d.allow:
                    documented_seen["allow:" + d.allow] = documented_seen.get("allow:" + d.allow, 0) + 1
                    print(f"     documented [{d.allow}] {DOCUMENTED[d.allow].ref}: id {d.key}")
            if not ok:
                print(f"   reference: {case.ref}")
                for p in problems:
                    print(f"   PROBLEM: {p}")
                for d in bad:
                    print(render_diff(d))
                    undocumented.append((case, d))
            elif args.v:
                for f in results["ours"].frames:
                    print("     ours:", short(f, 300))
    finally:
        for f in fakes.values():
            f.stop()

    print("\nDocumented differences observed (normalised or allowed):")
    for k, n in sorted(documented_seen.items()):
        doc = DOCUMENTED[k[6:]].ref + ": " + DOCUMENTED[k[6:]].why if k.startswith("allow:") else NORMALISERS_DOC.get(k, "")
        print(f"  {k} x{n} -- {doc}")
    print(f"\nUndocumented differences: {len(undocumented)}")
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
