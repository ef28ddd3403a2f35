#!/usr/bin/env python3
"""deep_research's concurrency target: with 8 sub-questions and every search
taking 200 ms, the search stage must take <= 1.3x one search (they run at once), and
the whole call is search stage + report stage. Over stdio against the fake upstream
(loopback only; stdlib only). Medians over --runs calls.

    python3 bench/deep.py --ours PATH --fake PATH [--runs 5]
"""

import argparse
import json
import os
import statistics
import subprocess
import time
import urllib.request

SEARCH_MS = 200
REPORT_MS = 300


def control(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()

    report = {"answer": "A.", "key_findings": [], "open_questions": [],
              "claims": [{"text": "c", "urls": ["https://a.example/1"], "confidence": "high"}]}
    scenario = {"duration_ms": REPORT_MS, "answer": json.dumps(report),
                "search_results": [{"title": f"T{i}", "url": f"https://a.example/{i}", "snippet": "s"}
                                   for i in range(5)]}
    fake = subprocess.Popen([a.fake, "--port", "0", "--scenario", json.dumps(scenario)],
                            stdout=subprocess.PIPE, text=True)
    base = fake.stdout.readline().split()[-1]
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PERPLEXITY_API_KEY": "pplx-bench-dummy",
           "PERPLEXITY_API_BASE": base, "PERPLEXITY_RATE_BURST": "100000", "PERPLEXITY_TOOLS": "all",
           "PERPLEXITY_RATE_PER_MINUTE": "1000000", "PERPLEXITY_AGENT_WAIT_SECONDS": "60"}
    srv = subprocess.Popen([a.ours], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, env=env, bufsize=1 << 20)
    totals, searches = [], []
    for i in range(a.runs):
        control(base, "/_control/faults", [{"route": "search", "kind": "slow", "delay_ms": SEARCH_MS}] * 8)
        line = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "deep_research", "arguments": {"question": "q", "num_subquestions": 8},
            "_meta": {"progressToken": f"t{i}"}}}) + "\n"
        t0 = time.perf_counter()
        srv.stdin.write(line.encode())
        srv.stdin.flush()
        stage_two = None
        while True:
            msg = json.loads(srv.stdout.readline())
            if msg.get("method") == "notifications/progress":
                if "writing the report" in msg["params"].get("message", "") and stage_two is None:
                    stage_two = time.perf_counter() - t0
                continue
            assert msg["result"]["isError"] is False, msg
            break
        totals.append((time.perf_counter() - t0) * 1000)
        searches.append((stage_two or 0) * 1000)
    srv.stdin.close()
    srv.wait(timeout=10)
    fake.terminate()
    s, t = statistics.median(searches), statistics.median(totals)
    print(f"8 concurrent searches of {SEARCH_MS} ms each: search stage median {s:.0f} ms "
          f"({s / SEARCH_MS:.2f}x one search; target <= 1.3x)")
    print(f"whole call median {t:.0f} ms = search stage + report run ({REPORT_MS} ms upstream) "
          f"+ our overhead {t - s - REPORT_MS:.0f} ms")


if __name__ == "__main__":
    main()
