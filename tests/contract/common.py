"""Shared helpers of the contract suite: binaries, the fake upstream, the product over MCP
stdio, clean child environments, and the pass/fail tally.

Loopback only: every URL built here is http://127.0.0.1:PORT and is asserted before use;
proxies are never consulted. The API key is always the dummy DUMMY_KEY.
"""

from __future__ import annotations

import json
import queue
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
FIXTURES = HERE / "fixtures"
DUMMY_KEY = "pplx-contract-dummy"
PROTOCOL_VERSION = "2025-11-25"



def our_binary() -> str:
    return binary("perplexity-agent", "CONTRACT_OUR_BIN")


def fake_binary() -> str:
    return binary("fake-perplexity", "CONTRACT_FAKE_BIN")


# --- the fake upstream -------------------------------------------------------------------
class HttpAnswer:
    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.raw = raw
        self.text = raw.decode("utf-8", errors="replace")
        try:
            self.json = json.loads(self.text) if self.text.strip() else None
            self.is_json = bool(self.text.strip())
        except ValueError:
            self.json = None
            self.is_json = False

    def __repr__(self) -> str:
        return f"HTTP {self.status} {self.text[:300]!r}"


class FakeUpstream:
    """One `fake-perplexity` process on 127.0.0.1:0."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [fake_binary(), "--port", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=base_env(),
        )
        line = self.proc.stdout.readline().decode().strip()
        prefix = "listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"fake-perplexity did not start: {line!r}")
        self.base_url = line[len(prefix):]
        assert_loopback(self.base_url)

    def http(self, method: str, path: str, body: object = None, headers: dict | None = None,
             raw_body: bytes | None = None, auth: bool = True, timeout: float = 15.0) -> HttpAnswer:
        url = self.base_url + path
        assert_loopback(url)
        data = raw_body if raw_body is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if auth:
            req.add_header("Authorization", f"Bearer {DUMMY_KEY}")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with OPENER.open(req, timeout=timeout) as resp:
                return HttpAnswer(resp.status, dict(resp.headers), resp.read())
        except urllib.error.HTTPError as exc:
            return HttpAnswer(exc.code, dict(exc.headers or {}), exc.read())

    def control(self, method: str, path: str, body: object = None) -> object:
        ans = self.http(method, "/_control/" + path, body, auth=False)
        if ans.status != 200:
            raise ControlError(f"control {method} {path} -> {ans.status} {ans.text[:300]}")
        return ans.json

    def try_control(self, method: str, path: str, body: object = None) -> tuple[bool, str]:
        ans = self.http(method, "/_control/" + path, body, auth=False)
        return ans.status == 200, ans.text

    def reset(self, scenario: dict | None = None) -> None:
        self.control("POST", "reset", {})
        if scenario:
            self.control("POST", "scenario", scenario)

    def set_scenario(self, scenario: dict) -> None:
        self.control("POST", "scenario", scenario)

    def requests(self) -> list[dict]:
        return self.control("GET", "requests")  # type: ignore[return-value]

    def runs(self) -> list[dict]:
        return self.control("GET", "runs")  # type: ignore[return-value]

    def wait_terminal(self, run_id: str, timeout: float = 10.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for run in self.runs():
                if run.get("id") == run_id and run.get("terminal_at_ms") is not None:
                    return True
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class ControlError(RuntimeError):
    pass


# --- the product over MCP stdio ------------------------------------------------------------
class McpStdio:
    """The real binary as an MCP server on stdio: newline-delimited JSON-RPC."""

    def __init__(self, env: dict[str, str], args: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [our_binary(), *(args or [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._reader, daemon=True).start()
        self._next_id = 0
        try:
            self.init = self.request("initialize", {
                "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                "clientInfo": {"name": "contract-suite", "version": "1"}})
            self.notify("notifications/initialized")
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise

    def _reader(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, msg: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict | None = None) -> None:
        msg: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def request(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        """The JSON-RPC response (the whole message) to one request."""
        self._next_id += 1
        rid = self._next_id
        msg: dict = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to {method} within {timeout}s")
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"the server exited while answering {method}")
            try:
                frame = json.loads(line)
            except ValueError:
                continue
            if frame.get("id") == rid and ("result" in frame or "error" in frame):
                return frame
            if "method" in frame and "id" in frame:
                # a server-to-client request (sampling, roots…): refuse it
                self.send({"jsonrpc": "2.0", "id": frame["id"],
                           "error": {"code": -32601, "message": "not supported by the contract suite"}})

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
