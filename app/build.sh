#!/usr/bin/env bash
# Builds the MCP App: app/src → app/dist/research.html, one self-contained HTML file that
# the Rust binary embeds (include_str!), so the built file is committed. Installs the
# locked npm packages first (only when app/package-lock.json changed).
#
#   bash app/build.sh            # writes app/dist/research.html
#   bash app/build.sh OUT.html   # writes elsewhere (app/check.sh does)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/npm-ci.sh app
node app/build.mjs "${1:-app/dist/research.html}"
