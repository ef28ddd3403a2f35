# Sourced by the scripts that need Node and npm packages (inspector.sh,
# tests/gateway/everything.sh, run.sh's ext-tasks step). Installs into $INTEROP_HOME,
# idempotently; on failure it calls the sourcing script's `skip` function with the reason.
#
#   ensure_node22                      # puts node 22 first on PATH
#   ensure_node MAJOR                  # the machine's node if it is at least MAJOR, else node 22
#   ensure_npm_package DIR NAME VERSION  # installs NAME@VERSION into DIR/node_modules
#   ensure_npm_packages DIR NAME@VERSION...  # several, exactly these versions, one install

ensure_node22() {
  local dir="$INTEROP_HOME/node"
  local node22="$dir/node_modules/node/bin/node"
  if ! "$node22" --version 2>/dev/null | grep -q '^v2[2-9]\.'; then
    command -v npm >/dev/null || skip "npm is not installed (needed to fetch node@22)"
    echo "installing node@22 into $dir ..."
    mkdir -p "$dir"
    ( cd "$dir" && { [ -f package.json ] || npm init -y >/dev/null; } \
        && npm install --no-audit --no-fund --loglevel=error node@22 >/dev/null ) \
      || skip "npm install node@22 failed"
    "$node22" --version 2>/dev/null | grep -q '^v2[2-9]\.' || skip "node@22 did not produce a working node binary"
  fi
  export PATH="$dir/node_modules/node/bin:$PATH"
  NODE22_DIR="$dir/node_modules/node/bin"
}

ensure_node() {
  local want="$1" have
  have="$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p')"
  if [ -n "$have" ] && [ "$have" -ge "$want" ]; then
    return 0
  fi
  ensure_node22
}

npm_installed_version() {
  node -e "console.log(require('$1/node_modules/$2/package.json').version)" 2>/dev/null
}

ensure_npm_package() {
  local dir="$1" name="$2" version="$3"
  if [ "$(npm_installed_version "$dir" "$name")" != "$version" ]; then
    echo "installing $name@$version into $dir ..."
    mkdir -p "$dir"
    ( cd "$dir" && { [ -f package.json ] || npm init -y >/dev/null; } \
        && npm install --no-audit --no-fund --loglevel=error "$name@$version" >/dev/null ) \
      || skip "npm install $name@$version failed"
    [ "$(npm_installed_version "$dir" "$name")" = "$version" ] || skip "$name did not install"
  fi
}

ensure_npm_packages() {
  local dir="$1" spec name version stale=0
  shift
  for spec in "$@"; do
    name="${spec%@*}" version="${spec##*@}"
    [ "$(npm_installed_version "$dir" "$name")" = "$version" ] || stale=1
  done
  [ "$stale" = 0 ] && return 0
  echo "installing $* into $dir ..."
  mkdir -p "$dir"
  ( cd "$dir" && { [ -f package.json ] || npm init -y >/dev/null; } \
      && npm install --no-audit --no-fund --loglevel=error --save-exact "$@" >/dev/null ) \
    || skip "npm install $* failed"
  for spec in "$@"; do
    name="${spec%@*}" version="${spec##*@}"
    [ "$(npm_installed_version "$dir" "$name")" = "$version" ] || skip "$name@$version did not install"
  done
}
