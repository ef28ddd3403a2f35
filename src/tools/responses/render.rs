//! The text and `structuredContent` of `responses_create` / `responses_retrieve`.
//! Everything that came from upstream (answer, source titles, function names and
//! arguments the model wrote) is untrusted: scanned for injection and, in the text,
//! spotlighted; the structured copy carries the same flags.

use serde_json::{Value, json};

use super::Snapshot;
use crate::call::CallFacts;
use crate::call::ToolOutput;
use crate::guard::injection;
use crate::guard::spotlight::spotlight;
use crate::perplexity::agent::{FunctionCall, RunSnapshot};
use crate::text::cap_chars;
use crate::tools::render::{self as shared, ShownSource};
use crate::tools::research::ResearchOutcome;

/// Function arguments are bounded upstream only by the model; shown up to this.
const MAX_ARGUMENT_CHARS: usize = 16_384;
const MAX_FUNCTION_CALLS: usize = 64;

/// What the caller asked for, which changes how an outcome reads.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// `response_format` json_schema: an answer that is not JSON is an error.
    pub expects_json: bool,
    /// False for `store: false`: a run we stop waiting for cannot be collected.
    pub stored_upstream: bool,
}

pub fn output_schema() -> Value {
    json!({"type":"object",
        "properties":{
            "response_id":{"type":"string"},
            "status":{"type":"string","description":"completed, incomplete, requires_action, failed, cancelled, or (still running) queued/in_progress."},
            "model":{"type":["string","null"]},
            "answer":{"type":"string"},
            "parsed":{"description":"The answer parsed as JSON, when it is JSON."},
            "sources":{"type":"array","description":"number is what the answer's [N] markers cite (Perplexity's search_results id).",
                "items":{"type":"object","properties":{"number":{"type":"integer","minimum":0},"title":{"type":"string"},"url":{"type":"string"}},"required":["number","title","url"]}},
            "function_calls":{"type":"array","items":{"type":"object","properties":{
                "call_id":{"type":"string"},"name":{"type":"string"},"arguments":{"type":"string"},
                "thought_signature":{"type":"string","description":"Echo it (with name) on the function_call_output; this server fills both in when you leave them out."}},
                "required":["call_id","name","arguments"]}},
            "other_data":{"type":"array","description":"Output items this server does not render (unknown or new item types), as data.",
                "items":{"type":"object","properties":{"name":{"type":"string"},"payload":{}},"required":["name","payload"]}},
            "usage":{"type":["object","null"]},
            "snapshot":{"type":"string","enum":["saved","local","off","pending","unavailable"]},
            "progress":{"type":"string"},
            "security_flags":{"type":"array","items":{"type":"string"}}},
        "required":["response_id","status","answer","sources","function_calls","snapshot","security_flags"]})
}

/// The tool result and the audit facts of an outcome.
pub fn outcome(
    outcome: &ResearchOutcome,
    snapshot: &Snapshot,
    shape: Shape,
) -> (ToolOutput, CallFacts) {
    let mut flags = Vec::new();
    let output = match outcome {
        ResearchOutcome::Finished { id, run } => {
            let (output, found) = finished(id, run, snapshot, shape);
            flags = found;
            output
        }
        ResearchOutcome::Running { id, .. } => {
            let progress = outcome.progress_with_age().unwrap_or_default();
            running(id, &progress, snapshot, shape)
        }
        ResearchOutcome::Failed(e) => {
            let text = shared::with_run_hint(e, e.kind.to_string(), |id| {
                format!(
                    "collect it with responses_retrieve(response_id=\"{id}\") or stop it with perplexity_agent_cancel(response_id=\"{id}\")."
                )
            });
            let not_found = matches!(&e.kind, crate::perplexity::wait::WaitErrorKind::Api(api) if api.http_status() == Some(404));
            let text = if not_found {
                format!(
                    "{text} No response with this id is kept here or by Perplexity (responses created with store: false never are)."
                )
            } else {
                text
            };
            ToolOutput {
                not_found,
                ..ToolOutput::error(text)
            }
        }
    };
    let facts = CallFacts {
        security_flags: flags,
        ..outcome.facts()
    };
    (output, facts)
}

