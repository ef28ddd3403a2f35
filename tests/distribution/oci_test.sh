#!/usr/bin/env bash
# The OCI image: its Dockerfile's promises, then the image itself, built and run
# daemonless with podman.
#
#   tests/distribution/oci_test.sh BINARY
#
# 1. tests/distribution/dockerfile_check.py (directives), and that it rejects a broken
#    copy (root user, secret in ENV).
# 2. The final stage of packaging/oci/Dockerfile, built by podman with the builder stage
#    replaced by BINARY (--build-context builder=…) on a local stand-in for
#    distroless/static (CA bundle, passwd with nonroot 65532, plus the C libraries
#    BINARY links, since a CI build is glibc and the real builder's musl one is static):
#    no registry is reached; the Rust builder stage is not exercised here (it needs
#    rust:alpine, which no reachable registry serves).
# 3. Run in a private network namespace (only lo) with --read-only: /healthz, the image's
#    HEALTHCHECK (podman healthcheck run), both MCP
#    eras over HTTP with the token, a call that writes the store on the /data volume,
#    and no start without PERPLEXITY_HTTP_AUTH_TOKEN; then `serve` over stdio (-i).
#
# Needs root (unshare), podman and runc (apt-get install podman runc). podman here runs
# with runc and no default ulimits (a temp containers.conf): this sandbox's crun cannot
# set RLIMIT_* and does not support hybrid cgroups.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
binary_arg 22 "$@"
dockerfile="$PACK_REPO/packaging/oci/Dockerfile"
name="io.github.perplexity-agent/perplexity-agent"

# --- 1. directives ---------------------------------------------------------------------
check "Dockerfile directives (dockerfile_check.py)" python3 "$DIST_HERE/dockerfile_check.py" "$dockerfile"
sed -e 's/^USER 65532:65532$/USER root/' -e 's|^ENV PERPLEXITY_STORE_PATH=|ENV PERPLEXITY_API_KEY=pplx-x PERPLEXITY_STORE_PATH=|' \
  "$dockerfile" >"$T/Dockerfile.broken"
expect_fail "dockerfile_check.py rejects USER root and a key in ENV" python3 "$DIST_HERE/dockerfile_check.py" "$T/Dockerfile.broken"
grep -v -e '^HEALTHCHECK' -e '"healthcheck"' "$dockerfile" >"$T/Dockerfile.nohealth"
expect_fail "dockerfile_check.py rejects a Dockerfile without its HEALTHCHECK" python3 "$DIST_HERE/dockerfile_check.py" "$T/Dockerfile.nohealth"

# --- 2. build --------------------------------------------------------------------------
for tool in podman runc unshare; do
  command -v "$tool" >/dev/null || pack_die "$tool is not installed (apt-get install -y podman runc)"
done
[ "$(id -u)" = 0 ] || pack_die "needs root (unshare --net for a private network namespace)"
export CONTAINERS_CONF="$T/containers.conf"
printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n' >"$CONTAINERS_CONF"
tag="pa-test-$$"
on_exit "podman rmi -f localhost/$tag-image localhost/$tag-base >/dev/null 2>&1"

base="$T/base"
mkdir -p "$base/rootfs/etc/ssl/certs" "$base/rootfs/home/nonroot" "$base/rootfs/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$base/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$base/rootfs/etc/group"
cp /etc/ssl/certs/ca-certificates.crt "$base/rootfs/etc/ssl/certs/"
for lib in $(ldd "$binary" 2>/dev/null | grep -o '/[^ ]*' || true); do
  mkdir -p "$base/rootfs$(dirname "$lib")"
  cp -L "$lib" "$base/rootfs$lib"
done
printf 'FROM scratch\nCOPY rootfs/ /\nUSER 65532:65532\n' >"$base/Containerfile"
check "stand-in runtime base (distroless/static's files + BINARY's C libraries)" \
  podman build -q --format docker -t "localhost/$tag-base" -f "$base/Containerfile" "$base"

ctx="$T/builder-out"
mkdir -p "$ctx/out/data" "$T/empty"
cp "$binary" "$ctx/out/perplexity-agent"
chown 65532:65532 "$ctx/out/data"; chmod 0700 "$ctx/out/data"
t0=$SECONDS
check "podman build of packaging/oci/Dockerfile (builder stage = BINARY, base = the stand-in)" \
  podman build --format docker --build-context "builder=$ctx" --build-arg "RUNTIME_IMAGE=localhost/$tag-base" \
    -t "localhost/$tag-image" -f "$dockerfile" "$T/empty"
echo "     (build: $((SECONDS - t0))s)"
image="localhost/$tag-image"
check "image config: user, entrypoint, cmd, volume, port, label, store path" python3 - "$(podman image inspect "$image" 2>&1)" "$name" <<'EOF'
import json, sys
c = json.loads(sys.argv[1])[0]["Config"]
assert c["User"] == "65532:65532", c["User"]
assert c["Entrypoint"] == ["perplexity-agent"], c["Entrypoint"]
assert c["Cmd"] == ["serve", "--http", "--bind", "0.0.0.0:8080", "--allow-remote"], c["Cmd"]
assert list(c["Volumes"]) == ["/data"], c.get("Volumes")
assert "8080/tcp" in c["ExposedPorts"], c.get("ExposedPorts")
assert c["Labels"]["io.modelcontextprotocol.server.name"] == sys.argv[2], c["Labels"]
assert "PERPLEXITY_STORE_PATH=/data/store.sqlite" in c["Env"], c["Env"]
health = json.loads(sys.argv[1])[0].get("Healthcheck") or c.get("Healthcheck") or {}
assert health.get("Test") == ["CMD", "perplexity-agent", "healthcheck", "--bind", "127.0.0.1:8080"], health
EOF

