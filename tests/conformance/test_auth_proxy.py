#!/usr/bin/env python3
"""Self-test of auth_proxy.py against a tiny loopback http.server (standard library only).

    python3 tests/conformance/test_auth_proxy.py [-v]

Checks that the proxy adds the bearer header (and keeps a client's own), forwards Host,
Origin, other headers, the method, path, query and body (Content-Length and chunked)
unchanged, relays status/headers/body, streams SSE without buffering, passes a client's
hang-up on to the upstream, answers 502 when the upstream is down, keeps client
connections alive, refuses non-loopback targets, and never prints the token.
run.sh runs this before the conformance suite.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PROXY = os.path.join(HERE, "auth_proxy.py")
TOKEN = "test-token-" + "x" * 40
SSE_GAP = 0.4  # seconds between SSE events from the upstream


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hangups = []  # paths whose stream the client abandoned

    def log_message(self, *args):
        pass

    def _echo(self):
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            body = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/sse"):
            return self._sse()
        if self.path == "/nocontent":
            self.send_response(204)
            self.end_headers()
            return
        out = json.dumps({
            "method": self.command,
            "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body.decode("latin-1"),
        }).encode()
        self.send_response(207, "Multi Echo")
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Upstream", "yes")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    def _sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for i in range(3 if self.path == "/sse" else 50):
                ev = f"id: {i}\ndata: {{\"n\": {i}, \"t\": {time.time()}}}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
                time.sleep(SSE_GAP)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            Upstream.hangups.append(self.path)
            self.close_connection = True

    do_GET = do_POST = do_DELETE = do_HEAD = _echo


def start_proxy(target: str, env_token: str | None = TOKEN):
    env = dict(os.environ)
    env.pop("AUTH_PROXY_TOKEN", None)
    if env_token is not None:
        env["AUTH_PROXY_TOKEN"] = env_token
    proc = subprocess.Popen([sys.executable, PROXY, target], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc


class ProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        cls.upstream.daemon_threads = True
        threading.Thread(target=cls.upstream.serve_forever, daemon=True).start()
        cls.target = f"http://127.0.0.1:{cls.upstream.server_address[1]}"
        cls.proc = start_proxy(cls.target)
        line = cls.proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:"), line
        cls.port = int(line.rsplit(":", 1)[1])

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        out, err = cls.proc.communicate(timeout=5)
        cls.upstream.shutdown()
        cls.upstream.server_close()
        assert TOKEN not in out + err, "the proxy printed the token"

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)

    def echo(self, method="POST", path="/mcp?x=1", body=None, headers=None, conn=None):
        c = conn or self.conn()
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        if conn is None:
            c.close()
        return r, (json.loads(data) if data else None)

    def test_adds_bearer_and_forwards_everything(self):
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        r, e = self.echo(body=body, headers={
            "Host": "localhost:1234", "Origin": "http://evil.example", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "Mcp-Session-Id": "abc",
            "MCP-Protocol-Version": "2025-11-25", "X-Custom": "a, b"})
        self.assertEqual((r.status, r.reason), (207, "Multi Echo"))
        self.assertEqual(r.getheader("X-Upstream"), "yes")
        self.assertEqual(r.getheader("Content-Length"), str(len(json.dumps(e))))
        self.assertEqual((e["method"], e["path"], e["body"]), ("POST", "/mcp?x=1", body.decode()))
        h = {k.lower(): v for k, v in e["headers"]}
        self.assertEqual(h["authorization"], f"Bearer {TOKEN}")
        for k, v in [("host", "localhost:1234"), ("origin", "http://evil.example"),
                     ("content-type", "application/json"), ("mcp-session-id", "abc"),
                     ("accept", "application/json, text/event-stream"),
                     ("mcp-protocol-version", "2025-11-25"), ("x-custom", "a, b"),
                     ("content-length", str(len(body)))]:
            self.assertEqual(h.get(k), v, k)
        # Nothing else was invented on the way (http.client would add Accept-Encoding).
        sent = {"host", "origin", "content-type", "accept", "mcp-session-id", "mcp-protocol-version",
                "x-custom", "content-length", "authorization", "accept-encoding"}
        self.assertEqual(set(h) - sent, set())
        self.assertEqual([k for k, _ in e["headers"]].count("Authorization"), 1)

    def test_client_authorization_kept(self):
        _, e = self.echo(headers={"Authorization": "Bearer wrong"})
        auths = [v for k, v in e["headers"] if k.lower() == "authorization"]
        self.assertEqual(auths, ["Bearer wrong"])

    def test_hop_by_hop_dropped(self):
        _, e = self.echo(method="GET", headers={"Connection": "keep-alive, X-Secret-Hop", "X-Secret-Hop": "1",
                                                "Keep-Alive": "timeout=5", "Proxy-Authorization": "x"})
        names = {k.lower() for k, _ in e["headers"]}
        self.assertFalse(names & {"connection", "x-secret-hop", "keep-alive", "proxy-authorization"}, names)

    def test_methods_and_chunked_request_body(self):
        _, e = self.echo(method="DELETE", path="/mcp", headers={"Mcp-Session-Id": "s1"})
        self.assertEqual((e["method"], e["body"]), ("DELETE", ""))
        c = self.conn()
        c.putrequest("POST", "/mcp", skip_accept_encoding=True)
        c.putheader("Transfer-Encoding", "chunked")
        c.endheaders()
        for piece in (b'{"a":', b'"chunked"}'):
            c.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        c.send(b"0\r\n\r\n")
        e = json.loads(c.getresponse().read())
        c.close()
        self.assertEqual(e["body"], '{"a":"chunked"}')

    def test_head_and_204(self):
        c = self.conn()
        c.request("HEAD", "/mcp")
        r = c.getresponse()
        self.assertEqual((r.status, r.read()), (207, b""))
        c.request("GET", "/nocontent")  # same connection: keep-alive works after HEAD
        r = c.getresponse()
        self.assertEqual((r.status, r.read()), (204, b""))
        c.close()

    def test_keep_alive(self):
        c = self.conn()
        for i in range(3):
            _, e = self.echo(path=f"/mcp?i={i}", body=b"{}", conn=c)
            self.assertEqual(e["path"], f"/mcp?i={i}")
        c.close()

    def test_sse_streams_unbuffered(self):
        c = self.conn()
        c.request("GET", "/sse", headers={"Accept": "text/event-stream"})
        r = c.getresponse()
        self.assertEqual(r.getheader("Content-Type"), "text/event-stream")
        self.assertEqual(r.getheader("Cache-Control"), "no-cache")
        arrivals, buf = [], b""
        while True:
            data = r.read1(65536)
            if not data:
                break
            buf += data
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                sent_at = json.loads(ev.split(b"data: ", 1)[1])["t"]
                arrivals.append(time.time() - sent_at)
        c.close()
        self.assertEqual(len(arrivals), 3)
        # Each event arrives right after it was sent, not when the stream ends.
        self.assertTrue(all(a < SSE_GAP / 2 for a in arrivals), arrivals)

    def test_client_hangup_reaches_upstream(self):
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"GET /sse-long HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        self.assertIn(b"200", s.recv(4096))
        s.close()
        deadline = time.time() + 5
        while "/sse-long" not in Upstream.hangups and time.time() < deadline:
            time.sleep(0.05)
        self.assertIn("/sse-long", Upstream.hangups)

    def test_502_when_upstream_down(self):
        free = socket.socket()
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
        free.close()
        proc = start_proxy(f"http://127.0.0.1:{port}")
        try:
            line = proc.stdout.readline().strip()
            c = http.client.HTTPConnection("127.0.0.1", int(line.rsplit(":", 1)[1]), timeout=10)
            c.request("POST", "/mcp", body=b"{}")
            r = c.getresponse()
            self.assertEqual(r.status, 502)
            self.assertNotIn(TOKEN.encode(), r.read())
        finally:
            proc.terminate()
            proc.communicate(timeout=5)

    def test_refuses_non_loopback_and_missing_token(self):
        for target in ("http://192.0.2.1:80", "https://127.0.0.1:1", "http://example.invalid:80",
                       "http://127.0.0.1:80/mcp"):
            proc = start_proxy(target)
            out, err = proc.communicate(timeout=10)
            self.assertNotEqual(proc.returncode, 0, target)
            self.assertNotIn("listening", out, target)
            self.assertNotIn(TOKEN, out + err)
        proc = start_proxy(self.target, env_token=None)
        out, err = proc.communicate(timeout=10)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("AUTH_PROXY_TOKEN", err)

    def test_token_not_on_command_line(self):
        with open(f"/proc/{self.proc.pid}/cmdline", "rb") as f:
            self.assertNotIn(TOKEN.encode(), f.read())


if __name__ == "__main__":
    unittest.main()
