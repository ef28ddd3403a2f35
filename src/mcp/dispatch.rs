//! One incoming JSON-RPC message → what to do about it, in the order the reference
//! fixes (parse, object, notification?, method, unknown method, params, era, `_meta`,
//! handler). Quick methods are answered here; `tools/call` becomes a [`CallJob`] that
//! the transport runs concurrently.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use super::decode::Message;
use super::era::{Arrival, Era, decide, shape_modern, validate_modern_meta};
use super::method::Method;
use super::protocol::{
    INSTRUCTIONS, LOG_LEVELS, RpcError, SUPPORTED_VERSIONS, Scrubbed, ScrubbedReply, code,
    error_frame, negotiated_version, result_frame, server_info,
};
use super::tasks::{self, Answered, TaskDesk, TaskMode};
use super::{app, prompts, resources};
use crate::call::{Caller, FrontEnd, ToolOutput};
use crate::identity::Identity;
use crate::tools::{Admitted, Tools};

/// What the transport should do with one message.
#[derive(Debug)]
pub enum Action {
    /// Write this frame.
    Reply(Value),
    /// Run this tool call concurrently, then write [`Dispatcher::call_reply`]. Boxed: the
    /// transport's future and the runner's each hold it while the call waits.
    Call(Box<CallJob>),
    /// `notifications/cancelled` for this request id.
    Cancel(Value),
    /// A `tasks/*` request: answer [`Dispatcher::task_reply`] (it reads the store).
    Task(TaskJob),
    /// `subscriptions/listen` for tasks: long-lived, cancelled like a call
    /// ([`Dispatcher::listen`]).
    Listen(TaskJob),
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
    /// What the result becomes: a tool result, or the contents of a resource.
    pub reply: ReplyAs,
    /// The caller asked for a task (2025-11-25 `task`) or declared the extension
    /// (2026-07-28), and the tool can outlast a call: run it through [`TaskDesk::call`].
    pub task: Option<TaskMode>,
    /// Who asked: the call runs as, and its state belongs to, this caller.
    pub who: Identity,
    /// The client hosts the MCP App: the result carries the App's view as its
    /// `structuredContent` (`mcp::app`).
    pub apps: bool,
    /// The caller's W3C trace context (`_meta.traceparent`, or over HTTP the header);
    /// boxed, as most calls have none.
    pub trace: Option<Box<crate::call::Trace>>,
}

