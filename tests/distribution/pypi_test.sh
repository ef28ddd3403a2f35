#!/usr/bin/env bash
# The PyPI wheel: `uvx perplexity-agent` and the `llm` plugin, installed as users would.
#
#   tests/distribution/pypi_test.sh release|dev|WHEEL
#
# release/dev build the wheel with packaging/pypi/build.sh from $CARGO_TARGET_DIR's
# build of that profile (and check its binary is that build, byte for byte: maturin
# reused it); WHEEL tests a wheel built before. Then:
# - the wheel: the binary as a script, the llm entry point, Cargo's version, the README
#   as its description, no run-time dependencies;
# - pip into a fresh venv, and `uv tool run --from WHEEL` (uv pinned, offline: the wheel
#   needs nothing else): `--version` and both MCP eras over stdio through each;
# - llm (pinned) into the same venv: the plugin is listed; against the fake upstream
#   `llm -m perplexity-agent` prints the answer on stdout and progress on stderr, passes
#   preset/recency/domains/spotlight/timeout to `ask`, takes the key from `llm keys` or
#   PERPLEXITY_API_KEY (never argv), and a run that outlasts -o timeout ends with how to
#   collect it;
# - broken input: a wheel without the binary fails with a message saying so.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ $# -eq 1 ] || { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
UV_VERSION=0.13.8
LLM_VERSION=0.36
version="$(pack_version)"
target="${CARGO_TARGET_DIR:-$PACK_REPO/target}"

case "$1" in
  release|dev)
    t0=$SECONDS
    flag=(); [ "$1" = dev ] && flag=(--dev)
    wheel="$(bash "$PACK_REPO/packaging/pypi/build.sh" "${flag[@]}" "$T/dist" 2>"$T/build.log")" \
      || { cat "$T/build.log"; pack_die "packaging/pypi/build.sh failed"; }
    echo "     (wheel build: $((SECONDS - t0))s; $(grep -m1 'Finished' "$T/build.log" | sed 's/^ *//'))"
    profile_dir="$target/$([ "$1" = dev ] && echo debug || echo release)"
    check "the wheel's binary is $profile_dir/perplexity-agent (maturin reused the build)" \
      bash -c 'python3 -c "import sys,zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))" "$1" "$2" | cmp - "$3"' \
      _ "$wheel" "perplexity_agent-$version.data/scripts/perplexity-agent" "$profile_dir/perplexity-agent"
    # --strip (what a release ships): the same binary without its symbols, RECORD still
    # true (pip checks it), and it runs.
    stripped_wheel() {
      local w v="$T/strip-venv"
      w="$(bash "$PACK_REPO/packaging/pypi/build.sh" "${flag[@]}" --strip "$T/dist-strip" 2>"$T/strip.log")" || { cat "$T/strip.log"; return 1; }
      python3 -c "import sys,zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))" \
        "$w" "perplexity_agent-$version.data/scripts/perplexity-agent" >"$T/stripped-bin"
      if readelf -S "$T/stripped-bin" | grep -q '\.symtab'; then echo "the binary still has .symtab"; return 1; fi
      echo "stripped: $(wc -c <"$T/stripped-bin") bytes, built: $(wc -c <"$profile_dir/perplexity-agent") bytes"
      "$PACK_PYTHON" -m venv "$v" && "$v/bin/pip" install --disable-pip-version-check -q --no-index "$w" \
        && [ "$("$v/bin/perplexity-agent" --version)" = "perplexity-agent $version" ]
    }
    check "build.sh --strip: the binary without symbols, installable, runs" stripped_wheel
    ;;
  *) wheel="$(realpath "$1")"; [ -f "$wheel" ] || pack_die "no wheel at $1" ;;
esac

check "wheel: binary script, llm entry point, version $version, README description, no dependencies" python3 - "$wheel" "$version" <<'EOF'
import sys, zipfile
w, v = zipfile.ZipFile(sys.argv[1]), sys.argv[2]
info = w.getinfo(f"perplexity_agent-{v}.data/scripts/perplexity-agent")
assert (info.external_attr >> 16) & 0o111, "the binary is not executable"
assert "perplexity_agent_llm/__init__.py" in w.namelist()
ep = w.read(f"perplexity_agent-{v}.dist-info/entry_points.txt").decode()
assert "[llm]" in ep and "perplexity_agent=perplexity_agent_llm" in ep.replace(" ", ""), ep
meta = w.read(f"perplexity_agent-{v}.dist-info/METADATA").decode()
assert f"\nVersion: {v}\n" in meta, "METADATA version"
assert "Description-Content-Type: text/markdown" in meta and "\n# perplexity-agent\n" in meta, "README is not the description"
deps = [l for l in meta.splitlines() if l.startswith("Requires-Dist:") and "extra ==" not in l]
assert not deps, deps
EOF

