//! One Agent API run: its precomputed timeline of events, and the pure functions that
//! derive the response object and the SSE event payloads at any moment of its life
//! (including the cancel transition). No I/O and no locking happens here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::json_answer;
use super::scenario::{FinanceItem, RunningOutput, Scenario};

/// What a timeline entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ev {
    Created,
    InProgress,
    /// Announces the queries of `batches[i]` (`response.reasoning.search_queries`).
    SearchQueries(usize),
    /// Appends `batches[i]`.
    Search(usize),
    /// Announces the URL of `pages[i]` (`response.reasoning.fetch_url_queries`).
    FetchQueries(usize),
    /// Appends `pages[i]`.
    Fetch(usize),
    /// Appends the finance item.
    Finance,
    /// Text delta of answer part `i`.
    Delta(usize),
    /// End of answer part `i` (`response.output_text.done`).
    TextDone(usize),
    /// Appends the scenario's `extra_items[i]` (`response.output_item.done`).
    Extra(usize),
    /// Appends function call item `i` (`response.output_item.done`).
    FunctionCall(usize),
    /// The scenario's final status.
    Terminal,
    /// The end of a cancel (`cancel_delay_ms` after it).
    Cancelled,
}

/// What the create request adds to the scenario's script for one run. The scenario
/// says what a run *can* do; the request decides (tools offered, conversation round,
/// `store`) what this one does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CreateParams {
    /// 0, or the round of the run named by `previous_response_id` plus one.
    pub round: u64,
    /// `tools` offers a `{"type":"function"}` tool.
    pub function_tool: bool,
    /// `tools` offers a `{"type":"finance_search"}` tool.
    pub finance_tool: bool,
    /// `store` was not `false`: the run can be retrieved and cancelled by id.
    pub stored: bool,
    /// `background` was not `false` (echoed in the response object).
    pub background: bool,
    /// The create's `previous_response_id` when it is a string (echoed).
    pub previous_response_id: Option<String>,
    /// The JSON schema `response_format` asks the answer to follow.
    pub json_schema: Option<Value>,
    /// The URLs the create's `input` names (what a made-up JSON answer cites); only
    /// looked for when there is a `json_schema`.
    pub input_urls: Vec<String>,
}

impl Default for CreateParams {
    fn default() -> Self {
        CreateParams {
            round: 0,
            function_tool: false,
            finance_tool: false,
            stored: true,
            background: true,
            previous_response_id: None,
            json_schema: None,
            input_urls: Vec::new(),
        }
    }
}

impl CreateParams {
    #[cfg(test)]
    fn with_stored(self, stored: bool) -> CreateParams {
        CreateParams { stored, ..self }
    }

    /// Reads the tools, `store`, `background`, `previous_response_id` and
    /// `response_format` of a create body (`round` is left at 0: it needs the other runs).
    pub(crate) fn from_body(body: &Map<String, Value>) -> CreateParams {
        let json_schema = json_answer::requested_schema(body).cloned();
        let input_urls = match (&json_schema, body.get("input")) {
            (Some(_), Some(input)) => json_answer::urls_in(input),
            _ => Vec::new(),
        };
        CreateParams {
            round: 0,
            function_tool: offers_tool(body, "function"),
            finance_tool: offers_tool(body, "finance_search"),
            stored: body.get("store") != Some(&Value::Bool(false)),
            background: body.get("background") != Some(&Value::Bool(false)),
            previous_response_id: body
                .get("previous_response_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            json_schema,
            input_urls,
        }
    }
}

/// Whether the body's `tools` array holds an object whose `type` is `ty` (anything
/// else in `tools` is ignored here).
pub(crate) fn offers_tool(body: &Map<String, Value>, ty: &str) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| {
            tools
                .iter()
                .any(|t| t.get("type").and_then(Value::as_str) == Some(ty))
        })
}

pub(crate) struct Run {
    pub id: String,
    pub created: Instant,
    pub created_wall_ms: u64,
    pub scenario: Arc<Scenario>,
    pub timeline: Vec<(Duration, Ev)>,
    /// Precomputed `search_results` output items, one per batch.
    pub batches: Vec<Value>,
    /// Precomputed `fetch_url_results` output items, one per page.
    pub pages: Vec<Value>,
    /// The precomputed finance item, when this run has one.
    pub finance: Option<Value>,
    /// Precomputed `function_call` items; non-empty = the run asks for function calls
    /// (and then ends with them instead of a message).
    pub calls: Vec<Value>,
    /// The `output_text` parts of the message: the scenario's, or a document of the
    /// requested JSON schema ([`answer_parts`]).
    pub answer_parts: Vec<String>,
    pub round: u64,
    /// `false` (`store: false`): invisible to GET, resume and cancel.
    pub stored: bool,
    /// Echoed as `background`.
    pub background: bool,
    /// Echoed as `previous_response_id` (`null` when absent).
    pub previous_response_id: Option<String>,
    /// Elapsed time (since creation) at which a cancel was accepted.
    pub cancel_at: Option<Duration>,
    /// JSON-mode GETs answered so far (drives `status_sequence`).
    pub gets: usize,
}

impl Run {
    /// The run of a plain create request (no tools, round 0, stored).
    #[cfg(test)]
    pub(crate) fn new(
        id: String,
        created: Instant,
        created_wall_ms: u64,
        scenario: Arc<Scenario>,
    ) -> Run {
        Run::for_request(
            id,
            created,
            created_wall_ms,
            scenario,
            &CreateParams::default(),
        )
    }

