//! Continuing a run with `function_call_output` items: each output is sent with the
//! `name` and `thought_signature` of the call it answers. Perplexity's integration guide
//! asks for both, and thinking models may refuse a continuation without the signature —
//! but a client that ran the function seldom keeps an opaque signature around. So when an
//! output leaves them out, they are taken from the continued response itself (the local
//! snapshot, else one GET within the call's deadline). What the caller gave always wins;
//! a lookup that fails sends the outputs as they are.

use serde_json::Value;
use tokio::time::Instant;

use super::snapshots::Snapshots;
use crate::perplexity::PerplexityClient;
use crate::perplexity::agent::{FullRun, FunctionCall, RunSnapshot, valid_run_id};

/// Fills in missing `name` / `thought_signature` on the body's `function_call_output`
/// items from the calls of `previous_response_id`.
pub async fn echo_call_details(
    client: &PerplexityClient,
    store: &Snapshots,
    body: &mut FullRun,
    deadline: Instant,
) {
    if !needs_details(body) {
        return;
    }
    let Some(previous) = body
        .0
        .get("previous_response_id")
        .and_then(Value::as_str)
        .filter(|id| valid_run_id(id))
        .map(str::to_owned)
    else {
        return;
    };
    let local = store.of_response(&previous).await;
    let run = match local {
        Ok(Some(body)) => RunSnapshot::new(body),
        _ => match client.retrieve_run(&previous, deadline).await {
            Ok(run) => run,
            Err(e) => {
                tracing::debug!(error = %e, "continued response not readable; outputs sent as given");
                return;
            }
        },
    };
    fill(body, &run.function_calls());
}

fn is_output(item: &serde_json::Map<String, Value>) -> bool {
    item.get("type").and_then(Value::as_str) == Some("function_call_output")
}

fn outputs(body: &FullRun) -> impl Iterator<Item = &serde_json::Map<String, Value>> {
    body.0
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .filter(|item| is_output(item))
}

fn needs_details(body: &FullRun) -> bool {
    outputs(body).any(|item| !item.contains_key("name") || !item.contains_key("thought_signature"))
}

fn fill(body: &mut FullRun, calls: &[FunctionCall]) {
    let Some(items) = body.0.get_mut("input").and_then(Value::as_array_mut) else {
        return;
    };
    for item in items
        .iter_mut()
        .filter_map(Value::as_object_mut)
        .filter(|item| is_output(item))
    {
        let call_id = item.get("call_id").and_then(Value::as_str);
        let Some(call) = calls.iter().find(|c| Some(c.call_id.as_str()) == call_id) else {
            continue;
        };
        item.entry("name")
            .or_insert_with(|| Value::String(call.name.clone()));
        if let Some(sig) = &call.thought_signature {
            item.entry("thought_signature")
                .or_insert_with(|| Value::String(sig.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(input: Value) -> FullRun {
        FullRun(
            json!({"input": input, "previous_response_id": "resp_1"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
    }

    #[test]
    fn fills_only_what_the_caller_left_out() {
        let calls = [
            FunctionCall {
                call_id: "c1".into(),
                name: "lookup".into(),
                arguments: "{}".into(),
                thought_signature: Some("sig1".into()),
            },
            FunctionCall {
                call_id: "c2".into(),
                name: "other".into(),
                arguments: "{}".into(),
                thought_signature: None,
            },
        ];
        let mut b = body(json!([
            {"type": "function_call_output", "call_id": "c1", "output": "x"},
            {"type": "function_call_output", "call_id": "c2", "output": "y", "name": "mine"},
            {"type": "function_call_output", "call_id": "c9", "output": "z"},
            {"type": "message", "role": "user", "content": "hi"}
        ]));
        assert!(needs_details(&b));
        fill(&mut b, &calls);
        assert_eq!(
            b.0["input"],
            json!([
                {"type": "function_call_output", "call_id": "c1", "output": "x", "name": "lookup", "thought_signature": "sig1"},
                {"type": "function_call_output", "call_id": "c2", "output": "y", "name": "mine"},
                {"type": "function_call_output", "call_id": "c9", "output": "z"},
                {"type": "message", "role": "user", "content": "hi"}
            ])
        );
    }

    #[test]
    fn complete_outputs_need_no_lookup() {
        let b = body(
            json!([{"type": "function_call_output", "call_id": "c1", "output": "x", "name": "n", "thought_signature": "s"}]),
        );
        assert!(!needs_details(&b));
        assert!(!needs_details(&body(json!("just text"))));
    }
}
