#!/usr/bin/env python3
"""User-space instructions and allocations per HTTP `tools/list`, counted by callgrind:
the figure that does not move between machines or runs, for telling whether a change made
a request cheaper (CPU time per request, bench/http.sh, moves by ±10 % on a shared machine).

    python3 bench/instructions.py --ours BIN [--ours OTHER_BIN ...] --fake FAKE --loadgen LOADGEN

Each binary runs `serve --http` with one worker under `valgrind --tool=callgrind`
(Debian's valgrind), gets 3 s of authenticated 2026-07-28 `tools/list` from
`bench/loadgen` (8 connections) to warm up, has its counters zeroed, gets 6 s more, and
is dumped: instructions (Ir) and calls to malloc, divided by the requests answered. The
kernel's share (the loopback TCP, about half of the real CPU) is not counted, and valgrind
reports no SHA extensions, so the token's SHA-256 runs in software here (~7k Ir of a
request; a few hundred cycles natively). Compare binaries in one run; the absolute figure
is a property of this harness. Loopback only; stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_bench  # noqa: E402  (the fake, process handling, the loadgen's request spec)


def measure(binary: str, a, fake: http_bench.Fake, tmp: str, tag: str) -> dict:
    token = secrets.token_hex(32)
    env = http_bench.base_env({
        "PERPLEXITY_API_BASE": fake.base, "PERPLEXITY_HTTP_AUTH_TOKEN": token,
        "PERPLEXITY_HTTP_WORKERS": "1", "PERPLEXITY_RATE_BURST": "100000",
        "PERPLEXITY_RATE_PER_MINUTE": "1000000", "PERPLEXITY_HTTP_MAX_IN_FLIGHT": "4096"})
    out = os.path.join(tmp, f"callgrind.{tag}")
    err = os.path.join(tmp, f"{tag}.stderr")
    p = http_bench.spawn(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          binary, "serve", "--http", "--bind", "127.0.0.1:0"], env, err)
    try:
        m = http_bench.wait_for_line(err, r"MCP over HTTP on http://127\.0\.0\.1:(\d+)/mcp", p, 120)
        spec = http_bench.throughput_spec("ours", argparse.Namespace(token=token))

        def load(seconds: float) -> dict:
            argv = http_bench.loadgen_argv(a, int(m.group(1)), spec, [
                "--mode", "throughput", "--connections", "8", "--warmup", "0",
                "--duration", str(seconds)])
            r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise http_bench.BenchError(f"loadgen: {r.stderr[-400:]}")
            return json.loads(r.stdout.strip().splitlines()[-1])

        load(3)
        subprocess.run(["callgrind_control", "-z", str(p.pid)], capture_output=True, check=True)
        done = load(6)
        subprocess.run(["callgrind_control", "-d", str(p.pid)], capture_output=True, check=True)
        dump = out + ".1"
        deadline = time.monotonic() + 30
        while not os.path.exists(dump) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        http_bench.stop(p)
    requests = done["ok"]
    if not requests or done["non_2xx"] or done["bad_body"]:
        raise http_bench.BenchError(f"{binary}: {done}")
    annotated = subprocess.run(["callgrind_annotate", "--tree=caller", "--threshold=100", dump],
                               capture_output=True, text=True, check=True).stdout
    total = int(re.search(r"^([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", annotated, re.M)
                .group(1).replace(",", ""))
    return {"requests": requests, "ir": total / requests,
            "mallocs": malloc_calls(annotated) / requests}


def malloc_calls(annotated: str) -> int:
    """Calls to glibc's malloc: the `(Nx)` of each caller line above its `*` line."""
    lines = annotated.splitlines()
    for i, line in enumerate(lines):
        if re.search(r"\*\s+\S*malloc\.c:malloc \[", line):
            calls, j = 0, i - 1
            while j >= 0 and "<" in lines[j]:
                found = re.search(r"\(([\d,]+)x\)", lines[j])
                calls += int(found.group(1).replace(",", "")) if found else 0
                j -= 1
            return calls
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours", action="append", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--loadgen", required=True)
    a = ap.parse_args()
    if not shutil.which("valgrind"):
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 1
    a.threads = 1
    tmp = tempfile.mkdtemp(prefix="instructions-")
    fake = http_bench.Fake(a.fake, tmp)
    try:
        print("| binary | requests | instructions per tools/list | mallocs per tools/list |")
        print("|---|---|---|---|")
        for i, binary in enumerate(a.ours):
            r = measure(binary, a, fake, tmp, str(i))
            print(f"| {binary} | {r['requests']:,} | {r['ir']:,.0f} | {r['mallocs']:.1f} |")
    finally:
        fake.stop()
        for pid in list(http_bench.LIVE):
            http_bench.kill_group(pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
