"""Helpers shared by the Python suites (tests/interop, tests/contract): where the binaries
are, a urllib opener that never consults proxies, the loopback check every URL passes,
and the clean environment every child process gets.

Loopback only: a URL that is not http:// on 127.0.0.1, localhost or ::1 stops the suite.
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent.parent

# A urllib opener that never consults proxy environment variables: the fake is on
# loopback and nothing here may be routed anywhere else.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def target_dir() -> Path:
    raw = os.environ.get("CARGO_TARGET_DIR")
    if raw:
        p = Path(raw)
        return p if p.is_absolute() else REPO / p
    return REPO / "target"


def binary(name: str, override_var: str) -> str:
    """The debug build of `name`, unless `override_var` names another file."""
    return os.environ.get(override_var) or str(target_dir() / "debug" / name)


def assert_loopback(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"refusing non-loopback URL {url!r}")


def base_env(extra: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """A minimal, clean environment for a child: no proxies, no inherited PERPLEXITY_*
    settings, UTF-8 locale."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUTF8": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "NO_PROXY": "*",
        "no_proxy": "*",
    }
    env.update(extra or {})
    for k in drop:
        env.pop(k, None)
    return env