    /// A run created by a request with `params` (tools offered, round, `store`).
    pub(crate) fn for_request(
        id: String,
        created: Instant,
        created_wall_ms: u64,
        scenario: Arc<Scenario>,
        params: &CreateParams,
    ) -> Run {
        let finance = scenario
            .finance_results
            .as_ref()
            .filter(|_| params.finance_tool)
            .map(|r| match scenario.finance_item {
                FinanceItem::Unknown => json!({
                    "type": "unknown", "item_name": "finance_results", "payload": {"results": r}
                }),
                FinanceItem::FinanceResults => json!({"type": "finance_results", "results": r}),
            });
        let asks_calls = params.function_tool && params.round < scenario.function_call_rounds;
        let calls = if asks_calls {
            build_calls(&scenario, &id)
        } else {
            Vec::new()
        };
        let answer_parts = answer_parts(&scenario, params);
        let shape = Shape {
            finance: finance.is_some(),
            calls: calls.len(),
            parts: answer_parts.len(),
        };
        Run {
            timeline: build_timeline(&scenario, shape),
            batches: build_batches(&scenario),
            pages: build_pages(&scenario),
            finance,
            calls,
            answer_parts,
            round: params.round,
            stored: params.stored,
            background: params.background,
            previous_response_id: params.previous_response_id.clone(),
            id,
            created,
            created_wall_ms,
            scenario,
            cancel_at: None,
            gets: 0,
        }
    }

    /// The status the scripted end gives: `function_call_status` for a run that ends
    /// with function calls, else `final_status`.
    fn final_status(&self) -> &str {
        if self.calls.is_empty() {
            &self.scenario.final_status
        } else {
            &self.scenario.function_call_status
        }
    }

    /// Position in `output` of the first extra item (after the searches, the finance
    /// item and the fetches).
    fn extras_index(&self) -> usize {
        self.batches.len() + usize::from(self.finance.is_some()) + self.pages.len()
    }

    /// Position in `output` of the message, or of the first function call.
    fn answer_index(&self) -> usize {
        self.extras_index() + self.scenario.extra_items.len()
    }

    /// The timeline as it actually plays out: the whole scripted timeline, or, after a
    /// cancel at `c`, the entries up to `c` followed by `Cancelled` at `c + delay`.
    /// Sorted by offset; the index of an entry is its `sequence_number`.
    pub(crate) fn effective(&self) -> Vec<(Duration, Ev)> {
        match self.cancel_at {
            None => self.timeline.clone(),
            Some(c) => {
                let mut eff: Vec<_> = self
                    .timeline
                    .iter()
                    .copied()
                    .filter(|(o, _)| *o <= c)
                    .collect();
                let delay = Duration::from_millis(self.scenario.cancel_delay_ms);
                eff.push((c + delay, Ev::Cancelled));
                eff
            }
        }
    }

