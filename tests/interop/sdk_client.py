"""Drive our stdio server with the official Python MCP SDK (`mcp` 2.3.0) in all three
connect modes, against a loopback fake upstream.

Reference: mcp-protocol.md §13.7 (expected versions and texts), agent-tools-behaviour.md
§1-§5 and §9-§11 (tool list, validation texts, progress, rendering, spotlighting).

API facts taken from the installed mcp 2.3.0 (not guessed):
  Client(server, *, mode='auto'|'legacy'|'2026-07-28', read_timeout_seconds=..., cache=...)
  Client.protocol_version / .server_info / .instructions (properties)
  Client.list_tools(), Client.send_ping(),
  Client.call_tool(name, arguments, read_timeout_seconds=None, progress_callback=None, *, meta=None)
  progress_callback: async (progress: float, total: float | None, message: str | None) -> None
  A JSON-RPC error reply is raised as mcp.MCPError (with .code).

Every mode runs twice: over stdio, and over Streamable HTTP (`serve --http` on
127.0.0.1, the bearer token supplied through an httpx client passed to
`streamable_http_client(url, http_client=...)`).

Usage: python sdk_client.py   (env: CARGO_TARGET_DIR or INTEROP_OUR_BIN / INTEROP_FAKE_BIN)
"""

from __future__ import annotations

import asyncio
import os
import re
import sys

import common
from common import TOOL_NAMES, FakeUpstream, Tally, http_server, our_binary

from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

HTTP_TOKEN = "interop-http-token-" + os.urandom(16).hex()

MODES = [("legacy", "2025-11-25"), ("auto", "2026-07-28"), ("2026-07-28", "2026-07-28")]
BOGUS_TEXT = "Unknown argument(s): bogus. Accepted: domains, fresh, preset, query, recency, wait."
MALFORMED_TEXT = "Malformed response_id. Expected the identifier returned by perplexity_agent."
ANSWER = "Interop answer from the fake."
SOURCES = [
    {"title": "Alpha page", "url": "https://alpha.example/a"},
    {"title": "Beta page", "url": "https://beta.example/b"},
]
EXPECTED_BODY = (
    f"{ANSWER}\n\nSources:\n"
    "[1] Alpha page \u2014 https://alpha.example/a\n"
    "[2] Beta page \u2014 https://beta.example/b"
)
SPOT_RE = re.compile(
    r"\A<untrusted-web-content-(?P<n>[0-9a-f]{16})>\n"
    r"(?P<l1>[^\n]+)\n(?P<l2>[^\n]+)\n\n"
    r"(?P<body>.*)\n"
    r"</untrusted-web-content-(?P=n)>(?:\n\nCost: [^\n]+)?\Z",
    re.S,
)
RID_RE = re.compile(r'perplexity_agent_result\(response_id="(resp_[A-Za-z0-9]+)"\)')
PROGRESS_MSG_RE = re.compile(
    r"\Astatus \S+ after \d+s; "
    r"(no intermediate results yet|working \(Perplexity shows intermediate results only on the stream\)|\d+ search result\(s\) gathered(; \d+ page\(s\) fetched)?|\d+ page\(s\) fetched)\Z"
)

T = Tally("sdk_client")


def text_of(result) -> str:
    if not result.content or getattr(result.content[0], "type", None) != "text":
        return repr(result.content)
    return result.content[0].text


def check_spotlight(label: str, text: str, expected_body: str) -> None:
    m = SPOT_RE.match(text)
    if not T.check(f"{label}: answer is spotlighted <untrusted-web-content-NONCE16>", m is not None,
                   f"got {text[:300]!r}"):
        return
    T.check(f"{label}: preamble says UNTRUSTED DATA", "UNTRUSTED DATA" in m["l2"] or "UNTRUSTED DATA" in m["l1"],
            f"got {m['l1']!r} / {m['l2']!r}")
    T.check(f"{label}: answer text and sources rendered exactly", m["body"] == expected_body,
            f"expected {expected_body!r}\n     got      {m['body']!r}")


def server_env(fake: FakeUpstream) -> dict:
    return common.server_env(fake, {"PERPLEXITY_HTTP_AUTH_TOKEN": HTTP_TOKEN})


def target(fake: FakeUpstream, url: str | None):
    if url is None:
        return StdioServerParameters(command=our_binary(), args=[], env=server_env(fake))
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {HTTP_TOKEN}"})
    return streamable_http_client(url, http_client=http)


