//! What the tasks extension's fixture tools (SEP-2663, the suite's `tasks-*` scenarios)
//! do as work, and which of them run only as tasks. The task table and the `tasks/*`
//! methods are in `tasks.rs`; the questions `confirm_delete`, `multi_input` and
//! `test_tool_with_task` ask are in `interactive.rs`; `fixture.rs` puts them together.

use std::time::Duration;

use futures_util::future::BoxFuture;
use perplexity_agent::mcp::protocol::{RpcError, code};
use perplexity_agent::mcp::tasks::{EXTENSION, not_declared};
use serde_json::{Map, Value};

use crate::tools::{text_result, tool_error};

/// The longest `slow_compute` sleeps. Without the extension it is one request, and the
/// transport lets a request run for [`crate::LONGEST`] (plus a margin), no longer.
pub const MAX_SECONDS: u64 = crate::LONGEST.as_secs();
/// `failing_job` works this long before its tool error (the suite's "~1 s").
const FAILING_AFTER: Duration = Duration::from_secs(1);
/// Long enough that a poll sees the task `working` first, short for the suite's clock.
const BRIEF: Duration = Duration::from_millis(300);

/// What a task runs to: the tool's result (the task completes; a tool error is still a
/// result), or a protocol error (the task fails).
pub type Work = BoxFuture<'static, Result<Value, RpcError>>;

/// How a tool takes the tasks extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// A task when the request declares the extension, else an ordinary call.
    Optional,
    /// Only as a task: without the extension, -32021.
    Required,
}

pub fn support(name: &str) -> Option<Support> {
    match name {
        "slow_compute" | "protocol_error_job" | "confirm_delete" | "multi_input" => {
            Some(Support::Optional)
        }
        "failing_job" | "test_tool_with_task" => Some(Support::Required),
        _ => None,
    }
}

/// -32021 for a tool that runs only as a task, from a caller without the extension; the
/// data is the product's (`requiredCapabilities.extensions`), only the message names
/// the tool.
pub fn needs_tasks(name: &str) -> RpcError {
    RpcError {
        message: format!(
            "{name} runs only as a task: declare the {EXTENSION} extension in the request's client capabilities."
        ),
        ..not_declared()
    }
}

/// The work of a tool that needs no input (`slow_compute`, `failing_job`,
/// `protocol_error_job`), its arguments checked now.
pub fn work(name: &str, args: &Map<String, Value>) -> Result<Work, RpcError> {
    match name {
        "slow_compute" => {
            let (seconds, delay) = seconds(args)?;
            let label = args
                .get("label")
                .and_then(Value::as_str)
                .unwrap_or("slow_compute");
            let text = format!("Computed {label} in {seconds} s.");
            Ok(after(delay, Ok(text_result(&text))))
        }
        "failing_job" => Ok(after(
            FAILING_AFTER,
            Ok(tool_error(
                "failing_job failed, as it always does: a tool error, so its task completes (isError).",
            )),
        )),
        "protocol_error_job" => Ok(after(
            BRIEF,
            Err(RpcError::new(
                code::INTERNAL_ERROR,
                "protocol_error_job failed, as it always does: a protocol error, so its task fails.",
            )),
        )),
        _ => Err(RpcError::new(
            code::INTERNAL_ERROR,
            format!("Tool {name} has no work to run."),
        )),
    }
}

/// A task that ends with `result` after a brief moment (`test_tool_with_task`, once it
/// has its answer).
pub fn finishing(result: Value) -> Work {
    after(BRIEF, Ok(result))
}

fn after(delay: Duration, outcome: Result<Value, RpcError>) -> Work {
    Box::pin(async move {
        tokio::time::sleep(delay).await;
        outcome
    })
}

/// `seconds`: a number from 0 to [`MAX_SECONDS`], as given and as a duration.
fn seconds(args: &Map<String, Value>) -> Result<(f64, Duration), RpcError> {
    let invalid = || {
        RpcError::new(
            code::INVALID_PARAMS,
            format!("'seconds' must be a number from 0 to {MAX_SECONDS}."),
        )
    };
    let seconds = args
        .get("seconds")
        .and_then(Value::as_f64)
        .filter(|s| (0.0..=MAX_SECONDS as f64).contains(s))
        .ok_or_else(invalid)?;
    let delay = Duration::try_from_secs_f64(seconds).map_err(|_| invalid())?;
    Ok((seconds, delay))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn seconds_are_bounded() {
        assert!(seconds(&args(json!({"seconds": 0}))).is_ok());
        assert!(seconds(&args(json!({"seconds": 1.5}))).is_ok());
        assert!(seconds(&args(json!({"seconds": MAX_SECONDS}))).is_ok());
        for bad in [json!(-1), json!(MAX_SECONDS + 1), json!("2"), json!(null)] {
            let e = seconds(&args(json!({ "seconds": bad }))).unwrap_err();
            assert_eq!(e.code, code::INVALID_PARAMS);
        }
        assert!(seconds(&Map::new()).is_err());
    }

    #[test]
    fn the_required_error_names_the_extension() {
        let e = needs_tasks("failing_job");
        assert_eq!(e.code, -32021);
        assert_eq!(
            e.data.unwrap(),
            json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}})
        );
        assert!(e.message.contains("failing_job"));
    }
}
