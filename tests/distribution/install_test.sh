#!/usr/bin/env bash
# install.sh against a local release: the archive made by scripts/package-release.sh (as
# the release workflow makes it) and its SHA256SUMS, served on 127.0.0.1 only.
# Checks that the installed binary runs, that --to and PERPLEXITY_AGENT_INSTALL_BASE work,
# that wget works where curl is missing, and that a wrong checksum installs nothing.
#
# Usage: tests/distribution/install_test.sh [BINARY]
#   BINARY  a built perplexity-agent for this machine (CI passes the one it built);
#           without it, `cargo build --locked -p perplexity-agent` builds one.
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "install_test: FAIL: $*" >&2; exit 1; }

if [ $# -ge 1 ]; then
    binary=$1
else
    cargo build --locked -p perplexity-agent
    binary=${CARGO_TARGET_DIR:-target}/debug/perplexity-agent
fi
[ -x "$binary" ] || fail "no executable at $binary"
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
want_version=$("$binary" --version)

work=$(mktemp -d)
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# The release, exactly as the workflow lays it out.
archive_name=$(sh install.sh --print-target)
target=${archive_name#perplexity-agent-}
target=${target%.tar.gz}
bash scripts/package-release.sh archive "$target" "$binary" "$work/release" >/dev/null
bash scripts/package-release.sh sums "$work/release" >/dev/null

# Port 0: the server picks a free port and prints it (no race for a port chosen here).
python3 -u -m http.server --bind 127.0.0.1 --directory "$work/release" 0 >"$work/server.log" 2>&1 &
server_pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/.* port \([0-9][0-9]*\).*/\1/p' "$work/server.log" | head -1)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || fail "the HTTP server exited: $(cat "$work/server.log")"
    sleep 0.1
done
[ -n "$port" ] || fail "the HTTP server did not start: $(cat "$work/server.log")"
base="http://127.0.0.1:$port"

# A PATH without ~/.local/bin, and a fresh HOME per run.
clean_path=/usr/local/bin:/usr/bin:/bin

echo "-- install with curl into ~/.local/bin"
home1="$work/home1"; mkdir "$home1"
out=$(env -i HOME="$home1" PATH="$clean_path" sh install.sh --base "$base" 2>&1) || fail "install.sh failed: $out"
installed="$home1/.local/bin/perplexity-agent"
[ -x "$installed" ] || fail "nothing at $installed; output: $out"
got=$("$installed" --version) || fail "the installed binary does not run"
[ "$got" = "$want_version" ] || fail "installed '$got', expected '$want_version'"
# The archive ships the binary without its symbol table (package-release.sh strips it).
if readelf -S "$installed" | grep -q '\.symtab'; then fail "the installed binary still has its symbol table"; fi
echo "   installed binary: $(wc -c <"$installed") bytes (the build: $(wc -c <"$binary") bytes)"
grep -q "checksum ok" <<<"$out" || fail "no checksum confirmation in: $out"
grep -q "is not on your PATH" <<<"$out" || fail "no PATH hint in: $out"

echo "-- install with wget (no curl on PATH) via PERPLEXITY_AGENT_INSTALL_BASE and --to"
if command -v wget >/dev/null 2>&1; then
    # Only the tools install.sh needs, curl left out.
    tools="$work/tools"; mkdir "$tools"
    for t in sh uname mktemp rm mkdir cp mv chmod tar gzip awk sed cat wget sha256sum shasum sysctl; do
        p=$(command -v "$t" 2>/dev/null) && ln -s "$p" "$tools/$t"
    done
    dest="$work/opt/bin"
    out=$(env -i HOME="$work/home2" PATH="$tools:$dest" PERPLEXITY_AGENT_INSTALL_BASE="$base/" \
        sh install.sh --to "$dest" 2>&1) || fail "install.sh (wget) failed: $out"
    [ "$("$dest/perplexity-agent" --version)" = "$want_version" ] || fail "wget install did not produce the binary: $out"
    grep -q "is on your PATH" <<<"$out" || fail "no on-PATH note in: $out"
else
    echo "   (wget not installed: skipped)"
fi

echo "-- a wrong checksum installs nothing"
sums="$work/release/SHA256SUMS"
awk -v f="$archive_name" '$2 == f { $1 = "0000000000000000000000000000000000000000000000000000000000000000" } { print $1 "  " $2 }' \
    "$sums" >"$sums.bad"
mv "$sums.bad" "$sums"
home3="$work/home3"; mkdir "$home3"
if out=$(env -i HOME="$home3" PATH="$clean_path" sh install.sh --base "$base" 2>&1); then
    fail "install.sh accepted a wrong checksum: $out"
fi
grep -q "checksum mismatch" <<<"$out" || fail "no mismatch message in: $out"
grep -q "nothing was installed" <<<"$out" || fail "the message does not say nothing was installed: $out"
[ ! -e "$home3/.local/bin" ] || [ -z "$(ls -A "$home3/.local/bin")" ] || fail "files were installed despite the mismatch: $(ls -A "$home3/.local/bin")"

echo "-- a checksum file without the archive installs nothing"
grep -v " $archive_name\$" "$sums" >"$sums.bad" || true
mv "$sums.bad" "$sums"
if out=$(env -i HOME="$home3" PATH="$clean_path" sh install.sh --base "$base" 2>&1); then
    fail "install.sh installed without a checksum entry: $out"
fi
grep -q "no entry for $archive_name" <<<"$out" || fail "no missing-entry message in: $out"
[ ! -e "$home3/.local/bin/perplexity-agent" ] || fail "installed despite the missing entry"

echo "install_test: ok ($target, $want_version)"
