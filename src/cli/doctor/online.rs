//! `doctor --online`: the two questions only the API can answer — does the configured
//! base answer, and does it accept the key. Both go through the one Perplexity client
//! (`crate::perplexity`), so the base, the proxy and the egress policy are the ones every
//! other call uses: `GET /v1/models` (sent without the key), then a lookup of a run that
//! cannot exist, which a good key gets 404 for and a refused one 401 or 403. Neither
//! request is billed.

use std::time::Duration;

use tokio::time::Instant;

use super::Check;
use crate::config::Config;
use crate::perplexity::{ApiError, NetworkKind, PerplexityClient};

/// How long each request may take: a doctor that hangs on a dead host helps nobody.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A well-formed run id no run has: the lookup is the cheapest request that needs the key.
const PROBE_RUN_ID: &str = "resp_doctorProbe0000000000";
const API: &str = "Perplexity API";
const KEY: &str = "API key online";

pub(super) async fn checks(config: &Config, key_in_shell: bool) -> Vec<Check> {
    // One attempt each: doctor reports what happens now, and retries would only delay
    // the answer to "does it answer".
    let mut api = config.api.clone();
    api.max_attempts = 1;
    api.attempt_timeout = api.attempt_timeout.min(REQUEST_TIMEOUT);
    let base = config.api.base.as_str().trim_end_matches('/').to_owned();
    let client = match PerplexityClient::new(&api) {
        Ok(client) => client,
        Err(problem) => {
            return vec![
                Check::fail(API, problem).fix("fix PERPLEXITY_PROXY"),
                not_tried("the client could not be set up"),
            ];
        }
    };
    let deadline = || Instant::now() + REQUEST_TIMEOUT;
    let reached = match client.list_models(deadline()).await {
        Ok(models) if models.is_empty() => Check::warn(
            API,
            format!("{base} answers GET /v1/models, but lists no models"),
        )
        .fix("check that PERPLEXITY_API_BASE is Perplexity's API (unset, it is)"),
        Ok(models) => Check::ok(
            API,
            format!("{base} answers GET /v1/models ({} models)", models.len()),
        ),
        Err(e) => {
            return vec![unreachable(&base, &e), not_tried("the API did not answer")];
        }
    };
    if !key_in_shell {
        return vec![
            reached,
            Check::warn(
                KEY,
                "not tried: PERPLEXITY_API_KEY is not set in this shell (a key only in a client's entry is not sent from here)",
            )
            .fix("export PERPLEXITY_API_KEY=pplx-… and run doctor --online again"),
        ];
    }
    let key = match client.retrieve_run(PROBE_RUN_ID, deadline()).await {
        Ok(_) => accepted(),
        Err(e) if e.http_status() == Some(404) => accepted(),
        Err(e) => refused(&base, &e),
    };
    vec![reached, key]
}

fn accepted() -> Check {
    Check::ok(
        KEY,
        "accepted: a lookup of a run that does not exist was answered 404, as it is for a good key (nothing is billed)",
    )
}

fn not_tried(why: &str) -> Check {
    Check::warn(KEY, format!("not tried: {why}"))
}

/// The catalogue request failed: say which base, and what kind of failure, by kind only
/// (a transport's own message could echo headers).
fn unreachable(base: &str, error: &ApiError) -> Check {
    let fix = "check PERPLEXITY_API_BASE (unset, it is https://api.perplexity.ai), PERPLEXITY_PROXY and the network";
    let detail = match innermost(error) {
        ApiError::Network(kind) => format!(
            "{base} did not answer GET /v1/models ({}: {})",
            kind.as_str(),
            match kind {
                NetworkKind::Connect => "nothing listens there, or it cannot be reached",
                NetworkKind::Timeout => "no answer in time",
                NetworkKind::Tls => "the TLS handshake failed",
                NetworkKind::Io => "the connection broke",
            }
        ),
        ApiError::Status { code, .. } => {
            format!("{base} answered GET /v1/models with HTTP {code}: is it Perplexity's API?")
        }
        other => format!("{base}, GET /v1/models: {other}"),
    };
    Check::fail(API, detail).fix(fix)
}

/// The key request failed: refused, or something else worth a word.
fn refused(base: &str, error: &ApiError) -> Check {
    match error.http_status() {
        Some(code @ (401 | 403)) => Check::fail(
            KEY,
            format!("the key was refused (HTTP {code} from {base})"),
        )
        .fix("make a new key at https://www.perplexity.ai/account/api, export it, and install again with --with-key-from-env where a client's entry holds the old one"),
        _ => Check::fail(
            KEY,
            // Errors from the client are already scrubbed of the key.
            format!("the request with the key failed: {error}"),
        )
        .fix("run doctor --online again; if it persists, check PERPLEXITY_API_BASE and the network"),
    }
}

fn innermost(error: &ApiError) -> &ApiError {
    match error {
        ApiError::AttemptsExhausted { last, .. } | ApiError::DeadlineExceeded(last) => {
            innermost(last)
        }
        other => other,
    }
}
