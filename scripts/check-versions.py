#!/usr/bin/env python3
"""Every distribution file must carry Cargo.toml's [package] version: the one version.

    python3 scripts/check-versions.py [--root DIR]

Checks Cargo.lock, the PyPI project (its version must stay dynamic, i.e. Cargo's), the
npm launcher (and the versions it pins its platform packages at), every npm platform
package, the MCP Bundle manifest, and server.json (its own version, each package's, the
OCI tag and the MCPB release URLs), and README.md's pinned client entries and image tag.
Prints one line per disagreement, naming the file
and the field, and exits 1; prints a one-line summary and exits 0 when all agree.
--root points it at a copy of the tree (the self-test does).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11: the two TOML reads below fall back to regexes
    tomllib = None


def cargo_version(root: Path) -> str:
    text = (root / "Cargo.toml").read_text(encoding="utf-8")
    if tomllib:
        return tomllib.loads(text)["package"]["version"]
    m = re.search(r'^\[package\]\s*$.*?^version\s*=\s*"([^"]+)"', text, re.S | re.M)
    if not m:
        sys.exit("check-versions: Cargo.toml has no [package] version")
    return m.group(1)


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    if argv[:1] == ["--root"] and len(argv) == 2:
        root = Path(argv[1]).resolve()
    elif argv:
        print(__doc__, file=sys.stderr)
        return 2
    want = cargo_version(root)
    problems: list[str] = []
    checked: list[str] = []

    def expect(rel: str, field: str, got: object) -> None:
        if got != want:
            problems.append(f"{rel}: {field} is {got!r}, Cargo.toml's [package] version is {want!r}")

    def load(rel: str) -> dict | None:
        path = root / rel
        checked.append(rel)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{rel}: cannot read it: {exc}")
            return None

    # Cargo.lock: `cargo --locked` would refuse a stale one, but say it here too.
    lock = (root / "Cargo.lock").read_text(encoding="utf-8")
    m = re.search(r'\[\[package\]\]\nname = "perplexity-agent"\nversion = "([^"]+)"', lock)
    checked.append("Cargo.lock")
    expect("Cargo.lock", "the perplexity-agent package's version", m.group(1) if m else None)

    # PyPI: maturin takes the version from Cargo.toml when it is dynamic.
    rel = "packaging/pypi/pyproject.toml"
    checked.append(rel)
    text = (root / rel).read_text(encoding="utf-8")
    project = tomllib.loads(text).get("project", {}) if tomllib else {}
    if tomllib is None:
        project = {"dynamic": ["version"]} if re.search(r'^dynamic\s*=\s*\[[^\]]*"version"', text, re.M) else {}
        if re.search(r"^version\s*=", text, re.M):
            project["version"] = "?"
    if "version" in project:
        problems.append(f"{rel}: [project] sets version {project['version']!r}; remove it (it must be dynamic, from Cargo.toml)")
    if "version" not in project.get("dynamic", []):
        problems.append(f"{rel}: [project] dynamic does not list \"version\" (maturin would not take Cargo.toml's)")

    # npm: the launcher, the exact versions it pins, and each platform package.
    rel = "packaging/npm/perplexity-agent/package.json"
    launcher = load(rel)
    platforms = sorted(p.name for p in (root / "packaging/npm/platforms").iterdir() if p.is_dir())
    if launcher is not None:
        expect(rel, "version", launcher.get("version"))
        deps = launcher.get("optionalDependencies", {})
        for name, spec in deps.items():
            expect(rel, f"optionalDependencies[{name!r}]", spec)
        wanted = {f"@perplexity-agent/{p}" for p in platforms}
        if set(deps) != wanted:
            problems.append(f"{rel}: optionalDependencies {sorted(deps)} are not the platform packages {sorted(wanted)}")
    for p in platforms:
        rel = f"packaging/npm/platforms/{p}/package.json"
        pkg = load(rel)
        if pkg is not None:
            expect(rel, "version", pkg.get("version"))

    rel = "packaging/mcpb/manifest.json"
    manifest = load(rel)
    if manifest is not None:
        expect(rel, "version", manifest.get("version"))

    rel = "server.json"
    server = load(rel)
    if server is not None:
        expect(rel, "version", server.get("version"))
        for i, pkg in enumerate(server.get("packages", [])):
            kind = pkg.get("registryType")
            if "version" in pkg or kind != "oci":
                expect(rel, f"packages[{i}] ({kind}) version", pkg.get("version"))
            ident = str(pkg.get("identifier", ""))
            if kind == "oci":
                expect(rel, f"packages[{i}] (oci) identifier's tag", ident.rpartition(":")[2])
            if kind == "mcpb":
                m = re.search(r"/releases/download/v([^/]+)/perplexity-agent-(.+)-(?:linux|darwin|win32)-[a-z0-9]+\.mcpb$", ident)
                expect(rel, f"packages[{i}] (mcpb) release tag in {ident!r}", m.group(1) if m else None)
                expect(rel, f"packages[{i}] (mcpb) file name's version in {ident!r}", m.group(2) if m else None)

    # README.md: the pinned launcher entries and the image tag a reader copies.
    rel = "README.md"
    checked.append(rel)
    readme = (root / rel).read_text(encoding="utf-8")
    for m in re.finditer(r'"perplexity-agent@([^"]+)"|perplexity-agent/perplexity-agent:([0-9][^ `]*)', readme):
        expect(rel, f"the version in {m.group(0)!r}", m.group(1) or m.group(2))

    for line in problems:
        print(f"check-versions: {line}")
    if problems:
        return 1
    print(f"check-versions: {len(checked)} files agree on version {want} (Cargo.toml)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
