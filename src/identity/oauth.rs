//! OAuth 2.1 resource server (MCP "Authorization", RFC 9728, RFC 8707): validates each
//! access token's signature, issuer, audience and times; maps its scopes to tool groups.
//!
//! JOSE parsing and claim validation are jsonwebtoken's (12.x: the release with the
//! `exp`/`nbf`/`sub`/`iss`/`aud` type-confusion fixes and `crit` rejection); the
//! signatures are checked by ring, already our TLS provider, through the verify-only
//! [`RING`] provider below. That keeps the `rsa` crate (RUSTSEC-2023-0071) and aws-lc's C
//! build out of the tree; no signature arithmetic is written here.
//!
//! Keys: `PERPLEXITY_OAUTH_JWKS_URL`, else the `jwks_uri` of the issuer's RFC 8414 /
//! OpenID discovery document, fetched through `net`'s client (no redirects, no proxy),
//! bounded in size ([`MAX_DOCUMENT_BYTES`]) and time ([`FETCH_TIMEOUT`]). The set is cached;
//! it is refreshed after [`KEYS_TTL`], and a token whose `kid` is not in it triggers at most
//! one refetch per [`KID_REFETCH_INTERVAL`] (the first one at once, so a rotation is picked
//! up on its first token). After a failed fetch none is tried for [`RETRY_AFTER_FAILURE`].
//! Concurrent verifications share one fetch. A refresh that fails keeps the keys in hand.
//!
//! Scopes → tool groups ([`SCOPES`]):
//! `perplexity:research` (lifecycle, ask, research, responses, finance),
//! `perplexity:search`, `perplexity:fetch`, `perplexity:admin`, `perplexity:gateway`
//! (the downstream servers' `mcp__…` tools). `retrieve` is always permitted.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::ThumbprintHash;
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, Validation};
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

/// `PERPLEXITY_OAUTH_ISSUER`, `PERPLEXITY_OAUTH_AUDIENCE`, `PERPLEXITY_OAUTH_JWKS_URL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// The exact `iss` every token must carry, as configured (a URL, compared as text).
    pub issuer: String,
    /// This server's canonical URL: the exact `aud` (or one of an `aud` array).
    pub audience: String,
    /// Where the signing keys are; else from the issuer's discovery document.
    pub jwks_url: Option<url::Url>,
    /// Each subject's own rate (per minute, burst), beside the server's; `None`: the
    /// server's alone.
    pub subject_rate: Option<(u32, u32)>,
}

/// A token that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub issuer: String,
    pub subject: String,
    pub scopes: Vec<String>,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Bad signature, wrong issuer or audience, expired, malformed: 401 invalid_token.
    /// The reason is for the server's log, never for the client.
    Invalid(String),
    /// The keys could not be had (issuer unreachable): 503, the token is not judged.
    Unavailable(String),
}

/// The scopes this server understands and the tool groups (`PERPLEXITY_TOOLS` vocabulary)
/// each grants. A token's tools are the union of its scopes' groups.
pub const SCOPES: [(&str, &[&str]); 5] = [
    (
        "perplexity:research",
        &["lifecycle", "ask", "research", "responses", "finance"],
    ),
    ("perplexity:search", &["search"]),
    ("perplexity:fetch", &["fetch"]),
    ("perplexity:admin", &["admin"]),
    ("perplexity:gateway", &["gateway"]),
];

/// What the tokens' algorithms may be: asymmetric only. `none` has no signature, and an
/// HS* token "signed" with a published public key is the classic key-confusion forgery.
const ALLOWED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 60;
/// A discovery or JWKS document larger than this is refused (real ones are a few KiB).
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Each fetch (connect, answer and body) must be done within this.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a fetched key set is used before it is refreshed.
pub const KEYS_TTL: Duration = Duration::from_secs(600);
/// An unknown `kid` refetches the keys at most this often: a flood of made-up kids must
/// not turn us into a load generator against the issuer.
pub const KID_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// After a failed fetch, none is tried for this long (the issuer is down or misconfigured).
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// Longer tokens are refused before any parsing.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The longest `sub` accepted: it names the caller's state and appears in logs.
const MAX_SUBJECT_CHARS: usize = 256;
/// Tokens remembered as verified (by SHA-256), and for at most how long: a signature
/// check (ES256 the dearest) costs far more than a lookup, and an agent presents the
/// same token on every request until it refreshes it.
const MAX_VERIFIED: usize = 4096;
const VERIFIED_TTL: Duration = Duration::from_secs(60);
/// Keys read from one JWKS; scopes read from one token.
const MAX_KEYS: usize = 64;
const MAX_SCOPES: usize = 64;

/// The cache's intervals (the constants above; shorter in the unit tests).
#[derive(Debug, Clone, Copy)]
struct Timing {
    ttl: Duration,
    kid_refetch: Duration,
    retry_after_failure: Duration,
}

const TIMING: Timing = Timing {
    ttl: KEYS_TTL,
    kid_refetch: KID_REFETCH_INTERVAL,
    retry_after_failure: RETRY_AFTER_FAILURE,
};

/// One usable signing key of the issuer's JWKS.
struct Key {
    kid: Option<String>,
    /// Fixed by the key (its `alg`, else its `kty`/`crv`): a token's header must name
    /// exactly this, so the header never chooses how a key is used.
    alg: Algorithm,
    key: DecodingKey,
}

/// A fetched key set.
struct KeySet {
    keys: Vec<Key>,
    fetched_at: Instant,
}

impl KeySet {
    fn candidates(&self, kid: Option<&str>, alg: Algorithm) -> Vec<&Key> {
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .filter(|k| k.kid.as_deref() == Some(kid))
                .collect(),
            None => self.keys.iter().filter(|k| k.alg == alg).collect(),
        }
    }
}

/// What the single fetcher remembers (behind the fetch lock).
#[derive(Default)]
struct FetchState {
    /// The discovered `jwks_uri` (when not configured), kept until a fetch from it fails.
    jwks_url: Option<Url>,
    last_attempt: Option<Instant>,
    last_failed: bool,
    last_kid_refetch: Option<Instant>,
}

pub struct Verifier {
    config: OAuthConfig,
    http: reqwest::Client,
    timing: Timing,
    /// The current key set: read without waiting for a fetch in flight.
    keys: RwLock<Option<Arc<KeySet>>>,
    /// Held for the whole of a fetch: concurrent verifications share one.
    fetch: tokio::sync::Mutex<FetchState>,
    /// Tokens that passed every check, by the SHA-256 of their bytes, each until its `exp`
    /// or [`VERIFIED_TTL`], whichever is first. Only the very same bytes skip the checks,
    /// so a hit proves what a signature check would; emptied whenever the key set is
    /// fetched, so a key the issuer withdrew stops vouching within one refresh.
    verified: std::sync::Mutex<Recent>,
}

/// Tokens verified lately, by SHA-256: what each said and until when it may be trusted.
type Recent = std::collections::HashMap<[u8; 32], (Verified, Instant)>;

impl Verifier {
    /// Builds the verifier; connects nowhere (the keys are fetched on the first token).
    pub fn new(config: OAuthConfig) -> Result<Verifier, String> {
        Verifier::with_timing(config, TIMING)
    }

