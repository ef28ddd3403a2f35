//! The gateway: a policed MCP client to the operator's other MCP servers, whose tools we
//! expose as `mcp__<slug>__<name>` (SECURITY.md, "The MCP-client threats T1–T8").
//!
//! - Servers are defined only by the operator (`perplexity-agent gateway add`), never by
//!   an MCP call; every definition passes [`policy`] when saved and again at launch.
//! - Secrets in definitions are sealed at rest ([`secrets`]) and opened only to launch.
//! - Each server gets its own connection ([`connection`]): its own process or its own
//!   HTTP client, so nothing crosses between servers.
//! - What servers say about themselves and what their tools return is untrusted
//!   ([`surface`]): names policed, descriptions capped and labelled, results capped,
//!   scanned and spotlighted.
//! - Limits (control 16): at most `max_servers` servers and `max_stdio` processes,
//!   `concurrency` calls in flight per server (more wait, within the timeout), a
//!   timeout per call (the downstream gets `notifications/cancelled`), idle children
//!   stopped. A dropped server is reconnected by the next call, with a growing pause
//!   between failed attempts.
//!
//! Touches: child processes and the network, through [`connection`] only.

mod child;
pub mod connection;
pub mod definition;
pub mod error;
pub mod file;
mod group;
mod http;
pub mod policy;
pub mod secrets;
pub mod surface;

// What the binary's exit runs, so no downstream process outlives us.
pub use child::end_all_groups;
// What `config.rs` fills in and reads, at the module's door.
pub use definition::ServerDef;
pub use error::GatewayError;
pub use file::load as load_file;
pub use secrets::{KEY_VARIABLE as SECRET_KEY_VARIABLE, SecretKey};

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use connection::Live;
use definition::TransportDef;
use surface::{Exposed, Rejected};

/// How long the downstream servers get to exit together when we stop.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(1);

/// The least time left for which a call is still sent: with less, it would be cancelled
/// before any server could answer it.
fn min_call_time(timeout: Duration) -> Duration {
    (timeout / 4).min(Duration::from_secs(1))
}

/// The operator's gateway settings (from `PERPLEXITY_GATEWAY_*`; defaults in config.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    /// The global switch: off lists no downstream tools and refuses their calls.
    pub enabled: bool,
    pub allowed_commands: Vec<String>,
    pub allowed_roots: Vec<PathBuf>,
    /// Where commands are looked up, and the children's PATH.
    pub path: String,
    pub max_servers: usize,
    pub max_stdio: usize,
    pub concurrency: usize,
    pub timeout: Duration,
    pub idle: Duration,
    pub max_description: usize,
    /// Tools one server may add to the list, and the bytes they may take in it.
    pub max_tools: usize,
    pub max_list_bytes: usize,
    pub max_result_bytes: usize,
    /// Where per-server working directories are created (next to the store).
    pub data_dir: Option<PathBuf>,
    /// Downstream tools the Perplexity agent may call as functions
    /// (`PERPLEXITY_GATEWAY_FUNCTIONS`: exact names, or `mcp__<slug>__*`); none by default.
    pub functions: Vec<String>,
}

impl GatewayConfig {
    /// The default working directory of a stdio server: `<data>/gateway/<slug>`, 0700.
    pub fn server_dir(&self, slug: &str) -> Result<PathBuf, String> {
        let base = self
            .data_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join("gateway")
            .join(slug);
        crate::files::private_dir(&base).map_err(|e| {
            format!(
                "cannot create the working directory {} ({})",
                base.display(),
                e.kind()
            )
        })?;
        Ok(base)
    }
}

/// How often idle servers are stopped and servers down at start retried.
const HOUSEKEEPING: Duration = Duration::from_secs(2);

/// A downstream call's arguments, serialized (ours).
pub const MAX_ARGUMENT_BYTES: usize = 64 * 1024;

/// Pauses between failed connection attempts: 1, 2, 4 … 60 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.min(6).saturating_sub(1)).min(Duration::from_secs(60))
}

/// What `gateway test`, `gateway list` and the TUI show about a server.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub connected: bool,
    pub connects: u64,
    pub last_error: Option<GatewayError>,
    pub exposed: Vec<Exposed>,
    pub rejected: Vec<Rejected>,
    pub stderr_tail: String,
    pub latency_ms: Option<u128>,
}

