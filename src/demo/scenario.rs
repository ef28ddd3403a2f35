//! The scenario: the script that decides how the fake behaves (run timeline, answer,
//! sources, streaming switches, auth, /search results). Parsed strictly from JSON:
//! unknown fields and wrongly typed values are errors, `null` means "use the default".

use serde_json::{Map, Value};

/// Upper bound for every millisecond field (about 31 years), so instant arithmetic
/// can never overflow.
const MAX_MS: u64 = 1_000_000_000_000;
/// Upper bound for item counts (`search_batches`, `fetch_pages`).
const MAX_ITEMS: u64 = 100_000;

/// A parsed scenario with every default filled in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scenario {
    pub duration_ms: u64,
    /// `None` = `min(50, duration_ms / 10)`.
    pub queued_ms: Option<u64>,
    pub final_status: String,
    /// The `output_text` parts of the final message (`[answer]` or `answer_parts`).
    pub answer_parts: Vec<String>,
    /// `answer` or `answer_parts` was set: the answer of every run, even one whose
    /// create asks for a JSON schema (otherwise that run answers a document of it).
    pub answer_given: bool,
    pub sources: Vec<Value>,
    pub search_batches: usize,
    pub fetch_pages: usize,
    /// `None` = a `failed` run's `error` has no `message`.
    pub error_message: Option<String>,
    pub final_response: Option<Map<String, Value>>,
    pub status_sequence: Option<Vec<Value>>,
    pub create_response: Option<Value>,
    pub stream: bool,
    pub stream_drop_after: Option<u64>,
    pub resume: bool,
    pub stream_terminal_full: bool,
    pub cancel_delay_ms: u64,
    pub cancel_unknown_status: u16,
    pub expected_key: Option<String>,
    pub search_results: Option<Vec<Value>>,
    /// The calls a run asks for when the request offers a `function` tool (`[]` = none).
    pub function_calls: Vec<FunctionCall>,
    /// Runs whose `round` is below this ask for `function_calls`.
    pub function_call_rounds: u64,
    /// Final status of a run that ends with function calls.
    pub function_call_status: String,
    /// `results` of the finance item (when the request offers `finance_search`).
    pub finance_results: Option<Vec<Value>>,
    /// SSE frames carry an `event: <type>` line before their `data:` line.
    pub sse_event_lines: bool,
    /// `: keep-alive` comment lines written before every SSE frame.
    pub sse_comment_lines: usize,
    /// `response.failed` carries the old `response` instead of the official `error`.
    pub failed_event_response: bool,
    /// What a JSON-mode GET of a non-terminal run shows in `output`.
    pub running_output: RunningOutput,
    /// The shape of the finance item and of its stream event.
    pub finance_item: FinanceItem,
    /// Output items (JSON objects) appended verbatim at the terminal instant.
    pub extra_items: Vec<Value>,
    /// The ids listed by `GET /v1/models` (`None` = the default catalogue).
    pub models: Option<Vec<String>>,
    /// `POST /v1/agent` rejects fields that the SDK's request types do not have.
    pub strict_fields: bool,
    /// The status a GET shows between an accepted cancel and `cancelled`.
    pub cancelling_status: String,
    /// `usage.cost.total_cost` of a finished run; `None` = `usage` without `cost`.
    pub cost: Option<f64>,
    /// `usage.cost` exactly as given (a hostile or broken upstream), in place of `cost`'s.
    pub cost_object: Option<Value>,
}

/// `running_output`: what a GET of a running run shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunningOutput {
    /// The items appended so far (the timeline's view).
    Progressive,
    /// `output: []` until the run is terminal (partial results only on the stream).
    Empty,
}

/// `finance_item`: how the scenario's `finance_results` reach the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinanceItem {
    /// `{"type":"unknown","item_name":"finance_results","payload":{"results":…}}`, announced
    /// by `response.output_item.done` (what the SDK would see).
    Unknown,
    /// The old `{"type":"finance_results","results":…}` item and its
    /// `response.reasoning.finance_results` event.
    FinanceResults,
}

