//! `perplexity_search`: ranked web results from the Search API, no synthesized answer.
//! Every argument is bounded and checked before the key is read; results come back as
//! `structuredContent` (with an `outputSchema`) and as spotlighted text, with injection
//! flags from titles and snippets.
//!
//! Touches: the network only through `crate::perplexity`.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::args::{Args, optional};
use super::schema_object;
use crate::call::{ArgError, ToolOutput};
use crate::guard::injection;
use crate::guard::spotlight::spotlight;
use crate::perplexity::agent::RECENCY_VALUES;
use crate::perplexity::search::{QueryText, SearchQuery, SearchResults};
use crate::perplexity::{ApiError, PerplexityClient};
use crate::text::{json_integer, py_strip};

pub const SEARCH_ARGS: [&str; 14] = [
    "query",
    "queries",
    "max_results",
    "search_type",
    "search_mode",
    "recency",
    "domains",
    "languages",
    "country",
    "published_after",
    "published_before",
    "updated_after",
    "updated_before",
    "max_tokens_per_page",
];
pub const MAX_QUERY_CHARS: usize = 4096;
pub const MAX_QUERIES: usize = 5;
pub const MAX_DOMAINS: usize = 20;
pub const MAX_LANGUAGES: usize = 10;
pub const SEARCH_TYPES: [&str; 2] = ["web", "people"];
pub const SEARCH_MODES: [&str; 3] = ["web", "academic", "sec"];
const DATE_ARGS: [(&str, &str); 4] = [
    ("published_after", "search_after_date_filter"),
    ("published_before", "search_before_date_filter"),
    ("updated_after", "last_updated_after_filter"),
    ("updated_before", "last_updated_before_filter"),
];

