//! `server_metrics`: the guard's in-process counters, as JSON (structured content plus a
//! text rendering). No parameters, no secrets.
//!
//! Touches: nothing outside the process.

use serde_json::{Value, json};

use super::args::{Arg, Args, Kind, Max, Read, input_schema};
use super::schema_object;
use crate::call::{ArgError, ToolOutput};

pub const METRICS: [Arg; 0] = [];
pub const RETRIEVE: [Arg; 2] = [
    Arg::new("retrieve_key", Kind::text_like("^[0-9a-f]{24}$")).required(),
    Arg::new("offset", Kind::zero_to(Max::Unbounded)),
];

/// `retrieve` arguments: a well-formed key (checked before the cache is consulted) and
/// an optional character offset.
pub fn validate_retrieve(args: &Args) -> Result<(String, usize), ArgError> {
    let read = Read::new(args, &RETRIEVE);
    let key = read.need("retrieve_key")?;
    let well_formed = key.len() == 24
        && key
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
    if !well_formed {
        return Err(ArgError::words(
            "Malformed retrieve_key. Expected the retrieve_key given in a truncated result.",
        ));
    }
    let offset = usize::try_from(read.int("offset")?).unwrap_or(usize::MAX);
    Ok((key.to_owned(), offset))
}

pub fn retrieve_definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::{Tool, ToolAnnotations};
    Tool::new(
        name,
        "The rest of a result cut by the output budget: pass the retrieve_key and offset it names. Kept for one hour.",
        input_schema(&RETRIEVE, 0),
    )
    .with_title("Retrieve Offloaded Result")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

pub fn metrics_definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::{Tool, ToolAnnotations};
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
    Tool::new(
        name,
        "Counters of this server since it started: calls, errors, validation and rate-limit rejections and abandoned calls per tool, latency percentiles (ms), upstream retries, whether the circuit breaker is pausing Perplexity requests, calls in flight, uptime, spend today and this month (your own; every caller's for the server's operator) and the research cache's hits. Use it to diagnose slowness or refusals; it costs no Perplexity request.",
        input_schema(&METRICS, 0),
    )
    .with_title("Server Metrics")
    .with_raw_output_schema(schema_object(json!({"type":"object",
        "properties":{
            "uptime_seconds":{"type":"integer","minimum":0},
            "calls_in_flight":{"type":"integer","minimum":0},
            "upstream_retries":{"type":"integer","minimum":0},
            "upstream_circuit_open":{"type":"boolean"},
            "tools":{"type":"object","additionalProperties": per_tool},
            "tasks":{"type":"object","properties":{
                "in_flight":{"type":"integer","minimum":0},
                "completed":{"type":"integer","minimum":0},
                "failed":{"type":"integer","minimum":0},
                "cancelled":{"type":"integer","minimum":0}}},
            "spend":{"type":"object","properties":{
                "currency":{"type":"string"},
                "time_zone":{"type":"string"},
                "today":{"type":"number"},
                "this_month":{"type":"number"},
                "budget_daily":{"type":["number","null"]},
                "budget_monthly":{"type":["number","null"]},
                "callers":{"type":"array","items":{"type":"object","properties":{
                    "caller":{"type":"string"},
                    "today":{"type":"number"},
                    "this_month":{"type":"number"}},
                    "required":["caller","today","this_month"]}}}},
            "cache":{"type":"object","properties":{
                "scope":{"type":"string","enum":["off","caller","team"]},
                "hits":{"type":"integer","minimum":0},
                "misses":{"type":"integer","minimum":0},
                "saved":{"type":"number"}}}},
        "required":["uptime_seconds","calls_in_flight","upstream_retries","upstream_circuit_open","tools"]})))
    .with_annotations(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(false)
            .open_world(false),
    )
}

/// The snapshot as a result: structured content, and the same JSON as text. `spend` is
/// left out when the ledger cannot be read (the counters still answer).
pub fn render(mut snapshot: Value, spend: Option<Value>, cache: Value) -> ToolOutput {
    if let Some(map) = snapshot.as_object_mut() {
        if let Some(spend) = spend {
            map.insert("spend".to_owned(), spend);
        }
        map.insert("cache".to_owned(), cache);
    }
    ToolOutput {
        text: snapshot.to_string(),
        structured: Some(snapshot),
        ..ToolOutput::ok(String::new())
    }
}
