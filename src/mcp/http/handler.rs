//! What the HTTP transport serves: a [`Handler`] gets each request once the transport has
//! done its part (auth, Host/Origin, limits, sessions, era and header rules) and answers
//! it, at once or later. While it works it may send notifications, and in a legacy
//! session requests to the client, through [`Outbound`]; they travel on that request's
//! SSE stream. The product's handler is [`super::product::Product`]; the conformance
//! fixture mounts its own on the same layers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::sessions::Sessions;
use crate::mcp::era::Era;
use crate::mcp::protocol::notification;

/// One request, after the transport's checks.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub id: Value,
    pub method: String,
    pub params: Map<String, Value>,
    pub era: Era,
    /// The legacy session it belongs to (`None` in the modern era).
    pub session: Option<String>,
    /// Who sent it, as the policy authenticated them.
    pub who: crate::identity::Identity,
    /// Its legacy session's client declared the MCP App at `initialize` (a modern
    /// request declares it in its own `_meta`).
    pub session_apps: bool,
}

/// The handler's answer.
pub enum Handled {
    /// The reply frame, now (`None`: no reply).
    Now(Option<Value>),
    /// Work that runs in its own task (so a client going away cannot cut it short); its
    /// frame, if any, is the reply.
    Later(BoxFuture<'static, Option<Value>>),
}

pub trait Handler: Send + Sync + 'static {
    fn handle(self: Arc<Self>, request: Incoming, out: Outbound) -> Handled;

    /// A reply that is ready before any of a call's machinery (cancel token, stream,
    /// task): the cached `tools/list`, already serialized and scrubbed. `None` sends the
    /// request on to [`Handler::handle`].
    fn answer_now(&self, _request: &Incoming) -> Option<crate::mcp::protocol::ScrubbedReply> {
        None
    }

    /// Whether this replica should get new requests (`/readyz`): its dependencies answer.
    fn ready(&self) -> bool {
        true
    }

    /// Whether a [`Handled::Later`] answer goes out as an SSE stream (needed for anything
    /// sent before the reply); otherwise it is one JSON body. Decided before any work.
    fn streams(&self, _request: &Incoming) -> bool {
        false
    }

    /// The `x-mcp-header` parameters of a tool, as (header name, argument name): modern
    /// clients repeat those arguments as `Mcp-Param-<Header>`, and the transport checks
    /// that the two agree (a proxy routing on the header must see what the tool gets).
    /// See [`header_params_of`].
    fn header_params(&self, _tool: &str) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Sets the gauges read at scrape time (`/metrics`): what only the handler knows.
    fn observe(&self) {}
}

/// The `x-mcp-header` parameters declared in a tool's `inputSchema`.
pub fn header_params_of(input_schema: &Value) -> Vec<(String, String)> {
    input_schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .filter_map(|(arg, schema)| {
                    let header = schema.get("x-mcp-header")?.as_str()?;
                    Some((header.to_owned(), arg.clone()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A request to the client that went unanswered or failed.
#[derive(Debug, Clone, PartialEq)]
pub enum AskError {
    /// Modern requests cannot carry server-to-client requests (MRTR replaces them), and
    /// a non-streamed answer has nowhere to send one.
    Unsupported,
    /// The client answered with a JSON-RPC error.
    Refused(Value),
    TimedOut,
    /// The stream or the session ended first.
    Gone,
}

/// The handler's side channel for one request.
#[derive(Clone)]
pub struct Outbound {
    pub(super) frames: Option<mpsc::Sender<Value>>,
    pub(super) session: Option<(Arc<Sessions>, String)>,
    pub(super) cancel: CancellationToken,
    pub(super) stopping: CancellationToken,
}

static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

impl Outbound {
    /// Sends a notification on the request's stream (dropped when there is no stream or
    /// the client is slow: notifications are best effort).
    pub fn notify(&self, method: &str, params: Value) {
        if let Some(frames) = &self.frames {
            let _ = frames.try_send(notification(method, params));
        }
    }

    /// The stream the notifications go to, for code that writes frames itself.
    pub fn frames(&self) -> Option<mpsc::Sender<Value>> {
        self.frames.clone()
    }

    /// Asks the client (`sampling/createMessage`, `elicitation/create`, `roots/list`) and
    /// waits for its answer: legacy sessions with a streamed answer only.
    pub async fn ask(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, AskError> {
        let (Some(frames), Some((sessions, session))) = (&self.frames, &self.session) else {
            return Err(AskError::Unsupported);
        };
        let id = format!("srv-{}", NEXT_REQUEST.fetch_add(1, Ordering::Relaxed));
        let key = Value::String(id.clone()).to_string();
        let (tx, rx) = oneshot::channel();
        if !sessions.expect_response(session, &key, tx) {
            return Err(AskError::Gone);
        }
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if frames.send(frame).await.is_err() {
            sessions.forget_response(session, &key);
            return Err(AskError::Gone);
        }
        let answer = tokio::select! {
            answer = rx => answer.map_err(|_| AskError::Gone),
            () = tokio::time::sleep(timeout) => Err(AskError::TimedOut),
            () = self.cancel.cancelled() => Err(AskError::Gone),
        };
        sessions.forget_response(session, &key);
        let response = answer?;
        match response.get("result") {
            Some(result) => Ok(result.clone()),
            None => Err(AskError::Refused(
                response.get("error").cloned().unwrap_or(Value::Null),
            )),
        }
    }

    /// Cancelled when the request is abandoned: the client cancelled it (legacy
    /// `notifications/cancelled`, or closing a modern stream), its session ended, or the
    /// server is stopping.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Cancelled once shutdown has ended the drain period.
    pub fn stopping_token(&self) -> CancellationToken {
        self.stopping.clone()
    }
}
