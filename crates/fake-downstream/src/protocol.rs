//! The transport-independent part: JSON-RPC 2.0 framing (classification of incoming
//! messages, responses and errors), the MCP lifecycle methods, the tool catalogue and
//! the shared call accounting (`stats`, cancellation).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::task::AbortHandle;

use crate::tools::{self, ToolKind};

/// Protocol versions the server accepts as-is in `initialize`.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// What `initialize` answers when the client asks for anything else.
pub const LATEST_VERSION: &str = "2025-11-25";

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// Server behaviour selected on the command line (transport-independent part).
#[derive(Debug, Clone)]
pub struct Config {
    pub name: String,
    pub hostile_metadata: bool,
    pub invalid_frames: bool,
    pub crash_after: Option<u64>,
    pub exit_after_init: bool,
    pub slow_init: Option<Duration>,
    /// Extra tools listed (`--many-tools N`), each with a 1 KB description.
    pub many_tools: usize,
    /// `--ignore-eof`: stdio keeps running after its input ends.
    pub ignore_eof: bool,
    /// The process `--grandchild` started, which the `pid` tool also reports.
    pub grandchild: Option<u32>,
}

/// One incoming JSON-RPC message, classified.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response or error from the client (ignored: this server sends no requests).
    Response,
    /// Not a valid JSON-RPC message; the payload is the error response to send.
    Invalid(Value),
}

fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_))
}

/// Classifies one frame (a stdio line or an HTTP body).
pub fn classify(bytes: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid(error_response(
                Value::Null,
                PARSE_ERROR,
                &format!("Parse error: {e}"),
            ));
        }
    };
    let Value::Object(mut obj) = value else {
        return Incoming::Invalid(error_response(
            Value::Null,
            INVALID_REQUEST,
            "Invalid Request: a message must be a JSON object (batches are not supported)",
        ));
    };
    let id = obj.remove("id");
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid(error_response(
            id.filter(valid_id).unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid Request: \"jsonrpc\" must be \"2.0\"",
        ));
    }
    match (obj.remove("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification {
            method,
            params: obj.remove("params"),
        },
        (Some(Value::String(method)), Some(id)) if valid_id(&id) => Incoming::Request {
            id,
            method,
            params: obj.remove("params"),
        },
        (None, Some(_)) if obj.contains_key("result") || obj.contains_key("error") => {
            Incoming::Response
        }
        (_, id) => Incoming::Invalid(error_response(
            id.filter(valid_id).unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid Request",
        )),
    }
}