fn finished(
    id: &str,
    run: &RunSnapshot,
    snapshot: &Snapshot,
    shape: Shape,
) -> (ToolOutput, Vec<&'static str>) {
    let status = run.status().unwrap_or("unknown");
    let answer = shared::answer_text(run).unwrap_or_default();
    let sources = shared::sources(run);
    let calls: Vec<FunctionCall> = run
        .function_calls()
        .into_iter()
        .take(MAX_FUNCTION_CALLS)
        .map(|c| FunctionCall {
            arguments: cap_chars(&c.arguments, MAX_ARGUMENT_CHARS),
            ..c
        })
        .collect();
    let flags = injection::scan(
        std::iter::once(answer.as_str())
            .chain(sources.iter().map(|s| s.title.as_str()))
            .chain(
                calls
                    .iter()
                    .flat_map(|c| [c.name.as_str(), c.arguments.as_str()]),
            ),
    );
    let parsed = parse_json(&answer);
    let mut structured = json!({
        "response_id": id,
        "status": status,
        "model": run.model(),
        "answer": answer,
        "sources": sources,
        "function_calls": calls,
        "other_data": run.other_items().take(shared::MAX_OTHER_ITEMS)
            .map(|(name, payload)| json!({"name": cap_chars(name, shared::MAX_TITLE_CHARS), "payload": shared::bounded_payload(payload)}))
            .collect::<Vec<_>>(),
        "usage": run.raw().get("usage").filter(|u| u.is_object()),
        "snapshot": snapshot.label(),
        "security_flags": flags,
    });
    if let Some(parsed) = &parsed {
        structured["parsed"] = parsed.clone();
    }

    let mut text = format!(
        "Response {id}: {status}{}.",
        run.model()
            .map(|m| format!(", answered by {}", cap_chars(m, 128)))
            .unwrap_or_default()
    );
    if !flags.is_empty() {
        text.push('\n');
        text.push_str(&injection::notice("this response", &flags));
    }
    let mut is_error = false;
    match status {
        "failed" => {
            is_error = true;
            text.push('\n');
            text.push_str(&shared::failed_text(run));
        }
        "cancelled" => {
            is_error = true;
            text.push('\n');
            text.push_str(shared::CANCELLED_TEXT);
        }
        "incomplete" => {
            text.push('\n');
            text.push_str(shared::INCOMPLETE_NOTE);
        }
        _ => {}
    }
    let other = shared::other_data(run);
    if !answer.is_empty() || !sources.is_empty() || !other.is_empty() {
        text.push_str("\n\n");
        text.push_str(&spotlight(&format!("{}{other}", body(&answer, &sources))));
    }
    if shape.expects_json && status == "completed" && calls.is_empty() && parsed.is_none() {
        is_error = true;
        text.push_str("\n\nThe answer is not valid JSON although response_format asked for JSON.");
    }
    if !calls.is_empty() {
        text.push_str(&format!(
            "\n\nThe model asks you to call {} function(s):\n",
            calls.len()
        ));
        let listed: String = calls
            .iter()
            .enumerate()
            .map(|(n, c)| {
                format!(
                    "{}. {} (call_id {}): {}\n",
                    n + 1,
                    c.name,
                    c.call_id,
                    c.arguments
                )
            })
            .collect();
        text.push_str(&spotlight(listed.trim_end()));
        text.push_str(&format!(
            "\nRun them, then call responses_create with previous_response_id=\"{id}\" and input: one {{\"type\":\"function_call_output\",\"call_id\":…,\"output\":…}} item per call (and the same tools)."
        ));
    }
    text.push_str(&snapshot_note(id, snapshot));
    let output = ToolOutput {
        text,
        is_error,
        structured: Some(structured),
        not_found: false,
        view: None,
    };
    (output, flags)
}

