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

/// Who a call is for. Every piece of state a call makes (tasks, runs, snapshots,
/// offloaded results, legacy sessions) is bound to its caller's [`Caller::key`], and
/// another caller reads it as an id that never existed. The key is derived, never a
/// token: the store holds nothing that opens the server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller(Arc<CallerParts>);

#[derive(Debug, PartialEq, Eq, Hash)]
struct CallerParts {
    key: String,
    name: String,
    issuer: Option<String>,
    operator: bool,
}

impl Caller {
    /// The user running the process (stdio, the CLI, the TUI). An operator: it holds the
    /// API key itself, so nothing Perplexity keeps for that key is hidden from it.
    pub fn local() -> Caller {
        static LOCAL: std::sync::OnceLock<Caller> = std::sync::OnceLock::new();
        LOCAL
            .get_or_init(|| {
                #[cfg(unix)]
                // SAFETY: getuid has no preconditions and cannot fail.
                let key = format!("local:{}", unsafe { libc::getuid() });
                #[cfg(not(unix))]
                let key = "local".to_owned();
                Caller::new(key, "local".to_owned(), None, true)
            })
            .clone()
    }

    /// The holder of the single `PERPLEXITY_HTTP_AUTH_TOKEN`, named `default`: the
    /// server's one tenant, so an operator (the static-token mode behaves as it always
    /// did). The key is the one tasks were bound to before named callers existed, so a
    /// task resumed after an upgrade is still its caller's.
    pub fn single_token(token_digest: &[u8; 32]) -> Caller {
        let key = format!(
            "http:{}",
            derived_hex(&[b"perplexity-agent task caller\0", token_digest])
        );
        Caller::new(key, "default".to_owned(), None, true)
    }

    /// A named client of `PERPLEXITY_HTTP_CLIENTS_FILE`. `created` is part of the key, so
    /// a client removed and added again under the same name starts with nothing; a
    /// rotated token keeps the client's state.
    pub fn client(name: &str, created: &str) -> Caller {
        let key = format!(
            "client:{}",
            derived_hex(&[b"client\0", name.as_bytes(), b"\0", created.as_bytes()])
        );
        Caller::new(key, name.to_owned(), None, false)
    }

    /// The subject of an OAuth access token, scoped by its issuer (a `sub` is unique only
    /// within its issuer).
    pub fn subject(issuer: &str, subject: &str) -> Caller {
        let key = format!(
            "oauth:{}",
            derived_hex(&[b"oauth\0", issuer.as_bytes(), b"\0", subject.as_bytes()])
        );
        Caller::new(key, subject.to_owned(), Some(issuer.to_owned()), false)
    }

    /// A caller as a shared task record keeps it, for the replica that adopts the task of
    /// a replica that died (it collects the run as the caller that started it).
    pub fn restored(key: String, name: String, issuer: Option<String>, operator: bool) -> Caller {
        Caller::new(key, name, issuer, operator)
    }

    fn new(key: String, name: String, issuer: Option<String>, operator: bool) -> Caller {
        Caller(Arc::new(CallerParts {
            key,
            name,
            issuer,
            operator,
        }))
    }

    /// What state is bound to.
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// Who, for the audit log and for people: a client's name, a token's `sub`,
    /// `default` or `local`.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The token's issuer, for OAuth subjects.
    pub fn issuer(&self) -> Option<&str> {
        self.0.issuer.as_deref()
    }

    /// The local user and the single-token tenant: they may name any run the API key
    /// can reach, as before callers were told apart. Named clients and token subjects
    /// see only what they made.
    pub fn is_operator(&self) -> bool {
        self.0.operator
    }
}

impl Default for Caller {
    fn default() -> Self {
        Caller::local()
    }
}

/// 128 bits of SHA-256 over `parts`, as hex: a stable name that reveals nothing.
fn derived_hex(parts: &[&[u8]]) -> String {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A call's place in a distributed trace (W3C Trace Context): the caller's `traceparent`
/// (from `_meta`, per the MCP trace-context convention, or the HTTP header), or — without
/// one — a trace of its own named by the call's id. Parsed strictly: a malformed header is
/// ignored, as the recommendation says, never echoed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// The caller's span (16 hex digits), when the trace came from the caller.
    pub parent_id: Option<String>,
    /// The caller's flags (`01` = sampled); ours are `01`: the audit log records it.
    pub flags: String,
}

