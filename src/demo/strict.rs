//! Strict create bodies: the live API rejects fields its request types do not have
//! (HTTP 400 `unknown field "X"`). This checks a `POST /v1/agent` body against the
//! request types of the official SDK (`perplexityai` 0.46.1: `response_create_params`,
//! `input_item_param`, `function_tool_param`; plus `temperature`, `top_p`, `profile` and
//! the `connector` tool, which its generated client layer and the Node SDK 0.38.5 have,
//! tests/contract/README.md), at every depth the fake understands, plus
//! a few value checks (`reasoning.effort`, `response_format.type`, `max_steps`).
//! Values of other types, and objects of a `type` the fake does not know, pass.

use serde_json::{Map, Value};

/// Why a body is refused: the message and the offending field (`param`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid {
    pub message: String,
    pub param: String,
}

const TOP: &[&str] = &[
    "input",
    "background",
    "instructions",
    "language_preference",
    "max_output_tokens",
    "max_steps",
    "model",
    "models",
    "preset",
    "previous_response_id",
    "profile",
    "reasoning",
    "response_format",
    "skills",
    "store",
    "stream",
    "temperature",
    "tools",
    "top_p",
];
const PROFILE: &[&str] = &["id", "type", "version"];
const CONNECTOR: &[&str] = &[
    "type",
    "id",
    "server_label",
    "allowed_tools",
    "server_description",
    "require_approval",
];
const REASONING: &[&str] = &["effort"];
const EFFORTS: &[&str] = &["minimal", "low", "medium", "high", "xhigh"];
const RESPONSE_FORMAT: &[&str] = &["type", "json_schema"];
const JSON_SCHEMA: &[&str] = &["name", "schema", "description", "strict"];
const MESSAGE: &[&str] = &["type", "role", "content"];
const CONTENT_PART: &[&str] = &["type", "text", "image_url"];
const FUNCTION_CALL: &[&str] = &["type", "arguments", "call_id", "name", "thought_signature"];
const FUNCTION_CALL_OUTPUT: &[&str] = &["type", "call_id", "output", "name", "thought_signature"];
const WEB_SEARCH: &[&str] = &[
    "type",
    "filters",
    "max_tokens",
    "max_tokens_per_page",
    "search_context_size",
    "user_location",
];
const FILTERS: &[&str] = &[
    "search_domain_filter",
    "search_recency_filter",
    "search_after_date_filter",
    "search_before_date_filter",
    "last_updated_after_filter",
    "last_updated_before_filter",
];
const USER_LOCATION: &[&str] = &["city", "country", "latitude", "longitude", "region"];
const FETCH_URL: &[&str] = &["type", "max_urls"];
const TYPE_ONLY: &[&str] = &["type"];
const FUNCTION: &[&str] = &["type", "name", "description", "parameters", "strict"];
/// The last three are not in the SDK's `ToolMcpTool`, whose docstring says they are
/// "not supported in v1 and are ignored if sent".
const MCP: &[&str] = &[
    "type",
    "server_label",
    "server_url",
    "allowed_tools",
    "authorization",
    "headers",
    "require_approval",
    "connector_id",
    "defer_loading",
];
const BUILTIN_SKILL: &[&str] = &["type", "name"];
const INLINE_SKILL: &[&str] = &["type", "name", "description", "instructions"];

fn unknown(field: &str) -> Invalid {
    Invalid {
        message: format!("invalid request body: json: unknown field {field:?}"),
        param: field.to_owned(),
    }
}

fn bad_value(path: &str, what: String) -> Invalid {
    Invalid {
        message: format!("invalid request body: {path}: {what}"),
        param: path.to_owned(),
    }
}

/// Every key of `obj` must be in `allowed`.
fn keys(obj: &Map<String, Value>, allowed: &[&str]) -> Result<(), Invalid> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(unknown(k)),
        None => Ok(()),
    }
}

/// `obj[key]` when it is an object.
fn object<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    obj.get(key).and_then(Value::as_object)
}

