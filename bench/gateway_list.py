#!/usr/bin/env python3
"""What one downstream server costs the clients of ours, for ours and, with --before PATH,
another build measured in the same run (stdlib only; no network beyond the pipes):

- its tool list: `fake-downstream --many-tools N` (N filler tools with 1 KB
  descriptions) behind the gateway, and our `tools/list` over stdio — its size in bytes
  and the server's peak RSS (VmHWM) after it;
- with --dense N, one result: its `dense` tool answering N zeros in `structuredContent`
  (2 bytes of text, ~80 bytes as a decoded value, each) — whether the call was refused,
  the peak RSS, and the RSS a second after it.

    python3 bench/gateway_list.py --ours PATH --downstream PATH [--before PATH] [--tools 10000]
    python3 bench/gateway_list.py --ours PATH --downstream PATH [--before PATH] --dense 1000000
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field + ":"))


def measure(binary, downstream, tools, runs, dense=0):
    """(tools/list bytes, downstream tools listed, VmHWM KiB, result, VmRSS KiB after),
    medians over `runs`."""
    samples = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            bin_dir = os.path.join(tmp, "bin")
            os.mkdir(bin_dir)
            shutil.copy(downstream, os.path.join(bin_dir, "fake-downstream"))
            env = {"PATH": os.environ.get("PATH", "/usr/bin"),
                   "PERPLEXITY_API_KEY": "pplx-bench-dummy",
                   "PERPLEXITY_API_BASE": "http://127.0.0.1:9",
                   "PERPLEXITY_STORE_PATH": os.path.join(tmp, "store.sqlite"),
                   "PERPLEXITY_GATEWAY_ALLOWED_COMMANDS": "fake-downstream",
                   "PERPLEXITY_GATEWAY_PATH": bin_dir,
                   "PERPLEXITY_GATEWAY_ALLOWED_ROOTS": tmp}
            extra = ["--arg", "--many-tools", "--arg", str(tools)] if tools else []
            subprocess.run([binary, "gateway", "add", "many", "--command", "fake-downstream"]
                           + extra, env=env, check=True, capture_output=True)
            p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, env=env, bufsize=0)
            steps = [
                ("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"}}),
                ("tools/list", {}),
            ]
            if dense:
                steps.append(("tools/call", {"name": "mcp__many__dense",
                                             "arguments": {"elements": dense}}))
            listing = None
            for i, (method, params) in enumerate(steps):
                p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                           "params": params}) + "\n").encode())
                while True:
                    line = p.stdout.readline()
                    frame = json.loads(line)
                    if frame.get("id") == i:
                        break
                if method == "tools/list":
                    listing = (line, frame)
            line, listed_frame = listing
            listed = sum(1 for t in listed_frame["result"]["tools"]
                         if t["name"].startswith("mcp__many__"))
            result = ""
            if dense:
                result = "refused" if frame["result"].get("isError") else "decoded"
            time.sleep(0.2)
            hwm = status_kib(p.pid, "VmHWM")
            time.sleep(1.0)
            after = status_kib(p.pid, "VmRSS")
            p.stdin.close()
            p.wait(timeout=20)
            samples.append((len(line), listed, hwm, result, after))
    samples.sort()
    return samples[len(samples) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--downstream", required=True, help="fake-downstream (with --many-tools)")
    ap.add_argument("--before", help="another build, measured in the same run")
    ap.add_argument("--tools", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dense", type=int, default=0,
                    help="call the downstream's dense tool for this many zeros (no filler tools)")
    a = ap.parse_args()
    builds = [("ours", a.ours)] + ([("before", a.before)] if a.before else [])
    if a.dense:
        print(f"| one result of {a.dense:,} zeros in structuredContent | the call | peak RSS | RSS 1 s after |")
        print("|---|---|---|---|")
        for name, binary in builds:
            _, _, hwm, result, after = measure(binary, a.downstream, 0, a.runs, a.dense)
            print(f"| {name} | {result} | {hwm / 1024:.1f} MiB | {after / 1024:.1f} MiB |", flush=True)
        return
    print(f"| {a.tools:,} downstream tools with 1 KB descriptions | tools/list | tools listed | peak RSS |")
    print("|---|---|---|---|")
    for name, binary in builds:
        size, listed, hwm, _, _ = measure(binary, a.downstream, a.tools, a.runs)
        print(f"| {name} | {size:,} bytes | {listed:,} | {hwm / 1024:.1f} MiB |", flush=True)


if __name__ == "__main__":
    main()
