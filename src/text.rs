//! Bounding strings that came from outside, visibly. Every cut ends or is marked with
//! `…` (U+2026) and falls on a `char` boundary; lengths count Unicode scalar values,
//! as the reference peer counts Python code points.

pub const ELLIPSIS: char = '…';

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