pub fn ok_response(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn error_response(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A response to send, and whether the process exits once it is delivered.
pub struct Reply {
    pub msg: Value,
    pub exit_after: bool,
}

#[derive(Default)]
struct State {
    calls: u64,
    in_flight: u64,
    max_in_flight: u64,
    cancelled: Vec<Value>,
    running: Vec<Running>,
    next_token: u64,
}

struct Running {
    token: u64,
    /// (session, serialized request id)
    key: (String, String),
    /// A `tools/call` other than `stats`: counted in `in_flight`.
    counted: bool,
    /// `initialize` cannot be cancelled.
    cancellable: bool,
    abort: Option<AbortHandle>,
}

/// The server: configuration, tool catalogue and shared accounting.
pub struct Server {
    pub cfg: Config,
    tools: Vec<tools::ToolDef>,
    tools_list: Value,
    state: Mutex<State>,
}

/// One in-flight request. Dropping it (the request finished, or its task was aborted)
/// ends its accounting.
pub struct Ticket {
    server: Arc<Server>,
    pub token: u64,
    /// For `tools/call`: its 1-based ordinal among all `tools/call`s; 0 otherwise.
    pub ordinal: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.server.finish(self.token);
    }
}

fn id_key(id: &Value) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

impl Server {
    pub fn new(cfg: Config) -> Arc<Self> {
        let tools = tools::catalogue(cfg.hostile_metadata, cfg.many_tools);
        let tools_list =
            json!({"tools": tools.iter().map(tools::ToolDef::to_json).collect::<Vec<_>>()});
        Arc::new(Server {
            cfg,
            tools,
            tools_list,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a request as in flight (call it when the request arrives, before its
    /// task is spawned; then hand the task's abort handle to [`Server::set_abort`]).
    pub fn begin(
        self: &Arc<Self>,
        session: &str,
        id: &Value,
        method: &str,
        params: Option<&Value>,
    ) -> Ticket {
        let mut st = self.state();
        let mut ordinal = 0;
        let mut counted = false;
        if method == "tools/call" {
            st.calls += 1;
            ordinal = st.calls;
            let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
            counted = name != Some("stats");
            if counted {
                st.in_flight += 1;
                st.max_in_flight = st.max_in_flight.max(st.in_flight);
            }
        }
        let token = st.next_token;
        st.next_token += 1;
        st.running.push(Running {
            token,
            key: (session.to_owned(), id_key(id)),
            counted,
            cancellable: method != "initialize",
            abort: None,
        });
        Ticket {
            server: Arc::clone(self),
            token,
            ordinal,
        }
    }

    pub fn set_abort(&self, token: u64, abort: AbortHandle) {
        let mut st = self.state();
        match st.running.iter_mut().find(|r| r.token == token) {
            Some(r) => r.abort = Some(abort),
            // Cancelled (or finished) before its task was registered.
            None => abort.abort(),
        }
    }

    fn finish(&self, token: u64) {
        let mut st = self.state();
        if let Some(pos) = st.running.iter().position(|r| r.token == token) {
            let r = st.running.swap_remove(pos);
            if r.counted {
                st.in_flight -= 1;
            }
        }
    }

    /// `notifications/cancelled`: records the id and aborts the matching in-flight
    /// request(s) of this session, which then get no reply.
    fn cancel(&self, session: &str, params: Option<&Value>) {
        let Some(request_id) = params.and_then(|p| p.get("requestId")) else {
            return;
        };
        let key = (session.to_owned(), id_key(request_id));
        let mut st = self.state();
        st.cancelled.push(request_id.clone());
        let mut i = 0;
        while i < st.running.len() {
            if st.running[i].key == key && st.running[i].cancellable {
                let r = st.running.swap_remove(i);
                if r.counted {
                    st.in_flight -= 1;
                }
                if let Some(abort) = r.abort {
                    abort.abort();
                }
            } else {
                i += 1;
            }
        }
    }

    pub fn handle_notification(&self, session: &str, method: &str, params: Option<&Value>) {
        if method == "notifications/cancelled" {
            self.cancel(session, params);
        }
        // notifications/initialized and anything else: nothing to do.
    }

    pub async fn handle_request(
        &self,
        ordinal: u64,
        id: Value,
        method: &str,
        params: Option<Value>,
    ) -> Reply {
        let msg = match method {
            "initialize" => {
                if let Some(delay) = self.cfg.slow_init {
                    tokio::time::sleep(delay).await;
                }
                let requested = params
                    .as_ref()
                    .and_then(|p| p.get("protocolVersion"))
                    .and_then(Value::as_str);
                let version = match requested {
                    Some(v) if SUPPORTED_VERSIONS.contains(&v) => v,
                    _ => LATEST_VERSION,
                };
                let result = json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": self.cfg.name, "version": "0.1.0"},
                });
                return Reply {
                    msg: ok_response(id, result),
                    exit_after: self.cfg.exit_after_init,
                };
            }
            "ping" => ok_response(id, json!({})),
            "tools/list" => ok_response(id, self.tools_list.clone()),
            "tools/call" => match self.call_tool(ordinal, params).await {
                Ok(result) => ok_response(id, result),
                Err((code, message)) => error_response(id, code, &message),
            },
            _ => error_response(id, METHOD_NOT_FOUND, &format!("Method not found: {method}")),
        };
        Reply {
            msg,
            exit_after: false,
        }
    }

    async fn call_tool(&self, ordinal: u64, params: Option<Value>) -> Result<Value, (i64, String)> {
        if self.cfg.crash_after == Some(ordinal) {
            eprintln!("fake-downstream: --crash-after {ordinal}: exiting with status 1");
            std::process::exit(1);
        }
        let Some(Value::Object(params)) = params else {
            return Err((
                INVALID_PARAMS,
                "tools/call needs params (an object)".to_owned(),
            ));
        };
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err((
                INVALID_PARAMS,
                "tools/call needs a string \"name\"".to_owned(),
            ));
        };
        let args = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                return Err((
                    INVALID_PARAMS,
                    "tools/call \"arguments\" must be an object".to_owned(),
                ));
            }
        };
        let Some(tool) = self.tools.iter().find(|t| t.name == name) else {
            return Err((INVALID_PARAMS, format!("Unknown tool: {name}")));
        };
        if let Err(e) = tool.check_args(&args) {
            return Ok(tool_error(&format!("invalid arguments: {e}")));
        }
        let uint = |k: &str| args.get(k).and_then(Value::as_u64).unwrap_or(0);
        Ok(match tool.kind {
            ToolKind::Echo => text_result(args.get("text").and_then(Value::as_str).unwrap_or("")),
            ToolKind::Argv => {
                let argv: Vec<String> = std::env::args_os()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                text_result(&Value::from(argv).to_string())
            }
            ToolKind::Env => {
                let env: Map<String, Value> = std::env::vars_os()
                    .map(|(k, v)| {
                        (
                            k.to_string_lossy().into_owned(),
                            Value::String(v.to_string_lossy().into_owned()),
                        )
                    })
                    .collect();
                text_result(&Value::Object(env).to_string())
            }
            ToolKind::Cwd => match std::env::current_dir() {
                Ok(dir) => text_result(&dir.to_string_lossy()),
                Err(e) => tool_error(&format!("cannot read the current directory: {e}")),
            },
            ToolKind::Pid => match self.cfg.grandchild {
                None => text_result(&std::process::id().to_string()),
                Some(grandchild) => text_result(&format!("{} {grandchild}", std::process::id())),
            },
            ToolKind::Slow => {
                let ms = uint("ms");
                tokio::time::sleep(Duration::from_millis(ms)).await;
                text_result(&format!("slept {ms}"))
            }
            ToolKind::Stats => text_result(&self.stats().to_string()),
            ToolKind::Big => {
                let bytes = uint("bytes");
                if bytes > tools::BIG_MAX {
                    tool_error(&format!("bytes must be at most {}", tools::BIG_MAX))
                } else {
                    // Bounded by BIG_MAX just above.
                    text_result(&"x".repeat(bytes as usize))
                }
            }
            ToolKind::Dense => {
                let n = uint("elements").min(tools::DENSE_MAX) as usize;
                json!({
                    "content": [{"type": "text", "text": format!("{n} zeros")}],
                    "structuredContent": {"zeros": vec![0u8; n]},
                    "isError": false,
                })
            }
            ToolKind::Inject => text_result(tools::INJECTION_TEXT),
            ToolKind::Crash => {
                eprintln!("fake-downstream: crash tool called: exiting with status 1");
                std::process::exit(1);
            }
            ToolKind::Fail => tool_error("downstream failure"),
            ToolKind::Structured => json!({
                "content": [{"type": "text", "text": "{\"n\":1}"}],
                "structuredContent": {"n": 1},
                "isError": false,
            }),
            ToolKind::HostileOk => text_result("ok"),
            ToolKind::HostileOkStructured => json!({
                "content": [{"type": "text", "text": "ok"}],
                "structuredContent": {},
                "isError": false,
            }),
        })
    }

    fn stats(&self) -> Value {
        let st = self.state();
        json!({
            "calls": st.calls,
            "in_flight": st.in_flight,
            "max_in_flight": st.max_in_flight,
            "cancelled": st.cancelled,
        })
    }
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

fn tool_error(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_messages() {
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Incoming::Request { .. }
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Incoming::Notification { .. }
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Incoming::Response
        ));
        let Incoming::Invalid(e) = classify(b"{nope") else {
            panic!("expected invalid")
        };
        assert_eq!(e["error"]["code"], json!(PARSE_ERROR));
        assert_eq!(e["id"], Value::Null);
        let Incoming::Invalid(e) = classify(br#"{"jsonrpc":"2.0","id":3}"#) else {
            panic!("expected invalid")
        };
        assert_eq!(e["error"]["code"], json!(INVALID_REQUEST));
        assert_eq!(e["id"], json!(3));
        assert!(matches!(classify(b"[1,2,3]"), Incoming::Invalid(_)));
        assert!(matches!(
            classify(br#"{"id":1,"method":"ping"}"#),
            Incoming::Invalid(_)
        ));
    }
}
