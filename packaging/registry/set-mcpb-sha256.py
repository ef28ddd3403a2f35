"""Fill in server.json's MCPB fileSha256 values from the built bundles (release time).

    python3 packaging/registry/set-mcpb-sha256.py SERVER_JSON BUNDLE.mcpb...

The committed server.json carries 64 zeros in each MCPB entry (the schema demands 64
hex digits, and the digest exists only once the release's bundles are built). Each
BUNDLE is matched to the entry whose identifier ends with its file name; a bundle that
matches no entry, or an entry left without a bundle, is an error, so a release never
publishes a placeholder. Rewrites SERVER_JSON in place.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

PLACEHOLDER = "0" * 64


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    path, bundles = Path(argv[0]), [Path(b) for b in argv[1:]]
    doc = json.loads(path.read_text(encoding="utf-8"))
    entries = {Path(p["identifier"]).name: p for p in doc.get("packages", []) if p.get("registryType") == "mcpb"}
    errors = []
    for b in bundles:
        entry = entries.get(b.name)
        if entry is None:
            errors.append(f"{b.name}: no mcpb entry in {path} ends with this file name ({', '.join(entries)})")
            continue
        entry["fileSha256"] = hashlib.sha256(b.read_bytes()).hexdigest()
    left = [n for n, e in entries.items() if e.get("fileSha256") == PLACEHOLDER]
    if left:
        errors.append(f"no bundle given for {', '.join(left)} (their fileSha256 would stay a placeholder)")
    if errors:
        for e in errors:
            print(f"set-mcpb-sha256: {e}", file=sys.stderr)
        return 1
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"set-mcpb-sha256: {len(bundles)} digests written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
