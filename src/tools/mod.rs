//! The tool catalogue: one file per tool group (schema, validation, handler,
//! rendering), shared by every front end. MCP `tools/call`, the CLI and (later) the TUI
//! all come through [`Tools::call`] or the typed operations it wraps.
//!
//! Touches: the network only through `perplexity::` (and, later, `fetch::`/`gateway::`).

pub mod args;
pub mod catalogue;
pub mod render;
pub mod research;

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use serde_json::Value;

use crate::config::Config;
use crate::perplexity::PerplexityClient;
use crate::perplexity::wait::{ProgressSink, RunIdSink};
use args::Args;

/// Text shown when a handler fails in a way we did not foresee. The details go to
/// stderr (tool name and kind only: a message could carry secrets).
pub const UNEXPECTED_FAILURE: &str = "The tool failed unexpectedly. Check the server's stderr log.";

/// A tool result: always exactly one text block, and `isError` always present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
        }
    }

    /// The MCP `CallToolResult` JSON, without era shaping.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "content": [{"type": "text", "text": self.text}],
            "isError": self.is_error,
        })
    }
}

/// Remembers the research runs a call created or touched, so an abandoned call
/// (cancelled by the client, or cut by shutdown) can still say which run to collect.
#[derive(Debug, Default)]
pub struct RunIds(Mutex<Vec<String>>);

impl RunIds {
    pub fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut ids| std::mem::take(&mut *ids))
            .unwrap_or_default()
    }
}

impl RunIdSink for RunIds {
    fn run_id(&self, id: &str) {
        if let Ok(mut ids) = self.0.lock()
            && !ids.iter().any(|known| known == id)
        {
            ids.push(id.to_owned());
        }
    }
}

/// What a front end hands a tool besides its arguments.
#[derive(Default)]
pub struct CallContext {
    pub progress: Option<Arc<dyn ProgressSink>>,
    pub run_ids: Arc<RunIds>,
}

impl CallContext {
    pub fn progress(&self) -> Option<&dyn ProgressSink> {
        self.progress.as_deref()
    }
}

/// The enabled tools of one server.
pub struct Tools {
    client: Arc<PerplexityClient>,
    wait: u64,
    /// `tools/list` entries, built once (the set never varies per connection).
    list: Value,
    names: Vec<&'static str>,
}

impl Tools {
    pub fn new(config: &Config, client: Arc<PerplexityClient>) -> Self {
        let enabled: Vec<_> = research::definitions(config.wait_seconds)
            .into_iter()
            .filter(|(name, _)| config.tools.contains(name))
            .collect();
        let list = Value::Array(
            enabled
                .iter()
                .map(|(_, tool)| serde_json::to_value(tool).unwrap_or(Value::Null))
                .collect(),
        );
        Tools {
            client,
            wait: config.wait_seconds,
            list,
            names: enabled.iter().map(|(name, _)| *name).collect(),
        }
    }

    /// The `tools` array of `tools/list`.
    pub fn list(&self) -> &Value {
        &self.list
    }

    pub fn is_enabled(&self, name: &str) -> bool {
        self.names.contains(&name)
    }

    pub fn client(&self) -> &PerplexityClient {
        &self.client
    }

    pub fn wait_seconds(&self) -> u64 {
        self.wait
    }

    /// Runs an enabled tool. Unknown arguments are rejected first — before any other
    /// validation and before the key is read — driven by the tool's schema. A panic in
    /// a handler becomes [`UNEXPECTED_FAILURE`], never a dead server.
    pub async fn call(&self, name: &str, args: &Args, ctx: &CallContext) -> ToolOutput {
        let accepted: &[&str] = match name {
            "perplexity_agent" => &research::AGENT_ARGS,
            "perplexity_agent_result" => &research::RESULT_ARGS,
            "perplexity_agent_cancel" => &research::CANCEL_ARGS,
            _ => return ToolOutput::error(format!("Unknown tool: {name}")),
        };
        if let Err(message) = args::reject_unknown(args, accepted) {
            return ToolOutput::error(message);
        }
        let client = &*self.client;
        let wait = self.wait;
        let run = async move {
            match name {
                "perplexity_agent" => research::call_agent(client, wait, args, ctx).await,
                "perplexity_agent_result" => research::call_result(client, wait, args, ctx).await,
                _ => research::call_cancel(client, wait, args).await,
            }
        };
        match AssertUnwindSafe(run).catch_unwind().await {
            Ok(output) => output,
            Err(_) => {
                tracing::error!(tool = name, kind = "panic", "tool failed unexpectedly");
                ToolOutput::error(UNEXPECTED_FAILURE)
            }
        }
    }
}
