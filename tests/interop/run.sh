#!/usr/bin/env bash
# Real-client interoperability checks for perplexity-agent.
#
#   bash tests/interop/run.sh [--with-inspector] [sdk] [differential] [tasks] [ext-tasks] [oauth] [install-url] [inspector]
#
# With no check names it runs `sdk` (sdk_client.py: the official Python SDK `mcp` 2.3.0
# in legacy/auto/2026-07-28 modes), `differential` (differential.py: the same raw
# JSON-RPC lines through our binary and the peer perplexity-agent-mcp 0.4.0), `tasks`
# (tasks_client.py: FastMCP's client with fastmcp-tasks 4.1.4 driving MCP tasks),
# `ext-tasks` (ext_tasks_client.mjs: the official requester @modelcontextprotocol/ext-tasks
# 0.2.2 on the TypeScript SDK client @modelcontextprotocol/client 2.4.0, both eras) and
# `oauth` (oauth_client.py: the Python SDK's OAuthClientProvider doing the MCP authorization
# flow against our server and a real OpenID provider, tests/oidc: oauth2-mock-server 8.2.3)
# and `install-url` (install_url.py: the entry `install cursor --url --token-env` writes,
# handed as written to the Python SDK's Streamable HTTP client against serve --http).
# `--with-inspector` (or naming `inspector`) also runs inspector.sh (MCP Inspector CLI
# 2.12.0; installs node@22 from npm; skips cleanly if that install fails).
#
# Idempotent setup:
#   - venv at ${INTEROP_HOME:-/var/tmp/perplexity-agent-interop}/venv with mcp==2.3.0,
#     perplexity-agent-mcp==0.4.0 and fastmcp-tasks==4.1.4 from PyPI (reinstalled only
#     when the versions differ; only when a Python check runs);
#   - for ext-tasks: node >= 20 (the machine's, else node@22 from npm) and the two npm
#     packages, exact versions, in $INTEROP_HOME/ext-tasks (a failed install is a failure);
#   - for oauth: tests/oidc's locked packages (`npm ci` by tests/oidc/install.sh, only when
#     the lock changed; a failed install is a failure);
#   - `cargo build -p perplexity-agent -p fake-perplexity` (debug), into $CARGO_TARGET_DIR
#     when set, else the workspace default target/ (skipped when both INTEROP_OUR_BIN and
#     INTEROP_FAKE_BIN name prebuilt binaries).
# Everything talks to 127.0.0.1 only; the API key is the dummy `pplx-interop-dummy`.
#
# Exit status: non-zero if any check failed (or a check script crashed). The last line is
# `N passed, M failed` (totals over the checks that ran).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
export INTEROP_HOME="${INTEROP_HOME:-/var/tmp/perplexity-agent-interop}"
VENV="$INTEROP_HOME/venv"
PYTHON="${PYTHON:-python3}"
EXT_TASKS_DIR="$INTEROP_HOME/ext-tasks"
EXT_TASKS_PACKAGES=("@modelcontextprotocol/ext-tasks@0.2.2" "@modelcontextprotocol/client@2.4.0")

checks=()
for arg in "$@"; do
  case "$arg" in
    --with-inspector) checks+=(inspector) ;;
    sdk|differential|tasks|ext-tasks|oauth|install-url|inspector) checks+=("$arg") ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
has() { local c; for c in "${checks[@]}"; do [ "$c" = "$1" ] && return 0; done; return 1; }
if ! has sdk && ! has differential; then
  if [ "${#checks[@]}" -eq 0 ] || { [ "${#checks[@]}" -eq 1 ] && [ "$*" = "--with-inspector" ]; }; then
    checks=(sdk differential tasks ext-tasks oauth install-url "${checks[@]}")
  fi
fi

# --- Python environment ------------------------------------------------------------------
mkdir -p "$INTEROP_HOME"
if has sdk || has differential || has tasks || has oauth || has install-url; then
  if [ ! -x "$VENV/bin/python" ]; then
    echo "creating venv $VENV"
    "$PYTHON" -m venv "$VENV" || { echo "run.sh: cannot create a venv with $PYTHON"; echo "0 passed, 1 failed"; exit 1; }
  fi
  want_versions='import importlib.metadata as m, sys
