//! The tool catalogue: one file per tool group (schema, validation, handler,
//! rendering), shared by every front end. MCP `tools/call`, the CLI and the TUI all come
//! through [`Tools::accept`] then [`Tools::complete`] (or [`Tools::run`], its MCP form).
//!
//! Touches: the network only through `perplexity::`, `fetch::` and `gateway::`.

pub mod admin;
pub mod args;
pub mod ask;
pub mod catalogue;
pub mod deep_research;
pub mod fetch;
pub mod finance;
pub mod registry;
pub mod render;
pub mod report;
pub mod research;
pub mod responses;
pub mod search;

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::Value;

use crate::call::{CallFacts, FrontEnd, Refusal, Slot, Slots, ToolOutput};
use crate::drain::{CREATE_ANSWER_GRACE, Obligations};
use crate::fetch::Fetcher;
use crate::gateway::Gateway;
use crate::guard::{Guard, Pass, injection};
use crate::perplexity::PerplexityClient;
use crate::perplexity::wait::{ProgressSink, RunIdSink};
use crate::store::StoreHandle;
use args::Args;
pub use catalogue::ToolSelection;
use tokio_util::sync::CancellationToken;

/// Text shown when a handler fails in a way we did not foresee. The details go to
/// stderr (tool name and kind only: a message could carry secrets).
pub const UNEXPECTED_FAILURE: &str = "The tool failed unexpectedly. Check the server's stderr log.";

/// Remembers the research runs a call created or touched, so an abandoned call
/// (cancelled by the client, or cut by shutdown) can still say which run to collect.
#[derive(Default)]
pub struct RunIds {
    ids: Mutex<Vec<String>>,
    /// Also told each new id (the CLI shows it while the call waits).
    also: Option<Arc<dyn RunIdSink>>,
    /// A create was sent: from then on a run may exist upstream before its id is known.
    create_sent: std::sync::atomic::AtomicBool,
    learned: tokio::sync::Notify,
}

impl RunIds {
    pub fn forwarding(also: Arc<dyn RunIdSink>) -> Self {
        RunIds {
            also: Some(also),
            ..RunIds::default()
        }
    }

    /// A create went out and no id is known yet.
    pub fn awaiting_id(&self) -> bool {
        self.create_sent.load(std::sync::atomic::Ordering::Acquire)
            && self.ids.lock().is_ok_and(|ids| ids.is_empty())
    }

    /// Returns once an id is known (at once if none is awaited).
    pub async fn id_known(&self) {
        loop {
            let learned = self.learned.notified();
            tokio::pin!(learned);
            learned.as_mut().enable();
            if !self.awaiting_id() {
                return;
            }
            learned.await;
        }
    }

    pub fn snapshot(&self) -> Vec<String> {
        self.ids.lock().map(|ids| ids.clone()).unwrap_or_default()
    }

    pub fn take(&self) -> Vec<String> {
        self.ids
            .lock()
            .map(|mut ids| std::mem::take(&mut *ids))
            .unwrap_or_default()
    }
}

impl RunIdSink for RunIds {
    fn run_id(&self, id: &str) {
        let new = self.ids.lock().is_ok_and(|mut ids| {
            let new = !ids.iter().any(|known| known == id);
            if new {
                ids.push(id.to_owned());
            }
            new
        });
        // The forward first: whoever waits for the id (a drain) may then rely on what
        // the forward set in motion (a task's store write) already being under way.
        if let (true, Some(also)) = (new, &self.also) {
            also.run_id(id);
        }
        if new {
            self.learned.notify_waiters();
        }
    }

