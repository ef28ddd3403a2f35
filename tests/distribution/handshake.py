"""Both MCP eras through an installed launcher: the check every packaging test shares.

    python3 handshake.py [--env K=V ...] -- COMMAND [ARG...]        # stdio
    python3 handshake.py --http URL --token TOKEN                      # Streamable HTTP

stdio: one child per era (a launcher must start the real server each time):
  legacy  - `initialize` (protocolVersion 2025-11-25), `notifications/initialized`,
            `tools/list`;
  modern  - `server/discover` then `tools/list`, each with the 2026-07-28 `_meta`
            (the frames tests/interop/differential.py uses).
HTTP: the same two conversations against URL (legacy with its Mcp-Session-Id, modern
stateless with the MCP-Protocol-Version / Mcp-Method headers), loopback only.

Passes when each era's tools/list names the product's tools and the server reports the
expected version (VERSION env, else Cargo.toml's). Prints one line per check and exits
non-zero on the first failure, naming it. HANDSHAKE_TIMEOUT (seconds, default 60) bounds
each reply; HANDSHAKE_TOOLS_OUT=FILE also writes the tool names there. Standard library
only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[2]
LEGACY, MODERN = "2025-11-25", "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
# A few tools every default configuration offers (the full list is tests/interop's job).
MUST_HAVE = {"perplexity_agent", "perplexity_agent_result", "perplexity_search", "fetch_url"}
TIMEOUT = float(os.environ.get("HANDSHAKE_TIMEOUT", "60"))


def cargo_version() -> str:
    text = (REPO / "Cargo.toml").read_text()
    m = re.search(r'^\[package\]\s*$.*?^version\s*=\s*"([^"]+)"', text, re.S | re.M)
    if not m:
        sys.exit("handshake.py: no [package] version in Cargo.toml")
    return m.group(1)


def fail(msg: str) -> None:
    print(f"FAIL {msg}", flush=True)
    sys.exit(1)


def ok(msg: str) -> None:
    print(f"ok   {msg}", flush=True)


def check_tools(era: str, reply: dict) -> None:
    tools = {t.get("name") for t in (reply.get("result") or {}).get("tools", [])}
    missing = MUST_HAVE - tools
    if missing:
        fail(f"{era} tools/list lacks {sorted(missing)}: {json.dumps(reply)[:300]}")
    ok(f"{era} tools/list: {len(tools)} tools")
    if os.environ.get("HANDSHAKE_TOOLS_OUT"):
        Path(os.environ["HANDSHAKE_TOOLS_OUT"]).write_text("\n".join(sorted(tools)) + "\n")


def check_server_info(era: str, result: dict, version: str) -> None:
    # 2025-11-25 puts it in the result; 2026-07-28 in the result's _meta.
    info = result.get("serverInfo") or (result.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
    if info.get("name") != "perplexity-agent" or info.get("version") != version:
        fail(f"{era} serverInfo is {info}, expected perplexity-agent {version}")
    ok(f"{era} serverInfo perplexity-agent {version}")


class Stdio:
    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, env=env, text=True)
        except OSError as exc:
            fail(f"cannot start {argv[0]}: {exc}")
        self.err: list[str] = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()

    def send(self, frame: dict) -> None:
        self.proc.stdin.write(json.dumps(frame) + "\n")
        self.proc.stdin.flush()

    def recv(self, want_id: object) -> dict:
        box: list[str] = []
        t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        while True:
            t.start()
            t.join(TIMEOUT)
            if not box:
                self.close()
                fail(f"no reply to id {want_id} within {TIMEOUT:.0f}s; stderr: {''.join(self.err)[-500:]}")
            line = box.pop()
            if not line:
                self.close()
                fail(f"the server exited (status {self.proc.wait()}) before answering id {want_id}; "
                     f"stderr: {''.join(self.err)[-500:]}")
            try:
                frame = json.loads(line)
            except ValueError:
                self.close()
                fail(f"stdout line is not JSON: {line[:200]!r}")
            if frame.get("id") == want_id and "method" not in frame:
                if "result" not in frame:
                    self.close()
                    fail(f"id {want_id} answered without a result: {line[:300]}")
                return frame
            t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)

    def close(self) -> int:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def stdio(argv: list[str], env: dict[str, str], version: str) -> None:
    s = Stdio(argv, env)
    s.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {},
                       "clientInfo": {"name": "distribution-test", "version": "1"}}})
    init = s.recv(1)["result"]
    if init.get("protocolVersion") != LEGACY:
        fail(f"legacy initialize negotiated {init.get('protocolVersion')}, expected {LEGACY}")
    check_server_info("legacy", init, version)
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    check_tools("legacy", s.recv(2))
    rc = s.close()
    if rc != 0:
        fail(f"legacy: the server exited {rc} at end of input")
    ok("legacy: clean exit at end of input")

    s = Stdio(argv, env)
    s.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}})
    disc = s.recv(1)["result"]
    versions = disc.get("supportedVersions") or []
    if MODERN not in versions:
        fail(f"modern server/discover does not offer {MODERN}: {json.dumps(disc)[:300]}")
    check_server_info("modern", disc, version)
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}})
    check_tools("modern", s.recv(2))
    rc = s.close()
    if rc != 0:
        fail(f"modern: the server exited {rc} at end of input")
    ok(f"modern: clean exit at end of input (offers {', '.join(versions)})")


def http(url: str, token: str, version: str) -> None:
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        fail(f"refusing non-loopback URL {url!r}")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def post(body: dict, headers: dict[str, str]) -> tuple[dict, dict]:
        req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
        for k, v in {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream", **headers}.items():
            req.add_header(k, v)
        try:
            with opener.open(req, timeout=TIMEOUT) as resp:
                raw = resp.read().decode()
                hdrs = {k.lower(): v for k, v in resp.headers.items()}
        except Exception as exc:  # noqa: BLE001 - any failure is the check's failure
            fail(f"POST {body.get('method')} to {url}: {exc}")
        if hdrs.get("content-type", "").startswith("text/event-stream"):
            data = [ln[5:].strip() for ln in raw.splitlines() if ln.startswith("data:")]
            raw = next((d for d in data if '"id"' in d), "{}")
        frame = json.loads(raw or "{}")
        if "error" in frame:
            fail(f"{body.get('method')} answered with an error: {frame['error']}")
        return frame, hdrs

    init, hdrs = post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": LEGACY, "capabilities": {},
                                  "clientInfo": {"name": "distribution-test", "version": "1"}}}, {})
    check_server_info("legacy http", init["result"], version)
    session = hdrs.get("mcp-session-id")
    if not session:
        fail("legacy http initialize returned no Mcp-Session-Id")
    common = {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, common)
    check_tools("legacy http", post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, common)[0])

    modern = {"MCP-Protocol-Version": MODERN}
    disc, _ = post({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}},
                   {**modern, "Mcp-Method": "server/discover"})
    check_server_info("modern http", disc["result"], version)
    check_tools("modern http", post({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}},
                                    {**modern, "Mcp-Method": "tools/list"})[0])


def main(argv: list[str]) -> None:
    version = os.environ.get("VERSION") or cargo_version()
    if argv[:1] == ["--http"] and len(argv) == 4 and argv[2] == "--token":
        http(argv[1], argv[3], version)
        return
    extra: dict[str, str] = {}
    while argv and argv[0] == "--env":
        k, _, v = argv[1].partition("=")
        extra[k] = v
        argv = argv[2:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.exit("usage: handshake.py [--env K=V ...] -- COMMAND [ARG...]  |  --http URL --token TOKEN")
    # A clean environment: no inherited PERPLEXITY_* settings, no proxies; the key is a
    # short dummy (no call here reaches an upstream).
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
           "LANG": "C.UTF-8", "NO_PROXY": "*", "PERPLEXITY_API_KEY": "pplx-test-key", **extra}
    stdio(argv[1:], env, version)


if __name__ == "__main__":
    main(sys.argv[1:])
