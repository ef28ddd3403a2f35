#!/usr/bin/env python3
"""Quick benchmark: the lean table, in seconds, for CI's log. No pass/fail on a
number: this machine is shared and noisy, so a figure is printed beside its goal and the
reader judges; a broken measurement (a server that does not start or answer) exits 1.

    python3 bench/quick.py --ours BIN --fake FAKE --loadgen LOADGEN [--runs 5] [--burst 1000]

Rows (ours only; the full, side-by-side runs with the peers are bench/run.sh and
bench/http.sh):
  - peak RSS (VmHWM) of a stdio cold start: spawn -> initialize + tools/list -> EOF, median
    of --runs, with its anonymous and file-backed parts (file-backed pages of the binary
    and libc are shared by every process running them);
  - time from spawn to the tools/list answer, as a ratio to the exec floor: `cat` through
    the same harness (the same pipes and lines), interleaved with ours;
  - idle RSS of `serve --http` 1 s after it answered /healthz;
  - peak RSS with --burst research calls waiting at once over HTTP (bench/http_bench.py's
    burst: the fake holds every run, the calls still going are counted);
  - tools/list bytes (compact JSON of the result) per profile: default, lifecycle, all;
  - the binary's size and its .text.

Only loopback is contacted. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_bench  # noqa: E402  (the burst, the fake and the HTTP server harness)

GOALS = {
    "cold": "≤ 8 MiB",
    "idle": "≤ 8 MiB",
    "burst": "≤ 32 MiB",
    "default": "≤ 8,000 bytes",
    "start": "≤ 2× the exec floor",
}


def status_kib(pid: int) -> dict[str, float]:
    fields = ("VmHWM", "RssAnon", "RssFile")
    return {f: v for f in fields if (v := http_bench.status_kib(pid, f)) is not None}


def stdio_session(binary: str, env: dict[str, str]) -> tuple[dict[str, float], int]:
    """One cold start: (memory at the end of the session, tools/list result bytes)."""
    p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    try:
        def send(frame: dict) -> None:
            p.stdin.write((json.dumps(frame) + "\n").encode())
            p.stdin.flush()

        def reply() -> dict:
            line = p.stdout.readline()
            if not line:
                raise http_bench.BenchError("the stdio server closed stdout early")
            return json.loads(line)

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "quick-bench", "version": "0"}}})
        reply()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = reply()
        if "result" not in listed:
            raise http_bench.BenchError(f"tools/list failed: {json.dumps(listed)[:200]}")
        # VmHWM starts afresh at exec: the server's own peak, sampled right before EOF.
        memory = status_kib(p.pid)
        size = len(json.dumps(listed["result"], separators=(",", ":"), ensure_ascii=False)
                   .encode())
        p.stdin.close()
        p.wait(10)
        return memory, size
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def answer_ms(argv: list[str], env: dict[str, str]) -> float:
    """Milliseconds from spawning `argv` to reading the answer to `tools/list`, through the
    same pipes and the same three lines as a client's first exchange. Run with `cat`
    (which echoes each line back) it is the floor: what exec, the pipes and this harness
    cost with no server at all."""
    started = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    try:
        lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                     "protocolVersion": "2025-11-25", "capabilities": {},
                     "clientInfo": {"name": "quick-bench", "version": "0"}}},
                 {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
        p.stdin.write("".join(json.dumps(line) + "\n" for line in lines).encode())
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                raise http_bench.BenchError(f"{argv[0]} closed stdout before answering")
            if json.loads(line).get("id") == 2:
                break
        took = (time.perf_counter() - started) * 1000
        p.stdin.close()
        p.wait(10)
        return took
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def text_size(binary: str) -> int | None:
    try:
        out = subprocess.run(["size", "-A", binary], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == ".text":
            return int(parts[1])
    return None


ORDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "link", "startup.order")
# Below this share of its names, the start-up order no longer lays out what a cold start
# runs: regenerate it (scripts/startup-order.py). A stale order doubled start-up memory
# twice before anything failed, and at 92 % it still cost 2.2 MiB of a 6.4 MiB cold start.
MIN_ORDER_SHARE = 0.95


def order_share(binary: str) -> tuple[int, int] | None:
    """(names of link/startup.order the binary still defines, names in it)."""
    try:
        wanted = [l.strip() for l in open(ORDER) if l.strip() and not l.startswith("#")]
        out = subprocess.run(["nm", "--defined-only", binary], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    defined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return sum(1 for name in wanted if name in defined), len(wanted)


def mib(kib: float | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--burst-duration-ms", type=int, default=6000)
    a = ap.parse_args()

    env = http_bench.base_env({"PERPLEXITY_API_BASE": "http://127.0.0.1:9"})
    sizes: dict[str, int] = {}
    for profile in ("default", "lifecycle", "all"):
        _, sizes[profile] = stdio_session(a.ours, {**env, "PERPLEXITY_TOOLS": profile})
    cold = [stdio_session(a.ours, env)[0] for _ in range(a.runs)]
    med = {k: statistics.median(c[k] for c in cold) for k in ("VmHWM", "RssAnon", "RssFile")}
    # Cold start against the exec floor, interleaved so both see the same machine; 40
    # pairs (a fifth of a second), as ten moved the median by a millisecond between runs.
    floor_argv = [shutil.which("cat") or "/bin/cat"]
    times: dict[str, list[float]] = {"ours": [], "floor": []}
    for _ in range(max(a.runs * 2, 40)):
        times["ours"].append(answer_ms([a.ours], env))
        times["floor"].append(answer_ms(floor_argv, env))
    ours_ms, floor_ms = (statistics.median(times[k]) for k in ("ours", "floor"))

    # The burst harness's settings, as bench/http.sh would pass them.
    burst_args = types.SimpleNamespace(
        ours=a.ours, loadgen=a.loadgen, threads=1, burst=a.burst,
        burst_duration_ms=a.burst_duration_ms, rate_burst=100000, rate_per_minute=1000000,
        max_in_flight=4096)
    tmp = tempfile.mkdtemp(prefix="quick-bench-")
    fake = http_bench.Fake(a.fake, tmp)
    try:
        burst = http_bench.run_burst(burst_args, "ours", fake, tmp)
    finally:
        fake.stop()
        for pid in list(http_bench.LIVE):
            http_bench.kill_group(pid)
    waited = burst.get("max_runs_in_flight", 0)

    text = text_size(a.ours)
    share = order_share(a.ours)
    rows = [
        ("peak RSS, stdio cold start (median of %d)" % a.runs,
         f"{mib(med['VmHWM'])} (anon {mib(med['RssAnon'])}, file-backed {mib(med['RssFile'])})",
         GOALS["cold"]),
        ("cold start to the tools/list answer (median of %d)" % len(times["ours"]),
         f"{ours_ms:.1f} ms = {ours_ms / floor_ms:.1f}× the exec floor (cat through the same "
         f"harness: {floor_ms:.1f} ms)", GOALS["start"]),
        ("idle RSS of serve --http", mib(burst.get("idle_rss_kib")), GOALS["idle"]),
        (f"peak RSS with {a.burst} research calls waiting (HTTP)",
         f"{mib(burst.get('hwm_kib'))} ({waited} runs in flight at most)", GOALS["burst"]),
        ("tools/list, default profile", f"{sizes['default']:,} bytes", GOALS["default"]),
        ("tools/list, lifecycle / all", f"{sizes['lifecycle']:,} / {sizes['all']:,} bytes", ""),
        ("link/startup.order names the binary still has",
         "n/a" if share is None else f"{share[0]:,} of {share[1]:,} ({share[0] / max(share[1], 1):.0%})",
         f"≥ {MIN_ORDER_SHARE:.0%} (else regenerate it)"),
        ("binary (file / .text)",
         f"{os.path.getsize(a.ours) / 1e6:.1f} MB / "
         + (f"{text / 1e6:.1f} MB" if text else "n/a"), ""),
    ]
    print("| quick bench | now | goal |")
    print("|---|---|---|")
    for name, value, goal in rows:
        print(f"| {name} | {value} | {goal} |")
    if share is not None and share[0] < MIN_ORDER_SHARE * share[1]:
        # The one figure that is not noise: the layout hint has gone stale.
        print(f"quick bench: link/startup.order is stale ({share[0]} of {share[1]} names left):"
              " run scripts/startup-order.py on this release build", file=sys.stderr)
        return 1
    if waited < a.burst:
        # A loaded machine can finish early runs before the last calls arrive: the row
        # says how many waited, and the figure is read with that in mind.
        print(f"quick bench: note: only {waited} of {a.burst} calls were waiting at once",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except http_bench.BenchError as e:
        print(f"quick bench: {e}", file=sys.stderr)
        sys.exit(1)
