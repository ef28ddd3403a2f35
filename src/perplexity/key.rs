//! Reads the API key — at call time, never at startup, so `tools/list` and validation
//! errors work without one and a key added to the environment later is picked up —
//! and scrubs it from anything the upstream sends back, in case a proxy or error page
//! ever echoes the request's headers.

use secrecy::zeroize::Zeroizing;
use secrecy::{ExposeSecret, SecretString};

use super::error::ApiError;

/// Shorter keys are not scrubbed: replacing a two-letter string would mangle answers,
/// and no real key is that short.
const MIN_SCRUB_LEN: usize = 8;
pub const REDACTED: &str = "[redacted]";

/// `PERPLEXITY_API_KEY`, trimmed. Missing or blank is an error, never an empty header.
pub(super) fn read() -> Result<SecretString, ApiError> {
    let raw = Zeroizing::new(std::env::var("PERPLEXITY_API_KEY").unwrap_or_default());
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(ApiError::MissingKey);
    }
    Ok(SecretString::from(trimmed.to_owned()))
}

/// Removes the key from upstream bytes before anything else reads them.
#[derive(Clone)]
pub(crate) struct Scrubber(SecretString);

impl Scrubber {
    pub(super) fn new(key: &SecretString) -> Self {
        Scrubber(key.clone())
    }

    fn key(&self) -> Option<&[u8]> {
        let key = self.0.expose_secret().as_bytes();
        (key.len() >= MIN_SCRUB_LEN).then_some(key)
    }

    pub(crate) fn bytes(&self, body: Vec<u8>) -> Vec<u8> {
        let Some(key) = self.key() else { return body };
        if !body.windows(key.len()).any(|w| w == key) {
            return body;
        }
        let mut out = Vec::with_capacity(body.len());
        let mut i = 0;
        while i < body.len() {
            if body[i..].starts_with(key) {
                out.extend_from_slice(REDACTED.as_bytes());
                i += key.len();
            } else {
                out.push(body[i]);
                i += 1;
            }
        }
        out
    }

    /// Every string of a parsed document (keys included): JSON escapes (`\u0070plx-…`)
    /// hide the key from the byte scrub, so what the upstream says is scrubbed again
    /// after decoding, before anything reads it.
    pub(crate) fn value(&self, value: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        if self.key().is_none() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.text(k), self.value(v)))
                    .collect(),
            ),
            other => other,
        }
    }

    pub(crate) fn text(&self, text: String) -> String {
        match self.key() {
            Some(key) => {
                let key = String::from_utf8_lossy(key);
                if text.contains(key.as_ref()) {
                    text.replace(key.as_ref(), REDACTED)
                } else {
                    text
                }
            }
            None => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_the_key_only() {
        let s = Scrubber(SecretString::from("pplx-secret-123".to_owned()));
        assert_eq!(
            s.bytes(b"a pplx-secret-123 b pplx-secret-123".to_vec()),
            b"a [redacted] b [redacted]"
        );
        assert_eq!(s.text("x pplx-secret-123".into()), "x [redacted]");
        assert_eq!(s.bytes(b"clean".to_vec()), b"clean");
        // The key written with JSON escapes survives the byte scrub; decoding exposes it.
        let escaped = br#"{"answer":"key \u0070plx-secret-123","\u0070plx-secret-123":1}"#;
        let decoded: serde_json::Value =
            serde_json::from_slice(&s.bytes(escaped.to_vec())).unwrap();
        assert_eq!(
            s.value(decoded),
            serde_json::json!({"answer": "key [redacted]", "[redacted]": 1})
        );
        let short = Scrubber(SecretString::from("ab".to_owned()));
        assert_eq!(short.text("abab".into()), "abab");
    }
}