    pub(crate) fn elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.created)
    }

    /// How many entries of `eff` have taken effect after `elapsed`.
    pub(crate) fn applied(eff: &[(Duration, Ev)], elapsed: Duration) -> usize {
        eff.iter().take_while(|(o, _)| *o <= elapsed).count()
    }

    /// The response object at `now` (without any `status_sequence` override).
    pub(crate) fn response_now(&self, now: Instant) -> Value {
        let eff = self.effective();
        let k = Self::applied(&eff, self.elapsed(now));
        self.snapshot(&eff, k, self.cancel_at.is_some())
    }

    /// What a JSON-mode GET shows at `now`: [`Run::response_now`], with `output: []`
    /// while the run is not terminal when the scenario's `running_output` is `empty`.
    pub(crate) fn retrieve_now(&self, now: Instant) -> Value {
        let mut v = self.response_now(now);
        if self.scenario.running_output == RunningOutput::Empty
            && !self.is_terminal(now)
            && let Some(o) = v.as_object_mut()
        {
            o.insert("output".into(), json!([]));
        }
        v
    }

    /// The status at `now` (timeline status; `cancelling` during a cancel).
    pub(crate) fn status_now(&self, now: Instant) -> Value {
        let eff = self.effective();
        let k = Self::applied(&eff, self.elapsed(now));
        let (status, _) = self.status_after(&eff, k, self.cancel_at.is_some());
        Value::String(status)
    }

    /// The instant at which the run's terminal state takes (or took) effect, as things
    /// stand (a later cancel can move it).
    pub(crate) fn terminal_instant(&self) -> Instant {
        let last = self.effective().last().map_or(Duration::ZERO, |e| e.0);
        self.created + last
    }

    /// Whether every entry (the terminal one included) has taken effect.
    pub(crate) fn is_terminal(&self, now: Instant) -> bool {
        let eff = self.effective();
        Self::applied(&eff, self.elapsed(now)) == eff.len()
    }

    /// Unix ms at which the terminal state took effect, once it has.
    pub(crate) fn terminal_at_ms(&self, now: Instant) -> Option<u64> {
        let eff = self.effective();
        let last = eff.last()?.0;
        (self.elapsed(now) >= last).then(|| self.created_wall_ms + last.as_millis() as u64)
    }

    /// Status after applying the first `k` entries of `eff`, and the terminal entry
    /// applied (if any).
    fn status_after(
        &self,
        eff: &[(Duration, Ev)],
        k: usize,
        cancelled: bool,
    ) -> (String, Option<Ev>) {
        let mut status = "queued";
        let mut terminal = None;
        for (_, ev) in &eff[..k] {
            match ev {
                Ev::Created => status = "queued",
                Ev::InProgress => status = "in_progress",
                Ev::Terminal => {
                    status = self.final_status();
                    terminal = Some(Ev::Terminal);
                }
                Ev::Cancelled => {
                    status = "cancelled";
                    terminal = Some(Ev::Cancelled);
                }
                _ => {}
            }
        }
        if cancelled && terminal.is_none() {
            status = "cancelling";
        }
        (status.to_owned(), terminal)
    }

    /// The `error` of a failed run (the SDK's `ErrorInfo`: `code` is a string).
    fn error_object(&self) -> Value {
        let mut err = Map::new();
        if let Some(m) = &self.scenario.error_message {
            err.insert("message".into(), json!(m));
        }
        err.insert("type".into(), json!("server_error"));
        err.insert("code".into(), json!("500"));
        Value::Object(err)
    }

    /// The response object after applying the first `k` entries of `eff`.
    /// `cancelled` says whether a cancel has been accepted (status `cancelling_status`
    /// until the `Cancelled` entry is applied).
    pub(crate) fn snapshot(&self, eff: &[(Duration, Ev)], k: usize, cancelled: bool) -> Value {
        let (mut status, terminal) = self.status_after(eff, k, cancelled);
        if terminal == Some(Ev::Terminal)
            && let Some(fr) = &self.scenario.final_response
        {
            let mut fr = fr.clone();
            fr.insert("id".to_owned(), Value::String(self.id.clone()));
            return Value::Object(fr);
        }
        if cancelled && terminal.is_none() {
            status.clone_from(&self.scenario.cancelling_status);
        }
        let mut output = Vec::new();
        for (_, ev) in &eff[..k] {
            match ev {
                Ev::Search(i) => output.push(self.batches[*i].clone()),
                Ev::Fetch(i) => output.push(self.pages[*i].clone()),
                Ev::Finance => output.extend(self.finance.clone()),
                Ev::Extra(i) => output.push(self.scenario.extra_items[*i].clone()),
                Ev::FunctionCall(i) => output.push(self.calls[*i].clone()),
                _ => {}
            }
        }
        let mut obj = Map::new();
        obj.insert("id".into(), json!(self.id));
        obj.insert("object".into(), json!("response"));
        obj.insert("created_at".into(), json!(self.created_wall_ms / 1000));
        obj.insert("model".into(), json!("fake/model"));
        obj.insert("background".into(), json!(self.background));
        obj.insert("store".into(), json!(self.stored));
        obj.insert(
            "previous_response_id".into(),
            json!(self.previous_response_id),
        );
        obj.insert("status".into(), json!(status));
        if terminal == Some(Ev::Terminal)
            && self.calls.is_empty()
            && (status == "completed" || status == "incomplete")
        {
            output.push(self.message_item(&status));
        }
        obj.insert("output".into(), Value::Array(output));
        if terminal == Some(Ev::Terminal) && status == "failed" {
            obj.insert("error".into(), self.error_object());
        }
        if terminal == Some(Ev::Terminal) && status != "cancelled" {
            obj.insert("usage".into(), self.usage());
        }
        Value::Object(obj)
    }

    /// The SDK's `ResponsesUsage`, with one `tool_calls_details` entry per tool used.
    fn usage(&self) -> Value {
        let mut details = Map::new();
        if !self.batches.is_empty() {
            details.insert(
                "search_web".into(),
                json!({"invocation": self.batches.len()}),
            );
        }
        if !self.pages.is_empty() {
            details.insert("fetch_url".into(), json!({"invocation": self.pages.len()}));
        }
        let mut usage = json!({
            "input_tokens": 120, "output_tokens": 45, "total_tokens": 165,
            "tool_calls_details": details,
        });
        if let Some(total) = self.scenario.cost {
            // The components keep the default run's proportions of its total.
            let part = |share: f64| (total * share * 1e6).round() / 1e6;
            usage["cost"] = json!({
                "currency": "USD", "input_cost": part(0.0006 / 0.0123),
                "output_cost": part(0.0027 / 0.0123), "tool_calls_cost": part(0.009 / 0.0123),
                "total_cost": total
            });
        }
        if let Some(cost) = &self.scenario.cost_object {
            usage["cost"] = cost.clone();
        }
        usage
    }

    fn message_id(&self) -> String {
        format!("msg_{}", id_suffix(&self.id))
    }

    fn message_item(&self, status: &str) -> Value {
        let content: Vec<Value> = self
            .answer_parts
            .iter()
            .map(|t| json!({"type": "output_text", "text": t, "annotations": []}))
            .collect();
        json!({
            "id": self.message_id(), "type": "message", "role": "assistant",
            "status": status, "content": content
        })
    }

    /// The event JSON of entry `seq` of `eff` (its payload reflects the run right
    /// after that entry took effect).
    pub(crate) fn event(&self, eff: &[(Duration, Ev)], seq: usize) -> Value {
        let ev = eff[seq].1;
        let legacy_finance = self.scenario.finance_item == FinanceItem::FinanceResults;
        let mut obj = Map::new();
        let ty = match ev {
            Ev::Created => "response.created",
            Ev::InProgress => "response.in_progress",
            Ev::SearchQueries(_) => "response.reasoning.search_queries",
            Ev::Search(_) => "response.reasoning.search_results",
            Ev::FetchQueries(_) => "response.reasoning.fetch_url_queries",
            Ev::Fetch(_) => "response.reasoning.fetch_url_results",
            Ev::Finance if legacy_finance => "response.reasoning.finance_results",
            Ev::Finance | Ev::Extra(_) | Ev::FunctionCall(_) => "response.output_item.done",
            Ev::Delta(_) => "response.output_text.delta",
            Ev::TextDone(_) => "response.output_text.done",
            Ev::Cancelled => "response.cancelled",
            Ev::Terminal => match self.final_status() {
                "failed" => "response.failed",
                "incomplete" => "response.incomplete",
                "cancelled" => "response.cancelled",
                _ => "response.completed",
            },
        };
        obj.insert("type".into(), json!(ty));
        obj.insert("sequence_number".into(), json!(seq));
        match ev {
            Ev::Created | Ev::InProgress => {
                obj.insert("response".into(), self.snapshot(eff, seq + 1, false));
            }
            Ev::Terminal if ty == "response.failed" && !self.scenario.failed_event_response => {
                // The official event: `error` only, no `response`.
                let error = self
                    .scenario
                    .final_response
                    .as_ref()
                    .and_then(|fr| fr.get("error"))
                    .filter(|e| e.is_object())
                    .cloned()
                    .unwrap_or_else(|| self.error_object());
                obj.insert("error".into(), error);
            }
            Ev::Terminal | Ev::Cancelled => {
                let full = self.snapshot(eff, seq + 1, false);
                let carries_final = ev == Ev::Terminal && self.scenario.final_response.is_some();
                let response = if self.scenario.stream_terminal_full || carries_final {
                    full
                } else {
                    json!({"id": self.id, "status": full.get("status").cloned().unwrap_or(Value::Null)})
                };
                obj.insert("response".into(), response);
            }
            Ev::SearchQueries(i) => {
                let queries = self.batches[i].get("queries").cloned().unwrap_or(json!([]));
                obj.insert("queries".into(), queries);
            }
            Ev::Search(i) => {
                let results = self.batches[i].get("results").cloned().unwrap_or(json!([]));
                obj.insert("results".into(), results);
            }
            Ev::FetchQueries(i) => {
                let urls: Vec<Value> = self.pages[i]
                    .get("contents")
                    .and_then(Value::as_array)
                    .map(|c| c.iter().filter_map(|p| p.get("url").cloned()).collect())
                    .unwrap_or_default();
                obj.insert("urls".into(), Value::Array(urls));
            }
            Ev::Fetch(i) => {
                let contents = self.pages[i].get("contents").cloned().unwrap_or(json!([]));
                obj.insert("contents".into(), contents);
            }
            Ev::Finance if legacy_finance => {
                let results = self
                    .finance
                    .as_ref()
                    .and_then(|f| f.get("results"))
                    .cloned()
                    .unwrap_or(json!([]));
                obj.insert("results".into(), results);
            }
            Ev::Finance => {
                obj.insert("output_index".into(), json!(self.batches.len()));
                obj.insert("item".into(), self.finance.clone().unwrap_or(Value::Null));
            }
            Ev::Extra(i) => {
                obj.insert("output_index".into(), json!(self.extras_index() + i));
                obj.insert("item".into(), self.scenario.extra_items[i].clone());
            }
            Ev::FunctionCall(i) => {
                obj.insert("output_index".into(), json!(self.answer_index() + i));
                obj.insert("item".into(), self.calls[i].clone());
            }
            Ev::Delta(j) => {
                obj.insert("item_id".into(), json!(self.message_id()));
                obj.insert("output_index".into(), json!(self.answer_index()));
                obj.insert("content_index".into(), json!(j));
                obj.insert("delta".into(), json!(self.answer_parts[j]));
            }
            Ev::TextDone(j) => {
                obj.insert("item_id".into(), json!(self.message_id()));
                obj.insert("output_index".into(), json!(self.answer_index()));
                obj.insert("content_index".into(), json!(j));
                obj.insert("text".into(), json!(self.answer_parts[j]));
            }
        }
        Value::Object(obj)
    }
}

