#!/usr/bin/env python3
"""Shared state (issue 31): what Redis costs one `serve --http` replica, measured side by
side in one run against the same replica without it (loopback only; stdlib only).

  - latency of a billable call (`perplexity_search`, the fake answering at once) over one
    keep-alive connection: p50/p99 with and without `PERPLEXITY_STATE_URL`, and the
    difference (the goal: <= 0.3 ms added at p50);
  - the same with a daily budget set: admitted against the ledger's sums without Redis,
    against the team's sums (one script) with it;
  - latency of `tasks/get` on a working task: records in Redis vs in the SQLite store;
  - requests/s of billable calls and of `tools/list` (no state) over --connections;
  - Redis round trips per call kind, counted by Redis itself (`MONITOR`: the commands
    clients sent; the once-a-second health ping left out): an admission, a
    `tasks/get`, and a task's whole life (created, run, collected, ended).

On 2 cores, several replicas cannot show scaling (they share the cores with Redis, the
fake and the load generator): round trips are what stays true on more cores.

    python3 bench/state.py --ours PATH --fake PATH --loadgen PATH [--redis redis-server]
                           [--rounds 3] [--duration 5] [--connections 16] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_bench as hb  # noqa: E402  (the fake, servers, loadgen and process helpers)

MODERN = hb.MODERN_META
TASKS_META = {**MODERN, "io.modelcontextprotocol/clientCapabilities":
              {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


class Redis:
    """Debian's redis-server on a free loopback port, nothing on disk."""

    def __init__(self, binary: str, tmp: str):
        self.port = hb.free_port()
        self.p = hb.spawn([binary, "--port", str(self.port), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no"], None,
                          os.path.join(tmp, "redis.stderr"))
        deadline = time.monotonic() + 10
        while True:
            try:
                self.command("PING")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise hb.BenchError("redis-server did not start")
                time.sleep(0.05)

    def command(self, *args: str) -> bytes:
        """One RESP command; the raw reply (enough for PING, CONFIG and INFO)."""
        out = b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(out)
            data = b""
            while True:
                chunk = s.recv(65536)
                data += chunk
                if not chunk or self._complete(data):
                    return data

    @staticmethod
    def _complete(data: bytes) -> bool:
        if data[:1] in (b"+", b"-", b":"):
            return data.endswith(b"\r\n")
        if data[:1] == b"$":
            head, _, rest = data.partition(b"\r\n")
            return len(rest) >= int(head[1:]) + 2
        return False

    def monitor(self) -> "Monitor":
        return Monitor(self.port)

    def commandstats(self) -> dict[str, int]:
        text = self.command("INFO", "commandstats").decode(errors="replace")
        calls = {}
        for line in text.splitlines():
            if line.startswith("cmdstat_"):
                name, _, rest = line.partition(":")
                calls[name[len("cmdstat_"):]] = int(rest.split("calls=")[1].split(",")[0])
        return calls

    def stop(self) -> None:
        hb.stop(self.p)


class Monitor:
    """`MONITOR` on its own connection: the commands clients sent, by name — a round trip
    each. Commands a Lua script runs are shown as `[… lua]` and left out (commandstats
    counts them too, which is why it cannot count round trips)."""

    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.s.sendall(b"*1\r\n$7\r\nMONITOR\r\n")
        self.buf = b""
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(4096)
        self.buf = self.buf.split(b"\r\n", 1)[1]

    def drain(self, settle: float = 0.3) -> dict[str, int]:
        self.s.settimeout(settle)
        try:
            while True:
                chunk = self.s.recv(65536)
                if not chunk:
                    break
                self.buf += chunk
        except socket.timeout:
            pass
        counts: dict[str, int] = {}
        lines = self.buf.split(b"\r\n")
        self.buf = lines.pop()
        for line in lines:
            text = line.decode(errors="replace")
            if " lua] " in text or '"' not in text:
                continue
            name = text.split('"')[1].lower()
            if name not in ("ping", "monitor"):
                counts[name] = counts.get(name, 0) + 1
        return counts

    def close(self) -> None:
        self.s.close()


def post(srv: hb.Server, method: str, params: dict, name: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {srv.token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name:
        headers["Mcp-Name"] = name
    body = hb.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    status, _, raw = hb.http("POST", f"http://127.0.0.1:{srv.port}/mcp", body, headers,
                             timeout=60)
    if status != 200:
        raise hb.BenchError(f"{method} answered {status}")
    return json.loads(raw)


def search_spec(srv: hb.Server) -> dict:
    return {"headers": [f"Authorization: Bearer {srv.token}", "MCP-Protocol-Version: 2026-07-28",
                        "Mcp-Method: tools/call", "Mcp-Name: perplexity_search"],
            "body": hb.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "perplexity_search", "arguments": {"query": "q"}, "_meta": MODERN}}),
            "expect": '"isError":false'}


