//! Redaction for everything written to the audit log: secret-named keys lose their
//! values, and bearer tokens, `pplx-` keys and the configured secrets are scrubbed from
//! free text anywhere. The one place where redaction happens.

use std::borrow::Cow;
use std::sync::OnceLock;

use memchr::memmem;
use regex::Regex;
use serde_json::{Map, Value};

pub const REDACTED: &str = "***REDACTED***";

/// Key fragments whose values are secrets (case-insensitive).
const SECRET_KEY_PARTS: [&str; 7] = [
    "key",
    "token",
    "secret",
    "authorization",
    "password",
    "bearer",
    "cookie",
];

/// Count fields that merely contain "token" in their name.
const COUNT_FIELDS: [&str; 13] = [
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "max_tokens",
    "max_tokens_per_page",
    "input_tokens",
    "output_tokens",
    "max_output_tokens",
    "reasoning_tokens",
    "citation_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cached_tokens",
];

/// Anything shaped like a Perplexity key, for both scrubs.
fn pplx() -> &'static Regex {
    static PPLX: OnceLock<Regex> = OnceLock::new();
    PPLX.get_or_init(|| compile(r"pplx-[A-Za-z0-9]{8,}"))
}
const PPLX_REDACTED: &str = "pplx-***REDACTED***";

/// The audit log's bearer rule: stricter than the outbound one (any word after `Bearer`).
fn audit_bearer() -> &'static Regex {
    static BEARER: OnceLock<Regex> = OnceLock::new();
    BEARER.get_or_init(|| compile(r"(?i)(bearer)[ \t]+[^ \t\r\n]+"))
}

fn is_secret_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    !COUNT_FIELDS.contains(&lower.as_str()) && SECRET_KEY_PARTS.iter().any(|p| lower.contains(p))
}

/// Scrubs secrets out of free text: bearer tokens, `pplx-…` keys, and the exact values of
/// the configured `secrets`.
pub fn scrub_text(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for secret in secrets.iter().filter(|s| s.len() >= 8) {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    for (pattern, replacement) in [
        (audit_bearer(), "${1} ***REDACTED***"),
        (pplx(), PPLX_REDACTED),
    ] {
        if pattern.is_match(&out) {
            out = pattern.replace_all(&out, replacement).into_owned();
        }
    }
    out
}

/// The last line of defence, applied to every frame and log line as it is written
/// (after JSON encoding, so nothing can hide behind an escape): the configured `secrets`
/// (the API key, from `perplexity::key::secrets_to_scrub`),
/// anything shaped like a Perplexity key and bearer credentials become `REDACTED`,
/// whoever put them there — the upstream, a downstream server, or a client whose input
/// we echo. The patterns match only characters JSON text carries unescaped, so the
/// result stays valid JSON. Borrowed (no copy) when there is nothing to scrub.
pub fn scrub_outbound<'a>(text: &'a str, secrets: &[String]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for secret in secrets.iter().filter(|s| s.len() >= 8) {
        // The secret as JSON text writes it: the same, unless it holds `"`, `\` or
        // controls (only then is the encoded form worth building).
        let escaped = secret.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20);
        let encoded = escaped.then(|| serde_json::to_string(secret).unwrap_or_default());
        let encoded = encoded
            .as_deref()
            .and_then(|e| e.get(1..e.len().saturating_sub(1)));
        for form in std::iter::once(secret.as_str()).chain(encoded) {
            if memmem::find(out.as_bytes(), form.as_bytes()).is_some() {
                out = Cow::Owned(out.replace(form, REDACTED));
            }
        }
    }
    // Cheap literal scans first (SIMD, and no allocation): most frames hold neither, and
    // the patterns are only compiled (memory at start-up) once one is seen.
    if memmem::find(out.as_bytes(), b"pplx-").is_some()
        && let Cow::Owned(replaced) = pplx().replace_all(&out, PPLX_REDACTED)
    {
        out = Cow::Owned(replaced);
    }
    if holds_bearer(out.as_bytes()) {
        static BEARER: OnceLock<Regex> = OnceLock::new();
        let bearer =
            BEARER.get_or_init(|| compile(r"(?i-u)\b(bearer)[ \t]+([A-Za-z0-9._~+/-]{16,}=*)"));
        // A credential, not prose ("the bearer of …"): it has a digit in it.
        let replaced = bearer.replace_all(&out, |c: &regex::Captures| {
            if c[2].bytes().any(|b| b.is_ascii_digit()) {
                format!("{} {REDACTED}", &c[1])
            } else {
                c[0].to_owned()
            }
        });
        if let Cow::Owned(replaced) = replaced {
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// Whether `text` holds "bearer" in any case: a SIMD scan for its first letter, then the
/// five after it (a byte-by-byte window over every frame was a large share of the CPU a
/// `tools/list` costs).
fn holds_bearer(text: &[u8]) -> bool {
    memchr::memchr2_iter(b'b', b'B', text).any(|at| {
        text.get(at..at + 6)
            .is_some_and(|w| w.eq_ignore_ascii_case(b"bearer"))
    })
}

fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|_| unreachable!("constant pattern"))
}

