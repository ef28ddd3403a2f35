"""The official Python SDK's OAuth client (`mcp` 2.3.0, `OAuthClientProvider`) against our
`serve --http` with PERPLEXITY_OAUTH_ISSUER / _AUDIENCE set to a real OpenID provider
(oauth2-mock-server through tests/oidc/provider.mjs), all on 127.0.0.1.

The SDK must do the whole MCP authorization flow from our 401 alone: read
`resource_metadata` from the challenge, fetch our RFC 9728 document, discover the
authorization server's RFC 8414 metadata, register (RFC 7591), authorize with PKCE
(S256) naming our resource (RFC 8707), exchange the code, and then list tools and call
one with the token. The browser step is a plain HTTP GET of the authorization URL: the
provider redirects at once, and the code is read from the Location header.

A second client starts from a stored token with only `perplexity:search`: calling a
research tool gets our 403 `insufficient_scope`, the SDK steps up (SEP-2350) and the call
then succeeds.

API facts from the installed mcp 2.3.0: OAuthClientProvider(server_url, client_metadata,
storage, redirect_handler, callback_handler) is an httpx2.Auth; TokenStorage has
get/set_tokens and get/set_client_info; the callback returns AuthorizationCodeResult.

Usage: python oauth_client.py   (env: CARGO_TARGET_DIR or INTEROP_OUR_BIN / INTEROP_FAKE_BIN;
needs node and tests/oidc/node_modules, which run.sh installs with `npm ci`)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from urllib.parse import parse_qs, urlparse

import common
from common import TOOL_NAMES, FakeUpstream, Tally, assert_loopback

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

PROVIDER = common.REPO / "tests" / "oidc" / "provider.mjs"
REDIRECT_URI = "http://127.0.0.1:9/callback"  # never fetched: the code is read from the redirect
T = Tally("oauth_client")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def provider(audience: str):
    """The OpenID provider; stdin is a pipe, so it also stops if this script dies."""
    proc = subprocess.Popen(["node", str(PROVIDER), "--audience", audience], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=common.base_env())
    try:
        line = proc.stdout.readline()
        try:
            ready = json.loads(line)
        except ValueError:
            raise RuntimeError(f"the provider did not start: {line!r} {proc.stderr.read()[:500]!r}") from None
        assert_loopback(ready["issuer"])
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        yield ready
    finally:
        common.stop(proc)


def oauth_server(fake: FakeUpstream, port: int, issuer: str, audience: str):
    env = common.server_env(fake, {"PERPLEXITY_OAUTH_ISSUER": issuer, "PERPLEXITY_OAUTH_AUDIENCE": audience})
    return common.http_server(env, bind=f"127.0.0.1:{port}")


class MemoryStorage:
    def __init__(self, tokens: OAuthToken | None = None, client: OAuthClientInformationFull | None = None) -> None:
        self.tokens = tokens
        self.client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """The user agent: follows the authorization URL with one GET, keeps the redirect's code."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None
        self.authorize_urls: list[str] = []

    async def redirect(self, url: str) -> None:
        assert_loopback(url)
        self.authorize_urls.append(url)
        async with httpx2.AsyncClient(follow_redirects=False, trust_env=False) as http:
            r = await http.get(url)
        location = r.headers.get("location", "")
        if r.status_code not in (302, 303) or not location.startswith(REDIRECT_URI):
            raise RuntimeError(f"authorize answered {r.status_code} {location[:200]!r}")
        query = parse_qs(urlparse(location).query)
        self.result = AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0],
                                              iss=query.get("iss", [None])[0])

    async def callback(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise RuntimeError("no authorization code")
        result, self.result = self.result, None
        return result


def claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def http_client(auth: OAuthClientProvider, log: list[tuple[str, str, int]]) -> httpx2.AsyncClient:
    async def record(response: httpx2.Response) -> None:
        log.append((response.request.method, str(response.request.url), response.status_code))

    return httpx2.AsyncClient(auth=auth, trust_env=False, follow_redirects=False,
                              timeout=httpx2.Timeout(30, read=120), event_hooks={"response": [record]})


def text_of(result) -> str:
    if not result.content or getattr(result.content[0], "type", None) != "text":
        return repr(result.content)
    return result.content[0].text


def client_metadata() -> OAuthClientMetadata:
    return OAuthClientMetadata(client_name="perplexity-agent interop", redirect_uris=[REDIRECT_URI],
                               grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                               token_endpoint_auth_method="none")


async def full_flow(url: str, issuer: str, audience: str, mode: str) -> None:
    p = f"[{mode}]"
    storage = MemoryStorage()
    browser = Browser()
    auth = OAuthClientProvider(server_url=url, client_metadata=client_metadata(), storage=storage,
                               redirect_handler=browser.redirect, callback_handler=browser.callback)
    log: list[tuple[str, str, int]] = []
    async with http_client(auth, log) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=60) as c:
            tools = (await c.list_tools()).tools
            T.check(f"{p} tools/list with the token: every tool", [t.name for t in tools] == TOOL_NAMES,
                    f"got {[t.name for t in tools]}")
            result = await c.call_tool("perplexity_search", {"query": "oauth interop"})
            T.check(f"{p} tools/call perplexity_search succeeds", not result.is_error, text_of(result)[:300])

    origin = f"http://127.0.0.1:{urlparse(url).port}"
    first = log[0] if log else None
    T.check(f"{p} the first request was refused 401", first is not None and first[2] == 401
            and first[1].startswith(url), f"log {log[:3]}")
    prm = [e for e in log if e[1].startswith(f"{origin}/.well-known/oauth-protected-resource")]
    T.check(f"{p} the SDK read our metadata where the challenge pointed",
            prm[:1] and prm[0][1] == f"{origin}/.well-known/oauth-protected-resource/mcp" and prm[0][2] == 200,
            f"got {prm}")
    asm = [e for e in log if e[1].startswith(f"{issuer}/.well-known/")]
    T.check(f"{p} then the provider's metadata", any(e[2] == 200 for e in asm), f"got {asm}")
    T.check(f"{p} registered (RFC 7591)", ("POST", f"{issuer}/register", 201) in log
            and storage.client is not None, f"log {log}")
    T.check(f"{p} exchanged the code", ("POST", f"{issuer}/token", 200) in log, f"log {log}")
    az = browser.authorize_urls[0] if browser.authorize_urls else ""
    q = parse_qs(urlparse(az).query)
    T.check(f"{p} authorized with PKCE S256 and our resource (RFC 8707)",
            q.get("code_challenge_method") == ["S256"] and q.get("resource") == [audience], az[:300])
    token = storage.tokens.access_token if storage.tokens else ""
    c = claims(token) if token.count(".") == 2 else {}
    T.check(f"{p} the token is for us: aud, iss, every scope", c.get("aud") == audience and c.get("iss") == issuer
            and set(c.get("scope", "").split()) >= {"perplexity:research", "perplexity:search"}, f"claims {c}")
    later = [e for e in log if e[1].startswith(url)][1:]
    # (A legacy session's GET stream may be 405: the server offers none; that is no refusal.)
    T.check(f"{p} no MCP request after the flow was refused", later and all(e[2] not in (401, 403) for e in later),
            f"got {later}")


