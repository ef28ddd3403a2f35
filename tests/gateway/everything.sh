#!/usr/bin/env bash
# The gateway against a third-party downstream: @modelcontextprotocol/server-everything
# (from the npm registry, over stdio and Streamable HTTP), through the real binary.
#
#   bash tests/gateway/everything.sh
#
# Installs node@22 and server-everything into $INTEROP_HOME (default
# /var/tmp/perplexity-agent-interop), idempotently, then runs the e2e test
# `gateway::server_everything_over_stdio_and_http` with PA_EVERYTHING_JS / PA_NODE_DIR
# set (without them that test only says it was skipped). If the install fails it prints
# SKIP and exits 0, as the Inspector checks do.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
export INTEROP_HOME="${INTEROP_HOME:-/var/tmp/perplexity-agent-interop}"
VERSION="2026.8.31"
skip() { echo "SKIP server-everything checks: $*"; exit 0; }

source "$REPO/tests/interop/npm.sh"
ensure_node22
DIR="$INTEROP_HOME/everything"
ensure_npm_package "$DIR" "@modelcontextprotocol/server-everything" "$VERSION"

export PA_EVERYTHING_JS="$DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
export PA_NODE_DIR="$NODE22_DIR"
echo "server-everything $VERSION on node $(node --version)"
cd "$REPO"
cargo test --locked --test e2e server_everything -- --nocapture
