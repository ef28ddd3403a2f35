#!/usr/bin/env bash
# The official MCP conformance suite against `perplexity-agent serve --http`, or against
# the conformance fixture (crates/conformance-fixture: the suite's test_* tools,
# resources and prompts served on the same HTTP layers).
#
#   bash tests/conformance/run.sh [--update-baseline] [--print-baseline] [path-to-binary]
#   bash tests/conformance/run.sh --fixture [path-to-fixture] [--update-baseline] [--print-baseline]
#
# Default binary: ${CARGO_TARGET_DIR:-target}/debug/perplexity-agent, or with --fixture
# ${CARGO_TARGET_DIR:-target}/debug/conformance-fixture (relative paths are taken from the
# repository root). Nothing is built here: build the binary first.
#
# What it does:
#   1. installs, once, Node 22 (npm package node@22) and @modelcontextprotocol/conformance
#      0.2.0-alpha.12 into ${CONFORMANCE_CACHE:-$HOME/.cache/perplexity-agent-conformance}
#      (npm registry only; skipped when the installed versions already match);
#   2. checks both baselines (tests/conformance/baseline-<set>.yml, or with --fixture
#      fixture-baseline-<set>.yml) against the scenario lists of their sets, and
#      self-tests auth_proxy.py;
#   3. starts the server on a free loopback port with a random bearer token (never
#      printed), a dead Perplexity API base and a dummy key, waits for GET /healthz, checks
#      that /mcp refuses a request without the token, and starts auth_proxy.py in front;
#   4. runs the frozen requirement sets 2025-11-25 and 2026-07-28 through the proxy, each
#      with --expected-failures <its baseline>, and prints one summary line per set (with
#      --fixture, then also the tasks extension's scenarios, see below);
#   5. kills the server and the proxy on exit.
#
# --fixture [path]   test the conformance fixture instead of the product, against the
#                    fixture baselines (the fixture proves the transport loses no protocol
#                    feature; the product run proves what the product itself serves). Also
#                    runs the ten `tasks-*` [extension] scenarios (SEP-2663, which no set
#                    scores), one --scenario run each, against fixture-baseline-tasks.yml,
#                    as a third set "tasks (extension)". The product run skips them (it has
#                    no greet, slow_compute, ... fixtures).
# --update-baseline  run the sets without --expected-failures and rewrite both baseline
#                    files to match the results (reasons of kept entries are kept, new
#                    entries get a "TODO" reason to fill in); exits 0 unless the run broke.
# --print-baseline   always print each set's failing ids in baseline format (they are
#                    printed anyway when a set does not match its baseline).
#
# Env: CONFORMANCE_CACHE (install dir), CONFORMANCE_OUT (results dir; default a new
# mktemp dir, kept and printed), CONFORMANCE_TIMEOUT_MS (per scenario, default 30000).
# Exit: 0 when every set matches its baseline exactly; 1 when a set does not; 2 when the
# harness could not run (install, server start, proxy). The last line is
# `conformance: N passed, M failed` counting requirement sets (and, with --fixture, the
# tasks extension as one more).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
suite_version="0.2.0-alpha.12"
node_major="22"
sets=(2025-11-25 2026-07-28)

