#!/usr/bin/env bash
# Installs DIR's locked npm packages into DIR/node_modules with `npm ci`, only when they
# are missing or DIR/package-lock.json changed since (a stamp of its SHA-256 is kept in
# node_modules). From the npm registry only: no audit, no funding calls. Installs node
# with apt when it is missing and this is root on Debian (CI). Used for tests/oidc (the
# OpenID provider of the OAuth tests) and tests/contract/node (the Node SDK's types).
#
#   bash tests/npm-ci.sh DIR
set -euo pipefail
dir="${1:?usage: npm-ci.sh DIR}"
cd "$dir"
if ! command -v node >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
command -v node >/dev/null || { echo "$dir: node is not installed (Debian: apt-get install nodejs npm)" >&2; exit 1; }
want=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.lock-sha256
if [ -d node_modules ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
start=$(date +%s)
npm ci --no-audit --no-fund --prefer-offline --loglevel=error >/dev/null
echo "$want" >"$stamp"
echo "$dir: npm ci ($(node --version), $(( $(date +%s) - start ))s)"
