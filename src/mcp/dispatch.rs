//! One incoming JSON-RPC message → what to do about it, in the order the reference
//! fixes (parse, object, notification?, method, unknown method, params, era, `_meta`,
//! handler). Quick methods are answered here; `tools/call` becomes a [`CallJob`] that
//! the transport runs concurrently.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::era::{Era, shape_modern, stdio_era, validate_modern_meta};
use super::protocol::{
    INSTRUCTIONS, LEGACY_VERSIONS, LOG_LEVELS, RpcError, SUPPORTED_VERSIONS, code, error_frame,
    result_frame, server_info,
};
use crate::tools::{ToolOutput, Tools};

/// Methods we know in some era; anything else is -32601 before any era check.
const KNOWN_METHODS: [&str; 6] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "logging/setLevel",
];

/// What the transport should do with one message.
#[derive(Debug)]
pub enum Action {
    /// Write this frame.
    Reply(Value),
    /// Run this tool call concurrently, then write [`Dispatcher::call_reply`].
    Call(CallJob),
    /// `notifications/cancelled` for this request id.
    Cancel(Value),
    /// Nothing to write (a notification, a blank line).
    Nothing,
}

/// A validated `tools/call`, ready to run.
#[derive(Debug)]
pub struct CallJob {
    pub id: Value,
    pub era: Era,
    pub tool: String,
    pub arguments: Map<String, Value>,
    /// A string or integer `_meta.progressToken`, as given.
    pub progress_token: Option<Value>,
}

pub struct Dispatcher {
    tools: Arc<Tools>,
}

impl Dispatcher {
    pub fn new(tools: Arc<Tools>) -> Self {
        Dispatcher { tools }
    }

    pub fn tools(&self) -> &Arc<Tools> {
        &self.tools
    }

    /// Handles one stdio line (already stripped of surrounding whitespace, not blank).
    pub fn handle_line(&self, line: &[u8]) -> Action {
        // serde_json rejects invalid UTF-8 and nesting deeper than 128 levels, so every
        // such line gets -32700 and the read loop goes on.
        match serde_json::from_slice::<Value>(line) {
            Ok(message) => self.handle_message(message),
            Err(_) => Action::Reply(error_frame(
                &Value::Null,
                &RpcError::new(code::PARSE_ERROR, "Parse error."),
            )),
        }
    }

    pub fn handle_message(&self, message: Value) -> Action {
        let Value::Object(mut message) = message else {
            // Batches included: removed from MCP in 2025-06-18.
            return Action::Reply(error_frame(
                &Value::Null,
                &RpcError::new(code::INVALID_REQUEST, "Invalid request."),
            ));
        };
        // A notification iff the `id` key is absent; `"id": null` is a request.
        let Some(id) = message.remove("id") else {
            return notification(&message);
        };
        let Some(method) = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Action::Reply(error_frame(
                &id,
                &RpcError::new(code::INVALID_REQUEST, "Missing method."),
            ));
        };
        if !KNOWN_METHODS.contains(&method.as_str()) {
            return Action::Reply(error_frame(&id, &RpcError::method_not_found(&method)));
        }
        let params = match message.remove("params") {
            Some(Value::Object(params)) => params,
            _ => Map::new(),
        };
        let era = stdio_era(&method, &params);
        if era == Era::Modern
            && let Err(e) = validate_modern_meta(&method, &params)
        {
            return Action::Reply(error_frame(&id, &e));
        }
        match self.request(&method, era, params, &id) {
            Ok(Handled::Result(result)) => {
                Action::Reply(result_frame(&id, shape(era, &method, result)))
            }
            Ok(Handled::Call(job)) => Action::Call(job),
            Err(e) => Action::Reply(error_frame(&id, &e)),
        }
    }

    fn request(
        &self,
        method: &str,
        era: Era,
        params: Map<String, Value>,
        id: &Value,
    ) -> Result<Handled, RpcError> {
        let result = match (method, era) {
            ("initialize", _) => initialize(&params),
            ("ping", _) => json!({}),
            ("server/discover", _) => json!({
                "supportedVersions": SUPPORTED_VERSIONS,
                "capabilities": {"tools": {}},
                "instructions": INSTRUCTIONS,
            }),
            ("tools/list", _) => {
                if params.get("cursor").is_some_and(|c| !c.is_null()) {
                    return Err(RpcError::new(code::INVALID_PARAMS, "Invalid cursor."));
                }
                json!({"tools": self.tools.list()})
            }
            ("tools/call", _) => return self.tool_call(params, era, id).map(Handled::Call),
            ("logging/setLevel", Era::Legacy) => {
                let level = params.get("level").and_then(Value::as_str);
                if !level.is_some_and(|l| LOG_LEVELS.contains(&l)) {
                    return Err(RpcError::new(
                        code::INVALID_PARAMS,
                        format!("Invalid log level. Accepted: {}.", LOG_LEVELS.join(", ")),
                    ));
                }
                json!({})
            }
            // Logging is deprecated in 2026-07-28 and only legacy clients set a level.
            _ => return Err(RpcError::method_not_found(method)),
        };
        Ok(Handled::Result(result))
    }

    fn tool_call(
        &self,
        mut params: Map<String, Value>,
        era: Era,
        id: &Value,
    ) -> Result<CallJob, RpcError> {
        let name = params.get("name");
        let Some(tool) = name
            .and_then(Value::as_str)
            .filter(|n| self.tools.is_enabled(n))
            .map(str::to_owned)
        else {
            let shown = python_repr(name.unwrap_or(&Value::Null));
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!("Unknown tool: {shown}"),
            ));
        };
        let arguments = match params.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args,
            Some(_) => {
                return Err(RpcError::new(
                    code::INVALID_PARAMS,
                    "'arguments' must be an object.",
                ));
            }
        };
        // Only a string or an integer token opts in (never a boolean or a float).
        let progress_token = super::era::request_meta(&params)
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || crate::text::json_integer(t).is_some())
            .cloned();
        Ok(CallJob {
            id: id.clone(),
            era,
            tool,
            arguments,
            progress_token,
        })
    }

    /// The reply frame of a finished tool call (shaped for its era).
    pub fn call_reply(&self, job: &CallJob, output: &ToolOutput) -> Value {
        result_frame(&job.id, shape(job.era, "tools/call", output.to_json()))
    }
}

