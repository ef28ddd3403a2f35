//! The call boundary, at the bottom of the house: what every front end, the guard and the
//! tools say to each other about one tool call — which front end asked, why it was
//! refused, what came back, and the facts the audit record needs. It imports nothing of
//! ours, so everything can import it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Which front end a call came from (recorded in the audit log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontEnd {
    McpStdio,
    McpHttp,
    Cli,
    Tui,
}

impl FrontEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            FrontEnd::McpStdio => "mcp-stdio",
            FrontEnd::McpHttp => "mcp-http",
            FrontEnd::Cli => "cli",
            FrontEnd::Tui => "tui",
        }
    }
}

/// What a finished call reports besides its output.
#[derive(Debug, Default, Clone)]
pub struct CallFacts {
    pub run_id: Option<String>,
    /// Token usage and cost, as the API reported them.
    pub usage: Option<Value>,
    /// Injection-pattern labels found in the retrieved text the call returned.
    pub security_flags: Vec<&'static str>,
    /// `PERPLEXITY_FETCH_ALLOW_PRIVATE` when it lifted the fetcher's address check.
    pub fetch_allow_private: Option<String>,
    /// The MCP task the call became, if it did.
    pub task_id: Option<String>,
}

/// A tool result: always exactly one text block, and `isError` always present; tools
/// with an `outputSchema` also return `structuredContent`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
    pub structured: Option<Value>,
    /// The run (or other object) the call named does not exist upstream (HTTP 404).
    /// Not part of the tool result; `resources/read` turns it into -32602.
    pub not_found: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: false,
            structured: None,
            not_found: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
            structured: None,
            not_found: false,
        }
    }

    /// The MCP `CallToolResult` JSON, without era shaping.
    pub fn to_json(&self) -> Value {
        let mut result = serde_json::json!({
            "content": [{"type": "text", "text": self.text}],
            "isError": self.is_error,
        });
        if let Some(structured) = &self.structured {
            result["structuredContent"] = structured.clone();
        }
        result
    }
}

/// Why a call was turned away before it ran, with what to tell the caller. Each front end
/// maps the kind to its own signal (the CLI's exit codes; MCP always answers the result).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Unknown tool or invalid arguments (audited as rejected; nothing was charged).
    Invalid(String),
    /// The shared token bucket is empty: the call would succeed after `retry_after`.
    RateLimited { retry_after: Duration },
    /// Every call slot of this connection is taken.
    Busy { limit: usize },
}

impl Refusal {
    /// What the caller reads. The rate-limit text is the reference peer's, word for word
    /// (whole seconds, rounded up, at least 1).
    pub fn message(&self) -> String {
        match self {
            Refusal::Invalid(message) => message.clone(),
            Refusal::RateLimited { retry_after } => {
                let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
                format!("Rate limit exceeded: try again in {secs}s.")
            }
            Refusal::Busy { limit } => format!(
                "This server is already handling {limit} tool calls. Retry when one of them has finished."
            ),
        }
    }

    /// The tool result an MCP client gets for it.
    pub fn output(&self) -> ToolOutput {
        ToolOutput::error(self.message())
    }
}

/// The calls one connection may have running at once. A call takes its slot when it is
/// accepted (so a refusal comes back in request order, before any rate-limit charge) and
/// gives it back when it ends.
#[derive(Debug, Clone)]
pub struct Slots {
    free: Arc<Semaphore>,
    limit: usize,
}

impl Slots {
    pub fn new(limit: usize) -> Self {
        Slots {
            free: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    pub fn take(&self) -> Result<Slot, Refusal> {
        self.free
            .clone()
            .try_acquire_owned()
            .map(|permit| Slot { _permit: permit })
            .map_err(|_| Refusal::Busy { limit: self.limit })
    }
}

/// One taken slot, given back on drop.
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}