/// A `tasks/get`, `tasks/update` or `tasks/cancel` request.
#[derive(Debug)]
pub struct TaskJob {
    pub id: Value,
    pub era: Era,
    pub method: String,
    pub params: Map<String, Value>,
    /// Whose tasks it may read.
    pub who: Identity,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyAs {
    ToolResult,
    /// `resources/read` of a run: answered by `perplexity_agent_result` through the guard.
    Resource {
        uri: String,
    },
}

/// A serialized, scrubbed `tools/list` result and the list version it was made from.
type CachedList = (u64, Arc<Scrubbed>);

/// Which cached `tools/list` a request gets: its era, and whether it shows the App.
fn list_slot(era: Era, apps: bool) -> usize {
    usize::from(era == Era::Modern) * 2 + usize::from(apps)
}

pub struct Dispatcher {
    tools: Arc<Tools>,
    tasks: Arc<TaskDesk>,
    /// Who stdio's messages come from: the user running the server.
    local: Identity,
    /// The `tools/list` results by slot and, for a caller limited to some tools, its
    /// list: each serialized once per version of the list (it changes only when a
    /// downstream server's tools do), as rebuilding its JSON per request was most of the
    /// HTTP server's CPU.
    list_text: Mutex<std::collections::HashMap<(usize, Option<String>), CachedList>>,
    /// Set by a transport that delivers `notifications/tools/list_changed` (stdio) when
    /// the list can change (downstream servers): only then is `listChanged` advertised.
    list_changed: std::sync::atomic::AtomicBool,
    /// stdio's client declared the MCP App at its (2025-11-25) `initialize`.
    stdio_apps: std::sync::atomic::AtomicBool,
}

impl Dispatcher {
    /// For stdio, whose every message is the local user's; HTTP says who asks per
    /// request ([`Dispatcher::over_http`]).
    pub fn new(tools: Arc<Tools>) -> Self {
        Dispatcher {
            tools,
            tasks: Arc::new(TaskDesk::new(FrontEnd::McpStdio)),
            local: Identity::unrestricted(Caller::local()),
            list_text: Mutex::default(),
            list_changed: std::sync::atomic::AtomicBool::new(false),
            stdio_apps: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The whole reply frame of a plain `tools/list` (no cursor), as text; `None` for
    /// anything else (which goes through [`Dispatcher::answer`]).
    pub fn list_reply_text(
        &self,
        id: &Value,
        method: &str,
        params: &Map<String, Value>,
        era: Era,
        who: &Identity,
        session_apps: bool,
    ) -> Option<ScrubbedReply> {
        if method != "tools/list" || params.get("cursor").is_some_and(|c| !c.is_null()) {
            return None;
        }
        let apps = self.hosts_app(era, params, session_apps);
        let generation = self.tools.list_generation();
        // Scrubbed once when built: the list holds downstream servers' text.
        let build = || -> Arc<Scrubbed> {
            let mut result = Map::with_capacity(1);
            result.insert("tools".to_owned(), self.tool_list(era, who, apps));
            Arc::new(Scrubbed::new(
                &shape(era, method, Value::Object(result)).to_string(),
            ))
        };
        // Callers limited to some tools get their own list, cached by that list.
        let limited = who.access.tools.as_ref().map(|a| a.as_written().to_owned());
        let key = (list_slot(era, apps), limited);
        let cached = self
            .list_text
            .lock()
            .ok()
            .and_then(|c| c.get(&key).cloned())
            .filter(|(g, _)| *g == generation)
            .map(|(_, text)| text);
        let result = cached.unwrap_or_else(|| {
            let text = build();
            if let Ok(mut c) = self.list_text.lock() {
                // Bounded by the distinct lists in use; a flood of OAuth scope
                // combinations starts it over rather than grow it.
                if c.len() >= 64 {
                    c.clear();
                }
                c.insert(key, (generation, text.clone()));
            }
            text
        });
        // The id is the client's text: scrubbed per request.
        let id = Scrubbed::new(&serde_json::to_string(id).ok()?);
        Some(Scrubbed::reply(&id, &result))
    }

    pub fn tools(&self) -> &Arc<Tools> {
        &self.tools
    }

    /// The tool list as `era` shows it: 2025-11-25 tools that can run as tasks say so
    /// (`execution.taskSupport`), except in the reference peer's drop-in profile; the
    /// 2026-07-28 extension needs no such mark.
    fn tool_list(&self, era: Era, who: &Identity, apps: bool) -> Value {
        let mut list = self.tools.list();
        if apps && let Value::Array(tools) = &mut list {
            app::mark_tools(tools);
        }
        // A caller limited to some tools sees only those: what it may not call is not
        // offered to its model.
        if who.access.tools.is_some()
            && let Value::Array(tools) = &mut list
        {
            tools.retain(|tool| tool["name"].as_str().is_some_and(|n| who.access.permits(n)));
        }
        if era == Era::Legacy
            && self.tools.profile().offers_tasks()
            && let Value::Array(tools) = &mut list
        {
            for tool in tools {
                let runs_long = tool["name"]
                    .as_str()
                    .and_then(crate::tools::registry::find)
                    .is_some_and(|spec| spec.long_running);
                if runs_long {
                    tool["execution"] = json!({"taskSupport": "optional"});
                }
            }
        }
        list
    }

    /// Whether this request's client hosts the MCP App: a 2026-07-28 request says so in
    /// its `_meta`, a 2025-11-25 session at its `initialize` (`session_apps`).
    fn hosts_app(&self, era: Era, params: &Map<String, Value>, session_apps: bool) -> bool {
        self.tools.offers_app()
            && match era {
                Era::Modern => app::declared_by_request(params),
                Era::Legacy => session_apps,
            }
    }

    /// For the HTTP transport, which says who asks with each request.
    pub fn over_http(mut self) -> Self {
        self.tasks = Arc::new(TaskDesk::new(FrontEnd::McpHttp));
        self
    }

    /// Who stdio's messages come from.
    pub fn local(&self) -> &Identity {
        &self.local
    }

    pub fn tasks(&self) -> &Arc<TaskDesk> {
        &self.tasks
    }

    /// With replicas, the tasks are shared with them (leases, adoption, ends).
    pub fn share_tasks(&self) {
        self.tasks.share(&self.tools);
    }

    /// A task subscription to its end: the notifications go to `frames`; the reply
    /// frame when it ended gracefully (or was refused), `None` when cancelled.
    pub async fn listen(
        &self,
        job: TaskJob,
        frames: Option<tokio::sync::mpsc::Sender<Value>>,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Option<Value> {
        match self
            .tasks
            .listen(&self.tools, &job.id, &job.params, frames, cancel, &job.who)
            .await
        {
            Ok(Some(result)) => Some(result_frame(&job.id, result)),
            Ok(None) => None,
            Err(e) => Some(error_frame(&job.id, &e)),
        }
    }

    /// Runs a task-capable call (detached from its request: neither a closed stream nor
    /// `notifications/cancelled` cancels a task); the reply frame, `None` if abandoned.
    pub async fn task_call_reply(
        &self,
        job: &CallJob,
        admitted: Admitted,
        mode: TaskMode,
    ) -> Option<Value> {
        let tools = self.tools.clone();
        match self
            .tasks
            .call(tools, job.tool.clone(), admitted, mode, &job.who.caller)
            .await
        {
            Answered::Now(output) => output.map(|o| self.call_reply(job, &o)),
            Answered::Task(result) => Some(result_frame(&job.id, result)),
        }
    }

    /// The reply frame of a `tasks/*` request.
    pub async fn task_reply(&self, job: TaskJob) -> Value {
        match self
            .tasks
            .answer(&self.tools, job.era, &job.method, &job.params, &job.who)
            .await
        {
            Ok(result) => result_frame(&job.id, result),
            Err(e) => error_frame(&job.id, &e),
        }
    }

    /// At exit, once the transport has answered what it could: tasks keep what they
    /// need to be resumed (or end saying why), every promised side effect finishes
    /// (bounded), and the audit log gets its last records.
    pub async fn finish(&self) {
        self.tasks.drain(&self.tools).await;
        let obligations = self.tools.obligations();
        if !obligations.settle(crate::drain::PROMISES_WITHIN).await {
            tracing::warn!(
                pending = obligations.pending(),
                "exiting before every promised request or store write had finished (the upstream or the disk did not answer within {}s)",
                crate::drain::PROMISES_WITHIN.as_secs()
            );
        }
        self.tools.guard().flush();
    }

    /// The transport will tell legacy clients when the tool list changes.
    pub fn announce_list_changes(&self) {
        self.list_changed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn list_changes(&self) -> bool {
        self.list_changed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Handles one stdio line (already stripped of surrounding whitespace, not blank).
    pub fn handle_line(&self, line: &[u8]) -> Action {
        match super::decode::decode(line) {
            Ok(message) => self.handle_message(message),
            Err(undecodable) => Action::Reply(undecodable.frame()),
        }
    }

    pub fn handle_message(&self, message: Message) -> Action {
        let (id, method, params) = match envelope(message) {
            Envelope::Request { id, method, params } => (id, method, params),
            Envelope::Other(action) => return action,
        };
        let Some(parsed) = Method::parse(&method).filter(|m| m.served()) else {
            return Action::Reply(error_frame(&id, &RpcError::method_not_found(&method)));
        };
        let era = decide(Some(parsed), &params, Arrival::Stdio);
        if era == Era::Modern
            && let Err(e) = validate_modern_meta(&method, &params)
        {
            return Action::Reply(error_frame(&id, &e));
        }
        use std::sync::atomic::Ordering;
        // One stdio process, one client: its initialize says for the whole session.
        if parsed == Method::Initialize {
            self.stdio_apps
                .store(app::declared_at_initialize(&params), Ordering::Relaxed);
        }
        let apps = self.stdio_apps.load(Ordering::Relaxed);
        self.answer(id, &method, params, era, &self.local, apps)
    }

    /// Answers a request whose era the transport has decided and whose `_meta` it has
    /// validated.
    pub fn answer(
        &self,
        id: Value,
        method: &str,
        params: Map<String, Value>,
        era: Era,
        who: &Identity,
        session_apps: bool,
    ) -> Action {
        let apps = self.hosts_app(era, &params, session_apps);
        let handled = match Method::parse(method) {
            Some(m)
                if m.allowed_in(era) && (!m.is_task() || self.tools.profile().offers_tasks()) =>
            {
                self.request(m, era, params, &id, who, apps)
            }
            _ => Err(RpcError::method_not_found(method)),
        };
        match handled {
            Ok(Handled::Result(result)) => {
                Action::Reply(result_frame(&id, shape(era, method, result)))
            }
            Ok(Handled::Call(job)) => Action::Call(Box::new(job)),
            Ok(Handled::Task(job)) => Action::Task(job),
            Ok(Handled::Listen(job)) => Action::Listen(job),
            Err(e) => Action::Reply(error_frame(&id, &e)),
        }
    }

    fn request(
        &self,
        method: Method,
        era: Era,
        params: Map<String, Value>,
        request_id: &Value,
        who: &Identity,
        apps: bool,
    ) -> Result<Handled, RpcError> {
        // The task methods are answered by the task runner, as this job.
        let job = |params| TaskJob {
            id: request_id.clone(),
            era,
            method: method.name().to_owned(),
            params,
            who: who.clone(),
        };
        let result = match method {
            Method::Initialize => {
                let mut result = initialize(
                    &params,
                    self.list_changes(),
                    self.tools.profile().offers_tasks(),
                );
                // Said back only to a client that declared it.
                if apps {
                    result["capabilities"]["extensions"] = json!({ app::EXTENSION: {} });
                }
                result
            }
            Method::Ping => json!({}),
            Method::ServerDiscover => {
                let mut capabilities = capabilities(Era::Modern, false);
                if self.tools.profile().offers_tasks() {
                    capabilities["extensions"] = json!({ tasks::EXTENSION: {} });
                }
                json!({
                    "supportedVersions": SUPPORTED_VERSIONS,
                    "capabilities": capabilities,
                    "instructions": INSTRUCTIONS,
                })
            }
            Method::ResourcesList => {
                // Runs are not listed: their ids are capabilities, known to whoever started
                // them. The App is, to the clients that host it.
                let listed: Vec<Value> = apps.then(app::resource).into_iter().collect();
                json!({ "resources": listed })
            }
            Method::ResourcesRead
                if apps && params.get("uri").and_then(Value::as_str) == Some(app::URI) =>
            {
                app::contents()
            }
            Method::ResourcesTemplatesList => {
                json!({"resourceTemplates": [resources::template()]})
            }
            Method::ResourcesRead => {
                let (uri, id) = resources::parse_read(&params)?;
                if let Some(refused) = who.refusal("perplexity_agent_result") {
                    return Err(RpcError::new(code::INVALID_PARAMS, refused));
                }
                return Ok(Handled::Call(CallJob {
                    id: request_id.clone(),
                    era,
                    tool: "perplexity_agent_result".to_owned(),
                    arguments: json!({"response_id": id})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                    progress_token: None,
                    reply: ReplyAs::Resource { uri },
                    task: None,
                    who: who.clone(),
                    apps: false,
                    trace: trace_of(&params),
                }));
            }
            Method::PromptsList => prompts::list(),
            Method::PromptsGet => prompts::get(&params)?,
            Method::CompletionComplete => prompts::complete(&params)?,
            Method::ToolsList => {
                if params.get("cursor").is_some_and(|c| !c.is_null()) {
                    return Err(RpcError::new(code::INVALID_PARAMS, "Invalid cursor."));
                }
                let mut result = Map::with_capacity(1);
                result.insert("tools".to_owned(), self.tool_list(era, who, apps));
                Value::Object(result)
            }
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel if era == Era::Modern => {
                if !tasks::declared(&params) {
                    return Err(tasks::not_declared());
                }
                return Ok(Handled::Task(job(params)));
            }
            Method::SubscriptionsListen => return Ok(Handled::Listen(job(params))),
            // The 2025-11-25 core tasks.
            Method::TasksGet | Method::TasksCancel | Method::TasksResult | Method::TasksList => {
                return Ok(Handled::Task(job(params)));
            }
            Method::ToolsCall => {
                return self.tool_call(params, era, request_id, who).map(|job| {
                    Handled::Call(CallJob {
                        apps,
                        // A task's result is kept as the caller will read it.
                        task: job.task.map(|mode| TaskMode { apps, ..mode }),
                        ..job
                    })
                });
            }
            Method::LoggingSetLevel => {
                let level = params.get("level").and_then(Value::as_str);
                if !level.is_some_and(|l| LOG_LEVELS.contains(&l)) {
                    return Err(RpcError::new(
                        code::INVALID_PARAMS,
                        format!("Invalid log level. Accepted: {}.", LOG_LEVELS.join(", ")),
                    ));
                }
                json!({})
            }
            // Not served in this era (`allowed_in`), or not at all: never reached.
            Method::TasksUpdate | Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
                return Err(RpcError::method_not_found(method.name()));
            }
        };
        Ok(Handled::Result(result))
    }

    fn tool_call(
        &self,
        mut params: Map<String, Value>,
        era: Era,
        id: &Value,
        who: &Identity,
    ) -> Result<CallJob, RpcError> {
        let name = params.get("name");
        let Some(tool) = name
            .and_then(Value::as_str)
            .filter(|n| self.tools.is_enabled(n))
            .map(str::to_owned)
        else {
            // The reference profile keeps the peer's words; otherwise a tool left out of
            // the selection says which setting offers it.
            let hint = name
                .and_then(Value::as_str)
                .filter(|_| self.tools.profile().hints_unoffered_tools())
                .and_then(|n| self.tools.not_offered(n));
            let shown = python_repr(name.unwrap_or(&Value::Null));
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                hint.unwrap_or_else(|| format!("Unknown tool: {shown}")),
            ));
        };
        if let Some(refused) = who.refusal(&tool) {
            crate::telemetry::refused(crate::telemetry::Refusal::Scope);
            return Err(RpcError::new(code::INVALID_PARAMS, refused));
        }
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
        // Functions a responses chain runs are the caller's calls too: a downstream tool
        // it may not call directly it may not have the agent call either.
        let functions = arguments.get("functions").and_then(Value::as_array);
        if let Some(refused) = functions
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find_map(|function| who.refusal(function))
        {
            return Err(RpcError::new(code::INVALID_PARAMS, refused));
        }
        // Only a string or an integer token opts in (never a boolean or a float).
        let progress_token = super::era::request_meta(&params)
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || crate::text::json_integer(t).is_some())
            .cloned();
        // Only a modern caller that declared the extension gets a task, and only for a
        // tool whose work can outlast the call.
        let long_running =
            crate::tools::registry::find(&tool).is_some_and(|spec| spec.long_running);
        // A task asked for where none can be (a quick tool, the reference peer's drop-in
        // profile) is ignored: the call runs as usual.
        let task = match era {
            _ if !self.tools.profile().offers_tasks() => None,
            Era::Modern => tasks::declared(&params).then(TaskMode::modern),
            Era::Legacy => TaskMode::legacy(&params),
        }
        .filter(|_| long_running);
        Ok(CallJob {
            id: id.clone(),
            era,
            tool,
            arguments,
            progress_token,
            reply: ReplyAs::ToolResult,
            task,
            who: who.clone(),
            apps: false,
            trace: trace_of(&params),
        })
    }

    /// The reply frame of a finished call (shaped for its era).
    pub fn call_reply(&self, job: &CallJob, output: &ToolOutput) -> Value {
        match &job.reply {
            ReplyAs::ToolResult => {
                let result = output.to_json_for(job.apps);
                result_frame(&job.id, shape(job.era, "tools/call", result))
            }
            ReplyAs::Resource { uri } => match resources::contents(uri, output) {
                Ok(result) => result_frame(&job.id, shape(job.era, "resources/read", result)),
                Err(e) => error_frame(&job.id, &e),
            },
        }
    }
}

/// `_meta.traceparent` (the MCP trace-context convention), when it is a valid one; a
/// malformed value is ignored, as W3C Trace Context says, and the call starts a trace.
fn trace_of(params: &Map<String, Value>) -> Option<Box<crate::call::Trace>> {
    super::era::request_meta(params)
        .and_then(|m| m.get("traceparent"))
        .and_then(Value::as_str)
        .and_then(crate::call::Trace::parse)
        .map(Box::new)
}

enum Handled {
    Result(Value),
    Call(CallJob),
    Task(TaskJob),
    Listen(TaskJob),
}

/// A parsed JSON-RPC message, before any era rule.
pub enum Envelope {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    /// A notification (possibly a cancellation), or an invalid message with its error.
    Other(Action),
}

/// Object? notification (no `id` key; `"id": null` is a request)? method a string?
pub fn envelope(message: Message) -> Envelope {
    if message.not_an_object {
        // Batches included: removed from MCP in 2025-06-18.
        return refused(&Value::Null, code::INVALID_REQUEST, "Invalid request.");
    }
    let Some(id) = message.id else {
        return Envelope::Other(notification(message.method, message.params));
    };
    // MCP ids are strings or numbers (null is answered as JSON-RPC's "unknown id").
    // An object, array or boolean id is refused without echoing it: echoing would hand
    // a client's arbitrary structure back in every frame (and the peer's habit of doing
    // so is a documented difference).
    if !(id.is_string() || id.is_number() || id.is_null()) {
        return refused(
            &Value::Null,
            code::INVALID_REQUEST,
            "Invalid request: the id must be a string or a number.",
        );
    }
    let Some(Value::String(method)) = message.method else {
        return refused(&id, code::INVALID_REQUEST, "Missing method.");
    };
    let params = match message.params {
        Some(Value::Object(params)) => params,
        None | Some(Value::Null) => Map::new(),
        // JSON-RPC params are structured; MCP's are always an object.
        Some(_) => {
            return refused(
                &id,
                code::INVALID_PARAMS,
                "Invalid params: params must be an object.",
            );
        }
    };
    Envelope::Request { id, method, params }
}

/// A message refused before its method is looked at: the error frame to write.
fn refused(id: &Value, code: i64, message: &str) -> Envelope {
    Envelope::Other(Action::Reply(error_frame(
        id,
        &RpcError::new(code, message),
    )))
}

fn shape(era: Era, method: &str, result: Value) -> Value {
    match era {
        Era::Legacy => result,
        Era::Modern => shape_modern(method, result),
    }
}

/// Notifications are never answered and never executed (an id-less `tools/call`
/// spends nothing); only a cancellation changes anything.
fn notification(method: Option<Value>, params: Option<Value>) -> Action {
    if method.as_ref().and_then(Value::as_str) == Some("notifications/cancelled")
        && let Some(Value::Object(mut params)) = params
        && let Some(id) = params.remove("requestId")
    {
        return Action::Cancel(id);
    }
    Action::Nothing
}

fn initialize(params: &Map<String, Value>, list_changed: bool, tasks: bool) -> Value {
    let mut capabilities = capabilities(Era::Legacy, list_changed);
    if tasks {
        capabilities["tasks"] =
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    }
    json!({
        "protocolVersion": negotiated_version(params),
        "capabilities": capabilities,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    })
}

/// What we serve: tools, the run resource template, prompts and their completions.
/// Legacy clients may also set a log level (we accept it; we send no log messages).
/// Only the tool list can change at run time (downstream servers of the gateway), and
/// only stdio delivers the notification; modern clients rely on `ttlMs`. No `subscribe`.
fn capabilities(era: Era, list_changed: bool) -> Value {
    let mut caps = json!({"tools": {}, "resources": {}, "prompts": {}, "completions": {}});
    if list_changed && era == Era::Legacy {
        caps["tools"] = json!({"listChanged": true});
    }
    if era == Era::Legacy {
        caps["logging"] = json!({});
    }
    caps
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
        let v =
            |p: Value| initialize(p.as_object().unwrap(), false, true)["protocolVersion"].clone();
        assert_eq!(v(json!({"protocolVersion": "2025-06-18"})), "2025-06-18");
        assert_eq!(v(json!({"protocolVersion": "2025-03-26"})), "2025-03-26");
        assert_eq!(v(json!({"protocolVersion": "2026-07-28"})), "2025-11-25");
        assert_eq!(v(json!({"protocolVersion": "2024-11-05"})), "2025-11-25");
        assert_eq!(v(json!({"protocolVersion": 5})), "2025-11-25");
        assert_eq!(v(json!({})), "2025-11-25");
    }
}