/// The run id without its `resp_` prefix (what item ids are made of).
fn id_suffix(id: &str) -> &str {
    id.strip_prefix("resp_").unwrap_or(id)
}

/// What the request adds to the scripted timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    /// A finance item, at the instant of the last search batch.
    pub finance: bool,
    /// Function call items at `d`, which replace the answer (no text deltas).
    pub calls: usize,
    /// Answer parts: one text delta and one text done each.
    pub parts: usize,
}

/// The text parts of a run's message: the scenario's; or, when the create asks for a
/// JSON schema and the scenario sets no `answer`, one part holding a document of that
/// schema, citing the URLs the input names (else the scenario's source URLs). A schema
/// that cannot be answered gets the scenario's parts too.
fn answer_parts(s: &Scenario, params: &CreateParams) -> Vec<String> {
    let made_up = params
        .json_schema
        .as_ref()
        .filter(|_| !s.answer_given)
        .and_then(|schema| {
            let urls = if params.input_urls.is_empty() {
                s.sources
                    .iter()
                    .filter_map(|src| src.get("url").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            } else {
                params.input_urls.clone()
            };
            json_answer::document(schema, &urls)
        });
    match made_up {
        Some(doc) => vec![doc.to_string()],
        None => s.answer_parts.clone(),
    }
}

/// The scripted timeline (offsets since creation). See the README's table.
pub(crate) fn build_timeline(s: &Scenario, shape: Shape) -> Vec<(Duration, Ev)> {
    let d = s.duration_ms * 1000; // microseconds
    let q = s
        .queued_ms
        .map(|q| q * 1000)
        .unwrap_or((d / 10).min(50_000))
        .min(d);
    let search_end = q.max(d * 6 / 10);
    let fetch_end = search_end.max(d * 8 / 10);
    let delta_at = fetch_end.max(d * 9 / 10);
    let us = Duration::from_micros;
    let mut t = vec![(us(0), Ev::Created), (us(q), Ev::InProgress)];
    let b = s.search_batches as u64;
    for i in 0..b {
        let o = us(q + (search_end - q) * (i + 1) / (b + 1));
        t.push((o, Ev::SearchQueries(i as usize)));
        t.push((o, Ev::Search(i as usize)));
    }
    if shape.finance {
        // With the last batch (or at `q` when there is none): `b/(b+1)` of the way.
        t.push((us(q + (search_end - q) * b / (b + 1)), Ev::Finance));
    }
    let p = s.fetch_pages as u64;
    for i in 0..p {
        let o = us(search_end + (fetch_end - search_end) * (i + 1) / (p + 1));
        t.push((o, Ev::FetchQueries(i as usize)));
        t.push((o, Ev::Fetch(i as usize)));
    }
    if shape.calls == 0 {
        for j in 0..shape.parts {
            t.push((us(delta_at), Ev::Delta(j)));
            t.push((us(delta_at), Ev::TextDone(j)));
        }
    }
    for i in 0..s.extra_items.len() {
        t.push((us(d), Ev::Extra(i)));
    }
    for i in 0..shape.calls {
        t.push((us(d), Ev::FunctionCall(i)));
    }
    t.push((us(d), Ev::Terminal));
    t
}

/// The `search_results` output items: sources split round-robin over the batches.
/// An object source is completed with defaults (`id`, `snippet`, `date`,
/// `last_updated`, `source`) that its own fields override; any other JSON value is
/// used verbatim.
fn build_batches(s: &Scenario) -> Vec<Value> {
    let n = s.search_batches;
    let mut results: Vec<Vec<Value>> = vec![Vec::new(); n];
    if n > 0 {
        for (i, src) in s.sources.iter().enumerate() {
            let r = match src {
                Value::Object(fields) => {
                    let mut m = Map::new();
                    m.insert("id".into(), json!(i + 1));
                    m.insert("snippet".into(), json!(format!("Fake snippet {}.", i + 1)));
                    m.insert("date".into(), json!("2026-01-15"));
                    m.insert("last_updated".into(), json!("2026-01-20"));
                    m.insert("source".into(), json!("web"));
                    for (k, v) in fields {
                        m.insert(k.clone(), v.clone());
                    }
                    Value::Object(m)
                }
                other => other.clone(),
            };
            results[i % n].push(r);
        }
    }
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            json!({"type": "search_results", "queries": [format!("fake query {}", i + 1)], "results": r})
        })
        .collect()
}

