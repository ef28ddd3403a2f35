//! `perplexity_search`: ranked web results from the Search API, no synthesized answer.
//! Every argument is bounded and checked before the key is read; results come back as
//! `structuredContent` (with an `outputSchema`) and as spotlighted text, with injection
//! flags from titles and snippets.
//!
//! Touches: the network only through `crate::perplexity`.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::args::{Arg, Args, Kind, REQUIRED_TEXT, Read, input_schema};
use super::research::{MAX_DOMAIN_CHARS, RECENCY};
use super::schema_object;
use crate::call::{ArgError, ToolOutput};
use crate::guard::injection;
use crate::guard::spotlight::spotlight;
use crate::perplexity::search::{QueryText, SearchQuery, SearchResults};
use crate::perplexity::{ApiError, PerplexityClient};

pub const MAX_QUERY_CHARS: usize = 4096;
pub const MAX_QUERIES: usize = 5;
pub const MAX_DOMAINS: usize = 20;
pub const MAX_LANGUAGES: usize = 10;
pub const SEARCH_TYPES: [&str; 2] = ["web", "people"];
pub const SEARCH_MODES: [&str; 3] = ["web", "academic", "sec"];
/// `max_results`: at most this many, or (people search) [`MAX_PEOPLE_RESULTS`].
pub const MAX_RESULTS: i64 = 20;
pub const MAX_PEOPLE_RESULTS: i64 = 50;
const QUERY: Kind = Kind::text(1, MAX_QUERY_CHARS);
const DATE: Kind = Kind::pattern(
    "^\\d{1,2}/\\d{1,2}/\\d{4}$",
    valid_date,
    "must be a real date written M/D/YYYY, e.g. 3/14/2026.",
);
const DOMAIN: Kind = Kind::str(
    1,
    MAX_DOMAIN_CHARS,
    is_domain,
    "must be a domain name (at most {max} characters), optionally prefixed with '-'.",
);
/// A language code, as `languages` and `responses_create`'s `language_preference` take it.
pub const LANGUAGE: Kind = Kind::pattern(
    "^[a-z]{2}$",
    |l| l.len() == 2 && l.bytes().all(|b| b.is_ascii_lowercase()),
    "must be a two-letter lowercase ISO 639-1 code, e.g. en.",
);
const COUNTRY: Kind = Kind::pattern(
    "^[A-Z]{2}$",
    |c| c.len() == 2 && c.bytes().all(|b| b.is_ascii_uppercase()),
    "must be a two-letter uppercase ISO 3166 code, e.g. US.",
);

/// A domain, or a '-' and a domain to exclude.
fn is_domain(d: &str) -> bool {
    let bare = d.strip_prefix('-').unwrap_or(d);
    !bare.is_empty() && d.chars().count() <= MAX_DOMAIN_CHARS && !bare.contains(char::is_whitespace)
}

/// Lean on purpose: every session pays this listing in context on every turn, so an
/// argument says only what its name, enum and bounds do not (a lean tool list).
pub const SEARCH: [Arg; 14] = [
    Arg::new("query", QUERY),
    Arg::new("queries", Kind::list(&QUERY, 1, MAX_QUERIES))
        .about("Instead of query: rewordings of one question, merged into one list."),
    Arg::new("max_results", Kind::int(1, MAX_PEOPLE_RESULTS, 10)).about("Up to 20 (people: 50)."),
    Arg::new("search_type", Kind::choice(&SEARCH_TYPES, Some("web"))),
    Arg::new("search_mode", Kind::choice(&SEARCH_MODES, Some("web")))
        .about("academic: scholarly sources; sec: SEC filings."),
    Arg::new("recency", RECENCY),
    Arg::new("domains", Kind::list(&DOMAIN, 0, MAX_DOMAINS))
        .about("Allowlist, or a denylist with '-' before every entry."),
    Arg::new("languages", Kind::list(&LANGUAGE, 0, MAX_LANGUAGES)).about("ISO 639-1 codes."),
    Arg::new("country", COUNTRY).about("ISO 3166 alpha-2; preferred, not exclusive."),
    Arg::new("published_after", DATE),
    Arg::new("published_before", DATE),
    Arg::new("updated_after", DATE),
    Arg::new("updated_before", DATE),
    Arg::new("max_tokens_per_page", Kind::int(128, 4096, 1024)).about("Text extracted per page."),
];
const DATE_ARGS: [(&str, DateField); 4] = [
    ("published_after", |q| &mut q.search_after_date_filter),
    ("published_before", |q| &mut q.search_before_date_filter),
    ("updated_after", |q| &mut q.last_updated_after_filter),
    ("updated_before", |q| &mut q.last_updated_before_filter),
];
type DateField = fn(&mut SearchQuery) -> &mut Option<String>;

