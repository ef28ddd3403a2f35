//! Protocol constants and frame builders shared by every transport.

use std::sync::Arc;

use serde_json::{Value, json};

/// The two generations of the protocol, which this server speaks at once, decided per
/// request (`era::decide`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and earlier: `initialize`, plain results.
    Legacy,
    /// 2026-07-28: per-request `_meta`, shaped results.
    Modern,
}

/// The revision without a handshake.
pub const MODERN_VERSION: &str = "2026-07-28";

/// One protocol revision, as this server treats it.
struct Revision {
    name: &'static str,
    /// Its clients start with `initialize` and send this as `MCP-Protocol-Version` in
    /// the session it opens.
    handshake: bool,
    /// We speak it: advertised, negotiated (a handshake revision), accepted in `_meta`.
    served: bool,
}

/// Every revision this server knows, newest first: the one table the version lists below
/// are read from, so advertising, negotiating and checking a header cannot disagree.
const REVISIONS: [Revision; 5] = [
    Revision {
        name: MODERN_VERSION,
        handshake: false,
        served: true,
    },
    Revision {
        name: "2025-11-25",
        handshake: true,
        served: true,
    },
    Revision {
        name: "2025-06-18",
        handshake: true,
        served: true,
    },
    Revision {
        name: "2025-03-26",
        handshake: true,
        served: true,
    },
    // Not negotiated (such a client is offered 2025-11-25), but its header in a session
    // still marks a handshake-era request rather than a modern one.
    Revision {
        name: "2024-11-05",
        handshake: true,
        served: false,
    },
];

/// Which revisions a list holds.
#[derive(Clone, Copy)]
enum Pick {
    Negotiated,
    Served,
    Handshake,
}

/// The names of the revisions `pick` selects, in table order; `N` must be their count
/// (checked when the constant is built, so a table edit cannot go out of step).
const fn revisions<const N: usize>(pick: Pick) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < REVISIONS.len() {
        let r = &REVISIONS[i];
        let keep = match pick {
            Pick::Negotiated => r.handshake && r.served,
            Pick::Served => r.served,
            Pick::Handshake => r.handshake,
        };
        if keep {
            assert!(n < N, "more revisions match than the list holds");
            out[n] = REVISIONS[i].name;
            n += 1;
        }
        i += 1;
    }
    assert!(n == N, "fewer revisions match than the list holds");
    out
}

/// Handshake revisions we negotiate through `initialize`, newest first.
pub const LEGACY_VERSIONS: [&str; 3] = revisions(Pick::Negotiated);
/// What `server/discover` advertises and -32022 lists: an ordered constant, newest first
/// (never built from a hash set, whose order can change between runs).
pub const SUPPORTED_VERSIONS: [&str; 4] = revisions(Pick::Served);
/// Versions whose clients do the handshake; any other `MCP-Protocol-Version` marks a
/// modern request.
pub const HANDSHAKE_VERSIONS: [&str; 4] = revisions(Pick::Handshake);

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// How long a modern client may cache `tools/list` and `server/discover`: our only
/// invalidation channel, since we advertise no `listChanged`.
pub const CACHE_TTL_MS: u64 = 300_000;

/// Line cap of the stdio framing (and the HTTP body cap): 8 Mi characters.
pub const MAX_LINE_CHARS: usize = 8 * 1024 * 1024;

pub const INSTRUCTIONS: &str = "Research runs are asynchronous. perplexity_agent starts a run and returns the answer if it finishes within the wait budget; otherwise it returns a response_id that you can collect later with perplexity_agent_result or stop with perplexity_agent_cancel. Answers list their sources and are wrapped in a delimiter that marks them as untrusted web content.";

pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// A valid request this server cannot take on now (JSON-RPC's server-error range).
    pub const SERVER_BUSY: i64 = -32000;
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// Legacy negotiation: the client's handshake version when we serve it, else 2025-11-25
/// — never an error, and never 2026-07-28, which has no handshake.
pub fn negotiated_version(params: &serde_json::Map<String, Value>) -> &'static str {
    params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .and_then(|v| LEGACY_VERSIONS.iter().find(|l| **l == v))
        .copied()
        .unwrap_or(LEGACY_VERSIONS[0])
}

/// `serverInfo`, through rmcp's model type (built once: every modern result carries it).
pub fn server_info() -> Value {
    static INFO: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    INFO.get_or_init(|| {
        let mut info =
            rmcp::model::Implementation::new("perplexity-agent", env!("CARGO_PKG_VERSION"));
        info.title = Some("Perplexity Agent".to_owned());
        serde_json::to_value(info).unwrap_or(Value::Null)
    })
    .clone()
}

/// A JSON-RPC error. `data` appears only when there is some (never `"data": null`).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn method_not_found(method: &str) -> Self {
        RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }
}

/// Built by hand: `json!` would copy `result` through the serializer (a tool list is
/// kilobytes, and this runs for every reply).
pub fn result_frame(id: &Value, result: Value) -> Value {
    let mut frame = serde_json::Map::with_capacity(3);
    frame.insert("jsonrpc".to_owned(), Value::from("2.0"));
    frame.insert("id".to_owned(), id.clone());
    frame.insert("result".to_owned(), result);
    Value::Object(frame)
}

