#!/usr/bin/env bash
# The npm packages, installed and run as `npx perplexity-agent` would run them.
#
#   tests/distribution/npm_test.sh BINARY
#
# Stages the launcher and @perplexity-agent/linux-x64 (packaging/npm/stage.sh), `npm
# pack`s both, installs the two tarballs into a fresh project with --offline and an
# empty cache (so nothing can come from the registry; the other platforms' optional
# dependencies are skipped), then through `npx --no -- perplexity-agent`: the version,
# both MCP eras over stdio, the binary's exit code passed through, and SIGTERM passed
# on to the binary. Broken inputs: the launcher without its platform package must fail
# with a message naming the package; stage.sh must refuse an unknown platform.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
binary_arg 13 "$@"
version="$(pack_version)"
export npm_config_cache="$T/npm-cache" npm_config_offline=true npm_config_audit=false \
  npm_config_fund=false npm_config_update_notifier=false

bash "$PACK_REPO/packaging/npm/stage.sh" "$T/stage" "$binary" linux-x64 >/dev/null
mkdir -p "$T/tgz"
( cd "$T/tgz" && npm pack --silent "$T/stage/perplexity-agent" "$T/stage/linux-x64" >/dev/null )
launcher="$T/tgz/perplexity-agent-$version.tgz"
platform="$T/tgz/perplexity-agent-linux-x64-$version.tgz"
check "npm pack: both tarballs" test -s "$launcher" -a -s "$platform"
check "launcher tarball: the JS bin, mcpName, no install scripts" python3 - "$launcher" <<'EOF'
import json, sys, tarfile
t = tarfile.open(sys.argv[1])
names = set(t.getnames())
assert "package/bin/perplexity-agent.js" in names, names
p = json.load(t.extractfile("package/package.json"))
assert p["mcpName"] == "io.github.perplexity-agent/perplexity-agent", p.get("mcpName")
assert p["bin"] == {"perplexity-agent": "bin/perplexity-agent.js"}, p["bin"]
assert not set(p.get("scripts", {})) & {"preinstall", "install", "postinstall"}, p.get("scripts")
EOF
check "platform tarball: the binary, mode 0755, os/cpu linux/x64" python3 - "$platform" <<'EOF'
import json, sys, tarfile
t = tarfile.open(sys.argv[1])
m = t.getmember("package/bin/perplexity-agent")
assert m.mode & 0o755 == 0o755, oct(m.mode)
p = json.load(t.extractfile("package/package.json"))
assert (p["os"], p["cpu"]) == (["linux"], ["x64"]), p
EOF

proj="$T/project"
mkdir -p "$proj"
( cd "$proj" && npm init -y >/dev/null )
t0=$SECONDS
check "npm install --offline of the two tarballs" bash -c 'cd "$1" && npm install --loglevel=error "$2" "$3"' _ "$proj" "$launcher" "$platform"
echo "     (install: $((SECONDS - t0))s)"
check "the installed platform binary is $1, byte for byte" cmp "$binary" "$proj/node_modules/@perplexity-agent/linux-x64/bin/perplexity-agent"

cd "$proj"
check "npx --no -- perplexity-agent --version = perplexity-agent $version" \
  bash -c '[ "$(npx --no -- perplexity-agent --version)" = "perplexity-agent $1" ]' _ "$version"
check "both eras through npx" python3 "$DIST_HERE/handshake.py" -- npx --no -- perplexity-agent
check "the binary's exit code comes through (result without an id: 2)" \
  bash -c 'npx --no -- perplexity-agent result >/dev/null 2>&1; [ $? -eq 2 ]'
# SIGTERM to the launcher reaches the binary (a stdio server idling on an open stdin).
sigterm() {
  local pid child rc=0
  mkfifo "$T/stdin"
  node_modules/.bin/perplexity-agent <"$T/stdin" >/dev/null 2>&1 &
  pid=$!
  exec 3>"$T/stdin"   # held open: the server waits for input instead of seeing EOF
  for _ in $(seq 200); do child="$(pgrep -P "$pid" || true)"; [ -n "$child" ] && break; sleep 0.05; done
  [ -n "$child" ] || { echo "the launcher ($pid) started no child"; exec 3>&-; return 1; }
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$child" 2>/dev/null || break; sleep 0.05; done
  wait "$pid" || rc=$?
  exec 3>&-
  if kill -0 "$child" 2>/dev/null; then echo "the binary ($child) outlived the launcher's SIGTERM"; kill "$child"; return 1; fi
  echo "launcher exit status $rc"
}
check "SIGTERM to the launcher ends the binary" sigterm
cd "$PACK_REPO"

# `npx -y perplexity-agent install …` as a new user runs it: npx unpacks the packages into
# its own cache (here the tarballs, offline), and the entry names npx, not that cache.
install_via_npx() {
  local out
  out="$(cd "$T" && npx -y --package="$launcher" --package="$platform" -- perplexity-agent install claude-code --print 2>"$T/npx-install.err")" \
    || { cat "$T/npx-install.err"; return 1; }
  # Claude Code's entry is printed as its own command: `claude mcp add … -- npx -y …`.
  python3 - "$out" "$version" <<'PY'
import os, shlex, sys
words = shlex.split(sys.argv[1])
print(words)
assert words[:3] == ["claude", "mcp", "add"], words
command = words[words.index("--") + 1:]
assert os.path.basename(command[0]) == "npx", command
assert command[1:] == ["-y", f"perplexity-agent@{sys.argv[2]}"], command
PY
}
check "npx … perplexity-agent install claude-code writes npx -y perplexity-agent@$version" install_via_npx

# Broken inputs.
bare="$T/bare"
mkdir -p "$bare"
( cd "$bare" && npm init -y >/dev/null && npm install --loglevel=error "$launcher" >/dev/null 2>&1 )
no_platform() {
  local out rc=0
  out="$(cd "$bare" && npx --no -- perplexity-agent --version 2>&1)" || rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] && grep -q '@perplexity-agent/linux-x64 is not installed' <<<"$out"
}
check "without its platform package the launcher fails, naming the package" no_platform
expect_fail "stage.sh refuses an unknown platform" bash "$PACK_REPO/packaging/npm/stage.sh" "$T/x" "$binary" plan9-mips
finish
