# Sourced by the scripts that need Node 22 and npm packages (inspector.sh,
# tests/gateway/everything.sh). Installs into $INTEROP_HOME, idempotently; on failure it
# calls the sourcing script's `skip` function with the reason.
#
#   ensure_node22                      # puts node 22 first on PATH
#   ensure_npm_package DIR NAME VERSION  # installs NAME@VERSION into DIR/node_modules

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