    fn create_sent(&self) {
        self.create_sent
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

/// What a front end hands a tool besides its arguments.
#[derive(Default)]
pub struct CallContext {
    pub progress: Option<Arc<dyn ProgressSink>>,
    pub run_ids: Arc<RunIds>,
    /// Cancelled when the caller abandons the call (client cancellation, shutdown).
    pub cancel: CancellationToken,
    /// How long this call may wait for a run, when its front end decides (the CLI's
    /// `--timeout`); otherwise the server's wait budget.
    pub wait: Option<Duration>,
    /// Set when the call becomes an MCP task (it may, after it started): the closing
    /// audit record names it.
    pub task_id: Arc<std::sync::OnceLock<String>>,
}

impl CallContext {
    pub fn progress(&self) -> Option<&dyn ProgressSink> {
        self.progress.as_deref()
    }

    /// The reply to a call whose wait a shutdown ended: it says so, and names every run
    /// the call started, so the caller can collect it from the next server.
    pub fn cut_by_shutdown(&self) -> ToolOutput {
        let mut text = "The server is shutting down, so it stopped waiting.".to_owned();
        for id in self.run_ids.take() {
            text.push_str(&format!(
                " Research run {id} may still be running: collect it later with perplexity_agent_result."
            ));
        }
        ToolOutput::error(text)
    }

    /// After the caller abandoned the call (no reply goes out): names on stderr every
    /// run it started, so paid work can still be collected or stopped.
    pub fn log_abandoned_runs(&self, tool: &str) {
        for id in self.run_ids.take() {
            tracing::warn!(
                tool,
                response_id = %id,
                "stopped waiting for research run {id}; it may still be running. Collect it with perplexity_agent_result or stop it with perplexity_agent_cancel"
            );
        }
    }
}

/// A JSON schema literal as the object rmcp's `Tool` holds. Every schema here is written
/// as an object literal, so anything else is a programming error caught by every test.
pub(crate) fn schema_object(v: Value) -> Arc<serde_json::Map<String, Value>> {
    match v {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are objects"),
    }
}

/// Hints of a tool that starts a billable, cancellable run upstream: not read-only (it
/// creates state), not destructive, not idempotent (each call is a new run), open world.
pub(crate) fn starts_a_run() -> rmcp::model::ToolAnnotations {
    rmcp::model::ToolAnnotations::new()
        .read_only(false)
        .destructive(false)
        .idempotent(false)
        .open_world(true)
}

/// A validated call of any tool.
enum Call {
    Lifecycle(research::LifecycleCall),
    Fetch(fetch::FetchCall),
    Search(crate::perplexity::search::SearchQuery),
    Deep(deep_research::DeepCall),
    Create(responses::CreateCall),
    ReadResponse(responses::RetrieveCall),
    /// A downstream tool through the gateway: `mcp__<slug>__<tool>`.
    Downstream {
        name: String,
        arguments: Args,
    },
    Retrieve {
        key: String,
        offset: usize,
    },
    Metrics,
}

/// The enabled tools of one server.
pub struct Tools {
    client: Arc<PerplexityClient>,
    fetcher: Arc<Fetcher>,
    guard: Arc<Guard>,
    store: Arc<StoreHandle>,
    gateway: Option<Arc<Gateway>>,
    /// The wait budget of a call whose front end does not choose its own.
    wait: Duration,
    /// Exactly the lifecycle profile: the reference peer's texts, unchanged.
    reference_texts: bool,
    /// `tools/list` entries, built once (the set never varies per connection).
    list: Value,
    selection: ToolSelection,
    /// Side effects promised on a caller's behalf that exit waits for.
    obligations: Obligations,
}

/// The services tool calls use, each built once by the composition root (`app.rs`).
pub struct Parts {
    pub client: Arc<PerplexityClient>,
    pub fetcher: Arc<Fetcher>,
    pub guard: Arc<Guard>,
    pub store: Arc<StoreHandle>,
}

impl Tools {
    /// The tools of `selection`; `wait` is the wait budget of calls whose front end does
    /// not choose one (the schemas quote it).
    pub fn new(selection: &ToolSelection, wait: Duration, parts: Parts) -> Self {
        let enabled = registry::definitions_of(wait.as_secs(), |name| selection.contains(name));
        let list = Value::Array(
            enabled
                .iter()
                .map(|(_, tool)| serde_json::to_value(tool).unwrap_or(Value::Null))
                .collect(),
        );
        let Parts {
            client,
            fetcher,
            guard,
            store,
        } = parts;
        Tools {
            client,
            fetcher,
            guard,
            store,
            gateway: None,
            wait,
            reference_texts: selection.is_reference(),
            list,
            selection: selection.clone(),
            obligations: Obligations::default(),
        }
    }

    /// Offers the tools of the gateway's downstream servers too.
    pub fn with_gateway(mut self, gateway: Arc<Gateway>) -> Self {
        self.gateway = Some(gateway);
        self
    }

    /// Exactly the lifecycle profile: the reference peer's drop-in, byte for byte.
    pub fn is_reference(&self) -> bool {
        self.reference_texts
    }

    pub fn gateway(&self) -> Option<&Arc<Gateway>> {
        self.gateway.as_ref()
    }

    /// The `tools` array of `tools/list`: ours, then the downstream servers'.
    pub fn list(&self) -> Value {
        let downstream = self.gateway.as_ref().map(|g| g.tools()).unwrap_or_default();
        if downstream.is_empty() {
            return self.list.clone();
        }
        let mut all = self.list.as_array().cloned().unwrap_or_default();
        all.extend(downstream);
        Value::Array(all)
    }

    /// Changes whenever [`Tools::list`] does.
    pub fn list_generation(&self) -> u64 {
        self.gateway.as_ref().map_or(0, |g| g.generation())
    }

    pub fn is_enabled(&self, name: &str) -> bool {
        self.selection.contains(name) || self.gateway.as_ref().is_some_and(|g| g.exposes(name))
    }

    /// For a tool of ours this server does not offer: the setting that would.
    pub fn not_offered(&self, name: &str) -> Option<String> {
        self.selection.not_offered(name)
    }

    /// The local store, shared with the front ends that show it (the TUI).
    pub fn store(&self) -> &Arc<StoreHandle> {
        &self.store
    }

    /// The Perplexity client the tools call through.
    pub fn client(&self) -> &Arc<PerplexityClient> {
        &self.client
    }

    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// What must finish before the process exits (every front end settles it last).
    pub fn obligations(&self) -> &Obligations {
        &self.obligations
    }

    /// Every call takes three steps: [`Tools::validate`] and [`Tools::admit`] (both
    /// synchronous, so a front end can run them in its read loop), then [`Tools::run`].
    ///
    /// Step 1, synchronous and cheap (it runs in the read loop, so refusals come back
    /// in request order): unknown arguments are rejected first — before any other
    /// validation and before the key is read — driven by the tool's schema; then the
    /// per-tool rules. A rejection is audited and costs no rate-limit token.
    fn validate(&self, front_end: FrontEnd, name: &str, args: &Args) -> Result<Validated, Refusal> {
        let params = Value::Object(args.clone());
        // A downstream tool (`mcp__…`, never one of ours): its own schema decides.
        let downstream = self.gateway.as_ref().filter(|g| g.exposes(name));
        let validated = match downstream {
            Some(gateway) => gateway
                .check_arguments(name, args)
                .map(|()| Call::Downstream {
                    name: name.to_owned(),
                    arguments: args.clone(),
                }),
            None => {
                let Some(spec) = registry::find(name) else {
                    return Err(Refusal::Invalid(format!("Unknown tool: {name}")));
                };
                args::reject_unknown(args, spec.accepted).and_then(|()| (spec.validate)(self, args))
            }
        };
        match validated {
            Ok(call) => Ok(Validated {
                call,
                front_end,
                tool: name.to_owned(),
                params,
            }),
            Err(message) => {
                self.guard
                    .rejected(front_end, name, &params, &ToolOutput::error(&message));
                Err(Refusal::Invalid(message))
            }
        }
    }

    /// Adds the function tools of `functions` (gateway tools the operator registered as
    /// functions) to a `responses_create` body; any other name refuses the call here,
    /// before the rate-limit charge.
    pub(super) fn with_functions(
        &self,
        mut call: responses::CreateCall,
    ) -> Result<responses::CreateCall, String> {
        if call.functions.is_empty() {
            return Ok(call);
        }
        let gateway = self.gateway.as_ref().ok_or(
            "'functions' names gateway tools, and no downstream servers are connected (see perplexity-agent gateway list).",
        )?;
        let mut tools = match call.body.0.remove("tools") {
            Some(Value::Array(tools)) => tools,
            _ => Vec::new(),
        };
        for name in &call.functions {
            tools.push(gateway.function_tool(name)?);
        }
        if tools.len() > responses::request::MAX_TOOLS {
            return Err(format!(
                "'tools' and 'functions' together may hold at most {} tools.",
                responses::request::MAX_TOOLS
            ));
        }
        call.body.0.insert("tools".to_owned(), Value::Array(tools));
        Ok(call)
    }

    /// Step 2, synchronous: the rate limit and the opening audit record.
    fn admit(&self, validated: Validated, slot: Option<Slot>) -> Result<Admitted, Refusal> {
        // A call that fetches n pages costs n tokens: a batch is not a way around the limit.
        let cost = match &validated.call {
            Call::Fetch(call) => call.urls.len() as u32,
            Call::Deep(call) => call.cost(),
            _ => 1,
        };
        let pass = self.guard.admit(
            validated.front_end,
            &validated.tool,
            &validated.params,
            cost,
        )?;
        Ok(Admitted {
            call: validated.call,
            tool: validated.tool,
            pass,
            _slot: slot,
        })
    }

    /// The one way in, synchronous so that refusals come back in request order:
    /// validation, a call slot of `slots` (the MCP transports' cap per connection; a
    /// busy refusal costs no rate-limit token), then the rate limit and the opening
    /// audit record.
    pub fn accept(
        &self,
        front_end: FrontEnd,
        name: &str,
        args: &Args,
        slots: Option<&Slots>,
    ) -> Result<Admitted, Refusal> {
        let validated = self.validate(front_end, name, args)?;
        let slot = slots.map(Slots::take).transpose()?;
        self.admit(validated, slot)
    }

    /// Step 3: the handler, then the output budget and the closing audit record. A
    /// panic in a handler becomes [`UNEXPECTED_FAILURE`], never a dead server.
    pub async fn run(&self, admitted: Admitted, ctx: &CallContext) -> Option<ToolOutput> {
        self.complete(admitted, ctx).await.map(|done| done.output)
    }

    /// [`Tools::run`], keeping the typed outcome for front ends that render it for
    /// people. `None` when the caller abandoned the call.
    pub async fn complete(&self, admitted: Admitted, ctx: &CallContext) -> Option<Done> {
        // The slot is held until the call has finished (it is dropped with `admitted`'s
        // remains at the end of this function).
        let Admitted {
            call,
            tool,
            pass,
            _slot,
        } = admitted;
        let wait = ctx.wait.unwrap_or(self.wait).as_secs();
        let mut typed = Outcome::Output;
        let run = AssertUnwindSafe(async {
            // Debug builds only: lets the black-box tests prove the containment below for
            // every front end (a release binary has no such switch).
            #[cfg(debug_assertions)]
            if std::env::var_os("PERPLEXITY_AGENT_TEST_PANIC").is_some_and(|t| t == tool.as_str()) {
                panic!("test panic in {tool}");
            }
            // Every arm but the research tools' is boxed: a future is as large as its
            // largest arm, and 1,000 research calls waiting at once should each pay for a
            // research call, not for deep_research's or the gateway's state.
            match &call {
                Call::Lifecycle(call) => {
                    let (mut output, facts, outcome) =
                        research::run(&self.client, wait, call, ctx).await;
                    typed = outcome;
                    // The lifecycle profile is a drop-in for the reference peer, byte for
                    // byte, so there its flags go to the audit record only; everywhere
                    // else the model is told, as by every other tool with web text.
                    if !self.reference_texts && !output.is_error && !facts.security_flags.is_empty()
                    {
                        output.text = format!(
                            "{}\n{}",
                            injection::notice("this answer", &facts.security_flags),
                            output.text
                        );
                    }
                    (output, facts)
                }
                Call::Deep(call) => {
                    let budget = Duration::from_secs(wait);
                    let report =
                        Box::pin(deep_research::run(&self.client, call, budget, ctx)).await;
                    typed = Outcome::Report {
                        report: report.report,
                        stop: report.stop,
                    };
                    let facts = CallFacts {
                        run_id: report.run_id,
                        security_flags: report.flags,
                        ..CallFacts::default()
                    };
                    (report.output, facts)
                }
                Call::Create(call) => {
                    let (output, facts, outcome) = match (&self.gateway, call.auto_execute) {
                        (Some(_), true) => {
                            let chain = responses::functions::Chain {
                                tools: self,
                                front_end: pass.front_end(),
                                wait,
                            };
                            Box::pin(chain.run(call, ctx)).await
                        }
                        _ => {
                            Box::pin(responses::create(
                                &self.client,
                                &self.store,
                                wait,
                                call,
                                ctx,
                            ))
                            .await
                        }
                    };
                    typed = outcome;
                    (output, facts)
                }
                Call::ReadResponse(call) => {
                    let (output, facts, outcome) = Box::pin(responses::retrieve(
                        &self.client,
                        &self.store,
                        wait,
                        call,
                        ctx,
                    ))
                    .await;
                    typed = outcome;
                    (output, facts)
                }
                Call::Downstream { name, arguments } => match &self.gateway {
                    Some(gateway) => {
                        let result = Box::pin(gateway.call(name, arguments.clone())).await;
                        let facts = CallFacts {
                            security_flags: result.flags.clone(),
                            ..CallFacts::default()
                        };
                        let output = ToolOutput {
                            is_error: result.is_error,
                            ..ToolOutput::ok(result.text)
                        };
                        (output, facts)
                    }
                    None => (
                        ToolOutput::error(format!("Unknown tool: {name}")),
                        CallFacts::default(),
                    ),
                },
                Call::Search(query) => {
                    let outcome = Box::pin(search::run(&self.client, query, wait)).await;
                    let (output, flags) = search::render(&outcome);
                    let facts = CallFacts {
                        security_flags: flags,
                        ..CallFacts::default()
                    };
                    typed = Outcome::Search(outcome);
                    (output, facts)
                }
                Call::Fetch(call) => {
                    let fetched = Box::pin(fetch::run(&self.fetcher, call)).await;
                    let facts = CallFacts {
                        security_flags: fetch::flags(&fetched),
                        fetch_allow_private: self.fetcher.config().allow_private.lifted(),
                        ..CallFacts::default()
                    };
                    let output = fetch::render(&fetched);
                    typed = Outcome::Fetch(fetched);
                    (output, facts)
                }
                Call::Metrics => (
                    admin::render(self.guard.metrics(crate::guard::metrics::Upstream {
                        retries: self.client.retries(),
                        circuit_open: self.client.circuit_open(),
                    })),
                    CallFacts::default(),
                ),
                Call::Retrieve { key, offset } => {
                    let output = match self.guard.retrieve(key, *offset) {
                        Ok(text) => ToolOutput::ok(text),
                        Err(message) => ToolOutput::error(message),
                    };
                    (output, CallFacts::default())
                }
            }
        })
        .catch_unwind();
        let ran = {
            tokio::pin!(run);
            let finished = tokio::select! {
                ran = &mut run => Some(ran),
                () = ctx.cancel.cancelled() => None,
            };
            if finished.is_none() && ctx.run_ids.awaiting_id() {
                let answered = async {
                    tokio::select! {
                        _ = &mut run => {}
                        () = ctx.run_ids.id_known() => {}
                    }
                };
                let _ = tokio::time::timeout(CREATE_ANSWER_GRACE, answered).await;
            }
            finished
        };
        let ran = match ran {
            Some(ran) => ran,
            None => {
                let task = ctx.task_id.get().map(String::as_str);
                self.guard.abandoned(pass, &ctx.run_ids.snapshot(), task);
                return None;
            }
        };
        let mut panicked = false;
        let (output, mut facts) = match ran {
            Ok(done) => done,
            Err(_) => {
                tracing::error!(tool = %tool, kind = "panic", "tool failed unexpectedly");
                typed = Outcome::Output;
                panicked = true;
                (ToolOutput::error(UNEXPECTED_FAILURE), CallFacts::default())
            }
        };
        facts.task_id = ctx.task_id.get().cloned();
        let mut shown = output.clone();
        let truncated = self.guard.budget(&mut shown);
        pass.finish(&output, &facts, truncated);
        Some(Done {
            output: shown,
            full: output,
            outcome: typed,
            panicked,
        })
    }
}

impl Tools {
    /// [`Tools::complete`] for a call made while another runs (a function a responses
    /// chain executes): boxed behind a plain signature, so the outer call's future need
    /// not contain its own.
    pub fn complete_nested<'a>(
        &'a self,
        admitted: Admitted,
        ctx: &'a CallContext,
    ) -> futures_util::future::BoxFuture<'a, Option<Done>> {
        Box::pin(self.complete(admitted, ctx))
    }
}

