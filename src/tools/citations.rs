//! Citations that resolve: an answer's `[n]` markers are checked against the sources it
//! came with, and a page returned under two numbers (or two spellings of one URL) is
//! listed once with every number that names it. A marker that points at no returned
//! source — cut away, or never there — is reported rather than left for a reader to
//! follow into nothing.

use std::collections::BTreeSet;

use serde_json::{Value, json};

/// The largest number read as a marker: a bracketed year (`[2024]`) is not a citation.
const MAX_MARKER: u64 = 999;

/// A source as shown: the number the answer's `[N]` markers use, title and URL, bounded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShownSource {
    pub number: u64,
    pub title: String,
    pub url: String,
}

/// A page as listed: every number the answer may use for it, ascending, and the title and
/// URL of the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub numbers: Vec<u64>,
    pub title: String,
    pub url: String,
}

/// The sources once per canonical URL, in the order of their lowest number.
pub fn pages(sources: &[ShownSource]) -> Vec<Page> {
    let mut pages: Vec<(String, Page)> = Vec::new();
    for source in sources {
        let canonical = canonical_url(&source.url);
        match pages.iter_mut().find(|(c, _)| *c == canonical) {
            Some((_, page)) => page.numbers.push(source.number),
            None => pages.push((
                canonical,
                Page {
                    numbers: vec![source.number],
                    title: source.title.clone(),
                    url: source.url.clone(),
                },
            )),
        }
    }
    pages
        .into_iter()
        .map(|(_, mut page)| {
            page.numbers.sort_unstable();
            page.numbers.dedup();
            page
        })
        .collect()
}

/// `\n\nSources:\n[1][4] <title> — <url>…`; empty without sources.
pub fn pages_block(pages: &[Page]) -> String {
    let mut block = String::new();
    if !pages.is_empty() {
        block.push_str("\n\nSources:\n");
        let lines: Vec<String> = pages
            .iter()
            .map(|p| format!("{} {} \u{2014} {}", markers_of(&p.numbers), p.title, p.url))
            .collect();
        block.push_str(&lines.join("\n"));
    }
    block
}

/// What an answer's markers point at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    /// Each cited page with the numbers the answer uses for it, in the order of the pages.
    pub cited: Vec<(Vec<u64>, Page)>,
    /// Markers that name no listed source, ascending.
    pub unresolved: Vec<u64>,
}

/// Matches every marker of `answer` to a page, or reports it.
pub fn resolve(answer: &str, pages: &[Page]) -> Resolved {
    let used = markers(answer);
    let cited = pages
        .iter()
        .filter_map(|page| {
            let numbers: Vec<u64> = page
                .numbers
                .iter()
                .copied()
                .filter(|n| used.contains(n))
                .collect();
            (!numbers.is_empty()).then(|| (numbers, page.clone()))
        })
        .collect();
    let unresolved = used
        .into_iter()
        .filter(|n| !pages.iter().any(|p| p.numbers.contains(n)))
        .collect();
    Resolved { cited, unresolved }
}

impl Resolved {
    /// `citations` (`{n, numbers, url, title}`: `n` the lowest number the answer uses for
    /// the page, `numbers` all of them) and `unresolved`, for `structuredContent`.
    pub fn as_json(&self) -> (Value, Value) {
        let cited = self
            .cited
            .iter()
            .map(|(numbers, page)| {
                json!({
                    "n": numbers.first(),
                    "numbers": numbers,
                    "url": page.url,
                    "title": page.title,
                })
            })
            .collect();
        (cited, json!(self.unresolved))
    }

