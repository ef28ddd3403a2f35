#!/usr/bin/env python3
"""Regenerates link/startup.order: the functions a server runs while it starts and serves
its first requests, which build.rs asks the linker (LLD) to place first in `.text`.

    python3 scripts/startup-order.py BINARY FAKE_PERPLEXITY [--out link/startup.order]

Why: the kernel maps a binary's code in 64 KiB windows around each page it touches, and
the few hundred functions a cold start runs are spread over the whole 18 MB of `.text`, so
a stdio session that answers two requests kept ~7 MiB of code resident. Placed
together, the same functions fit in a few hundred KiB. The order is a layout hint only:
a name that no longer exists (a dependency bump changes the mangled hashes) is skipped by
the linker and costs only resident memory, which bench/quick.py (run by .ci/run) shows —
rerun this script when its cold-start row grows.

How: `valgrind --tool=callgrind` (Debian's valgrind) runs the binary — the release build
as it is (its profile keeps the symbol table; never a stripped copy, and never a build
with another profile setting, whose mangled names differ) — through the sessions below
against a loopback fake-perplexity; every
function it records that the binary itself defines (`nm`) is listed, in the order the
profile first names it. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import http_bench  # noqa: E402  (the fake and the loopback HTTP helpers)

MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {}}


def callgrind(argv: list[str], env: dict, out: str, stdin: bytes | None = None,
              http: bool = False) -> None:
    cmd = ["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}",
           *argv]
    if not http:
        subprocess.run(cmd, input=stdin, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=300, check=False)
        return
    err = out + ".stderr"
    with open(err, "w") as e:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=e)
    try:
        port = None
        for _ in range(600):
            time.sleep(0.1)
            m = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", open(err).read())
            if m:
                port = int(m.group(1))
                break
        if port is None:
            raise SystemExit("startup-order: serve --http did not start under valgrind")
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {"Authorization": f"Bearer {env['PERPLEXITY_HTTP_AUTH_TOKEN']}",
                   "MCP-Protocol-Version": "2026-07-28", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        for method, params, name in [
            ("tools/list", {"_meta": MODERN}, None),
            ("tools/call", {"name": "perplexity_agent", "arguments": {"query": "q"},
                            "_meta": MODERN}, "perplexity_agent"),
        ]:
            h = dict(headers, **{"Mcp-Method": method})
            if name:
                h["Mcp-Name"] = name
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
            http_bench.http("POST", url, body, h, timeout=120)
    finally:
        p.terminate()
        p.wait(60)


def stdio_lines(frames: list[dict]) -> bytes:
    return "".join(json.dumps(f) + "\n" for f in frames).encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("fake")
    ap.add_argument("--out", default=os.path.join(ROOT, "link", "startup.order"))
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="startup-order-")
    fake = http_bench.Fake(a.fake, tmp)
    try:
        env = http_bench.base_env({"PERPLEXITY_API_BASE": fake.base,
                                   "PERPLEXITY_HTTP_AUTH_TOKEN": secrets.token_hex(32)})
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "order", "version": "0"}}}
        inited = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        profiles = []
        # 1. The stdio cold start bench/quick.py measures: initialize + tools/list, EOF.
        profiles.append(os.path.join(tmp, "cold.out"))
        callgrind([a.binary], env, profiles[-1], stdio_lines(
            [init, inited, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]))
        # 2. A stdio research call (modern era), the commonest first request.
        profiles.append(os.path.join(tmp, "call.out"))
        callgrind([a.binary], env, profiles[-1], stdio_lines([
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "perplexity_agent", "arguments": {"query": "q"}, "_meta": MODERN}}]))
        # 3. serve --http: start, tools/list, a research call.
        profiles.append(os.path.join(tmp, "http.out"))
        callgrind([a.binary, "serve", "--http", "--bind", "127.0.0.1:0"], env, profiles[-1],
                  http=True)
    finally:
        fake.stop()

    defined = set()
    nm = subprocess.run(["nm", "--defined-only", a.binary], capture_output=True, text=True,
                        check=True).stdout
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            defined.add(parts[2])
    order: list[str] = []
    seen: set[str] = set()
    name_re = re.compile(r"^c?fn=\(\d+\) (\S+)")
    for path in profiles:
        with open(path, errors="replace") as f:
            for line in f:
                m = name_re.match(line)
                if m and m.group(1) in defined and m.group(1) not in seen:
                    seen.add(m.group(1))
                    order.append(m.group(1))
    if len(order) < 100:
        raise SystemExit(f"startup-order: only {len(order)} functions found: is the binary "
                         "a release build with symbols?")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(order) + "\n")
    print(f"startup-order: {len(order)} functions written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