pub fn error_frame(id: &Value, error: &RpcError) -> Value {
    let mut body = json!({"code": error.code, "message": error.message});
    if let Some(data) = &error.data {
        body["data"] = data.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "error": body})
}

pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// Every frame's text on its way out, whichever transport writes it: the configured key,
/// key-shaped strings and bearer credentials never leave in one.
pub fn outbound(text: &str) -> std::borrow::Cow<'_, str> {
    crate::guard::redact::scrub_outbound(text, crate::perplexity::key::secrets_to_scrub())
}

/// Text that has been through [`outbound`]: the only frame text a transport writes
/// without scrubbing it again. Its fields are private so nothing unscrubbed can become
/// one; a reply assembled from scrubbed parts ([`Scrubbed::reply`]) lets the cached
/// `tools/list` (scrubbed once when built) skip a per-request scan.
#[derive(Debug)]
pub struct Scrubbed(String);

/// The text between a reply's parts. Each piece is next to one of these characters, so
/// no match of a pattern (their characters are letters, digits, `-`, `.`, `_`, `~`, `+`,
/// `/`, `=`, space and tab) can span two parts; a configured secret holding one of them
/// could, and then the whole reply is scrubbed again.
const REPLY_GLUE: [u8; 5] = [b'{', b'}', b'"', b',', b':'];

impl Scrubbed {
    pub fn new(text: &str) -> Self {
        Scrubbed(outbound(text).into_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// `{"jsonrpc":"2.0","id":<id>,"result":<result>}`, the shared result not copied.
    pub fn reply(id: &Scrubbed, result: &Arc<Scrubbed>) -> ScrubbedReply {
        Self::reply_with(id, result, crate::perplexity::key::secrets_to_scrub())
    }

    fn reply_with(id: &Scrubbed, result: &Arc<Scrubbed>, secrets: &[String]) -> ScrubbedReply {
        const HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
        const MIDDLE: &str = r#","result":"#;
        let mut head = String::with_capacity(HEAD.len() + id.0.len() + MIDDLE.len());
        for part in [HEAD, &id.0, MIDDLE] {
            head.push_str(part);
        }
        if secrets
            .iter()
            .any(|s| s.bytes().any(|b| REPLY_GLUE.contains(&b)))
        {
            let whole = [head.as_str(), &result.0, REPLY_TAIL].concat();
            return ScrubbedReply {
                head: crate::guard::redact::scrub_outbound(&whole, secrets).into_owned(),
                result: None,
            };
        }
        ScrubbedReply {
            head,
            result: Some(result.clone()),
        }
    }
}

impl AsRef<[u8]> for Scrubbed {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// What closes a reply whose result is its own piece.
pub const REPLY_TAIL: &str = "}";

/// A reply frame of scrubbed pieces, written one after the other: the result (the cached
/// `tools/list`) is shared by every reply instead of copied into each.
#[derive(Debug)]
pub struct ScrubbedReply {
    /// `{"jsonrpc":"2.0","id":<id>,"result":`, or the whole frame when `result` is `None`.
    head: String,
    /// The result, followed by [`REPLY_TAIL`].
    result: Option<Arc<Scrubbed>>,
}

impl ScrubbedReply {
    /// The head, and the shared result (to be followed by [`REPLY_TAIL`]) if it is apart.
    pub fn into_pieces(self) -> (String, Option<Arc<Scrubbed>>) {
        (self.head, self.result)
    }

    /// The frame's whole text (copies the result).
    pub fn text(&self) -> String {
        match &self.result {
            Some(result) => [self.head.as_str(), result.as_str(), REPLY_TAIL].concat(),
            None => self.head.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::redact::scrub_outbound;

    fn scrubbed(text: &str, secrets: &[String]) -> Scrubbed {
        Scrubbed(scrub_outbound(text, secrets).into_owned())
    }

    #[test]
    fn a_reply_of_scrubbed_parts_is_scrubbed_whole() {
        let plain = ["planted-secret-value".to_owned()];
        let id = scrubbed(r#""Bearer c1ient5upplied0token0abc""#, &plain);
        let result = scrubbed(r#"{"tools":["planted-secret-value"]}"#, &plain);
        let reply = Scrubbed::reply_with(&id, &Arc::new(result), &plain);
        let parsed: Value = serde_json::from_str(&reply.text()).unwrap();
        assert_eq!(parsed["id"], "Bearer ***REDACTED***");
        assert_eq!(parsed["result"]["tools"][0], "***REDACTED***");
        // A secret that could span the glue between parts (`12345678,` after a numeric
        // id) is caught by scrubbing the reply again.
        let glued = ["12345678,\"result".to_owned()];
        let id = scrubbed("12345678", &glued);
        let result = scrubbed(r#"{"tools":[]}"#, &glued);
        let reply = Scrubbed::reply_with(&id, &Arc::new(result), &glued);
        assert!(!reply.text().contains(&glued[0]), "{}", reply.text());
    }
}