/// One scripted function call (`function_calls[]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FunctionCall {
    pub name: String,
    /// Always a string on the wire: non-string JSON is serialised compactly.
    pub arguments: String,
    /// `None` = made up from the item's index and the run id.
    pub call_id: Option<String>,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            duration_ms: 300,
            queued_ms: None,
            final_status: "completed".to_owned(),
            answer_parts: vec!["Fake answer.".to_owned()],
            answer_given: false,
            sources: default_sources(),
            search_batches: 1,
            fetch_pages: 1,
            error_message: Some("fake failure".to_owned()),
            final_response: None,
            status_sequence: None,
            create_response: None,
            stream: true,
            stream_drop_after: None,
            resume: true,
            stream_terminal_full: true,
            cancel_delay_ms: 100,
            cancel_unknown_status: 404,
            expected_key: None,
            search_results: None,
            function_calls: Vec::new(),
            function_call_rounds: 1,
            function_call_status: "completed".to_owned(),
            finance_results: None,
            sse_event_lines: false,
            sse_comment_lines: 0,
            failed_event_response: false,
            running_output: RunningOutput::Progressive,
            finance_item: FinanceItem::Unknown,
            extra_items: Vec::new(),
            models: None,
            strict_fields: true,
            cancelling_status: "in_progress".to_owned(),
            cost: Some(0.0123),
            cost_object: None,
        }
    }
}

fn default_sources() -> Vec<Value> {
    vec![
        serde_json::json!({"title": "Example One", "url": "https://example.org/one"}),
        serde_json::json!({"title": "Example Two", "url": "https://example.org/two"}),
    ]
}

impl Scenario {
    /// Parses a scenario. `null` and `{}` give the defaults.
    pub(crate) fn from_json(value: &Value) -> Result<Scenario, String> {
        let mut s = Scenario::default();
        let obj = match value {
            Value::Null => return Ok(s),
            Value::Object(obj) => obj,
            other => {
                return Err(format!(
                    "scenario must be a JSON object, got {}",
                    kind(other)
                ));
            }
        };
        let mut answer: Option<String> = None;
        let mut answer_parts: Option<Vec<String>> = None;
        for (key, v) in obj {
            // `error_message: null` is meaningful (an error without a message).
            if key == "error_message" {
                s.error_message = match v {
                    Value::Null => None,
                    Value::String(m) => Some(m.clone()),
                    other => return Err(type_err(key, "a string or null", other)),
                };
                continue;
            }
            if v.is_null() {
                if !KNOWN_FIELDS.contains(&key.as_str()) {
                    return Err(unknown_field(key));
                }
                continue;
            }
            match key.as_str() {
                "duration_ms" => s.duration_ms = ms(key, v)?,
                "queued_ms" => s.queued_ms = Some(ms(key, v)?),
                "final_status" => s.final_status = string(key, v)?,
                "answer" => answer = Some(string(key, v)?),
                "answer_parts" => {
                    let arr = array(key, v)?;
                    let mut parts = Vec::with_capacity(arr.len());
                    for p in arr {
                        match p {
                            Value::String(t) => parts.push(t.clone()),
                            other => return Err(type_err("answer_parts[]", "a string", other)),
                        }
                    }
                    answer_parts = Some(parts);
                }
                "sources" => s.sources = array(key, v)?.clone(),
                "search_batches" => s.search_batches = count(key, v)?,
                "fetch_pages" => s.fetch_pages = count(key, v)?,
                "final_response" => match v {
                    Value::Object(m) => s.final_response = Some(m.clone()),
                    other => return Err(type_err(key, "a JSON object", other)),
                },
                "status_sequence" => {
                    let arr = array(key, v)?;
                    s.status_sequence = if arr.is_empty() {
                        None
                    } else {
                        Some(arr.clone())
                    };
                }
                "create_response" => s.create_response = Some(v.clone()),
                "stream" => s.stream = boolean(key, v)?,
                "stream_drop_after" => s.stream_drop_after = Some(uint(key, v)?),
                "resume" => s.resume = boolean(key, v)?,
                "stream_terminal_full" => s.stream_terminal_full = boolean(key, v)?,
                "cancel_delay_ms" => s.cancel_delay_ms = ms(key, v)?,
                "cancel_unknown_status" => {
                    let n = uint(key, v)?;
                    if !(100..=999).contains(&n) {
                        return Err(format!("`{key}` must be an HTTP status (100-999), got {n}"));
                    }
                    s.cancel_unknown_status = n as u16;
                }
                "expected_key" => s.expected_key = Some(string(key, v)?),
                "search_results" => s.search_results = Some(array(key, v)?.clone()),
                "function_calls" => s.function_calls = function_calls(key, v)?,
                "function_call_rounds" => s.function_call_rounds = uint(key, v)?,
                "function_call_status" => s.function_call_status = string(key, v)?,
                "finance_results" => s.finance_results = Some(array(key, v)?.clone()),
                "sse_event_lines" => s.sse_event_lines = boolean(key, v)?,
                "sse_comment_lines" => s.sse_comment_lines = count(key, v)?,
                "failed_event_response" => s.failed_event_response = boolean(key, v)?,
                "running_output" => {
                    s.running_output = match string(key, v)?.as_str() {
                        "progressive" => RunningOutput::Progressive,
                        "empty" => RunningOutput::Empty,
                        other => {
                            return Err(format!(
                                "`{key}` must be \"progressive\" or \"empty\", got {other:?}"
                            ));
                        }
                    }
                }
                "finance_item" => {
                    s.finance_item = match string(key, v)?.as_str() {
                        "unknown" => FinanceItem::Unknown,
                        "finance_results" => FinanceItem::FinanceResults,
                        other => {
                            return Err(format!(
                                "`{key}` must be \"unknown\" or \"finance_results\", got {other:?}"
                            ));
                        }
                    }
                }
                "extra_items" => {
                    let arr = array(key, v)?;
                    if let Some(bad) = arr.iter().find(|i| !i.is_object()) {
                        return Err(type_err("extra_items[]", "a JSON object", bad));
                    }
                    s.extra_items = arr.clone();
                }
                "models" => {
                    let arr = array(key, v)?;
                    let mut ids = Vec::with_capacity(arr.len());
                    for m in arr {
                        ids.push(string("models[]", m)?);
                    }
                    s.models = Some(ids);
                }
                "strict_fields" => s.strict_fields = boolean(key, v)?,
                "cancelling_status" => s.cancelling_status = string(key, v)?,
                "cost_object" => {
                    if !v.is_object() {
                        return Err(type_err(key, "a JSON object", v));
                    }
                    s.cost_object = Some(v.clone());
                }
                "cost" => {
                    s.cost = match v {
                        Value::String(t) if t == "unreported" => None,
                        Value::Number(n) => match n.as_f64() {
                            Some(c) if c >= 0.0 && c.is_finite() => Some(c),
                            _ => return Err(format!("`{key}` must be a non-negative number")),
                        },
                        other => {
                            return Err(type_err(
                                key,
                                "a non-negative number or \"unreported\"",
                                other,
                            ));
                        }
                    }
                }
                _ => return Err(unknown_field(key)),
            }
        }
        if let Some(parts) = answer_parts {
            s.answer_parts = parts;
            s.answer_given = true;
        } else if let Some(a) = answer {
            s.answer_parts = vec![a];
            s.answer_given = true;
        }
        Ok(s)
    }
}

