#!/usr/bin/env python3
"""The page fetcher under load, over stdio, against a loopback page
server (stdlib only; talks to 127.0.0.1 only):

  1. a 2 MB HTML page fetched through `fetch_url`, extraction included: latency from the
     request line written to the reply line read, median and p95 over --runs fetches;
  2. a 1 GiB body (streamed, no Content-Length): it must be cut at the body cap, and
     peak RSS (VmHWM) may grow by no more than the cap + 2 MB.

No peer is measured: neither installed peer has a page fetcher (zalez/perplexity-agent-mcp
and @perplexity-ai/mcp-server 1.2.1 offer Perplexity tools only).

    python3 bench/fetch.py --ours PATH [--runs 30]
"""

import argparse
import http.server
import json
import os
import statistics
import subprocess
import threading
import time

PAGE_BYTES = 2 * 1024 * 1024
HUGE_BYTES = 1 << 30
CAP = 5 * 1024 * 1024


def page() -> bytes:
    para = ("<p>Paragraph {n} of a long article about measuring things carefully, with enough "
            "ordinary words in it to look like real content to the extraction heuristics.</p>\n")
    parts = ["<!doctype html><html><head><title>Big page</title><script>var x = 1;</script>"
             "</head><body><nav><a href='/'>Home</a></nav><article><h1>Big page</h1>\n"]
    n = 0
    size = len(parts[0])
    while size < PAGE_BYTES:
        p = para.format(n=n)
        parts.append(p)
        size += len(p)
        n += 1
    parts.append("</article><footer>end</footer></body></html>")
    return "".join(parts).encode()


BIG = page()


class Pages(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/big.html":
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(BIG)))
            self.end_headers()
            self.wfile.write(BIG)
        elif self.path == "/huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b"lorem ipsum dolor sit amet " * 2400
            sent = 0
            try:
                while sent < HUGE_BYTES:
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except OSError:
                pass  # the fetcher hung up at its cap, as it should
            self.close_connection = True
        else:
            self.send_error(404)


def vm(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PERPLEXITY_API_KEY": "pplx-bench-dummy",
           "PERPLEXITY_FETCH_ALLOW_PRIVATE": "127.0.0.1/32",
           "PERPLEXITY_RATE_BURST": "100000", "PERPLEXITY_RATE_PER_MINUTE": "1000000",
           "PERPLEXITY_MAX_OUTPUT_CHARS": "10000000", "PERPLEXITY_LOG": "error"}
    # Buffered pipes: an unbuffered readline() reads the ~200 KB reply byte by byte and
    # would measure Python, not the fetcher.
    srv = subprocess.Popen([a.ours], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, env=env, bufsize=1 << 20)

    def call(i, url):
        line = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                           "params": {"name": "fetch_url", "arguments": {"url": url}}}) + "\n"
        t0 = time.perf_counter()
        srv.stdin.write(line.encode())
        srv.stdin.flush()
        reply = json.loads(srv.stdout.readline())
        return time.perf_counter() - t0, reply["result"]["structuredContent"]["results"][0]

    # Warm-up (first TLS-free client set-up, page cache), then the measured runs.
    for i in range(3):
        call(i, base + "/big.html")
    lat = []
    chars = 0
    for i in range(a.runs):
        dt, r = call(100 + i, base + "/big.html")
        lat.append(dt * 1000)
        chars = len(r.get("text", ""))
    lat.sort()
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]

    hwm_before = vm(srv.pid, "VmHWM")
    dt, r = call(999, base + "/huge")
    hwm_after = vm(srv.pid, "VmHWM")
    growth_kib = hwm_after - hwm_before
    srv.stdin.close()
    srv.wait(timeout=10)
    server.shutdown()

    print(f"2 MB HTML page ({len(BIG)} bytes, {chars} chars extracted), {a.runs} fetches: "
          f"median {statistics.median(lat):.1f} ms, p95 {p95:.1f} ms (target <= 20 ms median)")
    print(f"1 GiB streamed body: cut at {r.get('fetched_bytes')} bytes (truncated={r.get('truncated')}) "
          f"in {dt * 1000:.0f} ms; peak RSS {hwm_before / 1024:.1f} -> {hwm_after / 1024:.1f} MiB, "
          f"growth {growth_kib / 1024:.1f} MiB (target <= cap {CAP / 1048576:.0f} MiB + 2 MiB)")


if __name__ == "__main__":
    main()
