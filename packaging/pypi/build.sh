#!/usr/bin/env bash
# Build the PyPI wheel: the perplexity-agent binary plus the `llm` plugin module.
#
#   packaging/pypi/build.sh [--dev] [OUT_DIR] [-- MATURIN_ARGS...]
#
# Runs maturin (pinned below, installed once into a venv under $PACK_CACHE) on
# packaging/pypi/pyproject.toml. maturin builds the binary with cargo into
# $CARGO_TARGET_DIR, so after `cargo build --release --locked -p perplexity-agent` in the
# same target dir it only packs what is there. --dev packs the debug build instead (for
# local tests). OUT_DIR defaults to dist/. Prints the wheel's path.
#
# The wheel is tagged for the oldest manylinux whose glibc the binary accepts (maturin
# checks it); build on an old glibc (or with `-- --zig --compatibility manylinux2014`)
# for a wheel that installs everywhere.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
MATURIN_VERSION=1.16.0

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
profile=(--release)
out="$PACK_REPO/dist"
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) profile=(); shift ;;
    --) shift; break ;;
    -h|--help) usage ;;
    -*) usage ;;
    *) out="$1"; shift ;;
  esac
done

venv="$(pack_venv maturin "maturin==$MATURIN_VERSION")"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
( cd "$PACK_REPO/packaging/pypi" && "$venv/bin/maturin" build "${profile[@]}" --locked -o "$out" "$@" >&2 ) \
  || pack_die "maturin build failed"
# The wheel maturin just wrote (its name carries the platform tag, so ask the directory).
wheel="$(ls -t "$out"/perplexity_agent-"$(pack_version)"-*.whl 2>/dev/null | head -n1 || true)"
[ -n "$wheel" ] || pack_die "maturin wrote no perplexity_agent-$(pack_version) wheel into $out"
echo "$wheel"