const KNOWN_FIELDS: &[&str] = &[
    "duration_ms",
    "queued_ms",
    "final_status",
    "answer",
    "answer_parts",
    "sources",
    "search_batches",
    "fetch_pages",
    "error_message",
    "final_response",
    "status_sequence",
    "create_response",
    "stream",
    "stream_drop_after",
    "resume",
    "stream_terminal_full",
    "cancel_delay_ms",
    "cancel_unknown_status",
    "expected_key",
    "search_results",
    "function_calls",
    "function_call_rounds",
    "function_call_status",
    "finance_results",
    "sse_event_lines",
    "sse_comment_lines",
    "failed_event_response",
    "running_output",
    "finance_item",
    "extra_items",
    "models",
    "strict_fields",
    "cancelling_status",
    "cost",
    "cost_object",
];

const FUNCTION_CALL_FIELDS: &[&str] = &["name", "arguments", "call_id"];

/// Parses `function_calls`: an array of `{name, arguments, call_id?}` objects.
fn function_calls(key: &str, v: &Value) -> Result<Vec<FunctionCall>, String> {
    array(key, v)?
        .iter()
        .enumerate()
        .map(|(i, c)| function_call(&format!("{key}[{i}]"), c))
        .collect()
}

/// One `function_calls` entry, as strictly as the scenario itself: unknown keys are
/// errors, `name` and `arguments` are required, `call_id: null` means "made up".
fn function_call(key: &str, v: &Value) -> Result<FunctionCall, String> {
    let Value::Object(obj) = v else {
        return Err(type_err(key, "a JSON object", v));
    };
    let (mut name, mut arguments, mut call_id) = (None, None, None);
    for (k, f) in obj {
        let field = format!("{key}.{k}");
        match k.as_str() {
            "name" => name = Some(string(&field, f)?),
            // Arguments are a JSON string on the wire; any other JSON is a shorthand.
            "arguments" => {
                arguments = Some(match f {
                    Value::String(a) => a.clone(),
                    other => other.to_string(),
                })
            }
            "call_id" if f.is_null() => call_id = None,
            "call_id" => call_id = Some(string(&field, f)?),
            _ => {
                return Err(format!(
                    "unknown field `{k}` in `{key}` (known: {})",
                    FUNCTION_CALL_FIELDS.join(", ")
                ));
            }
        }
    }
    Ok(FunctionCall {
        name: name.ok_or_else(|| format!("`{key}.name` is required"))?,
        arguments: arguments.ok_or_else(|| format!("`{key}.arguments` is required"))?,
        call_id,
    })
}

