//! The output budget: a result longer than `PERPLEXITY_MAX_OUTPUT_CHARS` is returned cut,
//! with a visible marker and a `retrieve_key`; the full text waits in a small in-memory
//! cache (128 entries, least recently used out, one hour at most) for the `retrieve`
//! tool. The key is the capability: 96 random bits from the OS CSPRNG (24 lowercase hex
//! characters), never logged.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::guard::spotlight::spotlight;
use crate::tools::ToolOutput;

pub const CACHE_ENTRIES: usize = 128;
pub const TTL: Duration = Duration::from_secs(3600);
/// Room kept for the marker so a cut result stays within the budget.
const MARKER_ROOM: usize = 300;

struct Entry {
    key: String,
    text: String,
    stored: Instant,
    used: Instant,
}

pub struct Offload {
    max_chars: usize,
    entries: Mutex<Vec<Entry>>,
}

impl Offload {
    pub fn new(max_chars: usize) -> Self {
        Offload {
            max_chars: max_chars.max(MARKER_ROOM * 2),
            entries: Mutex::new(Vec::new()),
        }
    }

    /// Cuts `output` to the budget when it is longer, keeping the full text for
    /// `retrieve`. Returns whether it was cut.
    pub fn apply(&self, output: &mut ToolOutput) -> bool {
        let total = output.text.chars().count();
        if total <= self.max_chars {
            return false;
        }
        let key = new_key();
        let full = std::mem::take(&mut output.text);
        let shown = self.max_chars - MARKER_ROOM;
        let (cut, consumed) = cut_keeping_wrapper(&full, shown);
        output.text = format!(
            "{cut}\n\n[Truncated: this result has {total} characters and the first {consumed} are shown. Fetch the rest with retrieve(retrieve_key=\"{key}\", offset={consumed}) within one hour.]"
        );
        self.store(key, full);
        true
    }

    fn store(&self, key: String, text: String) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let now = Instant::now();
        entries.retain(|e| now.duration_since(e.stored) < TTL);
        if entries.len() >= CACHE_ENTRIES
            && let Some(oldest) = entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.used)
                .map(|(i, _)| i)
        {
            entries.swap_remove(oldest);
        }
        entries.push(Entry {
            key,
            text,
            stored: now,
            used: now,
        });
    }

    /// A chunk of an offloaded result from `offset` (in characters), spotlighted: it
    /// may hold retrieved web content.
    pub fn retrieve(&self, key: &str, offset: usize) -> Result<String, String> {
        let Ok(mut entries) = self.entries.lock() else {
            return Err(UNKNOWN_KEY.to_owned());
        };
        let now = Instant::now();
        entries.retain(|e| now.duration_since(e.stored) < TTL);
        let entry = entries
            .iter_mut()
            .find(|e| e.key == key)
            .ok_or_else(|| UNKNOWN_KEY.to_owned())?;
        entry.used = now;
        let total = entry.text.chars().count();
        if offset >= total {
            return Err(format!(
                "'offset' is past the end: this result has {total} characters."
            ));
        }
        let room = self.max_chars - MARKER_ROOM * 2;
        let chunk: String = entry.text.chars().skip(offset).take(room).collect();
        let end = offset + chunk.chars().count();
        let mut text = spotlight(&chunk);
        text.push_str(&format!("\n\n[Characters {offset} to {end} of {total}."));
        if end < total {
            text.push_str(&format!(
                " Fetch more with retrieve(retrieve_key=\"{key}\", offset={end}).]"
            ));
        } else {
            text.push_str(" This is the end.]");
        }
        Ok(text)
    }
}

pub const UNKNOWN_KEY: &str = "Unknown or expired retrieve_key. Offloaded results are kept for one hour (at most 128 of them); run the original tool again.";

/// The first `keep` characters; when `text` is spotlighted, the cut happens inside the
/// wrapper and the wrapper is closed again, so untrusted content never loses its
/// closing delimiter.
/// Returns the shown text and how many characters of `text` it holds.
fn cut_keeping_wrapper(text: &str, keep: usize) -> (String, usize) {
    let nonce = text
        .lines()
        .next()
        .and_then(|first| first.strip_prefix("<untrusted-web-content-"))
        .and_then(|s| s.strip_suffix('>'));
    let Some(nonce) = nonce else {
        return (text.chars().take(keep).collect(), keep);
    };
    let close = format!("\n</untrusted-web-content-{nonce}>");
    let consumed = keep.saturating_sub(close.len());
    let inner: String = text.chars().take(consumed).collect();
    (format!("{inner}{close}"), consumed)
}

fn new_key() -> String {
    super::secure_hex::<12>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_keep_the_wrapper_and_the_rest_is_retrievable() {
        let offload = Offload::new(1000);
        let body = "é".repeat(5000);
        let mut out = ToolOutput::ok(spotlight(&body));
        let full = out.text.clone();
        assert!(offload.apply(&mut out));
        assert!(
            out.text.chars().count() <= 1000,
            "{}",
            out.text.chars().count()
        );
        let nonce = &full[23..39];
        let close = format!("</untrusted-web-content-{nonce}>");
        assert!(
            out.text
                .contains(&format!("\n{close}\n\n[Truncated: this result has "))
        );
        let key = out
            .text
            .split("retrieve_key=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert!(key.len() == 24 && key.bytes().all(|b| b.is_ascii_hexdigit()));
        let offset: usize = out
            .text
            .split("offset=")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        // Walking the chunks rebuilds the full text.
        let mut rebuilt: String = full.chars().take(offset).collect();
        let mut at = offset;
        loop {
            let chunk = offload.retrieve(key, at).unwrap();
            assert!(chunk.chars().count() <= 1000);
            let inner_end = chunk.rfind("\n</untrusted-web-content-").unwrap();
            let inner_start = chunk.find("\n\n").unwrap() + 2;
            let part = &chunk[inner_start..inner_end];
            rebuilt.push_str(part);
            at += part.chars().count();
            if chunk.ends_with("This is the end.]") {
                break;
            }
        }
        assert_eq!(rebuilt, full);
        assert_eq!(
            offload.retrieve("000000000000000000000000", 0).unwrap_err(),
            UNKNOWN_KEY
        );
        let mut small = ToolOutput::ok("short");
        assert!(!offload.apply(&mut small));
    }

    #[test]
    fn the_cache_is_bounded() {
        let offload = Offload::new(1000);
        let mut keys = Vec::new();
        for _ in 0..(CACHE_ENTRIES + 5) {
            let mut out = ToolOutput::ok("x".repeat(2000));
            offload.apply(&mut out);
            keys.push(
                out.text
                    .split("retrieve_key=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_owned(),
            );
        }
        assert_eq!(offload.entries.lock().unwrap().len(), CACHE_ENTRIES);
        assert!(
            offload.retrieve(&keys[0], 0).is_err(),
            "the least recently used went first"
        );
        assert!(offload.retrieve(keys.last().unwrap(), 0).is_ok());
    }
}
