#!/usr/bin/env bash
# The contract suite: Perplexity's official Python SDK `perplexityai` 0.46.1 as the
# executable wire contract, against what perplexity-agent sends and what the fake answers.
#
#   bash tests/contract/run.sh [selftest] [product] [fake]
#
# With no part names it runs all three (contract.py):
#   selftest  the strict adapters reject known-bad shapes (the suite can fail);
#   product   the real binary over MCP stdio (every tool, a hand-made spread plus calls derived
#             from each tool's published inputSchema) and as a CLI, against the fake; every
#             request that reached the fake is validated strictly against the SDK's request types;
#   fake      every answer and SSE frame of the fake (scenario matrix, cancel, search, models,
#             faults, the official client itself) and the copied fixtures against the SDK's
#             response models.
#
# Idempotent setup:
#   - venv at ${CONTRACT_HOME:-/var/tmp/perplexity-agent-contract}/venv with perplexityai==0.46.1
#     and pydantic==2.14.4 from PyPI (reinstalled only when the versions differ);
#   - `cargo build -q -p perplexity-agent -p fake-perplexity` (debug), into $CARGO_TARGET_DIR
#     when set, else the workspace default target/.
# Everything talks to 127.0.0.1 only; the API key is the dummy `pplx-contract-dummy`; no real
# API is ever called.
#
# Exit status: non-zero if any check failed (or the suite crashed, or ran no check). The last
# line is `N passed, M failed`.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
export CONTRACT_HOME="${CONTRACT_HOME:-/var/tmp/perplexity-agent-contract}"
VENV="$CONTRACT_HOME/venv"
PYTHON="${PYTHON:-python3}"
SDK_PIN="perplexityai==0.46.1"
PYDANTIC_PIN="pydantic==2.14.4"

parts=()
for arg in "$@"; do
  case "$arg" in
    selftest|product|fake) parts+=("$arg") ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

# --- Python environment ------------------------------------------------------------------
mkdir -p "$CONTRACT_HOME"
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating venv $VENV"
  "$PYTHON" -m venv "$VENV" || { echo "run.sh: cannot create a venv with $PYTHON"; echo "0 passed, 1 failed"; exit 1; }
fi
want_versions='import importlib.metadata as m, sys
sys.exit(0 if m.version("perplexityai") == "0.46.1" and m.version("pydantic") == "2.14.4" else 1)'
if ! "$VENV/bin/python" -c "$want_versions" 2>/dev/null; then
  echo "installing $SDK_PIN and $PYDANTIC_PIN into $VENV"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q "$SDK_PIN" "$PYDANTIC_PIN" \
    || { echo "run.sh: pip install failed"; echo "0 passed, 1 failed"; exit 1; }
fi

# --- binaries ----------------------------------------------------------------------------
# The Node SDK's types (tests/contract/node: @perplexity-ai/perplexity_ai and typescript,
# exact versions from its lock file; npm ci only when the lock changed).
bash "$REPO/tests/npm-ci.sh" "$HERE/node" \
  || { echo "run.sh: npm ci in tests/contract/node failed"; echo "0 passed, 1 failed"; exit 1; }

echo "building perplexity-agent and fake-perplexity (debug${CARGO_TARGET_DIR:+, CARGO_TARGET_DIR=$CARGO_TARGET_DIR})"
( cd "$REPO" && cargo build -q -p perplexity-agent -p fake-perplexity ) \
  || { echo "run.sh: cargo build failed"; echo "0 passed, 1 failed"; exit 1; }

# --- the suite ---------------------------------------------------------------------------
cd "$HERE"
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" "$HERE/contract.py" ${parts[@]+"${parts[@]}"} 2>&1 | tee "$OUT"
rc=${PIPESTATUS[0]}
last="$(tail -n1 "$OUT")"
if ! [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
  echo "run.sh: the suite crashed (exit $rc) without its summary"
  echo "0 passed, 1 failed"
  exit 1
fi
if [ "${BASH_REMATCH[1]}" -eq 0 ]; then
  echo "run.sh: no check ran"
  echo "0 passed, 1 failed"
  exit 1
fi
if [ "$rc" -eq 0 ] && [ "${BASH_REMATCH[2]}" -ne 0 ]; then rc=1; fi
exit "$rc"
