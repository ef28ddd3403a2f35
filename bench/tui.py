#!/usr/bin/env python3
"""The terminal workspace's responsiveness, in a pseudo-terminal (80x24):

- startup to first frame: from spawn to the status line on the screen;
- input echo: from writing a key to its echo on the screen, while 3 monitors
  (/task fetch every 5 s) and a deep research run (the fake holds each search 2 s and
  the report 5 s) are in flight.

Medians over --runs starts and --keys keystrokes. Stdlib only; loopback only.

    python3 bench/tui.py --ours PATH --fake PATH [--runs 10 --keys 60]
"""

import argparse
import fcntl
import json
import os
import select
import statistics
import struct
import subprocess
import tempfile
import termios
import threading
import time
import http.server


def spawn(binary, env):
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))

    def child_setup():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([binary, "tui"], stdin=slave, stdout=slave, stderr=slave, env=env,
                         preexec_fn=child_setup, close_fds=True)
    os.close(slave)
    return p, master


def read_until(fd, needle, timeout):
    """Reads until `needle` appears in what arrives; returns seconds waited (or None)."""
    start = time.perf_counter()
    seen = b""
    while time.perf_counter() - start < timeout:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return None
            seen += chunk
            if needle in seen:
                return time.perf_counter() - start
    return None


def drain(fd, quiet=0.2):
    while True:
        r, _, _ = select.select([fd], [], [], quiet)
        if not r:
            return
        try:
            os.read(fd, 65536)
        except OSError:
            return


def serve_page():
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"<html><head><title>t</title></head><body><p>{time.time()}</p></body></html>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/page"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--keys", type=int, default=60)
    a = ap.parse_args()
    scenario = json.dumps({"duration_ms": 5000})
    fake = subprocess.Popen([a.fake, "--port", "0", "--scenario", scenario], stdout=subprocess.PIPE, text=True)
    base = fake.stdout.readline().split()[-1]
    tmp = tempfile.mkdtemp(prefix="pa-tui-bench-")
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "TERM": "xterm-256color",
           "PERPLEXITY_API_KEY": "pplx-bench-dummy", "PERPLEXITY_API_BASE": base,
           "PERPLEXITY_STORE_PATH": os.path.join(tmp, "store.sqlite"),
           "PERPLEXITY_FETCH_ALLOW_PRIVATE": "true", "PERPLEXITY_RATE_BURST": "100000",
           "PERPLEXITY_RATE_PER_MINUTE": "1000000"}
    startups = []
    for _ in range(a.runs):
        t = time.perf_counter()
        p, fd = spawn(a.ours, env)
        waited = read_until(fd, b"space default", 10)
        startups.append((time.perf_counter() - t) if waited is not None else float("nan"))
        p.kill()
        p.wait()
        os.close(fd)

    page = serve_page()
    # Slow searches for the deep research run: every /search request held 2 s.
    import urllib.request
    req = urllib.request.Request(base + "/_control/faults", method="POST",
                                 data=json.dumps({"route": "search", "kind": "slow", "delay_ms": 2000, "times": 1000}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
    p, fd = spawn(a.ours, env)
    read_until(fd, b"space default", 10)
    for _ in range(3):
        os.write(fd, f"/task fetch 5 {page}\r".encode())
    os.write(fd, b"/research crabs and lobsters\r")
    drain(fd, 0.5)
    echoes = []
    letters = "abcdefghijklmnopqrstuvwxyz"
    for i in range(a.keys):
        ch = letters[i % 26].encode()
        t = time.perf_counter()
        os.write(fd, ch)
        # The echo is the character drawn after the prompt; other redraws may interleave.
        waited = read_until(fd, ch, 2)
        if waited is not None:
            echoes.append(time.perf_counter() - t)
        drain(fd, 0.02)
        if i % 20 == 19:
            os.write(fd, b"\x15")  # Ctrl-U: clear the line
            drain(fd, 0.05)
    os.write(fd, b"\x15/quit\r")
    p.wait(timeout=10)
    fake.kill()
    ms = lambda xs: round(statistics.median(xs) * 1000, 1)
    print(json.dumps({
        "startup_first_frame_ms_median": ms(startups),
        "startup_runs": len(startups),
        "echo_ms_median": ms(echoes),
        "echo_ms_p95": round(sorted(echoes)[int(len(echoes) * 0.95) - 1] * 1000, 1) if echoes else None,
        "echo_samples": len(echoes),
        "in_flight": "3 fetch monitors (every 5 s) + 1 deep_research (searches held 2 s)",
    }, indent=2))


if __name__ == "__main__":
    main()
