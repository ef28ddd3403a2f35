#!/usr/bin/env bash
# MCP Inspector CLI (@modelcontextprotocol/inspector 2.12.0) against our stdio binary:
# the commands of mcp-protocol.md §13.8 (legacy/modern/auto tools/list, the bogus-argument
# call, the malformed-id call) plus a loopback "live" call against fake-perplexity.
#
# Needs Node >= 22. Installs node@22 from npm into $INTEROP_HOME/node and the Inspector
# into $INTEROP_HOME/inspector (both idempotent). If either install fails, prints a SKIP
# message and exits 0.
#
# Usage: bash tests/interop/inspector.sh      (binaries must be built; run.sh does that)
# Env:   INTEROP_HOME (default /var/tmp/perplexity-agent-interop), CARGO_TARGET_DIR,
#        INTEROP_OUR_BIN / INTEROP_FAKE_BIN (override binary paths), INTEROP_SUMMARY_FILE.
# Exit inspector 2.12.0 convention seen here: 0 = ok, 5 = the tool returned isError:true.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
INTEROP_HOME="${INTEROP_HOME:-/var/tmp/perplexity-agent-interop}"
TARGET="${CARGO_TARGET_DIR:-$REPO/target}"
case "$TARGET" in /*) ;; *) TARGET="$REPO/$TARGET" ;; esac
BIN="${INTEROP_OUR_BIN:-$TARGET/debug/perplexity-agent}"
FAKE_BIN="${INTEROP_FAKE_BIN:-$TARGET/debug/fake-perplexity}"
PY="${INTEROP_PYTHON:-python3}"
INSPECTOR_DIR="$INTEROP_HOME/inspector"
INSPECTOR_VERSION="2.12.0"
KEY="pplx-interop-dummy"

skip() {
  echo "SKIP inspector checks: $*"
  echo "[inspector] 0 passed, 0 failed (skipped)"
  exit 0
}

[ -x "$BIN" ] || { echo "inspector.sh: $BIN not built (run tests/interop/run.sh)"; exit 1; }
[ -x "$FAKE_BIN" ] || { echo "inspector.sh: $FAKE_BIN not built (run tests/interop/run.sh)"; exit 1; }

# --- Node 22 and the Inspector, from the npm registry -------------------------------
source "$HERE/npm.sh"
ensure_node22
ensure_npm_package "$INSPECTOR_DIR" "@modelcontextprotocol/inspector" "$INSPECTOR_VERSION"
installed_version() { npm_installed_version "$INSPECTOR_DIR" "@modelcontextprotocol/inspector"; }
INSPECTOR="$INSPECTOR_DIR/node_modules/.bin/inspector"
echo "node $(node --version), inspector $(installed_version)"

# The Inspector keeps a catalog and client config under HOME: give it its own.
export HOME="$INTEROP_HOME/home"
mkdir -p "$HOME"
TMP="$(mktemp -d)"

# --- a loopback fake upstream for the live calls -----------------------------------------
"$FAKE_BIN" --port 0 >"$TMP/fake.out" 2>/dev/null &
FAKE_PID=$!
cleanup() { kill "$FAKE_PID" 2>/dev/null; wait "$FAKE_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
for _ in $(seq 1 100); do [ -s "$TMP/fake.out" ] && break; sleep 0.05; done
BASE="$(head -n1 "$TMP/fake.out" | sed -n 's#^listening on \(http://127\.0\.0\.1:[0-9]*\)$#\1#p')"
[ -n "$BASE" ] || { echo "inspector.sh: fake-perplexity did not start"; exit 1; }

# A tap around our binary that copies what it writes to $TMP/wire.out, so checks can
# look at the frames themselves (the Inspector prints only part of some results).
cat >"$TMP/tap.sh" <<EOF
#!/usr/bin/env bash
"$BIN" | tee -a "$TMP/wire.out"
EOF
chmod +x "$TMP/tap.sh"

passed=0
failed=0

# run_check LABEL EXPECTED_RC PY_EXPR -- inspector args...
# PY_EXPR is evaluated with r = the parsed JSON printed on stdout (--format json -q) and
# w = the frames our binary wrote (only when the target is "$TAP"; else []).
TAP="$TMP/tap.sh"
run_check() {
  local label="$1" want_rc="$2" expr="$3"
  shift 4
  local rc=0
  : >"$TMP/wire.out"
  timeout 120 "$INSPECTOR" --cli --format json -q "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  local verdict
  verdict="$("$PY" - "$TMP/out" "$expr" "$TMP/wire.out" <<'PY'
import json, re, sys
try:
    r = json.loads(open(sys.argv[1], encoding="utf-8").read())
except Exception as exc:  # noqa: BLE001
    print(f"stdout is not one JSON object: {exc}")
    raise SystemExit(0)
w = [json.loads(l) for l in open(sys.argv[3], encoding="utf-8") if l.strip()]
try:
    ok = eval(sys.argv[2], {"re": re, "r": r, "w": w})
except Exception as exc:  # noqa: BLE001
    ok = False
    print(f"{type(exc).__name__}: {exc}")
print("OK" if ok else "")
PY
)"
  if [ "$rc" = "$want_rc" ] && [ "$(printf '%s' "$verdict" | tail -n1)" = "OK" ]; then
    passed=$((passed + 1)); echo "PASS $label"
  else
    failed=$((failed + 1)); echo "FAIL $label (exit $rc, want $want_rc) $verdict"
    echo "     stdout: $(head -c 800 "$TMP/out")"
    echo "     stderr: $(head -c 800 "$TMP/err")"
  fi
}

# The default profile: what a client launching the bare binary sees.
NAMES='[t["name"] for t in r["result"]["tools"]] == ["perplexity_agent", "perplexity_agent_result", "perplexity_agent_cancel", "perplexity_search", "fetch_url", "retrieve"]'
SI='r["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "perplexity-agent"'
BOGUS='Unknown argument(s): bogus. Accepted: domains, fresh, preset, query, recency, wait.'
MALFORMED='Malformed response_id. Expected the identifier returned by perplexity_agent.'
TEXT='r["result"]["content"][0]["text"]'
SPOT='re.fullmatch(r"<untrusted-web-content-([0-9a-f]{16})>\n[^\n]+\n[^\n]*UNTRUSTED DATA[^\n]*\n\nFake answer\.\n\nSources:\n\[1\] Example One \u2014 https://example\.org/one\n\[2\] Example Two \u2014 https://example\.org/two\n</untrusted-web-content-\1>(\n\nCost: [^\n]+)?", '"$TEXT"') is not None'

run_check "legacy tools/list: three tools, unshaped" 0 "$NAMES and '_meta' not in r['result'] and 'resultType' not in r['result']" \
  -- --protocol-era legacy "$BIN" --method tools/list
# On the wire: the discover probe answered, then tools/list shaped for 2026-07-28.
WIRE_MODERN_LIST='[f["id"] for f in w] == ["server-discover-probe-1", 0] and "2026-07-28" in w[0]["result"]["supportedVersions"] and w[1]["result"].get("resultType") == "complete" and w[1]["result"].get("ttlMs") == 300000 and w[1]["result"].get("cacheScope") == "private" and w[1]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "perplexity-agent"'
run_check "modern tools/list: three tools; probe answered and result shaped on the wire" 0 \
  "$NAMES and $WIRE_MODERN_LIST" \
  -- --protocol-era modern "$TAP" --method tools/list
run_check "auto tools/list: three tools; modern after the discover probe (wire)" 0 "$NAMES and $WIRE_MODERN_LIST" \
  -- --protocol-era auto "$TAP" --method tools/list
# Legacy: initialize 2025-11-25, then (Inspector sends logging/setLevel) then tools/list.
run_check "legacy handshake on the wire: 2025-11-25, logging/setLevel answered, list unshaped" 0 \
  "$NAMES and w[0]['result']['protocolVersion'] == '2025-11-25' and all('error' not in f for f in w) and 'resultType' not in w[-1]['result']" \
  -- --protocol-era legacy "$TAP" --method tools/list
run_check "legacy tools/list --strict: no schema portability errors" 0 "$NAMES" \
  -- --protocol-era legacy "$BIN" --method tools/list --strict
run_check "auto tools/call with a bogus argument: isError with the exact text" 5 \
  "r['result']['isError'] is True and $TEXT == '$BOGUS'" \
  -- --protocol-era auto "$BIN" --method tools/call --tool-name perplexity_agent --tool-args-json '{"query":"x","bogus":1}'
run_check "legacy tools/call with a bogus argument: isError with the exact text" 5 \
  "r['result']['isError'] is True and $TEXT == '$BOGUS' and '_meta' not in r['result']" \
  -- --protocol-era legacy "$BIN" --method tools/call --tool-name perplexity_agent --tool-args-json '{"query":"x","bogus":1}'
run_check "legacy tools/call with a malformed response_id: isError with the exact text" 5 \
  "r['result']['isError'] is True and $TEXT == '$MALFORMED'" \
  -- --protocol-era legacy "$BIN" --method tools/call --tool-name perplexity_agent_result --tool-arg response_id=../etc/passwd
run_check "modern tools/call with a malformed response_id: isError, shaped" 5 \
  "r['result']['isError'] is True and $TEXT == '$MALFORMED' and $SI" \
  -- --protocol-era modern "$BIN" --method tools/call --tool-name perplexity_agent_result --tool-arg response_id=../etc/passwd
run_check "modern live call against the fake: spotlighted answer with sources" 0 \
  "r['result']['isError'] is False and $SPOT and $SI" \
  -- --protocol-era modern -e "PERPLEXITY_CACHE=off" -e "PERPLEXITY_API_BASE=$BASE" -e "PERPLEXITY_API_KEY=$KEY" "$BIN" \
     --method tools/call --tool-name perplexity_agent --tool-arg "query=What is MCP?"
run_check "legacy live call against the fake: spotlighted answer with sources" 0 \
  "r['result']['isError'] is False and $SPOT" \
  -- --protocol-era legacy -e "PERPLEXITY_CACHE=off" -e "PERPLEXITY_API_BASE=$BASE" -e "PERPLEXITY_API_KEY=$KEY" "$BIN" \
     --method tools/call --tool-name perplexity_agent --tool-arg "query=What is MCP?"
run_check "legacy call without a key: isError naming PERPLEXITY_API_KEY" 5 \
  "r['result']['isError'] is True and $TEXT.startswith('PERPLEXITY_API_KEY is not set.')" \
  -- --protocol-era legacy -e "PERPLEXITY_CACHE=off" -e "PERPLEXITY_API_BASE=$BASE" "$BIN" \
     --method tools/call --tool-name perplexity_agent --tool-arg "query=What is MCP?"

# --- over Streamable HTTP: our binary as `serve --http`, the token as a header ------------
HTTP_TOKEN="inspector-http-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PERPLEXITY_CACHE=off PERPLEXITY_HTTP_AUTH_TOKEN="$HTTP_TOKEN" PERPLEXITY_API_BASE="$BASE" PERPLEXITY_API_KEY="$KEY" \
  "$BIN" serve --http --bind 127.0.0.1:0 2>"$TMP/http.err" &
HTTP_PID=$!
cleanup() { kill "$FAKE_PID" "$HTTP_PID" 2>/dev/null; wait "$FAKE_PID" "$HTTP_PID" 2>/dev/null; rm -rf "$TMP"; }
URL=""
for _ in $(seq 1 100); do
  URL="$(sed -n 's#.*MCP over HTTP on \(http://127\.0\.0\.1:[0-9]*/mcp\).*#\1#p' "$TMP/http.err" | head -n1)"
  [ -n "$URL" ] && break
  sleep 0.05
