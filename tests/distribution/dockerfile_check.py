"""The directives packaging/oci/Dockerfile must keep (no linter needed, stdlib only).

    python3 tests/distribution/dockerfile_check.py [DOCKERFILE]

Checks what the image promises: a two-stage build whose base images are pinned
build arguments; the final stage on distroless/static as a numeric non-root user; the
store on the /data volume (the root file system can be read-only); the exec-form
ENTRYPOINT and the HTTP CMD with --allow-remote; a HEALTHCHECK running the binary's
own probe on CMD's port; the MCP Registry's ownership label;
and no secret baked in (no ENV or ARG for the key or the HTTP token). Prints one line
per problem and exits 1, or "ok" and exits 0.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAME = "io.github.perplexity-agent/perplexity-agent"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or not line:
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else REPO / "packaging/oci/Dockerfile"
    ins = instructions(path.read_text(encoding="utf-8"))
    problems: list[str] = []
    args = {m.group(1): m.group(2) for k, v in ins if k == "ARG" for m in [re.match(r"(\w+)=(\S+)", v)] if m}
    froms = [v for k, v in ins if k == "FROM"]
    final_index = max(i for i, (k, _) in enumerate(ins) if k == "FROM") if froms else -1
    final = ins[final_index + 1:]

    def one(kind: str) -> str | None:
        vals = [v for k, v in final if k == kind]
        if len(vals) != 1:
            problems.append(f"the final stage needs exactly one {kind} (has {len(vals)})")
            return None
        return vals[0]

    if len(froms) != 2 or not re.fullmatch(r"\$\{RUST_IMAGE\} AS builder", froms[0]) or froms[1] != "${RUNTIME_IMAGE}":
        problems.append(f"expected FROM ${{RUST_IMAGE}} AS builder, then FROM ${{RUNTIME_IMAGE}}; got {froms}")
    for arg, pattern in (("RUST_IMAGE", r"docker\.io/library/rust:\d+\.\d+(\.\d+)?-alpine[\d.]*"),
                         ("RUNTIME_IMAGE", r"gcr\.io/distroless/static-debian\d+:nonroot")):
        if not re.fullmatch(pattern, args.get(arg, "")):
            problems.append(f"ARG {arg} must default to a pinned {pattern!r} (is {args.get(arg)!r})")
    if not any(k == "RUN" and "cargo build --release --locked -p perplexity-agent" in v for k, v in ins[:final_index]):
        problems.append("the builder must run cargo build --release --locked -p perplexity-agent")

    user = one("USER")
    if user is not None and not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", user):
        problems.append(f"USER must be a numeric non-root uid[:gid] (is {user!r})")
    entry = one("ENTRYPOINT")
    if entry is not None and json.loads(entry) != ["perplexity-agent"]:
        problems.append(f'ENTRYPOINT must be ["perplexity-agent"] (is {entry})')
    cmd = one("CMD")
    if cmd is not None and json.loads(cmd) != ["serve", "--http", "--bind", "0.0.0.0:8080", "--allow-remote"]:
        problems.append(f"CMD must serve HTTP on 0.0.0.0:8080 with --allow-remote (is {cmd})")
    volume = one("VOLUME")
    if volume is not None and json.loads(volume) != ["/data"]:
        problems.append(f'VOLUME must be ["/data"] (is {volume})')
    env = " ".join(v for k, v in final if k == "ENV")
    if "PERPLEXITY_STORE_PATH=/data/" not in env:
        problems.append("ENV PERPLEXITY_STORE_PATH must point into /data (the root is read-only)")
    if not any(k == "COPY" and "--chown=65532:65532" in v and v.endswith(" /data") for k, v in final):
        problems.append("/data must be copied in owned by the runtime user (COPY --chown=65532:65532 … /data)")
    if not any(k == "EXPOSE" and v == "8080" for k, v in final):
        problems.append("EXPOSE 8080 is missing")
    if not any(k == "LABEL" and v == f'io.modelcontextprotocol.server.name="{NAME}"' for k, v in final):
        problems.append(f'LABEL io.modelcontextprotocol.server.name="{NAME}" is missing (the MCP Registry checks it)')
    for k, v in ins:
        if k in ("ENV", "ARG") and re.search(r"PERPLEXITY_(API_KEY|HTTP_AUTH_TOKEN|SECRET_KEY)", v):
            problems.append(f"{k} {v!r}: a secret must come from the run, not the image")
    # The probe is the binary's own `healthcheck` (distroless has no curl), exec form,
    # on the port CMD serves.
    health = [v for k, v in final if k == "HEALTHCHECK"]
    probe = re.search(r"CMD\s+(\[.*\])\s*$", health[0]) if health else None
    probe = json.loads(probe.group(1)) if probe else []
    cmd_port = re.search(r'"--bind",\s*"[^"]*:(\d+)"', cmd or "")
    if probe[:2] != ["perplexity-agent", "healthcheck"]:
        problems.append(f"HEALTHCHECK must run perplexity-agent healthcheck, exec form (is {health[:1]!r})")
    elif cmd_port and f"127.0.0.1:{cmd_port.group(1)}" not in probe:
        problems.append(f"HEALTHCHECK {probe!r} does not probe the port CMD serves ({cmd_port.group(1)})")

    for p in problems:
        print(f"{path}: {p}")
    if not problems:
        print(f"{path}: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