/// A finished call: the result as MCP sends it (within the output budget) and its typed
/// outcome, which the CLI and the TUI render for people and take exit codes from.
pub struct Done {
    pub output: ToolOutput,
    /// The same result before the output budget: a person at a terminal reads it whole.
    pub full: ToolOutput,
    pub outcome: Outcome,
    /// The handler panicked (contained): a failure of the server, not of the tool.
    pub panicked: bool,
}

/// What a call produced, typed.
pub enum Outcome {
    /// A run of the Agent API (the lifecycle, ask and finance tools; `responses_*`).
    Research(research::ResearchOutcome),
    Cancel {
        id: String,
        result: Result<crate::perplexity::agent::CancelOutcome, crate::perplexity::error::ApiError>,
    },
    Search(Result<crate::perplexity::search::SearchResults, crate::perplexity::error::ApiError>),
    Fetch(Vec<fetch::Fetched>),
    /// A `deep_research` report, validated, or why there is none (`stop`, when a front
    /// end words it itself; else the result's text says).
    Report {
        report: Option<Box<report::DeepReport>>,
        stop: Option<deep_research::Stop>,
    },
    /// Tools whose output is their only rendering (and a contained panic).
    Output,
}

/// A call whose arguments passed validation.
pub struct Validated {
    call: Call,
    front_end: FrontEnd,
    tool: String,
    params: Value,
}

