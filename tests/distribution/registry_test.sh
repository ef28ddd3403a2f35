#!/usr/bin/env bash
# The MCP Registry entry (server.json) and the one-version rule.
#
#   tests/distribution/registry_test.sh
#
# - packaging/registry/validate.py: server.json against the vendored 2025-12-11 schema
#   (jsonschema, pinned, in a cached venv) plus the registry's publishing rules
#   (ownership markers, names, MCPB URL and digest, the key declared secret);
# - packaging/registry/set-mcpb-sha256.py fills the MCPB digests from bundles, refuses a
#   bundle that matches no entry and a placeholder left behind;
# - scripts/check-versions.py passes on the tree, and fails naming the file when any one
#   versioned file in a copy of the tree is given another version (its self-test);
# - broken server.json copies (each a single fault) must fail validation.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ $# -eq 0 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
venv="$(pack_venv registry 'jsonschema==4.26.0' 'rfc3986-validator==0.1.1' 'attrs==26.1.0' \
  'jsonschema-specifications==2025.9.1' 'referencing==0.37.0' 'rpds-py==2026.9.1' 'typing_extensions==4.16.0')"
py="$venv/bin/python"
validate="$PACK_REPO/packaging/registry/validate.py"

check "server.json: the 2025-12-11 schema and the registry's rules" "$py" "$validate"
check "scripts/check-versions.py: every file carries Cargo.toml's version" python3 "$PACK_REPO/scripts/check-versions.py"

