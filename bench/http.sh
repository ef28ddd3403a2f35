#!/usr/bin/env bash
# Streamable HTTP benchmark (issue 4 targets): builds our release binaries and the load
# generator (bench/loadgen), installs the official Node peer @perplexity-ai/mcp-server
# into bench/.work/npm (idempotent, shared with bench/run.sh), then runs
# bench/http_bench.py. Extra arguments go to http_bench.py (e.g. `--runs 1 --duration 3`).
#
# Exits 0 when our server was measured, even if the Node peer could not be installed
# (the report then marks it n/a with the reason). Only loopback is contacted at run
# time; installs use the ordinary clients (cargo, npm) against their registries.
# On a shared machine, limit the build: CARGO_BUILD_JOBS=1 bash bench/http.sh
# BENCH_SRC=<dir> builds perplexity-agent and fake-perplexity from another source tree
# (e.g. `git archive <commit> | tar -x -C <dir>`), to measure a given commit; the load
# generator is always built from this tree.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
WORK="$HERE/.work"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/bench-target}"
NODE_PEER_VERSION="1.2.1"
mkdir -p "$WORK"

log() { printf '[http-bench] %s\n' "$*" >&2; }

# ---- our binaries and the load generator ---------------------------------------------
SRC="${BENCH_SRC:-$ROOT}"
log "building release binaries from $SRC (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
if ! (cd "$SRC" && cargo build --release --locked -p perplexity-agent -p fake-perplexity) ||
    ! (cd "$ROOT" && cargo build --release --locked -p loadgen); then
    log "release build failed: nothing to benchmark"
    exit 1
fi
BIN="$CARGO_TARGET_DIR/release"

# ---- Node peer: @perplexity-ai/mcp-server from npm (as in bench/run.sh) ---------------
NODE_ARGS=()
NPM_DIR="$WORK/npm"
NODE_PKG="$NPM_DIR/node_modules/@perplexity-ai/mcp-server"
node_installed() {
    [ -f "$NODE_PKG/package.json" ] && [ -f "$NODE_PKG/dist/http.js" ] &&
        [ "$(node -p "require('$NODE_PKG/package.json').version" 2>/dev/null)" = "$NODE_PEER_VERSION" ]
}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    NODE_ARGS=(--node-unavailable "node/npm not found on PATH")
else
    if ! node_installed; then
        log "installing @perplexity-ai/mcp-server@$NODE_PEER_VERSION into $NPM_DIR"
        mkdir -p "$NPM_DIR"
        [ -f "$NPM_DIR/package.json" ] || echo '{"private":true}' >"$NPM_DIR/package.json"
        (cd "$NPM_DIR" && timeout 600 npm install --no-audit --no-fund --loglevel=error \
            "@perplexity-ai/mcp-server@$NODE_PEER_VERSION") >"$WORK/npm.log" 2>&1
    fi
    if node_installed; then
        NODE_BIN="$(command -v node)"
        need="$(node -p "(require('$NODE_PKG/package.json').engines||{}).node||''" 2>/dev/null)"
        major="$(node -p 'process.versions.node.split(".")[0]')"
        if [[ "$need" =~ \>=\ *([0-9]+) ]] && [ "$major" -lt "${BASH_REMATCH[1]}" ]; then
            log "system node $major < required ${BASH_REMATCH[1]}: installing node@22 from npm"
            (cd "$NPM_DIR" && timeout 600 npm install --no-audit --no-fund --loglevel=error node@22) >>"$WORK/npm.log" 2>&1
            NODE_BIN="$NPM_DIR/node_modules/node/bin/node"
        fi
        if [ -x "$NODE_BIN" ]; then
            NODE_ARGS=(--node "$NODE_BIN" --node-pkg "$NODE_PKG")
        else
            NODE_ARGS=(--node-unavailable "no usable node binary (see bench/.work/npm.log)")
        fi
    else
        reason="npm install @perplexity-ai/mcp-server@$NODE_PEER_VERSION failed: $(tail -n 1 "$WORK/npm.log" 2>/dev/null | tr -d '\n' | cut -c1-200)"
        log "$reason"
        NODE_ARGS=(--node-unavailable "$reason")
    fi
fi

# ---- run ----------------------------------------------------------------------------
log "running bench/http_bench.py"
PYTHON="$(command -v python3.11 || command -v python3)"
"$PYTHON" "$HERE/http_bench.py" --ours "$BIN/perplexity-agent" --fake "$BIN/fake-perplexity" \
    --loadgen "$BIN/loadgen" "${NODE_ARGS[@]}" --out "$WORK" "$@"
rc=$?
if [ "$rc" -ne 0 ]; then
    log "http_bench.py failed (exit $rc)"
    exit "$rc"
fi
log "report written to bench/.work/http-results.md (raw data: bench/.work/http-results.json)"
exit 0
