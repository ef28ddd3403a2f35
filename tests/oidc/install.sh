#!/usr/bin/env bash
# Installs tests/oidc's locked packages (oauth2-mock-server and its dependencies) into
# tests/oidc/node_modules with `npm ci`, only when they are missing or the lock file
# changed since (a stamp of its SHA-256 is kept in node_modules). From the npm registry
# only: no audit, no funding calls. Used by .ci/run and tests/interop/run.sh; the Rust
# e2e tests run `npm ci` themselves when node_modules is missing.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
command -v node >/dev/null || { echo "tests/oidc: node is not installed (Debian: apt-get install nodejs npm)" >&2; exit 1; }
want=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.lock-sha256
if [ -f node_modules/oauth2-mock-server/package.json ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
start=$(date +%s)
npm ci --no-audit --no-fund --prefer-offline --loglevel=error >/dev/null
echo "$want" >"$stamp"
echo "tests/oidc: npm ci ($(node --version), $(( $(date +%s) - start ))s)"