impl Trace {
    /// A `traceparent` value: `VV-TRACEID-PARENTID-FLAGS`. Version `00` must be exactly
    /// that; a later version may carry more after a `-` (ignored); `ff` is invalid.
    pub fn parse(header: &str) -> Option<Trace> {
        let header = header.trim();
        let hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let version = header.get(..2)?;
        if !hex(version, 2) || version == "ff" {
            return None;
        }
        let head = header.get(..55)?;
        let rest = &header[55..];
        if (version == "00" && !rest.is_empty()) || (!rest.is_empty() && !rest.starts_with('-')) {
            return None;
        }
        let mut parts = head.split('-');
        let (_, trace_id, parent_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let zero = |s: &str| s.bytes().all(|b| b == b'0');
        (hex(trace_id, 32)
            && hex(parent_id, 16)
            && hex(flags, 2)
            && !zero(trace_id)
            && !zero(parent_id))
        .then(|| Trace {
            trace_id: trace_id.to_owned(),
            parent_id: Some(parent_id.to_owned()),
            flags: flags.to_owned(),
        })
    }

    /// A trace of the call's own, named by its 128-bit id (32 hex digits).
    pub fn of_call(call_id: &str) -> Trace {
        Trace {
            trace_id: call_id.to_owned(),
            parent_id: None,
            flags: "01".to_owned(),
        }
    }

    /// The `traceparent` this call sends on: the trace, with `span_id` (ours) as parent.
    pub fn header(&self, span_id: &str) -> String {
        format!("00-{}-{span_id}-{}", self.trace_id, self.flags)
    }
}

/// Spending caps in millionths of the API's currency (a named client's `budget_daily` and
/// `budget_monthly`, or the server's `PERPLEXITY_BUDGET_*`); `None` is no cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    pub daily: Option<i64>,
    pub monthly: Option<i64>,
}

