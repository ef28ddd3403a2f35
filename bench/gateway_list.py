#!/usr/bin/env python3
"""What one downstream server's tool list costs the clients of ours: `fake-downstream
--many-tools N` (N filler tools with 1 KB descriptions) behind the gateway, and our
`tools/list` over stdio — its size in bytes and the server's peak RSS (VmHWM) after it —
for ours and, with --before PATH, another build measured in the same run. Stdlib only;
no network beyond the pipes.

    python3 bench/gateway_list.py --ours PATH --downstream PATH [--before PATH] [--tools 10000]
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time


def measure(binary, downstream, tools, runs):
    """(tools/list bytes, downstream tools listed, VmHWM KiB), medians over `runs`."""
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
            subprocess.run([binary, "gateway", "add", "many", "--command", "fake-downstream",
                            "--arg", "--many-tools", "--arg", str(tools)],
                           env=env, check=True, capture_output=True)
            p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, env=env, bufsize=0)
            for i, (method, params) in enumerate([
                ("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"}}),
                ("tools/list", {}),
            ]):
                p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                           "params": params}) + "\n").encode())
                while True:
                    line = p.stdout.readline()
                    frame = json.loads(line)
                    if frame.get("id") == i:
                        break
            listed = sum(1 for t in frame["result"]["tools"] if t["name"].startswith("mcp__many__"))
            time.sleep(0.2)
            with open(f"/proc/{p.pid}/status") as f:
                hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
            p.stdin.close()
            p.wait(timeout=20)
            samples.append((len(line), listed, hwm))
    samples.sort()
    return samples[len(samples) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--downstream", required=True, help="fake-downstream (with --many-tools)")
    ap.add_argument("--before", help="another build, measured in the same run")
    ap.add_argument("--tools", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    print(f"| {a.tools:,} downstream tools with 1 KB descriptions | tools/list | tools listed | peak RSS |")
    print("|---|---|---|---|")
    for name, binary in [("ours", a.ours)] + ([("before", a.before)] if a.before else []):
        size, listed, hwm = measure(binary, a.downstream, a.tools, a.runs)
        print(f"| {name} | {size:,} bytes | {listed:,} | {hwm / 1024:.1f} MiB |", flush=True)


if __name__ == "__main__":
    main()