    fn with_timing(config: OAuthConfig, timing: Timing) -> Result<Verifier, String> {
        install_ring_provider()?;
        if let Some(url) = &config.jwks_url
            && !fetchable(url)
        {
            return Err(format!(
                "PERPLEXITY_OAUTH_JWKS_URL {url} is not https (http only on loopback)"
            ));
        }
        let http = crate::net::client_builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .user_agent(concat!("perplexity-agent/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("the OAuth key fetcher could not be built: {e}"))?;
        Ok(Verifier {
            config,
            http,
            timing,
            keys: RwLock::new(None),
            fetch: tokio::sync::Mutex::new(FetchState::default()),
            verified: std::sync::Mutex::new(Recent::new()),
        })
    }

    pub fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// Checks one bearer token. `Unavailable` only when no keys could be had at all.
    pub async fn verify(&self, token: &str) -> Result<Verified, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::Invalid("token too long".to_owned()));
        }
        let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some((verified, until)) = self.verified_cache().get(&digest)
            && now < *until
        {
            return Ok(verified.clone());
        }
        let (verified, exp) = self.verify_fully(token).await?;
        // Until `exp` (without the leeway a full check allows) or the TTL.
        let left = exp.saturating_sub(crate::clock::since_epoch().as_secs());
        let until = now + VERIFIED_TTL.min(Duration::from_secs(left));
        let mut cache = self.verified_cache();
        if cache.len() >= MAX_VERIFIED {
            cache.retain(|_, (_, until)| now < *until);
            if cache.len() >= MAX_VERIFIED {
                cache.clear();
            }
        }
        cache.insert(digest, (verified.clone(), until));
        Ok(verified)
    }

    fn verified_cache(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.verified.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every check, and the token's `exp`.
    async fn verify_fully(&self, token: &str) -> Result<(Verified, u64), TokenError> {
        let invalid = |why: &str| TokenError::Invalid(why.to_owned());
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            TokenError::Invalid(match header_alg(token) {
                Some(alg) => format!("alg {alg:?} is not accepted"),
                None => "malformed token header".to_owned(),
            })
        })?;
        // Checked before any key is looked up: HS* and the rest never reach a key.
        if !ALLOWED.contains(&header.alg) {
            return Err(TokenError::Invalid(format!(
                "alg {:?} is not accepted (asymmetric algorithms only)",
                header.alg
            )));
        }
        let kid = header.kid.as_deref();
        // `jku`, `x5u`, `jwk` and `x5c` in the header are ignored: keys come only from the
        // configured issuer, never from the token itself.
        let keys = self.keys_for(kid, header.alg).await?;
        let candidates = keys.candidates(kid, header.alg);
        if candidates.is_empty() {
            return Err(invalid(match kid {
                Some(_) => "no key of the issuer has the token's kid",
                None => "no key of the issuer fits the token (it has no kid)",
            }));
        }
        let mut refusal = invalid("no key of the issuer has the token's algorithm");
        for key in candidates {
            if key.alg != header.alg {
                // The algorithm-confusion guard: the key's algorithm, never the header's.
                refusal = TokenError::Invalid(format!(
                    "alg {:?} does not match the key's {:?}",
                    header.alg, key.alg
                ));
                continue;
            }
            match self.check(token, key) {
                Ok(verified) => return Ok(verified),
                Err(why) => refusal = why,
            }
        }
        Err(refusal)
    }

    /// Signature and claims against one key.
    fn check(&self, token: &str, key: &Key) -> Result<(Verified, u64), TokenError> {
        let mut validation = Validation::new(key.alg);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        let claims = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| TokenError::Invalid(reason(e.kind()).to_owned()))?
            .claims;
        // Exact, as text: jsonwebtoken also accepts an `iss` array; we do not.
        if claims.iss != self.config.issuer {
            return Err(TokenError::Invalid("wrong issuer".to_owned()));
        }
        let sub = claims.sub.trim();
        if sub.is_empty()
            || sub.len() != claims.sub.len()
            || claims.sub.chars().count() > MAX_SUBJECT_CHARS
            || claims.sub.chars().any(char::is_control)
        {
            return Err(TokenError::Invalid(
                "sub is empty, too long or not printable".to_owned(),
            ));
        }
        let mut scopes: Vec<String> = Vec::new();
        let from_scp = claims.scp.map(StringOrList::into_vec).unwrap_or_default();
        let from_scope = claims.scope.map(|s| vec![s]).unwrap_or_default();
        for scope in from_scope
            .iter()
            .chain(from_scp.iter())
            .flat_map(|s| s.split_ascii_whitespace())
        {
            if scopes.len() >= MAX_SCOPES {
                break;
            }
            if scope.len() <= 128 && !scopes.iter().any(|s| s == scope) {
                scopes.push(scope.to_owned());
            }
        }
        Ok((
            Verified {
                issuer: claims.iss,
                subject: claims.sub,
                scopes,
            },
            claims.exp.as_f64().unwrap_or(0.0).max(0.0) as u64,
        ))
    }

    /// The key set to judge a token with `kid` by, fetching it when there is none, when it
    /// is stale, or when the kid is unknown (rate-limited).
    async fn keys_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<Arc<KeySet>, TokenError> {
        let fresh = |set: &KeySet| set.fetched_at.elapsed() < self.timing.ttl;
        let mut state = match self.current() {
            Some(set) if !set.candidates(kid, alg).is_empty() => {
                if fresh(&set) {
                    return Ok(set);
                }
                // Stale: this verification refreshes, unless another one already is; then
                // the keys in hand serve rather than every request waiting on the issuer.
                match self.fetch.try_lock() {
                    Ok(state) => state,
                    Err(_) => return Ok(set),
                }
            }
            _ => self.fetch.lock().await,
        };
        // Another verification may have fetched while this one waited.
        let current = self.current();
        let now = Instant::now();
        let since = |t: Option<Instant>| t.map(|t| now.saturating_duration_since(t));
        let backing_off = state.last_failed
            && since(state.last_attempt).is_some_and(|d| d < self.timing.retry_after_failure);
        let fetch = match &current {
            None => !backing_off,
            // Stale: refreshed at most once per retry interval, whatever the outcome.
            Some(set) if !set.candidates(kid, alg).is_empty() => {
                !fresh(set)
                    && since(state.last_attempt)
                        .is_none_or(|d| d >= self.timing.retry_after_failure)
            }
            Some(set) => {
                // An unknown kid: one refetch per interval, however many tokens ask (a
                // set fetched while this one waited counts, it is the same answer).
                let kid_refetch = since(state.last_kid_refetch)
                    .is_none_or(|d| d >= self.timing.kid_refetch)
                    && !backing_off;
                if kid_refetch {
                    state.last_kid_refetch = Some(now);
                }
                kid_refetch || (!fresh(set) && !backing_off)
            }
        };
        if !fetch {
            return current.ok_or_else(|| {
                TokenError::Unavailable(
                    "the issuer's keys could not be fetched (retrying shortly)".to_owned(),
                )
            });
        }
        state.last_attempt = Some(now);
        match self.fetch_keys(&mut state).await {
            Ok(keys) => {
                state.last_failed = false;
                let set = Arc::new(KeySet {
                    keys,
                    fetched_at: Instant::now(),
                });
                *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Some(set.clone());
                self.verified_cache().clear();
                Ok(set)
            }
            Err(why) => {
                state.last_failed = true;
                // Keys in hand still judge tokens; with none, the token is not judged (and
                // the caller logs why).
                match current {
                    Some(set) => {
                        tracing::warn!(
                            "refreshing the OAuth issuer's keys failed (the old ones stay in use): {why}"
                        );
                        Ok(set)
                    }
                    None => Err(TokenError::Unavailable(why)),
                }
            }
        }
    }

    fn current(&self) -> Option<Arc<KeySet>> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn fetch_keys(&self, state: &mut FetchState) -> Result<Vec<Key>, String> {
        let url = match (&self.config.jwks_url, &state.jwks_url) {
            (Some(url), _) | (None, Some(url)) => url.clone(),
            (None, None) => {
                let url = self.discover().await?;
                state.jwks_url = Some(url.clone());
                url
            }
        };
        let result = self.fetch_json(&url).await.and_then(|doc| parse_jwks(&doc));
        if result.is_err() {
            // A discovered URL that failed is looked up again next time.
            state.jwks_url = None;
        }
        result
    }

    /// The `jwks_uri` of the issuer's metadata: RFC 8414 first, then OpenID Connect
    /// discovery (the MCP authorization spec's order).
    async fn discover(&self) -> Result<Url, String> {
        let mut failures = Vec::new();
        for url in discovery_urls(&self.config.issuer)? {
            match self.fetch_json(&url).await {
                Ok(doc) => {
                    // RFC 8414 §3.3: a document for another issuer is not this issuer's.
                    if doc.get("issuer").and_then(Value::as_str) != Some(&self.config.issuer) {
                        failures.push(format!("{url}: its issuer is not {}", self.config.issuer));
                        continue;
                    }
                    let Some(raw) = doc.get("jwks_uri").and_then(Value::as_str) else {
                        failures.push(format!("{url}: no jwks_uri"));
                        continue;
                    };
                    return match Url::parse(raw) {
                        // The discovered URL gets the configured URLs' rule: fetched in the
                        // clear, the keys could be swapped on the way.
                        Ok(jwks) if fetchable(&jwks) => Ok(jwks),
                        _ => Err(format!(
                            "{url}: jwks_uri {:?} is not https (http only on loopback)",
                            raw.chars().take(200).collect::<String>()
                        )),
                    };
                }
                Err(why) => failures.push(why),
            }
        }
        Err(format!(
            "no discovery document for the issuer: {}",
            failures.join("; ")
        ))
    }

    /// One JSON document, bounded in size and time.
    async fn fetch_json(&self, url: &Url) -> Result<Value, String> {
        if !fetchable(url) {
            return Err(format!("{url} is not https (http only on loopback)"));
        }
        let failed = |e: reqwest::Error| {
            if crate::net::is_tls(&e) {
                format!("{url}: TLS failed")
            } else if e.is_timeout() {
                format!("{url}: no answer within {}s", FETCH_TIMEOUT.as_secs())
            } else {
                format!("{url}: the request failed")
            }
        };
        let mut response = self
            .http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(failed)?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(format!("{url} answered {}", response.status().as_u16()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(format!("{url}: larger than {MAX_DOCUMENT_BYTES} bytes"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("{url}: larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|_| format!("{url}: not a JSON document"))
    }

    /// The RFC 9728 protected-resource metadata document.
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.config.audience,
            "authorization_servers": [self.config.issuer],
            "scopes_supported": SCOPES.iter().map(|(scope, _)| *scope).collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
            "resource_name": "perplexity-agent",
        })
    }
}

/// The claims read beside the ones jsonwebtoken validates.
#[derive(Deserialize)]
struct Claims {
    // Defaulted so that a missing one is reported by the validation ("missing claim").
    #[serde(default)]
    iss: String,
    #[serde(default)]
    sub: String,
    /// Validated by jsonwebtoken (required); read for the verified-token cache.
    /// Any JSON here, so that a malformed one is reported by the validation (which has
    /// already required a number by the time this is read).
    #[serde(default)]
    exp: Value,
    #[serde(default)]
    scope: Option<String>,
    /// Some issuers (Okta, Entra ID) put scopes here, as a list or a string.
    #[serde(default)]
    scp: Option<StringOrList>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StringOrList {
    One(String),
    Many(Vec<String>),
}

impl StringOrList {
    fn into_vec(self) -> Vec<String> {
        match self {
            StringOrList::One(s) => vec![s],
            StringOrList::Many(v) => v,
        }
    }
}

/// A log-safe reason for a refusal: fixed texts, never a claim's value or the token.
fn reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidSignature => "bad signature",
        ErrorKind::ExpiredSignature => "expired",
        ErrorKind::ImmatureSignature => "not yet valid (nbf)",
        ErrorKind::InvalidIssuer => "wrong issuer",
        ErrorKind::InvalidAudience => "wrong audience",
        ErrorKind::InvalidAlgorithm | ErrorKind::UnsupportedAlgorithm => {
            "algorithm not accepted for this key"
        }
        ErrorKind::MissingRequiredClaim(claim) => match claim.as_str() {
            "exp" => "missing claim exp",
            "iss" => "missing claim iss",
            "aud" => "missing claim aud",
            "sub" => "missing claim sub",
            _ => "missing claim",
        },
        ErrorKind::InvalidClaimFormat(claim) => match claim.as_str() {
            "exp" => "claim exp malformed",
            "nbf" => "claim nbf malformed",
            "iss" => "claim iss malformed",
            "aud" => "claim aud malformed",
            "sub" => "claim sub malformed",
            _ => "claim malformed",
        },
        ErrorKind::Json(_) | ErrorKind::Utf8(_) => "claims malformed",
        ErrorKind::Base64(_) => "not base64url",
        _ => "malformed token",
    }
}

