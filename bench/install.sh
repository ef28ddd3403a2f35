#!/usr/bin/env bash
# Install time and installed size, ours beside the peers', measured the same way:
#
#   bash bench/install.sh [--runs N] [--binary RELEASE_BINARY]
#
#   pip    a fresh venv, `pip install --no-index --find-links DIR PKG` (the venv itself
#          is made before the clock starts);
#   uvx    `uv tool run --offline --no-index --find-links DIR --from PKG CMD </dev/null`
#          with an empty uv cache each run: what a first `uvx PKG` in a client costs
#          (resolve, unpack, link, start the server, which exits at EOF);
#   npm    a fresh project, `npm install --offline PKG` from local data (ours: the two
#          tarballs; the Node peer: its packages in a warm npm cache);
#   script install.sh from a loopback HTTP server (ours only; the peers have none).
# Medians of N runs (default 5) and the installed footprint (what the install added).
#
# Preparing the inputs contacts the package registries once (pip download, npm install
# into bench/.work/install/npm-cache); every measured install is offline, and the only
# server contacted is on 127.0.0.1. Our packages are built from RELEASE_BINARY (default
# $CARGO_TARGET_DIR/release/perplexity-agent, /var/tmp/bench-target), stripped as a
# release ships it.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=packaging/lib.sh
source "$ROOT/packaging/lib.sh"
WORK="$HERE/.work/install"
PY_PEER="perplexity-agent-mcp==0.4.0"
NODE_PEER="@perplexity-ai/mcp-server@1.2.1"
UV_VERSION=0.13.8
runs=5
binary="${CARGO_TARGET_DIR:-/var/tmp/bench-target}/release/perplexity-agent"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[ -x "$binary" ] || pack_die "no release binary at $binary (cargo build --release -p perplexity-agent)"
binary="$(realpath "$binary")"
version="$(pack_version)"
log() { printf '[install-bench] %s\n' "$*" >&2; }
mkdir -p "$WORK"
T="$(mktemp -d)"
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

# ---- inputs (the registries, once) ------------------------------------------------------
py_wheels="$WORK/py-wheels"
if [ ! -f "$py_wheels/.complete" ]; then
  log "pip download $PY_PEER (and its dependencies) into $py_wheels"
  rm -rf "$py_wheels"
  "$PACK_PYTHON" -m pip download --disable-pip-version-check -q --only-binary=:all: -d "$py_wheels" "$PY_PEER" >&2
  touch "$py_wheels/.complete"
fi
npm_cache="$WORK/npm-cache"
if [ ! -f "$npm_cache/.complete" ]; then
  log "npm install $NODE_PEER once, to fill $npm_cache"
  rm -rf "$npm_cache"
  mkdir -p "$T/warm"
  (cd "$T/warm" && echo '{"private":true}' >package.json \
    && npm install --cache "$npm_cache" --no-audit --no-fund --loglevel=error "$NODE_PEER" >&2)
  touch "$npm_cache/.complete"
fi
uv="$(pack_venv uv "uv==$UV_VERSION")/bin/uv"

# Ours, from this binary, stripped as package-release.sh ships it.
ours="$T/ours"
mkdir -p "$ours/wheel" "$ours/tgz"
cp "$binary" "$ours/perplexity-agent"
strip "$ours/perplexity-agent"
log "building our wheel (build.sh --strip), npm tarballs and release archive"
# maturin packs the same profile's build from the same target dir (debug: for a dry run).
dev=(); [ "$(basename "$(dirname "$binary")")" = debug ] && dev=(--dev)
CARGO_TARGET_DIR="$(dirname "$(dirname "$binary")")" \
  bash "$ROOT/packaging/pypi/build.sh" "${dev[@]}" --strip "$ours/wheel" >/dev/null
wheel="$(ls "$ours/wheel"/*.whl)"
bash "$ROOT/packaging/npm/stage.sh" "$ours/stage" "$ours/perplexity-agent" linux-x64 >/dev/null
(cd "$ours/tgz" && npm pack --silent "$ours/stage/perplexity-agent" "$ours/stage/linux-x64" >/dev/null)
archive_name="$(sh "$ROOT/install.sh" --print-target)"
target="${archive_name#perplexity-agent-}"; target="${target%.tar.gz}"
mkdir -p "$ours/release"
bash "$ROOT/scripts/package-release.sh" archive "$target" "$binary" "$ours/release" >/dev/null 2>&1
bash "$ROOT/scripts/package-release.sh" sums "$ours/release" >/dev/null
python3 -u -m http.server --bind 127.0.0.1 --directory "$ours/release" 0 >"$T/http.log" 2>&1 &
server_pid=$!
port=
for _ in $(seq 100); do
  port="$(sed -n 's/.* port \([0-9][0-9]*\).*/\1/p' "$T/http.log" | head -1)"; [ -n "$port" ] && break; sleep 0.1
done
[ -n "$port" ] || pack_die "the loopback file server did not start"

# ---- measurements -------------------------------------------------------------------------
export npm_config_offline=true npm_config_audit=false npm_config_fund=false \
  npm_config_update_notifier=false npm_config_loglevel=error
