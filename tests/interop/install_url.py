"""`install cursor --url … --token-env …` writes an entry a real client can use: the entry
is read back from a scratch HOME and handed, as written (its `url` and its `headers`), to
the official Python SDK's Streamable HTTP client (`mcp` 2.3.0), which connects to a real
`serve --http` on 127.0.0.1 with a named client (`clients add`) and lists the tools.

Then the same without `--token-env`: the entry has no header, and the SDK is refused.

Usage: python install_url.py   (env: CARGO_TARGET_DIR or INTEROP_OUR_BIN / INTEROP_FAKE_BIN)
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import common
from common import FakeUpstream, Tally, http_server, our_binary

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

T = Tally("install_url")
TOKEN_VAR = "PA_INTEROP_TOKEN"


def run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([our_binary(), *args], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


async def list_tools(entry: dict) -> list[str]:
    """The SDK's client, configured from nothing but the entry's url and headers."""
    http = create_mcp_http_client(headers=entry.get("headers") or {})
    async with Client(streamable_http_client(entry["url"], http_client=http), mode="auto",
                      read_timeout_seconds=30) as c:
        return [t.name for t in (await c.list_tools()).tools]


async def main() -> int:
    fake = FakeUpstream()
    scratch = Path(tempfile.mkdtemp(prefix="pa-interop-install-url-"))
    try:
        clients_file = scratch / "clients.toml"
        added = run(["clients", "add", "interop-bot", "--file", str(clients_file)], common.base_env())
        if not T.check("clients add prints a token", added.returncode == 0 and added.stdout.strip() != "",
                       added.stderr):
            return T.finish()
        token = added.stdout.strip()
        env = common.server_env(fake, {"PERPLEXITY_HTTP_CLIENTS_FILE": str(clients_file)})
        with http_server(env) as url:
            home = scratch / "home"
            home.mkdir()
            install_env = common.base_env({"HOME": str(home), TOKEN_VAR: token})
            done = run(["install", "cursor", "--url", url, "--token-env", TOKEN_VAR], install_env)
            T.check("install cursor --url --token-env exits 0", done.returncode == 0, done.stderr)
            T.check("the token is not printed", token not in done.stdout + done.stderr,
                    "the token appears in install's output")
            entry = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["perplexity-agent"]
            T.check("the entry is Cursor's HTTP shape: url and headers",
                    entry == {"url": url, "headers": {"Authorization": f"Bearer {token}"}},
                    f"got {entry!r}")
            try:
                names = await list_tools(entry)
                T.check("the SDK connects with the entry and lists the tools",
                        "perplexity_agent" in names, f"got {names!r}")
            except Exception as exc:  # noqa: BLE001 - a failed connection is a failed check
                T.check("the SDK connects with the entry and lists the tools", False,
                        f"{type(exc).__name__}: {exc}")

            # Without --token-env: no header is written, and the server refuses the SDK.
            bare_home = scratch / "bare"
            bare_home.mkdir()
            done = run(["install", "cursor", "--url", url],
                       common.base_env({"HOME": str(bare_home)}))
            bare = json.loads((bare_home / ".cursor" / "mcp.json").read_text())["mcpServers"]["perplexity-agent"]
            T.check("without --token-env the entry has no headers", bare == {"url": url}, f"got {bare!r}")
            try:
                await list_tools(bare)
                T.check("without a token the SDK is refused", False, "it connected")
            except Exception:  # noqa: BLE001 - refused, as it should be
                T.check("without a token the SDK is refused", True)
    finally:
        fake.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return T.finish()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(asyncio.run(main()))
