#!/usr/bin/env python3
"""Benchmark harness: perplexity-agent vs. two peer MCP servers (stdlib only).

Measures, in one run, interleaving the contenders round-robin:

1. cold start: spawn -> initialize -> (response) -> notifications/initialized +
   tools/list -> time until the tools/list response line arrives; then close stdin
   and reap the child with os.wait4 (also gives the exit time after EOF);
2. peak RSS of that same session (ru_maxrss from os.wait4, KiB on Linux);
3. per-call overhead: one tools/call of the research tool against the loopback fake
   with scenario {"duration_ms": 0}, end to end;
4. completion detection latency: scenario {"duration_ms": 3000}; wall-clock arrival
   of the tools/call response minus the run's terminal_at_ms from the fake's
   GET /_control/runs;
5. late collection: the same run started with wait: false and collected with
   perplexity_agent_result(wait_seconds), measured the same way.

Only loopback addresses are ever contacted. Every wait has a timeout; every child is
started in its own session and killed (by its process group id) on error or exit.
Prints a markdown report on stdout and writes it (plus raw JSON) with --out.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import platform
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_bench  # noqa: E402  (status_kib: one reader of /proc/PID/status for every bench)

DUMMY_KEY = "pplx-bench-dummy"
PROTOCOL_VERSION = "2025-11-25"

LIVE: set[int] = set()  # pids of children still to be reaped/killed


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------- children

def kill_group(pid: int) -> None:
    """SIGKILL the process group we created for `pid` (start_new_session=True)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reap(pid: int, timeout: float) -> tuple[int | None, object | None, float]:
    """Wait for `pid` with os.wait4, polling, up to `timeout` seconds.

    Returns (exit status or None on timeout, rusage or None, seconds waited)."""
    t0 = time.perf_counter()
    deadline = t0 + timeout
    while True:
        try:
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            LIVE.discard(pid)
            return None, None, time.perf_counter() - t0
        if wpid == pid:
            LIVE.discard(pid)
            return status, ru, time.perf_counter() - t0
        if time.perf_counter() >= deadline:
            return None, None, time.perf_counter() - t0
        # Fine-grained at first (the exit time after EOF is reported), coarser later.
        time.sleep(0.0005 if time.perf_counter() - t0 < 0.2 else 0.01)


def kill_and_reap(pid: int) -> object | None:
    kill_group(pid)
    _, ru, _ = reap(pid, 5.0)
    return ru


def cleanup_all() -> None:
    for pid in list(LIVE):
        kill_and_reap(pid)