fn running(id: &str, progress: &str, snapshot: &Snapshot, shape: Shape) -> ToolOutput {
    let structured = json!({
        "response_id": id, "status": "in_progress", "model": null, "answer": "",
        "sources": [], "function_calls": [], "usage": null,
        "snapshot": snapshot.label(), "progress": progress, "security_flags": [],
    });
    if !shape.stored_upstream {
        // Neither Perplexity nor we keep a store:false run: there is nothing to collect.
        return ToolOutput {
            structured: Some(structured),
            ..ToolOutput::error(format!(
                "Response {id} did not finish within this server's wait budget, and a run created with store: false cannot be collected later. Progress: {progress}. Run it again with store: true (the default), or raise PERPLEXITY_AGENT_WAIT_SECONDS."
            ))
        };
    }
    ToolOutput {
        structured: Some(structured),
        ..ToolOutput::ok(format!(
            "Response {id} is still running.\nProgress: {progress}\n\nCollect it with responses_retrieve(response_id=\"{id}\"); pass wait_seconds to wait for it (each call waits at most this server's wait budget, so call again while it is still going). If you no longer need it, stop it with perplexity_agent_cancel(response_id=\"{id}\")."
        ))
    }
}

fn body(answer: &str, sources: &[ShownSource]) -> String {
    let mut body = if answer.is_empty() {
        shared::NO_ANSWER_TEXT.to_owned()
    } else {
        answer.to_owned()
    };
    body.push_str(&shared::sources_block(sources));
    body
}

fn snapshot_note(id: &str, snapshot: &Snapshot) -> String {
    match snapshot {
        Snapshot::Saved | Snapshot::Local => format!(
            "\n\nKept as a snapshot: read it again with responses_retrieve(response_id=\"{id}\")."
        ),
        Snapshot::Unavailable(why) => format!("\n\nNot kept locally: {why}."),
        Snapshot::Off | Snapshot::Pending => String::new(),
    }
}

/// The answer as JSON, when it is an object or array (a surrounding Markdown code fence,
/// which models add despite being asked not to, is tolerated).
pub fn parse_json(answer: &str) -> Option<Value> {
    let mut text = answer.trim();
    if let Some(inner) = text.strip_prefix("```") {
        let inner = inner.strip_prefix("json").unwrap_or(inner);
        text = inner.strip_suffix("```").unwrap_or(inner).trim();
    }
    if !(text.starts_with('{') || text.starts_with('[')) {
        return None;
    }
    serde_json::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_answers() {
        assert_eq!(parse_json(" {\"a\":1} "), Some(json!({"a":1})));
        assert_eq!(parse_json("```json\n[1,2]\n```"), Some(json!([1, 2])));
        assert_eq!(parse_json("{not json"), None);
        assert_eq!(parse_json("42"), None);
    }

    #[test]
    fn function_calls_are_listed_with_how_to_continue() {
        let run = RunSnapshot::new(json!({"status":"completed","model":"m","output":[
            {"type":"function_call","call_id":"c1","name":"lookup","arguments":"{\"id\":\"T-1\"}"},
            {"type":"function_call","call_id":5,"name":"skipped","arguments":"{}"}]}));
        let shape = Shape {
            expects_json: true,
            stored_upstream: true,
        };
        let (out, _) = finished("resp_1", &run, &Snapshot::Saved, shape);
        assert!(!out.is_error, "function calls are not a JSON failure");
        assert!(
            out.text.contains("lookup (call_id c1): {\"id\":\"T-1\"}"),
            "{}",
            out.text
        );
        assert!(out.text.contains("previous_response_id=\"resp_1\""));
        let s = out.structured.unwrap();
        assert_eq!(
            s["function_calls"],
            json!([{"call_id":"c1","name":"lookup","arguments":"{\"id\":\"T-1\"}"}])
        );
        assert_eq!(s["snapshot"], "saved");
    }

    #[test]
    fn json_expected_but_not_given() {
        let run = RunSnapshot::new(json!({"status":"completed","output":[
            {"type":"message","content":[{"type":"output_text","text":"plain words"}]}]}));
        let shape = Shape {
            expects_json: true,
            stored_upstream: true,
        };
        assert!(finished("r", &run, &Snapshot::Saved, shape).0.is_error);
        let run = RunSnapshot::new(json!({"status":"completed","output":[
            {"type":"message","content":[{"type":"output_text","text":"{\"ok\":true}"}]}]}));
        let (out, _) = finished("r", &run, &Snapshot::Off, shape);
        assert!(!out.is_error);
        assert_eq!(out.structured.unwrap()["parsed"], json!({"ok": true}));
    }
}