# --- pip into a fresh venv ---------------------------------------------------------------
venv="$T/venv"
"$PACK_PYTHON" -m venv "$venv"
t0=$SECONDS
check "pip install the wheel into a fresh venv" "$venv/bin/pip" install --disable-pip-version-check -q --no-index "$wheel"
echo "     (pip install: $((SECONDS - t0))s)"
check "venv: perplexity-agent --version" bash -c '[ "$("$1" --version)" = "perplexity-agent $2" ]' _ "$venv/bin/perplexity-agent" "$version"
check "venv: both eras through the installed script" python3 "$DIST_HERE/handshake.py" -- "$venv/bin/perplexity-agent"

# --- uv / uvx ----------------------------------------------------------------------------
uv="$(pack_venv uv "uv==$UV_VERSION")/bin/uv"
export UV_CACHE_DIR="$T/uv-cache" UV_TOOL_DIR="$T/uv-tools" UV_OFFLINE=1 UV_PYTHON_DOWNLOADS=never UV_NO_CONFIG=1
t0=$SECONDS
check "uv tool run --from WHEEL perplexity-agent --version (offline)" \
  bash -c '[ "$("$1" tool run --from "$2" perplexity-agent --version)" = "perplexity-agent $3" ]' _ "$uv" "$wheel" "$version"
echo "     (uv tool run, cold cache: $((SECONDS - t0))s)"
t0=$SECONDS
check "uvx --from WHEEL: both eras" python3 "$DIST_HERE/handshake.py" \
  --env "UV_CACHE_DIR=$UV_CACHE_DIR" --env "UV_TOOL_DIR=$UV_TOOL_DIR" --env UV_OFFLINE=1 --env UV_PYTHON_DOWNLOADS=never \
  -- "$uv" tool run --from "$wheel" perplexity-agent
echo "     (two uvx starts, warm cache: $((SECONDS - t0))s)"
# Run through uvx, install writes uvx (found beside the uv that started it), not the
# cache path the binary ran from.
install_via_uvx() {
  local out
  out="$("$uv" tool run --from "$wheel" perplexity-agent install claude-desktop --print 2>"$T/uvx-install.err")" \
    || { cat "$T/uvx-install.err"; return 1; }
  python3 - "$out" "$version" <<'PY'
import json, os, sys
entry = json.loads(sys.argv[1])["mcpServers"]["perplexity-agent"]
print(entry)
assert os.path.basename(entry["command"]) == "uvx", entry
assert entry["args"] == [f"perplexity-agent@{sys.argv[2]}"], entry
PY
}
check "uvx … perplexity-agent install claude-desktop writes uvx perplexity-agent@$version" install_via_uvx

# --- the llm plugin ------------------------------------------------------------------------
t0=$SECONDS
check "pip install llm==$LLM_VERSION into the same venv" "$venv/bin/pip" install --disable-pip-version-check -q "llm==$LLM_VERSION"
echo "     (llm install: $((SECONDS - t0))s)"
llm="$venv/bin/llm"
export LLM_USER_PATH="$T/llm-home"
unset PERPLEXITY_API_KEY PERPLEXITY_AGENT_BIN LLM_OPENAI_SHOW_RESPONSES 2>/dev/null || true
check "llm plugins lists perplexity-agent" bash -c '"$1" plugins | grep -q "\"name\": \"perplexity-agent\""' _ "$llm"
check "llm models lists the perplexity-agent model" bash -c '"$1" models | grep -q "Perplexity Agent: perplexity-agent"' _ "$llm"

start_fake
export PERPLEXITY_API_BASE="$FAKE_URL" PERPLEXITY_RATE_BURST=1000 NO_PROXY='*'
run_llm() {  # run_llm OUT ERR ARGS... → status
  local out="$1" err="$2"; shift 2
  local rc=0
  "$llm" "$@" >"$out" 2>"$err" || rc=$?
  return $rc
}
last_body() { fake_control GET requests | python3 -c 'import json,sys; r=[x for x in json.load(sys.stdin) if x["method"]=="POST"]; print(json.dumps(r[-1]))'; }

answer() {
  PERPLEXITY_API_KEY=pplx-test-key run_llm "$T/o" "$T/e" -m perplexity-agent 'What is the fake answer?' || { cat "$T/e"; return 1; }
  grep -q '^Fake answer\.$' "$T/o" && grep -q '^Sources:$' "$T/o" || { echo "stdout:"; cat "$T/o"; return 1; }
  ! grep -q '\[perplexity-agent\]' "$T/o" || { echo "progress leaked into stdout"; return 1; }
  grep -q '^\[perplexity-agent\] research run resp_' "$T/e" || { echo "no progress on stderr:"; cat "$T/e"; return 1; }
  ! grep -q 'untrusted-web-content' "$T/o" || { echo "spotlight is on by default"; return 1; }
  last_body | grep -q '"authorization": "Bearer pplx-test-key"' || { echo "the env key was not used"; return 1; }
}
check "llm -m perplexity-agent: answer on stdout, progress on stderr, PERPLEXITY_API_KEY, no spotlight" answer

logged() {
  "$llm" logs -n 1 --json | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]["response"]; assert r.startswith("Fake answer.") and "[perplexity-agent]" not in r, r'
}
check "llm's log holds the answer, not the progress" logged