fn unknown_field(key: &str) -> String {
    format!(
        "unknown scenario field `{key}` (known: {})",
        KNOWN_FIELDS.join(", ")
    )
}

/// A short name of a JSON value's type, for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn type_err(key: &str, want: &str, got: &Value) -> String {
    format!("`{key}` must be {want}, got {}", kind(got))
}

pub(crate) fn uint(key: &str, v: &Value) -> Result<u64, String> {
    v.as_u64()
        .ok_or_else(|| type_err(key, "a non-negative integer", v))
}

pub(crate) fn ms(key: &str, v: &Value) -> Result<u64, String> {
    let n = uint(key, v)?;
    if n > MAX_MS {
        return Err(format!("`{key}` is too large (max {MAX_MS})"));
    }
    Ok(n)
}

fn count(key: &str, v: &Value) -> Result<usize, String> {
    let n = uint(key, v)?;
    if n > MAX_ITEMS {
        return Err(format!("`{key}` is too large (max {MAX_ITEMS})"));
    }
    Ok(n as usize)
}

pub(crate) fn string(key: &str, v: &Value) -> Result<String, String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| type_err(key, "a string", v))
}

pub(crate) fn boolean(key: &str, v: &Value) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| type_err(key, "a boolean", v))
}

fn array<'a>(key: &str, v: &'a Value) -> Result<&'a Vec<Value>, String> {
    v.as_array().ok_or_else(|| type_err(key, "an array", v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_from_null_and_empty_object() {
        assert_eq!(
            Scenario::from_json(&Value::Null).unwrap(),
            Scenario::default()
        );
        assert_eq!(
            Scenario::from_json(&json!({})).unwrap(),
            Scenario::default()
        );
    }

    #[test]
    fn fields_parse() {
        let s = Scenario::from_json(&json!({
            "duration_ms": 1000, "queued_ms": 5, "final_status": "failed",
            "answer_parts": ["a", "b"], "answer": "ignored", "error_message": null,
            "status_sequence": ["queued", 7], "stream": false, "cancel_unknown_status": 404,
            "final_response": {"x": 1}, "create_response": [1], "sources": [1, "two"],
            "queued_ms": null
        }))
        .unwrap();
        assert_eq!(s.duration_ms, 1000);
        assert_eq!(s.queued_ms, None);
        assert_eq!(s.final_status, "failed");
        assert_eq!(s.answer_parts, vec!["a", "b"]);
        assert!(s.answer_given);
        assert!(!Scenario::default().answer_given);
        assert!(
            !Scenario::from_json(&json!({"answer": null}))
                .unwrap()
                .answer_given
        );
        assert!(
            Scenario::from_json(&json!({"answer": "a"}))
                .unwrap()
                .answer_given
        );
        assert_eq!(s.error_message, None);
        assert_eq!(s.status_sequence, Some(vec![json!("queued"), json!(7)]));
        assert!(!s.stream);
        assert_eq!(s.cancel_unknown_status, 404);
        assert_eq!(s.create_response, Some(json!([1])));
        assert_eq!(s.sources, vec![json!(1), json!("two")]);
    }

    #[test]
    fn invalid_scenarios_are_rejected() {
        for bad in [
            json!([1]),
            json!({"duration": 5}),
            json!({"duration_ms": -1}),
            json!({"duration_ms": "5"}),
            json!({"answer_parts": [1]}),
            json!({"final_response": [1]}),
            json!({"cancel_unknown_status": 42}),
            json!({"stream": "yes"}),
            json!({"nope": null}),
            json!({"function_calls": {"name": "f"}}),
            json!({"function_calls": [1]}),
            json!({"function_calls": [{"name": "f"}]}),
            json!({"function_calls": [{"arguments": "{}"}]}),
            json!({"function_calls": [{"name": null, "arguments": "{}"}]}),
            json!({"function_calls": [{"name": 1, "arguments": "{}"}]}),
            json!({"function_calls": [{"name": "f", "arguments": "{}", "call_id": 5}]}),
            json!({"function_calls": [{"name": "f", "arguments": "{}", "extra": 1}]}),
            json!({"function_call_rounds": -1}),
            json!({"function_call_rounds": 1.5}),
            json!({"function_call_status": 1}),
            json!({"finance_results": {"a": 1}}),
            json!({"sse_event_lines": "yes"}),
            json!({"sse_comment_lines": -1}),
            json!({"sse_comment_lines": "5"}),
            json!({"sse_comment_lines": 100_001}),
            json!({"failed_event_response": 1}),
            json!({"running_output": "partial"}),
            json!({"running_output": true}),
            json!({"finance_item": "finance"}),
            json!({"extra_items": {"type": "unknown"}}),
            json!({"extra_items": [{"type": "unknown"}, "x"]}),
            json!({"models": "openai/gpt-5.5"}),
            json!({"models": [1]}),
            json!({"strict_fields": "false"}),
            json!({"cancelling_status": 1}),
        ] {
            assert!(
                Scenario::from_json(&bad).is_err(),
                "{bad} should be rejected"
            );
        }
    }

    #[test]
    fn official_shape_switches_parse() {
        let d = Scenario::default();
        assert!(!d.sse_event_lines && !d.failed_event_response && d.strict_fields);
        assert_eq!(d.sse_comment_lines, 0);
        assert_eq!(d.running_output, RunningOutput::Progressive);
        assert_eq!(d.finance_item, FinanceItem::Unknown);
        assert_eq!(d.cancel_unknown_status, 404);
        assert_eq!(d.cancelling_status, "in_progress");
        assert!(d.extra_items.is_empty() && d.models.is_none());
        let s = Scenario::from_json(&json!({
            "sse_event_lines": true, "failed_event_response": true, "sse_comment_lines": 3,
            "running_output": "empty", "finance_item": "finance_results",
            "extra_items": [{"type": "skill_loaded", "name": "office/xlsx"}],
            "models": ["a/b", "c"], "strict_fields": false, "cancelling_status": "cancelling"
        }))
        .unwrap();
        assert!(s.sse_event_lines && s.failed_event_response && !s.strict_fields);
        assert_eq!(s.sse_comment_lines, 3);
        assert_eq!(s.running_output, RunningOutput::Empty);
        assert_eq!(s.finance_item, FinanceItem::FinanceResults);
        assert_eq!(s.extra_items.len(), 1);
        assert_eq!(s.models, Some(vec!["a/b".to_owned(), "c".to_owned()]));
        assert_eq!(s.cancelling_status, "cancelling");
        let n = Scenario::from_json(&json!({
            "sse_event_lines": null, "sse_comment_lines": null, "running_output": null, "finance_item": null,
            "extra_items": null, "models": null, "strict_fields": null,
            "failed_event_response": null, "cancelling_status": null
        }))
        .unwrap();
        assert_eq!(n, d);
    }

    #[test]
    fn function_call_fields_parse() {
        let s = Scenario::from_json(&json!({
            "function_calls": [
                {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
                {"name": "lookup", "arguments": {"b": [1, 2], "a": null}, "call_id": "call_x"},
                {"name": "n", "arguments": null, "call_id": null},
                {"name": "m", "arguments": 7}
            ],
            "function_call_rounds": 3, "function_call_status": "requires_action",
            "finance_results": [{"ticker": "X"}, 1]
        }))
        .unwrap();
        let args: Vec<_> = s
            .function_calls
            .iter()
            .map(|c| c.arguments.as_str())
            .collect();
        assert_eq!(
            args,
            [
                "{\"city\": \"Paris\"}",
                r#"{"b":[1,2],"a":null}"#,
                "null",
                "7"
            ]
        );
        assert_eq!(s.function_calls[1].call_id.as_deref(), Some("call_x"));
        assert_eq!(s.function_calls[0].call_id, None);
        assert_eq!(s.function_calls[2].call_id, None);
        assert_eq!(s.function_calls[0].name, "get_weather");
        assert_eq!(s.function_call_rounds, 3);
        assert_eq!(s.function_call_status, "requires_action");
        assert_eq!(
            s.finance_results,
            Some(vec![json!({"ticker": "X"}), json!(1)])
        );
        let d = Scenario::from_json(&json!({
            "function_calls": null, "function_call_rounds": null,
            "function_call_status": null, "finance_results": null
        }))
        .unwrap();
        assert_eq!(d, Scenario::default());
        assert!(d.function_calls.is_empty());
        assert_eq!(
            (d.function_call_rounds, d.function_call_status.as_str()),
            (1, "completed")
        );
    }
}
