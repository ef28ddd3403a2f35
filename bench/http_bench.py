#!/usr/bin/env python3
"""Streamable HTTP benchmark: perplexity-agent `serve --http` vs. the
official Node peer `@perplexity-ai/mcp-server` in its HTTP mode (`dist/http.js`).

Stdlib only. The load itself comes from `bench/loadgen` (a Rust HTTP/1.1 keep-alive
load generator). Two phases, in one run, against one loopback fake-perplexity:

1. Throughput: `--connections` keep-alive connections send `tools/list` back to back for
   `--warmup` + `--duration` s; `--runs` runs per contender, interleaved round-robin with
   the order rotating every round. Contenders:
     ours         stateless 2026-07-28 request, bearer token (the HTTP target);
     ours-legacy  per connection: initialize (2025-11-25) -> Mcp-Session-Id ->
                  notifications/initialized, then tools/list in that session;
     node         stateless JSON mode (the package's only HTTP mode), tools/list with
                  MCP-Protocol-Version 2025-11-25, no initialize, no auth (it has none);
     ours-clients as ours, a named client's token (PERPLEXITY_HTTP_CLIENTS_FILE);
     ours-jwt-es256, ours-jwt-rs256
                  as ours, an OAuth access token (PERPLEXITY_OAUTH_ISSUER) signed ES256 /
                  RS256 by a real OpenID provider (tests/oidc, oauth2-mock-server; with
                  --oidc DIR), its key cached after the first request;
     ours-metrics as ours, with PERPLEXITY_METRICS=on (then /metrics is scraped and timed);
     ours-1w      as ours, with PERPLEXITY_HTTP_WORKERS=1: one thread, like the one nginx
                  process beside it (two workers and the load generator on two cores wait
                  on the scheduler, which is most of ours' p99);
     nginx        one process serving ours' tools/list bytes as a static file (the floor).
   The server's CPU time (/proc/PID/stat), the load generator's (os.times of reaped children) and the whole
   machine's (/proc/stat) are recorded for each run, so the share taken by other work on
   this shared machine is visible.
2. Memory: a fresh server; its idle RSS; then `--burst` connections each send one
   research tool call at once (JSON response mode, no progressToken) while the fake holds
   every run for `--burst-duration-ms`; VmRSS is sampled every 100 ms and the fake's
   runs still going are counted, so "all in flight" is verified, not assumed.

Only loopback addresses are contacted. Every child runs in its own session and is killed
by its process group on exit. Prints a markdown report; --out also writes it and raw JSON.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import queue
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

DUMMY_KEY = "pplx-bench-dummy"
LIVE: set[int] = set()
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}


class BenchError(Exception):
    pass


def dumps(v) -> str:
    return json.dumps(v, separators=(",", ":"))


# --------------------------------------------------------------------------- processes

def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        kill_group(p.pid)
        p.wait(5)
    LIVE.discard(p.pid)


def spawn(argv, env, stderr_path, stdout=subprocess.DEVNULL) -> subprocess.Popen:
    err = open(stderr_path, "wb")
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=err,
                             env=env, close_fds=True, start_new_session=True)
    finally:
        err.close()
    LIVE.add(p.pid)
    return p


def wait_for_line(path: str, pattern: str, p: subprocess.Popen, timeout: float) -> re.Match:
    deadline = time.monotonic() + timeout
    rx = re.compile(pattern)
    while time.monotonic() < deadline:
        try:
            with open(path, "r", errors="replace") as f:
                m = rx.search(f.read())
        except OSError:
            m = None
        if m:
            return m
        if p.poll() is not None:
            raise BenchError(f"exited with {p.returncode} before {pattern!r}: {tail(path)}")
        time.sleep(0.02)
    raise BenchError(f"no {pattern!r} within {timeout}s: {tail(path)}")


def tail(path: str, n: int = 400) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace").strip() or "(empty)"
    except OSError:
        return "(unreadable)"


def status_kib(pid: int | str, field: str) -> float | None:
    """A `kB` field of /proc/<pid>/status (VmHWM, VmRSS, RssAnon…), in KiB; pid may be "self"."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU-seconds the whole machine spent not idle (all CPUs), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body=None, headers=None, timeout=10.0):
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    with OPENER.open(req, timeout=timeout) as r:
        return r.status, dict(r.headers), r.read()


# --------------------------------------------------------------------------- fake

class Fake:
    def __init__(self, binary: str, tmp: str):
        self.p = spawn([binary, "--port", "0", "--scenario", '{"duration_ms":0}'],
                       None, os.path.join(tmp, "fake.stderr"), stdout=subprocess.PIPE)
        line = self.p.stdout.readline().decode().strip()
        if not line.startswith("listening on http://127.0.0.1:"):
            raise BenchError(f"unexpected first line from fake-perplexity: {line!r}")
        self.base = line[len("listening on "):]

    def scenario(self, sc: dict) -> None:
        http("POST", self.base + "/_control/scenario", dumps(sc),
             {"Content-Type": "application/json"})

    def runs(self) -> list[dict]:
        return json.loads(http("GET", self.base + "/_control/runs")[2])

    def stop(self) -> None:
        stop(self.p)
        self.p.stdout.close()


# --------------------------------------------------------------------------- provider

