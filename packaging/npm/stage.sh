#!/usr/bin/env bash
# Stage the npm packages for publishing or `npm pack`: the launcher `perplexity-agent`
# and one platform package holding the given binary.
#
#   packaging/npm/stage.sh OUT_DIR BINARY [PLATFORM]
#
# PLATFORM is one of packaging/npm/platforms/* (default linux-x64). Writes
# OUT_DIR/perplexity-agent/ and OUT_DIR/PLATFORM/ (the package.json files as committed,
# the binary at bin/perplexity-agent[.exe], mode 0755) and prints the two directories.
# Publish the platform packages before the launcher that depends on them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
out="$1" binary="$2" platform="${3:-linux-x64}"
src="$PACK_REPO/packaging/npm"
[ -f "$src/platforms/$platform/package.json" ] \
  || pack_die "unknown platform '$platform' (one of: $(ls "$src/platforms" | tr '\n' ' '))"
[ -f "$binary" ] && [ -x "$binary" ] || pack_die "no executable at $binary"

exe=perplexity-agent; [ "${platform%-*}" = win32 ] && exe=perplexity-agent.exe
rm -rf "${out:?}/perplexity-agent" "${out:?}/$platform"
mkdir -p "$out/perplexity-agent" "$out/$platform/bin"
cp -R "$src/perplexity-agent/." "$out/perplexity-agent/"
cp "$src/platforms/$platform/package.json" "$out/$platform/"
cp "$binary" "$out/$platform/bin/$exe"
chmod 0755 "$out/$platform/bin/$exe" "$out/perplexity-agent/bin/perplexity-agent.js"
echo "$out/perplexity-agent"
echo "$out/$platform"