enum Handled {
    Result(Value),
    Call(CallJob),
}

fn shape(era: Era, method: &str, result: Value) -> Value {
    match era {
        Era::Legacy => result,
        Era::Modern => shape_modern(method, result),
    }
}

/// Notifications are never answered and never executed (an id-less `tools/call`
/// spends nothing); only a cancellation changes anything.
fn notification(message: &Map<String, Value>) -> Action {
    if message.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
        && let Some(id) = message.get("params").and_then(|p| p.get("requestId"))
    {
        return Action::Cancel(id.clone());
    }
    Action::Nothing
}

/// Legacy negotiation: echo a handshake version we serve, else answer 2025-11-25 —
/// never an error, and never 2026-07-28, which has no handshake.
fn initialize(params: &Map<String, Value>) -> Value {
    let version = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .filter(|v| LEGACY_VERSIONS.contains(v))
        .unwrap_or(LEGACY_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}, "logging": {}},
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    })
}

/// A value the way Python's `repr` shows it (the reference peer's `Unknown tool: 'x'`).
fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::String(s) => python_str_repr(s),
        Value::Number(n) => match crate::text::json_integer(value) {
            Some(0) => "0".to_owned(),
            _ => n.to_string(),
        },
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(python_repr).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", python_str_repr(k), python_repr(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

fn python_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..=0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_reprs() {
        assert_eq!(python_repr(&json!("x")), "'x'");
        assert_eq!(python_repr(&Value::Null), "None");
        assert_eq!(python_repr(&json!(5)), "5");
        assert_eq!(python_repr(&json!("it's")), "\"it's\"");
        assert_eq!(python_repr(&json!("a'\"b")), "'a\\'\"b'");
        assert_eq!(python_repr(&json!("a\nb\\")), "'a\\nb\\\\'");
        assert_eq!(python_repr(&json!(true)), "True");
        assert_eq!(python_repr(&json!(["x"])), "['x']");
        assert_eq!(
            python_repr(&json!({"a": 1, "b": [null, false]})),
            "{'a': 1, 'b': [None, False]}"
        );
    }

    #[test]
    fn negotiation() {
        let v = |p: Value| initialize(p.as_object().unwrap())["protocolVersion"].clone();
        assert_eq!(v(json!({"protocolVersion": "2025-06-18"})), "2025-06-18");
        assert_eq!(v(json!({"protocolVersion": "2025-03-26"})), "2025-03-26");
        assert_eq!(v(json!({"protocolVersion": "2026-07-28"})), "2025-11-25");
        assert_eq!(v(json!({"protocolVersion": "2024-11-05"})), "2025-11-25");
        assert_eq!(v(json!({"protocolVersion": 5})), "2025-11-25");
        assert_eq!(v(json!({})), "2025-11-25");
    }
}