# --- 3. run, in a network namespace of our own -------------------------------------------
fake="$(fake_binary)"
[ -x "$fake" ] || pack_die "no fake-perplexity at $fake"
cat >"$T/inside.sh" <<'EOF'
# Runs inside `unshare --net`: only lo exists, so 0.0.0.0:8080 is reachable from here alone.
set -uo pipefail
ip link set lo up
"$FAKE" --port 0 >"$T/fake-in.out" 2>/dev/null & fake_pid=$!
for _ in $(seq 100); do [ -s "$T/fake-in.out" ] && break; sleep 0.05; done
api="$(head -n1 "$T/fake-in.out" | sed 's/^listening on //')"
token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
result=0
say() { echo "$1 $2"; [ "$1" = ok ] || result=1; }
cid="$(podman run -d --read-only --network host -e PERPLEXITY_API_KEY=pplx-test-key \
  -e PERPLEXITY_HTTP_AUTH_TOKEN="$token" -e PERPLEXITY_API_BASE="$api" \
  -e PERPLEXITY_RATE_BURST=1000 -e PERPLEXITY_TOOLS=default,responses "$IMAGE")"
for _ in $(seq 100); do curl -sf --noproxy '*' http://127.0.0.1:8080/healthz >/dev/null 2>&1 && break; sleep 0.1; done
[ "$(curl -s --noproxy '*' http://127.0.0.1:8080/healthz)" = ok ] && say ok "GET /healthz answers ok" \
  || { say FAIL "GET /healthz"; podman logs "$cid" 2>&1 | tail -5; }
# The image's own HEALTHCHECK, run by podman inside the read-only container.
podman healthcheck run "$cid" >"$T/health.log" 2>&1 && say ok "the image's HEALTHCHECK passes (perplexity-agent healthcheck)" \
  || { say FAIL "HEALTHCHECK"; cat "$T/health.log"; }
[ "$(curl -s -o /dev/null -w '%{http_code}' --noproxy '*' http://127.0.0.1:8080/mcp -d '{}')" = 401 ] \
  && say ok "/mcp without the token: 401" || say FAIL "/mcp without the token is not 401"
python3 "$HANDSHAKE" --http http://127.0.0.1:8080/mcp --token "$token" >"$T/http.log" 2>&1 \
  && say ok "both eras over HTTP in the read-only container" || { say FAIL "HTTP handshake"; cat "$T/http.log"; }
# responses_create keeps a snapshot in the store: it must say nothing about not keeping it.
python3 - "$token" >"$T/store.log" 2>&1 <<'PY' && say ok "a tool call writes the store on /data (read-only root)" || { say FAIL "store write"; cat "$T/store.log"; }
import json, sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "responses_create", "arguments": {"input": "q", "preset": "fast"}, "_meta": meta}}
req = urllib.request.Request("http://127.0.0.1:8080/mcp", data=json.dumps(body).encode(), method="POST")
for k, v in {"Authorization": f"Bearer {sys.argv[1]}", "Content-Type": "application/json",
             "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
             "Mcp-Method": "tools/call", "Mcp-Name": "responses_create"}.items():
    req.add_header(k, v)
text = opener.open(req, timeout=60).read().decode()
print(text[:1500])
assert '"isError":true' not in text.replace(" ", ""), "the call failed"
assert "Kept as a snapshot" in text, "the snapshot was not kept in the store"
PY
sed 's/^/       store call: /' "$T/store.log" | head -c 600; echo
podman logs "$cid" >"$T/container.log" 2>&1
podman rm -f -v "$cid" >/dev/null 2>&1
if podman run --rm --read-only --network host -e PERPLEXITY_API_KEY=pplx-test-key "$IMAGE" >"$T/notoken.log" 2>&1; then
  say FAIL "serve --http started without PERPLEXITY_HTTP_AUTH_TOKEN"
else
  grep -q PERPLEXITY_HTTP_AUTH_TOKEN "$T/notoken.log" && say ok "no start without PERPLEXITY_HTTP_AUTH_TOKEN (names it)" \
    || { say FAIL "no-token refusal does not name the variable"; cat "$T/notoken.log"; }
fi
kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null
exit $result
EOF
t0=$SECONDS
check "the image in a private netns: healthz, 401, both eras over HTTP, store on /data, token required" \
  env T="$T" FAKE="$fake" IMAGE="$image" HANDSHAKE="$DIST_HERE/handshake.py" CONTAINERS_CONF="$CONTAINERS_CONF" \
    unshare --net --fork bash "$T/inside.sh"
sed -n '/^ok \|^FAIL /p' "$T/check.log" | sed 's/^/     /'
check "the image over stdio (docker run -i IMAGE serve), read-only, no network" \
  python3 "$DIST_HERE/handshake.py" --env CONTAINERS_CONF="$CONTAINERS_CONF" -- podman run -i --rm --read-only --network none \
    -e PERPLEXITY_API_KEY=pplx-test-key "$image" serve
echo "     (run: $((SECONDS - t0))s)"
finish
