#!/usr/bin/env bash
# Streamable HTTP benchmark: builds our release binaries and the load
# generator (bench/loadgen), installs the official Node peer @perplexity-ai/mcp-server
# into bench/.work/npm (idempotent, shared with bench/run.sh), then runs
# bench/http_bench.py, with Debian's nginx (installed when missing) serving the same bytes
# as the same-run reference. Extra arguments go to http_bench.py (e.g. `--runs 1 --duration 3`).
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

# ---- Node peer: @perplexity-ai/mcp-server from npm ----------------------------------
# shellcheck source=bench/node_peer.sh
. "$HERE/node_peer.sh"

# ---- the OpenID provider of the JWT contenders: tests/oidc (oauth2-mock-server) -------
OIDC_ARGS=()
if bash "$ROOT/tests/oidc/install.sh" >&2; then
    OIDC_ARGS=(--oidc "$ROOT/tests/oidc")
else
    OIDC_ARGS=(--oidc-unavailable "tests/oidc/install.sh failed (node/npm?)")
fi

# ---- the reference: Debian's nginx serving the same bytes (issue 34) -------------------
if ! command -v nginx >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing Debian's nginx-light (the same-run reference)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
fi
NGINX_ARGS=(--nginx "$(command -v nginx || echo /usr/sbin/nginx)")

# ---- run ----------------------------------------------------------------------------
log "running bench/http_bench.py"
PYTHON="$(command -v python3.11 || command -v python3)"
"$PYTHON" "$HERE/http_bench.py" --ours "$BIN/perplexity-agent" --fake "$BIN/fake-perplexity" \
    --loadgen "$BIN/loadgen" "${NODE_ARGS[@]}" "${OIDC_ARGS[@]}" "${NGINX_ARGS[@]}" --out "$WORK" "$@"
rc=$?
if [ "$rc" -ne 0 ]; then
    log "http_bench.py failed (exit $rc)"
    exit "$rc"
fi
log "report written to bench/.work/http-results.md (raw data: bench/.work/http-results.json)"
exit 0