# --- the MCPB digests at release time ---------------------------------------------------
cp "$PACK_REPO/server.json" "$T/server.json"
mapfile -t bundles < <(python3 -c 'import json,sys,pathlib
for p in json.load(open(sys.argv[1]))["packages"]:
    if p["registryType"] == "mcpb": print(pathlib.PurePosixPath(p["identifier"]).name)' "$T/server.json")
mkdir -p "$T/bundles"
for b in "${bundles[@]}"; do echo "bundle $b" >"$T/bundles/$b"; done
check "set-mcpb-sha256.py fills every MCPB digest" python3 "$PACK_REPO/packaging/registry/set-mcpb-sha256.py" "$T/server.json" "${bundles[@]/#/$T/bundles/}"
check "... and the result is still valid, with the bundles' real digests" bash -c '
  "$1" "$2" "$3" && [ "$(grep -c "$(sha256sum "$4" | cut -c1-64)" "$3")" = 1 ]' _ "$py" "$validate" "$T/server.json" "$T/bundles/${bundles[0]}"
cp "$PACK_REPO/server.json" "$T/server2.json"
echo x >"$T/bundles/perplexity-agent-0.0.0-plan9-mips.mcpb"
expect_fail "set-mcpb-sha256.py refuses a bundle no entry names" \
  python3 "$PACK_REPO/packaging/registry/set-mcpb-sha256.py" "$T/server2.json" "$T/bundles/perplexity-agent-0.0.0-plan9-mips.mcpb"
expect_fail "set-mcpb-sha256.py refuses to leave a placeholder (one bundle of ${#bundles[@]})" \
  python3 "$PACK_REPO/packaging/registry/set-mcpb-sha256.py" "$T/server2.json" "$T/bundles/${bundles[0]}"

# --- broken server.json copies: each must be rejected -------------------------------------
# A copy fails for its own fault: it must report a problem the committed file does not.
"$py" "$validate" >"$T/baseline.out" 2>&1 || true
own_fault() { ! "$py" "$validate" "$1" >"$T/v.out" 2>&1 && cat "$T/v.out" \
  && grep -vxF -f <(sed 's/^server\.json: //' "$T/baseline.out") <(sed 's/^broken\.json: //' "$T/v.out") >/dev/null; }
broken() {  # broken "what" PYTHON-EXPRESSION-ON-d
  python3 - "$PACK_REPO/server.json" "$T/broken.json" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
open(sys.argv[2], "w").write(json.dumps(d))
EOF
  check "rejects server.json with $1" own_fault "$T/broken.json"
}
broken "a name without a slash" 'd["name"] = "perplexity-agent"'
broken "a 101-character description" 'd["description"] = "x" * 101'
broken "the key not secret" 'd["packages"][0]["environmentVariables"][0]["isSecret"] = False'
broken "an MCPB digest that is not hex" 'next(p for p in d["packages"] if p["registryType"] == "mcpb")["fileSha256"] = "TBD"'
broken "an MCPB URL off GitHub releases" 'next(p for p in d["packages"] if p["registryType"] == "mcpb")["identifier"] = "https://example.org/x.mcpb"'
broken "a package version 'latest'" 'd["packages"][0]["version"] = "latest"'
broken "a websiteUrl that is not a URI" 'd["websiteUrl"] = "not a uri"'
broken "an npm identifier other than the launcher's name" 'next(p for p in d["packages"] if p["registryType"] == "npm")["identifier"] = "perplexity"'
broken "no oci package" 'd["packages"] = [p for p in d["packages"] if p["registryType"] != "oci"]'
broken "the schema of another date" 'd["$schema"] = "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json"'

# --- check-versions self-test: one file at a time given another version -----------------
tree="$T/tree"
rm -rf "$tree"
mkdir -p "$tree"
( cd "$PACK_REPO" && cp --parents Cargo.toml Cargo.lock README.md server.json packaging/pypi/pyproject.toml \
    packaging/mcpb/manifest.json packaging/npm/perplexity-agent/package.json packaging/npm/platforms/*/package.json "$tree/" )
check "check-versions.py passes on the copied tree" python3 "$PACK_REPO/scripts/check-versions.py" --root "$tree"
mutate() {  # mutate FILE "what" PYTHON-ON-text [NAMED] → the check must fail and name NAMED (FILE)
  local file="$1" what="$2" code="$3" named="${4:-$1}"
  cp "$tree/$file" "$T/orig"
  python3 - "$tree/$file" "$code" <<'EOF'
import json, re, sys
path, code = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8").read()
d = json.loads(text) if path.endswith(".json") else None
exec(code)
open(path, "w", encoding="utf-8").write(json.dumps(d, indent=2) if d is not None else text)
EOF
  names_file() { ! python3 "$PACK_REPO/scripts/check-versions.py" --root "$tree" >"$T/cv.out" 2>&1 && cat "$T/cv.out" && grep -q "^check-versions: $1: " "$T/cv.out"; }
  check "check-versions.py fails naming $named ($file: $what)" names_file "$named"
  cp "$T/orig" "$tree/$file"
}
mutate Cargo.toml "[package] version bumped, nothing else" 'text = re.sub(r"(?m)^version = \"[^\"]+\"", "version = \"9.9.9\"", text, count=1)' Cargo.lock
mutate packaging/pypi/pyproject.toml "a static version" 'text = text.replace("dynamic = [\"version\"]", "version = \"0.1.0\"")'
mutate packaging/npm/perplexity-agent/package.json "version" 'd["version"] = "9.9.9"'
mutate packaging/npm/perplexity-agent/package.json "one optionalDependency" 'd["optionalDependencies"]["@perplexity-agent/darwin-arm64"] = "9.9.9"'
mutate packaging/npm/platforms/linux-arm64/package.json "version" 'd["version"] = "9.9.9"'
mutate packaging/mcpb/manifest.json "version" 'd["version"] = "9.9.9"'
mutate server.json "version" 'd["version"] = "9.9.9"'
mutate README.md "the npx entry's pin" 'text = text.replace("\"-y\", \"perplexity-agent@", "\"-y\", \"perplexity-agent@9", 1)'
mutate server.json "the pypi package's version" 'd["packages"][0]["version"] = "9.9.9"'
mutate server.json "the OCI tag" 'next(p for p in d["packages"] if p["registryType"] == "oci")["identifier"] = "ghcr.io/perplexity-agent/perplexity-agent:9.9.9"'
mutate server.json "an MCPB release URL" 'p = next(p for p in d["packages"] if p["registryType"] == "mcpb"); p["identifier"] = re.sub("/v[^/]+/", "/v9.9.9/", p["identifier"])'
finish