export UV_OFFLINE=1 UV_PYTHON="$PACK_PYTHON" UV_PYTHON_DOWNLOADS=never UV_NO_CONFIG=1 UV_LINK_MODE=copy NO_PROXY='*'
results="$T/results.tsv"
: >"$results"
kib() { du -sk "$1" | cut -f1; }
# time_it NAME SIZE_CMD -- COMMAND...: one run, seconds and the installed KiB to results.
time_it() {
  local name="$1" size_of="$2"; shift 3
  local t0 t1
  t0="$(date +%s.%N)"
  "$@" >"$T/last.log" 2>&1 || { cat "$T/last.log" >&2; pack_die "$name: the install failed"; }
  t1="$(date +%s.%N)"
  printf '%s\t%s\t%s\n' "$name" "$(python3 -c "print($t1 - $t0)")" "$(eval "$size_of")" >>"$results"
}
base_venv_kib() { "$PACK_PYTHON" -m venv "$T/empty-venv" && kib "$T/empty-venv"; rm -rf "$T/empty-venv"; }
empty_venv="$(base_venv_kib)"

for run in $(seq "$runs"); do
  log "run $run of $runs"
  for who in ours peer; do
    v="$T/venv-$who"; rm -rf "$v"; "$PACK_PYTHON" -m venv "$v"
    if [ "$who" = ours ]; then spec=("$wheel"); links=(); else spec=("$PY_PEER"); links=(--find-links "$py_wheels"); fi
    time_it "pip:$who" "echo \$(( \$(kib '$v') - $empty_venv ))" -- \
      "$v/bin/pip" install --disable-pip-version-check -q --no-index "${links[@]}" "${spec[@]}"

    cache="$T/uv-cache-$who"; rm -rf "$cache"
    if [ "$who" = ours ]; then
      uvx=(--no-index --from "$wheel" perplexity-agent)
    else
      uvx=(--no-index --find-links "$py_wheels" --from "$PY_PEER" perplexity-agent-mcp)
    fi
    time_it "uvx:$who" "kib '$cache'" -- \
      env UV_CACHE_DIR="$cache" UV_TOOL_DIR="$T/uv-tools" PERPLEXITY_API_KEY=pplx-bench-not-a-key \
      bash -c '"$@" </dev/null' _ "$uv" tool run "${uvx[@]}"

    p="$T/project-$who"; rm -rf "$p"; mkdir -p "$p"; echo '{"private":true}' >"$p/package.json"
    if [ "$who" = ours ]; then
      npm_spec=("$ours/tgz/perplexity-agent-$version.tgz" "$ours/tgz/perplexity-agent-linux-x64-$version.tgz")
    else
      npm_spec=("$NODE_PEER")
    fi
    time_it "npm:$who" "kib '$p/node_modules'" -- \
      bash -c 'cd "$1" && shift && npm install --cache "$0" "$@"' "$npm_cache" "$p" "${npm_spec[@]}"
  done
  d="$T/script-bin"; rm -rf "$d"
  time_it "script:ours" "kib '$d'" -- env -i HOME="$T/home" PATH=/usr/local/bin:/usr/bin:/bin \
    sh "$ROOT/install.sh" --base "http://127.0.0.1:$port" --to "$d"
done

python3 - "$results" "$runs" "$(wc -c <"$binary")" "$(wc -c <"$ours/perplexity-agent")" \
  "$(wc -c <"$wheel")" "$(cat "$ours/tgz"/*.tgz | wc -c)" "$(wc -c <"$ours/release/$archive_name")" <<'EOF' | tee "$WORK/results.md"
import statistics, sys
rows, runs = {}, sys.argv[2]
for line in open(sys.argv[1]):
    name, secs, kib = line.rstrip("\n").split("\t")
    rows.setdefault(name, []).append((float(secs), int(kib)))
def cell(name):
    if name not in rows:
        return "—", "—"
    secs = statistics.median(s for s, _ in rows[name])
    kib = statistics.median(k for _, k in rows[name])
    return f"{secs:.2f} s", f"{kib / 1024:.1f} MiB"
print(f"Install time, median of {runs} (installed size: what the install added)\n")
print("| | ours | py peer (perplexity-agent-mcp 0.4.0) | node peer (@perplexity-ai/mcp-server 1.2.1) | ours/peer |")
print("|---|---|---|---|---|")
def ratio(a, b):
    try:
        return f"{float(a.split()[0]) / float(b.split()[0]):.2f}×"
    except (ValueError, ZeroDivisionError):
        return "—"
for kind, label, peer in (("pip", "wheel into a fresh venv (pip, offline)", "py"),
                          ("uvx", "first `uvx` (empty uv cache, offline), start to EOF", "py"),
                          ("npm", "npm install from local data (offline)", "node"),
                          ("script", "install.sh from loopback", None)):
    o_t, o_s = cell(f"{kind}:ours")
    p_t, p_s = cell(f"{kind}:peer") if peer else ("—", "—")
    py = f"{p_t}, {p_s}" if peer == "py" else "—"
    node = f"{p_t}, {p_s}" if peer == "node" else "—"
    print(f"| {label} | {o_t}, {o_s} | {py} | {node} | {ratio(o_t, p_t) if peer else '—'} |")
mib = lambda b: f"{int(b) / 1048576:.1f} MiB"
print(f"\nOur binary: {mib(sys.argv[3])} as built, {mib(sys.argv[4])} stripped; wheel {mib(sys.argv[5])}, "
      f"npm tarballs {mib(sys.argv[6])}, release archive {mib(sys.argv[7])}.")
EOF
