//! A validated call of any tool, and what each kind does: the one `match` over the tools,
//! beside the call it matches; what a front end lends a call ([`CallContext`]) and its
//! typed result ([`Outcome`]). [`Tools::complete`](super::Tools::complete) is the frame
//! around it (isolation, budgets, cancellation, settlement, the output budget), written
//! once for every tool.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::Args;
use super::owners::RunOwners;
use super::{Tools, deep_research, fetch, report, research, responses, search};
use crate::call::Caller;
use crate::call::{CallFacts, ToolOutput};
use crate::guard::injection;
use crate::perplexity::wait::{ProgressSink, RunIdSink};

/// A validated call of any tool.
pub(super) enum Call {
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

impl Call {
    /// The run a call names, when it names one it did not create: what isolation checks.
    pub(super) fn named_run(&self) -> Option<&str> {
        match self {
            Call::Lifecycle(research::LifecycleCall::Result { id, .. })
            | Call::Lifecycle(research::LifecycleCall::Cancel { id }) => Some(id),
            Call::ReadResponse(call) => Some(&call.id),
            Call::Create(call) => call.previous_response_id(),
            _ => None,
        }
    }

    /// What a call that starts billable work reserves of a budget (`None`: it starts
    /// none — it reads results, fetches pages, answers locally — and no budget refuses it).
    pub(super) fn budget_estimate(&self) -> Option<crate::spend::money::Micros> {
        use crate::spend::prices::{SEARCH_REQUEST, preset_estimate};
        match self {
            Call::Lifecycle(research::LifecycleCall::Agent(_)) | Call::Create(_) => {
                Some(self.per_run_estimate())
            }
            Call::Search(_) => Some(SEARCH_REQUEST),
            Call::Deep(call) => {
                let runs = 1 + i64::from(call.model_decomposition);
                Some(runs * preset_estimate(None) + call.subquestions.len() as i64 * SEARCH_REQUEST)
            }
            _ => None,
        }
    }

    /// What a run of this call costs when the API reports no cost: its preset's estimate.
    pub(super) fn per_run_estimate(&self) -> crate::spend::money::Micros {
        let preset = match self {
            Call::Lifecycle(research::LifecycleCall::Agent(request)) => {
                Some(request.preset.as_str())
            }
            Call::Create(call) => call.body.0.get("preset").and_then(Value::as_str),
            _ => None,
        };
        crate::spend::prices::preset_estimate(preset)
    }

    /// The answer for a run the caller may not name: what Perplexity's "no such run"
    /// (HTTP 404) gives, so another caller's run and an id that never existed cannot be
    /// told apart.
    pub(super) fn not_found(&self) -> (ToolOutput, CallFacts) {
        let missing = crate::perplexity::error::ApiError::Status {
            code: 404,
            message: None,
        };
        let output = match self {
            Call::Lifecycle(research::LifecycleCall::Cancel { id }) => {
                research::render_cancel(id, Ok(crate::perplexity::agent::CancelOutcome::NoSuchRun))
            }
            Call::Lifecycle(research::LifecycleCall::Result { id, .. }) => {
                research::render_missing(id, missing)
            }
            Call::ReadResponse(call) => responses::render_missing(&call.id, missing),
            Call::Create(call) => {
                responses::render_missing(call.previous_response_id().unwrap_or_default(), missing)
            }
            _ => ToolOutput::error("Not found."),
        };
        (output, CallFacts::default())
    }
}

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
    /// Whom the runs this call creates are bound to (set when the call starts).
    pub(super) owner: std::sync::OnceLock<(Caller, Arc<RunOwners>)>,
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

    /// Bound before anyone hears the id (the forward, the answer): a caller must never
    /// be told of a run it cannot then collect.
    fn created(&self, id: &str) {
        if let Some((caller, owners)) = self.owner.get() {
            owners.bind(id, caller);
        }
        self.run_id(id);
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
    /// An answer the research cache served whose typed form is not kept (a search, a
    /// report): its output is the rendering.
    Served,
    /// A budget refused the call before any upstream request (the CLI exits 5).
    OverBudget,
}

/// What a call runs with, besides itself.
pub(super) struct Job<'a> {
    pub tools: &'a Tools,
    pub caller: &'a Caller,
    pub front_end: crate::call::FrontEnd,
    /// The wait budget, in seconds.
    pub wait: u64,
    pub ctx: &'a CallContext,
}