class Provider:
    """tests/oidc/provider.mjs: a real OpenID provider (oauth2-mock-server) on loopback."""

    def __init__(self, a, tmp: str, audience: str):
        self.p = spawn([a.node or "node", os.path.join(a.oidc, "provider.mjs"),
                        "--audience", audience], base_env({}),
                       os.path.join(tmp, "provider.stderr"), stdout=subprocess.PIPE)
        line = self.p.stdout.readline().decode().strip()
        try:
            ready = json.loads(line)
        except ValueError:
            raise BenchError(f"the OpenID provider did not start: {line!r} "
                             f"{tail(os.path.join(tmp, 'provider.stderr'))}") from None
        self.issuer = ready["issuer"]
        if not self.issuer.startswith("http://127.0.0.1:"):
            raise BenchError(f"provider not on loopback: {self.issuer}")

    def token(self, alg: str, audience: str) -> str:
        # A day's validity: no run outlives it, and every request presents the same JWT.
        claims = {"aud": audience, "exp": int(time.time()) + 86400, "scope": " ".join(SCOPES)}
        body = http("POST", self.issuer + "/control/token", dumps({"alg": alg, "claims": claims}),
                    {"Content-Type": "application/json"})[2]
        return json.loads(body)["token"]

    def stop(self) -> None:
        stop(self.p)
        self.p.stdout.close()


SCOPES = ["perplexity:research", "perplexity:search", "perplexity:fetch", "perplexity:admin",
          "perplexity:gateway"]


# --------------------------------------------------------------------------- servers

def base_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
           if k in os.environ}
    env["NO_PROXY"] = env["no_proxy"] = "*"
    env["PERPLEXITY_API_KEY"] = DUMMY_KEY
    env.update(extra)
    return env


class Server:
    """One HTTP MCP server process (ours or the node peer)."""

    def __init__(self, kind: str, a, fake: Fake, tmp: str, tag: str,
                 auth: str = "token", provider: Provider | None = None, alg: str = "",
                 extra: dict | None = None):
        """`auth` (ours only): `token` (PERPLEXITY_HTTP_AUTH_TOKEN), `clients` (a clients
        file of one client) or `oauth` (tokens from `provider`, signed `alg`)."""
        self.kind = kind
        self.stderr_path = os.path.join(tmp, f"{kind}-{tag}.stderr")
        if kind == "ours":
            bind = "127.0.0.1:0"
            if auth == "token":
                self.token = secrets.token_hex(32)
                auth_env = {"PERPLEXITY_HTTP_AUTH_TOKEN": self.token}
            elif auth == "clients":
                self.token = "pa_" + secrets.token_hex(32)
                path = os.path.join(tmp, f"clients-{tag}.toml")
                with open(path, "w") as f:
                    f.write('[[client]]\nname = "bench"\ntoken_sha256 = "%s"\n'
                            'created = "2026-12-03T00:00:00Z"\n'
                            % hashlib.sha256(self.token.encode()).hexdigest())
                os.chmod(path, 0o600)
                auth_env = {"PERPLEXITY_HTTP_CLIENTS_FILE": path}
            elif auth == "oauth" and provider is not None:
                port = free_port()
                bind = f"127.0.0.1:{port}"
                audience = f"http://{bind}/mcp"
                self.token = provider.token(alg, audience)
                auth_env = {"PERPLEXITY_OAUTH_ISSUER": provider.issuer,
                            "PERPLEXITY_OAUTH_AUDIENCE": audience}
            else:
                raise ValueError(auth)
            env = base_env({
                "PERPLEXITY_API_BASE": fake.base,
                **auth_env,
                "PERPLEXITY_RATE_BURST": str(a.rate_burst),
                "PERPLEXITY_RATE_PER_MINUTE": str(a.rate_per_minute),
                "PERPLEXITY_HTTP_MAX_IN_FLIGHT": str(a.max_in_flight),
                **(extra or {}),
            })
            self.argv = [a.ours, "serve", "--http", "--bind", bind]
            self.p = spawn(self.argv, env, self.stderr_path)
            m = wait_for_line(self.stderr_path, r"MCP over HTTP on http://127\.0\.0\.1:(\d+)/mcp",
                              self.p, 30)
            self.port = int(m.group(1))
            self.ready_url = f"http://127.0.0.1:{self.port}/healthz"
        else:
            self.token = None
            self.port = free_port()
            env = base_env({"PERPLEXITY_BASE_URL": fake.base, "PORT": str(self.port),
                            "BIND_ADDRESS": "127.0.0.1"})
            self.argv = [a.node, os.path.join(a.node_pkg, "dist", "http.js")]
            self.p = spawn(self.argv, env, self.stderr_path)
            wait_for_line(self.stderr_path, r"listening on http://127\.0\.0\.1:\d+/mcp",
                          self.p, 30)
            self.ready_url = f"http://127.0.0.1:{self.port}/health"
        self.env_shown = {k: ("<64 hex chars>" if k == "PERPLEXITY_HTTP_AUTH_TOKEN" else v)
                          for k, v in env.items()
                          if k.startswith(("PERPLEXITY_", "PORT", "BIND_"))}
        status, _, _ = http("GET", self.ready_url)
        if status != 200:
            raise BenchError(f"{kind}: {self.ready_url} answered {status}")

    @property
    def pid(self) -> int:
        return self.p.pid

    def alive(self) -> bool:
        return self.p.poll() is None

    def stop(self) -> None:
        stop(self.p)


