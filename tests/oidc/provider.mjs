// A real OpenID provider for the OAuth tests: oauth2-mock-server (its keys, its JWKS, its
// discovery document, /authorize, /token with PKCE) on 127.0.0.1, wrapped with what the
// tests need beside it.
//
//   node tests/oidc/provider.mjs [--port N] [--audience URL]
//
// Prints one JSON line when ready: {"issuer": "http://127.0.0.1:PORT", "port": PORT, ...}.
// Stops on SIGTERM/SIGINT, and on stdin EOF when stdin is a pipe (a test that dies takes
// the provider with it).
//
// Beside the library's endpoints (/.well-known/openid-configuration, /jwks, /authorize,
// /token, ...):
//   GET  /.well-known/oauth-authorization-server   RFC 8414 metadata (the OpenID document's
//                                                   fields plus registration_endpoint)
//   POST /register                                  RFC 7591 dynamic registration (any client
//                                                   is accepted: public, PKCE, no secret)
//   POST /control/token   {"claims": {...}, "header": {...}, "alg": "ES256", "kid": "...",
//                          "forge": "none" | "hs256", "secret": "pem" | "jwk" | "raw"}
//        -> {"token": "..."}. Claims override the defaults (iss, iat, exp = now + 3600,
//        nbf = now - 10, sub "test-user", aud = --audience); a null claim is removed.
//        `alg` picks the published key of that algorithm, `kid` a key by id; `header`
//        overrides header fields (never alg): e.g. a made-up kid on a real signature.
//        `forge` builds the attacks with node:crypto (not the library): alg "none" and
//        an HS256 MAC keyed with the signing key's public key (PEM, JWK text or raw n).
//   POST /control/rotate  {"alg": "RS256", "keep": false} -> {"kid": ..., "alg": ...}:
//        a new key becomes the signing key; unless `keep`, the others leave the JWKS.
//   GET  /control/jwks-fetches -> {"count": N}        (every GET /jwks)
//   GET  /control/keys -> {"active": kid, "published": [{kid, alg}...]}
//
// The token endpoint puts the RFC 8707 `resource` of the request into the access token's
// `aud` (the library leaves it out for the authorization-code grant), and the scope asked
// for at /authorize into the code's token (the library says "dummy").
//
// Test infrastructure only: loopback, throwaway keys, no authentication of clients.

import { createHmac, createPublicKey, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { fstatSync } from 'node:fs';
import { OAuth2Issuer, OAuth2Service } from 'oauth2-mock-server';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
};
const wantedPort = Number(option('--port', '0'));
const defaultAudience = option('--audience', undefined);

const issuer = new OAuth2Issuer(false);
const service = new OAuth2Service(issuer);

// Keys: one per algorithm family the tests sign with; the first is the signing key.
const published = new Map(); // kid -> alg
let active;
async function addKey(alg) {
  const jwk = await issuer.keys.generate(alg);
  published.set(jwk.kid, alg);
  return jwk;
}
for (const alg of ['RS256', 'PS256', 'ES256', 'EdDSA']) {
  const jwk = await addKey(alg);
  active ??= jwk.kid;
}

// The library picks keys round-robin; the tests want one signing key unless they name one.
const libraryBuildToken = issuer.buildToken.bind(issuer);
issuer.buildToken = (opts = {}) => libraryBuildToken({ ...opts, kid: opts.kid ?? active });

// The grant carries what was authorized: the library forgets /authorize's scope and
// answers the code exchange with scope "dummy"; a real server remembers it.
const scopeByCode = new Map();
service.on('beforeAuthorizeRedirect', (redirect, req) => {
  const code = redirect.url.searchParams.get('code');
  if (code && typeof req.query?.scope === 'string') scopeByCode.set(code, req.query.scope);
});
const grantedScope = (body) =>
  body.grant_type === 'authorization_code' && body.scope === undefined ? scopeByCode.get(body.code) : undefined;

service.on('beforeTokenSigning', (token, req) => {
  const body = req.body ?? {};
  // The id_token already has its aud (the client id); only the access token is changed.
  if (token.payload.aud !== undefined) return;
  // RFC 8707: the access token is for the resource the client named.
  const resource = body.resource ?? defaultAudience;
  if (resource !== undefined) token.payload.aud = resource;
  const scope = grantedScope(body);
  if (scope !== undefined) token.payload.scope = scope;
});
service.on('beforeResponse', (response, req) => {
  const body = req.body ?? {};
  const scope = grantedScope(body);
  if (scope !== undefined && typeof response.body === 'object') response.body.scope = scope;
  if (body.grant_type === 'authorization_code') scopeByCode.delete(body.code);
});

let jwksFetches = 0;

const b64url = (data) => Buffer.from(data).toString('base64url');

function privateJwk(kid) {
  return issuer.keys.toJSON(true).find((k) => k.kid === kid);
}

function publicJwk(kid) {
  return issuer.keys.toJSON(false).find((k) => k.kid === kid);
}

function pickKid(body) {
  if (typeof body.kid === 'string') return body.kid;
  if (typeof body.alg === 'string') {
    for (const [kid, alg] of published) if (alg === body.alg) return kid;
    throw new Error(`no published key for ${body.alg}`);
  }
  return active;
}