async def run_mode(fake: FakeUpstream, mode: str, want_version: str, url: str | None = None) -> None:
    srv = target(fake, url)
    fake.reset({"answer": ANSWER, "sources": SOURCES})
    async with Client(srv, mode=mode, read_timeout_seconds=90) as c:
        p = f"[{mode}{' http' if url else ''}]"
        T.check(f"{p} negotiated protocol version {want_version}", c.protocol_version == want_version,
                f"got {c.protocol_version!r}")
        if mode != "2026-07-28":
            # A pinned mode synthesizes its DiscoverResult (no probe), so it has no
            # server info or instructions to check.
            info = c.server_info
            T.check(f"{p} serverInfo name/title", info is not None and info.name == "perplexity-agent"
                    and info.title == "Perplexity Agent", f"got {info!r}")
            instr = c.instructions or ""
            T.check(f"{p} instructions mention perplexity_agent_result and perplexity_agent_cancel",
                    "perplexity_agent_result" in instr and "perplexity_agent_cancel" in instr,
                    f"got {instr!r}")
            T.check(f"{p} capabilities declare tools", c.server_capabilities.tools is not None,
                    f"got {c.server_capabilities!r}")

        tools = (await c.list_tools()).tools
        T.check(f"{p} tools/list names", [t.name for t in tools] == TOOL_NAMES,
                f"got {[t.name for t in tools]}")
        by_name = {t.name: t for t in tools}
        if "perplexity_agent_result" in by_name:
            ws = by_name["perplexity_agent_result"].input_schema["properties"]["wait_seconds"]
            T.check(f"{p} wait_seconds maximum is the default wait budget 55", ws.get("maximum") == 55,
                    f"got {ws!r}")
        if "perplexity_agent" in by_name:
            ann = by_name["perplexity_agent"].annotations
            T.check(f"{p} perplexity_agent annotations readOnly=false destructive=false",
                    ann is not None and ann.read_only_hint is False and ann.destructive_hint is False,
                    f"got {ann!r}")

        if url and c.protocol_version == "2026-07-28":
            # Modern HTTP has no ping (mcp-protocol.md §3.2): 404 + -32601.
            try:
                await c.send_ping()
                T.check(f"{p} ping -> method not found", False, "got an answer")
            except MCPError as exc:
                T.check(f"{p} ping -> method not found", exc.code == -32601, f"got {exc.code} {exc}")
        else:
            try:
                await c.send_ping()
                T.check(f"{p} ping answered", True)
            except Exception as exc:  # noqa: BLE001
                T.check(f"{p} ping answered", False, f"{type(exc).__name__}: {exc}")

        # Unknown argument: isError result, never reaches the network.
        fake.clear_requests()
        r = await c.call_tool("perplexity_agent", {"query": "x", "bogus": 1})
        T.check(f"{p} unknown argument -> isError with exact text",
                r.is_error is True and text_of(r) == BOGUS_TEXT, f"got is_error={r.is_error} {text_of(r)!r}")

        # Malformed response_id (path traversal): isError, no network.
        r = await c.call_tool("perplexity_agent_result", {"response_id": "../etc/passwd"})
        T.check(f"{p} malformed response_id -> isError with exact text",
                r.is_error is True and text_of(r) == MALFORMED_TEXT, f"got is_error={r.is_error} {text_of(r)!r}")
        T.check(f"{p} validation failures made no upstream request", fake.requests() == [],
                f"got {len(fake.requests())} request(s)")

        # Unknown tool: JSON-RPC -32602 (raised by the SDK as MCPError).
        try:
            r = await c.call_tool("no_such_tool", {})
            T.check(f"{p} unknown tool -> JSON-RPC -32602", False, f"got a result: {r!r}")
        except MCPError as exc:
            T.check(f"{p} unknown tool -> JSON-RPC -32602", exc.code == -32602 and "no_such_tool" in str(exc),
                    f"got code={exc.code} {exc}")

        # A real successful run against the fake.
        r = await c.call_tool("perplexity_agent", {"query": "What is MCP?", "preset": "fast"})
        T.check(f"{p} perplexity_agent succeeds (isError false)", r.is_error is False,
                f"got is_error={r.is_error} {text_of(r)!r}")
        check_spotlight(f"{p} perplexity_agent", text_of(r), EXPECTED_BODY)
        creates = [q for q in fake.requests() if q["method"] == "POST" and q["path"] == "/v1/agent"]
        body = creates[0]["body_json"] if creates else None
        T.check(f"{p} create request body (input/preset/background, no tools)",
                isinstance(body, dict) and body.get("input") == "What is MCP?" and body.get("preset") == "fast"
                # No tools entry: the preset keeps its own tuned web_search (contract §5 row 7).
                and body.get("background") is True and "tools" not in body,
                f"got {body!r}")

        # Progress: the SDK supports a per-call progress_callback (it puts a
        # progressToken into params._meta).
        fake.reset({"answer": ANSWER, "sources": SOURCES, "duration_ms": 3500, "search_batches": 3,
                    "fetch_pages": 2})
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        r = await c.call_tool("perplexity_agent", {"query": "progress please"}, progress_callback=on_progress)
        T.check(f"{p} progress-token call succeeds", r.is_error is False, f"got {text_of(r)[:200]!r}")
        T.check(f"{p} progress notifications received", len(seen) >= 1, "got none")
        if seen:
            values = [s[0] for s in seen]
            T.check(f"{p} progress strictly increases", all(b > a for a, b in zip(values, values[1:])),
                    f"got {values}")
            T.check(f"{p} progress never carries total", all(s[1] is None for s in seen), f"got {seen}")
            bad = [s[2] for s in seen if not (s[2] and PROGRESS_MSG_RE.match(s[2]))]
            T.check(f"{p} progress messages are counts-only summaries", not bad, f"bad: {bad}")

        # Full lifecycle: start without waiting, collect, then cancel a terminal run.
        fake.reset({"answer": ANSWER, "sources": SOURCES, "duration_ms": 400})
        r = await c.call_tool("perplexity_agent", {"query": "later", "wait": False})
        m = RID_RE.search(text_of(r))
        T.check(f"{p} wait=false returns a response_id (isError false)", r.is_error is False and m is not None
                and "Progress: just submitted" in text_of(r), f"got {text_of(r)!r}")
        if m:
            rid = m.group(1)
            r = await c.call_tool("perplexity_agent_result", {"response_id": rid, "wait_seconds": 10})
            T.check(f"{p} perplexity_agent_result collects the answer", r.is_error is False, f"got {text_of(r)!r}")
            check_spotlight(f"{p} perplexity_agent_result", text_of(r), EXPECTED_BODY)
            r = await c.call_tool("perplexity_agent_cancel", {"response_id": rid})
            T.check(f"{p} cancel of a finished run -> 'is not running now' (isError false)",
                    r.is_error is False and text_of(r).startswith(f"Run {rid} is not running now \u2014 "),
                    f"got {text_of(r)!r}")

        # Cancel a running run.
        fake.reset({"duration_ms": 60000})
        rid = fake.create_run()
        r = await c.call_tool("perplexity_agent_cancel", {"response_id": rid})
        T.check(f"{p} cancel of a running run -> 'Cancellation requested'",
                r.is_error is False and text_of(r).startswith(f"Cancellation requested for {rid}."),
                f"got {text_of(r)!r}")