/// A redacted copy of `value`, recursively.
pub fn redact(value: &Value, secrets: &[String]) -> Value {
    match value {
        Value::String(s) => Value::String(scrub_text(s, secrets)),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact(v, secrets)).collect()),
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let v = if is_secret_key(k) {
                    Value::String(REDACTED.to_owned())
                } else {
                    redact(v, secrets)
                };
                out.insert(scrub_text(k, secrets), v);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outbound_text_loses_key_shapes_and_stays_json() {
        let frame = json!({"error": {"message": "Unknown tool: pplx-ABCDEFGH12345678", "data": "Authorization: Bearer abcdef0123456789abcdef\"x"}}).to_string();
        let out = scrub_outbound(&frame, &[]);
        let parsed: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            parsed["error"]["message"],
            "Unknown tool: pplx-***REDACTED***"
        );
        assert_eq!(
            parsed["error"]["data"],
            "Authorization: Bearer ***REDACTED***\"x"
        );
        let prose = "the bearer of responsibilities and a pplx-api tool";
        assert!(matches!(scrub_outbound(prose, &[]), Cow::Borrowed(_)));
        let secret = ["planted-secret-value".to_owned()];
        assert_eq!(
            scrub_outbound("a planted-secret-value", &secret),
            format!("a {REDACTED}")
        );
    }

    #[test]
    fn bearer_is_found_in_any_case_and_at_either_end() {
        for text in ["Bearer", "x bEaReR", "BEARER y", "bb bearer"] {
            assert!(holds_bearer(text.as_bytes()), "{text}");
        }
        for text in ["", "beare", "b earer", "bearEs", "Bear"] {
            assert!(!holds_bearer(text.as_bytes()), "{text}");
        }
    }

    #[test]
    fn keys_and_strings() {
        let input = json!({
            "query": "my key is pplx-ABCDEFGH12345678, header Bearer abc.def.ghi",
            "Authorization": "x",
            "nested": {"client_secret": "y", "list": [{"api_key": 1}]},
            "usage": {"total_tokens": 5, "max_output_tokens": 7},
            "retrieve_key": "cap",
            "short": "pplx-abc"
        });
        let out = redact(&input, &["planted-secret-value".to_owned()]);
        assert_eq!(
            out["query"],
            "my key is pplx-***REDACTED***, header Bearer ***REDACTED***"
        );
        assert_eq!(out["Authorization"], REDACTED);
        assert_eq!(out["nested"]["client_secret"], REDACTED);
        assert_eq!(out["nested"]["list"][0]["api_key"], REDACTED);
        assert_eq!(out["usage"]["total_tokens"], 5);
        assert_eq!(out["usage"]["max_output_tokens"], 7);
        assert_eq!(out["retrieve_key"], REDACTED);
        assert_eq!(out["short"], "pplx-abc");
        assert_eq!(
            scrub_text(
                "a planted-secret-value b",
                &["planted-secret-value".to_owned()]
            ),
            "a ***REDACTED*** b"
        );
    }
}
