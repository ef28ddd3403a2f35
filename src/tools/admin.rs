//! `server_metrics`: the guard's in-process counters, as JSON (structured content plus a
//! text rendering). No parameters, no secrets.
//!
//! Touches: nothing outside the process.

use serde_json::{Value, json};

use super::ToolOutput;

pub const METRICS_ARGS: [&str; 0] = [];

pub fn definitions() -> Vec<(&'static str, rmcp::model::Tool)> {
    use rmcp::model::{Tool, ToolAnnotations};
    let object = |v: Value| match v {
        Value::Object(map) => std::sync::Arc::new(map),
        _ => unreachable!("schemas are objects"),
    };
    let latency = json!({"type":"object","properties":{
        "p50":{"type":"number"},"p95":{"type":"number"},"p99":{"type":"number"}},
        "required":["p50","p95","p99"]});
    let per_tool = json!({"type":"object","properties":{
        "calls":{"type":"integer","minimum":0},
        "errors":{"type":"integer","minimum":0},
        "validation_rejections":{"type":"integer","minimum":0},
        "rate_limit_rejections":{"type":"integer","minimum":0},
        "abandoned":{"type":"integer","minimum":0},
        "latency_ms": latency},
        "required":["calls","errors","validation_rejections","rate_limit_rejections","abandoned","latency_ms"]});
    vec![(
        "server_metrics",
        Tool::new(
            "server_metrics",
            "Counters of this server since it started: calls, errors, validation and rate-limit rejections and abandoned calls per tool, latency percentiles (ms), upstream retries, calls in flight and uptime. Use it to diagnose slowness or refusals; it costs no Perplexity request.",
            object(json!({"type":"object","additionalProperties":false})),
        )
        .with_title("Server Metrics")
        .with_raw_output_schema(object(json!({"type":"object",
            "properties":{
                "uptime_seconds":{"type":"integer","minimum":0},
                "calls_in_flight":{"type":"integer","minimum":0},
                "upstream_retries":{"type":"integer","minimum":0},
                "tools":{"type":"object","additionalProperties": per_tool}},
            "required":["uptime_seconds","calls_in_flight","upstream_retries","tools"]})))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
    )]
}

/// The snapshot as a result: structured content, and the same JSON as text.
pub fn render(snapshot: Value) -> ToolOutput {
    ToolOutput {
        text: snapshot.to_string(),
        is_error: false,
        structured: Some(snapshot),
    }
}