update=0
print_baseline=0
fixture=0
bin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --update-baseline) update=1 ;;
    --print-baseline) print_baseline=1 ;;
    --fixture)
      fixture=1
      # An optional path right after it.
      if [[ $# -gt 1 && "$2" != -* ]]; then
        [[ -z "$bin" ]] || { echo "run.sh: one binary path only" >&2; exit 2; }
        bin="$2"; shift
      fi ;;
    -h|--help) sed -n '2,46p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) [[ -z "$bin" ]] || { echo "run.sh: one binary path only" >&2; exit 2; }; bin="$1" ;;
  esac
  shift
done

# The tasks extension's scenarios (fixture only): their results dir under $out, the name
# results.py reports them under, their baseline.
tasks_dir="tasks"
tasks_set="tasks (extension)"
tasks_baseline="$here/fixture-baseline-tasks.yml"
set_count=$(( ${#sets[@]} + fixture ))

die() { echo "run.sh: $*" >&2; echo "conformance: 0 passed, $set_count failed"; exit 2; }

if [[ "$fixture" -eq 1 ]]; then
  package="conformance-fixture"
  baseline_prefix="fixture-baseline"
else
  package="perplexity-agent"
  baseline_prefix="baseline"
fi
baseline_of() { echo "$here/$baseline_prefix-$1.yml"; }
if [[ -z "$bin" ]]; then
  target="${CARGO_TARGET_DIR:-target}"
  [[ "$target" == /* ]] || target="$repo/$target"
  bin="$target/debug/$package"
fi
[[ -x "$bin" ]] || die "no executable at $bin (build it first, e.g. cargo build -p $package)"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
command -v python3 >/dev/null || die "python3 is needed"

# --- 1. Node 22 and the suite, installed once ---------------------------------------------
cache="${CONFORMANCE_CACHE:-$HOME/.cache/perplexity-agent-conformance}"
node_dir="$cache/node"
suite_dir="$cache/suite"
node="$node_dir/node_modules/node/bin/node"
suite_pkg="$suite_dir/node_modules/@modelcontextprotocol/conformance"
mkdir -p "$cache"

node_ok() { [[ "$("$node" --version 2>/dev/null || true)" == "v$node_major."* ]]; }
suite_ok() {
  node_ok && [[ "$("$node" -p "require(process.argv[1]).version" "$suite_pkg/package.json" 2>/dev/null)" == "$suite_version" ]]
}
npm_install() {  # dir package
  mkdir -p "$1"
  [[ -f "$1/package.json" ]] || printf '{"name":"perplexity-agent-conformance-%s","private":true}\n' "$(basename "$1")" >"$1/package.json"
  (cd "$1" && npm install --no-audit --no-fund --loglevel=error "$2" >/dev/null)
}
install_tools() {
  if ! node_ok; then
    command -v npm >/dev/null || die "npm is needed to install node@$node_major"
    echo "installing node@$node_major into $node_dir"
    npm_install "$node_dir" "node@$node_major" || die "npm install node@$node_major failed"
    node_ok || die "node@$node_major installed no working node at $node"
  fi
  if ! suite_ok; then
    command -v npm >/dev/null || die "npm is needed to install the conformance suite"
    echo "installing @modelcontextprotocol/conformance@$suite_version into $suite_dir"
    # The suite's own postinstall steps need Node 22 too.
    PATH="$(dirname "$node"):$PATH" npm_install "$suite_dir" "@modelcontextprotocol/conformance@$suite_version" \
      || die "npm install @modelcontextprotocol/conformance@$suite_version failed"
    suite_ok || die "the suite did not install at version $suite_version"
  fi
}
if command -v flock >/dev/null; then
  exec 9>"$cache/.install.lock"
  flock 9
  install_tools
  flock -u 9
  exec 9>&-
else
  install_tools
fi
node_bin_dir="$(dirname "$node")"
export PATH="$node_bin_dir:$PATH"
conformance() { "$node" "$suite_pkg/dist/index.js" "$@"; }
echo "node $("$node" --version), @modelcontextprotocol/conformance $(conformance --version)"

# --- 2. baselines and the proxy ---------------------------------------------------------
out="${CONFORMANCE_OUT:-}"
if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/perplexity-agent-conformance.XXXXXX")"
else
  mkdir -p "$out"
  for s in "${sets[@]}" "$tasks_dir"; do rm -rf "${out:?}/$s"; done
fi
echo "results in $out"

for s in "${sets[@]}"; do
  conformance list --server --requirements "$s" >"$out/scenarios-$s.txt" || die "conformance list --requirements $s failed"
  if [[ "$update" -eq 0 ]]; then
    python3 "$here/results.py" check --set "$s" --scored "$out/scenarios-$s.txt" --baseline "$(baseline_of "$s")" \
      || die "$baseline_prefix-$s.yml is not valid (fix it, or rewrite it with --update-baseline)"
  fi
done
tasks_scenarios=()
if [[ "$fixture" -eq 1 ]]; then
  # The extension's scenarios as results.py reads a set's list: `  - name` lines under
  # "Server scenarios".
  conformance list --server >"$out/scenarios-all.txt" || die "conformance list --server failed"
  mapfile -t tasks_scenarios < <(sed -n 's/^  - \(tasks-[a-z0-9-]*\) \[extension\]$/\1/p' "$out/scenarios-all.txt")
  [[ "${#tasks_scenarios[@]}" -gt 0 ]] || die "conformance list --server names no tasks-* [extension] scenario"
  { echo "Server scenarios (the tasks extension, io.modelcontextprotocol/tasks):"
    printf '  - %s\n' "${tasks_scenarios[@]}"; } >"$out/scenarios-$tasks_dir.txt"
  if [[ "$update" -eq 0 ]]; then
    python3 "$here/results.py" check --set "$tasks_set" --scored "$out/scenarios-$tasks_dir.txt" --baseline "$tasks_baseline" \
      || die "$(basename "$tasks_baseline") is not valid (fix it, or rewrite it with --update-baseline)"
  fi
fi

if ! python3 "$here/test_auth_proxy.py" >"$out/proxy-selftest.txt" 2>&1; then
  cat "$out/proxy-selftest.txt" >&2
  die "auth_proxy.py failed its self-test"
fi
echo "auth_proxy.py self-test: OK"

# --- 3. server and proxy ----------------------------------------------------------------
token="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
server_pid=""
proxy_pid=""
suite_pid=""
cleanup() {
  local pid
  for pid in "$suite_pid" "$proxy_pid" "$server_pid"; do
    [[ -n "$pid" ]] || continue
    kill "$pid" 2>/dev/null || true
  done
  for pid in "$suite_pid" "$proxy_pid" "$server_pid"; do
    [[ -n "$pid" ]] || continue
    # Give each a moment, then insist.
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
http_status() {  # method url -> HTTP status, or 000 when nothing answers
  python3 - "$1" "$2" <<'EOF'
import sys, urllib.error, urllib.request
req = urllib.request.Request(sys.argv[2], method=sys.argv[1],
                             data=b"{}" if sys.argv[1] == "POST" else None,
                             headers={"Content-Type": "application/json",
                                      "Accept": "application/json, text/event-stream"})
try:
    with urllib.request.urlopen(req, timeout=2) as r:
        print(r.status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")
EOF
}
show_log() {  # file: its last lines, with the token masked in case anything echoed it
  local line
  tail -n 40 "$1" | while IFS= read -r line || [[ -n "$line" ]]; do printf '    %s\n' "${line//"$token"/<token>}"; done
}

server_port=""
for attempt in 1 2 3; do
  port="$(free_port)"
  if [[ "$fixture" -eq 1 ]]; then
    serve=("$bin" --bind "127.0.0.1:$port")
  else
    serve=("$bin" serve --http --bind "127.0.0.1:$port")
  fi
  PERPLEXITY_HTTP_AUTH_TOKEN="$token" \
  PERPLEXITY_API_BASE="http://127.0.0.1:9" \
  PERPLEXITY_API_KEY="pplx-conformance-dummy" \
    "${serve[@]}" >"$out/server.stdout" 2>"$out/server.stderr" </dev/null &
  server_pid=$!
  for _ in $(seq 1 150); do  # up to ~30 s
    kill -0 "$server_pid" 2>/dev/null || break
    [[ "$(http_status GET "http://127.0.0.1:$port/healthz")" == "200" ]] && { server_port="$port"; break; }
    sleep 0.2
  done
  [[ -n "$server_port" ]] && break
  echo "server did not come up on 127.0.0.1:$port (attempt $attempt); its stderr:" >&2
  show_log "$out/server.stderr" >&2
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
done
[[ -n "$server_port" ]] || die "the server never answered GET /healthz with 200"
echo "server up ($package): 127.0.0.1:$server_port (pid $server_pid)"

# The server must refuse /mcp without the token; otherwise the proxy proves nothing.
unauth="$(http_status POST "http://127.0.0.1:$server_port/mcp")"
case "$unauth" in
  401) echo "unauthenticated POST /mcp: 401 (as it must be)" ;;
  2*) die "the server answered an unauthenticated POST /mcp with $unauth: its auth is off" ;;
  *) echo "warning: unauthenticated POST /mcp answered $unauth, not 401" >&2 ;;
esac

AUTH_PROXY_TOKEN="$token" python3 "$here/auth_proxy.py" "http://127.0.0.1:$server_port" \
  >"$out/proxy.stdout" 2>"$out/proxy.stderr" </dev/null &
proxy_pid=$!
proxy_url=""
for _ in $(seq 1 100); do
  proxy_url="$(sed -n 's#^listening on \(http://127\.0\.0\.1:[0-9]*\)$#\1#p' "$out/proxy.stdout")"
  [[ -n "$proxy_url" ]] && break
  kill -0 "$proxy_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$proxy_url" ]] || { show_log "$out/proxy.stderr" >&2; die "auth_proxy.py did not start"; }
[[ "$(http_status GET "$proxy_url/healthz")" == "200" ]] || die "GET /healthz through the proxy failed"
echo "auth proxy up: $proxy_url -> 127.0.0.1:$server_port (pid $proxy_pid)"

# --- 4. the requirement sets (and, with --fixture, the tasks extension) ---------------
passed=0
failed=0
summaries=()

# The suite with these arguments, its console appended to $1; its exit code. In the
# background and waited for, so that a signal to run.sh is handled at once (the EXIT trap
# then ends the suite too).
run_suite() {  # console args...
  local console="$1" rc=0
  shift
  (cd "$out" && exec "$node" "$suite_pkg/dist/index.js" "$@") >>"$console" 2>&1 </dev/null &
  suite_pid=$!
  wait "$suite_pid" || rc=$?
  suite_pid=""
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "the server died during a run ($*); its stderr:" >&2
    show_log "$out/server.stderr" >&2
  fi
  return "$rc"
}

# The suite's own verdict in a console (its baseline comparison), else the console's end.
show_verdict() {  # console
  local text verdict='^\(Stale baseline entries\|Unexpected failures (not\)'
  text="$(sed 's/\x1b\[[0-9;]*m//g' "$1")"
  if grep -q "$verdict" <<<"$text"; then
    sed -n "/$verdict/,\$p" <<<"$text" | sed 's/^/  /'
  else
    tail -n 30 <<<"$text" | sed 's/^/  /'
  fi
}

# Compares (or, with --update-baseline, rewrites) one set's results with its baseline,
# prints the report and the summary line, and counts the set as passed or failed. On a
# mismatch, the suite's verdict is shown from each console given.
report_set() {  # name scenario-list baseline results-dir suite-rc [console...]
  local name="$1" list="$2" baseline="$3" dir="$4" rc="$5" set_rc=0 line console
  shift 5
  local common=(--set "$name" --scored "$list" --baseline "$baseline" --results "$dir")
  if [[ "$update" -eq 1 ]]; then
    python3 "$here/results.py" update "${common[@]}" || set_rc=$?
    # Against the baseline just written, the report fails only if the run was broken
    # (e.g. a scenario left no result).
    python3 "$here/results.py" report "${common[@]}" --write-suggested "$dir/baseline-suggested.yml" \
      >"$dir/report.txt" || set_rc=1
    grep '^  \(passed\|failed\|skipped\|not scored\|no result\)' "$dir/report.txt" || true
  else
    local report_args=(report "${common[@]}" --suite-rc "$rc" --write-suggested "$dir/baseline-suggested.yml")
    [[ "$print_baseline" -eq 0 ]] || report_args+=(--print-suggested)
    python3 "$here/results.py" "${report_args[@]}" >"$dir/report.txt" || set_rc=$?
    grep -v '^conformance ' "$dir/report.txt" || true
    if [[ "$set_rc" -ne 0 ]]; then
      for console in "$@"; do
        echo "  -- the suite's own verdict (all of it in $console) --"
        show_verdict "$console"
      done
    fi
  fi
  line="$(grep '^conformance ' "$dir/report.txt" | tail -n 1 || true)"
  [[ -n "$line" ]] || line="conformance $name: FAILED (no report)"
  echo "$line"
  summaries+=("$line")
  if [[ "$set_rc" -eq 0 ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

timeout_ms="${CONFORMANCE_TIMEOUT_MS:-30000}"
for s in "${sets[@]}"; do
  dir="$out/$s"
  mkdir -p "$dir"
  args=(server --url "$proxy_url/mcp" --requirements "$s" -o "$dir" --timeout "$timeout_ms")
  [[ "$update" -eq 1 ]] || args+=(--expected-failures "$(baseline_of "$s")")
  echo
  echo "=== requirement set $s ==="
  rc=0
  run_suite "$dir/console.txt" "${args[@]}" || rc=$?
  report_set "$s" "$out/scenarios-$s.txt" "$(baseline_of "$s")" "$dir" "$rc" "$dir/console.txt"
done

if [[ "$fixture" -eq 1 ]]; then
  # Scored by no requirement set (the 2026-07-28 run reports them, unscored), so each is
  # run on its own, on the same server, against its own baseline; the set's verdict is
  # the worst of the runs'.
  dir="$out/$tasks_dir"
  mkdir -p "$dir"
  echo
  echo "=== $tasks_set: ${#tasks_scenarios[@]} scenarios, one run each ==="
  rc=0
  mismatched=()
  for scenario in "${tasks_scenarios[@]}"; do
    args=(server --url "$proxy_url/mcp" --scenario "$scenario" -o "$dir" --timeout "$timeout_ms")
    [[ "$update" -eq 1 ]] || args+=(--expected-failures "$tasks_baseline")
    run_rc=0
    run_suite "$dir/console-$scenario.txt" "${args[@]}" || run_rc=$?
    if [[ "$run_rc" -ne 0 ]]; then
      rc="$run_rc"
      mismatched+=("$dir/console-$scenario.txt")
    fi
  done
  report_set "$tasks_set" "$out/scenarios-$tasks_dir.txt" "$tasks_baseline" "$dir" "$rc" \
    ${mismatched[@]+"${mismatched[@]}"}
fi

echo
for line in "${summaries[@]}"; do echo "$line"; done
if [[ "$update" -eq 1 ]]; then
  echo "baselines rewritten: review the TODO reasons, then git diff tests/conformance/"
fi
echo "conformance: $passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