def list_spec(srv: hb.Server) -> dict:
    return hb.throughput_spec("ours", srv)


def task_get_spec(srv: hb.Server, task: str) -> dict:
    return {"headers": [f"Authorization: Bearer {srv.token}", "MCP-Protocol-Version: 2026-07-28",
                        "Mcp-Method: tasks/get", f"Mcp-Name: {task}"],
            "body": hb.dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
                              "params": {"taskId": task, "_meta": TASKS_META}}),
            "expect": '"status":"working"'}


def load(a, srv: hb.Server, spec: dict, connections: int) -> dict:
    argv = hb.loadgen_argv(a, srv.port, spec, [
        "--mode", "throughput", "--connections", str(connections),
        "--warmup", "1", "--duration", str(a.duration)])
    out = subprocess.run(argv, capture_output=True, timeout=a.duration + 60)
    if out.returncode != 0:
        raise hb.BenchError(f"loadgen: {out.stderr.decode(errors='replace')[-300:]}")
    res = json.loads(out.stdout.decode().strip().splitlines()[-1])
    if res.get("non_2xx") or res.get("bad_body") or res.get("errors"):
        raise hb.BenchError(f"loadgen saw failures: {res}")
    return res


def start_task(srv: hb.Server, fake: hb.Fake) -> str:
    """A task whose run lasts ten minutes (created after the five-second inline window)."""
    fake.scenario({"duration_ms": 600_000})
    r = post(srv, "tools/call", {"name": "perplexity_agent", "arguments": {"query": "t"},
                                 "_meta": TASKS_META}, "perplexity_agent")
    fake.scenario({"duration_ms": 0})
    task = r.get("result", {}).get("taskId")
    if not task:
        raise hb.BenchError(f"no task: {r}")
    return task