    /// One line naming the markers that point nowhere, or `None` when every one resolves.
    pub fn note(&self) -> Option<String> {
        match self.unresolved.as_slice() {
            [] => None,
            [one] => Some(format!(
                "Unresolved citation: [{one}] names no source Perplexity returned."
            )),
            many => Some(format!(
                "Unresolved citations: {} name no source Perplexity returned.",
                many.iter()
                    .map(|n| format!("[{n}]"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

fn markers_of(numbers: &[u64]) -> String {
    numbers.iter().map(|n| format!("[{n}]")).collect()
}

/// The citation numbers an answer uses: `[3]`, and lists such as `[1, 2]`, outside code
/// (fenced blocks and inline code, where `a[1]` is an index, not a citation).
fn markers(answer: &str) -> BTreeSet<u64> {
    let mut found = BTreeSet::new();
    for (i, prose) in answer.split("```").enumerate() {
        // Odd pieces are inside a fence.
        if i % 2 == 1 {
            continue;
        }
        for (j, piece) in prose.split('`').enumerate() {
            if j % 2 == 0 {
                bracketed(piece, &mut found);
            }
        }
    }
    found
}

/// Adds the numbers of every `[n]` / `[n, m, …]` in `text`.
fn bracketed(text: &str, found: &mut BTreeSet<u64>) {
    for (i, _) in text.match_indices('[') {
        let after = &text[i + 1..];
        let Some(end) = after.find(']') else { break };
        let inside = &after[..end];
        let numbers: Option<Vec<u64>> = inside
            .split(',')
            .map(|n| {
                let n = n.trim();
                (!n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| n.parse::<u64>().ok())
                    .flatten()
                    .filter(|n| (1..=MAX_MARKER).contains(n))
            })
            .collect();
        found.extend(numbers.into_iter().flatten());
    }
}

/// The URL a page is known by: scheme and host lower-cased, the default port dropped (as
/// the URL standard does), the fragment, `utm_*` tracking parameters and a trailing `/`
/// dropped. A URL that does not parse is its own canonical form. One rule for every
/// place that asks whether two URLs are one page (citations here, `deep_research`'s
/// sources and claims).
pub fn canonical_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url.trim()) else {
        return url.trim().to_owned();
    };
    parsed.set_fragment(None);
    if let Some(query) = parsed.query().map(str::to_owned) {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| {
                let key = pair.split('=').next().unwrap_or_default();
                !key.is_empty() && !key.to_ascii_lowercase().starts_with("utm_")
            })
            .collect();
        parsed.set_query((!kept.is_empty()).then(|| kept.join("&")).as_deref());
    }
    parsed.to_string().trim_end_matches('/').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(number: u64, url: &str) -> ShownSource {
        ShownSource {
            number,
            title: format!("T{number}"),
            url: url.to_owned(),
        }
    }

    #[test]
    fn a_marker_with_no_source_is_unresolved() {
        let sources = [
            source(1, "https://a.org/"),
            source(2, "https://b.org/"),
            source(3, "https://c.org/"),
        ];
        let resolved = resolve("One[1][2], then five [5].", &pages(&sources));
        assert_eq!(resolved.unresolved, [5]);
        let cited: Vec<_> = resolved.cited.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(cited, [vec![1], vec![2]]);
        assert_eq!(
            resolved.note().as_deref(),
            Some("Unresolved citation: [5] names no source Perplexity returned.")
        );
        let (json, unresolved) = resolved.as_json();
        assert_eq!(
            json[0],
            json!({"n": 1, "numbers": [1], "url": "https://a.org/", "title": "T1"})
        );
        assert_eq!(unresolved, json!([5]));
        assert_eq!(resolve("[1]", &pages(&sources)).note(), None);
    }

    #[test]
    fn one_page_is_listed_once_with_its_numbers() {
        let sources = [
            source(1, "HTTPS://Example.ORG:443/a?utm_source=x&id=7#top"),
            source(2, "https://b.org/"),
            source(4, "https://example.org/a?id=7&utm_medium=y"),
        ];
        let listed = pages(&sources);
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].numbers, [1, 4]);
        assert_eq!(
            pages_block(&listed),
            "\n\nSources:\n[1][4] T1 \u{2014} HTTPS://Example.ORG:443/a?utm_source=x&id=7#top\n[2] T2 \u{2014} https://b.org/"
        );
        let resolved = resolve("Both [4] and [2].", &listed);
        assert_eq!(resolved.cited[0].0, [4]);
        assert!(resolved.unresolved.is_empty());
    }

    #[test]
    fn canonical_urls() {
        for (url, canonical) in [
            ("HTTP://A.org:80/x#f", "http://a.org/x"),
            (
                "https://a.org/x?utm_source=s&UTM_Campaign=c",
                "https://a.org/x",
            ),
            ("https://a.org:8443/X?b=1", "https://a.org:8443/X?b=1"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(canonical_url(url), canonical, "{url}");
        }
    }

    #[test]
    fn markers_in_prose_only() {
        let text = "Lists [1, 2] and [3]; code `a[4]` and\n```\nb[5]\n```\nyears [2024], links [x](y), empty [], zero [0] and [12].";
        assert_eq!(markers(text).into_iter().collect::<Vec<_>>(), [1, 2, 3, 12]);
    }
}