async def step_up(url: str, issuer: str, audience: str, prov_port: int) -> None:
    """From a stored search-only token: a research call gets 403 insufficient_scope, the SDK
    re-authorizes with the challenged scope added, and the call goes through."""
    ctl = f"http://127.0.0.1:{prov_port}/control/token"
    async with httpx2.AsyncClient(trust_env=False) as http:
        r = await http.post(ctl, json={"claims": {"aud": audience, "scope": "perplexity:search"}})
        narrow = r.json()["token"]
        reg = await http.post(f"{issuer}/register", json={"redirect_uris": [REDIRECT_URI]})
        client = OAuthClientInformationFull.model_validate({**reg.json(), "redirect_uris": [REDIRECT_URI]})
    storage = MemoryStorage(OAuthToken(access_token=narrow, token_type="Bearer", expires_in=3600,
                                       scope="perplexity:search"), client)
    browser = Browser()
    auth = OAuthClientProvider(server_url=url, client_metadata=client_metadata(), storage=storage,
                               redirect_handler=browser.redirect, callback_handler=browser.callback)
    log: list[tuple[str, str, int]] = []
    async with http_client(auth, log) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=60) as c:
            tools = [t.name for t in (await c.list_tools()).tools]
            T.check("[step-up] the narrow token lists search, not research",
                    "perplexity_search" in tools and "perplexity_agent" not in tools, f"got {tools}")
            result = await c.call_tool("perplexity_ask", {"query": "step up"})
            T.check("[step-up] the research call succeeds after re-authorization", not result.is_error,
                    text_of(result)[:300])
    refused = [e for e in log if e[2] == 403]
    T.check("[step-up] it was first refused 403", len(refused) >= 1, f"log {log}")
    az = browser.authorize_urls[-1] if browser.authorize_urls else ""
    scope = parse_qs(urlparse(az).query).get("scope", [""])[0].split()
    T.check("[step-up] re-authorized for the challenged scope and the old one",
            "perplexity:research" in scope and "perplexity:search" in scope, az[:300])


async def main() -> int:
    fake = FakeUpstream()
    try:
        fake.reset({"answer": "OAuth interop answer.", "sources": []})
        port = free_port()
        audience = f"http://127.0.0.1:{port}/mcp"
        with provider(audience) as ready, oauth_server(fake, port, ready["issuer"], audience) as url:
            issuer = ready["issuer"]
            T.check("server URL is the audience", url == audience, f"{url} vs {audience}")
            # What the SDK starts from, seen directly.
            async with httpx2.AsyncClient(trust_env=False) as http:
                r = await http.post(url, content=b"{}", headers={"Content-Type": "application/json"})
            challenge = r.headers.get("www-authenticate", "")
            T.check("no token -> 401 with resource_metadata",
                    r.status_code == 401 and 'resource_metadata="' in challenge, f"{r.status_code} {challenge!r}")
            for mode in ("auto", "legacy"):
                try:
                    await full_flow(url, issuer, audience, mode)
                except Exception as exc:  # noqa: BLE001 - a crash is a failed check
                    T.check(f"[{mode}] the OAuth flow ran to completion", False, f"{type(exc).__name__}: {exc}")
            try:
                await step_up(url, issuer, audience, ready["port"])
            except Exception as exc:  # noqa: BLE001
                T.check("[step-up] ran to completion", False, f"{type(exc).__name__}: {exc}")
    finally:
        fake.stop()
    return T.finish()


if __name__ == "__main__":
    started = time.monotonic()
    status = asyncio.run(main())
    print(f"oauth_client: {time.monotonic() - started:.1f}s", file=sys.stderr)
    sys.exit(status)