def round_trips(redis: Redis, action, n: int) -> dict[str, float]:
    """Commands a client sent per `action` (round trips), the health pings left out."""
    mon = redis.monitor()
    mon.drain()
    for _ in range(n):
        action()
    stats = mon.drain()
    mon.close()
    return {k: v / n for k, v in sorted(stats.items())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args()
    # What http_bench.Server reads from its arguments: limits far above the load.
    a.rate_burst, a.rate_per_minute, a.max_in_flight = 100_000, 100_000, 4096

    tmp = tempfile.mkdtemp(prefix="state-bench-")
    fake, redis, servers = hb.Fake(a.fake, tmp), Redis(a.redis, tmp), {}
    try:
        servers["local"] = hb.Server("ours", a, fake, tmp, "local", extra={
            "PERPLEXITY_STORE_PATH": os.path.join(tmp, "store.sqlite")})
        servers["redis"] = hb.Server("ours", a, fake, tmp, "redis", extra={
            "PERPLEXITY_STATE_URL": f"redis://127.0.0.1:{redis.port}",
            "PERPLEXITY_STORE_PATH": os.path.join(tmp, "store-r.sqlite")})
        # A budget far above the load: every billable call is admitted against the sums
        # (the ledger's without Redis; the team's, in one script, with it).
        budget = {"PERPLEXITY_BUDGET_DAILY": "100000"}
        servers["local_budget"] = hb.Server("ours", a, fake, tmp, "local-budget", extra={
            **budget, "PERPLEXITY_STORE_PATH": os.path.join(tmp, "store-b.sqlite")})
        servers["redis_budget"] = hb.Server("ours", a, fake, tmp, "redis-budget", extra={
            **budget, "PERPLEXITY_STATE_URL": f"redis://127.0.0.1:{redis.port}",
            "PERPLEXITY_STORE_PATH": os.path.join(tmp, "store-rb.sqlite")})
        tasks = {k: start_task(servers[k], fake) for k in ("local", "redis")}
        rows: dict[str, dict[str, list]] = {k: {} for k in servers}
        for rnd in range(a.rounds):
            order = list(servers) if rnd % 2 == 0 else list(reversed(servers))
            for key in order:
                srv, got = servers[key], rows[key]
                kinds = [("search_1", search_spec(srv), 1)]
                if key in tasks:
                    kinds += [("search_n", search_spec(srv), a.connections),
                              ("list_n", list_spec(srv), a.connections),
                              ("taskget_1", task_get_spec(srv, tasks[key]), 1)]
                for kind, spec, conns in kinds:
                    got.setdefault(kind, []).append(load(a, srv, spec, conns))
        srv = servers["redis"]
        trips = {
            "a billable call (perplexity_search): its admission, and its cost added to the "
            "team's sums in a batch a second": round_trips(redis, lambda: post(
                srv, "tools/call", {"name": "perplexity_search", "arguments": {"query": "q"},
                                    "_meta": MODERN}, "perplexity_search"), 100),
            "a budgeted billable call (perplexity_search): the rate charge, the budget's "
            "admission and its settlement": round_trips(
                redis, lambda: post(servers["redis_budget"], "tools/call", {
                    "name": "perplexity_search", "arguments": {"query": "q"},
                    "_meta": MODERN}, "perplexity_search"), 100),
            "tasks/get": round_trips(redis, lambda: post(
                srv, "tasks/get", {"taskId": tasks["redis"], "_meta": TASKS_META},
                tasks["redis"]), 100),
        }
        # A task's life: created (the call outlasts the inline window), collected, ended.
        fake.scenario({"duration_ms": 6000})
        mon = redis.monitor()
        mon.drain()
        made = [post(srv, "tools/call", {"name": "perplexity_agent", "arguments": {"query": "l"},
                                         "_meta": TASKS_META}, "perplexity_agent")
                ["result"]["taskId"] for _ in range(3)]
        deadline = time.monotonic() + 60
        for task in made:
            while post(srv, "tasks/get", {"taskId": task, "_meta": TASKS_META},
                       task)["result"]["status"] == "working":
                if time.monotonic() > deadline:
                    raise hb.BenchError("the tasks did not end")
                time.sleep(0.5)
        time.sleep(1)
        stats = mon.drain()
        mon.close()
        polls = stats.get("hgetall", 0)
        trips["a task's life (3 tasks; their own tasks/get polls shown apart)"] = {
            k: v / 3 for k, v in sorted(stats.items())}
        fake.scenario({"duration_ms": 0})
    finally:
        for s in servers.values():
            s.stop()
        redis.stop()
        fake.stop()

    def m(key, kind, field, sub=None):
        xs = [r[field][sub] if sub else r[field] for r in rows[key][kind]]
        return statistics.median(xs)

    lines = ["# Shared state (Redis) against none, one replica, one run", "",
             f"{a.rounds} rounds, alternating order; {a.duration:g} s per measurement "
             f"(after 1 s warm-up); loopback Redis `{a.redis}`, fake-perplexity answering at "
             "once. Medians of the rounds.", "",
             "| measurement | without Redis | with Redis | difference |", "|---|---|---|---|"]
    for label, kind, field, sub, unit in (
            ("billable call, 1 connection, p50", "search_1", "lat_ms", "p50", "ms"),
            ("billable call, 1 connection, p99", "search_1", "lat_ms", "p99", "ms"),
            ("tasks/get, 1 connection, p50", "taskget_1", "lat_ms", "p50", "ms"),
            ("tasks/get, 1 connection, p99", "taskget_1", "lat_ms", "p99", "ms"),
            (f"billable calls/s, {a.connections} connections", "search_n", "rps", None, "/s"),
            (f"tools/list/s (no state), {a.connections} connections", "list_n", "rps", None, "/s"),
            ("budgeted billable call, 1 connection, p50", "search_1", "lat_ms", "p50", "ms*"),
            ("budgeted billable call, 1 connection, p99", "search_1", "lat_ms", "p99", "ms*")):
        pair = ("local_budget", "redis_budget") if unit == "ms*" else ("local", "redis")
        unit = unit.rstrip("*")
        x, y = m(pair[0], kind, field, sub), m(pair[1], kind, field, sub)
        diff = (f"{y - x:+.3f} ms" if unit == "ms" else f"{y / x:.2f}×")
        fmt = (lambda v: f"{v:.3f} ms") if unit == "ms" else (lambda v: f"{v:,.0f}")
        lines.append(f"| {label} | {fmt(x)} | {fmt(y)} | {diff} |")
    lines += ["", "Redis round trips per call kind (the commands clients sent, read with `MONITOR`; "
              "a script's own commands are not round trips):", "",
              "| call | commands (per call) | round trips |", "|---|---|---|"]
    for label, stats in trips.items():
        shown = ", ".join(f"{k} {v:.2f}" for k, v in stats.items()) or "none"
        lines.append(f"| {label} | {shown} | {sum(stats.values()):.2f} |")
    lines.append("")
    lines.append(f"(the task's life includes {polls / 3:.1f} `hgetall` a task from its own "
                 "`tasks/get` polls every 0.5 s; `evalsha` covers create, run id, end and "
                 "lease renewals)")
    report = "\n".join(lines)
    print(report)
    if a.out:
        with open(a.out, "w") as f:
            f.write(report + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except hb.BenchError as e:
        print(f"state bench: {e}", file=sys.stderr)
        sys.exit(1)