/// A call the guard admitted: it holds its rate-limit token, audit pair and call slot.
pub struct Admitted {
    call: Call,
    tool: String,
    pass: Pass,
    _slot: Option<Slot>,
}

impl Admitted {
    /// False when the caller asked for its run back at once (`wait: false`): the
    /// hand-back is then the whole answer, even for a task.
    pub fn waits(&self) -> bool {
        match &self.call {
            Call::Lifecycle(research::LifecycleCall::Agent(request)) => request.wait,
            Call::Create(call) => call.wait,
            _ => true,
        }
    }
}

impl Done {
    /// The call handed its run back unfinished (its wait ran out): the run goes on.
    pub fn still_running(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Research(research::ResearchOutcome::Running { .. })
        )
    }
}

#[cfg(test)]
mod tests {
    //! The published schemas cannot drift from what is enforced: every accepted-argument
    //! list, bound and enum the validators use is checked against `tools/list`.

    use super::*;
    use crate::perplexity::agent::RECENCY_VALUES;
    use serde_json::json;

    fn schemas() -> Vec<(String, Value)> {
        registry::definitions_of(77, |_| true)
            .into_iter()
            .map(|(name, tool)| (name.to_owned(), serde_json::to_value(tool).unwrap()))
            .collect()
    }

    /// A tool's definition by name (never by position: the order is the registry's).
    fn schema_of<'a>(all: &'a [(String, Value)], name: &str) -> &'a Value {
        &all.iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .1
    }

    fn accepted(name: &str) -> &'static [&'static str] {
        registry::find(name).map_or_else(|| panic!("no spec for {name}"), |s| s.accepted)
    }

    #[test]
    fn schemas_match_what_is_enforced() {
        let all = schemas();
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        let catalogue: Vec<&str> = registry::SPECS.iter().map(|s| s.name).collect();
        assert_eq!(
            names, catalogue,
            "every catalogued tool has a definition, in order"
        );
        for (name, tool) in &all {
            let schema = &tool["inputSchema"];
            assert_eq!(schema["type"], "object", "{name}");
            assert_eq!(
                schema["additionalProperties"], false,
                "{name}: enforced, so declared"
            );
            let mut props: Vec<String> = schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            props.sort();
            let mut enforced: Vec<String> = accepted(name).iter().map(|s| s.to_string()).collect();
            enforced.sort();
            assert_eq!(
                props, enforced,
                "{name}: declared properties = accepted arguments"
            );
            assert!(
                tool["description"].as_str().is_some_and(|d| d.len() > 40),
                "{name}"
            );
            assert!(tool["title"].is_string(), "{name}");
            assert!(tool["annotations"]["readOnlyHint"].is_boolean(), "{name}");
        }
        let agent = &schema_of(&all, "perplexity_agent")["inputSchema"]["properties"];
        assert_eq!(agent["recency"]["enum"], json!(RECENCY_VALUES));
        assert_eq!(agent["domains"]["maxItems"], json!(research::MAX_DOMAINS));
        assert_eq!(
            agent["domains"]["items"]["maxLength"],
            json!(research::MAX_DOMAIN_CHARS)
        );
        assert_eq!(
            agent["query"]["maxLength"],
            json!(research::MAX_QUERY_CHARS)
        );
        assert_eq!(
            agent["preset"]["maxLength"],
            json!(research::MAX_PRESET_CHARS)
        );
        assert_eq!(agent["preset"]["default"], json!(research::DEFAULT_PRESET));
        let ask_props = &schema_of(&all, "perplexity_ask")["inputSchema"]["properties"];
        assert_eq!(ask_props["preset"]["default"], json!(ask::DEFAULT_PRESET));
        assert_eq!(ask_props["model"]["maxLength"], json!(ask::MAX_MODEL_CHARS));
        let search_props = &schema_of(&all, "perplexity_search")["inputSchema"]["properties"];
        assert_eq!(
            search_props["query"]["maxLength"],
            json!(search::MAX_QUERY_CHARS)
        );
        assert_eq!(
            search_props["queries"]["maxItems"],
            json!(search::MAX_QUERIES)
        );
        assert_eq!(
            search_props["domains"]["maxItems"],
            json!(search::MAX_DOMAINS)
        );
        assert_eq!(
            search_props["languages"]["maxItems"],
            json!(search::MAX_LANGUAGES)
        );
        assert_eq!(
            search_props["search_type"]["enum"],
            json!(search::SEARCH_TYPES)
        );
        let deep_props = &schema_of(&all, "deep_research")["inputSchema"]["properties"];
        assert_eq!(deep_props["num_subquestions"]["maximum"], 8);
        assert_eq!(
            deep_props["question"]["maxLength"],
            json!(deep_research::MAX_QUESTION_CHARS)
        );
        let create = &schema_of(&all, "responses_create")["inputSchema"]["properties"];
        use responses::request as rq;
        assert_eq!(
            create["input"]["oneOf"][0]["maxLength"],
            json!(rq::MAX_TEXT_CHARS)
        );
        assert_eq!(
            create["input"]["oneOf"][1]["maxItems"],
            json!(rq::MAX_INPUT_ITEMS)
        );
        assert_eq!(create["models"]["maxItems"], json!(rq::MAX_MODELS));
        assert_eq!(create["tools"]["maxItems"], json!(rq::MAX_TOOLS));
        assert_eq!(
            create["reasoning"]["properties"]["effort"]["enum"],
            json!(rq::EFFORTS)
        );
        assert_eq!(
            create["response_format"]["properties"]["type"]["enum"],
            json!(rq::FORMAT_TYPES)
        );
        assert_eq!(
            create["max_output_tokens"]["maximum"],
            json!(rq::MAX_TOKENS)
        );
        let tool_types: Vec<&Value> = create["tools"]["items"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["properties"]["type"]["const"])
            .collect();
        assert_eq!(json!(tool_types), json!(rq::TOOL_TYPES));
        assert_eq!(
            schema_of(&all, "responses_retrieve")["inputSchema"]["properties"]["wait_seconds"]["maximum"],
            77
        );
        let finance_props = &schema_of(&all, "finance_search")["inputSchema"]["properties"];
        assert_eq!(
            finance_props["tickers"]["maxItems"],
            json!(finance::MAX_ENTRIES)
        );
        assert_eq!(
            finance_props["categories"]["items"]["maxLength"],
            json!(finance::MAX_ENTRY_CHARS)
        );
        let fetch_props = &schema_of(&all, "fetch_url")["inputSchema"]["properties"];
        assert_eq!(fetch_props["urls"]["maxItems"], json!(fetch::MAX_URLS));
        assert_eq!(fetch_props["max_urls"]["maximum"], json!(fetch::MAX_URLS));
        assert_eq!(fetch_props["url"]["maxLength"], json!(fetch::MAX_URL_CHARS));
        assert_eq!(
            fetch_props["urls"]["items"]["maxLength"],
            json!(fetch::MAX_URL_CHARS)
        );
        let result = &schema_of(&all, "perplexity_agent_result")["inputSchema"]["properties"];
        assert_eq!(
            result["wait_seconds"]["maximum"], 77,
            "the maximum follows the budget"
        );
    }
}