/// The `alg` of a header jsonwebtoken refused (`none`, `Ed25519`, …), for the log:
/// short alphanumerics only, anything else is just "malformed".
fn header_alg(token: &str) -> Option<String> {
    use base64::Engine;
    let header = token.split('.').next()?;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .ok()?;
    let value: Value = serde_json::from_slice(&raw).ok()?;
    let alg = value.get("alg")?.as_str()?;
    (alg.len() <= 16 && alg.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .then(|| alg.to_owned())
}

/// https, or http to a loopback host (the rule `config` applies to the settings).
fn fetchable(url: &Url) -> bool {
    url.scheme() == "https" || (url.scheme() == "http" && crate::net::is_loopback_host(url))
}

/// Where the issuer's metadata may be: RFC 8414 §3.1 inserts the well-known segment
/// between the host and the issuer's path; OpenID Connect appends it (and the MCP spec
/// tries the inserted form of that too).
fn discovery_urls(issuer: &str) -> Result<Vec<Url>, String> {
    let parsed = Url::parse(issuer).map_err(|_| format!("the issuer {issuer:?} is not a URL"))?;
    let path = parsed.path().trim_end_matches('/');
    let origin = parsed.origin().ascii_serialization();
    let mut urls = vec![format!(
        "{origin}/.well-known/oauth-authorization-server{path}"
    )];
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/openid-configuration{path}"));
    }
    urls.push(format!("{origin}{path}/.well-known/openid-configuration"));
    urls.iter()
        .map(|u| Url::parse(u).map_err(|_| format!("the issuer {issuer:?} gives no discovery URL")))
        .collect()
}

/// The usable keys of a JWKS document; the rest are skipped (an encryption key, a
/// symmetric one, an unknown type or curve, an algorithm outside [`ALLOWED`]).
fn parse_jwks(doc: &Value) -> Result<Vec<Key>, String> {
    let keys = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("the JWKS has no keys array")?;
    Ok(keys.iter().take(MAX_KEYS).filter_map(parse_jwk).collect())
}

fn parse_jwk(jwk: &Value) -> Option<Key> {
    let text = |name: &str| jwk.get(name).and_then(Value::as_str);
    // A key published for encryption is not a signing key (RFC 7517 §4.2).
    if jwk.get("use").is_some_and(|u| u.as_str() != Some("sig")) {
        return None;
    }
    if let Some(ops) = jwk.get("key_ops") {
        let verify = ops
            .as_array()
            .is_some_and(|ops| ops.iter().any(|op| op.as_str() == Some("verify")));
        if !verify {
            return None;
        }
    }
    // An optional member that is there but not a string spoils the key.
    let optional = |name: &str| jwk.get(name).map(|v| v.as_str().ok_or(())).transpose().ok();
    let declared = optional("alg")?;
    let alg = match (text("kty")?, text("crv")) {
        ("RSA", _) => match declared {
            // OpenID's default signing algorithm (RFC 7518 §3.1 "Recommended+").
            None => Algorithm::RS256,
            Some("RS256") => Algorithm::RS256,
            Some("RS384") => Algorithm::RS384,
            Some("RS512") => Algorithm::RS512,
            Some("PS256") => Algorithm::PS256,
            Some("PS384") => Algorithm::PS384,
            Some("PS512") => Algorithm::PS512,
            Some(_) => return None,
        },
        ("EC", Some("P-256")) if declared.is_none_or(|a| a == "ES256") => Algorithm::ES256,
        ("EC", Some("P-384")) if declared.is_none_or(|a| a == "ES384") => Algorithm::ES384,
        ("OKP", Some("Ed25519")) if declared.is_none_or(|a| a == "EdDSA" || a == "Ed25519") => {
            Algorithm::EdDSA
        }
        // `oct` (a shared secret has no place in a public key set), other curves, others.
        _ => return None,
    };
    let key = match alg.family() {
        AlgorithmFamily::Rsa => DecodingKey::from_rsa_components(text("n")?, text("e")?).ok()?,
        AlgorithmFamily::Ec => {
            let key = DecodingKey::from_ec_components(text("x")?, text("y")?).ok()?;
            let want = if alg == Algorithm::ES256 { 65 } else { 97 };
            // An x/y of the wrong size for the curve is refused here, not at each token.
            (key.try_get_as_bytes().ok()?.len() == want).then_some(key)?
        }
        AlgorithmFamily::Ed => {
            let key = DecodingKey::from_ed_components(text("x")?).ok()?;
            (key.try_get_as_bytes().ok()?.len() == 32).then_some(key)?
        }
        _ => return None,
    };
    let kid = optional("kid")?.map(str::to_owned);
    Some(Key { kid, alg, key })
}

