#!/usr/bin/env bash
# Is the crate publishable? `cargo publish --dry-run` packages perplexity-agent as
# crates.io would get it and builds that package on its own (path dev-dependencies dropped,
# only the files of Cargo.toml's `include`), then reports what it would upload.
#
# Usage: scripts/publish-check.sh
#   Needs crates.io for the index (or a warm local cache). Uses $CARGO_TARGET_DIR when set,
#   so the verify build reuses the shared target dir's compiled dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$(date +%s)
# --allow-dirty: CI checks a tree that may carry uncommitted generated files; what is
# packaged is decided by `include`, not by git status.
cargo publish --dry-run --locked --allow-dirty -p perplexity-agent

# The dry run leaves no .crate behind (cargo ≥ 1.9x packages it in a scratch place):
# package it again, unverified (the dry run just built it), to look inside.
cargo package --locked --allow-dirty --no-verify -p perplexity-agent --quiet
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
crate="${CARGO_TARGET_DIR:-target}/package/perplexity-agent-$version.crate"
files=$(tar -tzf "$crate" | grep -vc '/$')
size=$(wc -c <"$crate")
# Packaging must not start shipping tests, fixtures or benches again.
if tar -tzf "$crate" | grep -E '^[^/]+/(tests|benches|bench|crates|scripts|\.github|\.ci)/' ; then
    echo "publish-check: the package ships files it should not (above); fix Cargo.toml's include" >&2
    exit 1
fi
echo "publish-check: ok: $(basename "$crate"), $files files, $((size / 1024)) KiB, $(( $(date +%s) - start ))s"
