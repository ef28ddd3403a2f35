# Sourced by bench/run.sh and bench/http.sh: installs the Node peer
# @perplexity-ai/mcp-server@$NODE_PEER_VERSION into $WORK/npm (once) and sets NODE_ARGS,
# the arguments that tell the Python harness where it is (or why it is unavailable).
# Needs: WORK, NODE_PEER_VERSION and a log() function.

NODE_ARGS=()
NPM_DIR="$WORK/npm"
NODE_PKG="$NPM_DIR/node_modules/@perplexity-ai/mcp-server"
node_installed() {
    [ -f "$NODE_PKG/package.json" ] && [ -f "$NODE_PKG/dist/http.js" ] &&
        [ "$(node -p "require('$NODE_PKG/package.json').version" 2>/dev/null)" = "$NODE_PEER_VERSION" ]
}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    NODE_ARGS=(--node-unavailable "node/npm not found on PATH")
else
    if ! node_installed; then
        log "installing @perplexity-ai/mcp-server@$NODE_PEER_VERSION into $NPM_DIR"
        mkdir -p "$NPM_DIR"
        [ -f "$NPM_DIR/package.json" ] || echo '{"private":true}' >"$NPM_DIR/package.json"
        (cd "$NPM_DIR" && timeout 600 npm install --no-audit --no-fund --loglevel=error \
            "@perplexity-ai/mcp-server@$NODE_PEER_VERSION") >"$WORK/npm.log" 2>&1
    fi
    if node_installed; then
        NODE_BIN="$(command -v node)"
        # The package declares engines.node >= 18; if it ever needs a newer Node than
        # the system one, install node@22 from npm next to it and use that.
        need="$(node -p "(require('$NODE_PKG/package.json').engines||{}).node||''" 2>/dev/null)"
        major="$(node -p 'process.versions.node.split(".")[0]')"
        if [[ "$need" =~ \>=\ *([0-9]+) ]] && [ "$major" -lt "${BASH_REMATCH[1]}" ]; then
            log "system node $major < required ${BASH_REMATCH[1]}: installing node@22 from npm"
            (cd "$NPM_DIR" && timeout 600 npm install --no-audit --no-fund --loglevel=error node@22) >>"$WORK/npm.log" 2>&1
            NODE_BIN="$NPM_DIR/node_modules/node/bin/node"
        fi
        if [ -x "$NODE_BIN" ]; then
            NODE_ARGS=(--node "$NODE_BIN" --node-pkg "$NODE_PKG")
        else
            NODE_ARGS=(--node-unavailable "no usable node binary (see bench/.work/npm.log)")
        fi
    else
        reason="npm install @perplexity-ai/mcp-server@$NODE_PEER_VERSION failed: $(tail -n 1 "$WORK/npm.log" 2>/dev/null | tr -d '\n' | cut -c1-200)"
        log "$reason"
        NODE_ARGS=(--node-unavailable "$reason")
    fi
fi

