#!/usr/bin/env python3
"""Loopback reverse proxy that adds `Authorization: Bearer <token>` to each request.

The MCP conformance suite cannot send custom headers, and `perplexity-agent serve --http`
refuses unauthenticated /mcp requests. This proxy sits between the two so the suite can
test the real, authenticated server (the server's auth is never weakened for a test).

    AUTH_PROXY_TOKEN=<token> python3 auth_proxy.py TARGET [--port N] [--verbose]

  TARGET   base URL of the upstream, e.g. http://127.0.0.1:8080 (http, loopback only:
           127.0.0.0/8, ::1, or a "localhost" that resolves only to loopback).
  --port   port to listen on, on 127.0.0.1 (default 0: the OS picks a free one).
  The token comes from the environment (AUTH_PROXY_TOKEN), never from the command line,
  so it does not show in `ps`. It is never printed.

Once listening, prints exactly one line on stdout and flushes it:
    listening on http://127.0.0.1:<port>

Forwarding rules:
  - method, path+query, and every request header go through unchanged (Host and Origin
    included: the server's DNS-rebinding checks depend on them), except the hop-by-hop
    headers (Connection and the headers it names, Keep-Alive, TE, Trailer, Upgrade,
    Proxy-*, Expect) and the body framing, which is re-declared for the upstream hop;
  - `Authorization: Bearer <token>` is added unless the client sent its own
    Authorization header (which then goes through unchanged, so a test can still probe
    the server's 401);
  - request bodies (Content-Length or chunked) are streamed upstream as they arrive;
  - response status, reason and headers go back unchanged (minus hop-by-hop); the body is
    relayed as it arrives, one flush per upstream read, so SSE events are not held back.
    A Content-Length body keeps its length; anything else is re-chunked to the client.
Standard library only.
"""
from __future__ import annotations

import argparse
import http.client
import ipaddress
import os
import socket
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "proxy-authorization", "proxy-authenticate", "expect",
}
CHUNK = 64 * 1024