options() {
  PERPLEXITY_API_KEY=pplx-test-key run_llm "$T/o" "$T/e" -m perplexity-agent -o preset high -o recency week \
    -o domains 'nasa.gov,esa.int' -o spotlight true -o timeout 120 'q' || { cat "$T/e"; return 1; }
  last_body | python3 -c '
import json, sys
b = json.loads(json.load(sys.stdin)["body"])
assert b["preset"] == "high", b
f = b["tools"][0]["filters"]
assert f["search_recency_filter"] == "week" and f["search_domain_filter"] == ["nasa.gov", "esa.int"], f' \
    || return 1
  grep -q '^<untrusted-web-content-[0-9a-f]*>$' "$T/o" || { echo "no spotlight delimiter:"; cat "$T/o"; return 1; }
}
check "-o preset/recency/domains/spotlight/timeout reach the request and the output" options

keystore() {
  "$llm" keys set perplexity --value pplx-llm-key >/dev/null
  run_llm "$T/o" "$T/e" -m perplexity-agent 'q' || { cat "$T/e"; return 1; }
  last_body | grep -q '"authorization": "Bearer pplx-llm-key"' || { echo "llm's stored key was not used"; return 1; }
}
check "the key from llm keys set perplexity (no env)" keystore

# The exact child command line: a stand-in binary records argv, stdin and the key's presence.
cat >"$T/spy" <<'EOF'
#!/bin/sh
printf '%s\n' "$@" >"$SPY_OUT.argv"
cat >"$SPY_OUT.stdin"
[ "$PERPLEXITY_API_KEY" = pplx-llm-key ] && echo key-in-env >"$SPY_OUT.env"
echo "spy answer"
EOF
chmod +x "$T/spy"
spy() {
  PERPLEXITY_AGENT_BIN="$T/spy" SPY_OUT="$T/spy" run_llm "$T/o" "$T/e" -m perplexity-agent -o preset fast 'secret question' \
    || { cat "$T/e"; return 1; }
  printf 'ask\n--preset\nfast\n-\n' | cmp - "$T/spy.argv" || { echo "argv:"; cat "$T/spy.argv"; return 1; }
  [ "$(cat "$T/spy.stdin")" = "secret question" ] && [ -f "$T/spy.env" ] || { echo "question or key not passed"; return 1; }
  ! grep -q pplx "$T/spy.argv" || return 1
}
check "the child is 'ask --preset fast -': question on stdin, key in env only" spy

# A run that outlasts -o timeout: ask prints how to collect it; the plugin says so too.
fake_control POST scenario '{"duration_ms": 8000}' >/dev/null
timed_out() {
  if run_llm "$T/o" "$T/e" -m perplexity-agent -o timeout 1 'slow q'; then echo "llm succeeded"; return 1; fi
  cat "$T/e"
  grep -q 'Collect it with: perplexity-agent result resp_[A-Za-z0-9]* --wait 300' "$T/e" \
    && grep -q 'Error: research run resp_[A-Za-z0-9]* is still running' "$T/e" && [ ! -s "$T/o" ]
}
check "-o timeout 1 on an 8 s run: exits non-zero with how to collect it, nothing on stdout" timed_out
fake_control POST reset '{}' >/dev/null

bad_option() {
  if run_llm "$T/o" "$T/e" -m perplexity-agent -o recency fortnight 'q'; then return 1; fi
  cat "$T/e"; grep -q -- 'recency' "$T/e"
}
check "an invalid -o recency fails with ask's message" bad_option

# --- broken input: the wheel without its binary --------------------------------------------
python3 - "$wheel" "$T/broken/$(basename "$wheel")" <<'EOF'
import os, sys, zipfile
src, dst = sys.argv[1:]
os.makedirs(os.path.dirname(dst), exist_ok=True)
with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as b:
    for i in a.infolist():
        if "/scripts/" in i.filename:
            continue
        data = a.read(i)
        if i.filename.endswith("/RECORD"):
            data = b"".join(l + b"\n" for l in data.splitlines() if b"/scripts/" not in l)
        b.writestr(i, data)
EOF
"$PACK_PYTHON" -m venv "$T/venv-broken"
"$T/venv-broken/bin/pip" install --disable-pip-version-check -q --no-index "$T/broken/"*.whl
"$T/venv-broken/bin/pip" install --disable-pip-version-check -q "llm==$LLM_VERSION"
no_binary() {
  local rc=0
  PATH="/usr/bin:/bin" PERPLEXITY_API_KEY=pplx-test-key "$T/venv-broken/bin/llm" -m perplexity-agent q >"$T/o" 2>"$T/e" || rc=$?
  cat "$T/e"; [ "$rc" -ne 0 ] && grep -q 'cannot find the perplexity-agent binary' "$T/e"
}
check "a wheel without the binary: llm fails saying the binary is missing" no_binary
expect_fail "... and there is no perplexity-agent script to handshake with" \
  python3 "$DIST_HERE/handshake.py" -- "$T/venv-broken/bin/perplexity-agent"
finish
