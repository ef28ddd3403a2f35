//! Bounding strings that came from outside, visibly. Every cut ends or is marked with
//! `…` (U+2026) and falls on a `char` boundary; lengths count Unicode scalar values,
//! as the reference peer counts Python code points.
//!
//! Beside them, the few JSON helpers every floor uses: a copy with sorted keys, an
//! integer as written, and an optional field set only when it is present.

pub const ELLIPSIS: char = '…';

/// Python's `str.strip()` for drop-in compatibility with the reference peer: Unicode
/// whitespace plus the ASCII separators U+001C–U+001F, which Python also strips (a
/// query of only those must not start a billable run).
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// A copy of `value` with every object's keys in sorted order and every string passed
/// through `string`: one form for values that must compare or hash alike whatever order
/// their keys came in.
pub fn sorted_json(
    value: &serde_json::Value,
    string: &impl Fn(&str) -> String,
) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted_json(&map[k], string)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| sorted_json(v, string)).collect()),
        Value::String(s) => Value::String(string(s)),
        other => other.clone(),
    }
}

/// Sets `key` to `value` when there is one: an optional field left out stays out rather
/// than written as `null`. For a JSON object, or a value that is one.
pub trait PutSome {
    fn put_some<T: serde::Serialize>(&mut self, key: &str, value: Option<T>);
}

impl PutSome for serde_json::Map<String, serde_json::Value> {
    fn put_some<T: serde::Serialize>(&mut self, key: &str, value: Option<T>) {
        if let Some(value) = value {
            self.insert(key.to_owned(), serde_json::json!(value));
        }
    }
}

impl PutSome for serde_json::Value {
    fn put_some<T: serde::Serialize>(&mut self, key: &str, value: Option<T>) {
        if let Some(value) = value {
            self[key] = serde_json::json!(value);
        }
    }
}

/// A JSON number written as an integer literal (no fraction, no exponent), as its
/// value: `Some(i128)`, saturating for literals beyond the i128 range. Needs
/// serde_json's `arbitrary_precision`, which keeps numbers as written (ids beyond 64
/// bits are echoed exactly, never as floats).
pub fn json_integer(value: &serde_json::Value) -> Option<i128> {
    let serde_json::Value::Number(n) = value else {
        return None;
    };
    let text = n.to_string();
    if text.contains(['.', 'e', 'E']) {
        return None;
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let magnitude = digits.parse::<i128>().unwrap_or(i128::MAX);
    Some(if negative { -magnitude } else { magnitude })
}

/// The strings of a JSON array (other values skipped; not an array: none).
pub fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(serde_json::Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Untrusted text made safe to show on one line of a terminal or a message: control
/// characters (an escape sequence could retitle a window, move the cursor or write the
/// clipboard; a newline could forge another line) and bidirectional overrides (which
/// reorder what is shown) become U+FFFD.
pub fn inert_line(text: &str) -> String {
    text.chars().map(inert_char).collect()
}

/// One character of [`inert_line`].
pub fn inert_char(c: char) -> char {
    match c {
        c if c.is_control() => '\u{FFFD}',
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => '\u{FFFD}',
        c => c,
    }
}

/// At most `max` chars: the first `max - 1` and `…` when longer.
pub fn cap_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some(_) => {
            let keep = max.saturating_sub(1);
            let end = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
            let mut out = String::with_capacity(end + ELLIPSIS.len_utf8());
            out.push_str(&s[..end]);
            out.push(ELLIPSIS);
            out
        }
    }
}

/// At most `max` chars keeping both ends (2/3 head, 1/3 tail around `…`), so long URLs
/// from one site stay distinguishable.
pub fn cap_keep_ends(s: &str, max: usize) -> String {
    let count = s.chars().count();
    if count <= max {
        return s.to_owned();
    }
    let keep = max.saturating_sub(1);
    let head = keep - keep / 3;
    let tail = keep - head;
    let head_end = s.char_indices().nth(head).map_or(s.len(), |(i, _)| i);
    let tail_start = s
        .char_indices()
        .nth(count - tail)
        .map_or(s.len(), |(i, _)| i);
    let mut out = String::with_capacity(head_end + 3 + (s.len() - tail_start));
    out.push_str(&s[..head_end]);
    out.push(ELLIPSIS);
    out.push_str(&s[tail_start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_strip_and_integers() {
        assert_eq!(py_strip("\u{1c}\u{1d} x \u{1e}\u{1f}\u{3000}"), "x");
        assert_eq!(py_strip(" \t\n"), "");
        let int = |t: &str| json_integer(&serde_json::from_str(t).unwrap());
        assert_eq!(int("5"), Some(5));
        assert_eq!(int("-0"), Some(0));
        assert_eq!(int("18446744073709551616"), Some(18446744073709551616));
        assert_eq!(int("1e400"), None);
        assert_eq!(int("5.0"), None);
        assert_eq!(int("\"5\""), None);
        assert_eq!(int(&"9".repeat(60)), Some(i128::MAX));
    }

    #[test]
    fn caps() {
        assert_eq!(cap_chars("abc", 3), "abc");
        assert_eq!(cap_chars("abcd", 3), "ab…");
        assert_eq!(cap_chars("ééééé", 3), "éé…");
        assert_eq!(cap_chars(&"x".repeat(501), 500).chars().count(), 500);
    }

    #[test]
    fn url_keeps_both_ends() {
        let url = format!("https://example.org/{}END", "a".repeat(3000));
        let cut = cap_keep_ends(&url, 2000);
        assert_eq!(cut.chars().count(), 2000);
        assert!(cut.starts_with("https://example.org/aaa"));
        assert!(cut.ends_with("aaEND"));
        let head: String = cut.chars().take(1333).collect();
        assert_eq!(cut.chars().nth(1333), Some('…'));
        assert_eq!(head, url.chars().take(1333).collect::<String>());
        assert_eq!(cut.chars().skip(1334).count(), 666);
        assert_eq!(cap_keep_ends("short", 2000), "short");
    }
}
