//! `fetch_url`: read one or more web pages through the SSRF-guarded fetcher. Each URL
//! succeeds or fails on its own (one bad URL never fails the others); page text is
//! scanned for injection patterns and returned spotlighted, with the flags beside it.
//!
//! Touches: the network only through `crate::fetch`.

use futures_util::StreamExt;
use serde_json::json;

use super::args::{Arg, Args, Kind, Read, input_schema};
use super::schema_object;
use crate::call::{ArgError, ToolOutput};
use crate::fetch::{FetchError, Fetcher, Page};
use crate::guard::injection;
use crate::guard::spotlight::spotlight_page;

pub const MAX_URLS: usize = 10;
pub const MAX_URL_CHARS: usize = 2048;

/// A URL as given: its bounds are checked once `url` and `urls` are merged.
const URL: Kind = Kind::str(1, MAX_URL_CHARS, |_| true, "must be a string.");

pub const FETCH: [Arg; 3] = [
    Arg::new("url", URL),
    Arg::new("urls", Kind::list(&URL, 1, MAX_URLS))
        .about("Several pages (with url: at most max_urls in all)."),
    Arg::new("max_urls", Kind::int(1, MAX_URLS as i64, 1))
        .about("How many this call may read; a longer list is refused."),
];
/// Pages fetched at once within one call.
const CONCURRENCY: usize = 4;

/// The URLs of a validated call, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchCall {
    pub urls: Vec<String>,
}

/// The definition `tools/list` shows, under the registry's name for it.
pub fn definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::{Tool, ToolAnnotations};
    Tool::new(
        name,
        "Read web pages (http/https) as text with their title, e.g. a cited source. Private and cloud-metadata addresses are refused; page text comes back as untrusted data, prompt-injection patterns flagged. Each URL succeeds or fails on its own.",
        input_schema(&FETCH, 0),
    )
    .with_title("Fetch Web Pages")
    .with_raw_output_schema(schema_object(json!({"type":"object",
        "properties":{"results":{"type":"array","items":{"type":"object",
            "properties":{
                "url":{"type":"string"},
                "final_url":{"type":"string"},
                "status":{"type":"integer"},
                "title":{"type":["string","null"]},
                "text":{"type":"string"},
                "truncated":{"type":"boolean"},
                "fetched_bytes":{"type":"integer","minimum":0},
                "security_flags":{"type":"array","items":{"type":"string"}},
                "error":{"type":"object","properties":{"type":{"type":"string"},"message":{"type":"string"}},"required":["type","message"]}},
            "required":["url"]}}},
        "required":["results"]})))
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(true))
}

/// `url` and/or `urls` merged, 1–`max_urls` entries of at most 2,048 characters.
pub fn validate(args: &Args) -> Result<FetchCall, ArgError> {
    let read = Read::new(args, &FETCH);
    let mut urls: Vec<String> = read.text("url")?.into_iter().map(str::to_owned).collect();
    if let Some(listed) = read.list("urls")? {
        urls.extend(listed.into_iter().map(str::to_owned));
    }
    let max_urls = read.int("max_urls")? as usize;
    if urls.is_empty() {
        return Err(ArgError::words("Give ")
            .arg("url")
            .then(" or ")
            .arg("urls")
            .then(": the pages to read."));
    }
    if urls.len() > max_urls {
        return Err(ArgError::words(format!(
            "{} URLs given but max_urls is {max_urls}: raise max_urls (at most {MAX_URLS}) or send fewer.",
            urls.len()
        )));
    }
    if let Some(bad) = urls
        .iter()
        .find(|u| u.trim().is_empty() || u.chars().count() > MAX_URL_CHARS)
    {
        return Err(ArgError::words(format!(
            "Each URL must be non-empty and at most {MAX_URL_CHARS} characters (got {} characters).",
            bad.chars().count()
        )));
    }
    Ok(FetchCall { urls })
}

/// One URL's outcome, with its injection flags when it is a page.
pub struct Fetched {
    pub url: String,
    pub outcome: Result<Page, FetchError>,
    pub flags: Vec<&'static str>,
}

