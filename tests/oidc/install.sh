#!/usr/bin/env bash
# Installs tests/oidc's locked packages (oauth2-mock-server and its dependencies) when they
# are missing or the lock changed (tests/npm-ci.sh). Used by .ci/run, tests/interop/run.sh
# and bench/http.sh; the Rust e2e tests run `npm ci` themselves when node_modules is missing.
exec bash "$(dirname "$0")/../npm-ci.sh" "$(dirname "$0")"
