#!/usr/bin/env bash
# Fails when the committed app/dist/research.html is not what app/src builds to (with the
# locked packages): rebuilds into a temporary directory and compares the bytes.
#
#   bash app/check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash app/build.sh "$tmp/research.html" >/dev/null
if ! cmp -s "$tmp/research.html" app/dist/research.html; then
  echo "app/check.sh: app/dist/research.html is not what app/src builds to." >&2
  echo "  committed: $(wc -c <app/dist/research.html 2>/dev/null || echo missing) bytes; built: $(wc -c <"$tmp/research.html") bytes" >&2
  echo "  Run 'bash app/build.sh' and commit app/dist/research.html." >&2
  exit 1
fi
echo "app/check.sh: app/dist/research.html is up to date ($(wc -c <app/dist/research.html) bytes, $(gzip -9c app/dist/research.html | wc -c) gzipped)"