/// Fetches every URL (a few at a time), keeping the request order.
pub async fn run(fetcher: &Fetcher, call: &FetchCall) -> Vec<Fetched> {
    futures_util::stream::iter(call.urls.iter().cloned())
        .map(|url| async move {
            let outcome = fetcher.fetch(&url).await;
            let flags = match &outcome {
                Ok(page) => {
                    injection::scan([page.text.as_str(), page.title.as_deref().unwrap_or("")])
                }
                Err(_) => Vec::new(),
            };
            Fetched {
                url,
                outcome,
                flags,
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await
}

/// Structured results plus a text rendering: each page spotlighted, each failure named.
/// The call is an error only when every URL failed.
pub fn render(fetched: &[Fetched]) -> ToolOutput {
    let mut results = Vec::new();
    let mut text = String::new();
    for (i, f) in fetched.iter().enumerate() {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        let n = i + 1;
        match &f.outcome {
            Ok(page) => {
                results.push(json!({
                    "url": f.url,
                    "final_url": page.final_url,
                    "status": page.status,
                    "title": page.title,
                    "text": page.text,
                    "truncated": page.truncated,
                    "fetched_bytes": page.fetched_bytes,
                    "security_flags": f.flags,
                }));
                let title = page.title.as_deref().unwrap_or("(no title)");
                text.push_str(&format!("[{n}] {title} \u{2014} {}\n", page.final_url));
                if page.truncated {
                    text.push_str("(cut at the size cap)\n");
                }
                if !f.flags.is_empty() {
                    text.push_str(&injection::notice("this page", &f.flags));
                    text.push('\n');
                }
                text.push_str(&spotlight_page(&page.text));
            }
            Err(e) => {
                results.push(json!({
                    "url": f.url,
                    "error": {"type": e.kind, "message": e.message},
                }));
                text.push_str(&format!(
                    "[{n}] {} \u{2014} not fetched: {}",
                    f.url, e.message
                ));
            }
        }
    }
    let all_failed = fetched.iter().all(|f| f.outcome.is_err());
    let structured = json!({ "results": results });
    ToolOutput {
        structured: Some(structured),
        is_error: all_failed,
        ..ToolOutput::ok(text)
    }
}

/// Every injection label found across the pages (for the audit record).
pub fn flags(fetched: &[Fetched]) -> Vec<&'static str> {
    let mut all: Vec<&'static str> = fetched
        .iter()
        .flat_map(|f| f.flags.iter().copied())
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn args(v: Value) -> Args {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn validation() {
        let ok = |v| validate(&args(v)).unwrap().urls;
        let err = |v| validate(&args(v)).unwrap_err().to_string();
        assert_eq!(ok(json!({"url": "https://a.org"})), ["https://a.org"]);
        assert_eq!(
            ok(json!({"url": "https://a.org", "urls": ["https://b.org"], "max_urls": 2})),
            ["https://a.org", "https://b.org"]
        );
        assert_eq!(ok(json!({"url": null, "urls": ["x"]})), ["x"]);
        assert!(err(json!({})).starts_with("Give 'url' or 'urls'"));
        assert!(err(json!({"urls": ["a", "b"]})).contains("max_urls is 1"));
        assert_eq!(err(json!({"url": 5})), "'url' must be a string.");
        assert_eq!(
            err(json!({"urls": "x"})),
            "'urls' must be an array of strings."
        );
        assert_eq!(
            err(json!({"urls": vec!["x"; 11], "max_urls": 10})),
            "'urls' accepts at most 10 entries."
        );
        assert!(err(json!({"url": "x", "max_urls": 0})).starts_with("'max_urls' must be"));
        assert!(err(json!({"url": "x", "max_urls": 1.0})).starts_with("'max_urls' must be"));
        assert!(err(json!({"url": "  "})).starts_with("Each URL"));
        assert!(err(json!({"url": "h".repeat(2049)})).starts_with("Each URL"));
    }
}
