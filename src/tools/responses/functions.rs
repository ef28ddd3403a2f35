//! Function chaining (control 10): with `auto_execute_functions`, the agent's calls of
//! the gateway tools named in `functions` are run here and the run is continued with
//! their outputs, round after round, until it answers or the round cap is reached.
//!
//! - Only operator-registered tools can run: gateway tools listed in
//!   `PERPLEXITY_GATEWAY_FUNCTIONS` and named in the request (checked at validation,
//!   before the rate-limit charge). A call of anything else gets an error output; nothing
//!   a caller or the model supplies is ever evaluated.
//! - Arguments must decode to a JSON object of at most 16,384 characters and pass the
//!   tool's schema; outputs are capped at 16,384 characters (visibly). A failing function
//!   becomes an error output, never a failed chain.
//! - Every execution is audited and costs a rate-limit token, like a direct call.
//!
//! Touches: the network through `crate::perplexity` and `crate::gateway`.

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::request::CreateCall;
use super::{Rendered, Snapshot, render, save, typed};
use crate::call::{CallFacts, FrontEnd, Refusal, ToolOutput};
use crate::perplexity::agent::{FullRun, FunctionCall};
use crate::perplexity::wait::{Waited, create_and_wait};
use crate::text::cap_chars;
use crate::tools::research::ResearchOutcome;
use crate::tools::{CallContext, Outcome, Tools};

pub const MAX_ARGUMENT_CHARS: usize = 16_384;
pub const MAX_OUTPUT_CHARS: usize = 16_384;
const MAX_ERROR_CHARS: usize = 1_000;

/// What the chain needs besides the call: the tools it runs functions through (each one
/// a call of its own: accepted, audited, contained and closed like any other).
pub struct Chain<'a> {
    pub tools: &'a Tools,
    pub front_end: FrontEnd,
    /// The outer call's caller: the functions it runs are its calls too.
    pub caller: crate::call::Caller,
    pub wait: u64,
}

/// One executed function, for the result.
struct Ran {
    name: String,
    call_id: String,
    is_error: bool,
}

impl Chain<'_> {
    pub async fn run(&self, call: &CreateCall, ctx: &CallContext) -> Rendered {
        let started = Instant::now();
        let deadline = started + Duration::from_secs(self.wait);
        let mut body = call.body.clone();
        let (client, store) = (self.tools.client(), self.tools.snapshots());
        super::continuation::echo_call_details(client, store, &mut body, deadline).await;
        let mut ran: Vec<Ran> = Vec::new();
        let mut rounds = 0;
        let shape = render::Shape {
            expects_json: call.expects_json,
            stored_upstream: true,
        };
        loop {
            let waited =
                create_and_wait(client, &body, deadline, ctx.progress(), &*ctx.run_ids).await;
            let finished = match waited {
                Ok((id, Waited::Terminal(run))) => Ok((id, run)),
                Ok((id, Waited::Running(p))) => Err(ResearchOutcome::Running {
                    id,
                    progress: Some((p, started.elapsed().as_secs_f64())),
                }),
                Err(e) => Err(ResearchOutcome::Failed(e)),
            };
            // Still running, or failed: answered as it stands, with what ran before.
            let (id, run) = match finished {
                Ok(finished) => finished,
                Err(outcome) => {
                    let rendered = render::outcome(&outcome, &Snapshot::Pending, shape);
                    return with_ran(typed(rendered, outcome), &ran, rounds);
                }
            };
            let calls = run.function_calls();
            if calls.is_empty() || !matches!(run.status(), Some("completed" | "requires_action")) {
                let snapshot = save(store, &id, &run).await;
                let outcome = ResearchOutcome::Finished { id, run };
                let rendered = render::outcome(&outcome, &snapshot, shape);
                return with_ran(typed(rendered, outcome), &ran, rounds);
            }
            if rounds >= call.max_rounds {
                let text = format!(
                    "The agent still asked for functions after {rounds} round(s) (max_function_rounds {}); stopped. The last response is {id}: read it with responses_retrieve(response_id=\"{id}\").",
                    call.max_rounds
                );
                let facts = CallFacts {
                    run_id: Some(id),
                    ..CallFacts::default()
                };
                return (ToolOutput::error(text), facts, Outcome::Output);
            }
            rounds += 1;
            if let Some(sink) = ctx.progress() {
                sink.progress(
                    started.elapsed().as_secs_f64(),
                    &format!("running {} function call(s), round {rounds}", calls.len()),
                );
            }
            let mut outputs = Vec::with_capacity(calls.len());
            for function in &calls {
                let (output, is_error) = self.execute(call, function, ctx).await;
                ran.push(Ran {
                    name: cap_chars(&function.name, 128),
                    call_id: cap_chars(&function.call_id, 256),
                    is_error,
                });
                outputs.push(function.output_item(output));
            }
            body = continuation(&call.body, outputs, &id);
        }
    }

    /// Runs one function call through the one pipeline (validation against the
    /// downstream schema, the rate limit, the audit pair, panic containment); returns its
    /// output for the model and whether it failed.
    async fn execute(
        &self,
        call: &CreateCall,
        function: &FunctionCall,
        ctx: &CallContext,
    ) -> (String, bool) {
        let error = |kind: &str, message: String| {
            let output = json!({"error": kind, "message": cap_chars(&message, MAX_ERROR_CHARS)});
            (output.to_string(), true)
        };
        if !call.functions.contains(&function.name) {
            return error(
                "unknown_function",
                format!("{} is not one of the functions offered", function.name),
            );
        }
        if function.arguments.chars().count() > MAX_ARGUMENT_CHARS {
            return error(
                "invalid_arguments",
                format!("the arguments are longer than {MAX_ARGUMENT_CHARS} characters"),
            );
        }
        let arguments: Map<String, Value> = match serde_json::from_str(&function.arguments) {
            Ok(Value::Object(map)) => map,
            _ => {
                return error(
                    "invalid_arguments",
                    "the arguments must be a JSON object".to_owned(),
                );
            }
        };
        let admitted = match self
            .tools
            .accept(
                crate::guard::Charge::of(self.front_end, &self.caller),
                &function.name,
                &arguments,
                None,
            )
            .await
        {
            Ok(admitted) => admitted,
            Err(Refusal::Invalid(refused)) => {
                return error("invalid_arguments", refused.to_string());
            }
            Err(refusal) => return error("rate_limited", refusal.message()),
        };
        // Its wait ends with the chain's.
        let inner = CallContext {
            cancel: ctx.cancel.child_token(),
            ..CallContext::default()
        };
        match self.tools.complete_nested(admitted, &inner).await {
            Some(done) if done.full.is_error => error("tool_error", done.full.text),
            Some(done) => (cap_output(&done.full.text), false),
            None => error("cancelled", "the call was cancelled".to_owned()),
        }
    }
}

