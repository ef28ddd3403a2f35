#!/usr/bin/env bash
# The crate's declared rust-version builds: `cargo check` of the whole workspace, every
# target, with exactly that toolchain (clippy's incompatible_msrv only sees std APIs,
# not language features or what dependencies need).
#
# Usage: scripts/msrv-check.sh
#   PERPLEXITY_AGENT_TOOLS  cache root (default /var/tmp/perplexity-agent-tools): the
#                           toolchain goes into a rustup home of its own there (the user's
#                           toolchains and rustup itself are left alone), with its target dir.
# Exits 1 when the workspace does not build with that toolchain, 3 when the toolchain
# cannot be installed (static.rust-lang.org unreachable), so a caller can tell the two.
set -euo pipefail
cd "$(dirname "$0")/.."

msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[ -n "$msrv" ] || { echo "msrv-check: no rust-version in Cargo.toml" >&2; exit 1; }
case $msrv in *.*.*) toolchain=$msrv ;; *) toolchain=$msrv.0 ;; esac
tools=${PERPLEXITY_AGENT_TOOLS:-/var/tmp/perplexity-agent-tools}
export RUSTUP_HOME="$tools/rustup"

if ! rustup toolchain list 2>/dev/null | grep -q "^$toolchain-"; then
    mkdir -p "$tools"
    rustup toolchain install "$toolchain" --profile minimal --no-self-update \
        || { echo "msrv-check: could not install Rust $toolchain (needs static.rust-lang.org)" >&2; exit 3; }
    # Never let this rustup home replace the rustup binary shared with the user's.
    rustup set auto-self-update disable
fi

CARGO_TARGET_DIR="$tools/msrv-target-$toolchain" \
    cargo "+$toolchain" check --locked --workspace --all-targets --quiet
echo "msrv-check: the workspace builds with Rust $toolchain (rust-version $msrv)"
