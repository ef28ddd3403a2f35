//! The run resource: `perplexity://runs/{response_id}` reads a research run's current
//! state and answer. The id is the capability (whoever started the run has it), so runs
//! are never listed. Reading goes through the guard as a `perplexity_agent_result` check
//! (rate limit, audit), which is why the read itself is a call job, not a quick method.

use serde_json::{Map, Value, json};

use super::protocol::{RpcError, code};
use crate::call::ToolOutput;
use crate::tools::research::check_run_id;

const PREFIX: &str = "perplexity://runs/";
pub const TEMPLATE: &str = "perplexity://runs/{response_id}";

pub fn template() -> Value {
    json!({
        "uriTemplate": TEMPLATE,
        "name": "research-run",
        "title": "Perplexity research run",
        "description": "The current state of a research run started with perplexity_agent, and its cited answer once finished (untrusted web content, delimited). Reading checks once; it never waits.",
        "mimeType": "text/markdown",
    })
}

/// `params.uri` → (uri, run id), or -32602 with `data.uri` (never -32002, gone in 2026).
pub fn parse_read(params: &Map<String, Value>) -> Result<(String, String), RpcError> {
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            "'uri' is required and must be a string.",
        ));
    };
    // The id must be usable as it is: no trimming, no decoding, nothing after it.
    match uri
        .strip_prefix(PREFIX)
        .filter(|id| check_run_id(id).is_ok_and(|checked| checked == *id))
    {
        Some(id) => Ok((uri.to_owned(), id.to_owned())),
        None => Err(not_found(uri)),
    }
}

/// The `resources/read` result for a finished check of the run.
pub fn contents(uri: &str, output: &ToolOutput) -> Result<Value, RpcError> {
    if output.not_found {
        return Err(not_found(uri));
    }
    Ok(json!({"contents": [{"uri": uri, "mimeType": "text/markdown", "text": output.text}]}))
}

fn not_found(uri: &str) -> RpcError {
    RpcError::new(code::INVALID_PARAMS, "Resource not found.").with_data(json!({ "uri": uri }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(uri: Value) -> Result<(String, String), RpcError> {
        parse_read(json!({ "uri": uri }).as_object().unwrap())
    }

    #[test]
    fn only_well_formed_run_uris_are_read() {
        assert_eq!(
            read(json!("perplexity://runs/resp_abc-1")).unwrap().1,
            "resp_abc-1"
        );
        for bad in [
            "perplexity://runs/",
            "perplexity://runs/../x",
            "perplexity://runs/resp_1?x=1",
            "perplexity://runs/resp_1/",
            "perplexity://runs/ resp_1",
            "perplexity://runs/resp%5F1",
            "https://example.com/",
            "test://static-text",
        ] {
            let e = read(json!(bad)).unwrap_err();
            assert_eq!(e.code, -32602, "{bad}");
            assert_eq!(e.data.unwrap()["uri"], bad);
        }
        assert!(read(json!(5)).unwrap_err().data.is_none());
    }

    #[test]
    fn an_unknown_run_is_not_found() {
        let missing = ToolOutput {
            not_found: true,
            ..ToolOutput::error("response not found")
        };
        assert_eq!(
            contents("perplexity://runs/x", &missing).unwrap_err().code,
            -32602
        );
        let running = ToolOutput::ok("still running");
        assert_eq!(
            contents("perplexity://runs/x", &running).unwrap()["contents"][0]["text"],
            "still running"
        );
    }
}