/// At most [`MAX_OUTPUT_CHARS`], with a visible marker when cut.
fn cap_output(text: &str) -> String {
    let total = text.chars().count();
    if total <= MAX_OUTPUT_CHARS {
        return text.to_owned();
    }
    let marker = format!(
        "\n[truncated: {} characters omitted]",
        total - (MAX_OUTPUT_CHARS - 64)
    );
    let kept: String = text.chars().take(MAX_OUTPUT_CHARS - 64).collect();
    format!("{kept}{marker}")
}

/// The next request: the original minus `input`, `previous_response_id`, `store` and
/// `stream`, with the outputs as input and the last response as the one continued.
fn continuation(original: &FullRun, outputs: Vec<Value>, last: &str) -> FullRun {
    let mut body = original.0.clone();
    for key in ["input", "previous_response_id", "store", "stream"] {
        body.remove(key);
    }
    body.insert("input".to_owned(), Value::Array(outputs));
    body.insert("previous_response_id".to_owned(), json!(last));
    FullRun(body)
}

/// Adds what was run to the result (text and structured).
fn with_ran((mut output, facts, outcome): Rendered, ran: &[Ran], rounds: u32) -> Rendered {
    if ran.is_empty() {
        return (output, facts, outcome);
    }
    let names: Vec<String> = ran
        .iter()
        .map(|r| {
            if r.is_error {
                format!("{} (failed)", r.name)
            } else {
                r.name.clone()
            }
        })
        .collect();
    output.text = format!(
        "Ran {} function call(s) over {rounds} round(s): {}.\n{}",
        ran.len(),
        names.join(", "),
        output.text
    );
    if let Some(structured) = output.structured.as_mut() {
        structured["functions_run"] = json!(
            ran.iter()
                .map(|r| json!({"name": r.name, "call_id": r.call_id, "is_error": r.is_error}))
                .collect::<Vec<_>>()
        );
    }
    (output, facts, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_replaces_input_and_previous_id() {
        let original = FullRun(
            json!({"preset": "medium", "input": "q", "tools": [1], "store": false, "previous_response_id": "old", "background": true})
                .as_object()
                .cloned()
                .unwrap(),
        );
        let next = continuation(
            &original,
            vec![json!({"type": "function_call_output"})],
            "resp_2",
        );
        assert_eq!(
            Value::Object(next.0),
            json!({"preset": "medium", "tools": [1], "background": true,
                   "input": [{"type": "function_call_output"}], "previous_response_id": "resp_2"})
        );
    }

    #[test]
    fn outputs_are_capped_visibly() {
        let out = cap_output(&"x".repeat(100_000));
        assert!(out.chars().count() <= MAX_OUTPUT_CHARS);
        assert!(out.ends_with("characters omitted]"));
        assert_eq!(cap_output("short"), "short");
    }
}
