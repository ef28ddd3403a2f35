# shellcheck shell=bash
# Sourced by packaging/*/build.sh and tests/distribution/*.sh: where the pinned tools
# live and how they are installed. Every tool comes from a package registry by an exact
# version, into a cache under /var/tmp keyed by that version, so a second run installs
# nothing and a changed pin gets a fresh copy.
#
#   pack_venv NAME 'pkg==1.2.3' ...   # prints the path of a venv holding exactly those pins
#   pack_npm_tool NAME@VERSION        # prints the dir whose node_modules/.bin has it
#   pack_version                      # Cargo.toml's [package] version (the one version)
#   pack_die MESSAGE                  # message on stderr, exit 1

PACK_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACK_CACHE="${PACK_CACHE:-/var/tmp/perplexity-agent-pack}"
PACK_PYTHON="${PYTHON:-python3}"

pack_die() { echo "${0##*/}: $*" >&2; exit 1; }

pack_version() {
  # The [package] table's version, not a dependency's or the workspace's.
  awk '/^\[package\]/{p=1; next} /^\[/{p=0} p && /^version *=/{gsub(/"/, "", $3); print $3; exit}' \
    "$PACK_REPO/Cargo.toml"
}

pack_venv() {
  local name="$1"; shift
  local key dir
  key="$(printf '%s\n' "$@" | sha256sum | cut -c1-12)"
  dir="$PACK_CACHE/venv-$name-$key"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$PACK_CACHE"
    echo "installing $* into $dir" >&2
    "$PACK_PYTHON" -m venv "$dir" >&2 || pack_die "cannot create a venv with $PACK_PYTHON"
    "$dir/bin/python" -m pip install --disable-pip-version-check -q "$@" >&2 \
      || pack_die "pip install $* failed"
    # Written last: an interrupted install is redone, never half-used.
    touch "$dir/.complete"
  fi
  echo "$dir"
}

pack_npm_tool() {
  local spec="$1" dir
  dir="$PACK_CACHE/npm-${spec//[@\/]/_}"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "installing $spec into $dir" >&2
    ( cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "$spec" >&2 ) \
      || pack_die "npm install $spec failed"
    touch "$dir/.complete"
  fi
  echo "$dir"
}