struct Server {
    def: ServerDef,
    calls: Arc<Semaphore>,
    live: tokio::sync::Mutex<Slot>,
    status: Mutex<Status>,
}

#[derive(Default)]
struct Slot {
    live: Option<(Live, Option<OwnedSemaphorePermit>)>,
    last_used: Option<Instant>,
    failures: u32,
    retry_at: Option<Instant>,
}

pub struct Gateway {
    config: GatewayConfig,
    key: Option<SecretKey>,
    servers: Vec<Arc<Server>>,
    /// Live stdio processes, all servers together.
    processes: Arc<Semaphore>,
    /// Bumped whenever the exposed tool set changes (after start).
    generation: AtomicU64,
    changes: tokio::sync::watch::Sender<u64>,
}

impl Gateway {
    /// The enabled definitions, in slug order, at most `max_servers`.
    pub fn new(config: GatewayConfig, key: Option<SecretKey>, defs: Vec<ServerDef>) -> Arc<Self> {
        let servers = defs
            .into_iter()
            .filter(|d| d.enabled)
            .take(config.max_servers)
            .map(|def| {
                Arc::new(Server {
                    def,
                    calls: Arc::new(Semaphore::new(config.concurrency.max(1))),
                    live: tokio::sync::Mutex::new(Slot::default()),
                    status: Mutex::new(Status::default()),
                })
            })
            .collect();
        Arc::new(Gateway {
            processes: Arc::new(Semaphore::new(config.max_stdio)),
            config,
            key,
            servers,
            generation: AtomicU64::new(0),
            changes: tokio::sync::watch::Sender::new(0),
        })
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// Connects every server at once (each within the timeout) and learns its tools; a
    /// server that fails is reported on stderr and tried again by its next call.
    pub async fn start(self: &Arc<Self>) {
        if !self.config.enabled {
            return;
        }
        let tasks: Vec<_> = self
            .servers
            .iter()
            .map(|server| {
                let gateway = self.clone();
                let server = server.clone();
                tokio::spawn(async move {
                    let mut slot = server.live.lock().await;
                    if let Err(e) = gateway.ensure_live(&server, &mut slot).await {
                        tracing::warn!(server = %server.def.slug, "downstream MCP server unavailable: {e}");
                    }
                })
            })
            .collect();
        for task in tasks {
            let _ = task.await;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(HOUSEKEEPING).await;
                let Some(gateway) = weak.upgrade() else {
                    return;
                };
                gateway.stop_idle().await;
                gateway.retry_unlisted().await;
            }
        });
    }

    /// The `tools/list` entries of every exposed downstream tool.
    pub fn tools(&self) -> Vec<Value> {
        if !self.config.enabled {
            return Vec::new();
        }
        self.servers
            .iter()
            .flat_map(|s| {
                s.status
                    .lock()
                    .map(|st| {
                        st.exposed
                            .iter()
                            .map(|e| e.entry.clone())
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            })
            .collect()
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Changes of the exposed tool set from now on.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        let mut rx = self.changes.subscribe();
        rx.mark_unchanged();
        rx
    }

    /// True for a name this gateway exposes right now.
    pub fn exposes(&self, name: &str) -> bool {
        self.config.enabled && self.find(name).is_some()
    }

    fn find(&self, name: &str) -> Option<(Arc<Server>, String)> {
        let (slug, original) = surface::split(name)?;
        let server = self.servers.iter().find(|s| s.def.slug == slug)?;
        let known = server
            .status
            .lock()
            .map(|st| st.exposed.iter().any(|e| e.name == name))
            .unwrap_or(false);
        known.then(|| (server.clone(), original.to_owned()))
    }

    /// `f` of an exposed downstream tool, `None` when there is none by that name.
    fn with_exposed<T>(&self, name: &str, f: impl FnOnce(&Exposed) -> T) -> Option<T> {
        let (server, _) = self.find(name)?;
        let st = server.status.lock().ok()?;
        st.exposed.iter().find(|e| e.name == name).map(f)
    }

    /// A downstream tool's arguments: an object of at most 64 KiB serialized that its
    /// input schema accepts (compiled once when the tool was exposed, without remote or
    /// file `$ref` resolution: a downstream server cannot make us fetch anything).
    pub fn check_arguments(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
    ) -> Result<(), String> {
        let size = serde_json::to_string(arguments).map_or(usize::MAX, |s| s.len());
        if size > MAX_ARGUMENT_BYTES {
            return Err(format!(
                "The arguments are larger than {MAX_ARGUMENT_BYTES} bytes serialized."
            ));
        }
        let Some(validator) = self.with_exposed(name, |e| e.validator.clone()) else {
            return Err(format!("Unknown tool: {name}"));
        };
        let instance = Value::Object(arguments.clone());
        let problems: Vec<String> = validator
            .iter_errors(&instance)
            .take(3)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "arguments" } else { &at };
                crate::text::cap_chars(&format!("{at}: {e}"), 300)
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "Invalid arguments for {name}: {}",
                problems.join("; ")
            ))
        }
    }

    /// The Agent API function tool for a downstream tool the operator lets the agent
    /// call (`PERPLEXITY_GATEWAY_FUNCTIONS`), or why it cannot be one.
    pub fn function_tool(&self, name: &str) -> Result<Value, String> {
        let allowed = self
            .config
            .functions
            .iter()
            .any(|f| match f.strip_suffix('*') {
                Some(prefix) => prefix.starts_with(surface::PREFIX) && name.starts_with(prefix),
                None => f == name,
            });
        if !allowed {
            return Err(format!(
                "'{name}' is not a function the operator allows (PERPLEXITY_GATEWAY_FUNCTIONS)."
            ));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "'{name}' cannot be an Agent API function name (only letters, digits, _ and -)."
            ));
        }
        if !self.exposes(name) {
            return Err(format!("'{name}' is not a tool the gateway offers now."));
        }
        let entry = self
            .with_exposed(name, |e| e.entry.clone())
            .unwrap_or(Value::Null);
        Ok(json!({
            "type": "function",
            "name": name,
            "description": entry["description"],
            "parameters": entry["inputSchema"],
            // Downstream schemas are not written for strict mode.
            "strict": false,
        }))
    }

    /// Connects if needed (a dead connection is replaced), honouring the backoff.
    async fn ensure_live(
        &self,
        server: &Server,
        slot: &mut Slot,
    ) -> Result<rmcp::Peer<rmcp::RoleClient>, GatewayError> {
        if let Some((live, _)) = &slot.live {
            if !live.client.is_closed() {
                return Ok(live.client.peer().clone());
            }
            slot.live = None;
            self.set_status(server, |st| st.connected = false);
        }
        if let Some(at) = slot.retry_at
            && Instant::now() < at
        {
            let seconds = at
                .saturating_duration_since(Instant::now())
                .as_secs()
                .max(1);
            let last = self
                .status_of(server)
                .last_error
                .map(|e| e.root().clone())
                .unwrap_or(GatewayError::Transport("an earlier attempt failed".into()));
            return Err(GatewayError::Backoff {
                last: Box::new(last),
                seconds,
            });
        }
        match self.connect(server).await {
            Ok((live, permit)) => {
                slot.failures = 0;
                slot.retry_at = None;
                slot.last_used = Some(Instant::now());
                let (exposed, rejected) = surface::expose(
                    &live.tools,
                    &surface::Limits {
                        slug: &server.def.slug,
                        max_description: self.config.max_description,
                        max_tools: self.config.max_tools,
                        max_list_bytes: self.config.max_list_bytes,
                        allow: &server.def.allow_tools,
                        deny: &server.def.deny_tools,
                    },
                );
                if !rejected.is_empty() {
                    let said: Vec<String> = rejected
                        .iter()
                        .take(5)
                        .map(|r| format!("{}: {}", r.name, r.reason))
                        .collect();
                    tracing::warn!(
                        server = %server.def.slug,
                        "{} of the server's tools are not offered ({}{})",
                        rejected.len(),
                        said.join("; "),
                        if rejected.len() > 5 { "; …" } else { "" }
                    );
                }
                let peer = live.client.peer().clone();
                let changed = self.status_of(server).exposed != exposed;
                self.set_status(server, |st| {
                    st.connected = true;
                    st.connects += 1;
                    st.last_error = None;
                    st.exposed = exposed;
                    st.rejected = rejected;
                });
                if changed {
                    let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
                    self.changes.send_replace(generation);
                }
                slot.live = Some((live, permit));
                Ok(peer)
            }
            Err(e) => {
                slot.failures += 1;
                slot.retry_at = Some(Instant::now() + backoff(slot.failures));
                self.set_status(server, |st| st.last_error = Some(e.clone()));
                Err(e)
            }
        }
    }

    async fn connect(
        &self,
        server: &Server,
    ) -> Result<(Live, Option<OwnedSemaphorePermit>), GatewayError> {
        let resolved = definition::resolve(&server.def, &self.config, self.key.as_ref())?;
        let permit = match server.def.transport {
            TransportDef::Stdio { .. } => {
                Some(self.processes.clone().try_acquire_owned().map_err(|_| {
                    GatewayError::TooManyProcesses {
                        max: self.config.max_stdio,
                    }
                })?)
            }
            TransportDef::Http { .. } => None,
        };
        let live = connection::connect(&resolved, self.config.timeout).await?;
        Ok((live, permit))
    }

    fn status_of(&self, server: &Server) -> Status {
        server
            .status
            .lock()
            .map(|st| st.clone())
            .unwrap_or_default()
    }

    fn set_status(&self, server: &Server, f: impl FnOnce(&mut Status)) {
        if let Ok(mut st) = server.status.lock() {
            f(&mut st);
        }
    }

    /// Calls a downstream tool. Every failure is a tool error naming the server; none
    /// takes anything else down.
    pub async fn call(&self, name: &str, arguments: Map<String, Value>) -> GatewayResult {
        if !self.config.enabled {
            return GatewayResult::error("The gateway is disabled (PERPLEXITY_GATEWAY=off).");
        }
        let Some((server, original)) = self.find(name) else {
            return GatewayResult::error(format!("Unknown tool: {name}"));
        };
        let slug = server.def.slug.clone();
        let deadline = Instant::now() + self.config.timeout;
        // At most `concurrency` calls per server; the rest wait, within the timeout.
        let busy = || {
            GatewayResult::error(format!(
                "Downstream server '{slug}' is busy (at most {} calls at once); the call was not sent. Try again.",
                self.config.concurrency
            ))
        };
        let Ok(Ok(_permit)) =
            tokio::time::timeout_at(deadline, server.calls.clone().acquire_owned()).await
        else {
            return busy();
        };
        // A slot freed at the deadline (by calls timing out) must not send this one: it
        // would reach the downstream with no time left to answer, and its caller would
        // be told it was cancelled while the downstream acts on it.
        if Instant::now() + min_call_time(self.config.timeout) >= deadline {
            return busy();
        }
        let peer = {
            let mut slot = server.live.lock().await;
            match self.ensure_live(&server, &mut slot).await {
                Ok(peer) => {
                    slot.last_used = Some(Instant::now());
                    peer
                }
                Err(e) => {
                    return GatewayResult::error(format!(
                        "Downstream server '{slug}' is unavailable: {e}"
                    ));
                }
            }
        };
        // Connecting (a cold child, a reconnect) can take the rest of the time, too.
        if Instant::now() + min_call_time(self.config.timeout) >= deadline {
            return GatewayResult::error(format!(
                "Downstream server '{slug}' was not ready within {}s; the call was not sent.",
                self.config.timeout.as_secs()
            ));
        }
        let params = CallToolRequestParams::new(original).with_arguments(arguments);
        let started = std::time::Instant::now();
        let outcome = tokio::time::timeout_at(deadline, peer.call_tool(params)).await;
        self.set_status(&server, |st| {
            st.latency_ms = Some(started.elapsed().as_millis())
        });
        match outcome {
            Ok(Ok(result)) => {
                let (text, is_error, flags) =
                    surface::render_result(&result, self.config.max_result_bytes);
                GatewayResult {
                    text,
                    is_error,
                    flags,
                }
            }
            Ok(Err(e)) => {
                // Whether a 401 refused our headers or found none.
                let cx = error::Context {
                    sent_credentials: matches!(&server.def.transport, TransportDef::Http { headers, .. } if !headers.is_empty()),
                };
                match error::from_service(&e, cx) {
                    // An answer: the connection is fine.
                    GatewayError::Refused(message) => GatewayResult::error(format!(
                        "Downstream server '{slug}' refused the call: {message}"
                    )),
                    failure => {
                        // The connection is gone (crash, dropped stream, a credential
                        // revoked mid-session): the next call reconnects.
                        self.drop_live(&server).await;
                        GatewayResult::error(format!(
                            "Downstream server '{slug}' failed during the call ({failure}); the next call reconnects."
                        ))
                    }
                }
            }
            Err(_) => GatewayResult::error(format!(
                "Downstream server '{slug}' did not answer within {}s; the call was cancelled.",
                self.config.timeout.as_secs()
            )),
        }
    }

    async fn drop_live(&self, server: &Server) {
        let taken = server.live.lock().await.live.take();
        self.set_status(server, |st| st.connected = false);
        if let Some((live, _permit)) = taken {
            let _ = live.client.cancel().await;
        }
    }

    /// Servers whose tools were never learned (down at start) are retried in the
    /// background, within the backoff: nothing else would, as no tool of theirs can be
    /// called. When one comes up, its tools appear and clients are told.
    async fn retry_unlisted(&self) {
        for server in &self.servers {
            if !self.status_of(server).exposed.is_empty() {
                continue;
            }
            let Ok(mut slot) = server.live.try_lock() else {
                continue;
            };
            if slot.live.is_none()
                && slot.retry_at.is_none_or(|at| Instant::now() >= at)
                && let Err(e) = self.ensure_live(server, &mut slot).await
            {
                tracing::debug!(server = %server.def.slug, "still unavailable: {e}");
            }
        }
    }

    /// Stops stdio servers unused for the idle time (and with no call in flight).
    async fn stop_idle(&self) {
        for server in &self.servers {
            if !matches!(server.def.transport, TransportDef::Stdio { .. })
                || server.calls.available_permits() < self.config.concurrency.max(1)
            {
                continue;
            }
            let idle = {
                let slot = server.live.lock().await;
                slot.live.is_some()
                    && slot
                        .last_used
                        .is_some_and(|t| t.elapsed() >= self.config.idle)
            };
            if idle {
                tracing::info!(server = %server.def.slug, "stopping an idle downstream server");
                self.drop_live(server).await;
            }
        }
    }

    /// Connects now (replacing any connection) and reports what happened.
    pub async fn test(&self, slug: &str) -> Option<Status> {
        let server = self.servers.iter().find(|s| s.def.slug == slug)?;
        self.drop_live(server).await;
        let started = std::time::Instant::now();
        let mut slot = server.live.lock().await;
        slot.retry_at = None;
        let result = self.ensure_live(server, &mut slot).await;
        let mut status = self.status_of(server);
        status.latency_ms = Some(started.elapsed().as_millis());
        if let Some((live, _)) = &slot.live {
            status.stderr_tail = connection::stderr_tail(live);
        }
        if let Err(e) = result {
            status.last_error = Some(e);
        }
        Some(status)
    }

    /// Stops every connection (and child process).
    pub async fn shutdown(&self) {
        // All at once and bounded: one at a time, a child slow to exit when its stdin
        // closes held up the whole exit (Ctrl-D at a terminal looked ignored). Past the
        // bound the waits are dropped, and the exit ends every process group left
        // (`end_all_groups`), as tasks are not unwound then.
        let all = futures_util::future::join_all(self.servers.iter().map(|s| self.drop_live(s)));
        if tokio::time::timeout(SHUTDOWN_WAIT, all).await.is_err() {
            // The kills are spawned as the waits drop: let them run before the exit.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A downstream call's outcome, as our tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayResult {
    pub text: String,
    pub is_error: bool,
    pub flags: Vec<&'static str>,
}

impl GatewayResult {
    fn error(text: impl Into<String>) -> Self {
        GatewayResult {
            text: text.into(),
            is_error: true,
            flags: Vec::new(),
        }
    }
}

/// A status as JSON (for `gateway test --json` and `gateway list --json`).
pub fn status_json(slug: &str, status: &Status) -> Value {
    json!({
        "server": slug,
        "connected": status.connected,
        "connects": status.connects,
        "last_error": status.last_error.as_ref().map(ToString::to_string),
        "error_kind": status.last_error.as_ref().map(GatewayError::kind),
        "latency_ms": status.latency_ms,
        "tools": status.exposed.iter().map(|e| &e.name).collect::<Vec<_>>(),
        "rejected": status.rejected.iter().map(|r| json!({"tool": r.name, "reason": r.reason})).collect::<Vec<_>>(),
    })
}
