//! The output budget: a result longer than `PERPLEXITY_MAX_OUTPUT_CHARS` is returned cut,
//! with a visible marker and a `retrieve_key`; the full text waits in a small in-memory
//! cache (128 entries, least recently used out, one hour at most) for the `retrieve`
//! tool. The key is the capability: 96 random bits from the OS CSPRNG (24 lowercase hex
//! characters), never logged. With replicas, the full text is kept in the shared backend
//! instead (`state/offload.rs`, same hour), so a key minted on one replica reads on any;
//! when the backend does not answer, it is kept here, readable through this replica.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::call::ToolOutput;
use crate::guard::spotlight::spotlight;

pub const CACHE_ENTRIES: usize = 128;
pub const TTL: Duration = Duration::from_secs(3600);
/// Room kept for the marker so a cut result stays within the budget.
const MARKER_ROOM: usize = 300;

/// A cut result's full text and the key it is kept under.
pub struct Kept {
    pub key: String,
    pub text: String,
}

struct Entry {
    key: String,
    /// Whose result it is: another caller's key reads as unknown.
    owner: String,
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
    /// `retrieve`. Returns whether it was cut. `structuredContent` is held to the same
    /// budget on its own (see [`fit_structured`]).
    pub fn apply(&self, output: &mut ToolOutput, owner: &str) -> bool {
        let (cut, kept) = self.cut(output);
        if let Some(kept) = kept {
            self.keep(kept, owner);
        }
        cut
    }

    /// [`Offload::apply`] without keeping: whether `output` was cut, and the full text
    /// to keep under its key (when the text was cut).
    pub fn cut(&self, output: &mut ToolOutput) -> (bool, Option<Kept>) {
        let structured_cut = output
            .structured
            .as_mut()
            .is_some_and(|s| fit_structured(s, self.max_chars));
        // The App's view is the structured content of the clients that host it: the
        // same budget, so it cannot carry what the cut text no longer does.
        let view_cut = output
            .view
            .as_mut()
            .is_some_and(|v| fit_structured(v, self.max_chars));
        let structured_cut = structured_cut || view_cut;
        let kept = self.cut_text(output);
        (kept.is_some() || structured_cut, kept)
    }

    fn cut_text(&self, output: &mut ToolOutput) -> Option<Kept> {
        let total = output.text.chars().count();
        if total <= self.max_chars {
            return None;
        }
        let key = new_key();
        let full = std::mem::take(&mut output.text);
        let shown = self.max_chars - MARKER_ROOM;
        let (cut, consumed) = cut_keeping_wrapper(&full, shown);
        output.text = format!(
            "{cut}\n\n[Truncated: this result has {total} characters and the first {consumed} are shown. Fetch the rest with retrieve(retrieve_key=\"{key}\", offset={consumed}) within one hour.]"
        );
        Some(Kept { key, text: full })
    }

    /// Keeps a cut result's full text in this process.
    pub fn keep(&self, kept: Kept, owner: &str) {
        let Kept { key, text } = kept;
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
            owner: owner.to_owned(),
            text,
            stored: now,
            used: now,
        });
    }

    /// A chunk of an offloaded result from `offset` (in characters), spotlighted: it
    /// may hold retrieved web content.
    /// Another caller's key answers exactly as a key that never existed.
    pub fn retrieve(&self, key: &str, offset: usize, owner: &str) -> Result<String, String> {
        let Ok(mut entries) = self.entries.lock() else {
            return Err(UNKNOWN_KEY.to_owned());
        };
        let now = Instant::now();
        entries.retain(|e| now.duration_since(e.stored) < TTL);
        let entry = entries
            .iter_mut()
            .find(|e| e.key == key && e.owner == owner)
            .ok_or_else(|| UNKNOWN_KEY.to_owned())?;
        entry.used = now;
        self.chunk(key, &entry.text, offset)
    }

    /// The chunk of `text` (kept under `key`) from `offset`, as `retrieve` answers it.
    pub fn chunk(&self, key: &str, text: &str, offset: usize) -> Result<String, String> {
        let total = text.chars().count();
        if offset >= total {
            return Err(format!(
                "'offset' is past the end: this result has {total} characters."
            ));
        }
        let room = self.max_chars - MARKER_ROOM * 2;
        let chunk: String = text.chars().skip(offset).take(room).collect();
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

/// Shrinks `value` until its JSON text has at most `max_chars` characters, keeping its
/// shape (so it still matches the tool's `outputSchema`): the longest strings are cut
/// first, to the longest length that fits, each ending in `…`; only if that is not
/// enough are arrays cut from the end (results are ranked, so the best stay). The full
/// data is in the text and its retrieve key. Returns whether anything was cut.
pub fn fit_structured(value: &mut Value, max_chars: usize) -> bool {
    let size = |v: &Value| v.to_string().chars().count();
    if size(value) <= max_chars {
        return false;
    }
    let longest = longest_string(value);
    let fits = |cap: usize| {
        let mut trial = value.clone();
        cap_strings(&mut trial, cap);
        size(&trial) <= max_chars
    };
    // The largest cap that fits: binary search over 0..=longest.
    let (mut low, mut high) = (0usize, longest);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if fits(mid) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    cap_strings(value, low);
    while size(value) > max_chars && halve_longest_array(value) {}
    true
}

fn longest_string(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count(),
        Value::Array(items) => items.iter().map(longest_string).max().unwrap_or(0),
        Value::Object(map) => map.values().map(longest_string).max().unwrap_or(0),
        _ => 0,
    }
}

