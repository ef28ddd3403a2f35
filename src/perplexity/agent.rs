//! The Agent API: typed create/retrieve/cancel requests, and tolerant reading of the
//! response object (live responses carry undocumented fields, unknown item types,
//! non-string statuses; none of that may fail a call).

use reqwest::Method;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::client::{Expect, PerplexityClient, Request, Success};
use super::error::ApiError;

const CREATE_PATH: &str = "/v1/agent";

/// Recency windows the web_search tool accepts.
pub const RECENCY_VALUES: [&str; 5] = ["hour", "day", "week", "month", "year"];

/// The presets Perplexity documents, current and older names it still takes. Only for
/// telling a person about a likely typo: `preset` is an open string upstream, where new
/// presets appear, so nothing is refused for not being listed here.
pub const CURRENT_PRESETS: [&str; 6] = ["fast", "low", "medium", "high", "xhigh", "wide-research"];
pub const OLDER_PRESETS: [&str; 4] = [
    "fast-search",
    "pro-search",
    "deep-research",
    "advanced-deep-research",
];

/// `POST /v1/agent` body of the research-lifecycle tools. Field order is the wire order.
/// `model` (with `max_output_tokens` where the model requires it) replaces `preset` for
/// `perplexity_ask`. Never sent: `models`, `store` (background needs the default `true`),
/// `reasoning`, `instructions`, `previous_response_id`.
///
/// `tools` is sent only when the caller overrides something: a listed tool *replaces* the
/// preset's own tool of that type (Perplexity's models-and-presets guide), so a bare
/// `{"type":"web_search"}` would throw away each preset's tuned search configuration.
#[derive(Debug, Clone, Serialize)]
pub struct CreateRun {
    pub input: String,
    /// Omitted when a model is named instead.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub preset: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sent only with a model that requires it (Anthropic models do).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// A structured answer (`deep_research`): `{"type":"json_schema","json_schema":…}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    /// Always true: one code path for every preset (`wide-research` requires it), and a
    /// stored background run survives our wait ending.
    pub background: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<WebSearchTool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WebSearchTool {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Omitted entirely when no filter is set (never `"filters": {}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filters: Option<SearchFilters>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchFilters {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_recency_filter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_domain_filter: Option<Vec<String>>,
}

impl CreateRun {
    pub fn new(query: &str, preset: &str, recency: Option<&str>, domains: &[String]) -> Self {
        let filters = SearchFilters {
            search_recency_filter: recency.map(str::to_owned),
            search_domain_filter: (!domains.is_empty()).then(|| domains.to_vec()),
        };
        let filtered =
            filters.search_recency_filter.is_some() || filters.search_domain_filter.is_some();
        // Only a filtered search replaces the preset's web_search (see the type's note).
        let tools = if filtered {
            vec![WebSearchTool {
                kind: "web_search",
                filters: Some(filters),
            }]
        } else {
            Vec::new()
        };
        CreateRun {
            input: query.to_owned(),
            preset: preset.to_owned(),
            model: None,
            max_output_tokens: None,
            response_format: None,
            background: true,
            stream: None,
            tools,
        }
    }

    /// The same run with Perplexity's finance tool beside the preset's (or the filtered)
    /// web search: listing only `finance_search` keeps the preset's own search tool.
    pub fn with_finance(mut self) -> Self {
        self.tools.push(WebSearchTool {
            kind: "finance_search",
            filters: None,
        });
        self
    }

    /// The same run on a named model instead of a preset.
    pub fn on_model(mut self, model: &str) -> Self {
        self.preset.clear();
        self.max_output_tokens = model.starts_with("anthropic/").then_some(4096);
        self.model = Some(model.to_owned());
        self
    }

    pub(crate) fn body(&self) -> Vec<u8> {
        // Serializing plain strings and bools cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// A `POST /v1/agent` body: the typed [`CreateRun`] of the research tools, or the
/// validated full surface of `responses_create` ([`FullRun`]).
pub trait CreateBody: Send + Sync {
    /// The JSON body, with `stream` set when given.
    fn body_with(&self, stream: Option<bool>) -> Vec<u8>;
}

impl CreateBody for CreateRun {
    fn body_with(&self, stream: Option<bool>) -> Vec<u8> {
        CreateRun {
            stream,
            ..self.clone()
        }
        .body()
    }
}

/// A create body assembled field by field from arguments that passed
/// `responses_create`'s validation (nothing unvalidated is ever copied into it).
#[derive(Debug, Clone, PartialEq)]
pub struct FullRun(pub Map<String, Value>);

impl CreateBody for FullRun {
    fn body_with(&self, stream: Option<bool>) -> Vec<u8> {
        let mut body = self.0.clone();
        if let Some(stream) = stream {
            body.insert("stream".to_owned(), Value::Bool(stream));
        }
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

/// The id pattern `\A[A-Za-z0-9_-]{1,128}\z`, guarding every id put into a URL path
/// (including the one create returns) against traversal and injection.
pub fn valid_run_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// What create returned, when it is not usable as a run id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateError {
    Api(ApiError),
    NoId,
    MalformedId,
}

/// The id of a created run, validated.
pub fn run_id_of(response: &Map<String, Value>) -> Result<String, CreateError> {
    match response.get("id").and_then(Value::as_str) {
        Some(id) if valid_run_id(id) => Ok(id.to_owned()),
        Some(id) if !id.is_empty() => Err(CreateError::MalformedId),
        _ => Err(CreateError::NoId),
    }
}

impl PerplexityClient {
    /// Creates a run (JSON mode) and returns its id.
    pub async fn create_run(
        &self,
        run: &dyn CreateBody,
        deadline: Instant,
    ) -> Result<String, CreateError> {
        match self.send_create(run, None, deadline).await {
            Ok(Success::Object(map)) => run_id_of(&map),
            Ok(_) => Err(CreateError::NoId),
            Err(e) => Err(CreateError::Api(e)),
        }
    }

    /// Creates a run, asking for its event stream when `stream` (the server may answer
    /// JSON anyway).
    pub(crate) async fn create_run_streaming(
        &self,
        run: &dyn CreateBody,
        stream: bool,
        deadline: Instant,
    ) -> Result<Success, ApiError> {
        self.send_create(run, stream.then_some(true), deadline)
            .await
    }

    async fn send_create(
        &self,
        run: &dyn CreateBody,
        stream: Option<bool>,
        deadline: Instant,
    ) -> Result<Success, ApiError> {
        let body = run.body_with(stream);
        let expect = match stream {
            Some(true) => Expect::EventStream,
            _ => Expect::Object,
        };
        let request = Request::new(Method::POST, CREATE_PATH, expect).body(&body);
        self.send(&request, deadline).await
    }

    /// `GET /v1/agent/{id}`. The id must have passed [`valid_run_id`].
    pub async fn retrieve_run(&self, id: &str, deadline: Instant) -> Result<RunSnapshot, ApiError> {
        let path = run_path(id, "");
        let request = Request::new(Method::GET, &path, Expect::Object);
        match self.send(&request, deadline).await? {
            Success::Object(map) => {
                let run = RunSnapshot::new(Value::Object(map));
                if run.is_settled() {
                    super::meter::run_settled(run.raw());
                }
                Ok(run)
            }
            _ => Err(ApiError::InvalidJson(200)),
        }
    }

    /// Resumes a run's event stream after sequence number `after`.
    pub(crate) async fn resume_stream(
        &self,
        id: &str,
        after: Option<u64>,
        deadline: Instant,
    ) -> Result<Success, ApiError> {
        let path = run_path(id, "");
        let query = match after {
            Some(n) => format!("stream=true&starting_after={n}"),
            None => "stream=true".to_owned(),
        };
        let request = Request::new(Method::GET, &path, Expect::EventStream).query(&query);
        self.send(&request, deadline).await
    }

    /// `POST /v1/agent/{id}/cancel`. Decided by the status code only (matching message
    /// text once read a 401 "already revoked" as success): 400 is "not running now" (a
    /// finished run), 404 is "no such run" (a wrong id, another account's, an expired or
    /// a `store: false` run) — the official contract; older notes said 400 for both.
    pub async fn cancel_run(&self, id: &str, deadline: Instant) -> Result<CancelOutcome, ApiError> {
        let path = run_path(id, "/cancel");
        let request = Request::new(Method::POST, &path, Expect::Nothing);
        match self.send(&request, deadline).await {
            Ok(_) => Ok(CancelOutcome::Requested),
            Err(ApiError::Status { code: 400, .. }) => Ok(CancelOutcome::NotRunning),
            Err(ApiError::Status { code: 404, .. }) => Ok(CancelOutcome::NoSuchRun),
            Err(e) => Err(e),
        }
    }
}

fn run_path(id: &str, suffix: &str) -> String {
    debug_assert!(valid_run_id(id));
    format!("{CREATE_PATH}/{id}{suffix}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    Requested,
    NotRunning,
    NoSuchRun,
}

/// A source of an answer: a search result with a string URL, and the number the answer
/// text's `[N]` markers use for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Source {
    pub number: u64,
    pub title: String,
    pub url: String,
}

/// A run as one GET (or a lifecycle event) saw it. Reads only what it needs; anything
/// missing or mistyped counts as absent.
#[derive(Debug, Clone)]
pub struct RunSnapshot {
    raw: Value,
}

/// A function the model asks the caller to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FunctionCall {
    pub call_id: String,
    pub name: String,
    /// A JSON document as a string, exactly as the model wrote it (untrusted).
    pub arguments: String,
    /// Opaque; echoed back with the call's output (thinking models need it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
}

impl FunctionCall {
    /// The `function_call_output` input item answering this call. It echoes the call's
    /// `name` and `thought_signature`: Perplexity's integration guide asks for both, and
    /// thinking models may refuse a continuation without the signature.
    pub fn output_item(&self, output: String) -> Value {
        let mut item = serde_json::json!({
            "type": "function_call_output",
            "call_id": self.call_id,
            "output": output,
            "name": self.name,
        });
        if let Some(sig) = &self.thought_signature {
            item["thought_signature"] = Value::String(sig.clone());
        }
        item
    }
}

/// The item that carries the finance tool's data (its own type on older shapes, the
/// `item_name` of an `unknown` item in the official SDK's union).
const FINANCE_ITEM: &str = "finance_results";

fn item_name(item: &Map<String, Value>) -> Option<&str> {
    item.get("item_name").and_then(Value::as_str)
}

/// The run waits for function outputs (in the OpenAPI enum; unverified live).
pub const REQUIRES_ACTION: &str = "requires_action";

/// Statuses after which a run never changes again.
pub const TERMINAL_STATUSES: [&str; 4] = ["completed", "failed", "incomplete", "cancelled"];

impl RunSnapshot {
    pub fn new(raw: Value) -> Self {
        RunSnapshot { raw }
    }

    /// The status, when it is a string (a non-string status is "unknown", not terminal).
    pub fn status(&self) -> Option<&str> {
        self.raw.get("status").and_then(Value::as_str)
    }

    pub fn is_terminal(&self) -> bool {
        self.status()
            .is_some_and(|s| TERMINAL_STATUSES.contains(&s))
    }

    /// Terminal, or waiting for the caller (`requires_action`: function outputs are
    /// due). Either way, waiting longer changes nothing.
    pub fn is_settled(&self) -> bool {
        self.is_terminal() || self.status() == Some(REQUIRES_ACTION)
    }

    /// The model that answered (with a `models` chain, the one that did), when a string.
    pub fn model(&self) -> Option<&str> {
        self.raw.get("model").and_then(Value::as_str)
    }

    /// `function_call` items whose `call_id`, `name` and `arguments` are strings, in
    /// order. The caller runs them and continues with `function_call_output` items.
    pub fn function_calls(&self) -> Vec<FunctionCall> {
        self.items("function_call")
            .filter_map(|item| {
                let text = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_owned);
                Some(FunctionCall {
                    call_id: text("call_id")?,
                    name: text("name")?,
                    arguments: text("arguments")?,
                    thought_signature: text("thought_signature"),
                })
            })
            .collect()
    }

    fn output_values(&self) -> impl Iterator<Item = &Value> {
        self.raw
            .get("output")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    }

    fn output(&self) -> impl Iterator<Item = &Map<String, Value>> {
        self.output_values().filter_map(Value::as_object)
    }

    fn items<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Map<String, Value>> + 'a {
        self.output()
            .filter(move |item| item.get("type").and_then(Value::as_str) == Some(kind))
    }

    /// All `output_text` texts of all `message` items, in order, with no separator.
    /// There is no top-level `output_text` in the HTTP response.
    pub fn answer_text(&self) -> String {
        let mut text = String::new();
        for item in self.items("message") {
            let parts = item.get("content").and_then(Value::as_array);
            for part in parts.into_iter().flatten() {
                if part.get("type").and_then(Value::as_str) == Some("output_text")
                    && let Some(t) = part.get("text").and_then(Value::as_str)
                {
                    text.push_str(t);
                }
            }
        }
        text
    }

    /// Sources from `search_results` items (not `citations`, which is Sonar's shape),
    /// string URLs only; the title falls back to the URL when missing or not a string.
    ///
    /// Numbering: the answer's `[N]` markers refer to `search_results[].id`. When every
    /// result carries a distinct non-negative integer id (the official MCP server's
    /// rule), each source keeps its id, one entry per id in id order — a page found
    /// twice under two ids stays citable under both. Otherwise the ids cannot be trusted:
    /// the sources are deduplicated on the full URL (first wins) and numbered 1..k in
    /// order. Renumbering by position would make `[4]` in the text point at another page.
    pub fn sources(&self) -> Vec<Source> {
        let results: Vec<(&str, &Map<String, Value>)> = self
            .search_results()
            .filter_map(Value::as_object)
            .filter_map(|r| Some((r.get("url")?.as_str()?, r)))
            .collect();
        let title = |url: &str, r: &Map<String, Value>| {
            r.get("title")
                .and_then(Value::as_str)
                .unwrap_or(url)
                .to_owned()
        };
        let mut ids = std::collections::HashSet::new();
        let numbered: Option<Vec<Source>> = results
            .iter()
            .map(|(url, r)| {
                let id = r
                    .get("id")
                    .and_then(Value::as_u64)
                    .filter(|id| ids.insert(*id))?;
                Some(Source {
                    number: id,
                    title: title(url, r),
                    url: (*url).to_owned(),
                })
            })
            .collect();
        if let Some(mut sources) = numbered.filter(|s| !s.is_empty()) {
            sources.sort_by_key(|s| s.number);
            return sources;
        }
        let mut seen = std::collections::HashSet::new();
        let mut sources = Vec::new();
        for (url, r) in results {
            if seen.insert(url) {
                sources.push(Source {
                    number: sources.len() as u64 + 1,
                    title: title(url, r),
                    url: url.to_owned(),
                });
            }
        }
        sources
    }

    fn search_results(&self) -> impl Iterator<Item = &Value> {
        self.items("search_results")
            .filter_map(|item| item.get("results").and_then(Value::as_array))
            .flatten()
    }

    /// The finance tool's data, in order. The SDK has no finance item type, so the data
    /// is taken from whatever item carries it: `finance_results` items (`results`), or
    /// `unknown` items named `finance_results` (`payload.results`, else the payload).
    pub fn finance_results(&self) -> impl Iterator<Item = &Value> {
        self.output().flat_map(|item| {
            let data = match item.get("type").and_then(Value::as_str) {
                Some(FINANCE_ITEM) => item.get("results"),
                Some("unknown") if item_name(item) == Some(FINANCE_ITEM) => {
                    item.get("payload").map(|p| p.get("results").unwrap_or(p))
                }
                _ => None,
            };
            match data {
                Some(Value::Array(list)) => list.iter().collect::<Vec<_>>(),
                Some(Value::Null) | None => Vec::new(),
                Some(other) => vec![other],
            }
        })
    }

    /// Items this product does not render itself (`unknown` ones other than finance
    /// data, `sandbox_results`, `mcp_call`, `people_search_results`, …) as `(name,
    /// payload)`: the item name and payload of an `unknown` item, else the type and the
    /// whole item. Front ends show them as data rather than dropping them silently.
    pub fn other_items(&self) -> impl Iterator<Item = (&str, &Value)> {
        const RENDERED: [&str; 5] = [
            "message",
            "search_results",
            "fetch_url_results",
            "function_call",
            FINANCE_ITEM,
        ];
        self.output_values().filter_map(|value| {
            let item = value.as_object()?;
            match item.get("type").and_then(Value::as_str)? {
                kind if RENDERED.contains(&kind) => None,
                "unknown" => match item_name(item).unwrap_or("unknown") {
                    FINANCE_ITEM => None,
                    name => Some((name, item.get("payload").unwrap_or(&Value::Null))),
                },
                kind => Some((kind, value)),
            }
        })
    }

    /// Search results gathered so far (not deduplicated).
    pub fn search_result_count(&self) -> usize {
        self.search_results().count()
    }

    /// `fetch_url_results` items so far.
    pub fn fetched_page_count(&self) -> usize {
        self.items("fetch_url_results").count()
    }

    /// `error.message` of a failed run, when it is a string.
    pub fn error_message(&self) -> Option<&str> {
        self.raw
            .get("error")
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
    }

    pub fn raw(&self) -> &Value {
        &self.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn create_body_shape() {
        let plain = CreateRun::new("q", "medium", None, &[]);
        assert_eq!(
            String::from_utf8(plain.body()).unwrap(),
            r#"{"input":"q","preset":"medium","background":true}"#,
            "no tools entry: the preset keeps its own tuned web_search"
        );
        let filtered = CreateRun::new(
            "q",
            "fast",
            Some("week"),
            &["a.org".into(), "-b.com".into()],
        );
        assert_eq!(
            String::from_utf8(filtered.body()).unwrap(),
            r#"{"input":"q","preset":"fast","background":true,"tools":[{"type":"web_search","filters":{"search_recency_filter":"week","search_domain_filter":["a.org","-b.com"]}}]}"#
        );
    }

    #[test]
    fn finance_keeps_the_presets_search() {
        let body = CreateRun::new("q", "fast", None, &[]).with_finance().body();
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"input":"q","preset":"fast","background":true,"tools":[{"type":"finance_search"}]}"#
        );
    }

    #[test]
    fn sources_keep_the_ids_the_answer_cites() {
        // The answer's [7] means search_results id 7, whatever its position.
        let run = RunSnapshot::new(json!({"output": [
            {"type": "search_results", "results": [
                {"id": 3, "url": "https://three", "title": "Three"},
                {"id": 7, "url": "https://seven", "title": "Seven"}]},
            {"type": "search_results", "results": [
                {"id": 9, "url": "https://three", "title": "again"}]}
        ]}));
        let numbers: Vec<(u64, &str)> = run
            .sources()
            .iter()
            .map(|s| (s.number, s.url.as_str()))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|(n, u)| {
                (
                    n,
                    if u == "https://seven" {
                        "seven"
                    } else {
                        "three"
                    },
                )
            })
            .collect();
        assert_eq!(numbers, [(3, "three"), (7, "seven"), (9, "three")]);
        // Ids missing, non-numeric or repeated cannot be trusted: 1..k in order.
        for results in [
            json!([{"id": 3, "url": "https://a"}, {"url": "https://b"}]),
            json!([{"id": "3", "url": "https://a"}, {"id": "4", "url": "https://b"}]),
            json!([{"id": 3, "url": "https://a"}, {"id": 3, "url": "https://b"}]),
            json!([{"id": -1, "url": "https://a"}, {"id": 2, "url": "https://b"}]),
        ] {
            let run = RunSnapshot::new(
                json!({"output": [{"type": "search_results", "results": results}]}),
            );
            let numbers: Vec<u64> = run.sources().iter().map(|s| s.number).collect();
            assert_eq!(numbers, [1, 2], "{results}");
        }
    }

    #[test]
    fn finance_data_and_unknown_items_are_kept() {
        let run = RunSnapshot::new(json!({"output": [
            {"type": "unknown", "item_name": "finance_results", "payload": {"results": [{"symbol": "NVDA"}]}},
            {"type": "finance_results", "results": [{"symbol": "AAPL"}]},
            {"type": "unknown", "item_name": "advisor_note", "payload": {"anything": true}},
            {"type": "sandbox_results", "call_id": "sb_1", "code": "print(1)"},
            {"type": "message", "content": []}
        ]}));
        let finance: Vec<&Value> = run.finance_results().collect();
        assert_eq!(
            finance,
            [&json!({"symbol": "NVDA"}), &json!({"symbol": "AAPL"})]
        );
        let other: Vec<&str> = run.other_items().map(|(name, _)| name).collect();
        assert_eq!(other, ["advisor_note", "sandbox_results"]);
    }

    #[test]
    fn function_calls_keep_their_signature_for_the_output() {
        let run = RunSnapshot::new(json!({"output": [{"type": "function_call", "id": "fc_01",
            "status": "completed", "name": "lookup_ticket", "call_id": "call_8s7d6f",
            "arguments": "{}", "thought_signature": "CiQBVKhc="}]}));
        let calls = run.function_calls();
        assert_eq!(calls[0].thought_signature.as_deref(), Some("CiQBVKhc="));
        assert_eq!(
            calls[0].output_item("{\"ok\":true}".into()),
            json!({"type": "function_call_output", "call_id": "call_8s7d6f", "output": "{\"ok\":true}",
                   "name": "lookup_ticket", "thought_signature": "CiQBVKhc="})
        );
    }

    #[test]
    fn run_ids() {
        assert!(valid_run_id("resp_abc-DEF_123"));
        assert!(valid_run_id(&"a".repeat(128)));
        assert!(!valid_run_id(&"a".repeat(129)));
        assert!(!valid_run_id(""));
        assert!(!valid_run_id("../etc/passwd"));
        assert!(!valid_run_id("a b"));
        assert!(!valid_run_id("ä"));
    }

    #[test]
    fn tolerant_reading() {
        let run = RunSnapshot::new(json!({
            "status": "completed",
            "output": [
                5,
                {"type": "search_results", "results": [
                    {"url": "https://a", "title": "A"},
                    {"url": "https://b"},
                    {"url": 7, "title": "skipped"},
                    {"url": "https://a", "title": "dup"},
                    {"url": "https://c", "title": ""}
                ]},
                {"type": "fetch_url_results", "contents": []},
                {"type": "message", "content": [
                    {"type": "output_text", "text": "Hello "},
                    {"type": "other", "text": "no"},
                    {"type": "output_text", "text": 5}
                ]},
                {"type": "message", "content": [{"type": "output_text", "text": "world"}]},
                {"type": "mystery"}
            ]
        }));
        assert!(run.is_terminal());
        assert_eq!(run.answer_text(), "Hello world");
        let sources = run.sources();
        assert_eq!(sources.len(), 3);
        assert_eq!(sources[1].title, "https://b");
        assert_eq!(sources[2].title, "");
        assert_eq!(run.search_result_count(), 5);
        assert_eq!(run.fetched_page_count(), 1);
        assert!(!RunSnapshot::new(json!({"status": 5})).is_terminal());
        assert!(!RunSnapshot::new(json!({"status": "cancelling"})).is_terminal());
    }
}
