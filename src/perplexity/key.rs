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

/// The key as the environment holds it now, for the two callers outside this module that
/// must look at it: `doctor` (judges its shape, never shows it) and `install
/// --with-key-from-env` (an export the user asked for). `None` when unset or blank.
pub fn from_env() -> Option<SecretString> {
    read().ok()
}

/// The secret values every writer scrubs — the audit log, each frame, each log line: the
/// key, when it is long enough to scrub without mangling text. Read at the first use and
/// kept: a process's environment changes only through the process itself, and nothing in
/// it sets this variable, so the value cannot differ from a per-use read (which cost a
/// lock, a scan of the environment and allocations for every frame written).
pub fn secrets_to_scrub() -> &'static [String] {
    static SECRETS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    SECRETS.get_or_init(|| {
        read()
            .ok()
            .map(|k| k.expose_secret().to_owned())
            .filter(|k| k.len() >= MIN_SCRUB_LEN)
            .into_iter()
            .collect()
    })
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

    /// Every string of a parsed document (keys included), in place: JSON escapes
    /// (`\u0070plx-…`) hide the key from the byte scrub, so what the upstream says is
    /// scrubbed again after decoding, before anything reads it. Nothing is allocated
    /// unless the key is found.
    pub(crate) fn value(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.key().is_none() {
            return;
        }
        match value {
            Value::String(s) => *s = self.text(std::mem::take(s)),
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => self.map(map),
            _ => {}
        }
    }

    /// [`Scrubber::value`] for an object.
    pub(crate) fn map(&self, map: &mut serde_json::Map<String, serde_json::Value>) {
        let Some(key) = self.key().map(String::from_utf8_lossy) else {
            return;
        };
        // Keys are rebuilt only when one holds the key (order kept).
        if map.keys().any(|k| k.contains(key.as_ref())) {
            *map = std::mem::take(map)
                .into_iter()
                .map(|(k, v)| (self.text(k), v))
                .collect();
        }
        map.values_mut().for_each(|v| self.value(v));
    }

    pub(crate) fn text(&self, text: String) -> String {
        let Some(key) = self.key().map(String::from_utf8_lossy) else {
            return text;
        };
        if text.contains(key.as_ref()) {
            text.replace(key.as_ref(), REDACTED)
        } else {
            text
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
        let mut decoded: serde_json::Value =
            serde_json::from_slice(&s.bytes(escaped.to_vec())).unwrap();
        s.value(&mut decoded);
        assert_eq!(
            decoded,
            serde_json::json!({"answer": "key [redacted]", "[redacted]": 1})
        );
        let short = Scrubber(SecretString::from("ab".to_owned()));
        assert_eq!(short.text("abab".into()), "abab");
    }
}
