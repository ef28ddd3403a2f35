#!/usr/bin/env bash
# Benchmark entry point: builds our release binaries, installs the two peers into
# bench/.work/ (idempotent), then runs bench/bench.py. Extra arguments go to bench.py
# (e.g. `bash bench/run.sh --cold-runs 10`).
#
# Exits 0 when our server was measured, even if a peer could not be installed (the
# report then marks it n/a with the reason). Only loopback is contacted at run time;
# installs use the ordinary clients (cargo, pip, npm) against their registries.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
WORK="$HERE/.work"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/bench-target}"
PY_PEER_VERSION="0.4.0"
NODE_PEER_VERSION="1.2.1"
mkdir -p "$WORK"

log() { printf '[bench] %s\n' "$*" >&2; }

# ---- our binaries -------------------------------------------------------------------
log "building release binaries (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
if ! (cd "$ROOT" && cargo build --release --locked -p perplexity-agent -p fake-perplexity); then
    log "release build failed: nothing to benchmark"
    exit 1
fi
OURS="$CARGO_TARGET_DIR/release/perplexity-agent"
FAKE="$CARGO_TARGET_DIR/release/fake-perplexity"

# ---- Python peer: perplexity-agent-mcp from PyPI into a venv ------------------------
PY_ARGS=()
PY_VENV="$WORK/venv"
py_installed() {
    [ -x "$PY_VENV/bin/perplexity-agent-mcp" ] &&
        "$PY_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('perplexity-agent-mcp') != '$PY_PEER_VERSION')" 2>/dev/null
}
if ! py_installed; then
    log "installing perplexity-agent-mcp==$PY_PEER_VERSION into $PY_VENV"
    PY="$(command -v python3.11 || command -v python3)"
    { [ -x "$PY_VENV/bin/python" ] || "$PY" -m venv "$PY_VENV"; } >"$WORK/pip.log" 2>&1 &&
        timeout 600 "$PY_VENV/bin/pip" install --disable-pip-version-check -q \
            "perplexity-agent-mcp==$PY_PEER_VERSION" >>"$WORK/pip.log" 2>&1
fi
if py_installed; then
    PY_ARGS=(--py-venv "$PY_VENV")
else
    reason="pip install perplexity-agent-mcp==$PY_PEER_VERSION failed: $(tail -n 1 "$WORK/pip.log" 2>/dev/null | tr -d '\n' | cut -c1-200)"
    log "$reason"
    PY_ARGS=(--py-unavailable "$reason")
fi

# ---- Node peer: @perplexity-ai/mcp-server from npm ----------------------------------
# shellcheck source=bench/node_peer.sh
. "$HERE/node_peer.sh"

# ---- run ----------------------------------------------------------------------------
log "running bench/bench.py"
PYTHON="$(command -v python3.11 || command -v python3)"
"$PYTHON" "$HERE/bench.py" --ours "$OURS" --fake "$FAKE" \
    "${PY_ARGS[@]}" "${NODE_ARGS[@]}" --out "$WORK" "$@"
rc=$?
if [ "$rc" -ne 0 ]; then
    log "bench.py failed (exit $rc)"
    exit "$rc"
fi
log "report written to bench/.work/results.md (raw data: bench/.work/results.json)"
exit 0
