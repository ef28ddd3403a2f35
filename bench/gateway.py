#!/usr/bin/env python3
"""Gateway overhead: the same tool (server-everything's `echo`) called over stdio
directly, and through perplexity-agent's gateway (`mcp__ev__echo`), alternating rounds
of sequential calls so both see the same machine load. Reports the median round trip of
each and the difference (the target: ≤ 1 ms). Stdlib only; no network beyond the pipes.

    python3 bench/gateway.py --ours PATH --node DIR --everything JS [--calls 500 --rounds 5]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time


class Stdio:
    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, bufsize=0)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def request(self, method, params):
        self.next += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        self.p.stdin.write(line.encode() + b"\n")
        while True:
            frame = json.loads(self.p.stdout.readline())
            if frame.get("id") == self.next:
                return frame

    def timed_calls(self, tool, n):
        times = []
        for i in range(n):
            t = time.perf_counter()
            r = self.request("tools/call", {"name": tool, "arguments": {"message": f"m{i}"}})
            times.append(time.perf_counter() - t)
            assert not r["result"].get("isError"), r
        return times

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--node", required=True, help="directory holding node 22")
    ap.add_argument("--everything", required=True, help="server-everything's dist/index.js")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="pa-gw-bench-")
    env = {"PATH": a.node + ":/usr/bin:/bin", "PERPLEXITY_STORE_PATH": os.path.join(tmp, "store.sqlite"),
           "PERPLEXITY_GATEWAY_ALLOWED_COMMANDS": "node", "PERPLEXITY_GATEWAY_PATH": a.node,
           "PERPLEXITY_API_KEY": "pplx-bench-dummy", "PERPLEXITY_RATE_BURST": "100000",
           "PERPLEXITY_RATE_PER_MINUTE": "1000000"}
    subprocess.run([a.ours, "gateway", "add", "ev", "--command", "node", "--arg", a.everything,
                    "--arg", "stdio"], env=env, check=True, stdout=subprocess.DEVNULL)
    direct = Stdio([os.path.join(a.node, "node"), a.everything, "stdio"], {"PATH": env["PATH"]})
    ours = Stdio([a.ours], env)
    # Warm both (JIT, connections).
    direct.timed_calls("echo", 50)
    ours.timed_calls("mcp__ev__echo", 50)
    d, g = [], []
    for _ in range(a.rounds):
        d += direct.timed_calls("echo", a.calls)
        g += ours.timed_calls("mcp__ev__echo", a.calls)
    direct.close()
    ours.close()
    shutil.rmtree(tmp, ignore_errors=True)
    md, mg = statistics.median(d) * 1000, statistics.median(g) * 1000
    p99 = lambda xs: sorted(xs)[int(len(xs) * 0.99)] * 1000
    print(json.dumps({
        "calls_each": len(d),
        "direct_median_ms": round(md, 3), "gateway_median_ms": round(mg, 3),
        "overhead_median_ms": round(mg - md, 3),
        "direct_p99_ms": round(p99(d), 3), "gateway_p99_ms": round(p99(g), 3),
    }, indent=2))


if __name__ == "__main__":
    main()
