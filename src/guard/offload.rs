//! The output budget: a result longer than `PERPLEXITY_MAX_OUTPUT_CHARS` is returned cut,
//! with a visible marker and a `retrieve_key`; the full text waits in a small in-memory
//! cache (128 entries, least recently used out, one hour at most) for the `retrieve`
//! tool. The key is the capability: 96 random bits from the OS CSPRNG (24 lowercase hex
//! characters), never logged. With replicas, the state door keeps the full text for every
//! replica instead (`State::keep_cut`, same hour), so a key minted on one replica reads on
//! any; when it cannot, it is kept here, readable through this replica.

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

/// The first `keep` characters of `text`, with every spotlight wrapper that is open at
/// the cut closed again — wherever the wrapper starts (a notice line may come first, a
/// result may hold several) — so untrusted content never loses its closing delimiter.
/// No tag is ever shown in part. Returns the shown text and how many characters of
/// `text` it holds (where `retrieve` goes on).
fn cut_keeping_wrapper(text: &str, keep: usize) -> (String, usize) {
    let byte_at = |chars: usize| {
        text.char_indices()
            .nth(chars)
            .map_or(text.len(), |(i, _)| i)
    };
    let wrappers = wrappers_opened_before(text, byte_at(keep));
    // Room for every close that may be needed (tags are ASCII: bytes are characters).
    let room: usize = wrappers.iter().map(|w| w.close.len()).sum();
    let mut end = byte_at(keep.saturating_sub(room));
    // A cut through an opening line drops that line; one through a closing tag stops
    // before it (it is written whole below). Each move only shortens: repeat until none.
    loop {
        let before = end;
        for w in &wrappers {
            if w.start < end && end < w.body {
                end = w.start;
            }
            if let Some(at) = w.closed_at
                && at < end
                && end < at + w.close.len()
            {
                end = at;
            }
        }
        if end == before {
            break;
        }
    }
    let mut shown = text[..end].to_owned();
    // Innermost (latest opened) first.
    for w in wrappers.iter().rev() {
        let closed = w.closed_at.is_some_and(|at| at + w.close.len() <= end);
        if w.start < end && !closed {
            shown.push_str(&w.close);
        }
    }
    (shown, text[..end].chars().count())
}

/// One spotlight wrapper in a text: where its opening line starts, where its body
/// starts, its closing tag and where that is (byte offsets).
struct Wrapper {
    start: usize,
    body: usize,
    close: String,
    closed_at: Option<usize>,
}

/// The wrappers whose opening line starts before byte `limit`, in order.
fn wrappers_opened_before(text: &str, limit: usize) -> Vec<Wrapper> {
    const OPEN: &str = "<untrusted-web-content-";
    const NONCE: usize = 16;
    text.match_indices(OPEN)
        .map(|(at, _)| at)
        .take_while(|at| *at < limit)
        .filter(|at| *at == 0 || text.as_bytes().get(at - 1) == Some(&b'\n'))
        .filter_map(|at| {
            let rest = text.get(at + OPEN.len()..)?;
            let nonce = rest.get(..NONCE)?;
            let hex = nonce
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !hex || !rest[NONCE..].starts_with(">\n") {
                return None;
            }
            let body = at + OPEN.len() + NONCE + 2;
            let close = format!("\n</untrusted-web-content-{nonce}>");
            // The wrapping removed every copy of its own closing tag from the body, so
            // the first one after the opening line is the wrapper's.
            let closed_at = text[body - 1..].find(&close).map(|i| body - 1 + i);
            Some(Wrapper {
                start: at,
                body,
                close,
                closed_at,
            })
        })
        .collect()
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
    fn a_cut_closes_every_wrapper_open_at_it_whatever_comes_first() {
        let offload = Offload::new(1000);
        // A notice line before the wrapper, as a result with injection flags has.
        let notice = "Note: possible prompt injection patterns in this answer: fake-role-markup.\n";
        for body in ["é".repeat(5000), "x\n".repeat(3000)] {
            let full = format!("{notice}{}\n\nSources: a, b", spotlight(&body));
            let nonce = &full[notice.len() + 23..notice.len() + 39];
            let close = format!("</untrusted-web-content-{nonce}>");
            let mut out = ToolOutput::ok(full.clone());
            assert!(offload.apply(&mut out, "a"));
            assert!(out.text.chars().count() <= 1000);
            assert!(out.text.starts_with(notice));
            assert_eq!(out.text.matches(&close).count(), 1, "{}", out.text);
            assert!(
                out.text
                    .contains(&format!("\n{close}\n\n[Truncated: this result has ")),
                "{}",
                out.text
            );
        }
        // Every cut point of a short wrapped text: the close is there exactly once, no
        // tag is shown in part, and the shown part is the text's own prefix.
        let full = format!("{notice}{}\ntail", spotlight("abc"));
        let nonce = &full[notice.len() + 23..notice.len() + 39];
        let open = format!("<untrusted-web-content-{nonce}>");
        let close = format!("</untrusted-web-content-{nonce}>");
        for keep in 0..=full.chars().count() {
            let (shown, consumed) = cut_keeping_wrapper(&full, keep);
            assert!(
                shown.chars().count() <= keep.max(close.len() + 1),
                "{keep}: {shown}"
            );
            let prefix: String = full.chars().take(consumed).collect();
            assert!(shown.starts_with(&prefix), "{keep}");
            if shown.contains(&open) {
                assert_eq!(shown.matches(&close).count(), 1, "{keep}: {shown}");
                assert!(shown.find(&open) < shown.find(&close), "{keep}: {shown}");
            } else {
                assert!(
                    !shown.contains("<untrusted-web-content-"),
                    "{keep}: {shown}"
                );
                assert!(!shown.contains(&close), "{keep}: {shown}");
            }
        }
        // Two wrappers, the cut inside the second: only it needs closing.
        let two = format!("{}\n{}", spotlight("first"), spotlight(&"y".repeat(4000)));
        let mut out = ToolOutput::ok(two);
        assert!(offload.apply(&mut out, "a"));
        let opens = out.text.matches("\n<untrusted-web-content-").count() + 1;
        assert_eq!(out.text.matches("</untrusted-web-content-").count(), opens);
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