class Nginx:
    """The reference: Debian's nginx, one process (no master, one worker), answering every
    POST /mcp with the very bytes `ours` answers the same tools/list — a static file
    server's cost for the same exchange, measured in the same run (issue 34)."""

    def __init__(self, binary: str, body: bytes, tmp: str):
        self.kind = "nginx"
        self.token = None
        root = os.path.join(tmp, "nginx")
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, "tools.json"), "wb") as f:
            f.write(body)
        self.port = free_port()
        temp = {k: os.path.join(root, k) for k in
                ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
        conf = os.path.join(root, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000000;
    keepalive_timeout 300s;
    client_body_temp_path {temp['client_body']};
    proxy_temp_path {temp['proxy']};
    fastcgi_temp_path {temp['fastcgi']};
    uwsgi_temp_path {temp['uwsgi']};
    scgi_temp_path {temp['scgi']};
    server {{
        listen 127.0.0.1:{self.port};
        root {root};
        default_type application/json;
        # A static file answers GET only: a POST gets 405, which is turned into the file
        # (as GET) with status 200 - the same bytes `ours` sends for the same request.
        location = /mcp {{ error_page 405 =200 /tools.json; return 405; }}
        location = /tools.json {{ }}
        location = /healthz {{ return 200 "ok"; }}
    }}
}}
""")
        self.stderr_path = os.path.join(root, "stderr")
        self.argv = [binary, "-c", conf, "-p", root, "-e", os.path.join(root, "error.log")]
        self.p = spawn(self.argv, os.environ.copy(), self.stderr_path)
        self.env_shown = {}
        deadline = time.monotonic() + 10
        while True:
            try:
                status, _, _ = http("GET", f"http://127.0.0.1:{self.port}/healthz")
                if status == 200:
                    break
            except OSError:
                pass
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"nginx did not start: {tail(self.stderr_path)}")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.p.pid

    def alive(self) -> bool:
        return self.p.poll() is None

    def stop(self) -> None:
        stop(self.p)


# --------------------------------------------------------------------------- requests

def throughput_spec(key: str, srv: Server) -> dict:
    """What the load generator sends to one contender: headers, body, optional setup."""
    if key in AUTH_CONTENDERS or key in ("nginx", "ours-1w"):
        return {
            "headers": [f"Authorization: Bearer {srv.token or 'nginx-ignores-it'}",
                        "MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/list"],
            "body": dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                           "params": {"_meta": MODERN_META}}),
            "expect": '"perplexity_agent"',
        }
    if key == "ours-legacy":
        auth = f"Authorization: Bearer {srv.token}"
        return {
            "setup_headers": [auth, "MCP-Protocol-Version: 2025-11-25"],
            "setup_body": dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "loadgen", "version": "0.1.0"}}}),
            "session_header": "Mcp-Session-Id",
            "after_setup_body": dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            "headers": [auth, "MCP-Protocol-Version: 2025-11-25"],
            "body": dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
            "expect": '"perplexity_agent"',
        }
    if key == "node":
        return {
            "headers": ["MCP-Protocol-Version: 2025-11-25"],
            "body": dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
            "expect": '"perplexity_ask"',
        }
    raise ValueError(key)


# The stateless tools/list of `ours`, under each way of authenticating: (auth, alg).
# `ours-metrics`: the single token with PERPLEXITY_METRICS=on (what recording costs).
AUTH_CONTENDERS = {"ours": ("token", ""), "ours-clients": ("clients", ""),
                   "ours-jwt-es256": ("oauth", "ES256"), "ours-jwt-rs256": ("oauth", "RS256"),
                   "ours-metrics": ("token", "")}


def burst_spec(kind: str, srv: Server) -> dict:
    if kind == "ours":
        return {
            "headers": [f"Authorization: Bearer {srv.token}",
                        "MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call",
                        "Mcp-Name: perplexity_agent"],
            "body": dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "perplexity_agent", "arguments": {"query": "q"},
                "_meta": MODERN_META}}),
            "expect": "Fake answer.",
        }
    return {
        "headers": ["MCP-Protocol-Version: 2025-11-25"],
        "body": dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "perplexity_ask",
            "arguments": {"messages": [{"role": "user", "content": "q"}]}}}),
        "expect": "Fake answer.",
    }


def loadgen_argv(a, port: int, spec: dict, extra: list[str]) -> list[str]:
    argv = [a.loadgen, "--addr", f"127.0.0.1:{port}", "--threads", str(a.threads),
            "--body", spec["body"], "--expect", spec["expect"]]
    for h in spec["headers"]:
        argv += ["--header", h]
    if "setup_body" in spec:
        argv += ["--setup-body", spec["setup_body"], "--session-header", spec["session_header"],
                 "--after-setup-body", spec["after_setup_body"]]
        for h in spec["setup_headers"]:
            argv += ["--setup-header", h]
    return argv + extra


def response_size(srv: Server, spec: dict) -> int | None:
    """Bytes of one response body to the spec's request (specs without a setup only)."""
    if "setup_body" in spec:
        return None
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    for h in spec["headers"]:
        k, v = h.split(":", 1)
        headers[k.strip()] = v.strip()
    status, _, body = http("POST", f"http://127.0.0.1:{srv.port}/mcp", spec["body"], headers)
    if status != 200 or spec["expect"].encode() not in body:
        raise BenchError(f"{srv.kind}: probe answered {status}: {body[:300]!r}")
    return len(body)