/// The objects of the array `obj[key]` (none when it is not an array).
fn objects<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a Map<String, Value>> {
    obj.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn type_of(obj: &Map<String, Value>) -> Option<&str> {
    obj.get("type").and_then(Value::as_str)
}

/// `obj[key]`, unless absent or `null` (which the API treats as absent).
fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// Checks a create body; `Err` says what the API would refuse first.
pub(crate) fn check_create(body: &Map<String, Value>) -> Result<(), Invalid> {
    keys(body, TOP)?;
    if let Some(v) = present(body, "max_steps")
        && !v.as_u64().is_some_and(|n| (1..=100).contains(&n))
    {
        return Err(bad_value(
            "max_steps",
            format!("must be an integer between 1 and 100, got {v}"),
        ));
    }
    if let Some(p) = object(body, "profile") {
        keys(p, PROFILE)?;
    }
    if let Some(r) = object(body, "reasoning") {
        keys(r, REASONING)?;
        if let Some(e) = present(r, "effort")
            && !e.as_str().is_some_and(|e| EFFORTS.contains(&e))
        {
            return Err(bad_value(
                "reasoning.effort",
                format!("must be one of {}, got {e}", EFFORTS.join(", ")),
            ));
        }
    }
    if let Some(f) = object(body, "response_format") {
        keys(f, RESPONSE_FORMAT)?;
        if let Some(t) = present(f, "type")
            && t.as_str() != Some("json_schema")
        {
            return Err(bad_value(
                "response_format.type",
                format!("must be json_schema, got {t}"),
            ));
        }
        if let Some(s) = object(f, "json_schema") {
            keys(s, JSON_SCHEMA)?;
        }
    }
    for item in objects(body, "input") {
        match type_of(item) {
            Some("message") => message(item)?,
            None if item.contains_key("role") => message(item)?,
            Some("function_call") => keys(item, FUNCTION_CALL)?,
            Some("function_call_output") => keys(item, FUNCTION_CALL_OUTPUT)?,
            _ => {}
        }
    }
    for tool in objects(body, "tools") {
        match type_of(tool) {
            Some("web_search") => {
                keys(tool, WEB_SEARCH)?;
                if let Some(f) = object(tool, "filters") {
                    keys(f, FILTERS)?;
                }
                if let Some(l) = object(tool, "user_location") {
                    keys(l, USER_LOCATION)?;
                }
            }
            Some("fetch_url") => keys(tool, FETCH_URL)?,
            Some("people_search" | "finance_search" | "sandbox") => keys(tool, TYPE_ONLY)?,
            Some("function") => keys(tool, FUNCTION)?,
            Some("mcp") => keys(tool, MCP)?,
            Some("connector") => keys(tool, CONNECTOR)?,
            _ => {}
        }
    }
    for skill in objects(body, "skills") {
        match type_of(skill) {
            Some("builtin") => keys(skill, BUILTIN_SKILL)?,
            Some("inline") => keys(skill, INLINE_SKILL)?,
            _ => {}
        }
    }
    Ok(())
}

fn message(item: &Map<String, Value>) -> Result<(), Invalid> {
    keys(item, MESSAGE)?;
    for part in objects(item, "content") {
        keys(part, CONTENT_PART)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> Result<(), Invalid> {
        check_create(v.as_object().unwrap())
    }

    #[test]
    fn everything_the_sdk_knows_passes() {
        check(json!({
            "input": [
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "t"},
                    {"type": "input_image", "image_url": "https://x/y.png"}]},
                {"role": "user", "content": "plain"},
                {"type": "function_call", "arguments": "{}", "call_id": "c", "name": "f", "thought_signature": "s"},
                {"type": "function_call_output", "call_id": "c", "output": "{}", "name": "f", "thought_signature": "s"},
                {"type": "something_new", "anything": 1}
            ],
            "background": true, "instructions": "i", "language_preference": "en",
            "max_output_tokens": 100, "max_steps": 100, "model": "openai/gpt-5.5",
            "models": ["a/b"], "preset": "pro-search", "previous_response_id": null,
            "reasoning": {"effort": "xhigh"},
            "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"x": {"detail": 1}}, "strict": true, "description": "d"}},
            "skills": [{"type": "builtin", "name": "office"}, {"type": "inline", "name": "n", "description": "d", "instructions": "i"}],
            "store": false, "stream": true, "temperature": 0.2, "top_p": 0.9,
            "profile": {"id": "p1", "type": "custom", "version": "3"},
            "tools": [
                {"type": "connector", "id": "c1", "server_label": "drive", "allowed_tools": ["search"],
                 "server_description": "d", "require_approval": "never"},
                {"type": "web_search", "filters": {"search_domain_filter": ["a.org"], "search_recency_filter": "week",
                 "search_after_date_filter": "1/1/2026", "search_before_date_filter": "2/1/2026",
                 "last_updated_after_filter": "1/1/2026", "last_updated_before_filter": "2/1/2026"},
                 "max_tokens": 1, "max_tokens_per_page": 1, "search_context_size": "low",
                 "user_location": {"city": "c", "country": "FR", "latitude": 1.5, "longitude": 2.5, "region": "r"}},
                {"type": "fetch_url", "max_urls": 3}, {"type": "people_search"}, {"type": "finance_search"},
                {"type": "sandbox"},
                {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", "detail": 1}, "strict": true},
                {"type": "mcp", "server_label": "l", "server_url": "https://m", "allowed_tools": [], "authorization": "a", "headers": {"x": "y"},
                 "require_approval": "never", "connector_id": "c", "defer_loading": true},
                "odd", {"type": "future_tool", "whatever": 1}
            ]
        }))
        .unwrap();
        check(json!({"input": "q", "max_steps": null, "reasoning": {"effort": null}})).unwrap();
    }

    #[test]
    fn unknown_fields_are_named() {
        for (body, field) in [
            (json!({"input": "q", "seed": 1}), "seed"),
            (
                json!({"input": "q", "profile": {"id": "p", "type": "custom", "v": 1}}),
                "v",
            ),
            (
                json!({"input": "q", "tools": [{"type": "connector", "id": "c", "server_label": "l", "url": "https://x"}]}),
                "url",
            ),
            (
                json!({"input": "q", "reasoning": {"effort": "low", "budget": 1}}),
                "budget",
            ),
            (
                json!({"input": "q", "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {}, "x": 1}}}),
                "x",
            ),
            (
                json!({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "u", "detail": "auto"}]}]}),
                "detail",
            ),
            (
                json!({"input": [{"role": "user", "content": "c", "name": "n"}]}),
                "name",
            ),
            (
                json!({"input": [{"type": "function_call", "arguments": "{}", "call_id": "c", "name": "f", "status": "completed"}]}),
                "status",
            ),
            (
                json!({"input": [{"type": "function_call_output", "call_id": "c", "output": "o", "id": "x"}]}),
                "id",
            ),
            (
                json!({"input": "q", "tools": [{"type": "web_search", "filters": {"search_language_filter": ["en"]}}]}),
                "search_language_filter",
            ),
            (
                json!({"input": "q", "tools": [{"type": "web_search", "user_location": {"zip": "1"}}]}),
                "zip",
            ),
            (
                json!({"input": "q", "tools": [{"type": "web_search", "search_mode": "web"}]}),
                "search_mode",
            ),
            (
                json!({"input": "q", "tools": [{"type": "fetch_url", "max_pages": 1}]}),
                "max_pages",
            ),
            (
                json!({"input": "q", "tools": [{"type": "finance_search", "x": 1}]}),
                "x",
            ),
            (
                json!({"input": "q", "tools": [{"type": "function", "name": "f", "function": {}}]}),
                "function",
            ),
            (
                json!({"input": "q", "tools": [{"type": "mcp", "server_label": "l", "server_url": "u", "approval": "never"}]}),
                "approval",
            ),
            (
                json!({"input": "q", "skills": [{"type": "builtin", "name": "office", "version": "1"}]}),
                "version",
            ),
        ] {
            let e = check(body.clone()).unwrap_err();
            assert_eq!(e.param, field, "{body}");
            assert_eq!(
                e.message,
                format!("invalid request body: json: unknown field \"{field}\"")
            );
        }
    }

    #[test]
    fn bad_values_are_refused() {
        for (body, param) in [
            (
                json!({"input": "q", "reasoning": {"effort": "max"}}),
                "reasoning.effort",
            ),
            (
                json!({"input": "q", "reasoning": {"effort": 1}}),
                "reasoning.effort",
            ),
            (
                json!({"input": "q", "response_format": {"type": "json_object"}}),
                "response_format.type",
            ),
            (json!({"input": "q", "max_steps": 0}), "max_steps"),
            (json!({"input": "q", "max_steps": 101}), "max_steps"),
            (json!({"input": "q", "max_steps": 5.5}), "max_steps"),
            (json!({"input": "q", "max_steps": "5"}), "max_steps"),
        ] {
            let e = check(body.clone()).unwrap_err();
            assert_eq!(e.param, param, "{body}");
            assert!(e.message.starts_with("invalid request body: "), "{e:?}");
        }
        check(json!({"input": "q", "max_steps": 1})).unwrap();
    }
}