done
if [ -z "$URL" ]; then
  failed=$((failed + 1)); echo "FAIL the HTTP server did not start: $(head -c 400 "$TMP/http.err")"
else
  AUTH="Authorization: Bearer $HTTP_TOKEN"
  for era in legacy modern auto; do
    run_check "http $era tools/list: the tools" 0 "$NAMES" \
      -- "$URL" --transport http --header "$AUTH" --protocol-era "$era" --method tools/list
  done
  run_check "http modern tools/call with a bogus argument: isError with the exact text, shaped" 5 \
    "r['result']['isError'] is True and $TEXT == '$BOGUS' and $SI" \
    -- "$URL" --transport http --header "$AUTH" --protocol-era modern \
       --method tools/call --tool-name perplexity_agent --tool-args-json '{"query":"x","bogus":1}'
  run_check "http legacy live call against the fake: spotlighted answer with sources" 0 \
    "r['result']['isError'] is False and $SPOT" \
    -- "$URL" --transport http --header "$AUTH" --protocol-era legacy \
       --method tools/call --tool-name perplexity_agent --tool-arg "query=What is MCP?"
  run_check "http auto resources/templates/list: the run template" 0 \
    "r['result']['resourceTemplates'][0]['uriTemplate'] == 'perplexity://runs/{response_id}'" \
    -- "$URL" --transport http --header "$AUTH" --protocol-era auto --method resources/templates/list
  run_check "http legacy prompts/list: the prompts" 0 \
    "'research_brief' in [p['name'] for p in r['result']['prompts']]" \
    -- "$URL" --transport http --header "$AUTH" --protocol-era legacy --method prompts/list
  # Without the token the Inspector gets nothing (it exits non-zero).
  rc=0
  timeout 60 "$INSPECTOR" --cli --format json -q "$URL" --transport http --protocol-era auto \
    --method tools/list >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [ "$rc" != 0 ] && ! grep -q perplexity_agent "$TMP/out"; then
    passed=$((passed + 1)); echo "PASS http without the token: refused (exit $rc)"
  else
    failed=$((failed + 1)); echo "FAIL http without the token was served (exit $rc)"
  fi
fi

if [ -n "${INTEROP_SUMMARY_FILE:-}" ]; then
  echo "inspector $passed $failed" >>"$INTEROP_SUMMARY_FILE"
fi
echo "[inspector] $passed passed, $failed failed"
[ "$failed" -eq 0 ]
