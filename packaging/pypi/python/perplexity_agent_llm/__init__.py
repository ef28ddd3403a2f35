"""`perplexity-agent` as a model for Simon Willison's `llm` CLI.

    llm -m perplexity-agent 'How did the Artemis II schedule change this year?'
    llm -m perplexity-agent -o preset high -o recency month -o domains nasa.gov 'q'

A thin adapter: every call runs the `perplexity-agent` binary shipped in this same
wheel (`perplexity-agent ask`) as a subprocess, so the research, retries, validation
and rendering are the binary's, and this file only translates llm's options into
`ask` flags. Nothing here is imported by the MCP server, which needs no Python.

- The answer is ask's stdout, handed to llm line by line as it arrives.
- Progress is ask's stderr, copied through to this process's stderr as it arrives
  (so `llm ... > answer.txt` stays clean and `2>/dev/null` silences it).
- The key comes from `llm keys set perplexity` or `PERPLEXITY_API_KEY` (llm resolves
  it) and reaches the child only through its environment, never its argv.
- The question goes to the child on stdin (`ask -`), so it never shows in `ps`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
from collections import deque
from pathlib import Path
from typing import Any, Iterator, Optional

import llm

# pydantic is llm's own dependency and the way its plugin docs declare options.
from pydantic import Field

BIN_NAME = "perplexity-agent" + (".exe" if os.name == "nt" else "")
# Overrides the bundled binary (a development build, say).
BIN_ENV = "PERPLEXITY_AGENT_BIN"
KEY_ENV = "PERPLEXITY_API_KEY"

# ask's exit codes (src/cli/output.rs): 3 = still running when --timeout passed (its
# id on stdout, how to collect it on stderr); 130 = interrupted.
EXIT_STILL_RUNNING = 3
EXIT_INTERRUPTED = 130

_RUN_ID = re.compile(r"^resp_[A-Za-z0-9]+$")


@llm.hookimpl
def register_models(register: Any) -> None:
    register(PerplexityAgent())


def find_binary() -> str:
    """The `perplexity-agent` executable installed by this wheel.

    Looked up through the distribution's RECORD first (right for venvs, `--user`,
    `uv tool` and `llm install` alike, wherever their scripts dir is), then the
    interpreter's scripts dir, then PATH.
    """
    override = os.environ.get(BIN_ENV)
    if override:
        return override
    candidates: list[Path] = []
    try:
        from importlib import metadata

        dist = metadata.distribution("perplexity-agent")
        for f in dist.files or ():
            if f.name == BIN_NAME:
                candidates.append(Path(dist.locate_file(f)))
    except Exception:  # noqa: BLE001 - a missing or odd RECORD just means "look elsewhere"
        pass
    for scheme in (None, f"{os.name}_user"):
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        candidates.append(Path(scripts) / BIN_NAME)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c.resolve())
    on_path = shutil.which(BIN_NAME)
    if on_path:
        return on_path
    raise llm.ModelError(
        f"cannot find the {BIN_NAME} binary of the perplexity-agent package "
        f"(looked at {', '.join(str(c) for c in candidates) or 'nothing'} and PATH); "
        f"reinstall the package, or set {BIN_ENV}."
    )


class PerplexityAgent(llm.Model):
    """One-shot research: every prompt is an independent run (no conversation)."""

    model_id = "perplexity-agent"
    can_stream = True
    # The same alias as the reference peer's plugin and `llm-perplexity`: one Perplexity
    # key, set once. The env var is the one the binary itself reads.
    needs_key = "perplexity"
    key_env_var = KEY_ENV

    class Options(llm.Options):
        preset: Optional[str] = Field(
            default=None,
            description="Research depth: fast, low, medium (the default), high, xhigh, wide-research…",
        )
        recency: Optional[str] = Field(
            default=None, description="Only sources published within: hour, day, week, month or year."
        )
        domains: Optional[str] = Field(
            default=None,
            description="Comma-separated domains to allow, or (each prefixed with '-') to exclude.",
        )
        timeout: Optional[int] = Field(
            default=None,
            description="Seconds to wait for the answer (ask's default 300, at most 1800); the run keeps going after that.",
        )
        spotlight: Optional[bool] = Field(
            default=False,
            description="Wrap the answer in the untrusted-content delimiter (off: a person reads this).",
        )

    def __str__(self) -> str:
        return f"Perplexity Agent: {self.model_id}"

    def execute(self, prompt: llm.Prompt, stream: bool, response: llm.Response, conversation: Any = None) -> Iterator[str]:
        query = (prompt.prompt or "").strip()
        if not query:
            raise llm.ModelError("A question is required.")
        binary = find_binary()
        argv = [binary, "ask", *ask_flags(prompt.options), "-"]
        env = dict(os.environ)
        key = self.get_key()
        if key:
            env[KEY_ENV] = key
        yield from run_ask(argv, query, env, binary)


def ask_flags(options: Any) -> list[str]:
    """llm options → `ask` flags. Values are passed unvalidated: `ask` checks them and
    its message (exit 2) is what the user sees, so the rules live in one place."""
    flags: list[str] = []
    for name in ("preset", "recency", "domains", "timeout"):
        value = getattr(options, name, None)
        if value is not None:
            flags += [f"--{name}", str(value)]
    if getattr(options, "spotlight", False):
        flags.append("--spotlight")
    return flags


def run_ask(argv: list[str], query: str, env: dict[str, str], binary: str) -> Iterator[str]:
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
    except OSError as exc:
        raise llm.ModelError(f"cannot run {binary}: {exc}") from exc
    # stderr is copied through live (progress) and its tail kept for an error message.
    tail: deque[str] = deque(maxlen=20)
    copier = threading.Thread(target=_copy_stderr, args=(proc.stderr, tail), daemon=True)
    copier.start()
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(query.encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass  # it exited early; its status and stderr say why
    try:
        # One line of look-ahead: a run that outlasts --timeout prints only its id on
        # stdout (exit 3), which must not reach llm as if it were the answer; and the
        # answer's final newline is ask's, not part of the answer (llm adds its own).
        pending: Optional[bytes] = None
        yielded = False
        for line in proc.stdout:
            if pending is not None:
                yield pending.decode("utf-8", "replace")
                yielded = True
            pending = line
        rc = proc.wait()
    except BaseException:
        # Ctrl-C (or llm giving up) ends the child too; ask then prints how to collect.
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
        raise
    finally:
        copier.join(timeout=5)
    last = (pending or b"").decode("utf-8", "replace")
    if rc == 0:
        if last:
            yield last[:-1] if last.endswith("\n") else last
        return
    run_id = last.strip()
    if not yielded and rc in (EXIT_STILL_RUNNING, EXIT_INTERRUPTED) and _RUN_ID.match(run_id):
        shown = "perplexity-agent" if shutil.which("perplexity-agent") == os.path.realpath(binary) else binary
        raise llm.ModelError(
            f"research run {run_id} is still running on Perplexity's side. "
            f"Collect it with: {shown} result {run_id} --wait 300 "
            f"(or raise -o timeout; stop it with: {shown} cancel {run_id})"
        )
    message = next((m for m in reversed(tail) if not m.startswith("[perplexity-agent]")), "")
    message = message[len("perplexity-agent: "):] if message.startswith("perplexity-agent: ") else message
    # ask's flags are this plugin's -o options.
    message = re.sub(r"--(preset|recency|domains|timeout|spotlight)\b", r"-o \1", message)
    raise llm.ModelError(message or f"perplexity-agent ask exited with status {rc}")


def _copy_stderr(pipe: Any, tail: deque[str]) -> None:
    for raw in pipe:
        text = raw.decode("utf-8", "replace")
        sys.stderr.write(text)
        sys.stderr.flush()
        if text.strip():
            tail.append(text.strip())