function applyClaims(payload, claims) {
  payload.sub = 'test-user';
  if (defaultAudience !== undefined) payload.aud = defaultAudience;
  for (const [name, value] of Object.entries(claims ?? {})) {
    if (value === null) delete payload[name];
    else payload[name] = value;
  }
}

async function controlToken(body) {
  const kid = pickKid(body);
  if (body.forge === undefined) {
    const token = await issuer.buildToken({
      kid,
      scopesOrTransform: (header, payload) => {
        applyClaims(payload, body.claims);
        for (const [name, value] of Object.entries(body.header ?? {})) {
          if (name !== 'alg') header[name] = value;
        }
      },
    });
    return token;
  }
  // The attacks, built here with node:crypto.
  const now = Math.floor(Date.now() / 1000);
  const payload = { iss: issuer.url, iat: now, exp: now + 3600, nbf: now - 10 };
  applyClaims(payload, body.claims);
  const jwk = publicJwk(kid);
  if (body.forge === 'none') {
    const header = { alg: 'none', typ: 'JWT', kid, ...(body.header ?? {}) };
    return `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}.`;
  }
  if (body.forge === 'hs256') {
    const header = { alg: 'HS256', typ: 'JWT', kid, ...(body.header ?? {}) };
    let secret;
    switch (body.secret ?? 'pem') {
      case 'pem':
        secret = createPublicKey({ key: jwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
        break;
      case 'jwk':
        secret = JSON.stringify(jwk);
        break;
      case 'raw':
        secret = Buffer.from(jwk.n ?? jwk.x, 'base64url');
        break;
      default:
        throw new Error(`unknown secret form ${body.secret}`);
    }
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
    const mac = createHmac('sha256', secret).update(input).digest('base64url');
    return `${input}.${mac}`;
  }
  throw new Error(`unknown forge ${body.forge}`);
}

async function rotate(body) {
  const jwk = await addKey(typeof body.alg === 'string' ? body.alg : 'RS256');
  if (!body.keep) {
    for (const kid of [...published.keys()]) if (kid !== jwk.kid) published.delete(kid);
  }
  active = jwk.kid;
  return { kid: jwk.kid, alg: jwk.alg };
}

function authorizationServerMetadata() {
  const base = issuer.url;
  return {
    issuer: base,
    authorization_endpoint: `${base}/authorize`,
    token_endpoint: `${base}/token`,
    registration_endpoint: `${base}/register`,
    jwks_uri: `${base}/jwks`,
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
  };
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > 1 << 20) reject(new Error('body too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
  res.end(body);
}

const library = service.requestHandler;

const server = createServer(async (req, res) => {
  const path = new URL(req.url, 'http://127.0.0.1').pathname;
  try {
    if (req.method === 'GET' && path === '/jwks') {
      jwksFetches += 1;
      // The library's JWKS, less the keys a rotation retired.
      return send(res, 200, { keys: issuer.keys.toJSON(false).filter((k) => published.has(k.kid)) });
    }
    if (req.method === 'GET' && path === '/.well-known/oauth-authorization-server') {
      return send(res, 200, authorizationServerMetadata());
    }
    if (req.method === 'POST' && path === '/register') {
      const metadata = JSON.parse((await readBody(req)) || '{}');
      return send(res, 201, {
        ...metadata,
        client_id: `client-${randomUUID()}`,
        client_id_issued_at: Math.floor(Date.now() / 1000),
        token_endpoint_auth_method: 'none',
      });
    }
    if (path.startsWith('/control/')) {
      if (req.method === 'POST' && path === '/control/token') {
        return send(res, 200, { token: await controlToken(JSON.parse((await readBody(req)) || '{}')) });
      }
      if (req.method === 'POST' && path === '/control/rotate') {
        return send(res, 200, await rotate(JSON.parse((await readBody(req)) || '{}')));
      }
      if (req.method === 'GET' && path === '/control/jwks-fetches') {
        return send(res, 200, { count: jwksFetches });
      }
      if (req.method === 'GET' && path === '/control/keys') {
        return send(res, 200, { active, published: [...published].map(([kid, alg]) => ({ kid, alg })) });
      }
      return send(res, 404, { error: 'unknown control endpoint' });
    }
  } catch (error) {
    return send(res, 400, { error: String(error?.message ?? error) });
  }
  return library(req, res);
});

server.listen(wantedPort, '127.0.0.1', () => {
  const { port } = server.address();
  issuer.url = `http://127.0.0.1:${port}`;
  process.stdout.write(`${JSON.stringify({ issuer: issuer.url, port, jwks_uri: `${issuer.url}/jwks` })}\n`);
});

let stopping = false;
function stop() {
  if (stopping) return;
  stopping = true;
  server.close(() => process.exit(0));
  server.closeAllConnections?.();
  // Whatever is still open, the process goes.
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
let stdinIsPipe = false;
try {
  stdinIsPipe = fstatSync(0).isFIFO();
} catch {
  stdinIsPipe = false;
}
if (stdinIsPipe) {
  process.stdin.on('end', stop);
  process.stdin.on('close', stop);
  process.stdin.resume();
}
