"""MCP tasks through a real requester: FastMCP 4.1.4's client with `fastmcp-tasks` 4.1.4
(the SEP-2663 `io.modelcontextprotocol/tasks` extension's client half, which every
FastMCP `Client` folds in once the package is imported), over stdio and Streamable HTTP,
against a loopback fake upstream.

What a user of that client sees:
  - `call_tool_task` on a research tool gets a task handle (the run outlasts the 5 s
    inline window), `status()` says working, `result()` polls `tasks/get` to the answer;
  - a plain `call_tool` on the same tool is resolved transparently to the same answer;
  - a quick tool (`perplexity_search`) is answered directly;
  - `cancel()` ends the task as cancelled, and Perplexity has been asked to stop the run
    by the time it returns;
  - a run longer than the server's wait budget still ends its task with the answer.

API facts taken from the installed packages (not guessed):
  fastmcp.Client(transport, *, auth=<bearer token str>, mode='2026-07-28')
  fastmcp.client.transports.StdioTransport(command, args, env=...)
  fastmcp_tasks.call_tool_task(client, name, arguments) -> ToolTask
  ToolTask.task_id / .status() -> ClientGetTaskResult(.status) / .result() / .cancel()

Usage: python tasks_client.py   (env: CARGO_TARGET_DIR or INTEROP_OUR_BIN / INTEROP_FAKE_BIN)
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time

import common
from common import FakeUpstream, Tally, http_server, our_binary

import fastmcp_tasks  # noqa: F401  (registers the tasks extension on every Client)
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp_tasks import call_tool_task

HTTP_TOKEN = "interop-tasks-token-" + os.urandom(16).hex()
ANSWER = "Answer through a task."
T = Tally("tasks_client")


def server_env(fake: FakeUpstream, store: str) -> dict:
    return common.server_env(fake, {"PERPLEXITY_HTTP_AUTH_TOKEN": HTTP_TOKEN, "PERPLEXITY_STORE_PATH": store})


def text_of(result) -> str:
    content = getattr(result, "content", None) or []
    return getattr(content[0], "text", "") if content else ""


async def exercise(label: str, client: Client, fake: FakeUpstream) -> None:
    async with client:
        started = time.monotonic()
        task = await call_tool_task(client, "perplexity_agent", {"query": "a long question"})
        waited = time.monotonic() - started
        T.check(f"{label}: a long research call becomes a task", bool(getattr(task, "task_id", "")),
                f"got {task!r}")
        T.check(f"{label}: the handle came after the inline window, before the run ended",
                4.0 <= waited < 7.0, f"{waited:.1f}s")
        status = await task.status()
        T.check(f"{label}: status() says working", status.status == "working", f"got {status.status!r}")
        result = await task.result()
        T.check(f"{label}: result() polls to the answer", ANSWER in text_of(result), text_of(result)[:300])

        plain = await client.call_tool("perplexity_agent", {"query": "another long question"})
        T.check(f"{label}: a plain call_tool is resolved through the task", ANSWER in text_of(plain),
                text_of(plain)[:300])

        quick = await client.call_tool("perplexity_search", {"query": "quick"})
        T.check(f"{label}: a quick tool is answered directly", not getattr(quick, "is_error", False),
                text_of(quick)[:300])

        doomed = await call_tool_task(client, "perplexity_ask", {"query": "cancel me"})
        await doomed.cancel()
        # Not "eventually": an acknowledged cancel means the cancel has reached Perplexity.
        asked = any(r.get("path", "").endswith("/cancel") for r in fake.requests())
        T.check(f"{label}: Perplexity had been asked to stop the run when cancel() returned", asked)
        after = await doomed.status()
        T.check(f"{label}: cancel() ends the task cancelled", after.status == "cancelled",
                f"got {after.status!r}")


async def outlast(fake: FakeUpstream, env: dict) -> None:
    """A run (9 s) longer than the server's wait budget (3 s): the task's work is the whole
    run, so result() is the answer, never the "still running … collect it later" hand-back."""
    slow_env = dict(env, PERPLEXITY_AGENT_WAIT_SECONDS="3")
    client = Client(StdioTransport(our_binary(), [], env=slow_env), mode="2026-07-28", timeout=60)
    async with client:
        task = await call_tool_task(client, "perplexity_agent", {"query": "longer than the budget"})
        result = await task.result()
        text = text_of(result)
        T.check("stdio, 3 s wait budget: the task ends with the answer, not a hand-back",
                ANSWER in text and "still running" not in text, text[:300])


async def main() -> int:
    fake = FakeUpstream({"duration_ms": 7000, "answer": ANSWER})
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = server_env(fake, os.path.join(tmp, "store.sqlite"))
            stdio = StdioTransport(our_binary(), [], env=env)
            await exercise("stdio", Client(stdio, mode="2026-07-28", timeout=60), fake)
            fake.control("POST", "scenario", {"duration_ms": 9000, "answer": ANSWER})
            await outlast(fake, env)
            fake.control("POST", "scenario", {"duration_ms": 7000, "answer": ANSWER})
            fake.clear_requests()
            with http_server(env) as url:
                client = Client(url, auth=HTTP_TOKEN, mode="2026-07-28", timeout=60)
                await exercise("http", client, fake)
    except Exception as exc:  # a broken harness is one failed check, never a crash
        T.check("the tasks client ran to the end", False, f"{type(exc).__name__}: {exc}")
    finally:
        fake.stop()
    return T.finish()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
