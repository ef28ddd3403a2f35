#!/usr/bin/env bash
# Build the MCP Bundle (.mcpb) for one platform from a built binary.
#
#   packaging/mcpb/build.sh BINARY [OUT_DIR] [PLATFORM-ARCH]
#
# BINARY         the perplexity-agent executable to ship (e.g. target/release/perplexity-agent)
# OUT_DIR        where the .mcpb goes (default: dist/)
# PLATFORM-ARCH  e.g. linux-x64, darwin-arm64, win32-x64 (default: this machine's)
#
# Stages manifest.json (its compatibility.platforms narrowed to PLATFORM, since a bundle
# carries one native binary) and server/perplexity-agent[.exe], runs `mcpb validate` and
# `mcpb pack` (@anthropic-ai/mcpb, pinned below, installed once under $PACK_CACHE), and
# prints the bundle's path and SHA-256 (what server.json's fileSha256 takes).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
MCPB_VERSION=2.1.2

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] && [ $# -le 3 ] || usage
case "$1" in -h|--help) usage ;; esac
binary="$1"
out="${2:-$PACK_REPO/dist}"
target="${3:-$(uname -s | tr 'A-Z' 'a-z' | sed 's/mingw.*\|msys.*/win32/')-$(uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')}"
platform="${target%-*}"
case "$platform" in linux|darwin|win32) ;; *) pack_die "unknown platform '$platform' in '$target' (linux, darwin or win32)" ;; esac
[ -f "$binary" ] && [ -x "$binary" ] || pack_die "no executable at $binary"

tool="$(pack_npm_tool "@anthropic-ai/mcpb@$MCPB_VERSION")"
mcpb() { "$tool/node_modules/.bin/mcpb" "$@"; }

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/server" "$out"
exe="perplexity-agent"; [ "$platform" = win32 ] && exe="perplexity-agent.exe"
cp "$binary" "$stage/server/$exe"
chmod 0755 "$stage/server/$exe"
python3 - "$PACK_REPO/packaging/mcpb/manifest.json" "$stage/manifest.json" "$platform" <<'EOF'
import json, sys
src, dst, platform = sys.argv[1:]
m = json.load(open(src, encoding="utf-8"))
m.setdefault("compatibility", {})["platforms"] = [platform]
open(dst, "w", encoding="utf-8").write(json.dumps(m, indent=2, ensure_ascii=False) + "\n")
EOF

mcpb validate "$stage/manifest.json" >&2 || pack_die "mcpb validate rejected the manifest (packaging/mcpb/manifest.json)"
bundle="$out/perplexity-agent-$(pack_version)-$target.mcpb"
mcpb pack "$stage" "$bundle" >&2 || pack_die "mcpb pack failed"
echo "$bundle"
sha256sum "$bundle" | cut -d' ' -f1