def shown_request(spec: dict) -> str:
    """A readable description of a spec for the report (the token elided)."""
    def clean(h):
        return re.sub(r"Bearer \S+", "Bearer <token>", h)
    parts = []
    if "setup_body" in spec:
        parts.append("once per connection: POST /mcp " +
                     " ".join(f"[{clean(h)}]" for h in spec["setup_headers"]) +
                     f" {spec['setup_body']} -> keep `{spec['session_header']}`; then "
                     f"{spec['after_setup_body']} with it")
    parts.append("each request: POST /mcp " + " ".join(f"[{clean(h)}]" for h in spec["headers"])
                 + f" {spec['body']}")
    return "; ".join(parts)


# --------------------------------------------------------------------------- phases

def run_throughput(a, key: str, srv: Server, tmp: str) -> dict:
    spec = throughput_spec(key, srv)
    argv = loadgen_argv(a, srv.port, spec, [
        "--mode", "throughput", "--connections", str(a.connections),
        "--warmup", str(a.warmup), "--duration", str(a.duration)])
    cpu0, busy0, t0 = proc_cpu_s(srv.pid), machine_busy_s(), time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    LIVE.add(p.pid)
    try:
        out, err = p.communicate(timeout=a.warmup + a.duration + 120)
    except subprocess.TimeoutExpired:
        kill_group(p.pid)
        p.communicate()
        raise BenchError("loadgen timed out")
    finally:
        LIVE.discard(p.pid)
    wall = time.monotonic() - t0
    cpu1, busy1 = proc_cpu_s(srv.pid), machine_busy_s()
    if p.returncode != 0:
        raise BenchError(f"loadgen exit {p.returncode}: {err.decode(errors='replace')[-400:]}")
    res = json.loads(out.decode().strip().splitlines()[-1])
    res["server_cores"] = (cpu1 - cpu0) / wall
    res["machine_busy_cores"] = (busy1 - busy0) / wall
    res["wall_s"] = wall
    return res


def loadgen_cpu_children() -> float:
    ru = os.times()
    return ru.children_user + ru.children_system


def run_burst(a, kind: str, fake: Fake, tmp: str) -> dict:
    """Fresh server; idle RSS; `a.burst` calls in flight at once; RSS while they wait."""
    fake.scenario({"duration_ms": a.burst_duration_ms})
    # The burst's calls are identical: with the research cache on they would make one run
    # and wait for it, where this measures a thousand calls each waiting on its own run.
    srv = Server(kind, a, fake, tmp, "burst", extra={"PERPLEXITY_CACHE": "off"})
    out: dict = {"argv": srv.argv, "env": srv.env_shown}
    try:
        time.sleep(1.0)
        out["idle_rss_kib"] = status_kib(srv.pid, "VmRSS")
        out["idle_hwm_kib"] = status_kib(srv.pid, "VmHWM")
        before = {r["id"] for r in fake.runs()}
        spec = burst_spec(kind, srv)
        out["request"] = shown_request(spec)
        argv = loadgen_argv(a, srv.port, spec, [
            "--mode", "burst", "--connections", str(a.burst),
            "--timeout", str(a.burst_duration_ms / 1000 + 90)])
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        LIVE.add(p.pid)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in p.stdout] and None,
                         daemon=True).start()
        t0 = time.monotonic()
        samples = []  # (t, VmRSS KiB, runs in flight or None)
        sent_at = None
        last_runs_poll = 0.0
        in_flight = None
        result = None
        deadline = t0 + a.burst_duration_ms / 1000 + 150
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.1)
                text = line.decode().strip()
                if text.startswith("SENT "):
                    sent_at = time.monotonic() - t0
                elif text.startswith("{"):
                    result = json.loads(text)
            except queue.Empty:
                pass
            now = time.monotonic()
            if now - last_runs_poll >= 0.5:
                last_runs_poll = now
                try:
                    in_flight = sum(1 for r in fake.runs()
                                    if r["id"] not in before and r.get("terminal_at_ms") is None)
                except Exception:  # noqa: BLE001 - the fake being slow is not fatal here
                    in_flight = None
            rss = status_kib(srv.pid, "VmRSS")
            samples.append((now - t0, rss, in_flight))
            if result is not None and p.poll() is not None:
                break
        else:
            kill_group(p.pid)
            raise BenchError("burst did not finish in time")
        p.wait(5)
        LIVE.discard(p.pid)
        err = p.stderr.read().decode(errors="replace")
        if p.returncode != 0 or result is None:
            raise BenchError(f"loadgen exit {p.returncode}: {err[-400:]}")
        out["hwm_kib"] = status_kib(srv.pid, "VmHWM")
        out["rss_after_kib"] = status_kib(srv.pid, "VmRSS")
        full = [s for s in samples if s[2] is not None and s[2] >= a.burst and s[1]]
        out["all_in_flight_samples"] = len(full)
        out["all_in_flight_s"] = (full[-1][0] - full[0][0]) if full else 0.0
        out["rss_all_in_flight_median_kib"] = (statistics.median(s[1] for s in full)
                                               if full else None)
        out["rss_all_in_flight_max_kib"] = max((s[1] for s in full), default=None)
        out["rss_max_kib"] = max((s[1] for s in samples if s[1]), default=None)
        out["max_runs_in_flight"] = max((s[2] for s in samples if s[2] is not None), default=0)
        out["sent_at_s"] = sent_at
        out["loadgen"] = result
        out["samples"] = samples
        out["alive"] = srv.alive()
    finally:
        srv.stop()
        fake.scenario({"duration_ms": 0})
    return out


