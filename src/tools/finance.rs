//! `finance_search`: a financial question answered by the Agent API with its finance tool
//! beside web search — the lifecycle run, wait and rendering (numbered sources,
//! spotlighted, the `response_id` handed back if the budget runs out). Tickers and
//! categories narrow the question; they travel as part of the input, as plain data.
//!
//! Touches: the network only through `crate::perplexity` (via `research`).

use crate::call::ArgError;
use serde_json::json;

use super::args::{Arg, Args, Kind, Read, input_schema};
use super::research::{ResearchRequest, query};
use super::starts_a_run;

pub const MAX_ENTRIES: usize = 20;
pub const MAX_ENTRY_CHARS: usize = 128;
const PRESET: &str = "fast";

/// Up to 20 entries of 1–128 characters (trimmed), each a single line.
const ENTRIES: Kind = Kind::list(&ENTRY, 0, MAX_ENTRIES);
const ENTRY: Kind = Kind::str(
    1,
    MAX_ENTRY_CHARS,
    is_entry,
    "must be one line of 1 to {max} characters.",
);

fn is_entry(s: &str) -> bool {
    let s = s.trim();
    !s.is_empty() && s.chars().count() <= MAX_ENTRY_CHARS && !s.contains(['\n', '\r'])
}

pub const FINANCE: [Arg; 3] = [
    query("The financial question."),
    Arg::new("tickers", ENTRIES).about("Ticker symbols to focus on, e.g. AAPL, MSFT."),
    Arg::new("categories", ENTRIES)
        .about("Kinds of data to focus on, e.g. earnings, price history, filings."),
];

/// The definition `tools/list` shows, under the registry's name for it.
pub fn definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::Tool;
    Tool::new(
        name,
        "Answer a financial question (prices, filings, earnings, market moves) with Perplexity's Agent API using its finance data tool beside web search, with numbered sources. Optionally name tickers and categories to focus on. If it takes longer than this server's wait budget, you get a response_id to collect with perplexity_agent_result.",
        input_schema(&FINANCE, 0),
    )
    .with_title("Perplexity Finance Search")
    .with_annotations(
        starts_a_run(),
    )
}

pub fn validate(args: &Args) -> Result<ResearchRequest, ArgError> {
    let read = Read::new(args, &FINANCE);
    let entries = |key| -> Result<Vec<String>, ArgError> {
        let listed = read.list(key)?.unwrap_or_default();
        Ok(listed.iter().map(|s| s.trim().to_owned()).collect())
    };
    let tickers = entries("tickers")?;
    let categories = entries("categories")?;
    let mut rest = args.clone();
    rest.remove("tickers");
    rest.remove("categories");
    rest.insert("preset".to_owned(), json!(PRESET));
    let mut request = ResearchRequest::from_args(&rest)?;
    // The focus lists are appended as labelled data lines after the question.
    if !tickers.is_empty() {
        request
            .query
            .push_str(&format!("\n\nTickers: {}", tickers.join(", ")));
    }
    if !categories.is_empty() {
        request
            .query
            .push_str(&format!("\nCategories: {}", categories.join(", ")));
    }
    request.finance = true;
    request.wait = true;
    Ok(request)
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
        let r = validate(&args(json!({"query": "How did they do?", "tickers": ["AAPL", " MSFT "], "categories": ["earnings"]}))).unwrap();
        assert_eq!(
            r.query,
            "How did they do?\n\nTickers: AAPL, MSFT\nCategories: earnings"
        );
        assert!(r.finance && r.wait);
        assert_eq!(r.preset, "fast");
        let err = |v| validate(&args(v)).unwrap_err().to_string();
        assert_eq!(
            err(json!({"query": "q", "tickers": "AAPL"})),
            "'tickers' must be an array of strings."
        );
        assert_eq!(
            err(json!({"query": "q", "tickers": vec!["A"; 21]})),
            "'tickers' accepts at most 20 entries."
        );
        assert!(
            err(json!({"query": "q", "categories": ["a\nb"]}))
                .starts_with("Each entry of 'categories'")
        );
        assert!(err(json!({"query": "q", "tickers": [""]})).starts_with("Each entry of 'tickers'"));
        assert_eq!(
            err(json!({})),
            "'query' is required and must be a non-empty string."
        );
    }
}