/// The tools a token's scopes grant. No recognised scope grants no tool but `retrieve`
/// (never every tool: an `Access` without a list means unrestricted).
pub fn access_for(scopes: &[String]) -> crate::identity::Access {
    let mut groups: Vec<&str> = Vec::new();
    for (scope, granted) in SCOPES {
        if scopes.iter().any(|s| s == scope) {
            groups.extend(granted.iter().copied());
        }
    }
    // The group names are ours (SCOPES, checked by a test); `retrieve` stands for "nothing
    // else", as `Allowed` always permits it.
    let list = if groups.is_empty() {
        "retrieve".to_owned()
    } else {
        groups.join(",")
    };
    let allowed = crate::identity::Allowed::parse(&list)
        .or_else(|_| crate::identity::Allowed::parse("retrieve"))
        .expect("`retrieve` is a tool of the catalogue");
    crate::identity::Access {
        tools: Some(allowed),
        bucket: None,
        budget: crate::call::Budget::default(),
    }
}

/// The scope that grants `tool` (ours or a downstream `mcp__…` one), for a 403's
/// `scope="…"`; `None` for a name that is no tool.
pub fn scope_for_tool(tool: &str) -> Option<&'static str> {
    let group = if tool.starts_with("mcp__") {
        "gateway"
    } else {
        crate::tools::registry::find(tool)?.group
    };
    SCOPES
        .iter()
        .find(|(_, groups)| groups.contains(&group))
        .map(|(scope, _)| *scope)
}

/// The `WWW-Authenticate` value of a 401 or 403 (RFC 6750 §3, RFC 9728 §5.1):
/// `Bearer resource_metadata="…"`, with `error="…"` and `scope="…"` when given.
pub fn challenge(resource_metadata_url: &str, error: Option<(&str, Option<&str>)>) -> String {
    let mut value = format!("Bearer resource_metadata={}", quoted(resource_metadata_url));
    if let Some((error, scope)) = error {
        value.push_str(&format!(", error={}", quoted(error)));
        if let Some(scope) = scope {
            value.push_str(&format!(", scope={}", quoted(scope)));
        }
    }
    value
}

/// An RFC 9110 quoted-string: `"` and `\` escaped; control characters (a CR/LF would
/// split the header) dropped.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars().filter(|c| !c.is_control()) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

// --- ring as jsonwebtoken's crypto backend (verification only) ---------------------------

/// jsonwebtoken's process-wide provider: ring's verification algorithms, chosen by the
/// algorithm the key fixed. Signing and HS* are refused: this server only verifies, and
/// never with a shared secret.
static RING: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: ring_verifier,
    key_utils: KeyUtils {
        rsa_pub_components_from_private_key: |_| Err(ErrorKind::UnsupportedAlgorithm.into()),
        rsa_pub_components_from_public_key: |_| Err(ErrorKind::UnsupportedAlgorithm.into()),
        ec_pub_components_from_private_key: |_, _| Err(ErrorKind::UnsupportedAlgorithm.into()),
        ed_pub_components_from_private_key: |_, _| Err(ErrorKind::UnsupportedAlgorithm.into()),
        compute_digest: ring_digest,
    },
};

fn install_ring_provider() -> Result<(), String> {
    let _ = RING.install_default();
    // Another provider would mean other code decides how our tokens are checked.
    match CryptoProvider::try_get_default() {
        Some(provider) if std::ptr::eq(provider, &RING) => Ok(()),
        _ => Err("another JWT crypto provider is installed in this process".to_owned()),
    }
}

fn no_signer(
    _: &Algorithm,
    _: &jsonwebtoken::EncodingKey,
) -> jsonwebtoken::errors::Result<Box<dyn JwtSigner>> {
    Err(ErrorKind::UnsupportedAlgorithm.into())
}

fn ring_digest(data: &[u8], hash: ThumbprintHash) -> jsonwebtoken::errors::Result<Vec<u8>> {
    let algorithm = match hash {
        ThumbprintHash::SHA256 => &ring::digest::SHA256,
        ThumbprintHash::SHA384 => &ring::digest::SHA384,
        ThumbprintHash::SHA512 => &ring::digest::SHA512,
        _ => return Err(ErrorKind::UnsupportedAlgorithm.into()),
    };
    Ok(ring::digest::digest(algorithm, data).as_ref().to_vec())
}

/// ring's RSA algorithm for `alg`, `None` for an algorithm that is not RSA. 2048 bits at
/// least: shorter RSA keys are refused by ring.
fn rsa_parameters(alg: Algorithm) -> Option<&'static ring::signature::RsaParameters> {
    use ring::signature as sig;
    Some(match alg {
        Algorithm::RS256 => &sig::RSA_PKCS1_2048_8192_SHA256,
        Algorithm::RS384 => &sig::RSA_PKCS1_2048_8192_SHA384,
        Algorithm::RS512 => &sig::RSA_PKCS1_2048_8192_SHA512,
        Algorithm::PS256 => &sig::RSA_PSS_2048_8192_SHA256,
        Algorithm::PS384 => &sig::RSA_PSS_2048_8192_SHA384,
        Algorithm::PS512 => &sig::RSA_PSS_2048_8192_SHA512,
        _ => return None,
    })
}

/// A key and the ring algorithm that checks its signatures.
struct RingVerifier {
    alg: Algorithm,
    ring: &'static dyn ring::signature::VerificationAlgorithm,
    key: DecodingKey,
}

fn ring_verifier(
    alg: &Algorithm,
    key: &DecodingKey,
) -> jsonwebtoken::errors::Result<Box<dyn JwtVerifier>> {
    use ring::signature as sig;
    let ring: &'static dyn sig::VerificationAlgorithm = match alg {
        // JWS ECDSA signatures are r‖s (RFC 7518 §3.4), ring's FIXED encoding.
        Algorithm::ES256 => &sig::ECDSA_P256_SHA256_FIXED,
        Algorithm::ES384 => &sig::ECDSA_P384_SHA384_FIXED,
        Algorithm::EdDSA => &sig::ED25519,
        _ => rsa_parameters(*alg).ok_or(ErrorKind::InvalidAlgorithm)?,
    };
    // The key's own family must be the algorithm's: an RSA key is never read as another.
    if key.family() != alg.family() {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(RingVerifier {
        alg: *alg,
        ring,
        key: key.clone(),
    }))
}