# --------------------------------------------------------------------------- report

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt_ms(v):
    return "n/a" if v is None else (f"{v:.2f} ms" if v < 100 else f"{v:.0f} ms")


def fmt_mib(kib):
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB ({kib * 1024 / 1e6:.1f} MB)"


def ratio(x, y):
    if x is None or y is None or y == 0:
        return "n/a"
    r = x / y
    return f"{r:.1f}×" if r < 100 else f"{r:.0f}×"


def machine_info() -> dict:
    info = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "nproc": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        info["cpu"] = "?"
    return info


def time_scrapes(srv: "Server", n: int = 50) -> dict:
    """`GET /metrics` of a server after its load (loopback, no token): n scrapes, timed
    one at a time from the client's side, and what the exposition holds."""
    # The metrics listener (PERPLEXITY_METRICS_BIND), as the server's start-up line names it.
    m = wait_for_line(srv.stderr_path, r"metrics on http://127\.0\.0\.1:(\d+)/metrics", srv.p, 30)
    url = f"http://127.0.0.1:{m.group(1)}/metrics"
    times, body = [], b""
    for _ in range(n):
        t0 = time.perf_counter()
        status, _, body = http("GET", url)
        times.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            raise BenchError(f"/metrics answered {status}")
    text = body.decode()
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    times.sort()
    return {"scrapes": n, "p50_ms": round(statistics.median(times), 3),
            "p99_ms": round(times[min(n - 1, int(n * 0.99))], 3), "series": series,
            "bytes": len(body)}


