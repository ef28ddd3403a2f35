#!/usr/bin/env bash
# The MCP Bundle, as a client that installs it would use it.
#
#   tests/distribution/mcpb_test.sh BINARY
#
# Builds the bundle with packaging/mcpb/build.sh (mcpb validate + mcpb pack), unzips it,
# checks what a host reads (the binary executable and byte-identical to BINARY, the key
# as a sensitive required user_config mapped to PERPLEXITY_API_KEY, the 55 s wait), then
# runs both MCP eras against the unzipped server with mcp_config resolved the way a
# host resolves it (${__dirname}, ${user_config.api_key}). The manifest's tool list must
# be what the binary offers. A broken manifest must fail `mcpb validate`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
binary_arg 12 "$@"

out="$(bash "$PACK_REPO/packaging/mcpb/build.sh" "$binary" "$T/dist" linux-x64 2>"$T/build.log")" \
  || { cat "$T/build.log"; pack_die "packaging/mcpb/build.sh failed"; }
bundle="$(sed -n 1p <<<"$out")"
check "build.sh produced $(basename "$bundle")" test -s "$bundle"
check "build.sh printed the bundle's SHA-256" bash -c '[ "$(sha256sum "$1" | cut -c1-64)" = "$2" ]' _ "$bundle" "$(sed -n 2p <<<"$out")"

mkdir -p "$T/unpacked"
unzip -q "$bundle" -d "$T/unpacked"
check "the bundle holds the binary, executable" test -x "$T/unpacked/server/perplexity-agent"
check "... byte-identical to $1" cmp "$binary" "$T/unpacked/server/perplexity-agent"

# What a host reads from the manifest, checked as data; then the command line it builds.
cat >"$T/resolve.py" <<'EOF'
import json, sys
d = sys.argv[1]
m = json.load(open(f"{d}/manifest.json"))
cfg, uc = m["server"]["mcp_config"], m["user_config"]["api_key"]
assert m["server"]["type"] == "binary", m["server"]
assert cfg["command"] == "${__dirname}/server/perplexity-agent", cfg["command"]
assert cfg["env"]["PERPLEXITY_API_KEY"] == "${user_config.api_key}", cfg["env"]
assert cfg["env"]["PERPLEXITY_AGENT_WAIT_SECONDS"] == "55", cfg["env"]
assert uc["type"] == "string" and uc["sensitive"] is True and uc["required"] is True, uc
assert m["compatibility"]["platforms"] == ["linux"], m["compatibility"]
sub = lambda s: s.replace("${__dirname}", d).replace("${user_config.api_key}", "pplx-test-key")
# handshake.py's arguments, one a line: --env K=V ... -- COMMAND ARG...
lines = []
for k, v in cfg["env"].items():
    lines += ["--env", f"{k}={sub(v)}"]
lines += ["--", sub(cfg["command"])] + [sub(a) for a in cfg.get("args", [])]
open(f"{d}/.cmdline", "w").write("\n".join(lines) + "\n")
open(f"{d}/.tools", "w").write(" ".join(t["name"] for t in m["tools"]))
EOF
check "manifest: binary server, key sensitive+required → PERPLEXITY_API_KEY, wait 55 s" \
  python3 "$T/resolve.py" "$T/unpacked"
cmdline=(--)
[ -f "$T/unpacked/.cmdline" ] && mapfile -t cmdline <"$T/unpacked/.cmdline"
export HANDSHAKE_TOOLS_OUT="$T/tools.txt"
check "both eras through the unpacked server (mcp_config as a host resolves it)" \
  python3 "$DIST_HERE/handshake.py" "${cmdline[@]}"
check "manifest tools == the binary's tools/list" \
  bash -c 'diff <(tr " " "\n" <"$1" | sort) "$2"' _ "$T/unpacked/.tools" "$T/tools.txt"

# Broken inputs: each must be refused.
mcpb="$(pack_npm_tool "@anthropic-ai/mcpb@2.1.2")/node_modules/.bin/mcpb"
python3 - "$T/unpacked/manifest.json" "$T/broken.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["server"]["type"] = "rust"          # not one of python, node, binary
del m["author"]                       # required
open(sys.argv[2], "w").write(json.dumps(m))
EOF
expect_fail "mcpb validate rejects a broken manifest (server.type rust, no author)" "$mcpb" validate "$T/broken.json"
expect_fail "build.sh refuses a missing binary" bash "$PACK_REPO/packaging/mcpb/build.sh" "$T/nope" "$T/dist"
printf '#!/bin/sh\necho not a server\n' >"$T/fake-server"; chmod +x "$T/fake-server"
bash "$PACK_REPO/packaging/mcpb/build.sh" "$T/fake-server" "$T/dist-bad" linux-x64 >/dev/null 2>&1
rm -rf "$T/unpacked-bad"; unzip -q "$T/dist-bad/"*.mcpb -d "$T/unpacked-bad"
HANDSHAKE_TIMEOUT=10 expect_fail "the handshake check fails on a bundle whose server is not an MCP server" \
  python3 "$DIST_HERE/handshake.py" --env PERPLEXITY_API_KEY=pplx-test-key -- "$T/unpacked-bad/server/perplexity-agent"
finish
