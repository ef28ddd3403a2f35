#!/usr/bin/env bash
# The real-browser tests of the MCP App (see tests/browser/README.md).
#
#   bash tests/browser/run.sh                                   # fixture mode
#   bash tests/browser/run.sh --server BIN --fake FAKE          # + server mode
#   bash tests/browser/run.sh --update-screenshots              # rewrite docs/app/*.png
#
# Installs what it needs: Debian's Chromium and two font packages (as root, with apt,
# when missing), the locked npm packages of app/ and tests/browser/. Then checks that the
# committed App is what app/src builds to, and runs the tests (node's test runner).
set -euo pipefail
cd "$(dirname "$0")/../.."

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
# The committed screenshots were taken with these fonts (system-ui → DejaVu Sans).
dpkg -s fonts-dejavu-core >/dev/null 2>&1 || need+=(fonts-dejavu-core)
dpkg -s fonts-liberation >/dev/null 2>&1 || need+=(fonts-liberation)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    start=$(date +%s)
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    echo "tests/browser: installed ${need[*]} ($(( $(date +%s) - start ))s)"
  else
    echo "tests/browser: missing ${need[*]} (Debian: apt-get install ${need[*]})" >&2
    exit 1
  fi
fi

bash tests/npm-ci.sh app
bash tests/npm-ci.sh tests/browser
bash app/check.sh
node tests/browser/run.mjs "$@"
