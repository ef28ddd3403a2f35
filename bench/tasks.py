#!/usr/bin/env python3
"""MCP tasks: what a task costs, over stdio against the fake upstream
(loopback only; stdlib only).

  - `tasks/get` latency, p50/p99, on a working task and a completed one;
  - peak RSS of the server with 10,000 task records (created in batches under the
    1,024-in-flight cap, each run finishing at once) and with 1,000 tasks running;
  - upstream requests per task, against a client that polls `perplexity_agent_result`
    (wait_seconds 0) every 2 s for the same run length;
  - the CPU that waits for tasks' ends cost while nothing ends: 32 `subscriptions/listen`
    and 32 blocked `tasks/result` held open on one connection for --idle-seconds, for
    ours and, with --before PATH, another build measured in the same run.

    python3 bench/tasks.py --ours PATH --fake PATH [--gets 2000] [--records 10000]
                           [--before PATH] [--idle-seconds 10]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
import urllib.request

RUN_MS = 6000


def control(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + "/_control/" + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=30).read() or b"null")


class Server:
    def __init__(self, ours, base, store):
        env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PERPLEXITY_API_KEY": "pplx-bench-dummy",
               "PERPLEXITY_API_BASE": base, "PERPLEXITY_RATE_BURST": "100000",
               "PERPLEXITY_RATE_PER_MINUTE": "1000000", "PERPLEXITY_STORE_PATH": store}
        self.proc = subprocess.Popen([ours], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, bufsize=1 << 20)
        self.next = 0
        self.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "1"}})
        self.recv()

    def send(self, method, params):
        self.next += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        return self.next

    def recv(self):
        while True:
            msg = json.loads(self.proc.stdout.readline())
            if "id" in msg:
                return msg

    def request(self, method, params):
        self.send(method, params)
        return self.recv()

    def task(self, query, ttl=600000):
        r = self.request("tools/call", {"name": "perplexity_agent", "arguments": {"query": query},
                                        "task": {"ttl": ttl}})
        return r["result"]["task"]["taskId"]

    def rss_kib(self, field="VmHWM"):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def cpu_seconds(pid):
    """utime + stime of `pid`, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_waits(binary, base, store, seconds, waits=32):
    """CPU (cores) of one connection holding `waits` listens and `waits` blocked results
    (64 in all: one connection's cap)."""
    srv = Server(binary, base, store)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    tasks = [srv.task(f"idle{i}") for i in range(waits)]
    for t in tasks:
        srv.send("subscriptions/listen", {"notifications": {"taskIds": [t]}, "_meta": meta})
        srv.send("tasks/result", {"taskId": t})
    time.sleep(1)
    start = cpu_seconds(srv.proc.pid)
    time.sleep(seconds)
    cores = (cpu_seconds(srv.proc.pid) - start) / seconds
    srv.proc.kill()
    srv.proc.wait()
    return cores


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]


def get_latency(srv, task_id, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        srv.request("tasks/get", {"taskId": task_id})
        out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(out), pct(out, 0.99)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--gets", type=int, default=2000)
    ap.add_argument("--records", type=int, default=10000)
    ap.add_argument("--before", help="another build, measured beside ours for idle waits")
    ap.add_argument("--idle-seconds", type=float, default=10)
    a = ap.parse_args()
    fake = subprocess.Popen([a.fake, "--port", "0", "--scenario", json.dumps({"duration_ms": 600000})],
                            stdout=subprocess.PIPE, text=True)
    base = fake.stdout.readline().split()[-1]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        srv = Server(a.ours, base, os.path.join(tmp, "store.sqlite"))
        working = srv.task("working")
        p50, p99 = get_latency(srv, working, a.gets)
        rows.append(("tasks/get, a working task", f"p50 {p50:.3f} ms, p99 {p99:.3f} ms")); print(rows[-1], flush=True)
        before = srv.rss_kib("VmRSS")
        for i in range(1000):
            srv.send("tools/call", {"name": "perplexity_agent", "arguments": {"query": f"r{i}"},
                                    "task": {"ttl": 600000}})
        for _ in range(1000):
            srv.recv()
        time.sleep(1)
        rows.append(("RSS with 1,000 tasks running", f"{srv.rss_kib('VmRSS') / 1024:.1f} MiB "
                     f"(before: {before / 1024:.1f} MiB)"))
        srv.close()

        # 10,000 records: runs that finish at once, created in batches under the cap.
        control(base, "POST", "scenario", {"duration_ms": 0})
        srv = Server(a.ours, base, os.path.join(tmp, "records.sqlite"))
        done = None
        batch = 500
        for start in range(0, a.records, batch):
            for i in range(start, min(a.records, start + batch)):
                srv.send("tools/call", {"name": "perplexity_agent", "arguments": {"query": f"d{i}"},
                                        "task": {"ttl": 600000}})
            for _ in range(start, min(a.records, start + batch)):
                done = srv.recv()["result"]["task"]["taskId"]
            time.sleep(0.2)
        srv.request("tasks/result", {"taskId": done})
        p50, p99 = get_latency(srv, done, a.gets)
        rows.append((f"tasks/get, a completed task among {a.records:,}", f"p50 {p50:.3f} ms, p99 {p99:.3f} ms")); print(rows[-1], flush=True)
        rows.append((f"peak RSS after {a.records:,} task records", f"{srv.rss_kib() / 1024:.1f} MiB")); print(rows[-1], flush=True)
        srv.close()

        # Upstream requests for one run of RUN_MS: a task, against polling the result tool.
        control(base, "POST", "scenario", {"duration_ms": RUN_MS})
        srv = Server(a.ours, base, os.path.join(tmp, "upstream.sqlite"))
        control(base, "DELETE", "requests")
        task = srv.task("counted")
        while srv.request("tasks/get", {"taskId": task})["result"]["status"] == "working":
            time.sleep(2)
        via_task = len(control(base, "GET", "requests"))
        control(base, "DELETE", "requests")
        r = srv.request("tools/call", {"name": "perplexity_agent",
                                       "arguments": {"query": "polled", "wait": False}})
        found = re.search(r"resp_[A-Za-z0-9_-]+", r["result"]["content"][0]["text"])
        rid = found.group(0) if found else None
        polls = 0
        while rid:
            polls += 1
            t = srv.request("tools/call", {"name": "perplexity_agent_result",
                                           "arguments": {"response_id": rid, "wait_seconds": 0}})
            if "still running" not in t["result"]["content"][0]["text"]:
                break
            time.sleep(2)
        via_polling = len(control(base, "GET", "requests"))
        rows.append((f"upstream requests for one {RUN_MS // 1000} s run",
                     f"task: {via_task}; client polling perplexity_agent_result every 2 s: {via_polling}"))
        srv.close()

        # Waits for tasks' ends while nothing ends: the run lasts longer than the window.
        control(base, "POST", "scenario", {"duration_ms": 600000})
        for name, binary in [("ours", a.ours)] + ([("before", a.before)] if a.before else []):
            cores = idle_waits(binary, base, os.path.join(tmp, f"idle-{name}.sqlite"), a.idle_seconds)
            rows.append((f"CPU of 32 idle subscriptions/listen + 32 blocked tasks/result ({name})",
                         f"{cores:.4f} cores"))
            print(rows[-1], flush=True)
    fake.terminate()
    print("| MCP tasks | |")
    print("|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
