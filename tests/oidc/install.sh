#!/usr/bin/env bash
# Installs tests/oidc's locked packages (oauth2-mock-server and its dependencies) when they
# are missing or the lock changed (tests/npm-ci.sh). Used by .ci/run, tests/interop/run.sh,
# bench/http.sh and the Rust e2e tests (tests/e2e/oauth.rs).
exec bash "$(dirname "$0")/../npm-ci.sh" "$(dirname "$0")"