impl Call {
    /// Runs the call: its output, what the audit wants to know, and its typed outcome.
    /// Every arm but the research tools' is boxed: a future is as large as its largest
    /// arm, and 1,000 research calls waiting at once should each pay for a research call,
    /// not for deep_research's or the gateway's state.
    pub(super) async fn execute(&self, job: Job<'_>) -> ((ToolOutput, CallFacts), Outcome) {
        let Job {
            tools,
            caller,
            front_end,
            wait,
            ctx,
        } = job;
        match self {
            Call::Lifecycle(call) => {
                let (mut output, facts, outcome) =
                    research::run(&tools.client, wait, call, ctx, tools.profile).await;
                if tools.profile.own_words()
                    && let Outcome::Research(research) = &outcome
                    && let Some(text) = research::still_running_own_words(research, wait)
                {
                    output.text = text;
                }
                if tools.profile.own_words() && !output.is_error && !facts.security_flags.is_empty()
                {
                    output.text = format!(
                        "{}\n{}",
                        injection::notice("this answer", &facts.security_flags),
                        output.text
                    );
                }
                ((output, facts), outcome)
            }
            Call::Deep(call) => {
                let budget = Duration::from_secs(wait);
                let report = Box::pin(deep_research::run(&tools.client, call, budget, ctx)).await;
                let facts = CallFacts {
                    run_id: report.run_id,
                    security_flags: report.flags,
                    ..CallFacts::default()
                };
                let outcome = Outcome::Report {
                    report: report.report,
                    stop: report.stop,
                };
                ((report.output, facts), outcome)
            }
            Call::Create(call) => {
                let (output, facts, outcome) = match (&tools.gateway, call.auto_execute) {
                    (Some(_), true) => {
                        let chain = responses::functions::Chain {
                            tools,
                            front_end,
                            caller: caller.clone(),
                            wait,
                        };
                        Box::pin(chain.run(call, ctx)).await
                    }
                    _ => {
                        Box::pin(responses::create(
                            &tools.client,
                            &tools.snapshots,
                            wait,
                            call,
                            ctx,
                        ))
                        .await
                    }
                };
                ((output, facts), outcome)
            }
            Call::ReadResponse(call) => {
                let (output, facts, outcome) = Box::pin(responses::retrieve(
                    &tools.client,
                    &tools.snapshots,
                    wait,
                    call,
                    ctx,
                ))
                .await;
                ((output, facts), outcome)
            }
            Call::Downstream { name, arguments } => {
                let done = match &tools.gateway {
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
                };
                (done, Outcome::Output)
            }
            Call::Search(query) => {
                let outcome = Box::pin(search::run(&tools.client, query, wait)).await;
                let (output, flags) = search::render(&outcome);
                let facts = CallFacts {
                    security_flags: flags,
                    ..CallFacts::default()
                };
                ((output, facts), Outcome::Search(outcome))
            }
            Call::Fetch(call) => {
                let fetched = Box::pin(fetch::run(&tools.fetcher, call)).await;
                let facts = CallFacts {
                    security_flags: fetch::flags(&fetched),
                    fetch_allow_private: tools.fetcher.config().allow_private.lifted(),
                    ..CallFacts::default()
                };
                let output = fetch::render(&fetched);
                ((output, facts), Outcome::Fetch(fetched))
            }
            Call::Metrics => {
                let output = super::admin::render(
                    tools.guard.metrics(crate::guard::metrics::Upstream {
                        retries: tools.client.retries(),
                        circuit_open: tools.client.circuit_open(),
                    }),
                    Box::pin(tools.spend.summary(caller)).await.ok(),
                    tools.cache.counters(),
                );
                ((output, CallFacts::default()), Outcome::Output)
            }
            Call::Retrieve { key, offset } => {
                let output = match Box::pin(tools.guard.retrieve(key, *offset, caller)).await {
                    Ok(text) => ToolOutput::ok(text),
                    Err(message) => ToolOutput::error(message),
                };
                ((output, CallFacts::default()), Outcome::Output)
            }
        }
    }
}