sys.exit(0 if m.version("mcp") == "2.3.0" and m.version("perplexity-agent-mcp") == "0.4.0"
         and m.version("fastmcp-tasks") == "4.1.4" else 1)'
  if ! "$VENV/bin/python" -c "$want_versions" 2>/dev/null; then
    echo "installing mcp==2.3.0, perplexity-agent-mcp==0.4.0 and fastmcp-tasks==4.1.4 into $VENV"
    "$VENV/bin/python" -m pip install --disable-pip-version-check -q 'mcp==2.3.0' 'perplexity-agent-mcp==0.4.0' \
      'fastmcp-tasks==4.1.4' \
      || { echo "run.sh: pip install failed"; echo "0 passed, 1 failed"; exit 1; }
  fi
fi

# --- binaries ----------------------------------------------------------------------------
if [ -n "${INTEROP_OUR_BIN:-}" ] && [ -n "${INTEROP_FAKE_BIN:-}" ]; then
  echo "using INTEROP_OUR_BIN=$INTEROP_OUR_BIN and INTEROP_FAKE_BIN=$INTEROP_FAKE_BIN (no build)"
else
  echo "building perplexity-agent and fake-perplexity (debug${CARGO_TARGET_DIR:+, CARGO_TARGET_DIR=$CARGO_TARGET_DIR})"
  ( cd "$REPO" && cargo build -q -p perplexity-agent -p fake-perplexity ) \
    || { echo "run.sh: cargo build failed"; echo "0 passed, 1 failed"; exit 1; }
fi

# --- checks ------------------------------------------------------------------------------
SUMMARY="$(mktemp)"
trap 'rm -f "$SUMMARY"' EXIT
export INTEROP_SUMMARY_FILE="$SUMMARY"
crashed=0
run_one() {
  local name="$1"; shift
  echo
  echo "=== $name ==="
  local before after rc=0
  before="$(grep -c "^$name " "$SUMMARY" || true)"
  "$@" || rc=$?
  after="$(grep -c "^$name " "$SUMMARY" || true)"
  if [ "$after" = "$before" ]; then
    echo "run.sh: $name exited $rc without a summary (counted as one failure)"
    crashed=$((crashed + 1))
  elif [ "$rc" -ne 0 ] && [ "$(grep "^$name " "$SUMMARY" | tail -n1 | awk '{print $3}')" = "0" ]; then
    echo "run.sh: $name exited $rc with no failed check (counted as one failure)"
    crashed=$((crashed + 1))
  fi
}

# The official ext-tasks requester (Node). Its setup runs here, in a subshell, so that a
# failed install is one failed check (npm.sh calls `skip` with the reason).
ext_tasks() (
  skip() {
    echo "ext-tasks: setup failed: $*"
    echo "ext_tasks_client 0 1" >>"$INTEROP_SUMMARY_FILE"
    echo "ext-tasks: 0 passed, 1 failed"
    exit 1
  }
  source "$HERE/npm.sh"
  ensure_node 20
  ensure_npm_packages "$EXT_TASKS_DIR" "${EXT_TASKS_PACKAGES[@]}"
  EXT_TASKS_NODE_MODULES="$EXT_TASKS_DIR/node_modules" exec node "$HERE/ext_tasks_client.mjs"
)

# The Python SDK's OAuth client against our server and the OpenID provider (tests/oidc).
oauth_client() (
  skip() {
    echo "oauth: setup failed: $*"
    echo "oauth_client 0 1" >>"$INTEROP_SUMMARY_FILE"
    echo "oauth: 0 passed, 1 failed"
    exit 1
  }
  source "$HERE/npm.sh"
  ensure_node 20
  bash "$REPO/tests/oidc/install.sh" || skip "npm ci in tests/oidc failed"
  exec "$VENV/bin/python" "$HERE/oauth_client.py"
)

cd "$HERE"
for c in "${checks[@]}"; do
  case "$c" in
    sdk) run_one sdk_client "$VENV/bin/python" "$HERE/sdk_client.py" ;;
    differential) run_one differential "$VENV/bin/python" "$HERE/differential.py" ;;
    tasks) run_one tasks_client "$VENV/bin/python" "$HERE/tasks_client.py" ;;
    ext-tasks) run_one ext_tasks_client ext_tasks ;;
    oauth) run_one oauth_client oauth_client ;;
    install-url) run_one install_url "$VENV/bin/python" "$HERE/install_url.py" ;;
    inspector) run_one inspector bash "$HERE/inspector.sh" ;;
  esac
done

passed="$(awk '{s += $2} END {print s + 0}' "$SUMMARY")"
failed="$(awk '{s += $3} END {print s + 0}' "$SUMMARY")"
failed=$((failed + crashed))
echo
while read -r name p f; do echo "  $name: $p passed, $f failed"; done <"$SUMMARY"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