class Server:
    """One MCP server over stdio, with a non-blocking line reader on its stdout."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr_path: str):
        self.stderr_path = stderr_path
        self._err = open(stderr_path, "wb")
        self.t_spawn = time.perf_counter()
        try:
            self.p = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                env=env, close_fds=True, start_new_session=True, bufsize=0,
            )
        except OSError:
            self._err.close()
            raise
        LIVE.add(self.p.pid)
        self.fd = self.p.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.buf = b""
        self.pending: list[tuple[dict, float, float]] = []  # (msg, perf, wall)
        self.notifications: list[dict] = []
        self.reaped = False
        self.accept_any = False  # floor (/bin/cat): any line with an id is "the response"

    def send(self, *msgs: dict) -> None:
        data = b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in msgs)
        try:
            self.p.stdin.write(data)
            self.p.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise BenchError(f"server stdin closed ({e}); stderr: {self.stderr_tail()}")

    def wait_for(self, rid, timeout: float) -> tuple[dict, float, float]:
        """Wait for the response with id `rid`. Returns (msg, perf_counter, time.time())
        taken when the chunk holding its line was read."""
        deadline = time.perf_counter() + timeout
        while True:
            for i, (msg, tp, tw) in enumerate(self.pending):
                if msg.get("id") == rid:
                    del self.pending[i]
                    return msg, tp, tw
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise BenchError(f"timeout ({timeout}s) waiting for response id={rid}; "
                                 f"stderr: {self.stderr_tail()}")
            r, _, _ = select.select([self.fd], [], [], remaining)
            if not r:
                continue
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                continue
            tp, tw = time.perf_counter(), time.time()
            if not chunk:
                raise BenchError(f"server closed stdout before answering id={rid}; "
                                 f"stderr: {self.stderr_tail()}")
            self.buf += chunk
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                line = line.strip()
                if not line:
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    raise BenchError(f"non-JSON line on stdout: {line[:200]!r}")
                if isinstance(msg, dict) and "id" in msg and (
                        self.accept_any or "result" in msg or "error" in msg):
                    self.pending.append((msg, tp, tw))
                else:
                    self.notifications.append(msg)

    def close_and_reap(self, timeout: float) -> tuple[int | None, object | None, float]:
        """Close stdin, wait for exit (os.wait4). Kills the group on timeout.
        Returns (status or None if it had to be killed, rusage, seconds to exit)."""
        try:
            self.p.stdin.close()
        except OSError:
            pass
        status, ru, waited = reap(self.p.pid, timeout)
        if status is None:
            ru = kill_and_reap(self.p.pid)
        self._finish(status)
        return status, ru, waited

    def kill(self) -> None:
        if not self.reaped:
            ru = kill_and_reap(self.p.pid)
            self._finish(None)
            return ru
        return None

    def _finish(self, status) -> None:
        self.reaped = True
        # Tell Popen the child is gone so it never waits on/kills a recycled pid.
        self.p.returncode = os.waitstatus_to_exitcode(status) if status is not None else -9
        for f in (self.p.stdin, self.p.stdout):
            try:
                f.close()
            except OSError:
                pass
        self._err.close()

    def stderr_tail(self, n: int = 400) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                data = f.read()
            return data[-n:].decode("utf-8", "replace").strip() or "(empty)"
        except OSError:
            return "(unreadable)"


# --------------------------------------------------------------------------- fake

class Fake:
    def __init__(self, binary: str, tmp: str):
        self.err = open(os.path.join(tmp, "fake.stderr"), "wb")
        self.p = subprocess.Popen(
            [binary, "--port", "0", "--scenario", '{"duration_ms":0}'],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.err,
            close_fds=True, start_new_session=True,
        )
        LIVE.add(self.p.pid)
        fd = self.p.stdout.fileno()
        r, _, _ = select.select([fd], [], [], 30)
        if not r:
            raise BenchError("fake-perplexity did not print its address within 30 s")
        line = self.p.stdout.readline().decode().strip()
        prefix = "listening on "
        if not line.startswith(prefix):
            raise BenchError(f"unexpected first line from fake-perplexity: {line!r}")
        self.base = line[len(prefix):]
        if not self.base.startswith("http://127.0.0.1:"):
            raise BenchError(f"fake is not on 127.0.0.1: {self.base}")
        # Never use ambient proxies, even for loopback.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _req(self, method: str, path: str, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with self.opener.open(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def scenario(self, sc: dict) -> None:
        self._req("POST", "/_control/scenario", sc)

    def runs(self) -> list[dict]:
        return self._req("GET", "/_control/runs")

    def stop(self) -> None:
        try:
            os.killpg(self.p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        status, _, _ = reap(self.p.pid, 5)
        if status is None:
            kill_and_reap(self.p.pid)
        self.p.returncode = 0
        self.p.stdout.close()
        self.err.close()


# --------------------------------------------------------------------------- contenders

class Contender:
    def __init__(self, key: str, label: str, cold_argv: list[str] | None,
                 call_argv: list[str] | None, env: dict[str, str], tool: str,
                 tool_args: dict, call_note: str = "", cold_note: str = ""):
        self.key = key
        self.label = label
        self.cold_argv = cold_argv
        self.call_argv = call_argv
        self.env = env
        self.tool = tool
        self.tool_args = tool_args
        self.call_note = call_note  # why calls are unavailable, when call_argv is None
        self.cold_note = cold_note
        self.server_info: dict | None = None
        self.negotiated: str | None = None
        self.results: dict[str, list[float]] = {}
        self.errors: dict[str, list[str]] = {}
        self.disabled: dict[str, str] = {}

    def add(self, metric: str, value: float) -> None:
        self.results.setdefault(metric, []).append(value)

    def fail(self, phase: str, msg: str) -> None:
        errs = self.errors.setdefault(phase, [])
        errs.append(msg)
        print(f"  [{self.key}] {phase} error: {msg}", file=sys.stderr)
        # Three consecutive-ish failures: stop trying this phase for this contender.
        if len(errs) >= 3 and len(self.results.get(phase + "_ok", [])) == 0:
            self.disabled[phase] = f"failed 3 times; first error: {errs[0]}"


def base_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM")
           if k in os.environ}
    # No ambient proxy may reroute anything: loopback only.
    env["NO_PROXY"] = env["no_proxy"] = "*"
    env["PERPLEXITY_API_KEY"] = DUMMY_KEY
    env.update(extra)
    return env


def initialize_msg(rid=1) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                       "clientInfo": {"name": "perplexity-agent-bench", "version": "1"}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def handshake(srv: Server, timeout: float) -> tuple[dict, float, float]:
    """initialize -> response -> initialized + tools/list -> response.
    Returns (initialize result, t_init_response, t_tools_list_response) (perf_counter)."""
    srv.send(initialize_msg(1))
    init, t_init, _ = srv.wait_for(1, timeout)
    if "result" not in init:
        raise BenchError(f"initialize failed: {json.dumps(init)[:300]}")
    srv.send(INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    tl, t_list, _ = srv.wait_for(2, timeout)
    tools = (tl.get("result") or {}).get("tools")
    if not isinstance(tools, list) or not tools:
        raise BenchError(f"tools/list failed: {json.dumps(tl)[:300]}")
    return init["result"], t_init, t_list


def cold_start_once(c: Contender, tmp: str, timeout: float) -> None:
    harness_rss = http_bench.status_kib("self", "VmRSS")
    srv = Server(c.cold_argv, c.env, os.path.join(tmp, f"{c.key}.cold.stderr"))
    try:
        init, t_init, t_list = handshake(srv, timeout)
        if c.server_info is None:
            c.server_info = init.get("serverInfo")
            c.negotiated = init.get("protocolVersion")
        # Peak RSS of the server's own image: VmHWM is per address space and starts
        # afresh at exec, so (unlike wait4's ru_maxrss, see below) it does not include
        # the harness's pages that the child inherited at fork. Sampled at the end of
        # the session, right before stdin is closed.
        hwm = http_bench.status_kib(srv.p.pid, "VmHWM")
        status, ru, waited = srv.close_and_reap(timeout)
    except BaseException:
        srv.kill()
        raise
    c.add("cold_init_ms", (t_init - srv.t_spawn) * 1e3)
    c.add("cold_ms", (t_list - srv.t_spawn) * 1e3)
    c.add("cold_ok", 1)
    if hwm is not None:
        c.add("rss_kib", hwm)
    if ru is not None:
        # Linux folds the pre-exec (forked harness) RSS into ru_maxrss: its floor is
        # the harness's own RSS at spawn time, recorded alongside.
        c.add("maxrss_wait4_kib", float(ru.ru_maxrss))
    if harness_rss is not None:
        c.add("harness_rss_kib", harness_rss)
    if status is None:
        c.errors.setdefault("exit", []).append(f"did not exit within {timeout}s of stdin EOF (killed)")
    else:
        c.add("exit_ms", waited * 1e3)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            c.errors.setdefault("exit", []).append(f"exit code {code} after EOF")


def floor_once(c: Contender, tmp: str, timeout: float) -> None:
    """Harness floor: spawn /bin/cat, write the initialize line, time its echo."""
    srv = Server(c.cold_argv, c.env, os.path.join(tmp, "floor.stderr"))
    srv.accept_any = True
    try:
        srv.send(initialize_msg(1))
        _, t, _ = srv.wait_for(1, timeout)
        hwm = http_bench.status_kib(srv.p.pid, "VmHWM")
        srv.close_and_reap(timeout)
    except BaseException:
        srv.kill()
        raise
    c.add("cold_ms", (t - srv.t_spawn) * 1e3)
    c.add("cold_ok", 1)
    if hwm is not None:
        c.add("rss_kib", hwm)


def call_text(msg: dict) -> tuple[bool, str]:
    res = msg.get("result")
    if not isinstance(res, dict):
        return False, json.dumps(msg)[:300]
    text = " ".join(p.get("text", "") for p in res.get("content", []) if isinstance(p, dict))
    return (not res.get("isError", False)), text


class CallSession:
    def __init__(self, c: Contender, tmp: str, timeout: float):
        self.c = c
        self.srv = Server(c.call_argv, c.env, os.path.join(tmp, f"{c.key}.call.stderr"))
        self.next_id = 10
        try:
            handshake(self.srv, timeout)
        except BaseException:
            self.srv.kill()
            raise

    def call(self, timeout: float, tool: str | None = None, args: dict | None = None,
             answer: bool = True) -> tuple[float, float, str]:
        """One tools/call (the contender's research tool unless named). Returns
        (elapsed seconds, wall-clock arrival, text)."""
        self.next_id += 1
        rid = self.next_id
        req = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
               "params": {"name": tool or self.c.tool,
                          "arguments": self.c.tool_args if args is None else args}}
        t0 = time.perf_counter()
        self.srv.send(req)
        msg, tp, tw = self.srv.wait_for(rid, timeout)
        ok, text = call_text(msg)
        if not ok:
            raise BenchError(f"tool call returned an error: {text[:300]}")
        if answer and "Fake answer" not in text:
            raise BenchError(f"answer missing from the tool result: {text[:300]}")
        return tp - t0, tw, text

    def close(self) -> None:
        self.srv.close_and_reap(10)


# --------------------------------------------------------------------------- stats/report

def median(xs): return statistics.median(xs) if xs else None


def p90(xs):
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=10, method="inclusive")[8]


def fmt(v, unit="ms", nd=1):
    if v is None:
        return "n/a"
    if unit == "ms":
        if abs(v) < 10:
            return f"{v:.2f} ms"
        return f"{v:.{nd}f} ms"
    if unit == "mib":
        return f"{v / 1024:.1f} MiB"
    return f"{v}"


def ratio(peer, ours):
    if peer is None or ours is None or ours <= 0:
        return "n/a"
    return f"{peer / ours:.1f}×"


def sh(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def machine_info() -> dict:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                    break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "mem": mem,
        "kernel": platform.release(),
        "os": sh(["sh", "-c", ". /etc/os-release 2>/dev/null && echo $PRETTY_NAME"]),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_start": os.getloadavg(),
    }


def source_info(ours_bin: str) -> str:
    """Which source our binary was built from (the work tree may be dirty)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    head = sh(["git", "-C", root, "rev-parse", "--short", "HEAD"]) or "?"
    dirty = sh(["git", "-C", root, "status", "--porcelain", "--", "src", "crates", "Cargo.toml", "Cargo.lock"])
    n = len([l for l in dirty.splitlines() if l.strip()])
    try:
        built = _dt.datetime.fromtimestamp(os.path.getmtime(ours_bin), _dt.timezone.utc).strftime("%H:%M UTC")
    except OSError:
        built = "?"
    return (f"git {head}" + (f" + {n} uncommitted change(s) under src/, crates/, Cargo.*" if n else " (clean)")
            + f"; binary built {built}, {os.path.getsize(ours_bin) / 1e6:.1f} MB")


# --------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True, help="perplexity-agent release binary")
    ap.add_argument("--fake", required=True, help="fake-perplexity release binary")
    ap.add_argument("--py-venv", help="venv holding perplexity-agent-mcp")
    ap.add_argument("--py-unavailable", default="", help="reason the Python peer is n/a")
    ap.add_argument("--node", help="node binary for the npm peer")
    ap.add_argument("--node-pkg", help="directory of @perplexity-ai/mcp-server")
    ap.add_argument("--node-unavailable", default="", help="reason the npm peer is n/a")
    ap.add_argument("--cold-runs", type=int, default=30)
    ap.add_argument("--call-runs", type=int, default=20)
    ap.add_argument("--detect-runs", type=int, default=5)
    ap.add_argument("--detect-duration-ms", type=int, default=3000)
    ap.add_argument("--timeout", type=float, default=30.0, help="per-wait timeout (s)")
    ap.add_argument("--out", help="directory for results.md / results.json")
    ap.add_argument("--skip", default="", help="comma list of contender keys to skip")
    ap.add_argument("--no-diag", action="store_true",
                    help="skip the diagnostic rows (harness floor, ours with a 1-cert CA store)")
    a = ap.parse_args()

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)

    tmp = tempfile.mkdtemp(prefix="pplx-bench-")
    fake = None
    try:
        info = machine_info()
        info["source"] = source_info(a.ours)
        fake = Fake(a.fake, tmp)
        print(f"fake-perplexity at {fake.base}", file=sys.stderr)

        contenders: list[Contender] = []
        unavailable: dict[str, tuple[str, str]] = {}
        skip = set(filter(None, a.skip.split(",")))

        # The peers have no rate limit: measure ours with a bucket the runs cannot drain,
        # and a store of its own (every billable call writes its spend ledger row).
        ours_env = {"PERPLEXITY_API_BASE": fake.base, "PERPLEXITY_RATE_BURST": "100000",
                    "PERPLEXITY_RATE_PER_MINUTE": "1000000",
                    "PERPLEXITY_STORE_PATH": os.path.join(tmp, "ours.sqlite")}
        ours = Contender(
            "ours", "perplexity-agent (ours, Rust)", [a.ours], [a.ours],
            base_env(ours_env), "perplexity_agent", {"query": "x"})
        contenders.append(ours)
        # The same with a daily budget it cannot spend: each call then also reads the
        # ledger and holds its estimate under the admission lock (spend/mod.rs).
        contenders.append(Contender(
            "ours-budget", "perplexity-agent with PERPLEXITY_BUDGET_DAILY set", [a.ours], [a.ours],
            base_env({**ours_env, "PERPLEXITY_BUDGET_DAILY": "1000000",
                      "PERPLEXITY_STORE_PATH": os.path.join(tmp, "budget.sqlite")}),
            "perplexity_agent", {"query": "x"}))

        py_label = "perplexity-agent-mcp 0.4.0 (PyPI, Python)"
        if "py" in skip:
            unavailable["py"] = (py_label, "skipped (--skip)")
        elif a.py_unavailable or not a.py_venv:
            unavailable["py"] = (py_label, a.py_unavailable or "not installed")
        else:
            py = os.path.join(a.py_venv, "bin", "python")
            entry = os.path.join(a.py_venv, "bin", "perplexity-agent-mcp")
            # API_BASE is a module constant with no env override (deliberately, see
            # its source); its own tests reassign it in-process. The same is done
            # here, for the call phases only: cold start uses the real entry point.
            shim = ("import sys, perplexity_agent_mcp as m; m.API_BASE = sys.argv[1]; "
                    "sys.exit(m.main())")
            contenders.append(Contender(
                "py", py_label, [entry], [py, "-c", shim, fake.base],
                base_env({}), "perplexity_agent", {"query": "x"}))

        node_label = "@perplexity-ai/mcp-server 1.2.1 (npm, Node)"
        if "node" in skip:
            unavailable["node"] = (node_label, "skipped (--skip)")
        elif a.node_unavailable or not (a.node and a.node_pkg):
            unavailable["node"] = (node_label, a.node_unavailable or "not installed")
        else:
            entry = os.path.join(a.node_pkg, "dist", "index.js")
            contenders.append(Contender(
                "node", node_label, [a.node, entry], [a.node, entry],
                base_env({"PERPLEXITY_BASE_URL": fake.base}),
                "perplexity_ask", {"messages": [{"role": "user", "content": "x"}]}))

        # Diagnostics (cold start only, not contenders): the harness's own floor for
        # "spawn a process and get one line back", and our server with a one-
        # certificate CA store (shows what loading the system CA store costs).
        diags: list[Contender] = []
        if not a.no_diag:
            cat = shutil.which("cat")
            if cat:
                diags.append(Contender("floor", f"harness floor: spawn {cat}, write the "
                                       "initialize line, time its echo", [cat], None,
                                       base_env({}), "", {}))
            pems = sorted(glob.glob("/etc/ssl/certs/*.pem"))
            if pems:
                one = os.path.join(tmp, "one-ca")
                os.makedirs(os.path.join(one, "empty-dir"))
                shutil.copy(pems[0], os.path.join(one, "ca.pem"))
                diags.append(Contender(
                    "ours-1ca", "ours with SSL_CERT_FILE=<one CA cert>, SSL_CERT_DIR=<empty dir> "
                    f"(the system store has {len(os.listdir('/etc/ssl/certs'))} entries)",
                    [a.ours], None,
                    base_env({"PERPLEXITY_API_BASE": fake.base,
                              "SSL_CERT_FILE": os.path.join(one, "ca.pem"),
                              "SSL_CERT_DIR": os.path.join(one, "empty-dir")}),
                    "perplexity_agent", {}))

        def rounds(n, who):
            """Round-robin order, rotated each round so no contender is always first."""
            for i in range(n):
                k = i % len(who)
                yield i, who[k:] + who[:k]

        def cold(c):
            (floor_once if c.key == "floor" else cold_start_once)(c, tmp, a.timeout)

        # ---- phase 1+2: cold start + peak RSS --------------------------------------
        print(f"phase 1/4: cold start x{a.cold_runs} (+1 warm-up each)", file=sys.stderr)
        everyone = contenders + diags
        for c in everyone:  # warm-up (page cache, pyc), not recorded
            try:
                cold(c)
            except Exception as e:  # noqa: BLE001
                c.fail("cold", f"warm-up: {e}")
            c.results.clear()
        for i, order in rounds(a.cold_runs, everyone):
            for c in order:
                if "cold" in c.disabled:
                    continue
                try:
                    cold(c)
                except Exception as e:  # noqa: BLE001
                    c.fail("cold", str(e))

        # ---- phase 3: per-call overhead -------------------------------------------
        print(f"phase 2/4: tools/call overhead x{a.call_runs}", file=sys.stderr)
        fake.scenario({"duration_ms": 0})
        sessions: dict[str, CallSession] = {}
        try:
            for c in contenders:
                if c.call_argv is None:
                    c.disabled["call"] = c.disabled["detect"] = c.call_note
                    continue
                try:
                    sessions[c.key] = CallSession(c, tmp, a.timeout)
                    sessions[c.key].call(a.timeout)  # warm-up (connection setup, JIT)
                except Exception as e:  # noqa: BLE001
                    c.disabled["call"] = c.disabled["detect"] = f"could not make a call: {e}"
                    print(f"  [{c.key}] {c.disabled['call']}", file=sys.stderr)
                    if c.key in sessions:
                        sessions.pop(c.key).srv.kill()
            for i, order in rounds(a.call_runs, contenders):
                for c in order:
                    if c.key not in sessions or "call" in c.disabled:
                        continue
                    try:
                        dt, _, _ = sessions[c.key].call(a.timeout)
                        c.add("call_ms", dt * 1e3)
                        c.add("call_ok", 1)
                    except Exception as e:  # noqa: BLE001
                        c.fail("call", str(e))

            # ---- phase 4: completion detection latency ----------------------------
            print(f"phase 3/4: completion detection x{a.detect_runs} "
                  f"(scenario duration_ms={a.detect_duration_ms})", file=sys.stderr)
            fake.scenario({"duration_ms": a.detect_duration_ms})
            for i, order in rounds(a.detect_runs, contenders):
                for c in order:
                    if c.key not in sessions or "detect" in c.disabled:
                        continue
                    try:
                        before = {r["id"] for r in fake.runs()}
                        dt, wall, _ = sessions[c.key].call(a.timeout + a.detect_duration_ms / 1e3)
                        new = [r for r in fake.runs() if r["id"] not in before]
                        if len(new) != 1:
                            raise BenchError(f"expected 1 new run, saw {len(new)}")
                        run = new[0]
                        if run.get("terminal_at_ms") is None:
                            raise BenchError(f"run {run['id']} not terminal at answer time "
                                             f"(status {run.get('status')})")
                        c.add("detect_ms", wall * 1e3 - run["terminal_at_ms"])
                        c.add("detect_call_ms", dt * 1e3)
                        c.add("detect_ok", 1)
                    except Exception as e:  # noqa: BLE001
                        c.fail("detect", str(e))
            # ---- phase 5: a late collector ----------------------------------------
            # The run is started with wait: false and collected with
            # perplexity_agent_result(wait_seconds): how soon after the run ends does the
            # collector answer? Only the contenders with the lifecycle tools.
            print(f"phase 4/4: late collection x{a.detect_runs} "
                  f"(scenario duration_ms={a.detect_duration_ms})", file=sys.stderr)
            for i, order in rounds(a.detect_runs, contenders):
                for c in order:
                    if c.key not in sessions or c.tool != "perplexity_agent":
                        c.disabled.setdefault("collect", "no perplexity_agent_result tool")
                        continue
                    if "collect" in c.disabled:
                        continue
                    try:
                        before = {r["id"] for r in fake.runs()}
                        _, _, text = sessions[c.key].call(
                            a.timeout, args={**c.tool_args, "wait": False}, answer=False)
                        words = text.split()
                        if len(words) < 3 or words[0] != "Research" or words[1] != "run":
                            raise BenchError(f"not a handed-back run: {text[:200]}")
                        dt, wall, _ = sessions[c.key].call(
                            a.timeout + a.detect_duration_ms / 1e3,
                            tool="perplexity_agent_result",
                            args={"response_id": words[2], "wait_seconds": 60})
                        new = [r for r in fake.runs() if r["id"] not in before]
                        if len(new) != 1 or new[0].get("terminal_at_ms") is None:
                            raise BenchError(f"expected 1 finished new run, saw {new}")
                        c.add("collect_ms", wall * 1e3 - new[0]["terminal_at_ms"])
                        c.add("collect_ok", 1)
                    except Exception as e:  # noqa: BLE001
                        c.fail("collect", str(e))
        finally:
            for s in sessions.values():
                try:
                    s.close()
                except Exception:  # noqa: BLE001
                    s.srv.kill()

        info["loadavg_end"] = os.getloadavg()
        report, raw = render(a, info, contenders, unavailable, fake.base, diags)
        print(report)
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "results.md"), "w") as f:
                f.write(report)
            with open(os.path.join(a.out, "results.json"), "w") as f:
                json.dump(raw, f, indent=2)
        return 0
    except KeyboardInterrupt as e:
        print(f"interrupted: {e}", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 1
    finally:
        if fake is not None:
            try:
                fake.stop()
            except Exception:  # noqa: BLE001
                pass
        cleanup_all()
        shutil.rmtree(tmp, ignore_errors=True)


def render(a, info, contenders: list[Contender], unavailable, fake_base,
           diags: list[Contender]) -> tuple[str, dict]:
    ours = contenders[0]
    peers = [c for c in contenders[1:]]
    cols = [ours] + peers
    L: list[str] = []
    L.append("## Machine\n")
    L.append(f"- date: {info['date']}")
    L.append(f"- CPU: {info['cpu']} × {info['nproc']} (nproc), memory {info['mem']}")
    L.append(f"- kernel: {info['kernel']}; OS: {info['os']}")
    L.append("- load average at start / end: "
             + " / ".join(", ".join(f"{x:.2f}" for x in info[k]) for k in ("loadavg_start", "loadavg_end")))
    L.append(f"- ours built from: {info.get('source', '?')}")
    L.append(f"- python {platform.python_version()}; {sh([a.node, '--version']) if a.node else 'node n/a'} "
             f"(for the npm peer)")
    L.append("")
    L.append("## Contenders\n")
    for c in cols:
        si = c.server_info
        seen = (f"serverInfo `{si.get('name', '?')} {si.get('version', '?')}`, negotiated "
                f"protocolVersion `{c.negotiated}`" if isinstance(si, dict) else "never completed initialize")
        L.append(f"- **{c.key}**: {c.label} — {seen}; research tool `{c.tool}`")
    for key, (label, why) in unavailable.items():
        L.append(f"- **{key}**: {label} — **n/a**: {why}")
    L.append("")
    L.append(f"Runs: cold start N={a.cold_runs} (+1 warm-up), tools/call N={a.call_runs} (+1 warm-up), "
             f"completion detection N={a.detect_runs} (scenario duration_ms={a.detect_duration_ms}); "
             f"contenders interleaved round-robin, order rotated every round.\n")

    def row(name, metric, unit="ms", stat=median, ratio_ok=True):
        cells = [name]
        vals = []
        for c in cols:
            xs = c.results.get(metric, [])
            v = stat(xs) if xs else None
            vals.append(v)
            phase = {"cold_ms": "cold", "cold_init_ms": "cold", "rss_kib": "cold", "exit_ms": "cold",
                     "call_ms": "call", "detect_ms": "detect", "detect_call_ms": "detect",
                     "collect_ms": "collect"}.get(metric, "")
            if v is None and phase in c.disabled:
                cells.append("n/a")
            else:
                cells.append(fmt(v, unit))
        for c, v in zip(peers, vals[1:]):
            cells.append(ratio(v, vals[0]) if ratio_ok else "")
        L.append("| " + " | ".join(cells) + " |")

    head = ["Metric"] + [c.key for c in cols] + [f"{c.key}/ours" for c in peers]
    L.append("## Results (medians unless stated; ratio = peer ÷ ours, >1 means ours is lower)\n")
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    row("Cold start → tools/list response, median", "cold_ms")
    row("Cold start → tools/list response, p90", "cold_ms", stat=p90)
    row("Cold start → initialize response, median", "cold_init_ms")
    row("Exit after stdin EOF, median", "exit_ms")
    row("Peak RSS of the cold-start session (VmHWM), median", "rss_kib", unit="mib")
    row("wait4 ru_maxrss of that session, median (†)", "maxrss_wait4_kib", unit="mib")
    row("tools/call, fake duration_ms=0, median", "call_ms")
    row("tools/call, fake duration_ms=0, p90", "call_ms", stat=p90)
    row("Completion detection (answer − terminal_at), median", "detect_ms")
    row("Completion detection, max", "detect_ms", stat=lambda xs: max(xs))
    row(f"tools/call with duration_ms={a.detect_duration_ms}, median", "detect_call_ms")
    row("Late collection (perplexity_agent_result answer − terminal_at), median", "collect_ms")
    row("Late collection, max", "collect_ms", stat=lambda xs: max(xs))
    hr = median(ours.results.get("harness_rss_kib", []))
    L.append("")
    L.append("(†) Linux folds the RSS of the forked, not-yet-exec'd child — i.e. the harness's "
             f"own pages — into ru_maxrss, so this row cannot go below the harness's RSS at spawn "
             f"time ({fmt(hr, 'mib')} median here). VmHWM (peak RSS of the address space created "
             "by exec, read from /proc/PID/status right before stdin is closed) is the real figure.")
    L.append("")

    if diags:
        L.append("## Diagnostics (cold start only; not contenders)\n")
        L.append("| Diagnostic | spawn → reply line, median | p90 | VmHWM median |")
        L.append("|---|---|---|---|")
        for d in diags:
            xs = d.results.get("cold_ms", [])
            L.append(f"| {d.key}: {d.label} | {fmt(median(xs))} | {fmt(p90(xs))} | "
                     f"{fmt(median(d.results.get('rss_kib', [])), 'mib')} |")
        L.append("")

    # Targets (ours only).
    L.append("## Targets (ours)\n")
    L.append("| Target | Measured | Met? |")
    L.append("|---|---|---|")
    cm = median(ours.results.get("cold_ms", []))
    L.append(f"| cold start to tools/list ≤ 5 ms median | {fmt(cm)} | "
             f"{'n/a' if cm is None else ('yes' if cm <= 5 else f'no (+{cm - 5:.2f} ms, {cm / 5:.2f}× the target)')} |")
    # The "ours-…" columns are ours in another configuration, not peers to beat.
    for c in [p for p in peers if not p.key.startswith("ours")]:
        pm = median(c.results.get("cold_ms", []))
        if cm is None or pm is None:
            L.append(f"| ≥ 10× faster cold start than {c.key} | n/a | n/a |")
        else:
            r = pm / cm
            L.append(f"| ≥ 10× faster cold start than {c.key} | {r:.1f}× | {'yes' if r >= 10 else 'no'} |")
    for key in unavailable:
        L.append(f"| ≥ 10× faster cold start than {key} | n/a | n/a (peer unavailable) |")
    rm = median(ours.results.get("rss_kib", []))
    if rm is None:
        L.append("| peak RSS ≤ 10 MB | n/a | n/a |")
    else:
        mib = rm / 1024
        mb = rm * 1024 / 1e6
        ok = "yes" if mib <= 10 else ("no" if mb > 10 else "yes if 10 MB means 10 MiB only")
        if mib > 10:
            ok = f"no (+{mib - 10:.1f} MiB over 10 MiB)"
        L.append(f"| peak RSS ≤ 10 MB | {mib:.1f} MiB ({mb:.1f} MB) | {ok} |")
    dm = median(ours.results.get("detect_ms", []))
    L.append(f"| answer written ≤ 250 ms after the upstream run completes (median) | {fmt(dm)} | "
             f"{'n/a' if dm is None else ('yes' if dm <= 250 else f'no (+{dm - 250:.0f} ms)')} |")
    cm2 = median(ours.results.get("collect_ms", []))
    L.append(f"| a late collector answers ≤ 250 ms after the run completes (median) | {fmt(cm2)} | "
             f"{'n/a' if cm2 is None else ('yes' if cm2 <= 250 else f'no (+{cm2 - 250:.0f} ms)')} |")
    L.append("")

    # Errors / notes.
    notes = []
    for c in cols + diags:
        for phase, why in c.disabled.items():
            notes.append(f"- {c.key}: {phase} skipped — {why}")
        for phase, errs in c.errors.items():
            if errs:
                uniq = sorted(set(errs))
                notes.append(f"- {c.key}: {len(errs)} {phase} error(s): " + "; ".join(u[:300] for u in uniq[:3]))
    if notes:
        L.append("## Errors and skips\n")
        L.extend(notes)
        L.append("")

    raw = {
        "machine": info, "fake": fake_base,
        "contenders": {c.key: {"label": c.label, "server_info": c.server_info,
                               "results": c.results, "errors": c.errors,
                               "disabled": c.disabled} for c in cols + diags},
        "unavailable": {k: {"label": v[0], "reason": v[1]} for k, v in unavailable.items()},
    }
    return "\n".join(L) + "\n", raw


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        cleanup_all()
    sys.exit(rc)