impl Budget {
    pub fn is_set(&self) -> bool {
        self.daily.is_some() || self.monthly.is_some()
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
    /// Refused after admission, before any upstream request (`budget`).
    pub refused: Option<&'static str>,
    /// Answered from the research cache: the cache's scope (`caller`, `team`).
    pub cache_hit: Option<&'static str>,
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
    /// What the MCP App shows (`mcp::app`): the `structuredContent` of clients that host
    /// it, in place of a research result's receipt; no one else sees it.
    pub view: Option<Value>,
}

/// What precedes the line of a result's text that says what the call cost.
const COST_LINE: &str = "\n\nCost: ";

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: false,
            structured: None,
            not_found: false,
            view: None,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
            structured: None,
            not_found: false,
            view: None,
        }
    }

    /// Sets `key` where clients read a result as data: its `structuredContent`, and the
    /// MCP App's view (a research answer's structured content there).
    pub fn mark(&mut self, key: &str, value: &Value) {
        for shown in [self.structured.as_mut(), self.view.as_mut()] {
            if let Some(Value::Object(fields)) = shown {
                fields.insert(key.to_owned(), value.clone());
            }
        }
    }

    /// Ends the text with what the call cost: `Cost: {said}` on a line of its own, after
    /// the answer (a spotlighted answer's closing delimiter stays before it).
    pub fn push_cost_line(&mut self, said: &str) {
        self.text.push_str(COST_LINE);
        self.text.push_str(said);
    }

    /// `text` without its cost line, and what that line says after `Cost: ` (front ends
    /// for people put it elsewhere).
    pub fn split_cost(text: &str) -> (&str, Option<&str>) {
        match text.rsplit_once(COST_LINE) {
            Some((answer, said)) if !said.contains('\n') => (answer, Some(said)),
            _ => (text, None),
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

    /// [`ToolOutput::to_json`] for a client that hosts the MCP App (`apps`): the App's
    /// view is the `structuredContent` of a research result (it carries every key of the
    /// result's own receipt, and the answer the App shows).
    pub fn to_json_for(&self, apps: bool) -> Value {
        let mut result = self.to_json();
        if apps && let Some(view) = &self.view {
            result["structuredContent"] = view.clone();
        }
        result
    }
}

/// Why arguments were refused, with the arguments it names kept apart from its words: a
/// model reads `'preset' must be …` (the tool's own names, byte for byte what the
/// reference peer says), a person at a terminal `--preset must be …`, and neither front
/// end rewrites the other's text to get there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(Vec<Part>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Words(String),
    /// An argument by its name in the tool's schema (nested ones by their path).
    Arg(String),
    /// "the identifier returned by TOOL": a value another tool (another command) handed out.
    IdFrom(&'static str),
}

/// How a front end names what an [`ArgError`] refers to; `None` keeps the tool's name.
pub trait Names {
    fn arg(&self, name: &str) -> Option<String>;
    fn id_from(&self, tool: &str) -> Option<String>;
}

/// The tool's own names (what MCP clients read).
struct ToolNames;

impl Names for ToolNames {
    fn arg(&self, _: &str) -> Option<String> {
        None
    }
    fn id_from(&self, _: &str) -> Option<String> {
        None
    }
}

impl ArgError {
    /// `'arg' problem` — the shape of most refusals.
    pub fn of(arg: impl Into<String>, problem: &str) -> Self {
        ArgError(vec![
            Part::Arg(arg.into()),
            Part::Words(format!(" {problem}")),
        ])
    }

    /// Words that name no argument.
    pub fn words(text: impl Into<String>) -> Self {
        ArgError(vec![Part::Words(text.into())])
    }

    /// Continues with words.
    pub fn then(mut self, text: impl Into<String>) -> Self {
        self.0.push(Part::Words(text.into()));
        self
    }

    /// Continues with an argument's name.
    pub fn arg(mut self, name: impl Into<String>) -> Self {
        self.0.push(Part::Arg(name.into()));
        self
    }

    /// Continues with "the identifier returned by `tool`".
    pub fn id_from(mut self, tool: &'static str) -> Self {
        self.0.push(Part::IdFrom(tool));
        self
    }

    /// The text in `names`' terms (a front end's name that starts the sentence is
    /// capitalised: "The query is required…"; the tool's own words never change).
    pub fn render(&self, names: &dyn Names) -> String {
        let mut text = String::new();
        for part in &self.0 {
            match part {
                Part::Words(words) => text.push_str(words),
                Part::Arg(name) => match names.arg(name) {
                    Some(named) => text.push_str(&named),
                    None => {
                        text.push('\'');
                        text.push_str(name);
                        text.push('\'');
                    }
                },
                Part::IdFrom(tool) => match names.id_from(tool) {
                    Some(named) => text.push_str(&named),
                    None => {
                        text.push_str("the identifier returned by ");
                        text.push_str(tool);
                    }
                },
            }
        }
        let renamed_first = match self.0.first() {
            Some(Part::Arg(name)) => names.arg(name).is_some(),
            Some(Part::IdFrom(tool)) => names.id_from(tool).is_some(),
            _ => false,
        };
        let mut chars = text.chars();
        match chars.next() {
            Some(first) if renamed_first => first.to_uppercase().chain(chars).collect(),
            _ => text,
        }
    }
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&ToolNames))
    }
}

/// Validators that name no argument separately (the responses tools, the gateway's
/// schema check) give their text as it is.
impl From<String> for ArgError {
    fn from(text: String) -> Self {
        ArgError::words(text)
    }
}

impl From<&str> for ArgError {
    fn from(text: &str) -> Self {
        ArgError::words(text)
    }
}

