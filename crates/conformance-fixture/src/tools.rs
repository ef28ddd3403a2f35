//! The suite's fixture tools: the list, and the ones that answer without the client's
//! input (those are in `interactive.rs`; what the tasks extension's tools do as tasks is
//! in `task_tools.rs`).

use std::time::Duration;

use perplexity_agent::mcp::http::Outbound;
use serde_json::{Map, Value, json};

use crate::catalog::{PNG, WAV};

/// Name and description of every tool, in the (stable) order `tools/list` gives them.
const TOOLS: [(&str, &str); 33] = [
    ("test_simple_text", "Returns simple text."),
    ("test_image_content", "Returns an image."),
    ("test_audio_content", "Returns audio."),
    ("test_embedded_resource", "Returns an embedded resource."),
    (
        "test_multiple_content_types",
        "Returns text, an image and a resource.",
    ),
    (
        "test_error_handling",
        "Always fails, as a tool error (isError).",
    ),
    (
        "test_tool_with_progress",
        "Reports progress 0, 50, 100 of 100 when given a progressToken.",
    ),
    (
        "test_tool_with_logging",
        "Logs three info messages while it runs (at the session's or the request's log level).",
    ),
    (
        "test_logging_tool",
        "Logs three info messages, only when the request asks for logs.",
    ),
    (
        "test_sampling",
        "Asks the client's LLM (sampling) and returns its answer.",
    ),
    (
        "test_elicitation",
        "Asks the user (elicitation) and returns the answer.",
    ),
    (
        "test_elicitation_sep1034_defaults",
        "Elicitation whose fields carry defaults (SEP-1034).",
    ),
    (
        "test_elicitation_sep1330_enums",
        "Elicitation with every enum variant (SEP-1330).",
    ),
    (
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
    ),
    (
        "test_reconnection",
        "Answers at once (this transport cannot close an SSE stream mid-call and resume it).",
    ),
    (
        "test_missing_capability",
        "Needs the client's sampling capability: without it, -32021.",
    ),
    (
        "test_streaming_elicitation",
        "Asks the user's name on a streamed response (input_required on 2026-07-28).",
    ),
    (
        "test_input_required_result_elicitation",
        "MRTR: asks the user's name (key user_name).",
    ),
    (
        "test_input_required_result_sampling",
        "MRTR: asks the client's LLM (key capital_question).",
    ),
    (
        "test_input_required_result_list_roots",
        "MRTR: asks the client's roots (key client_roots).",
    ),
    (
        "test_input_required_result_request_state",
        "MRTR with a sealed requestState; answers state-ok.",
    ),
    (
        "test_input_required_result_multiple_inputs",
        "MRTR: elicitation, sampling and roots in one round.",
    ),
    (
        "test_input_required_result_multi_round",
        "MRTR over two rounds, the state carrying the first answer.",
    ),
    (
        "test_input_required_result_tampered_state",
        "MRTR with a sealed requestState; a tampered one is refused.",
    ),
    (
        "test_input_required_result_capabilities",
        "MRTR asking only what the request's client capabilities allow.",
    ),
    // The tasks extension's (SEP-2663, the tasks-* scenarios). With the extension declared
    // the server decides to make a task (no per-tool flag: the 2026-07-28 Tool has none).
    ("greet", "Says hello to `name`, at once (never a task)."),
    (
        "slow_compute",
        "Sleeps `seconds` (0 to 60), then answers: a task when the request declares the tasks extension, else a plain call.",
    ),
    (
        "failing_job",
        "Needs the tasks extension (-32021 without it): after about 1 s its task completes with a tool error (isError).",
    ),
    (
        "protocol_error_job",
        "Fails with a protocol error: as a task, the task fails with the error inlined; without the extension, the call's own error.",
    ),
    (
        "confirm_delete",
        "Asks the user to confirm deleting `filename` (elicitation): as a task it waits input_required for tasks/update.",
    ),
    (
        "multi_input",
        "Asks two questions at once (elicitation): as a task both wait in inputRequests and may be answered one at a time.",
    ),
    (
        "test_tool_with_task",
        "Needs the tasks extension: MRTR asks the user's name (key user_name), then the retry becomes a task that greets them.",
    ),
    // Not a suite fixture name: any tool with an x-mcp-header parameter lets the (unscored)
    // http-custom-header-server-validation scenario probe the transport's Mcp-Param checks.
    (
        "test_custom_header_param",
        "Echoes `region`, which 2026-07-28 clients also send as the Mcp-Param-Region header.",
    ),
];