/// The `function_call` output items of a run that asks for the scenario's calls:
/// ids and default `call_id`s are made of the 1-based index and the run id.
fn build_calls(s: &Scenario, run_id: &str) -> Vec<Value> {
    let suffix = id_suffix(run_id);
    s.function_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let n = i + 1;
            let call_id = c
                .call_id
                .clone()
                .unwrap_or_else(|| format!("call_{n}_{suffix}"));
            json!({
                "id": format!("fc_{n}_{suffix}"), "type": "function_call", "status": "completed",
                "name": c.name, "call_id": call_id, "arguments": c.arguments,
                "thought_signature": "fake-signature"
            })
        })
        .collect()
}

/// The `fetch_url_results` output items: page `i` fetches source `i` (cycling), or a
/// made-up example.org page when that source has no string `url`.
fn build_pages(s: &Scenario) -> Vec<Value> {
    (0..s.fetch_pages)
        .map(|i| {
            let src = (!s.sources.is_empty()).then(|| &s.sources[i % s.sources.len()]);
            let url = src
                .and_then(|v| v.get("url"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("https://example.org/page{}", i + 1));
            let title = src
                .and_then(|v| v.get("title"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("Page {}", i + 1));
            let snippet = format!("Fetched content of page {}.", i + 1);
            json!({"type": "fetch_url_results", "contents": [{"url": url, "title": title, "snippet": snippet}]})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(v: Value) -> Run {
        let s = Scenario::from_json(&v).unwrap();
        Run::new(
            "resp_abc".into(),
            Instant::now(),
            1_700_000_000_000,
            Arc::new(s),
        )
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn default_timeline_offsets() {
        let r = run_with(json!({}));
        let t: Vec<_> = r
            .timeline
            .iter()
            .map(|(o, e)| (o.as_millis(), *e))
            .collect();
        assert_eq!(
            t,
            vec![
                (0, Ev::Created),
                (30, Ev::InProgress),
                (105, Ev::SearchQueries(0)),
                (105, Ev::Search(0)),
                (210, Ev::FetchQueries(0)),
                (210, Ev::Fetch(0)),
                (270, Ev::Delta(0)),
                (270, Ev::TextDone(0)),
                (300, Ev::Terminal)
            ]
        );
    }

    #[test]
    fn queued_ms_is_capped_at_50_and_clamped_to_duration() {
        let r = run_with(json!({"duration_ms": 2000}));
        assert_eq!(r.timeline[1], (ms(50), Ev::InProgress));
        let r = run_with(json!({"duration_ms": 100, "queued_ms": 500, "fetch_pages": 0}));
        let offs: Vec<_> = r.timeline.iter().map(|(o, _)| o.as_millis()).collect();
        assert_eq!(offs, vec![0, 100, 100, 100, 100, 100, 100]);
    }

    #[test]
    fn snapshots_follow_the_timeline() {
        let r = run_with(
            json!({"search_batches": 2, "sources": [{"url": "u1"}, {"url": "u2"}, "odd"]}),
        );
        let eff = r.effective();
        let at = |m| r.snapshot(&eff, Run::applied(&eff, ms(m)), false);
        assert_eq!(at(0)["status"], "queued");
        assert_eq!(at(0)["output"], json!([]));
        assert_eq!(at(40)["status"], "in_progress");
        let s = at(150);
        assert_eq!(s["output"].as_array().unwrap().len(), 2);
        assert_eq!(s["output"][0]["results"].as_array().unwrap().len(), 2);
        assert_eq!(s["output"][0]["results"][1], json!("odd"));
        assert_eq!(s["output"][1]["results"][0]["url"], "u2");
        assert_eq!(s["output"][1]["results"][0]["id"], 2);
        let done = at(300);
        assert_eq!(done["status"], "completed");
        let out = done["output"].as_array().unwrap();
        assert_eq!(out.len(), 4);
        assert_eq!(out[2]["type"], "fetch_url_results");
        assert_eq!(out[3]["type"], "message");
        assert_eq!(out[3]["content"][0]["text"], "Fake answer.");
        assert!(done.get("usage").is_some());
        assert!(at(299).get("usage").is_none());
    }

    #[test]
    fn failed_run_has_error_and_no_message() {
        let r = run_with(json!({"final_status": "failed", "error_message": null}));
        let v = r.snapshot(&r.timeline, r.timeline.len(), false);
        assert_eq!(v["status"], "failed");
        assert_eq!(v["error"], json!({"type": "server_error", "code": "500"}));
        assert!(
            v["output"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["type"] != "message")
        );
        let ev = r.event(&r.timeline, r.timeline.len() - 1);
        assert_eq!(ev["type"], "response.failed");
        assert!(ev.get("response").is_none());
        let r = run_with(json!({"final_status": "failed"}));
        let ev = r.event(&r.timeline, r.timeline.len() - 1);
        assert_eq!(
            ev,
            json!({"type": "response.failed", "sequence_number": 8,
                   "error": {"message": "fake failure", "type": "server_error", "code": "500"}})
        );
        let r = run_with(json!({"final_status": "failed", "failed_event_response": true}));
        let ev = r.event(&r.timeline, r.timeline.len() - 1);
        assert!(ev.get("error").is_none());
        assert_eq!(ev["response"]["error"]["code"], "500");
        // A final_response's own error object is what the event carries.
        let r = run_with(json!({"final_status": "failed",
            "final_response": {"status": "failed", "error": {"message": "own"}}}));
        let ev = r.event(&r.timeline, r.timeline.len() - 1);
        assert_eq!(ev["error"], json!({"message": "own"}));
    }

    #[test]
    fn cancel_truncates_the_timeline() {
        let mut r = run_with(json!({"cancel_delay_ms": 50}));
        r.cancel_at = Some(ms(120));
        let eff = r.effective();
        let kinds: Vec<_> = eff.iter().map(|(_, e)| *e).collect();
        assert_eq!(
            kinds,
            vec![
                Ev::Created,
                Ev::InProgress,
                Ev::SearchQueries(0),
                Ev::Search(0),
                Ev::Cancelled
            ]
        );
        assert_eq!(eff[4].0, ms(170));
        let mid = r.snapshot(&eff, Run::applied(&eff, ms(150)), true);
        assert_eq!(mid["status"], "in_progress", "cancelling_status");
        assert_eq!(mid["output"].as_array().unwrap().len(), 1);
        let end = r.snapshot(&eff, Run::applied(&eff, ms(170)), true);
        assert_eq!(end["status"], "cancelled");
        assert!(end.get("usage").is_none());
        assert_eq!(r.event(&eff, 4)["type"], "response.cancelled");
        assert_eq!(r.event(&eff, 4)["sequence_number"], 4);
        let mut r = run_with(json!({"cancelling_status": "cancelling"}));
        r.cancel_at = Some(ms(120));
        let eff = r.effective();
        let mid = r.snapshot(&eff, Run::applied(&eff, ms(150)), true);
        assert_eq!(mid["status"], "cancelling");
        assert_eq!(r.status_now(r.created + ms(150)), json!("cancelling"));
    }

    #[test]
    fn final_response_and_terminal_shape() {
        let r = run_with(json!({"final_response": {"id": "x", "status": "completed", "weird": 1}}));
        let last = r.timeline.len() - 1;
        let v = r.snapshot(&r.timeline, last + 1, false);
        assert_eq!(
            v,
            json!({"id": "resp_abc", "status": "completed", "weird": 1})
        );
        assert_eq!(r.event(&r.timeline, last)["response"], v);
        let r = run_with(json!({"stream_terminal_full": false, "final_status": "odd"}));
        let ev = r.event(&r.timeline, last);
        assert_eq!(ev["type"], "response.completed");
        assert_eq!(ev["response"], json!({"id": "resp_abc", "status": "odd"}));
    }

    #[test]
    fn answer_parts_give_one_delta_each() {
        let r = run_with(json!({"answer_parts": ["a", "b"], "fetch_pages": 2}));
        let deltas: Vec<_> = r
            .timeline
            .iter()
            .enumerate()
            .filter(|(_, (_, e))| matches!(e, Ev::Delta(_) | Ev::TextDone(_)))
            .map(|(i, _)| r.event(&r.timeline, i))
            .collect();
        assert_eq!(deltas.len(), 4);
        assert_eq!(deltas[2]["type"], "response.output_text.delta");
        assert_eq!(deltas[2]["delta"], "b");
        assert_eq!(deltas[2]["output_index"], 3);
        assert_eq!(deltas[2]["content_index"], 1);
        assert_eq!(
            deltas[3],
            json!({"type": "response.output_text.done", "sequence_number": 11,
                   "item_id": "msg_abc", "output_index": 3, "content_index": 1, "text": "b"})
        );
        let done = r.snapshot(&r.timeline, r.timeline.len(), false);
        assert_eq!(done["output"][3]["content"][1]["text"], "b");
    }

    fn run_for(v: Value, params: CreateParams) -> Run {
        let s = Scenario::from_json(&v).unwrap();
        Run::for_request(
            "resp_abc".into(),
            Instant::now(),
            1_700_000_000_000,
            Arc::new(s),
            &params,
        )
    }

    fn with_tools(round: u64, function_tool: bool, finance_tool: bool) -> CreateParams {
        CreateParams {
            round,
            function_tool,
            finance_tool,
            ..CreateParams::default()
        }
    }

    fn kinds(r: &Run) -> Vec<(u128, Ev)> {
        r.timeline
            .iter()
            .map(|(o, e)| (o.as_millis(), *e))
            .collect()
    }

    const CALLS: &str = r#"{"function_calls": [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "lookup", "arguments": "{}", "call_id": "call_given"}
    ], "function_call_status": "requires_action"}"#;

    #[test]
    fn create_params_read_tools_and_store() {
        let body = |v: Value| v.as_object().unwrap().clone();
        let p = CreateParams::from_body(&body(json!({
            "input": "q", "store": false,
            "tools": [{"type": "web_search"}, "odd", {"type": "function", "name": "f"}]
        })));
        assert_eq!(p, with_tools(0, true, false).with_stored(false));
        let p = CreateParams::from_body(&body(json!({
            "tools": [{"type": "finance_search"}], "store": "false", "background": "false",
            "previous_response_id": 5
        })));
        assert_eq!(p, with_tools(0, false, true));
        let p = CreateParams::from_body(&body(json!({
            "background": false, "previous_response_id": "resp_prev"
        })));
        assert!(!p.background);
        assert_eq!(p.previous_response_id.as_deref(), Some("resp_prev"));
        for tools in [
            json!({"type": "function"}),
            json!(["function"]),
            json!([{"name": "function"}]),
        ] {
            let p = CreateParams::from_body(&body(json!({"tools": tools})));
            assert!(!p.function_tool, "{tools}");
        }
        assert_eq!(
            CreateParams::from_body(&Map::new()),
            CreateParams::default()
        );
    }

    #[test]
    fn function_calls_replace_the_answer_at_the_end() {
        let r = run_for(
            serde_json::from_str(CALLS).unwrap(),
            with_tools(0, true, false),
        );
        assert_eq!(
            kinds(&r),
            vec![
                (0, Ev::Created),
                (30, Ev::InProgress),
                (105, Ev::SearchQueries(0)),
                (105, Ev::Search(0)),
                (210, Ev::FetchQueries(0)),
                (210, Ev::Fetch(0)),
                (300, Ev::FunctionCall(0)),
                (300, Ev::FunctionCall(1)),
                (300, Ev::Terminal)
            ],
            "no text deltas"
        );
        let eff = r.effective();
        let before = r.snapshot(&eff, Run::applied(&eff, ms(299)), false);
        assert_eq!(before["output"].as_array().unwrap().len(), 2);
        let done = r.snapshot(&eff, eff.len(), false);
        assert_eq!(done["status"], "requires_action");
        assert!(done["usage"].is_object());
        let out = done["output"].as_array().unwrap();
        assert_eq!(out.len(), 4);
        assert_eq!(
            out[2],
            json!({
                "id": "fc_1_abc", "type": "function_call", "status": "completed",
                "name": "get_weather", "call_id": "call_1_abc",
                "arguments": r#"{"city":"Paris"}"#, "thought_signature": "fake-signature"
            })
        );
        assert_eq!(out[3]["id"], "fc_2_abc");
        assert_eq!(out[3]["call_id"], "call_given");
        assert_eq!(out[3]["arguments"], "{}");
        let ev = r.event(&eff, 7);
        assert_eq!(ev["type"], "response.output_item.done");
        assert_eq!(ev["output_index"], 3);
        assert_eq!(ev["item"], out[3]);
        assert_eq!(r.event(&eff, 8)["type"], "response.completed");
        assert_eq!(r.event(&eff, 8)["response"], done);
        assert!(r.is_terminal(r.created + ms(300)));
    }

    #[test]
    fn function_calls_need_a_function_tool_and_an_early_round() {
        let calls: Value = serde_json::from_str(CALLS).unwrap();
        for params in [with_tools(0, false, false), with_tools(1, true, false)] {
            let r = run_for(calls.clone(), params);
            assert!(r.calls.is_empty());
            let done = r.snapshot(&r.timeline, r.timeline.len(), false);
            assert_eq!(
                done["status"], "completed",
                "final_status, not the calls' one"
            );
            assert_eq!(done["output"][2]["type"], "message");
        }
        let mut more = calls.clone();
        more["function_call_rounds"] = json!(2);
        assert_eq!(
            run_for(more.clone(), with_tools(1, true, false))
                .calls
                .len(),
            2
        );
        assert!(run_for(more, with_tools(2, true, false)).calls.is_empty());
        let mut none = calls;
        none["function_call_rounds"] = json!(0);
        assert!(run_for(none, with_tools(0, true, false)).calls.is_empty());
        assert!(
            run_for(json!({}), with_tools(0, true, false))
                .calls
                .is_empty()
        );
    }

    #[test]
    fn a_cancel_before_the_end_drops_the_function_calls() {
        let mut r = run_for(
            serde_json::from_str(CALLS).unwrap(),
            with_tools(0, true, false),
        );
        r.cancel_at = Some(ms(250));
        let eff = r.effective();
        let end = r.snapshot(&eff, eff.len(), true);
        assert_eq!(end["status"], "cancelled");
        assert!(
            end["output"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["type"] != "function_call")
        );
    }

    #[test]
    fn finance_results_come_with_the_last_search_batch() {
        let v = json!({"search_batches": 2, "finance_results": [{"ticker": "ACME"}, 3]});
        let r = run_for(v.clone(), with_tools(0, false, true));
        assert_eq!(
            kinds(&r),
            vec![
                (0, Ev::Created),
                (30, Ev::InProgress),
                (80, Ev::SearchQueries(0)),
                (80, Ev::Search(0)),
                (130, Ev::SearchQueries(1)),
                (130, Ev::Search(1)),
                (130, Ev::Finance),
                (210, Ev::FetchQueries(0)),
                (210, Ev::Fetch(0)),
                (270, Ev::Delta(0)),
                (270, Ev::TextDone(0)),
                (300, Ev::Terminal)
            ]
        );
        let item = json!({"type": "unknown", "item_name": "finance_results",
                          "payload": {"results": [{"ticker": "ACME"}, 3]}});
        assert_eq!(
            r.event(&r.timeline, 6),
            json!({"type": "response.output_item.done", "sequence_number": 6,
                   "output_index": 2, "item": item})
        );
        assert_eq!(
            r.event(&r.timeline, 9)["output_index"],
            4,
            "delta after the finance item"
        );
        let done = r.snapshot(&r.timeline, r.timeline.len(), false);
        let out = done["output"].as_array().unwrap();
        let types: Vec<_> = out.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "search_results",
                "search_results",
                "unknown",
                "fetch_url_results",
                "message"
            ]
        );
        assert_eq!(out[2], item);
        // The old shape, on request.
        let mut old = v.clone();
        old["finance_item"] = json!("finance_results");
        let r = run_for(old, with_tools(0, false, true));
        let ev = r.event(&r.timeline, 6);
        assert_eq!(ev["type"], "response.reasoning.finance_results");
        assert_eq!(ev["results"], json!([{"ticker": "ACME"}, 3]));
        let done = r.snapshot(&r.timeline, r.timeline.len(), false);
        assert_eq!(
            done["output"][2],
            json!({"type": "finance_results", "results": [{"ticker": "ACME"}, 3]})
        );
        // Without the tool, or without the field: no item.
        assert!(run_for(v, with_tools(0, false, false)).finance.is_none());
        assert!(
            run_for(json!({}), with_tools(0, false, true))
                .finance
                .is_none()
        );
        // No search batch: at `q`, right after `in_progress`.
        let r = run_for(
            json!({"search_batches": 0, "finance_results": []}),
            with_tools(0, false, true),
        );
        assert_eq!(r.timeline[2], (ms(30), Ev::Finance));
        assert_eq!(r.event(&r.timeline, 2)["output_index"], 0);
    }

    #[test]
    fn extra_items_come_at_the_end_before_the_answer() {
        let extras = json!([{"type": "skill_loaded", "name": "office/xlsx"},
                            {"type": "unknown", "item_name": "x", "payload": {}}]);
        let r = run_with(json!({"extra_items": extras, "answer_parts": ["a"]}));
        let t = kinds(&r);
        assert_eq!(
            t[t.len() - 3..],
            [
                (300, Ev::Extra(0)),
                (300, Ev::Extra(1)),
                (300, Ev::Terminal)
            ]
        );
        let n = r.timeline.len();
        let ev = r.event(&r.timeline, n - 2);
        assert_eq!(
            ev,
            json!({"type": "response.output_item.done", "sequence_number": n - 2,
                   "output_index": 3, "item": extras[1]})
        );
        assert_eq!(r.event(&r.timeline, 6)["output_index"], 4, "message index");
        let before = r.snapshot(&r.timeline, n - 3, false);
        assert_eq!(before["output"].as_array().unwrap().len(), 2);
        let done = r.snapshot(&r.timeline, n, false);
        assert_eq!(done["output"][2], extras[0]);
        assert_eq!(done["output"][3], extras[1]);
        assert_eq!(done["output"][4]["type"], "message");
        // With function calls: the calls come after them.
        let mut v: Value = serde_json::from_str(CALLS).unwrap();
        v["extra_items"] = extras.clone();
        let r = run_for(v, with_tools(0, true, false));
        let done = r.snapshot(&r.timeline, r.timeline.len(), false);
        assert_eq!(done["output"][4]["id"], "fc_1_abc");
        let last = r.timeline.len() - 1;
        assert_eq!(r.event(&r.timeline, last - 2)["output_index"], 4);
    }

    #[test]
    fn the_response_object_echoes_the_create() {
        let r = run_for(
            json!({"duration_ms": 0}),
            CreateParams {
                background: false,
                stored: false,
                previous_response_id: Some("resp_prev".into()),
                ..CreateParams::default()
            },
        );
        let v = r.snapshot(&r.timeline, 1, false);
        assert_eq!(
            v,
            json!({"id": "resp_abc", "object": "response", "created_at": 1_700_000_000,
                   "model": "fake/model", "background": false, "store": false,
                   "previous_response_id": "resp_prev", "status": "queued", "output": []})
        );
        let r = run_with(json!({}));
        let v = r.snapshot(&r.timeline, r.timeline.len(), false);
        assert_eq!(
            (&v["background"], &v["store"], &v["previous_response_id"]),
            (&json!(true), &json!(true), &Value::Null)
        );
        assert_eq!(
            v["usage"],
            json!({"input_tokens": 120, "output_tokens": 45, "total_tokens": 165,
                   "tool_calls_details": {"search_web": {"invocation": 1}, "fetch_url": {"invocation": 1}},
                   "cost": {"currency": "USD", "input_cost": 0.0006, "output_cost": 0.0027,
                            "tool_calls_cost": 0.009, "total_cost": 0.0123}})
        );
    }

    #[test]
    fn running_output_empty_hides_partial_results_from_gets() {
        let r = run_with(json!({"running_output": "empty"}));
        let mid = r.created + ms(250);
        assert_eq!(r.retrieve_now(mid)["output"], json!([]));
        assert_eq!(r.response_now(mid)["output"].as_array().unwrap().len(), 2);
        let end = r.created + ms(300);
        assert_eq!(r.retrieve_now(end)["output"].as_array().unwrap().len(), 3);
        let r = run_with(json!({}));
        assert_eq!(r.retrieve_now(mid)["output"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_json_schema_create_gets_a_document_unless_the_scenario_scripts_the_answer() {
        let body = |v: Value| CreateParams::from_body(v.as_object().unwrap());
        let schema = json!({"type": "object", "required": ["urls", "n"], "properties": {
            "urls": {"type": "array", "items": {"type": "string"}}, "n": {"type": "integer"}}});
        let asks = |input: &str| {
            body(json!({"input": input, "response_format":
                {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}))
        };
        let text = |r: &Run| {
            let done = r.snapshot(&r.timeline, r.timeline.len(), false);
            done["output"][2]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        // Cites the URLs the input names, else the scenario's sources.
        let r = run_for(json!({}), asks("see https://a.example/x."));
        assert_eq!(
            text(&r),
            r#"{"urls":["https://a.example/x","https://a.example/x"],"n":1}"#
        );
        let r = run_for(json!({}), asks("no links"));
        let doc = text(&r);
        assert_eq!(
            doc,
            r#"{"urls":["https://example.org/one","https://example.org/two"],"n":1}"#
        );
        let delta = r
            .timeline
            .iter()
            .position(|(_, e)| *e == Ev::Delta(0))
            .unwrap();
        assert_eq!(r.event(&r.timeline, delta)["delta"], doc, "streamed too");
        // A scripted answer wins, as does the plain answer over an unanswerable schema
        // and a request without a schema.
        let r = run_for(json!({"answer": "Scripted."}), asks("q"));
        assert_eq!(text(&r), "Scripted.");
        let r = run_for(json!({"answer_parts": []}), asks("q"));
        assert_eq!(r.answer_parts, Vec::<String>::new());
        let bad = body(json!({"input": "q", "response_format":
            {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}}));
        assert_eq!(text(&run_for(json!({}), bad)), "Fake answer.");
        assert_eq!(
            text(&run_for(json!({}), body(json!({"input": "q"})))),
            "Fake answer."
        );
    }

    #[test]
    fn finance_and_function_calls_together_index_after_the_pages() {
        let mut v: Value = serde_json::from_str(CALLS).unwrap();
        v["finance_results"] = json!([]);
        let r = run_for(v, with_tools(0, true, true));
        let last = r.timeline.len() - 1;
        assert_eq!(r.event(&r.timeline, last - 2)["output_index"], 3);
        assert_eq!(r.event(&r.timeline, last - 1)["output_index"], 4);
        let done = r.snapshot(&r.timeline, r.timeline.len(), false);
        assert_eq!(done["output"][4]["id"], "fc_2_abc");
    }
}