impl jsonwebtoken::signature::Verifier<Vec<u8>> for RingVerifier {
    fn verify(
        &self,
        message: &[u8],
        signature: &Vec<u8>,
    ) -> Result<(), jsonwebtoken::signature::Error> {
        let checked = match self.key.kind() {
            DecodingKeyKind::RsaModulusExponent { n, e } => {
                // ring reads a public key as DER; the JWK's n and e are its components.
                let params =
                    rsa_parameters(self.alg).ok_or_else(jsonwebtoken::signature::Error::new)?;
                ring::signature::RsaPublicKeyComponents { n, e }.verify(params, message, signature)
            }
            DecodingKeyKind::SecretOrDer(bytes) => {
                ring::signature::UnparsedPublicKey::new(self.ring, bytes).verify(message, signature)
            }
        };
        checked.map_err(|_| jsonwebtoken::signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use ring::rand::SystemRandom;
    use ring::signature::{self as sig, KeyPair};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const ISSUER: &str = "http://127.0.0.1/issuer";
    const AUDIENCE: &str = "https://agent.example/mcp";

    /// A signing key made for the test, and its public JWK.
    enum Signer {
        Ec(sig::EcdsaKeyPair),
        Ed(sig::Ed25519KeyPair),
    }

    struct TestKey {
        kid: String,
        alg: &'static str,
        signer: Signer,
    }

    impl TestKey {
        fn es256(kid: &str) -> TestKey {
            TestKey::ec(kid, "ES256", &sig::ECDSA_P256_SHA256_FIXED_SIGNING)
        }

        fn es384(kid: &str) -> TestKey {
            TestKey::ec(kid, "ES384", &sig::ECDSA_P384_SHA384_FIXED_SIGNING)
        }

        fn ec(kid: &str, alg: &'static str, which: &'static sig::EcdsaSigningAlgorithm) -> TestKey {
            let rng = SystemRandom::new();
            let pkcs8 = sig::EcdsaKeyPair::generate_pkcs8(which, &rng).unwrap();
            let pair = sig::EcdsaKeyPair::from_pkcs8(which, pkcs8.as_ref(), &rng).unwrap();
            TestKey {
                kid: kid.to_owned(),
                alg,
                signer: Signer::Ec(pair),
            }
        }

        fn ed25519(kid: &str) -> TestKey {
            let pkcs8 = sig::Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
            TestKey {
                kid: kid.to_owned(),
                alg: "EdDSA",
                signer: Signer::Ed(sig::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap()),
            }
        }

        fn public_bytes(&self) -> Vec<u8> {
            match &self.signer {
                Signer::Ec(pair) => pair.public_key().as_ref().to_vec(),
                Signer::Ed(pair) => pair.public_key().as_ref().to_vec(),
            }
        }

        fn jwk(&self) -> Value {
            let public = self.public_bytes();
            match &self.signer {
                Signer::Ec(_) => {
                    let half = (public.len() - 1) / 2;
                    let crv = if half == 32 { "P-256" } else { "P-384" };
                    json!({"kty": "EC", "crv": crv, "kid": self.kid, "use": "sig", "alg": self.alg,
                           "x": B64.encode(&public[1..1 + half]), "y": B64.encode(&public[1 + half..])})
                }
                Signer::Ed(_) => json!({"kty": "OKP", "crv": "Ed25519", "kid": self.kid,
                                        "alg": "EdDSA", "x": B64.encode(&public)}),
            }
        }

        fn sign(&self, claims: &Value) -> String {
            self.sign_with(
                json!({"alg": self.alg, "kid": self.kid, "typ": "JWT"}),
                claims,
            )
        }

        fn sign_with(&self, header: Value, claims: &Value) -> String {
            let input = format!(
                "{}.{}",
                B64.encode(header.to_string()),
                B64.encode(claims.to_string())
            );
            let signature = match &self.signer {
                Signer::Ec(pair) => pair
                    .sign(&SystemRandom::new(), input.as_bytes())
                    .unwrap()
                    .as_ref()
                    .to_vec(),
                Signer::Ed(pair) => pair.sign(input.as_bytes()).as_ref().to_vec(),
            };
            format!("{input}.{}", B64.encode(signature))
        }
    }

    fn now() -> i64 {
        jsonwebtoken::get_current_timestamp() as i64
    }

    fn claims() -> Value {
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now() + 300,
               "iat": now(), "scope": "perplexity:search perplexity:fetch"})
    }

    fn with(overrides: Value) -> Value {
        let mut c = claims();
        for (k, v) in overrides.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        c
    }

    /// A loopback issuer: its JWKS (counted) and discovery documents, all replaceable.
    #[derive(Clone, Default)]
    struct Issuer {
        jwks: Arc<Mutex<Value>>,
        jwks_fetches: Arc<AtomicUsize>,
        /// (path, document) answered besides the JWKS at /jwks.
        documents: Arc<Mutex<Vec<(String, Value)>>>,
        down: Arc<std::sync::atomic::AtomicBool>,
        /// The JWKS answers after 800 ms.
        slow: Arc<std::sync::atomic::AtomicBool>,
        base: Arc<Mutex<String>>,
    }

