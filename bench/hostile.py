#!/usr/bin/env python3
"""Memory under hostile input: what one client can make a server hold.

Measured per contender, in rounds whose order rotates (medians reported):

- dense stdio line: one 8 MB line of 4,000,000 zeros (`ping` with params {"x": [0,0,…]}),
  and one of 2,700,000 empty objects inside a tool argument: peak RSS (VmHWM) and its
  rise over the RSS before the line was sent. Every stdio contender (ours, the peers).
- 4 concurrent dense 8 MB HTTP bodies (authenticated, modern headers): peak RSS.
- 1,030 slow unauthenticated connections (`POST /mcp`, Content-Length 1,000,000, one
  byte of body, held open): how many were answered within 2 s, whether an authenticated
  `tools/list` and `/healthz` are answered meanwhile, and peak RSS.
- 64 unauthenticated clients sending 99.9 % of an 8 MB body: peak RSS.

Only 127.0.0.1 is contacted. Standard library only. Usage:

    python3 bench/hostile.py --ours after=PATH [--ours before=PATH] \
        [--py-venv bench/.work/venv] [--node NODE --node-pkg DIR] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import selectors
import socket
import statistics
import subprocess
import threading
import time

TOKEN = "bench-hostile-token-0123456789abcdef0123456789"
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}


def kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def mib(k: float) -> str:
    return f"{k / 1024:.1f}"


class Stdio:
    def __init__(self, argv: list[str], env: dict[str, str]):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        self.buf = b""

    def send(self, text: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(text.encode() + b"\n")
        self.p.stdin.flush()

    def line(self, timeout: float = 60) -> bytes | None:
        assert self.p.stdout is not None
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def until_id(self, id_: int, timeout: float = 60) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            raw = self.line(deadline - time.monotonic())
            if raw is None:
                return None
            try:
                frame = json.loads(raw)
            except ValueError:
                continue
            if frame.get("id") == id_:
                return frame
        return None

    def close(self) -> None:
        try:
            if self.p.stdin:
                self.p.stdin.close()
            self.p.wait(timeout=10)
        except Exception:
            self.p.kill()
            self.p.wait()


def dense_stdio(argv: list[str], env: dict[str, str], line: str) -> dict:
    s = Stdio(argv, env)
    try:
        s.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}}))
        if s.until_id(1) is None:
            return {"error": "no initialize answer"}
        s.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        time.sleep(0.3)
        before = kib(s.p.pid, "VmRSS")
        s.send(line)
        s.send('{"jsonrpc":"2.0","id":3,"method":"ping"}')
        alive = s.until_id(3, timeout=120) is not None
        peak = kib(s.p.pid, "VmHWM")
        return {"peak": peak, "rise": peak - before, "alive": alive}
    finally:
        s.close()


class Http:
    def __init__(self, binary: str, env: dict[str, str]):
        env = dict(env, PERPLEXITY_HTTP_AUTH_TOKEN=TOKEN)
        self.p = subprocess.Popen([binary, "serve", "--http", "--bind", "127.0.0.1:0"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, env=env, start_new_session=True)
        assert self.p.stderr is not None
        self.port = 0
        deadline = time.monotonic() + 10
        text = b""
        while time.monotonic() < deadline and b"/mcp" not in text:
            if select.select([self.p.stderr], [], [], 0.5)[0]:
                text += os.read(self.p.stderr.fileno(), 4096)
        marker = b"http://127.0.0.1:"
        self.port = int(text.split(marker, 1)[1].split(b"/", 1)[0])
        # Keep draining stderr so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.p.stderr is not None
        while os.read(self.p.stderr.fileno(), 65536):
            pass

    def request(self, head: str, body: bytes = b"", timeout: float = 60) -> tuple[int, bytes]:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        try:
            s.sendall(head.encode() + body)
            raw = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                raw += chunk
            status = int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/") else 0
            return status, raw
        except OSError:
            return 0, b""
        finally:
            s.close()

    def head(self, method: str, path: str, length: int, auth: bool, extra: str = "") -> str:
        a = f"Authorization: Bearer {TOKEN}\r\n" if auth else ""
        return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nConnection: close\r\n"
                f"{a}{extra}Content-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n")

    def tools_list(self, body: bytes | None = None) -> int:
        body = body or json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                   "params": {"_meta": META}}).encode()
        extra = f"MCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/list\r\n"
        return self.request(self.head("POST", "/mcp", len(body), True, extra), body)[0]

    def close(self) -> None:
        self.p.terminate()
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def dense_http(binary: str, env: dict[str, str]) -> dict:
    h = Http(binary, env)
    try:
        zeros = ",".join(["0"] * 4_000_000)
        body = ('{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":%s,"x":[%s]}}'
                % (json.dumps(META), zeros)).encode()
        statuses: list[int] = []
        threads = [threading.Thread(target=lambda: statuses.append(h.tools_list(body))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"peak": kib(h.p.pid, "VmHWM"), "statuses": sorted(statuses),
                "alive": h.tools_list() == 200}
    finally:
        h.close()


def slow_unauth(binary: str, env: dict[str, str], n: int = 1030) -> dict:
    h = Http(binary, env)
    socks: list[socket.socket] = []
    try:
        head = h.head("POST", "/mcp", 1_000_000, False).encode() + b"{"
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", h.port), timeout=10)
            s.sendall(head)
            socks.append(s)
        answered = 0
        deadline = time.monotonic() + 2
        # epoll: select() stops at descriptor 1024.
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        pending = len(socks)
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
                try:
                    if key.fileobj.recv(4096).startswith(b"HTTP/1.1 401"):
                        answered += 1
                except OSError:
                    pass
                sel.unregister(key.fileobj)
                pending -= 1
        sel.close()
        t0 = time.monotonic()
        auth = h.tools_list()
        auth_ms = (time.monotonic() - t0) * 1000
        health = h.request(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{h.port}\r\nConnection: close\r\n\r\n")[0]
        return {"peak": kib(h.p.pid, "VmHWM"), "answered": answered, "auth": auth,
                "auth_ms": auth_ms, "healthz": health}
    finally:
        for s in socks:
            s.close()
        h.close()


def unauth_bodies(binary: str, env: dict[str, str], n: int = 64) -> dict:
    h = Http(binary, env)
    size = 8 * 1024 * 1024 - 1024
    sent = int(size * 0.999)
    chunk = b"0," * (1 << 16)
    socks: list[socket.socket] = []

    def push() -> None:
        s = socket.create_connection(("127.0.0.1", h.port), timeout=30)
        socks.append(s)
        try:
            s.sendall(h.head("POST", "/mcp", size, False).encode())
            left = sent
            while left > 0:
                n_ = s.send(chunk[: min(left, len(chunk))])
                left -= n_
        except OSError:
            pass  # refused and closed: that is the point

    try:
        threads = [threading.Thread(target=push) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        time.sleep(0.5)
        return {"peak": kib(h.p.pid, "VmHWM"), "alive": h.tools_list() == 200}
    finally:
        for s in socks:
            s.close()
        h.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", action="append", required=True, help="LABEL=PATH (repeatable)")
    ap.add_argument("--py-venv")
    ap.add_argument("--node")
    ap.add_argument("--node-pkg")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))

    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
           "PERPLEXITY_API_KEY": "pplx-bench-dummy", "PERPLEXITY_BASE_URL": "http://127.0.0.1:9"}
    ours = [tuple(o.split("=", 1)) for o in a.ours]
    stdio: list[tuple[str, list[str]]] = [(label, [path]) for label, path in ours]
    if a.py_venv:
        stdio.append(("py peer", [os.path.join(a.py_venv, "bin", "perplexity-agent-mcp")]))
    if a.node and a.node_pkg:
        stdio.append(("node peer", [a.node, os.path.join(a.node_pkg, "dist", "index.js")]))

    zeros = '{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":[%s]}}' % ",".join(["0"] * 4_000_000)
    empties = ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"perplexity_agent",'
               '"arguments":{"query":"q","x":[%s]}}}' % ",".join(["{}"] * 2_700_000))
    samples: dict[tuple[str, str], list[dict]] = {}
    for r in range(a.rounds):
        order = stdio[r % len(stdio):] + stdio[: r % len(stdio)]
        for label, argv in order:
            samples.setdefault((label, "zeros"), []).append(dense_stdio(argv, env, zeros))
            samples.setdefault((label, "empties"), []).append(dense_stdio(argv, env, empties))
        for label, path in ours[r % len(ours):] + ours[: r % len(ours)]:
            samples.setdefault((label, "http4"), []).append(dense_http(path, env))
            samples.setdefault((label, "slow"), []).append(slow_unauth(path, env))
            samples.setdefault((label, "bodies"), []).append(unauth_bodies(path, env))
        print(f"round {r + 1}/{a.rounds} done", flush=True)

    def med(label: str, kind: str, field: str) -> float:
        vals = [s[field] for s in samples.get((label, kind), []) if field in s]
        return statistics.median(vals) if vals else float("nan")

    print(f"\nMedians of {a.rounds} rounds (MiB; peak = VmHWM, rise = peak − RSS just before the line).\n")
    print("| stdio, one 8 MB line | " + " | ".join(l for l, _ in stdio) + " |")
    print("|---|" + "---|" * len(stdio))
    for kind, name in (("zeros", "4,000,000 zeros"), ("empties", "2,700,000 empty objects in a tool argument")):
        print(f"| {name}: peak / rise | " + " | ".join(
            f"{mib(med(l, kind, 'peak'))} / {mib(med(l, kind, 'rise'))}" for l, _ in stdio) + " |")
    print()
    print("| HTTP | " + " | ".join(l for l, _ in ours) + " |")
    print("|---|" + "---|" * len(ours))
    print("| 4 concurrent dense 8 MB bodies: peak | " + " | ".join(mib(med(l, "http4", "peak")) for l, _ in ours) + " |")
    print("| 1,030 slow unauthenticated connections: peak | " + " | ".join(mib(med(l, "slow", "peak")) for l, _ in ours) + " |")
    print("| … of them answered (401) within 2 s | " + " | ".join(f"{med(l, 'slow', 'answered'):.0f}" for l, _ in ours) + " |")
    print("| … authenticated tools/list meanwhile: status, ms | " + " | ".join(
        f"{med(l, 'slow', 'auth'):.0f}, {med(l, 'slow', 'auth_ms'):.0f}" for l, _ in ours) + " |")
    print("| … /healthz meanwhile | " + " | ".join(f"{med(l, 'slow', 'healthz'):.0f}" for l, _ in ours) + " |")
    print("| 64 unauthenticated 99.9 % 8 MB bodies: peak | " + " | ".join(mib(med(l, "bodies", "peak")) for l, _ in ours) + " |")
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".work", "hostile.json"), "w") as f:
        json.dump({f"{k[0]}|{k[1]}": v for k, v in samples.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
