//! The Search API (`POST /search`): ranked results without a synthesized answer. The
//! request is typed (only fields we validated go out); the response is read tolerantly
//! (optional dates, unknown extra fields).

use reqwest::Method;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::client::{Expect, PerplexityClient, Request, Success};
use super::error::ApiError;

const SEARCH_PATH: &str = "/search";

/// The wire body. Absent options are omitted, never sent as `null`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SearchQuery {
    /// One query, or several (sent as an array).
    pub query: QueryText,
    pub max_results: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_type: Option<String>,
    /// `web`, `academic` or `sec` (filings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_recency_filter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_domain_filter: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_language_filter: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_after_date_filter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_before_date_filter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_updated_after_filter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_updated_before_filter: Option<String>,
    pub max_tokens_per_page: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum QueryText {
    One(String),
    Many(Vec<String>),
}

impl Default for QueryText {
    fn default() -> Self {
        QueryText::One(String::new())
    }
}

/// One ranked result, as far as the response says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    pub snippet: String,
    pub date: Option<String>,
    pub last_updated: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResults {
    pub id: Option<String>,
    pub hits: Vec<SearchHit>,
}

impl PerplexityClient {
    pub async fn search(
        &self,
        query: &SearchQuery,
        deadline: Instant,
    ) -> Result<SearchResults, ApiError> {
        let body = serde_json::to_vec(query).map_err(|_| ApiError::ClientSetup)?;
        let request = Request::new(Method::POST, SEARCH_PATH, Expect::Object).body(&body);
        match self.send(&request, deadline).await? {
            Success::Object(map) => {
                let results = read_results(&map, query.max_results as usize);
                super::meter::search_billed();
                Ok(results)
            }
            _ => Err(ApiError::InvalidJson(200)),
        }
    }
}

/// Tolerant: a result without a string `url` is skipped (nothing to cite); missing
/// titles and snippets become empty strings. Never more than `limit` (the `max_results`
/// asked for): an upstream that answers 10,000 results must not fill a caller's
/// context with them.
fn read_results(map: &Map<String, Value>, limit: usize) -> SearchResults {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let hits = map
        .get("results")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|r| {
                    Some(SearchHit {
                        url: text(r, "url").filter(|u| !u.is_empty())?,
                        title: text(r, "title").unwrap_or_default(),
                        snippet: text(r, "snippet").unwrap_or_default(),
                        date: text(r, "date"),
                        last_updated: text(r, "last_updated"),
                    })
                })
                .take(limit)
                .collect()
        })
        .unwrap_or_default();
    SearchResults {
        id: map.get("id").and_then(Value::as_str).map(str::to_owned),
        hits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn body_omits_absent_options_and_reads_tolerantly() {
        let q = SearchQuery {
            query: QueryText::Many(vec!["a".into(), "b".into()]),
            max_results: 5,
            search_recency_filter: Some("week".into()),
            max_tokens_per_page: 1024,
            ..SearchQuery::default()
        };
        assert_eq!(
            serde_json::to_value(&q).unwrap(),
            json!({"query": ["a", "b"], "max_results": 5, "search_recency_filter": "week", "max_tokens_per_page": 1024})
        );
        let map = json!({"id": "s1", "results": [
            {"title": "T", "url": "https://a.org", "snippet": "S", "date": "2026-01-01", "score": 0.9},
            {"title": "no url"},
            {"url": 5},
            {"url": "https://b.org"}]})
        .as_object()
        .cloned()
        .unwrap();
        let r = read_results(&map, 10);
        assert_eq!(
            read_results(&map, 1).hits.len(),
            1,
            "never more than asked for"
        );
        assert_eq!(r.id.as_deref(), Some("s1"));
        assert_eq!(r.hits.len(), 2);
        assert_eq!(r.hits[0].date.as_deref(), Some("2026-01-01"));
        assert_eq!(r.hits[1].title, "");
    }
}