    impl Issuer {
        async fn start(keys: &[&TestKey]) -> Issuer {
            let issuer = Issuer::default();
            issuer.set_keys(keys);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            *issuer.base.lock().unwrap() = base;
            let state = issuer.clone();
            let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
                let state = state.clone();
                async move {
                    use axum::http::StatusCode;
                    use axum::response::IntoResponse;
                    if state.down.load(Ordering::SeqCst) {
                        return StatusCode::SERVICE_UNAVAILABLE.into_response();
                    }
                    let path = uri.path().to_owned();
                    if path == "/jwks" {
                        state.jwks_fetches.fetch_add(1, Ordering::SeqCst);
                        if state.slow.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(800)).await;
                        }
                        let jwks = state.jwks.lock().unwrap().clone();
                        return axum::Json(jwks).into_response();
                    }
                    if path == "/huge" {
                        let keys: Vec<Value> = (0..4000)
                            .map(|i| json!({"kty": "oct", "kid": format!("k{i}"), "k": "x".repeat(64)}))
                            .collect();
                        return axum::Json(json!({"keys": keys})).into_response();
                    }
                    let docs = state.documents.lock().unwrap().clone();
                    match docs.into_iter().find(|(p, _)| *p == path) {
                        Some((_, doc)) => axum::Json(doc).into_response(),
                        None => StatusCode::NOT_FOUND.into_response(),
                    }
                }
            });
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            issuer
        }

        fn base(&self) -> String {
            self.base.lock().unwrap().clone()
        }

        fn set_keys(&self, keys: &[&TestKey]) {
            *self.jwks.lock().unwrap() =
                json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()});
        }

        fn set_jwks(&self, jwks: Value) {
            *self.jwks.lock().unwrap() = jwks;
        }

        fn fetches(&self) -> usize {
            self.jwks_fetches.load(Ordering::SeqCst)
        }

        fn verifier(&self) -> Verifier {
            self.verifier_timed(TIMING)
        }

        fn verifier_timed(&self, timing: Timing) -> Verifier {
            let config = OAuthConfig {
                issuer: ISSUER.to_owned(),
                audience: AUDIENCE.to_owned(),
                jwks_url: Some(Url::parse(&format!("{}/jwks", self.base())).unwrap()),
                subject_rate: None,
            };
            Verifier::with_timing(config, timing).unwrap()
        }
    }

    fn refused(result: Result<Verified, TokenError>, token: &str, why: &str) {
        match result {
            Err(TokenError::Invalid(reason)) => {
                assert!(reason.contains(why), "reason {reason:?}, expected {why:?}");
                // The reason is logged: it never carries the token or its signature.
                let signature = token.rsplit('.').next().unwrap_or(token);
                assert!(
                    !reason.contains(token) && (signature.len() < 8 || !reason.contains(signature))
                );
            }
            other => panic!("expected Invalid({why}), got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_valid_token_is_verified_for_each_key_type() {
        let keys = [
            TestKey::es256("p256"),
            TestKey::es384("p384"),
            TestKey::ed25519("ed"),
        ];
        let issuer = Issuer::start(&keys.iter().collect::<Vec<_>>()).await;
        let verifier = issuer.verifier();
        for key in &keys {
            let token = key.sign(&with(
                json!({"scp": ["perplexity:admin", "perplexity:search"]}),
            ));
            let verified = verifier.verify(&token).await.unwrap();
            assert_eq!(verified.issuer, ISSUER);
            assert_eq!(verified.subject, "alice");
            assert_eq!(
                verified.scopes,
                ["perplexity:search", "perplexity:fetch", "perplexity:admin"]
            );
        }
        // `scp` as one space-separated string (Entra ID), an `aud` array containing ours.
        let token = keys[0].sign(&with(json!({"scope": null, "scp": "perplexity:research",
                                               "aud": ["https://other.example", AUDIENCE]})));
        assert_eq!(
            verifier.verify(&token).await.unwrap().scopes,
            ["perplexity:research"]
        );
        assert_eq!(issuer.fetches(), 1, "one fetch for every token above");
    }

    #[tokio::test]
    async fn claims_are_checked_exactly() {
        let key = TestKey::es256("k1");
        let issuer = Issuer::start(&[&key]).await;
        let verifier = issuer.verifier();
        let cases = [
            (
                json!({"aud": "https://agent.example/mcp/"}),
                "wrong audience",
            ),
            (json!({"aud": ["https://other.example"]}), "wrong audience"),
            (json!({"aud": null}), "missing claim aud"),
            (json!({"aud": 7}), "aud"),
            (json!({"iss": "http://127.0.0.1/issuer/"}), "wrong issuer"),
            (json!({"iss": "http://127.0.0.1/other"}), "wrong issuer"),
            (json!({"iss": [ISSUER]}), "malformed"),
            (json!({"iss": null}), "missing claim iss"),
            (json!({"exp": now() - 120}), "expired"),
            (json!({"exp": null}), "missing claim exp"),
            (json!({"exp": "9999999999"}), "exp"),
            (json!({"nbf": now() + 120}), "not yet valid"),
            (json!({"nbf": "0"}), "nbf malformed"),
            (json!({"sub": null}), "missing claim sub"),
            (json!({"sub": ""}), "sub is empty"),
            (json!({"sub": "x".repeat(257)}), "too long"),
            (json!({"sub": "a\nb"}), "not printable"),
            (json!({"scope": ["perplexity:search"]}), "claims malformed"),
        ];
        for (overrides, why) in cases {
            let token = key.sign(&with(overrides.clone()));
            refused(verifier.verify(&token).await, &token, why);
        }
        // Inside the 60 s leeway both ways.
        let token = key.sign(&with(json!({"exp": now() - 30, "nbf": now() + 30})));
        assert!(verifier.verify(&token).await.is_ok());
        assert_eq!(issuer.fetches(), 1);
    }

    #[tokio::test]
    async fn forged_algorithms_are_refused() {
        let key = TestKey::es256("k1");
        let other = TestKey::es384("k384");
        let issuer = Issuer::start(&[&key, &other]).await;
        let verifier = issuer.verifier();
        let payload = B64.encode(claims().to_string());

        // alg: none, no signature.
        let none = format!(
            "{}.{payload}.",
            B64.encode(json!({"alg": "none", "kid": "k1"}).to_string())
        );
        refused(
            verifier.verify(&none).await,
            &none,
            "alg \"none\" is not accepted",
        );
        let none = format!(
            "{}.{payload}.",
            B64.encode(json!({"alg": "none"}).to_string())
        );
        refused(verifier.verify(&none).await, &none, "not accepted");

        // HS256 "signed" with the public key's bytes, in each form a verifier might use.
        let jwk_text = key.jwk().to_string();
        let secrets: [Vec<u8>; 3] = [
            key.public_bytes(),
            jwk_text.into_bytes(),
            B64.encode(key.public_bytes()).into_bytes(),
        ];
        for secret in secrets {
            for alg in ["HS256", "HS384", "HS512"] {
                let header = B64.encode(json!({"alg": alg, "kid": "k1"}).to_string());
                let input = format!("{header}.{payload}");
                let hmac = match alg {
                    "HS256" => ring::hmac::HMAC_SHA256,
                    "HS384" => ring::hmac::HMAC_SHA384,
                    _ => ring::hmac::HMAC_SHA512,
                };
                let tag = ring::hmac::sign(&ring::hmac::Key::new(hmac, &secret), input.as_bytes());
                let token = format!("{input}.{}", B64.encode(tag.as_ref()));
                refused(
                    verifier.verify(&token).await,
                    &token,
                    "asymmetric algorithms only",
                );
            }
        }

        // The header cannot choose another algorithm for the key: ES384 on the P-256 key,
        // EdDSA on it, and ES256 on the P-384 one.
        for (alg, kid) in [
            ("ES384", "k1"),
            ("EdDSA", "k1"),
            ("ES256", "k384"),
            ("RS256", "k1"),
        ] {
            let token = key.sign_with(json!({"alg": alg, "kid": kid}), &claims());
            refused(
                verifier.verify(&token).await,
                &token,
                "does not match the key",
            );
        }
        // A signature by another key under this kid.
        let impostor = TestKey::es256("k1");
        let token = impostor.sign(&claims());
        refused(verifier.verify(&token).await, &token, "bad signature");
        // A tampered payload.
        let token = key.sign(&claims());
        let mut parts: Vec<&str> = token.split('.').collect();
        let tampered_payload = B64.encode(with(json!({"sub": "mallory"})).to_string());
        parts[1] = &tampered_payload;
        let tampered = parts.join(".");
        refused(verifier.verify(&tampered).await, &tampered, "bad signature");
        // An unknown critical extension.
        let token = key.sign_with(
            json!({"alg": "ES256", "kid": "k1", "crit": ["exp-ext"], "exp-ext": 1}),
            &claims(),
        );
        assert!(matches!(
            verifier.verify(&token).await,
            Err(TokenError::Invalid(_))
        ));
        // Garbage.
        for junk in ["", "a.b", "a.b.c", "....", &"x".repeat(MAX_TOKEN_BYTES + 1)] {
            assert!(
                matches!(verifier.verify(junk).await, Err(TokenError::Invalid(_))),
                "{junk:.20}"
            );
        }
    }

    #[test]
    fn only_signing_keys_of_accepted_kinds_are_used() {
        let es = TestKey::es256("es");
        let mut enc = es.jwk();
        enc["use"] = json!("enc");
        enc["kid"] = json!("enc");
        let mut ops_sign_only = es.jwk();
        ops_sign_only["key_ops"] = json!(["sign"]);
        ops_sign_only["kid"] = json!("ops");
        let mut mislabelled = es.jwk();
        mislabelled["alg"] = json!("ES384");
        mislabelled["kid"] = json!("mis");
        let mut hs = es.jwk();
        hs["alg"] = json!("HS256");
        hs["kid"] = json!("hs");
        let doc = json!({"keys": [
            es.jwk(), enc, ops_sign_only, mislabelled, hs,
            {"kty": "oct", "kid": "oct", "k": "c2VjcmV0"},
            {"kty": "OKP", "crv": "X25519", "kid": "x", "x": B64.encode([0u8; 32])},
            {"kty": "EC", "crv": "P-521", "kid": "p521", "x": "AA", "y": "AA"},
            {"kty": "EC", "crv": "P-256", "kid": "short", "x": "AA", "y": "AA"},
            {"kty": "RSA", "kid": "rsa-enc-alg", "alg": "RSA-OAEP", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "kid": "rsa", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "kid": "ps", "alg": "PS256", "n": "AQAB", "e": "AQAB"},
            "not an object",
            {"kty": "RSA", "kid": 5, "n": "AQAB", "e": "AQAB"},
        ]});
        let keys = parse_jwks(&doc).unwrap();
        let kept: Vec<(Option<&str>, Algorithm)> =
            keys.iter().map(|k| (k.kid.as_deref(), k.alg)).collect();
        assert_eq!(
            kept,
            [
                (Some("es"), Algorithm::ES256),
                (Some("rsa"), Algorithm::RS256),
                (Some("ps"), Algorithm::PS256)
            ]
        );
        assert!(parse_jwks(&json!({"nokeys": []})).is_err());
    }

    #[tokio::test]
    async fn hs256_against_a_symmetric_jwk_is_still_refused() {
        // Even if an issuer publishes an `oct` key, no HS* token is ever accepted.
        let key = TestKey::es256("k1");
        let issuer = Issuer::start(&[&key]).await;
        issuer.set_jwks(json!({"keys": [key.jwk(), {"kty": "oct", "kid": "oct", "alg": "HS256", "k": B64.encode(b"secret")}]}));
        let verifier = issuer.verifier();
        let input = format!(
            "{}.{}",
            B64.encode(json!({"alg": "HS256", "kid": "oct"}).to_string()),
            B64.encode(claims().to_string())
        );
        let tag = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"secret"),
            input.as_bytes(),
        );
        let token = format!("{input}.{}", B64.encode(tag.as_ref()));
        refused(
            verifier.verify(&token).await,
            &token,
            "asymmetric algorithms only",
        );
    }

    #[tokio::test]
    async fn a_remembered_token_stops_working_once_its_key_is_withdrawn() {
        let old = TestKey::es256("old");
        let issuer = Issuer::start(&[&old]).await;
        let verifier = issuer.verifier();
        let token = old.sign(&claims());
        for _ in 0..3 {
            assert_eq!(
                verifier.verify(&token).await.map(|v| v.subject),
                Ok("alice".to_owned())
            );
        }
        assert_eq!(issuer.fetches(), 1);
        // The issuer withdraws the key; a token of the new one makes us refetch.
        let new = TestKey::ed25519("new");
        issuer.set_keys(&[&new]);
        assert!(verifier.verify(&new.sign(&claims())).await.is_ok());
        assert_eq!(issuer.fetches(), 2);
        // The very bytes verified before are judged again, and refused.
        refused(
            verifier.verify(&token).await,
            &token,
            "no key of the issuer has the token's kid",
        );
    }

    #[tokio::test]
    async fn an_unknown_kid_refetches_once_per_interval() {
        let old = TestKey::es256("old");
        let issuer = Issuer::start(&[&old]).await;
        let verifier = issuer.verifier();
        assert!(verifier.verify(&old.sign(&claims())).await.is_ok());
        assert_eq!(issuer.fetches(), 1);

        // Rotation: the new key works on its first token, after one refetch.
        let new = TestKey::ed25519("new");
        issuer.set_keys(&[&new]);
        assert!(verifier.verify(&new.sign(&claims())).await.is_ok());
        assert_eq!(issuer.fetches(), 2);
        // The old key is gone from the fetched set.
        let token = old.sign(&claims());
        refused(
            verifier.verify(&token).await,
            &token,
            "no key of the issuer has the token's kid",
        );

        // A flood of made-up kids, sequential and concurrent: no further fetch.
        for i in 0..50 {
            let token = old.sign_with(
                json!({"alg": "ES256", "kid": format!("made-up-{i}")}),
                &claims(),
            );
            refused(verifier.verify(&token).await, &token, "kid");
        }
        let verifier = Arc::new(verifier);
        let mut tasks = Vec::new();
        for i in 0..50 {
            let verifier = verifier.clone();
            let token = old.sign_with(
                json!({"alg": "ES256", "kid": format!("burst-{i}")}),
                &claims(),
            );
            tasks.push(tokio::spawn(async move { verifier.verify(&token).await }));
        }
        for task in tasks {
            assert!(matches!(task.await.unwrap(), Err(TokenError::Invalid(_))));
        }
        assert_eq!(
            issuer.fetches(),
            2,
            "a flood of unknown kids costs nothing within 30 s"
        );
        // Known keys keep working meanwhile.
        assert!(verifier.verify(&new.sign(&claims())).await.is_ok());
        assert_eq!(issuer.fetches(), 2);
    }

    #[tokio::test]
    async fn the_refetch_interval_reopens_and_the_ttl_refreshes() {
        let key = TestKey::es256("k1");
        let issuer = Issuer::start(&[&key]).await;
        let timing = Timing {
            ttl: Duration::from_millis(1500),
            kid_refetch: Duration::from_millis(1000),
            retry_after_failure: Duration::from_millis(100),
        };
        let verifier = issuer.verifier_timed(timing);
        assert!(verifier.verify(&key.sign(&claims())).await.is_ok());
        let unknown = key.sign_with(json!({"alg": "ES256", "kid": "nope"}), &claims());
        assert!(verifier.verify(&unknown).await.is_err());
        assert!(verifier.verify(&unknown).await.is_err());
        assert_eq!(issuer.fetches(), 2);
        tokio::time::sleep(Duration::from_millis(1050)).await;
        assert!(verifier.verify(&unknown).await.is_err());
        assert_eq!(
            issuer.fetches(),
            3,
            "one more refetch once the interval is over"
        );
        // Past the TTL a known kid refreshes the set once.
        tokio::time::sleep(Duration::from_millis(1550)).await;
        assert!(verifier.verify(&key.sign(&claims())).await.is_ok());
        assert!(verifier.verify(&key.sign(&claims())).await.is_ok());
        assert_eq!(issuer.fetches(), 4);
        // A failed refresh keeps the keys in hand: tokens are still judged.
        issuer.down.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(1550)).await;
        assert!(verifier.verify(&key.sign(&claims())).await.is_ok());
        let expired = key.sign(&with(json!({"exp": now() - 3600})));
        refused(verifier.verify(&expired).await, &expired, "expired");
    }

    #[tokio::test]
    async fn stale_keys_serve_while_another_verification_refreshes_them() {
        let key = TestKey::es256("k1");
        let issuer = Issuer::start(&[&key]).await;
        let timing = Timing {
            ttl: Duration::from_millis(200),
            retry_after_failure: Duration::from_millis(50),
            ..TIMING
        };
        let verifier = Arc::new(issuer.verifier_timed(timing));
        assert!(verifier.verify(&key.sign(&claims())).await.is_ok());
        tokio::time::sleep(Duration::from_millis(250)).await;
        issuer.slow.store(true, Ordering::SeqCst);
        let refreshing = {
            let verifier = verifier.clone();
            let token = key.sign(&claims());
            tokio::spawn(async move { verifier.verify(&token).await })
        };
        // Until the refresher's request is at the issuer (it holds the fetch lock).
        while issuer.fetches() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let started = Instant::now();
        assert!(verifier.verify(&key.sign(&claims())).await.is_ok());
        assert!(
            started.elapsed() < Duration::from_millis(400),
            "waited on the refresh"
        );
        assert!(refreshing.await.unwrap().is_ok());
        assert_eq!(issuer.fetches(), 2);
    }

    #[tokio::test]
    async fn concurrent_first_tokens_share_one_fetch() {
        let key = TestKey::es256("k1");
        let issuer = Issuer::start(&[&key]).await;
        let verifier = Arc::new(issuer.verifier());
        let mut tasks = Vec::new();
        for _ in 0..32 {
            let verifier = verifier.clone();
            let token = key.sign(&claims());
            tasks.push(tokio::spawn(async move { verifier.verify(&token).await }));
        }
        for task in tasks {
            assert!(task.await.unwrap().is_ok());
        }
        assert_eq!(issuer.fetches(), 1);
    }

    #[tokio::test]
    async fn no_keys_at_all_is_unavailable_and_retried_after_a_pause() {
        let key = TestKey::es256("k1");
        let issuer = Issuer::start(&[&key]).await;
        issuer.down.store(true, Ordering::SeqCst);
        let timing = Timing {
            retry_after_failure: Duration::from_millis(1000),
            ..TIMING
        };
        let verifier = issuer.verifier_timed(timing);
        let token = key.sign(&claims());
        for _ in 0..5 {
            match verifier.verify(&token).await {
                Err(TokenError::Unavailable(why)) => assert!(!why.contains(&token)),
                other => panic!("expected Unavailable, got {other:?}"),
            }
        }
        issuer.down.store(false, Ordering::SeqCst);
        assert!(
            matches!(
                verifier.verify(&token).await,
                Err(TokenError::Unavailable(_))
            ),
            "still pausing"
        );
        tokio::time::sleep(Duration::from_millis(1050)).await;
        assert!(verifier.verify(&token).await.is_ok());
        assert_eq!(
            issuer.fetches(),
            1,
            "the fetches while down failed before the count"
        );

        // Nothing listening at all.
        let closed = Verifier::new(OAuthConfig {
            issuer: ISSUER.to_owned(),
            audience: AUDIENCE.to_owned(),
            jwks_url: Some(Url::parse("http://127.0.0.1:9/jwks").unwrap()),
            subject_rate: None,
        })
        .unwrap();
        assert!(matches!(
            closed.verify(&token).await,
            Err(TokenError::Unavailable(_))
        ));
    }

    #[tokio::test]
    async fn an_oversized_jwks_is_refused() {
        let key = TestKey::es256("k1");
        let issuer = Issuer::start(&[&key]).await;
        let verifier = Verifier::new(OAuthConfig {
            issuer: ISSUER.to_owned(),
            audience: AUDIENCE.to_owned(),
            jwks_url: Some(Url::parse(&format!("{}/huge", issuer.base())).unwrap()),
            subject_rate: None,
        })
        .unwrap();
        match verifier.verify(&key.sign(&claims())).await {
            Err(TokenError::Unavailable(why)) => assert!(why.contains("larger than"), "{why}"),
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn keys_are_discovered_from_the_issuer_metadata() {
        let key = TestKey::es256("k1");
        let issuer = Issuer::start(&[&key]).await;
        let base = issuer.base();
        let tenant = format!("{base}/tenant");
        let config = |issuer: &str| OAuthConfig {
            issuer: issuer.to_owned(),
            audience: AUDIENCE.to_owned(),
            jwks_url: None,
            subject_rate: None,
        };
        let token_for = |iss: &str| key.sign(&with(json!({"iss": iss})));

        // RFC 8414 with the path inserted after the host.
        issuer.documents.lock().unwrap().push((
            "/.well-known/oauth-authorization-server/tenant".to_owned(),
            json!({"issuer": tenant, "jwks_uri": format!("{base}/jwks")}),
        ));
        let verifier = Verifier::new(config(&tenant)).unwrap();
        assert!(verifier.verify(&token_for(&tenant)).await.is_ok());

        // OpenID discovery, appended, for an issuer without a path.
        issuer.documents.lock().unwrap().push((
            "/.well-known/openid-configuration".to_owned(),
            json!({"issuer": base, "jwks_uri": format!("{base}/jwks")}),
        ));
        let verifier = Verifier::new(config(&base)).unwrap();
        assert!(verifier.verify(&token_for(&base)).await.is_ok());

        // A document naming another issuer, or a cleartext jwks_uri off loopback.
        let other = format!("{base}/other");
        issuer.documents.lock().unwrap().push((
            "/.well-known/oauth-authorization-server/other".to_owned(),
            json!({"issuer": "https://evil.example", "jwks_uri": format!("{base}/jwks")}),
        ));
        let verifier = Verifier::new(config(&other)).unwrap();
        match verifier.verify(&token_for(&other)).await {
            Err(TokenError::Unavailable(why)) => {
                assert!(why.contains("its issuer is not"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let plain = format!("{base}/plain");
        issuer.documents.lock().unwrap().push((
            "/.well-known/oauth-authorization-server/plain".to_owned(),
            json!({"issuer": plain, "jwks_uri": "http://keys.example/jwks"}),
        ));
        let verifier = Verifier::new(config(&plain)).unwrap();
        match verifier.verify(&token_for(&plain)).await {
            Err(TokenError::Unavailable(why)) => assert!(why.contains("is not https"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn discovery_urls_follow_rfc_8414_and_openid() {
        let urls = |i: &str| {
            discovery_urls(i)
                .unwrap()
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            urls("https://auth.example"),
            [
                "https://auth.example/.well-known/oauth-authorization-server",
                "https://auth.example/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            urls("https://auth.example/tenant/1/"),
            [
                "https://auth.example/.well-known/oauth-authorization-server/tenant/1",
                "https://auth.example/.well-known/openid-configuration/tenant/1",
                "https://auth.example/tenant/1/.well-known/openid-configuration"
            ]
        );
        assert!(fetchable(&Url::parse("https://keys.example/jwks").unwrap()));
        assert!(fetchable(
            &Url::parse("http://127.0.0.1:8080/jwks").unwrap()
        ));
        assert!(fetchable(&Url::parse("http://[::1]/jwks").unwrap()));
        assert!(!fetchable(&Url::parse("http://keys.example/jwks").unwrap()));
        assert!(!fetchable(&Url::parse("file:///etc/passwd").unwrap()));
        let cleartext = OAuthConfig {
            issuer: ISSUER.to_owned(),
            audience: AUDIENCE.to_owned(),
            jwks_url: Some(Url::parse("http://keys.example/jwks").unwrap()),
            subject_rate: None,
        };
        assert!(Verifier::new(cleartext).is_err());
    }

    #[test]
    fn metadata_is_the_rfc_9728_document() {
        let verifier = Verifier::new(OAuthConfig {
            issuer: ISSUER.to_owned(),
            audience: AUDIENCE.to_owned(),
            jwks_url: None,
            subject_rate: None,
        })
        .unwrap();
        assert_eq!(
            verifier.metadata(),
            json!({
                "resource": AUDIENCE,
                "authorization_servers": [ISSUER],
                "scopes_supported": ["perplexity:research", "perplexity:search", "perplexity:fetch",
                                     "perplexity:admin", "perplexity:gateway"],
                "bearer_methods_supported": ["header"],
                "resource_name": "perplexity-agent",
            })
        );
    }

    #[test]
    fn challenges_are_quoted() {
        let url = "https://agent.example/.well-known/oauth-protected-resource/mcp";
        assert_eq!(
            challenge(url, None),
            format!("Bearer resource_metadata=\"{url}\"")
        );
        assert_eq!(
            challenge(url, Some(("invalid_token", None))),
            format!("Bearer resource_metadata=\"{url}\", error=\"invalid_token\"")
        );
        assert_eq!(
            challenge(
                url,
                Some(("insufficient_scope", Some("perplexity:research")))
            ),
            format!(
                "Bearer resource_metadata=\"{url}\", error=\"insufficient_scope\", scope=\"perplexity:research\""
            )
        );
        assert_eq!(
            challenge("a\"b\\c\r\nd", None),
            "Bearer resource_metadata=\"a\\\"b\\\\cd\""
        );
    }

    #[test]
    fn scopes_map_to_tool_groups() {
        for (scope, groups) in SCOPES {
            assert!(
                crate::identity::Allowed::parse(&groups.join(",")).is_ok(),
                "{scope}"
            );
        }
        let access =
            |scopes: &[&str]| access_for(&scopes.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let search = access(&["perplexity:search", "unknown:scope"]);
        assert!(search.permits("perplexity_search") && search.permits("retrieve"));
        assert!(!search.permits("perplexity_agent") && !search.permits("fetch_url"));
        assert!(!search.permits("mcp__docs__read"));
        let research = access(&["perplexity:research"]);
        for tool in [
            "perplexity_agent",
            "perplexity_agent_result",
            "perplexity_agent_cancel",
            "perplexity_ask",
            "deep_research",
            "responses_create",
            "responses_retrieve",
            "finance_search",
        ] {
            assert!(research.permits(tool), "{tool}");
        }
        assert!(!research.permits("server_metrics") && !research.permits("perplexity_search"));
        let nothing = access(&[]);
        assert!(
            nothing.tools.is_some(),
            "no scope must never mean every tool"
        );
        assert!(nothing.permits("retrieve") && !nothing.permits("perplexity_search"));
        assert!(!access(&["PERPLEXITY:SEARCH", "perplexity:search "]).permits("perplexity_search"));
        assert!(access(&["perplexity:gateway"]).permits("mcp__docs__read"));
        assert!(access(&["perplexity:admin"]).permits("server_metrics"));

        assert_eq!(
            scope_for_tool("perplexity_agent"),
            Some("perplexity:research")
        );
        assert_eq!(
            scope_for_tool("finance_search"),
            Some("perplexity:research")
        );
        assert_eq!(
            scope_for_tool("perplexity_search"),
            Some("perplexity:search")
        );
        assert_eq!(scope_for_tool("fetch_url"), Some("perplexity:fetch"));
        assert_eq!(scope_for_tool("server_metrics"), Some("perplexity:admin"));
        assert_eq!(
            scope_for_tool("mcp__docs__read"),
            Some("perplexity:gateway")
        );
        assert_eq!(scope_for_tool("no_such_tool"), None);
        // Every tool of the registry is granted by some scope.
        for spec in crate::tools::registry::SPECS.iter() {
            let scope = scope_for_tool(spec.name).unwrap();
            assert!(access(&[scope]).permits(spec.name), "{}", spec.name);
        }
    }
}