async def main() -> int:
    fake = FakeUpstream()
    try:
        for mode, version in MODES:
            try:
                await run_mode(fake, mode, version)
            except Exception as exc:  # noqa: BLE001 - a crash in one mode is a failed check
                T.check(f"[{mode}] session ran to completion", False, f"{type(exc).__name__}: {exc}")
        with http_server(server_env(fake)) as url:
            for mode, version in MODES:
                try:
                    await run_mode(fake, mode, version, url)
                except Exception as exc:  # noqa: BLE001
                    T.check(f"[{mode} http] session ran to completion", False, f"{type(exc).__name__}: {exc}")
            # Without the token, the SDK gets nowhere.
            try:
                async with Client(url, mode="auto", read_timeout_seconds=10) as c:
                    await c.list_tools()
                T.check("[http] no token -> refused", False, "connected without a token")
            except Exception as exc:  # noqa: BLE001
                def leaves(e: BaseException):
                    if isinstance(e, BaseExceptionGroup):
                        for sub in e.exceptions:
                            yield from leaves(sub)
                    else:
                        yield e
                texts = " | ".join(f"{type(e).__name__}: {e}" for e in leaves(exc))
                T.check("[http] no token -> the SDK cannot connect", True, texts[:300])
            # What it got, seen directly: 401 with a Bearer challenge.
            import urllib.error
            import urllib.request
            req = urllib.request.Request(url, data=b"{}", method="POST")
            try:
                urllib.request.urlopen(req, timeout=10)
                T.check("[http] no token -> 401 Bearer challenge", False, "accepted")
            except urllib.error.HTTPError as err:
                T.check("[http] no token -> 401 Bearer challenge",
                        err.code == 401 and err.headers.get("WWW-Authenticate", "").startswith("Bearer"),
                        f"got {err.code} {err.headers.get('WWW-Authenticate')!r}")
    finally:
        fake.stop()
    return T.finish()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
