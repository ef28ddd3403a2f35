"""Shared helpers for the interop checks: locating binaries, running the fake upstream,
building child environments, and a tiny pass/fail tally.

Loopback only: every URL built here is http://127.0.0.1:PORT, asserted before use. No
real key is ever used (DUMMY_KEY below).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "support"))
from tally import Tally  # noqa: E402,F401  (re-exported for the suites)
from loopback import OPENER, assert_loopback, base_env, binary, target_dir  # noqa: E402

REPO = HERE.parent.parent
DUMMY_KEY = "pplx-interop-dummy"
TOOL_NAMES = ["perplexity_agent", "perplexity_agent_result", "perplexity_agent_cancel", "perplexity_ask",
              "perplexity_search", "deep_research", "responses_create", "responses_retrieve", "finance_search", "fetch_url", "retrieve", "server_metrics"]



def our_binary() -> str:
    return binary("perplexity-agent", "INTEROP_OUR_BIN")


def fake_binary() -> str:
    return binary("fake-perplexity", "INTEROP_FAKE_BIN")


class FakeUpstream:
    """One `fake-perplexity` process on 127.0.0.1:0."""

    def __init__(self, scenario: dict | None = None) -> None:
        args = [fake_binary(), "--port", "0"]
        if scenario is not None:
            args += ["--scenario", json.dumps(scenario)]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=base_env(),
        )
        line = self.proc.stdout.readline().decode().strip()
        prefix = "listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"fake-perplexity did not start: {line!r}")
        self.base_url = line[len(prefix):]
        assert_loopback(self.base_url)

    # --- HTTP helpers (loopback only) ---------------------------------------
    def _http(self, method: str, path: str, body: object = None, headers: dict | None = None,
              timeout: float = 10.0) -> tuple[int, object]:
        url = self.base_url + path
        assert_loopback(url)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with OPENER.open(req, timeout=timeout) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            status = exc.code
        try:
            return status, json.loads(raw.decode() or "null")
        except ValueError:
            return status, raw.decode(errors="replace")

    def control(self, method: str, path: str, body: object = None) -> object:
        status, payload = self._http(method, "/_control/" + path, body)
        if status != 200:
            raise RuntimeError(f"control {path} -> {status} {payload}")
        return payload

    def reset(self, scenario: dict | None = None, faults: list | None = None) -> None:
        self.control("POST", "reset", {})
        if scenario:
            self.control("POST", "scenario", scenario)
        if faults:
            self.control("POST", "faults", faults)

    def requests(self) -> list[dict]:
        return self.control("GET", "requests")  # type: ignore[return-value]

    def clear_requests(self) -> None:
        self.control("DELETE", "requests")

    def runs(self) -> list[dict]:
        return self.control("GET", "runs")  # type: ignore[return-value]

    def create_run(self, query: str = "seeded run") -> str:
        """Create a run directly (as a client would), for result/cancel cases."""
        status, payload = self._http(
            "POST", "/v1/agent",
            {"input": query, "preset": "medium", "background": True,
             "tools": [{"type": "web_search"}]},
            headers={"Authorization": f"Bearer {DUMMY_KEY}"},
        )
        if status != 200 or not isinstance(payload, dict) or "id" not in payload:
            raise RuntimeError(f"seeding a run failed: {status} {payload}")
        return payload["id"]

    def wait_terminal(self, run_id: str, timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for run in self.runs():
                if run.get("id") == run_id and run.get("terminal_at_ms") is not None:
                    return
            time.sleep(0.02)
        raise RuntimeError(f"run {run_id} did not become terminal")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def server_env(fake: FakeUpstream, extra: dict) -> dict:
    """Our server's environment: the fake upstream, the dummy key, a rate limit the
    suites never reach, and `extra` (the HTTP token, a store path...)."""
    return base_env({
        "PERPLEXITY_API_BASE": fake.base_url,
        "PERPLEXITY_API_KEY": DUMMY_KEY,
        "PERPLEXITY_RATE_BURST": "100000",
        "PERPLEXITY_RATE_PER_MINUTE": "1000000",
        # Every tool: the suites call them all (the default profile lists six).
        "PERPLEXITY_TOOLS": "all",
        # The research cache is tested in tests/e2e/cache.rs: these suites ask one question
        # again and again and mean a new run each time.
        "PERPLEXITY_CACHE": "off",
        **extra,
    })


@contextlib.contextmanager
def http_server(env: dict, bind: str = "127.0.0.1:0"):
    """Our binary as a Streamable HTTP server on `bind` (a free loopback port unless a
    caller must know it first, e.g. for an OAuth audience); yields the URL."""
    proc = subprocess.Popen([our_binary(), "serve", "--http", "--bind", bind],
                            env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stderr:
            m = re.search(r"MCP over HTTP on (http://\S+/mcp)", line)
            if m:
                url = m.group(1)
                break
        if url is None:
            raise RuntimeError("the HTTP server did not start")
        assert_loopback(url)
        # Keep draining stderr so the server never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        yield url
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Terminate a child we started, and kill it if it lingers: none is left running."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