def render(a, info, tp: dict, tp_specs: dict, tp_rss: dict, mem: dict, unavailable: dict,
           node_version: str | None, scrape: dict | None = None) -> str:
    L = []
    L.append("# Streamable HTTP benchmark\n")
    L.append(f"- date: {info['date']}; CPU: {info['cpu']} × {info['nproc']}; "
             f"kernel {info['kernel']}; node {node_version or 'n/a'}")
    L.append(f"- throughput: {a.connections} keep-alive connections, {a.warmup:g} s warm-up + "
             f"{a.duration:g} s measured, {a.runs} runs per contender (round-robin, rotating); "
             f"loadgen --threads {a.threads}, on the same {info['nproc']} cores as the server")
    L.append(f"- memory: {a.burst} concurrent calls, fake run duration {a.burst_duration_ms} ms\n")

    keys = [k for k in ("ours", "ours-1w", "ours-legacy", "nginx", "node",
                        *list(AUTH_CONTENDERS)[1:])
            if k in tp]
    L.append("## Throughput: tools/list\n")
    L.append("Medians over the runs. `server CPU` = the server process's CPU time ÷ wall time "
             "(cores); `other load` = the machine's busy cores minus server and loadgen "
             "(work by other users of this machine).\n")
    L.append("| contender | req/s | p50 | p99 | server CPU | CPU per request | other load | errors |")
    L.append("|---|---|---|---|---|---|---|---|")
    summary = {}
    for k in keys:
        runs = tp[k]
        rps = med(r["rps"] for r in runs)
        p50 = med(r["lat_ms"]["p50"] for r in runs)
        p99 = med(r["lat_ms"]["p99"] for r in runs)
        cores = med(r["server_cores"] for r in runs)
        cpu_req = med(r["server_cores"] / r["rps"] * 1e6 for r in runs if r["rps"])
        other = med(max(0.0, r["machine_busy_cores"] - r["server_cores"] - r["loadgen_cores"])
                    for r in runs)
        errs = sum(r["non_2xx"] + r["bad_body"] + r["errors"] for r in runs)
        summary[k] = dict(rps=rps, p50=p50, p99=p99, cpu_req=cpu_req)
        L.append(f"| {k} | {rps:,.0f} | {fmt_ms(p50)} | {fmt_ms(p99)} | {cores:.2f} | "
                 f"{cpu_req:.0f} µs | {other:.2f} | {errs} |")
    for k, why in unavailable.items():
        L.append(f"| {k} | n/a | n/a | n/a | n/a | n/a | n/a | {why} |")
    L.append("")
    L.append("Every run:\n")
    L.append("| contender | run | req/s | p50 | p90 | p99 | max | server CPU | loadgen CPU | machine busy |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for k in keys:
        for i, r in enumerate(tp[k], 1):
            l = r["lat_ms"]
            L.append(f"| {k} | {i} | {r['rps']:,.0f} | {fmt_ms(l['p50'])} | {fmt_ms(l['p90'])} | "
                     f"{fmt_ms(l['p99'])} | {fmt_ms(l['max'])} | {r['server_cores']:.2f} | "
                     f"{r['loadgen_cores']:.2f} | {r['machine_busy_cores']:.2f} |")
    L.append("")
    if "ours" in summary and "node" in summary:
        s, n = summary["ours"], summary["node"]
        L.append("Ratios (ours = the stateless 2026-07-28 contender; above 1 means ours is better):\n")
        L.append(f"- req/s ours ÷ node: {ratio(s['rps'], n['rps'])}")
        L.append(f"- p50 node ÷ ours: {ratio(n['p50'], s['p50'])}; "
                 f"p99 node ÷ ours: {ratio(n['p99'], s['p99'])}")
        L.append(f"- server CPU per request node ÷ ours: {ratio(n['cpu_req'], s['cpu_req'])}")
        if "ours-legacy" in summary:
            g = summary["ours-legacy"]
            L.append(f"- ours-legacy vs node: req/s {ratio(g['rps'], n['rps'])}, "
                     f"p99 {ratio(n['p99'], g['p99'])}")
        L.append("")
    if "ours" in summary and "nginx" in summary:
        s, x = summary["ours"], summary["nginx"]
        L.append("Against the floor: nginx (one process) serving the same bytes as a static file, "
                 "in the same run (above 1 means ours costs more; goals: CPU per request and "
                 "p99 ≤ 1.0×):\n")
        L.append(f"- server CPU per request ours ÷ nginx: {s['cpu_req'] / x['cpu_req']:.2f}× "
                 f"({s['cpu_req']:.1f} µs vs {x['cpu_req']:.1f} µs, "
                 f"{s['cpu_req'] - x['cpu_req']:+.1f} µs)")
        L.append(f"- p99 ours ÷ nginx: {s['p99'] / x['p99']:.2f}× ({fmt_ms(s['p99'])} vs "
                 f"{fmt_ms(x['p99'])}); req/s ours ÷ nginx: {s['rps'] / x['rps']:.2f}×")
        if "ours-1w" in summary:
            w = summary["ours-1w"]
            L.append(f"- ours-1w (one worker, as nginx's one process): CPU per request "
                     f"{w['cpu_req'] / x['cpu_req']:.2f}× ({w['cpu_req']:.1f} µs), p99 "
                     f"{w['p99'] / x['p99']:.2f}× ({fmt_ms(w['p99'])}), req/s "
                     f"{w['rps'] / x['rps']:.2f}×")
        L.append("")
    auth_keys = [k for k in list(AUTH_CONTENDERS)[1:] if k in summary]
    if "ours" in summary and auth_keys:
        s = summary["ours"]
        L.append("Each against `ours` (the single token) in the same run: for the other ways "
                 "to authenticate, the extra server CPU per request is what finding the caller "
                 "costs; for `ours-metrics` (PERPLEXITY_METRICS=on), what recording the "
                 "metrics costs.\n")
        for k in auth_keys:
            o = summary[k]
            L.append(f"- {k}: req/s {o['rps'] / s['rps']:.2f}× of ours, p99 "
                     f"{fmt_ms(o['p99'])} vs {fmt_ms(s['p99'])}, CPU per request "
                     f"{o['cpu_req'] - s['cpu_req']:+.1f} µs")
        L.append("")
    if scrape:
        L.append(f"`GET /metrics` of ours-metrics after its runs: {scrape['series']} series, "
                 f"{scrape['bytes']:,} bytes, p50 {scrape['p50_ms']} ms, p99 {scrape['p99_ms']} ms "
                 f"over {scrape['scrapes']} scrapes (one at a time, client side).\n")
    L.append("Peak RSS of the throughput servers after all runs (VmHWM): " + ", ".join(
        f"{k}: {fmt_mib(v)}" for k, v in tp_rss.items()) + "\n")

    L.append("## Memory: concurrent waiting research calls\n")
    L.append("| | " + " | ".join(mem) + " |")
    L.append("|---|" + "---|" * len(mem))

    def mrow(label, f):
        L.append(f"| {label} | " + " | ".join(f(m) for m in mem.values()) + " |")

    def g(key, fn=fmt_mib):
        return lambda m: fn(m.get(key)) if "error" not in m else "n/a"
    mrow("idle RSS (VmRSS, 1 s after start)", g("idle_rss_kib"))
    mrow(f"RSS while all {a.burst} wait (median of samples)", g("rss_all_in_flight_median_kib"))
    mrow("RSS max while all wait", g("rss_all_in_flight_max_kib"))
    mrow("peak RSS (VmHWM at the end)", g("hwm_kib"))
    mrow("RSS after the calls returned", g("rss_after_kib"))
    mrow("samples with all runs in flight (span)", lambda m: (
        f"{m['all_in_flight_samples']} ({m['all_in_flight_s']:.1f} s)" if "error" not in m else "n/a"))
    mrow("max upstream runs in flight", lambda m: str(m.get("max_runs_in_flight", "n/a")))
    mrow("all requests written after", lambda m: fmt_ms(m["loadgen"]["all_sent_ms"]) if "loadgen" in m else "n/a")
    mrow("answers ok / non-2xx / bad / errors", lambda m: (
        "{ok} / {non_2xx} / {bad_body} / {errors}".format(**m["loadgen"]) if "loadgen" in m
        else m.get("error", "n/a")))
    mrow("call latency p50 / max", lambda m: (
        f"{fmt_ms(m['loadgen']['lat_ms']['p50'])} / {fmt_ms(m['loadgen']['lat_ms']['max'])}"
        if "loadgen" in m else "n/a"))
    if "ours" in mem and "node" in mem and "error" not in mem["ours"] and "error" not in mem["node"]:
        o, n = mem["ours"], mem["node"]
        L.append("")
        L.append(f"Ratios node ÷ ours: idle RSS {ratio(n['idle_rss_kib'], o['idle_rss_kib'])}, "
                 f"RSS with all waiting {ratio(n['rss_all_in_flight_median_kib'], o['rss_all_in_flight_median_kib'])}, "
                 f"peak {ratio(n['hwm_kib'], o['hwm_kib'])}")
    L.append("")

    L.append("## Targets (ours)\n")
    L.append("| target | measured | met? |")
    L.append("|---|---|---|")
    if "ours" in summary:
        s = summary["ours"]
        L.append(f"| ≥ 20,000 req/s (tools/list, {a.connections} connections) | {s['rps']:,.0f} req/s | "
                 f"{'yes' if s['rps'] >= 20000 else 'no'} |")
        L.append(f"| p99 < 10 ms | {fmt_ms(s['p99'])} | {'yes' if s['p99'] < 10 else 'no'} |")
    o = mem.get("ours", {})
    if "hwm_kib" in o:
        mb = o["hwm_kib"] * 1024 / 1e6
        ok = mb <= 64 and o.get("max_runs_in_flight", 0) >= a.burst and o["loadgen"]["ok"] == a.burst
        L.append(f"| RSS ≤ 64 MB with {a.burst} calls waiting | peak {fmt_mib(o['hwm_kib'])} | "
                 f"{'yes' if ok else 'no'} |")
    L.append("")
    L.append("## What was sent\n")
    for k, spec in tp_specs.items():
        L.append(f"- throughput {k}: {spec}")
    for k, m in mem.items():
        if "request" in m:
            L.append(f"- memory {k}: {m['request']}")
    for k, m in mem.items():
        if "argv" in m:
            L.append(f"- {k} server: `{' '.join(m['argv'])}` with {m['env']}")
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--node", help="node binary")
    ap.add_argument("--node-pkg", help="installed @perplexity-ai/mcp-server directory")
    ap.add_argument("--node-unavailable", help="reason the node peer is not measured")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="loadgen runtime threads")
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--burst-duration-ms", type=int, default=20000)
    ap.add_argument("--rate-burst", type=int, default=100000, help="PERPLEXITY_RATE_BURST (max 100000)")
    ap.add_argument("--rate-per-minute", type=int, default=1000000,
                    help="PERPLEXITY_RATE_PER_MINUTE (max 1000000)")
    ap.add_argument("--max-in-flight", type=int, default=4096, help="PERPLEXITY_HTTP_MAX_IN_FLIGHT")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-auth", action="store_true",
                    help="measure only the single token (no clients / JWT contenders)")
    ap.add_argument("--oidc", help="tests/oidc with its node_modules (the JWT contenders)")
    ap.add_argument("--oidc-unavailable", help="why the JWT contenders are not measured")
    ap.add_argument("--nginx", default="/usr/sbin/nginx",
                    help="nginx binary: the reference serving ours' bytes ('' to skip)")
    ap.add_argument("--out", help="directory for http-results.md / http-results.json")
    a = ap.parse_args()

    unavailable = {}
    node_version = None
    if not (a.node and a.node_pkg):
        unavailable["node"] = a.node_unavailable or "not configured"
    else:
        with open(os.path.join(a.node_pkg, "package.json")) as f:
            pkg = json.load(f)
        node_version = subprocess.run([a.node, "--version"], capture_output=True,
                                      text=True).stdout.strip()
        print(f"[http] node peer {pkg['name']}@{pkg['version']} on node {node_version}",
              file=sys.stderr)

    info = machine_info()
    tmp = tempfile.mkdtemp(prefix="http-bench-")
    fake = None
    provider = None
    servers: dict[str, Server] = {}
    tp: dict[str, list] = {}
    tp_specs: dict[str, str] = {}
    tp_rss: dict[str, float | None] = {}
    mem: dict[str, dict] = {}
    scrape: dict = {}
    try:
        fake = Fake(a.fake, tmp)
        print(f"[http] fake-perplexity at {fake.base}", file=sys.stderr)
        if not a.skip_throughput:
            servers["ours"] = Server("ours", a, fake, tmp, "tp")
            if "node" not in unavailable:
                servers["node"] = Server("node", a, fake, tmp, "tp")
            servers["ours-1w"] = Server("ours", a, fake, tmp, "tp-1w",
                                        extra={"PERPLEXITY_HTTP_WORKERS": "1"})
            contenders = [("ours", servers["ours"]), ("ours-1w", servers["ours-1w"]),
                          ("ours-legacy", servers["ours"])]
            if "node" in servers:
                contenders.append(("node", servers["node"]))
            if a.nginx and os.access(a.nginx, os.X_OK):
                spec = throughput_spec("ours", servers["ours"])
                headers = {"Content-Type": "application/json",
                           "Accept": "application/json, text/event-stream",
                           **dict(h.split(": ", 1) for h in spec["headers"])}
                _, _, body = http("POST", f"http://127.0.0.1:{servers['ours'].port}/mcp",
                                  spec["body"], headers)
                servers["nginx"] = Nginx(a.nginx, body, tmp)
                contenders.append(("nginx", servers["nginx"]))
            else:
                unavailable["nginx"] = ("no nginx (Debian: apt-get install nginx-light)"
                                        if a.nginx else "skipped (--nginx '')")
            if not a.skip_auth:
                servers["ours-clients"] = Server("ours", a, fake, tmp, "clients", auth="clients")
                contenders.append(("ours-clients", servers["ours-clients"]))
                servers["ours-metrics"] = Server("ours", a, fake, tmp, "metrics",
                                                 extra={"PERPLEXITY_METRICS": "on",
                                                        "PERPLEXITY_METRICS_BIND": "127.0.0.1:0"})
                contenders.append(("ours-metrics", servers["ours-metrics"]))
                if a.oidc:
                    provider = Provider(a, tmp, "http://127.0.0.1:1/unused")
                    for key in ("ours-jwt-es256", "ours-jwt-rs256"):
                        auth, alg = AUTH_CONTENDERS[key]
                        servers[key] = Server("ours", a, fake, tmp, key, auth=auth,
                                              provider=provider, alg=alg)
                        contenders.append((key, servers[key]))
                else:
                    unavailable["ours-jwt"] = a.oidc_unavailable or "no --oidc DIR"

            for key, srv in contenders:
                tp_specs[key] = shown_request(throughput_spec(key, srv))
                size = response_size(srv, throughput_spec(key, srv))
                if size is not None:
                    tp_specs[key] += f" (response body: {size} bytes)"
            for rnd in range(a.runs):
                order = contenders[rnd % len(contenders):] + contenders[:rnd % len(contenders)]
                for key, srv in order:
                    c0 = loadgen_cpu_children()
                    t0 = time.monotonic()
                    res = run_throughput(a, key, srv, tmp)
                    res["loadgen_cores"] = (loadgen_cpu_children() - c0) / (time.monotonic() - t0)
                    tp.setdefault(key, []).append(res)
                    print(f"[http] round {rnd + 1} {key}: {res['rps']:,.0f} req/s, "
                          f"p50 {res['lat_ms']['p50']} ms, p99 {res['lat_ms']['p99']} ms, "
                          f"server {res['server_cores']:.2f} cores, loadgen "
                          f"{res['loadgen_cores']:.2f}, machine {res['machine_busy_cores']:.2f}"
                          + (f", errors {res['non_2xx']}/{res['bad_body']}/{res['errors']}: "
                             f"{res['first_error']}" if res["first_error"] else ""),
                          file=sys.stderr)
            if "ours-metrics" in servers:
                scrape.update(time_scrapes(servers["ours-metrics"]))
                print(f"[http] /metrics: {scrape}", file=sys.stderr)
            for key, srv in servers.items():
                tp_rss[key] = status_kib(srv.pid, "VmHWM")
                srv.stop()
            servers.clear()
        if not a.skip_memory:
            kinds = ["ours"] + (["node"] if "node" not in unavailable else [])
            for kind in kinds:
                print(f"[http] memory: {kind}, {a.burst} calls, run duration "
                      f"{a.burst_duration_ms} ms", file=sys.stderr)
                try:
                    mem[kind] = run_burst(a, kind, fake, tmp)
                    m = mem[kind]
                    print(f"[http]   idle {m['idle_rss_kib']} KiB, all in flight median "
                          f"{m['rss_all_in_flight_median_kib']} KiB, HWM {m['hwm_kib']} KiB, "
                          f"runs in flight max {m['max_runs_in_flight']}, loadgen ok "
                          f"{m['loadgen']['ok']} errors {m['loadgen']['errors']} "
                          f"{m['loadgen']['first_error'] or ''}", file=sys.stderr)
                except BenchError as e:
                    mem[kind] = {"error": str(e)}
                    print(f"[http]   {kind} memory failed: {e}", file=sys.stderr)
            for kind, why in unavailable.items():
                mem.setdefault(kind, {"error": why})
        report = render(a, info, tp, tp_specs, tp_rss, mem, unavailable, node_version, scrape)
        print(report)
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "http-results.md"), "w") as f:
                f.write(report)
            with open(os.path.join(a.out, "http-results.json"), "w") as f:
                json.dump({"args": vars(a), "machine": info, "throughput": tp,
                           "throughput_sent": tp_specs, "throughput_hwm_kib": tp_rss,
                           "memory": mem, "unavailable": unavailable, "scrape": scrape},
                          f, indent=1)
        return 0
    except BenchError as e:
        print(f"[http] failed: {e}", file=sys.stderr)
        return 1
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 1
    finally:
        for srv in servers.values():
            srv.stop()
        if provider is not None:
            provider.stop()
        if fake is not None:
            fake.stop()
        for pid in list(LIVE):
            kill_group(pid)


if __name__ == "__main__":
    sys.exit(main())