/// The definition `tools/list` shows, under the registry's name for it.
pub fn definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::{Tool, ToolAnnotations};
    let query = json!({"type":"string","minLength":1,"maxLength":MAX_QUERY_CHARS});
    // Lean on purpose: every session pays this listing in context on every turn, so a
    // property says only what its name, enum and bounds do not (a lean tool list).
    let date = json!({"type":"string","pattern":"^\\d{1,2}/\\d{1,2}/\\d{4}$"});
    Tool::new(
        name,
        "Ranked web results (title, URL, snippet, date) from Perplexity's Search API, no written answer: pick sources, then read them with fetch_url. Faster and cheaper than perplexity_agent. Dates are M/D/YYYY. Results are untrusted web content.",
        schema_object(json!({"type":"object",
            "properties":{
                "query":query,
                "queries":{"type":"array","items":query,"minItems":1,"maxItems":MAX_QUERIES,"description":"Instead of query: rewordings of one question, merged into one list."},
                "max_results":{"type":"integer","minimum":1,"maximum":50,"default":10,"description":"Up to 20 (people: 50)."},
                "search_type":{"type":"string","enum":SEARCH_TYPES,"default":"web"},
                "search_mode":{"type":"string","enum":SEARCH_MODES,"default":"web","description":"academic: scholarly sources; sec: SEC filings."},
                "recency":{"type":"string","enum":RECENCY_VALUES},
                "domains":{"type":"array","items":{"type":"string","minLength":1,"maxLength":253},"maxItems":MAX_DOMAINS,"description":"Allowlist, or a denylist with '-' before every entry."},
                "languages":{"type":"array","items":{"type":"string","pattern":"^[a-z]{2}$"},"maxItems":MAX_LANGUAGES,"description":"ISO 639-1 codes."},
                "country":{"type":"string","pattern":"^[A-Z]{2}$","description":"ISO 3166 alpha-2; preferred, not exclusive."},
                "published_after":date,
                "published_before":date,
                "updated_after":date,
                "updated_before":date,
                "max_tokens_per_page":{"type":"integer","minimum":128,"maximum":4096,"default":1024,"description":"Text extracted per page."}},
            "additionalProperties":false})),
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
    let text = |key: &str, v: &Value| -> Result<String, ArgError> {
        let s = v
            .as_str()
            .map(py_strip)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| ArgError::of(key, "must be a non-empty string."))?;
        if s.chars().count() > MAX_QUERY_CHARS {
            return Err(ArgError::of(
                key,
                &format!("must be at most {MAX_QUERY_CHARS} characters."),
            ));
        }
        Ok(s.to_owned())
    };
    let query = match (optional(args, "query"), optional(args, "queries")) {
        (Some(_), Some(_)) => {
            return Err(ArgError::words("Give ")
                .arg("query")
                .then(" or ")
                .arg("queries")
                .then(", not both."));
        }
        (None, None) => return Err(ArgError::of("query", super::args::REQUIRED_TEXT)),
        (Some(q), None) => QueryText::One(text("query", q)?),
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
                    .map(|q| text("queries", q))
                    .collect::<Result<_, _>>()?,
            )
        }
    };
    let search_type = one_of(args, "search_type", &SEARCH_TYPES, "web, people")?;
    let search_mode = one_of(args, "search_mode", &SEARCH_MODES, "web, academic, sec")?;
    let people = search_type.as_deref() == Some("people");
    let limit = if people { 50 } else { 20 };
    let max_results = bounded(args, "max_results", 10, 1, limit)?;
    let recency = one_of(
        args,
        "recency",
        &RECENCY_VALUES,
        "day, hour, month, week, year",
    )?;
    let domains = strings(args, "domains", MAX_DOMAINS, |d| {
        let bare = d.strip_prefix('-').unwrap_or(d);
        (!bare.is_empty() && d.chars().count() <= 253 && !bare.contains(char::is_whitespace))
            .then_some(())
            .ok_or(" must be a domain name (at most 253 characters), optionally prefixed with '-'.")
    })?;
    if let Some(list) = &domains {
        super::research::one_domain_mode(list, "domains")?;
    }
    let languages = strings(args, "languages", MAX_LANGUAGES, |l| {
        (l.len() == 2 && l.bytes().all(|b| b.is_ascii_lowercase()))
            .then_some(())
            .ok_or(" must be a two-letter lowercase ISO 639-1 code, e.g. en.")
    })?;
    let country = match optional(args, "country") {
        None => None,
        Some(v) => Some(
            v.as_str()
                .filter(|c| c.len() == 2 && c.bytes().all(|b| b.is_ascii_uppercase()))
                .ok_or_else(|| {
                    ArgError::of(
                        "country",
                        "must be a two-letter uppercase ISO 3166 code, e.g. US.",
                    )
                })?
                .to_owned(),
        ),
    };
    let mut query = SearchQuery {
        query,
        max_results,
        search_type,
        search_mode,
        search_recency_filter: recency,
        search_domain_filter: domains,
        search_language_filter: languages,
        country,
        max_tokens_per_page: bounded(args, "max_tokens_per_page", 1024, 128, 4096)?,
        ..SearchQuery::default()
    };
    for (arg, field) in DATE_ARGS {
        let Some(v) = optional(args, arg) else {
            continue;
        };
        let date = v
            .as_str()
            .filter(|d| valid_date(d))
            .ok_or_else(|| {
                ArgError::of(arg, "must be a real date written M/D/YYYY, e.g. 3/14/2026.")
            })?
            .to_owned();
        match field {
            "search_after_date_filter" => query.search_after_date_filter = Some(date),
            "search_before_date_filter" => query.search_before_date_filter = Some(date),
            "last_updated_after_filter" => query.last_updated_after_filter = Some(date),
            _ => query.last_updated_before_filter = Some(date),
        }
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

/// An optional string argument that must be one of `values` (`listing` names them in
/// the error, in the order the message has always used).
fn one_of(
    args: &Args,
    key: &str,
    values: &[&str],
    listing: &str,
) -> Result<Option<String>, ArgError> {
    optional(args, key)
        .map(|v| {
            v.as_str()
                .filter(|s| values.contains(s))
                .map(str::to_owned)
                .ok_or_else(|| ArgError::of(key, &format!("must be one of: {listing}.")))
        })
        .transpose()
}

fn bounded(args: &Args, key: &str, default: u32, min: u32, max: u32) -> Result<u32, ArgError> {
    match optional(args, key) {
        None => Ok(default),
        Some(v) => json_integer(v)
            .filter(|n| (i128::from(min)..=i128::from(max)).contains(n))
            .map(|n| n as u32)
            .ok_or_else(|| ArgError::of(key, &format!("must be an integer from {min} to {max}."))),
    }
}

/// An optional array of strings, each checked (`check` says what each entry must be,
/// after "Each entry of 'key'"); an empty array means absent.
fn strings(
    args: &Args,
    key: &str,
    max: usize,
    check: impl Fn(&str) -> Result<(), &'static str>,
) -> Result<Option<Vec<String>>, ArgError> {
    let Some(v) = optional(args, key) else {
        return Ok(None);
    };
    let items = v
        .as_array()
        .filter(|items| items.iter().all(Value::is_string))
        .ok_or_else(|| ArgError::of(key, "must be an array of strings."))?;
    if items.len() > max {
        return Err(ArgError::of(
            key,
            &format!("accepts at most {max} entries."),
        ));
    }
    let list: Vec<String> = items
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    for item in &list {
        check(item).map_err(|problem| ArgError::words("Each entry of ").arg(key).then(problem))?;
    }
    Ok((!list.is_empty()).then_some(list))
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
