"""Check server.json as the MCP Registry would: the vendored 2025-12-11 schema, then the
registry's own publishing rules that a schema cannot express.

    python3 packaging/registry/validate.py [--root DIR] [SERVER_JSON]

Needs `jsonschema` (and `rfc3986-validator` for "format": "uri"): run it with the venv
tests/distribution/registry_test.sh makes. SERVER_JSON defaults to DIR/server.json.
Prints each problem on its own line and exits 1, or one summary line and exits 0.

The rules beyond the schema (from the registry's validators; see server.schema.json.source):
- the vendored schema is the pinned copy, and server.json's $schema is its $id;
- each package points where this repository publishes it, under the names the package
  files use (npm mcpName, the PyPI project, the crate, the image);
- ownership markers the registry looks for: `mcp-name: NAME` in README.md (PyPI's long
  description and crates.io's README), mcpName in the npm launcher, the
  io.modelcontextprotocol.server.name LABEL in the Dockerfile;
- MCPB: an https GitHub release URL containing "mcp", a 64-hex fileSha256, no
  registryBaseUrl;
- every package declares PERPLEXITY_API_KEY (secret, required) and
  PERPLEXITY_AGENT_WAIT_SECONDS, and the stdio transport.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import jsonschema

HERE = Path(__file__).resolve().parent
SCHEMA_SHA256 = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"
REPO_URL = "https://github.com/perplexity-agent/perplexity-agent"
OCI_IMAGE = "ghcr.io/perplexity-agent/perplexity-agent"
BASE_URLS = {"npm": "https://registry.npmjs.org", "pypi": "https://pypi.org", "cargo": "https://crates.io"}


def main(argv: list[str]) -> int:
    root = HERE.parent.parent
    if argv[:1] == ["--root"]:
        if len(argv) < 2:
            print(__doc__, file=sys.stderr)
            return 2
        root, argv = Path(argv[1]).resolve(), argv[2:]
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[0]) if argv else root / "server.json"
    problems: list[str] = []

    schema_bytes = (root / "packaging/registry/server.schema.json").read_bytes()
    digest = hashlib.sha256(schema_bytes).hexdigest()
    if digest != SCHEMA_SHA256:
        problems.append(f"packaging/registry/server.schema.json: sha256 {digest} is not the pinned 2025-12-11 copy {SCHEMA_SHA256}")
    schema = json.loads(schema_bytes)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{path}: cannot read it as JSON: {exc}")
        return 1

    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        problems.append(f"schema: {where}: {err.message}")

    name = doc.get("name")
    if doc.get("$schema") != schema.get("$id"):
        problems.append(f"$schema is {doc.get('$schema')!r}, not the vendored schema's $id {schema.get('$id')!r}")
    if doc.get("repository", {}).get("url") != REPO_URL:
        problems.append(f"repository.url is not {REPO_URL}")

    launcher = json.loads((root / "packaging/npm/perplexity-agent/package.json").read_text(encoding="utf-8"))
    if launcher.get("mcpName") != name:
        problems.append(f"packaging/npm/perplexity-agent/package.json: mcpName {launcher.get('mcpName')!r} != server.json name {name!r}")
    readme = (root / "README.md").read_text(encoding="utf-8")
    # A visible line of its own: the registry wants a boundary after the token, and
    # crates.io's rendered README (what its cargo check reads) drops HTML comments.
    if not re.search(rf"^mcp-name: {re.escape(str(name))}\s*$", readme, re.M):
        problems.append(f"README.md: no line 'mcp-name: {name}' (PyPI and crates.io ownership marker; not inside an HTML comment)")
    dockerfile = (root / "packaging/oci/Dockerfile").read_text(encoding="utf-8")
    if not re.search(rf'^LABEL\s+io\.modelcontextprotocol\.server\.name="{re.escape(str(name))}"\s*$', dockerfile, re.M):
        problems.append(f'packaging/oci/Dockerfile: no LABEL io.modelcontextprotocol.server.name="{name}" (OCI ownership marker)')

    crate = re.search(r'^\[package\]\s*$.*?^name\s*=\s*"([^"]+)"', (root / "Cargo.toml").read_text(encoding="utf-8"), re.S | re.M)
    pypi_name = re.search(r'^name\s*=\s*"([^"]+)"', (root / "packaging/pypi/pyproject.toml").read_text(encoding="utf-8"), re.M)
    expected_ident = {"npm": launcher.get("name"), "pypi": pypi_name and pypi_name.group(1), "cargo": crate and crate.group(1)}

    kinds: list[str] = []
    for i, pkg in enumerate(doc.get("packages", [])):
        kind = pkg.get("registryType")
        kinds.append(kind)
        ident = str(pkg.get("identifier", ""))
        at = f"packages[{i}] ({kind})"
        if pkg.get("transport") != {"type": "stdio"}:
            problems.append(f"{at}: transport is {pkg.get('transport')}, expected stdio")
        env = {e.get("name"): e for e in pkg.get("environmentVariables", [])}
        key = env.get("PERPLEXITY_API_KEY", {})
        if not (key.get("isSecret") is True and key.get("isRequired") is True):
            problems.append(f"{at}: PERPLEXITY_API_KEY must be declared with isSecret and isRequired true")
        if "PERPLEXITY_AGENT_WAIT_SECONDS" not in env:
            problems.append(f"{at}: PERPLEXITY_AGENT_WAIT_SECONDS is not declared")
        if kind in BASE_URLS:
            if pkg.get("registryBaseUrl") != BASE_URLS[kind]:
                problems.append(f"{at}: registryBaseUrl must be {BASE_URLS[kind]}")
            if ident != expected_ident[kind]:
                problems.append(f"{at}: identifier {ident!r} is not the published name {expected_ident[kind]!r}")
            if "fileSha256" in pkg:
                problems.append(f"{at}: fileSha256 is for MCPB packages only")
        elif kind == "oci":
            if not ident.startswith(OCI_IMAGE + ":"):
                problems.append(f"{at}: identifier {ident!r} is not {OCI_IMAGE}:TAG")
        elif kind == "mcpb":
            if not ident.startswith(REPO_URL + "/releases/download/") or "mcp" not in ident.lower():
                problems.append(f"{at}: identifier {ident!r} must be an https GitHub release asset of {REPO_URL} (and contain 'mcp')")
            if not re.fullmatch(r"[a-f0-9]{64}", str(pkg.get("fileSha256", ""))):
                problems.append(f"{at}: fileSha256 must be 64 lowercase hex digits")
            if "registryBaseUrl" in pkg:
                problems.append(f"{at}: MCPB packages take no registryBaseUrl")
        else:
            problems.append(f"{at}: unknown registryType {kind!r}")
    for kind in ("pypi", "npm", "oci", "mcpb"):
        if kind not in kinds:
            problems.append(f"packages: no {kind} package")

    for line in problems:
        print(f"{path.name}: {line}")
    if problems:
        return 1
    print(f"{path}: valid against the 2025-12-11 schema and the registry's rules; "
          f"{len(kinds)} packages ({', '.join(kinds)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