pub fn list() -> Value {
    let tools: Vec<Value> = TOOLS
        .iter()
        .map(|(name, description)| json!({"name": name, "description": description, "inputSchema": input_schema(name)}))
        .collect();
    json!({"tools": tools})
}

pub fn exists(name: &str) -> bool {
    TOOLS.iter().any(|(n, _)| *n == name)
}

pub fn input_schema(name: &str) -> Value {
    let one_string = |key: &str, description: &str| json!({"type": "object", "properties": {key: {"type": "string", "description": description}}, "required": [key]});
    match name {
        "test_sampling" => one_string("prompt", "The prompt to send to the LLM"),
        "test_elicitation" => one_string("message", "The message to show the user"),
        "greet" => one_string("name", "Who to greet"),
        "confirm_delete" => one_string("filename", "The file to (pretend to) delete"),
        "slow_compute" => json!({
            "type": "object",
            "properties": {
                "seconds": {"type": "number", "minimum": 0, "maximum": crate::LONGEST.as_secs(), "description": "How long to work"},
                "label": {"type": "string", "description": "Echoed in the result"},
            },
            "required": ["seconds"],
        }),
        "test_custom_header_param" => json!({
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        }),
        // Verbatim from the json-schema-2020-12 scenario: every keyword must survive.
        "json_schema_2020_12_tool" => json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"},
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false,
        }),
        _ => json!({"type": "object", "properties": {}}),
    }
}

/// The tools that answer at once; `None` for the others.
pub fn immediate(name: &str, args: &Map<String, Value>) -> Option<Value> {
    let image = json!({"type": "image", "data": PNG, "mimeType": "image/png"});
    let result = match name {
        "test_simple_text" => text_result("This is a simple text response for testing."),
        "test_image_content" => json!({"content": [image]}),
        "test_audio_content" => {
            json!({"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]})
        }
        "test_embedded_resource" => json!({"content": [{"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content.",
        }}]}),
        "test_multiple_content_types" => {
            let data = json!({"test": "data", "value": 123}).to_string();
            json!({"content": [
                {"type": "text", "text": "Multiple content types test:"},
                image,
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": data}},
            ]})
        }
        "test_error_handling" => json!({
            "content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}],
            "isError": true,
        }),
        "json_schema_2020_12_tool" => {
            text_result(&format!("Received: {}", Value::Object(args.clone())))
        }
        "test_custom_header_param" => {
            let region = args
                .get("region")
                .and_then(Value::as_str)
                .unwrap_or_default();
            text_result(&format!("Region: {region}"))
        }
        "greet" => {
            let name = args.get("name").and_then(Value::as_str).unwrap_or("World");
            text_result(&format!("Hello, {name}!"))
        }
        "test_reconnection" => {
            text_result("Reconnection test completed (answered without closing the stream).")
        }
        _ => return None,
    };
    Some(result)
}

/// Progress 0, 50, 100 of 100, 50 ms apart, when the request carried a token. `None`
/// when the client gave up.
pub async fn with_progress(token: Option<Value>, out: Outbound) -> Option<Value> {
    for (step, progress) in [0, 50, 100].into_iter().enumerate() {
        if step > 0 && !pause(&out).await {
            return None;
        }
        if let Some(token) = &token {
            let params = json!({"progressToken": token, "progress": progress, "total": 100, "message": format!("step {} of 3", step + 1)});
            out.notify("notifications/progress", params);
        }
    }
    Some(text_result("Progress tool completed."))
}

/// Three info messages, 50 ms apart, sent only at or above `threshold` (an index into
/// the log levels; `None`: the request asked for no logs).
pub async fn with_logging(threshold: Option<usize>, out: Outbound) -> Option<Value> {
    const INFO: usize = 1;
    let messages = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (step, message) in messages.into_iter().enumerate() {
        if step > 0 && !pause(&out).await {
            return None;
        }
        if threshold.is_some_and(|t| INFO >= t) {
            let params = json!({"level": "info", "logger": "conformance-fixture", "data": message});
            out.notify("notifications/message", params);
        }
    }
    Some(text_result("Logging tool completed."))
}

pub fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

pub fn tool_error(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// 50 ms, or `false` at once if the call is cancelled.
async fn pause(out: &Outbound) -> bool {
    let cancel = out.cancel_token();
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(50)) => true,
        () = cancel.cancelled() => false,
    }
}