def loopback_target(url: str) -> tuple[str, int]:
    """(host, port) to connect to, or SystemExit unless `url` is http:// on loopback."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise SystemExit("auth_proxy: TARGET must be an http:// URL")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise SystemExit("auth_proxy: TARGET is a base URL (scheme://host:port) only")
    host, port = parts.hostname, parts.port or 80
    try:
        addrs = {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except OSError as err:
        raise SystemExit(f"auth_proxy: cannot resolve {host}: {err}") from None
    if not addrs or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs):
        raise SystemExit("auth_proxy: TARGET must be a loopback address")
    return host, port


def connection_tokens(values: list[str]) -> set[str]:
    """Header names listed in Connection headers (hop-by-hop by declaration)."""
    return {t.strip().lower() for v in values for t in v.split(",") if t.strip()}


def make_handler(host: str, port: int, token: str, verbose: bool,
                 read_timeout: float) -> type[BaseHTTPRequestHandler]:
    bearer = f"Bearer {token}"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "auth-proxy"

        def log_message(self, fmt: str, *args) -> None:  # noqa: D401 - quiet unless -v
            if verbose:  # method, path and status only; headers (the token) never
                sys.stderr.write("auth_proxy: %s\n" % (fmt % args))

        # -- request body -----------------------------------------------------------------
        def _request_body(self):
            """(chunks, length): the client's body as an iterator of pieces read as they
            arrive, and its Content-Length (None when chunked). (None, None): no body.
            A client's "Expect: 100-continue" was already answered by http.server."""
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                return self._read_chunked(), None
            length = self.headers.get("Content-Length")
            if length is None:
                return None, None
            if not length.strip().isdigit():
                raise ValueError("bad Content-Length")
            return self._read_exact(int(length)), length.strip()

        def _read_exact(self, remaining: int):
            while remaining > 0:
                data = self.rfile.read(min(CHUNK, remaining))
                if not data:
                    raise ConnectionError("client closed mid-body")
                remaining -= len(data)
                yield data

        def _read_chunked(self):
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    raise ConnectionError("client closed mid-body")
                size = int(line.split(b";", 1)[0].strip() or b"x", 16)  # ValueError if bad
                if size == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                        pass  # trailers: dropped
                    return
                yield from self._read_exact(size)
                self.rfile.readline(8)  # the CRLF after the chunk data

        # -- relay ------------------------------------------------------------------------
        def _relay(self) -> None:
            self._started = False  # True once a status line went back to the client
            try:
                body, length = self._request_body()
            except ValueError:
                self._plain_error(400, "bad request body framing")
                return
            drop = HOP_BY_HOP | connection_tokens(self.headers.get_all("Connection", [])) | {"content-length"}
            upstream = http.client.HTTPConnection(host, port, timeout=10)
            try:
                try:
                    upstream.connect()
                except OSError:
                    self._plain_error(502, "upstream unreachable")
                    return
                upstream.sock.settimeout(read_timeout)
                upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                has_auth = False
                for name, value in self.headers.items():
                    lname = name.lower()
                    if lname in drop:
                        continue
                    has_auth = has_auth or lname == "authorization"
                    upstream.putheader(name, value)
                if not has_auth:
                    upstream.putheader("Authorization", bearer)
                chunked_up = body is not None and length is None
                if chunked_up:
                    upstream.putheader("Transfer-Encoding", "chunked")
                elif body is not None:
                    upstream.putheader("Content-Length", length)
                upstream.endheaders()
                for data in body or ():
                    upstream.send(b"%x\r\n%s\r\n" % (len(data), data) if chunked_up else data)
                if chunked_up:
                    upstream.send(b"0\r\n\r\n")
                self._relay_response(upstream.getresponse())
            except (OSError, http.client.HTTPException, ValueError):
                # The client or the upstream went away, or a chunk was malformed: drop this
                # connection. If nothing was sent back yet, the client still gets a 502.
                if not self._started:
                    try:
                        self._plain_error(502, "upstream error")
                    except OSError:
                        pass
                self.close_connection = True
            finally:
                upstream.close()  # also what tells the server a streaming client hung up

        def _relay_response(self, resp: http.client.HTTPResponse) -> None:
            drop = HOP_BY_HOP | connection_tokens(resp.headers.get_all("Connection", [])) | {"content-length"}
            no_body = self.command == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
            length = resp.getheader("Content-Length")
            self._started = True
            self.send_response_only(resp.status, resp.reason)
            for name, value in resp.getheaders():
                if name.lower() not in drop:
                    self.send_header(name, value)
            chunked_down = False
            if length is not None:
                self.send_header("Content-Length", length)
            elif not no_body:
                if self.request_version == "HTTP/1.1":
                    chunked_down = True
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.close_connection = True  # a close-delimited body for HTTP/1.0
            self.end_headers()
            self.wfile.flush()
            if no_body:
                return
            while True:
                data = resp.read1(CHUNK)  # returns as soon as some bytes are there
                if not data:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked_down else data)
                self.wfile.flush()
            if chunked_down:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        def _plain_error(self, status: int, message: str) -> None:
            body = f"auth_proxy: {message}\n".encode()
            self._started = True
            self.send_response_only(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _relay

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:  # a peer hanging up is normal
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description="Loopback auth-adding reverse proxy.")
    parser.add_argument("target")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--read-timeout", type=float, default=300.0,
                        help="seconds an upstream read may stall (long-lived SSE streams)")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args()
    token = os.environ.get("AUTH_PROXY_TOKEN", "")
    if not token:
        raise SystemExit("auth_proxy: set AUTH_PROXY_TOKEN in the environment")
    if any(c in token for c in "\r\n"):
        raise SystemExit("auth_proxy: the token must be a single line")
    host, port = loopback_target(args.target)
    server = Server(("127.0.0.1", args.port), make_handler(host, port, token, args.verbose, args.read_timeout))
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
