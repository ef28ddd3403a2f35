#!/usr/bin/env python3
"""Prompt storm over stdio: 10,000 `tools/call perplexity_agent` lines as fast as the
pipe takes them, with the guard fully on (default rate limit 60/min, burst 10, audit log
to a temporary file) and a `ping` every 500 calls. Reports how many calls passed / were
refused, whether refusals came back in request order, ping latency during the storm, and
peak RSS (VmHWM) before, during and after. Stdlib only; talks to 127.0.0.1 only.

    python3 bench/storm.py --ours PATH --fake PATH [--calls 10000]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time


def vmhwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--calls", type=int, default=10_000)
    a = ap.parse_args()

    fake = subprocess.Popen([a.fake, "--port", "0", "--scenario", '{"duration_ms":0}'],
                            stdout=subprocess.PIPE, text=True)
    base = fake.stdout.readline().split()[-1]
    tmp = tempfile.mkdtemp(prefix="pa-storm-")
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PERPLEXITY_API_KEY": "pplx-bench-dummy",
           "PERPLEXITY_API_BASE": base, "PERPLEXITY_AUDIT_LOG_PATH": os.path.join(tmp, "audit.jsonl")}
    srv = subprocess.Popen([a.ours], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, env=env, bufsize=0)
    srv.stdin.write(b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25"}}\n')
    srv.stdout.readline()
    rss_before = vmhwm_kib(srv.pid)

    sent_ping = {}
    ping_latency = []
    order = []
    results = {"ok": 0, "rate_limited": 0, "other": 0}
    rss_during = []
    done = threading.Event()

    def reader():
        for raw in srv.stdout:
            now = time.perf_counter()
            msg = json.loads(raw)
            mid = msg.get("id")
            if isinstance(mid, str) and mid.startswith("ping-"):
                ping_latency.append((now - sent_ping[mid]) * 1000)
                continue
            if isinstance(mid, int):
                order.append(mid)
                text = msg["result"]["content"][0]["text"]
                if text.startswith("Rate limit exceeded"):
                    results["rate_limited"] += 1
                elif not msg["result"]["isError"]:
                    results["ok"] += 1
                else:
                    results["other"] += 1
                if len(order) == a.calls:
                    done.set()
                    return

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    started = time.perf_counter()
    for i in range(a.calls):
        line = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                           "params": {"name": "perplexity_agent", "arguments": {"query": f"q{i}", "wait": False}}})
        srv.stdin.write(line.encode() + b"\n")
        if i % 500 == 499:
            pid = f"ping-{i}"
            sent_ping[pid] = time.perf_counter()
            srv.stdin.write(json.dumps({"jsonrpc": "2.0", "id": pid, "method": "ping"}).encode() + b"\n")
            rss_during.append(vmhwm_kib(srv.pid))
    done.wait(120)
    elapsed = time.perf_counter() - started
    rss_after = vmhwm_kib(srv.pid)
    srv.stdin.close()
    srv.wait(10)
    fake.terminate()
    audit_lines = sum(1 for _ in open(os.path.join(tmp, "audit.jsonl")))
    inversions = sum(1 for x, y in zip(order, order[1:]) if y < x)
    report = {
        "calls": a.calls,
        "answered": len(order),
        "passed": results["ok"],
        "rate_limited": results["rate_limited"],
        "other_errors": results["other"],
        "seconds_to_answer_all": round(elapsed, 3),
        "calls_per_second": round(len(order) / elapsed),
        "replies_out_of_request_order": inversions,
        "ping_latency_ms_median": round(statistics.median(ping_latency), 2) if ping_latency else None,
        "ping_latency_ms_max": round(max(ping_latency), 2) if ping_latency else None,
        "pings_answered": len(ping_latency),
        "vmhwm_kib_before": rss_before,
        "vmhwm_kib_during_max": max(filter(None, rss_during), default=None),
        "vmhwm_kib_after": rss_after,
        "audit_records": audit_lines,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
