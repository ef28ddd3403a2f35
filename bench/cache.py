#!/usr/bin/env python3
"""The research cache (`PERPLEXITY_CACHE`): what paying once saves, in one run on loopback
against the fake upstream (stdlib only; ratios, never a pass/fail).

1. A repeated question: the latency of `perplexity_ask` answered by a fresh run (the fake
   holding each run --run-ms, `fresh: true`) against the same call answered from the
   cache, over one `serve --http`; medians of --repeats each, interleaved.
2. A team's day: --questions calls over --distinct questions drawn Zipf(--zipf) from
   --callers named clients (a clients file), sent by --concurrency workers in one order
   (so some identical calls are in flight at the same moment), replayed three times on a
   fresh server and store: the cache `off`, `caller` and `team`. For each: the runs the
   fake started, what the ledger says they cost (`usage --json`), and hits.

    python3 bench/cache.py --ours BIN --fake FAKE [--run-ms 2000] [--repeats 9]
                           [--questions 1000] [--distinct 300] [--callers 10]
                           [--concurrency 16] [--zipf 1.1] [--seed 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_bench as hb  # noqa: E402  (the fake, process and HTTP helpers)

COST = 0.04


class Ours:
    """`serve --http` with named clients, a store of its own and the cache in `scope`."""

    def __init__(self, a, fake: hb.Fake, tmp: str, tag: str, scope: str, callers: int):
        self.dir = os.path.join(tmp, tag)
        os.makedirs(self.dir)
        self.tokens = ["pa_" + secrets.token_hex(32) for _ in range(callers)]
        clients = os.path.join(self.dir, "clients.toml")
        with open(clients, "w") as f:
            for i, token in enumerate(self.tokens):
                f.write(f'[[client]]\nname = "caller{i}"\ntoken_sha256 = "'
                        f'{hashlib.sha256(token.encode()).hexdigest()}"\n'
                        f'created = "2026-12-07T00:00:00Z"\n\n')
        os.chmod(clients, 0o600)
        self.env = hb.base_env({
            "PERPLEXITY_API_BASE": fake.base,
            "PERPLEXITY_HTTP_CLIENTS_FILE": clients,
            "PERPLEXITY_STORE_PATH": os.path.join(self.dir, "store.sqlite"),
            "PERPLEXITY_CACHE": scope,
            "PERPLEXITY_TOOLS": "all",
            "PERPLEXITY_RATE_BURST": "100000",
            "PERPLEXITY_RATE_PER_MINUTE": "1000000",
        })
        err = os.path.join(self.dir, "server.stderr")
        self.p = hb.spawn([a.ours, "serve", "--http", "--bind", "127.0.0.1:0"], self.env, err)
        m = hb.wait_for_line(err, r"MCP over HTTP on http://127\.0\.0\.1:(\d+)/mcp", self.p, 30)
        self.url = f"http://127.0.0.1:{m.group(1)}/mcp"
        self.binary = a.ours

    def ask(self, token: str, question: str, fresh: bool = False) -> tuple[float, str]:
        args = {"query": question}
        if fresh:
            args["fresh"] = True
        body = hb.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "perplexity_ask", "arguments": args,
                                    "_meta": hb.MODERN_META}})
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                   "Mcp-Name": "perplexity_ask"}
        t0 = time.perf_counter()
        status, _, reply = hb.http("POST", self.url, body, headers, timeout=120)
        took = time.perf_counter() - t0
        if status != 200:
            raise hb.BenchError(f"tools/call answered HTTP {status}: {reply[:300]!r}")
        answer = json.loads(reply)
        if "result" not in answer:
            raise hb.BenchError(f"tools/call answered {reply[:300]!r}")
        result = answer["result"]
        if result.get("isError"):
            raise hb.BenchError(f"tools/call failed: {result['content'][0]['text'][:300]}")
        return took, result["content"][0]["text"]

    def usage(self) -> dict:
        out = subprocess.run([self.binary, "usage", "--json", "--by", "caller"], env=self.env,
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return json.loads(out)["total"]

    def stop(self) -> None:
        hb.stop(self.p)


def repeated(a, fake: hb.Fake, tmp: str) -> dict:
    fake.scenario({"duration_ms": a.run_ms, "cost": COST})
    srv = Ours(a, fake, tmp, "repeated", "caller", 1)
    token = srv.tokens[0]
    try:
        srv.ask(token, "the repeated question")  # the answer the hits are served
        runs, hits = [], []
        for _ in range(a.repeats):
            runs.append(srv.ask(token, "the repeated question", fresh=True)[0])
            took, text = srv.ask(token, "the repeated question")
            if "answered from this server's cache" not in text:
                raise hb.BenchError("a repeat was not a hit")
            hits.append(took)
    finally:
        srv.stop()
    run, hit = statistics.median(runs), statistics.median(hits)
    return {"run_ms": run * 1e3, "hit_ms": hit * 1e3, "ratio": run / hit}


def day_log(a) -> list[tuple[int, int]]:
    """(caller, question) pairs: questions Zipf-distributed over --distinct."""
    rng = random.Random(a.seed)
    weights = [1 / (k ** a.zipf) for k in range(1, a.distinct + 1)]
    questions = rng.choices(range(a.distinct), weights=weights, k=a.questions)
    return [(rng.randrange(a.callers), q) for q in questions]


def replay(a, fake: hb.Fake, tmp: str, scope: str, log: list[tuple[int, int]]) -> dict:
    fake.scenario({"duration_ms": a.day_run_ms, "cost": COST})
    before = len(fake.runs())
    srv = Ours(a, fake, tmp, f"day-{scope}", scope, a.callers)
    hits, errors = [0], []
    lock = threading.Lock()
    queue = list(reversed(log))

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                caller, q = queue.pop()
            try:
                _, text = srv.ask(srv.tokens[caller], f"question number {q}: what happened?")
            except Exception as e:  # noqa: BLE001 (counted and reported)
                with lock:
                    errors.append(str(e))
                continue
            if "answered from this server's cache" in text:
                with lock:
                    hits[0] += 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    try:
        usage = srv.usage()
    finally:
        srv.stop()
    if errors:
        raise hb.BenchError(f"{scope}: {len(errors)} calls failed, e.g. {errors[0][:300]}")
    return {"runs": len(fake.runs()) - before, "cost": usage["cost"], "hits": hits[0],
            "saved": usage.get("saved", 0), "seconds": took}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--run-ms", type=int, default=2000)
    ap.add_argument("--day-run-ms", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--distinct", type=int, default=300)
    ap.add_argument("--callers", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pa-bench-cache-")
    fake = hb.Fake(a.fake, tmp)
    try:
        rep = repeated(a, fake, tmp)
        log = day_log(a)
        day = {scope: replay(a, fake, tmp, scope, log) for scope in ("off", "caller", "team")}
    finally:
        fake.stop()
    lines = [
        "## The research cache (bench/cache.py)",
        "",
        f"A repeated question (`perplexity_ask`, the fake holding a run {a.run_ms} ms; "
        f"medians of {a.repeats}): a fresh run {rep['run_ms']:.1f} ms, a hit "
        f"{rep['hit_ms']:.2f} ms — {rep['ratio']:.0f}× faster, and free.",
        "",
        f"A team's day: {a.questions} questions over {a.distinct} distinct (Zipf "
        f"{a.zipf}, seed {a.seed}) from {a.callers} named clients, {a.concurrency} at "
        f"a time, each run {a.day_run_ms} ms and {COST} USD:",
        "",
        "| cache | upstream runs | cost (USD) | hits | runs vs off | cost vs off |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    off = day["off"]
    for scope, d in day.items():
        lines.append(f"| `{scope}` | {d['runs']} | {d['cost']:.2f} | {d['hits']} | "
                     f"{d['runs'] / max(off['runs'], 1):.2f} | "
                     f"{d['cost'] / max(off['cost'], 1e-9):.2f} |")
    report = "\n".join(lines)
    print(report)
    if a.out:
        with open(a.out, "w") as f:
            f.write(report + "\n\n" + json.dumps({"repeated": rep, "day": day}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except hb.BenchError as e:
        print(f"bench/cache.py: {e}", file=sys.stderr)
        sys.exit(1)