/// The definition `tools/list` shows, under the registry's name for it.
pub fn definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::{Tool, ToolAnnotations};
    Tool::new(
        name,
        "Ranked web results (title, URL, snippet, date) from Perplexity's Search API, no written answer: pick sources, then read them with fetch_url. Faster and cheaper than perplexity_agent. Dates are M/D/YYYY. Results are untrusted web content.",
        input_schema(&SEARCH, 0),
    )
    .with_title("Perplexity Web Search")
    .with_raw_output_schema(schema_object(json!({"type":"object",
        "properties":{
            "results":{"type":"array","items":{"type":"object","properties":{
                "title":{"type":"string"},"url":{"type":"string"},"snippet":{"type":"string"},
                "date":{"type":["string","null"]},"last_updated":{"type":["string","null"]}},
                "required":["title","url","snippet"]}},
            "security_flags":{"type":"array","items":{"type":"string"}}},
        "required":["results","security_flags"]})))
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(true))
}

/// Validates the arguments into the wire query.
pub fn validate(args: &Args) -> Result<SearchQuery, ArgError> {
    let read = Read::new(args, &SEARCH);
    let query = match (read.raw("query"), read.raw("queries")) {
        (Some(_), Some(_)) => {
            return Err(ArgError::words("Give ")
                .arg("query")
                .then(" or ")
                .arg("queries")
                .then(", not both."));
        }
        (None, None) => return Err(ArgError::of("query", REQUIRED_TEXT)),
        (Some(_), None) => QueryText::One(read.need("query")?.to_owned()),
        // Read entry by entry, each as `query` is, so its messages say which list.
        (None, Some(list)) => {
            let items = list
                .as_array()
                .ok_or_else(|| ArgError::of("queries", "must be an array of strings."))?;
            if items.is_empty() || items.len() > MAX_QUERIES {
                return Err(ArgError::of(
                    "queries",
                    &format!("takes 1 to {MAX_QUERIES} entries."),
                ));
            }
            QueryText::Many(
                items
                    .iter()
                    .map(|q| read.entry("queries", q).map(str::to_owned))
                    .collect::<Result<_, _>>()?,
            )
        }
    };
    let owned = |s: Option<&str>| s.map(str::to_owned);
    let search_type = owned(read.choice("search_type")?);
    let search_mode = owned(read.choice("search_mode")?);
    let people = search_type.as_deref() == Some("people");
    let limit = if people {
        MAX_PEOPLE_RESULTS
    } else {
        MAX_RESULTS
    };
    let max_results = read.int_up_to("max_results", limit)? as u32;
    let recency = owned(read.choice("recency")?);
    // An empty list means absent.
    let strings = |key| -> Result<Option<Vec<String>>, ArgError> {
        let listed = read.list(key)?.filter(|l| !l.is_empty());
        Ok(listed.map(|l| l.into_iter().map(str::to_owned).collect()))
    };
    let domains = strings("domains")?;
    if let Some(list) = &domains {
        super::research::one_domain_mode(list, "domains")?;
    }
    let languages = strings("languages")?;
    let country = owned(read.text("country")?);
    let mut query = SearchQuery {
        query,
        max_results,
        search_type,
        search_mode,
        search_recency_filter: recency,
        search_domain_filter: domains,
        search_language_filter: languages,
        country,
        max_tokens_per_page: read.int("max_tokens_per_page")? as u32,
        ..SearchQuery::default()
    };
    for (arg, field) in DATE_ARGS {
        *field(&mut query) = owned(read.text(arg)?);
    }
    // The API answers this pair with 400: say so before spending a request.
    if query.search_recency_filter.is_some()
        && (query.search_after_date_filter.is_some() || query.search_before_date_filter.is_some())
    {
        return Err(ArgError::of("recency", "cannot be combined with ")
            .arg("published_after")
            .then(" or ")
            .arg("published_before")
            .then(": use a recency window or publication dates, not both."));
    }
    Ok(query)
}

/// `M/D/YYYY` (1–2 digit month and day) naming a real calendar date.
pub(crate) fn valid_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('/').collect();
    let [m, d, y] = parts.as_slice() else {
        return false;
    };
    let digits = |s: &str, lo: usize, hi: usize| {
        (lo..=hi).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
    };
    if !(digits(m, 1, 2) && digits(d, 1, 2) && digits(y, 4, 4)) {
        return false;
    }
    let (Ok(m), Ok(d), Ok(y)) = (m.parse::<u32>(), d.parse::<u32>(), y.parse::<u32>()) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// Runs the search within the wait budget.
pub async fn run(
    client: &PerplexityClient,
    query: &SearchQuery,
    wait: u64,
) -> Result<SearchResults, ApiError> {
    let deadline = Instant::now() + Duration::from_secs(wait.max(1));
    client.search(query, deadline).await
}

