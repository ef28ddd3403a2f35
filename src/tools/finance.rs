//! `finance_search`: a financial question answered by the Agent API with its finance tool
//! beside web search — the lifecycle run, wait and rendering (numbered sources,
//! spotlighted, the `response_id` handed back if the budget runs out). Tickers and
//! categories narrow the question; they travel as part of the input, as plain data.
//!
//! Touches: the network only through `crate::perplexity` (via `research`).

use crate::call::ArgError;
use serde_json::{Value, json};

use super::args::{Args, optional};
use super::research::{MAX_QUERY_CHARS, ResearchRequest};
use super::{schema_object, starts_a_run};

pub const FINANCE_ARGS: [&str; 3] = ["query", "tickers", "categories"];
pub const MAX_ENTRIES: usize = 20;
pub const MAX_ENTRY_CHARS: usize = 128;
const PRESET: &str = "fast";

/// The definition `tools/list` shows, under the registry's name for it.
pub fn definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::Tool;
    let entries = |what: &str| json!({"type":"array","items":{"type":"string","minLength":1,"maxLength":MAX_ENTRY_CHARS},"maxItems":MAX_ENTRIES,"description":what});
    Tool::new(
        name,
        "Answer a financial question (prices, filings, earnings, market moves) with Perplexity's Agent API using its finance data tool beside web search, with numbered sources. Optionally name tickers and categories to focus on. If it takes longer than this server's wait budget, you get a response_id to collect with perplexity_agent_result.",
        schema_object(json!({"type":"object",
            "properties":{
                "query":{"type":"string","minLength":1,"maxLength":MAX_QUERY_CHARS,"description":"The financial question."},
                "tickers":entries("Ticker symbols to focus on, e.g. AAPL, MSFT."),
                "categories":entries("Kinds of data to focus on, e.g. earnings, price history, filings.")},
            "required":["query"],
            "additionalProperties":false})),
    )
    .with_title("Perplexity Finance Search")
    .with_annotations(
        starts_a_run(),
    )
}

pub fn validate(args: &Args) -> Result<ResearchRequest, ArgError> {
    let tickers = entries(args, "tickers")?;
    let categories = entries(args, "categories")?;
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

/// Up to 20 entries of 1–128 characters, each a single line.
fn entries(args: &Args, key: &str) -> Result<Vec<String>, String> {
    let Some(v) = optional(args, key) else {
        return Ok(Vec::new());
    };
    let items = v
        .as_array()
        .filter(|items| items.iter().all(Value::is_string))
        .ok_or(format!("'{key}' must be an array of strings."))?;
    if items.len() > MAX_ENTRIES {
        return Err(format!("'{key}' accepts at most {MAX_ENTRIES} entries."));
    }
    items
        .iter()
        .filter_map(Value::as_str)
        .map(|s| {
            let s = s.trim();
            if s.is_empty() || s.chars().count() > MAX_ENTRY_CHARS || s.contains(['\n', '\r']) {
                Err(format!(
                    "Each entry of '{key}' must be one line of 1 to {MAX_ENTRY_CHARS} characters."
                ))
            } else {
                Ok(s.to_owned())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