/// Why a call was turned away before it ran, with what to tell the caller. Each front end
/// maps the kind to its own signal (the CLI's exit codes; MCP always answers the result).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Unknown tool or invalid arguments (audited as rejected; nothing was charged).
    Invalid(ArgError),
    /// The shared token bucket is empty: the call would succeed after `retry_after`.
    RateLimited { retry_after: Duration },
    /// Every call slot of this connection is taken.
    Busy { limit: usize },
    /// The shared state backend did not answer the rate-limit charge: the call is refused
    /// rather than let through unmetered.
    Unavailable,
}

impl Refusal {
    /// What the caller reads. The rate-limit text is the reference peer's, word for word
    /// (whole seconds, rounded up, at least 1).
    pub fn message(&self) -> String {
        match self {
            Refusal::Invalid(error) => error.to_string(),
            Refusal::RateLimited { retry_after } => {
                let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
                format!("Rate limit exceeded: try again in {secs}s.")
            }
            Refusal::Busy { limit } => format!(
                "This server is already handling {limit} tool calls. Retry when one of them has finished."
            ),
            Refusal::Unavailable => "This server cannot reach its shared state backend, which keeps the rate limit for every replica, so the call was refused rather than run unmetered. Try again in a few seconds; the server's operator sees the outage in its log.".to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_are_parsed_strictly() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let trace = Trace::parse(good).unwrap();
        assert_eq!(trace.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(trace.parent_id.as_deref(), Some("00f067aa0ba902b7"));
        assert_eq!(
            trace.header("1111111111111111"),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"
        );
        // A later version may append fields; its first four are read.
        assert!(Trace::parse(&format!("01{}-extra", &good[2..])).is_some());
        for bad in [
            "",
            "garbage",
            &format!("{good}-extra"),   // 00 has exactly four
            &good.replace("-01", "-1"), // short flags
            &good.to_uppercase(),       // lowercase hex only
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero parent
            &format!("ff{}", &good[2..]), // version ff
            &good.replace('-', "_"),
            &format!("01{}x", &good[2..]), // more without a dash
        ] {
            assert_eq!(Trace::parse(bad), None, "{bad:?}");
        }
        let own = Trace::of_call("0123456789abcdef0123456789abcdef");
        assert_eq!(own.parent_id, None);
        assert!(
            own.header("aaaaaaaaaaaaaaaa")
                .starts_with("00-0123456789abcdef0123456789abcdef-")
        );
    }

    /// A front end that renames some arguments and one issuer.
    struct Flags;

    impl Names for Flags {
        fn arg(&self, name: &str) -> Option<String> {
            (name == "preset").then(|| "--preset".to_owned())
        }
        fn id_from(&self, tool: &str) -> Option<String> {
            (tool == "perplexity_agent").then(|| "the id `ask` printed".to_owned())
        }
    }

    #[test]
    fn each_front_end_names_the_arguments_its_own_way() {
        let both = ArgError::words("Give ")
            .arg("preset")
            .then(" or ")
            .arg("model")
            .then(", not both.");
        assert_eq!(both.to_string(), "Give 'preset' or 'model', not both.");
        assert_eq!(both.render(&Flags), "Give --preset or 'model', not both.");
        let first = ArgError::of("preset", "must be a non-empty string.");
        assert_eq!(first.to_string(), "'preset' must be a non-empty string.");
        assert_eq!(first.render(&Flags), "--preset must be a non-empty string.");
        let id = ArgError::words("Expected ")
            .id_from("perplexity_agent")
            .then(".");
        assert_eq!(
            id.to_string(),
            "Expected the identifier returned by perplexity_agent."
        );
        assert_eq!(id.render(&Flags), "Expected the id `ask` printed.");
        // A renamed name that starts the sentence starts it with a capital; the tool's own
        // words are never touched (a lowercase message stays lowercase).
        struct Query;
        impl Names for Query {
            fn arg(&self, _: &str) -> Option<String> {
                Some("the query".to_owned())
            }
            fn id_from(&self, _: &str) -> Option<String> {
                None
            }
        }
        assert_eq!(
            ArgError::of("query", "is required.").render(&Query),
            "The query is required."
        );
        assert_eq!(
            ArgError::from("the arguments must be an object").render(&Query),
            "the arguments must be an object"
        );
    }
}
