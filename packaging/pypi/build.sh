#!/usr/bin/env bash
# Build the PyPI wheel: the perplexity-agent binary plus the `llm` plugin module.
#
#   packaging/pypi/build.sh [--dev] [--strip] [OUT_DIR] [-- MATURIN_ARGS...]
#
# Runs maturin (pinned below, installed once into a venv under $PACK_CACHE) on
# packaging/pypi/pyproject.toml. maturin builds the binary with cargo into
# $CARGO_TARGET_DIR, so after `cargo build --release --locked -p perplexity-agent` in the
# same target dir it only packs what is there. --dev packs the debug build instead (for
# local tests). OUT_DIR defaults to dist/. Prints the wheel's path. --strip (what a
# release ships) strips the binary's symbols inside the packed wheel, with `wheel
# unpack`/`wheel pack` rewriting RECORD: the linked binary stays the one cargo built
# (maturin's own --strip relinks it with other flags, moving link/startup.order's layout).
#
# The wheel is tagged for the oldest manylinux whose glibc the binary accepts (maturin
# checks it); build on an old glibc (or with `-- --zig --compatibility manylinux2014`)
# for a wheel that installs everywhere.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
MATURIN_VERSION=1.16.0
WHEEL_VERSION=0.45.1

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
profile=(--release)
strip=0
out="$PACK_REPO/dist"
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) profile=(); shift ;;
    --strip) strip=1; shift ;;
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
if [ "$strip" = 1 ]; then
  tools="$(pack_venv wheel "wheel==$WHEEL_VERSION")"
  work="$(mktemp -d)"
  "$tools/bin/wheel" unpack -d "$work" "$wheel" >/dev/null || pack_die "wheel unpack failed"
  exe="$(ls "$work"/*/*.data/scripts/perplexity-agent 2>/dev/null | head -n1 || true)"
  [ -n "$exe" ] || pack_die "no perplexity-agent script in $wheel"
  strip "$exe" || pack_die "strip failed on the wheel's binary"
  rm -f "$wheel"
  "$tools/bin/wheel" pack -d "$out" "$(dirname "$(dirname "$(dirname "$exe")")")" >/dev/null || pack_die "wheel pack failed"
  rm -rf "$work"
  [ -f "$wheel" ] || pack_die "wheel pack did not write $wheel again"
fi
echo "$wheel"