fn cap_strings(value: &mut Value, cap: usize) {
    match value {
        Value::String(s) if s.chars().count() > cap => {
            let mut cut: String = s.chars().take(cap.saturating_sub(1)).collect();
            cut.push('…');
            *s = cut;
        }
        Value::Array(items) => items.iter_mut().for_each(|v| cap_strings(v, cap)),
        Value::Object(map) => map.values_mut().for_each(|v| cap_strings(v, cap)),
        _ => {}
    }
}

/// Halves the longest array anywhere in `value`; false when none has two items left.
fn halve_longest_array(value: &mut Value) -> bool {
    fn longest(value: &Value, at: String, best: &mut (usize, String)) {
        match value {
            Value::Array(items) => {
                if items.len() > best.0 {
                    *best = (items.len(), at.clone());
                }
                for (i, v) in items.iter().enumerate() {
                    longest(v, format!("{at}/{i}"), best);
                }
            }
            Value::Object(map) => {
                for (k, v) in map {
                    let k = k.replace('~', "~0").replace('/', "~1");
                    longest(v, format!("{at}/{k}"), best);
                }
            }
            _ => {}
        }
    }
    let mut best = (1, String::new());
    longest(value, String::new(), &mut best);
    match value.pointer_mut(&best.1) {
        Some(Value::Array(items)) if items.len() > 1 => {
            items.truncate(items.len() / 2);
            true
        }
        _ => false,
    }
}

fn new_key() -> String {
    crate::random::secure_hex::<12>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_content_is_cut_to_the_budget_in_its_shape() {
        let results: Vec<Value> = (0..50)
            .map(|i| serde_json::json!({"url": format!("https://e.org/{i}"), "snippet": "s".repeat(5000)}))
            .collect();
        let mut value = serde_json::json!({"results": results, "id": "search_1"});
        assert!(fit_structured(&mut value, 20_000));
        assert!(value.to_string().chars().count() <= 20_000);
        assert_eq!(
            value["results"].as_array().unwrap().len(),
            50,
            "strings first"
        );
        assert_eq!(value["results"][49]["url"], "https://e.org/49");
        assert!(
            value["results"][0]["snippet"]
                .as_str()
                .unwrap()
                .ends_with('…')
        );
        // Too many items for any string cut: arrays shrink from the end.
        let many: Vec<Value> = (0..10_000).map(|i| serde_json::json!({"n": i})).collect();
        let mut value = serde_json::json!({"results": many});
        assert!(fit_structured(&mut value, 5_000));
        assert!(value.to_string().chars().count() <= 5_000);
        assert_eq!(value["results"][0]["n"], 0);
        let nested: Vec<Value> = (0..10_000).map(|i| serde_json::json!(i)).collect();
        let mut value = serde_json::json!({"a": [[nested]]});
        assert!(fit_structured(&mut value, 1_000));
        assert!(value.to_string().chars().count() <= 1_000, "{value}");
        let mut small = serde_json::json!({"a": "b"});
        assert!(!fit_structured(&mut small, 5_000));
    }

    #[test]
    fn cuts_keep_the_wrapper_and_the_rest_is_retrievable() {
        let offload = Offload::new(1000);
        let body = "é".repeat(5000);
        let mut out = ToolOutput::ok(spotlight(&body));
        let full = out.text.clone();
        assert!(offload.apply(&mut out, "a"));
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
            let chunk = offload.retrieve(key, at, "a").unwrap();
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
            offload
                .retrieve("000000000000000000000000", 0, "a")
                .unwrap_err(),
            UNKNOWN_KEY
        );
        // Another caller's key is a key that never existed.
        assert_eq!(offload.retrieve(key, 0, "b").unwrap_err(), UNKNOWN_KEY);
        let mut small = ToolOutput::ok("short");
        assert!(!offload.apply(&mut small, "a"));
    }

    #[test]
    fn the_cache_is_bounded() {
        let offload = Offload::new(1000);
        let mut keys = Vec::new();
        for _ in 0..(CACHE_ENTRIES + 5) {
            let mut out = ToolOutput::ok("x".repeat(2000));
            offload.apply(&mut out, "a");
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
            offload.retrieve(&keys[0], 0, "a").is_err(),
            "the least recently used went first"
        );
        assert!(offload.retrieve(keys.last().unwrap(), 0, "a").is_ok());
    }
}
