"""The second SDK of the contract: Perplexity's official Node SDK
(`@perplexity-ai/perplexity_ai` 0.38.5, generated from the API's OpenAPI description), whose
TypeScript types judge the same request bodies and answers the Python SDK does.

`node/check.mjs` does the checking with TypeScript 5.9.3's own checker (`--strict`, request
bodies as typed object literals, so a field the SDK lacks is an excess-property error);
this module batches entries, runs it once per part, and reports per entry. Installed by
`run.sh` (`tests/npm-ci.sh node`: the exact versions of node/package-lock.json).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE / "node"
SDK_VERSION = "0.38.5"
TYPESCRIPT_VERSION = "5.9.3"

# Which Node type judges an answer the Python SDK judged with this adapter (sdk.py names).
ANSWER_KINDS = {
    "types.ResponseCreateResponse": "create-response",
    "types.ResponseRetrieveResponse": "retrieve",
    "types.ResponseCancelResponse": "cancel",
    "types.ResponseStreamChunk": "chunk",
    "types.SearchCreateResponse": "search-response",
}


def problem() -> str | None:
    """Why the Node SDK cannot judge anything here (None: it can)."""
    if shutil.which("node") is None:
        return "node is not installed"
    for pkg, version in (("@perplexity-ai/perplexity_ai", SDK_VERSION), ("typescript", TYPESCRIPT_VERSION)):
        manifest = NODE_DIR / "node_modules" / pkg / "package.json"
        try:
            found = json.loads(manifest.read_text())["version"]
        except (OSError, ValueError, KeyError):
            return f"{pkg} is not installed in {NODE_DIR} (bash tests/npm-ci.sh {NODE_DIR})"
        if found != version:
            return f"{pkg} {found} installed, {version} pinned"
    return None


def without_nulls(value: Any) -> tuple[Any, int]:
    """`value` with every `"key": null` left out, and how many there were.

    The one named difference on answers (README, "Where the SDKs disagree"): the Node types
    declare absent-able fields `field?: T` (T | undefined), while the wire sends `null`
    (the docs' examples: `"error": null`, `"last_updated": null`) and the Python types
    say Optional. A null is therefore judged as the field's absence — a required field
    sent as null is still a missing one."""
    if isinstance(value, dict):
        out, n = {}, 0
        for k, v in value.items():
            if v is None:
                n += 1
                continue
            out[k], m = without_nulls(v)
            n += m
        return out, n
    if isinstance(value, list):
        items, n = [], 0
        for v in value:
            item, m = without_nulls(v)
            items.append(item)
            n += m
        return items, n
    return value, 0


class Batch:
    """Entries to judge in one TypeScript run: (kind, body, name)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, Any, str]] = []
        self.nulls = 0

    def add(self, kind: str, body: Any, name: str) -> None:
        if kind in ANSWER_KINDS.values():
            body, n = without_nulls(body)
            self.nulls += n
        self.entries.append((kind, body, name))

    def judge(self) -> tuple[list[list[str]], list[str]]:
        """Per entry its TypeScript errors (empty: accepted), and errors placed nowhere."""
        with tempfile.TemporaryDirectory(prefix="pplx-contract-node-") as tmp:
            src, out = Path(tmp) / "in.json", Path(tmp) / "out.json"
            src.write_text(json.dumps({"entries": [{"kind": k, "body": b} for k, b, _ in self.entries]}))
            proc = subprocess.run(["node", str(NODE_DIR / "check.mjs"), str(src), str(out)],
                                  capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(f"check.mjs exited {proc.returncode}: {proc.stderr[-1500:]}")
            answer = json.loads(out.read_text())
        return answer["results"], answer["unplaced"]

    def report(self, tally, label: str) -> None:
        """One check per entry, named `node: NAME`; nothing placed outside the entries."""
        why = problem()
        if why:
            tally.check(f"node SDK {SDK_VERSION} judges the {label}", False, why)
            return
        if not self.entries:
            tally.check(f"node SDK {SDK_VERSION} judges the {label}", False, "nothing to judge")
            return
        results, unplaced = self.judge()
        for (kind, body, name), errors in zip(self.entries, results):
            tally.check(f"node: {name}", not errors,
                        f"[node {kind}] " + "\n".join(e[-700:] for e in errors[:4])
                        + f"\nbody: {json.dumps(body)[:500]}")
        tally.check(f"node SDK: every diagnostic belongs to an entry ({label})", not unplaced,
                    "\n".join(unplaced[:6]))
        if any(kind in ANSWER_KINDS.values() for kind, _, _ in self.entries):
            tally.check("node difference used: null for an absent field", self.nulls > 0,
                        "stale: no answer carried a null (remove the difference)")
        print(f"node SDK {SDK_VERSION} (TypeScript {TYPESCRIPT_VERSION}): {len(self.entries)} {label} judged")