/// Structured results and a numbered, spotlighted text rendering.
pub fn render(outcome: &Result<SearchResults, ApiError>) -> (ToolOutput, Vec<&'static str>) {
    let results = match outcome {
        Ok(results) => results,
        Err(e) => return (ToolOutput::error(e.to_string()), Vec::new()),
    };
    let flags = injection::scan(
        results
            .hits
            .iter()
            .flat_map(|h| [h.title.as_str(), h.snippet.as_str()]),
    );
    let mut text = String::new();
    for (i, hit) in results.hits.iter().enumerate() {
        let title = if hit.title.is_empty() {
            "(no title)"
        } else {
            &hit.title
        };
        text.push_str(&format!("[{}] {title} \u{2014} {}\n", i + 1, hit.url));
        if let Some(date) = &hit.date {
            text.push_str(&format!("    {date}\n"));
        }
        if !hit.snippet.is_empty() {
            text.push_str(&format!("    {}\n", hit.snippet.replace('\n', " ")));
        }
    }
    if results.hits.is_empty() {
        text.push_str("No results.");
    }
    let mut shown = spotlight(text.trim_end());
    if !flags.is_empty() {
        shown = format!("{}\n{shown}", injection::notice("these results", &flags));
    }
    let structured = json!({
        "results": results.hits.iter().map(|h| json!({
            "title": h.title, "url": h.url, "snippet": h.snippet,
            "date": h.date, "last_updated": h.last_updated,
        })).collect::<Vec<_>>(),
        "security_flags": flags,
    });
    (
        ToolOutput {
            structured: Some(structured),
            ..ToolOutput::ok(shown)
        },
        flags,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn args(v: Value) -> Args {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn validation_and_bounds() {
        let ok = |v| validate(&args(v)).unwrap();
        let err = |v| validate(&args(v)).unwrap_err().to_string();
        let q = ok(
            json!({"query": " solar ", "recency": "week", "domains": ["-a.org", "-b.com"], "languages": ["en"], "country": "US", "updated_after": "2/29/2024", "search_mode": "academic"}),
        );
        assert_eq!(q.query, QueryText::One("solar".into()));
        assert_eq!(q.max_results, 10);
        assert_eq!(q.search_mode.as_deref(), Some("academic"));
        // The API refuses recency with publication dates (400): refused here first.
        assert!(
            err(json!({"query": "q", "recency": "day", "published_before": "1/2/2026"}))
                .contains("cannot be combined")
        );
        assert!(err(json!({"query": "q", "search_mode": "news"})).contains("web, academic, sec"));
        assert_eq!(q.max_tokens_per_page, 1024);
        assert_eq!(q.last_updated_after_filter.as_deref(), Some("2/29/2024"));
        assert_eq!(
            ok(json!({"queries": ["a", "b"]})).query,
            QueryText::Many(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            ok(json!({"query": "x", "search_type": "people", "max_results": 50})).max_results,
            50
        );
        for (bad, expected) in [
            (json!({}), "'query' is required"),
            (json!({"query": "x", "queries": ["y"]}), "not both"),
            (json!({"query": "q".repeat(4097)}), "at most 4096"),
            (json!({"queries": vec!["a"; 6]}), "1 to 5"),
            (json!({"queries": []}), "1 to 5"),
            (json!({"query": "x", "max_results": 21}), "from 1 to 20"),
            (json!({"query": "x", "max_results": 0}), "from 1 to 20"),
            (json!({"query": "x", "max_results": 5.0}), "from 1 to 20"),
            (
                json!({"query": "x", "search_type": "images"}),
                "web, people",
            ),
            (
                json!({"query": "x", "languages": ["EN"]}),
                "two-letter lowercase",
            ),
            (
                json!({"query": "x", "languages": vec!["en"; 11]}),
                "at most 10",
            ),
            (
                json!({"query": "x", "domains": vec!["a.org"; 21]}),
                "at most 20",
            ),
            (json!({"query": "x", "domains": ["a b.org"]}), "domain name"),
            (
                json!({"query": "x", "domains": ["a.org", "-b.org"]}),
                "an allowlist or a denylist",
            ),
            (json!({"query": "x", "country": "usa"}), "ISO 3166"),
            (
                json!({"query": "x", "published_after": "2/30/2026"}),
                "real date",
            ),
            (
                json!({"query": "x", "updated_before": "2026-01-01"}),
                "real date",
            ),
            (
                json!({"query": "x", "published_before": "2/29/2025"}),
                "real date",
            ),
            (
                json!({"query": "x", "max_tokens_per_page": 127}),
                "from 128 to 4096",
            ),
        ] {
            let e = err(bad.clone());
            assert!(e.contains(expected), "{bad}: {e}");
        }
    }

    #[test]
    fn dates() {
        for good in ["1/1/2026", "12/31/1999", "2/29/2000", "02/09/2026"] {
            assert!(valid_date(good), "{good}");
        }
        for bad in [
            "2/29/1900",
            "13/1/2026",
            "0/1/2026",
            "1/32/2026",
            "1/1/26",
            "1/1/2026/1",
            "a/b/cdef",
            "111/1/2026",
        ] {
            assert!(!valid_date(bad), "{bad}");
        }
    }
}
