//! The research-lifecycle tools — `perplexity_agent`, `perplexity_agent_result`,
//! `perplexity_agent_cancel` — as a drop-in superset of zalez/perplexity-agent-mcp:
//! schemas, validation order and texts, and the operations the CLI shares.
//!
//! Touches: the Perplexity API through `perplexity::` only.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::args::{Arg, Args, Kind, Max, REQUIRED_TEXT, Read, input_schema, names_of};
use super::render::{self, Listing};
use super::starts_a_run;
use super::{CallContext, Outcome, Profile};
use crate::call::ToolOutput;
use crate::call::{ArgError, CallFacts};
use crate::guard::injection;
use crate::guard::spotlight::spotlight;
use crate::perplexity::agent::{
    CancelOutcome, CreateRun, RECENCY_VALUES, RunSnapshot, valid_run_id,
};
use crate::perplexity::wait::{
    PollPlan, ProgressSink, RunIdSink, RunProgress, WaitError, WaitErrorKind, Waited,
    create_and_wait, create_only,
};
use crate::perplexity::{ApiError, PerplexityClient};
use crate::text::{PutSome, py_strip};

pub const DEFAULT_PRESET: &str = "medium";
pub const MAX_DOMAINS: usize = 20;
/// Bounds the reference peer does not have (it accepts any length). Generous, so no real
/// question is refused, but a megabyte "query" is refused before it is billed.
pub const MAX_QUERY_CHARS: usize = 16_384;
pub const MAX_PRESET_CHARS: usize = 64;
/// The longest DNS name.
pub const MAX_DOMAIN_CHARS: usize = 253;
/// A plain check (`wait_seconds: 0`) still gets this long for its retries, so one
/// 429/503 does not become an error (never more than the wait budget).
const PLAIN_CHECK_WINDOW: Duration = Duration::from_secs(5);

/// `recency`, as every tool that takes it reads it (the reference peer lists the values
/// sorted in its message).
pub const RECENCY: Kind = Kind::Choice {
    values: &RECENCY_VALUES,
    sorted: true,
    default: None,
};

/// `domains` of the Agent API tools: the peer's list, bounded (entries are kept as given;
/// the blank ones are dropped later).
pub const DOMAINS: Kind = Kind::list(&DOMAIN, 0, MAX_DOMAINS);
const DOMAIN: Kind = Kind::str(
    0,
    MAX_DOMAIN_CHARS,
    |d| d.chars().count() <= MAX_DOMAIN_CHARS,
    "must be at most {max} characters.",
);

/// `perplexity_agent`'s arguments: the reference peer's schema and texts, with our bounds.
pub const AGENT: [Arg; 5] = [
    query("The question to research."),
    Arg::new("preset", Kind::text_or(0, MAX_PRESET_CHARS, DEFAULT_PRESET))
        .about("Research depth: fast, low, medium, high, xhigh or wide-research. Deeper presets take longer."),
    Arg::new("recency", RECENCY).about("Use only sources published within this window."),
    Arg::new("domains", DOMAINS).about("Limit sources to these domains; prefix a domain with '-' to exclude it instead. An allowlist or a denylist, not both."),
    Arg::new("wait", Kind::Bool { default: true })
        .about("Wait for the answer. Set false to get a response_id at once, for example to start several deep runs in parallel and collect them later."),
];

pub const AGENT_ARGS: [&str; 5] = names_of(&AGENT);

/// The question of the Agent API tools (`about` in the tool's words).
pub const fn query(about: &'static str) -> Arg {
    Arg::new("query", Kind::text(1, MAX_QUERY_CHARS))
        .required()
        .about(about)
}

/// A run's id, as the lifecycle and responses tools take it (`about` names its issuer).
pub const fn response_id(about: &'static str) -> Arg {
    Arg::new("response_id", Kind::text(0, 0))
        .required()
        .about(about)
}

/// How long a collector waits (`about` in its tool's words): 0 checks once; the schema's
/// maximum is the wait budget, and a larger value is clamped, not refused.
pub const fn wait_seconds(about: &'static str) -> Arg {
    Arg::new("wait_seconds", Kind::zero_to(Max::WaitBudget)).about(about)
}

pub const RESULT: [Arg; 2] = [
    response_id("The response_id returned by perplexity_agent."),
    wait_seconds(
        "Seconds to wait for the run to finish; 0 checks once. A larger value is silently CLAMPED to this server's wait budget ({wait}s here; raise it with PERPLEXITY_AGENT_WAIT_SECONDS), never rejected.",
    ),
];

pub const CANCEL: [Arg; 1] = [response_id("The response_id returned by perplexity_agent.")];

fn malformed_id(issuer: &'static str) -> ArgError {
    ArgError::words("Malformed response_id. Expected ")
        .id_from(issuer)
        .then(".")
}

fn response_id_required() -> ArgError {
    ArgError::of("response_id", REQUIRED_TEXT)
}

pub fn agent_definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::Tool;
    Tool::new(
        name,
        "Research a question with Perplexity's Agent API, which searches the web in several steps and returns one synthesized answer with numbered sources. Best for deep or multi-hop questions. By default the call waits for the answer; if the run outlasts this server's wait budget you get a response_id instead, to collect later with perplexity_agent_result.",
        input_schema(&AGENT, 0),
    )
    .with_title("Perplexity Agent Research")
    // Not read-only: it creates billable, cancellable state upstream. The spec
    // default for destructiveHint becomes true once readOnlyHint is false.
    .with_annotations(
        starts_a_run(),
    )
}

/// `wait` is the wait budget `W`: the schema maximum of `wait_seconds` and the number
/// in its description both follow it.
pub fn result_definition(name: &'static str, wait: u64) -> rmcp::model::Tool {
    use rmcp::model::{Tool, ToolAnnotations};
    Tool::new(
        name,
        "Collect the result of a research run started with perplexity_agent. If the run is still going, reports what it has done so far and how to check again.",
        input_schema(&RESULT, wait),
    )
    .with_title("Collect Perplexity Research")
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(true))
}

pub fn cancel_definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::{Tool, ToolAnnotations};
    Tool::new(
        name,
        "Ask Perplexity to stop a research run you no longer need. Perplexity reports no usage for cancelled runs, so this cannot tell whether cancelling changed your bill.",
        input_schema(&CANCEL, 0),
    )
    .with_title("Cancel Perplexity Research")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true),
    )
}

/// A validated research request, whichever front end it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResearchRequest {
    pub query: String,
    pub preset: String,
    /// A model instead of the preset (`perplexity_ask` only).
    pub model: Option<String>,
    /// Add the finance tool (`finance_search` only).
    pub finance: bool,
    pub recency: Option<String>,
    /// Entries blank after trimming are dropped; the survivors are sent untrimmed.
    pub domains: Vec<String>,
    pub wait: bool,
}

impl ResearchRequest {
    /// Validates `perplexity_agent` arguments, in the reference order and texts.
    pub fn from_args(args: &Args) -> Result<Self, ArgError> {
        let read = Read::new(args, &AGENT);
        let query = read.need("query")?;
        let preset = read.need("preset")?;
        let recency = read.choice("recency")?.map(str::to_owned);
        let domains = match read.list("domains")? {
            None => Vec::new(),
            Some(listed) => {
                let kept = keep_domains(listed.into_iter());
                one_domain_mode(&kept, "domains")?;
                kept
            }
        };
        Ok(ResearchRequest {
            query: query.to_owned(),
            preset: preset.to_owned(),
            model: None,
            finance: false,
            recency,
            domains,
            wait: read.boolean("wait")?,
        })
    }

    fn create_body(&self) -> CreateRun {
        let run = CreateRun::new(
            &self.query,
            &self.preset,
            self.recency.as_deref(),
            &self.domains,
        );
        let run = if self.finance {
            run.with_finance()
        } else {
            run
        };
        match &self.model {
            Some(model) => run.on_model(model),
            None => run,
        }
    }
}

/// Perplexity's domain filter is an allowlist or (every entry prefixed with `-`) a
/// denylist, never both: a mixed list is refused here rather than sent upstream, where
/// its meaning is undefined. `arg` names the argument in the message.
pub fn one_domain_mode(domains: &[String], arg: &str) -> Result<(), ArgError> {
    let denied = domains
        .iter()
        .filter(|d| py_strip(d).starts_with('-'))
        .count();
    if denied != 0 && denied != domains.len() {
        return Err(ArgError::of(
            arg,
            "is an allowlist or a denylist (every entry prefixed with '-'), not both.",
        ));
    }
    Ok(())
}

/// Drops entries that are blank after trimming; keeps the others as given.
pub fn keep_domains<'a>(entries: impl Iterator<Item = &'a str>) -> Vec<String> {
    entries
        .filter(|d| !py_strip(d).is_empty())
        .map(str::to_owned)
        .collect()
}

/// A validated `response_id`: trimmed, non-empty, and matching the id pattern (checked
/// before any network access; it also stops path traversal such as `../etc/passwd`).
/// `issuer` is the tool that hands such ids out, for the message.
pub fn response_id_from(read: &Read<'_>, issuer: &'static str) -> Result<String, ArgError> {
    let id = read.need("response_id")?;
    check_run_id(id).map_err(|e| match e {
        MalformedId::Blank => response_id_required(),
        MalformedId::Malformed => malformed_id(issuer),
    })
}

/// Why a run id was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedId {
    Blank,
    Malformed,
}

pub fn check_run_id(id: &str) -> Result<String, MalformedId> {
    let id = py_strip(id);
    if id.is_empty() {
        return Err(MalformedId::Blank);
    }
    if !valid_run_id(id) {
        return Err(MalformedId::Malformed);
    }
    Ok(id.to_owned())
}

/// `wait_seconds`: default 0 (also for `null`); a JSON integer ≥ 0 — not a boolean,
/// not a float (even `5.0`). Integers of any size are accepted (and later clamped to
/// the wait budget), as the reference peer accepts them.
pub fn wait_seconds_from(read: &Read<'_>) -> Result<u64, ArgError> {
    read.int("wait_seconds")
        .map(|n| u64::try_from(n).unwrap_or(u64::MAX))
}

/// How a research call ended, for any front end to render.
#[derive(Debug, Clone)]
pub enum ResearchOutcome {
    Finished {
        id: String,
        run: RunSnapshot,
    },
    Running {
        id: String,
        /// `None`: just submitted (no status seen yet).
        progress: Option<(RunProgress, f64)>,
    },
    Failed(WaitError),
}

impl ResearchOutcome {
    pub fn run_id(&self) -> Option<&str> {
        match self {
            ResearchOutcome::Finished { id, .. } | ResearchOutcome::Running { id, .. } => Some(id),
            ResearchOutcome::Failed(e) => e.run_id.as_deref(),
        }
    }

    /// The run id and token usage, for the audit record.
    pub fn facts(&self) -> CallFacts {
        let finished = match self {
            ResearchOutcome::Finished { run, .. } => Some(run),
            _ => None,
        };
        CallFacts {
            run_id: self.run_id().map(str::to_owned),
            usage: finished.and_then(|run| run.raw().get("usage").cloned()),
            // Flag only: the lifecycle tools keep the reference peer's texts, so the
            // labels go to the audit record, never into (or out of) the answer.
            security_flags: finished.map_or_else(Vec::new, |run| {
                let answer = run.answer_text();
                let sources = run.sources();
                injection::scan(
                    std::iter::once(answer.as_str())
                        .chain(sources.iter().map(|s| s.title.as_str())),
                )
            }),
            ..CallFacts::default()
        }
    }

    /// The progress line of a still-running outcome in our own words: the run's age
    /// where Perplexity gave its start, not how long this call waited.
    pub fn progress_with_age(&self) -> Option<String> {
        match self {
            ResearchOutcome::Running {
                progress: Some((p, waited)),
                ..
            } => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                Some(p.summary_with_age(*waited, now))
            }
            _ => self.progress_text(),
        }
    }

    /// The progress line of a still-running outcome.
    pub fn progress_text(&self) -> Option<String> {
        match self {
            ResearchOutcome::Running { progress: None, .. } => Some("just submitted".to_owned()),
            ResearchOutcome::Running {
                progress: Some((p, elapsed)),
                ..
            } => Some(p.summary(*elapsed)),
            _ => None,
        }
    }
}

/// Starts a run and (unless `wait` is false) waits for it within `budget`, one deadline
/// for create and every wait step. A run that outlasts the budget is handed back, never
/// cancelled.
pub async fn research(
    client: &PerplexityClient,
    request: &ResearchRequest,
    budget: Duration,
    progress: Option<&dyn ProgressSink>,
    ids: &dyn RunIdSink,
) -> ResearchOutcome {
    let started = Instant::now();
    let deadline = started + budget;
    let body = request.create_body();
    if !request.wait {
        return match create_only(client, &body, deadline, ids).await {
            Ok(id) => ResearchOutcome::Running { id, progress: None },
            Err(e) => ResearchOutcome::Failed(WaitErrorKind::from(e).into()),
        };
    }
    match create_and_wait(client, &body, deadline, progress, ids).await {
        Ok((id, Waited::Terminal(run))) => ResearchOutcome::Finished { id, run },
        Ok((id, Waited::Running(p))) => ResearchOutcome::Running {
            id,
            progress: Some((p, started.elapsed().as_secs_f64())),
        },
        Err(e) => {
            let named: Vec<&str> = request.model.as_deref().into_iter().collect();
            ResearchOutcome::Failed(with_model_suggestions(client, &named, e, deadline).await)
        }
    }
}

/// A create the API refused (400) while a model was named: the model name is the
/// likely cause, so the error lists real catalogue names close to it (one anonymous
/// `GET /v1/models`, inside the same deadline; nothing is added when that fails).
pub(crate) async fn with_model_suggestions(
    client: &PerplexityClient,
    named: &[&str],
    mut error: WaitError,
    deadline: Instant,
) -> WaitError {
    let WaitErrorKind::Api(ApiError::Status { code: 400, message }) = &mut error.kind else {
        return error;
    };
    if named.is_empty() {
        return error;
    }
    let Ok(catalogue) = client.list_models(deadline).await else {
        return error;
    };
    // The first named model the catalogue does not know is the one to correct (an empty
    // catalogue knows none and suggests nothing).
    let Some(model) = named
        .iter()
        .find(|n| !catalogue.iter().any(|m| m.id == **n))
        .filter(|_| !catalogue.is_empty())
    else {
        return error;
    };
    let names = crate::perplexity::models::closest(&catalogue, model, 5).join(", ");
    let hint = format!(
        "'{model}' is not in Perplexity's model catalogue; models include: {names} (all: perplexity-agent models)"
    );
    *message = Some(match message.take() {
        Some(m) => format!("{m}. {hint}"),
        None => hint,
    });
    error
}

/// Checks (`wait_seconds` 0) or waits up to `min(wait_seconds, W)` for a run.
pub async fn collect(
    client: &PerplexityClient,
    id: &str,
    wait_seconds: u64,
    wait_budget: u64,
    progress: Option<&dyn ProgressSink>,
) -> ResearchOutcome {
    let budget = Duration::from_secs(wait_seconds.min(wait_budget));
    let now = Instant::now();
    let window = budget.max(PLAIN_CHECK_WINDOW.min(Duration::from_secs(wait_budget)));
    let plan = PollPlan {
        budget,
        request_deadline: now + window,
        origin: now,
    };
    match crate::perplexity::wait::collect(client, id, plan, progress).await {
        Ok(Waited::Terminal(run)) => ResearchOutcome::Finished {
            id: id.to_owned(),
            run,
        },
        // Reported as the clamped wait, not measured time: `after 0s` for a plain check.
        Ok(Waited::Running(p)) => ResearchOutcome::Running {
            id: id.to_owned(),
            progress: Some((p, budget.as_secs_f64())),
        },
        Err(e) => ResearchOutcome::Failed(e),
    }
}

/// Asks Perplexity to stop a run, retries bounded by the wait budget.
pub async fn cancel(
    client: &PerplexityClient,
    id: &str,
    wait_budget: u64,
) -> Result<CancelOutcome, ApiError> {
    let deadline = Instant::now() + Duration::from_secs(wait_budget);
    client.cancel_run(id, deadline).await
}

/// What collecting a run Perplexity does not have answers (`owners.rs` gives it for a
/// run the caller may not name).
pub fn render_missing(id: &str, missing: ApiError) -> ToolOutput {
    // A failure to reach a run has no receipt under any profile, so this reads the same
    // as Perplexity's own 404 for every caller.
    render_outcome(
        &ResearchOutcome::Failed(crate::perplexity::wait::WaitError::api(missing, Some(id))),
        Profile::Own,
    )
}

/// The MCP rendering of an outcome: answers spotlighted, failures as `isError`; what the
/// MCP App shows of it; and, where the profile resolves citations, a receipt.
pub fn render_outcome(outcome: &ResearchOutcome, profile: Profile) -> ToolOutput {
    let mut output = ToolOutput {
        view: Some(view_of(outcome)),
        ..texts_of(outcome, profile.listing())
    };
    if profile.resolves_citations() {
        receipt(&mut output, outcome);
    }
    output
}

/// The research tools' `structuredContent`: the run, its status, and what the answer's
/// markers point at (the answer itself stays in the spotlighted text, where a model reads
/// it as untrusted). A marker that points nowhere is also said in one line after the
/// answer. The App's view carries the same keys. A failure to reach a run has none.
fn receipt(output: &mut ToolOutput, outcome: &ResearchOutcome) {
    if matches!(outcome, ResearchOutcome::Failed(_)) {
        return;
    }
    // The run and its status as the App's view has them (a queued run says so).
    let view = output.view.as_ref();
    let field = |key| view.and_then(|v| v.get(key)).cloned();
    output.structured = Some(serde_json::json!({
        "response_id": field("response_id"),
        "status": field("status"),
    }));
    let ResearchOutcome::Finished { run, .. } = outcome else {
        return;
    };
    if !matches!(run.status(), Some("completed" | "incomplete")) {
        return;
    }
    let resolved = render::resolved(run);
    let (citations, unresolved) = resolved.as_json();
    output.mark("citations", &citations);
    output.mark("unresolved", &unresolved);
    if let Some(note) = resolved.note() {
        output.text.push_str("\n\n");
        output.text.push_str(&note);
    }
}

/// How often the App asks again about a run still going.
const POLL_AFTER_MS: u64 = 2_000;

/// The App's research view (`mcp::app`): the answer and its numbered sources as data,
/// bounded as the text is; the App renders each string as text, never as markup.
fn view_of(outcome: &ResearchOutcome) -> Value {
    let mut view = serde_json::json!({"view": "research"});
    view.put_some("response_id", outcome.run_id());
    match outcome {
        ResearchOutcome::Finished { run, .. } => {
            view["status"] = Value::from(run.status().unwrap_or("unknown"));
            view.put_some("answer", render::answer_text(run));
            view["sources"] = render::sources(run)
                .into_iter()
                .map(|s| serde_json::json!({"id": s.number, "title": s.title, "url": s.url, "date": null}))
                .collect();
            let finance: Vec<Value> = run
                .finance_results()
                .take(render::MAX_FINANCE_RESULTS)
                .cloned()
                .collect();
            if !finance.is_empty() {
                view["finance"] = Value::Array(finance);
            }
            view["security_flags"] = outcome.facts().security_flags.into();
            if run.status() == Some("failed") {
                view["error"] = Value::from(render::failed_text(run));
            }
        }
        ResearchOutcome::Running { progress, .. } => {
            view["status"] = Value::from(
                progress
                    .as_ref()
                    .and_then(|(p, _)| p.status.as_deref())
                    .filter(|s| *s == "queued")
                    .unwrap_or("in_progress"),
            );
            let mut shown =
                serde_json::json!({"summary": outcome.progress_text().unwrap_or_default()});
            if let Some((p, elapsed)) = progress {
                shown["searches"] = p.searches.into();
                shown["pages"] = p.pages.into();
                shown["elapsed_seconds"] = (elapsed.max(0.0).round() as u64).into();
            }
            view["progress"] = shown;
            view["poll_after_ms"] = POLL_AFTER_MS.into();
            view["sources"] = Value::Array(Vec::new());
            view["security_flags"] = Value::Array(Vec::new());
        }
        ResearchOutcome::Failed(e) => {
            view["status"] = Value::from("failed");
            view["error"] = Value::from(render::wait_error(e));
            view["sources"] = Value::Array(Vec::new());
            view["security_flags"] = Value::Array(Vec::new());
        }
    }
    view
}

fn texts_of(outcome: &ResearchOutcome, listing: Listing) -> ToolOutput {
    match outcome {
        ResearchOutcome::Finished { id, run } => match run.status() {
            Some("completed") => ToolOutput::ok(spotlight(&render::answer_body(run, listing))),
            Some("incomplete") => ToolOutput::ok(spotlight(&format!(
                "{}\n\n{}",
                render::INCOMPLETE_NOTE,
                render::answer_body(run, listing)
            ))),
            Some("failed") => ToolOutput::error(render::with_id(render::failed_text(run), id)),
            // A responses_create run with function tools, collected here by its id.
            Some(crate::perplexity::agent::REQUIRES_ACTION) => ToolOutput::ok(format!(
                "Run {id} is waiting for function outputs: read its function calls with responses_retrieve(response_id=\"{id}\")."
            )),
            _ => ToolOutput::error(render::with_id(render::CANCELLED_TEXT.to_owned(), id)),
        },
        ResearchOutcome::Running { id, .. } => ToolOutput::ok(render::still_running(
            id,
            &outcome.progress_text().unwrap_or_default(),
        )),
        ResearchOutcome::Failed(e) => ToolOutput {
            not_found: matches!(&e.kind, WaitErrorKind::Api(api) if api.http_status() == Some(404)),
            ..ToolOutput::error(render::wait_error(e))
        },
    }
}

/// The still-running text outside the reference profile (whose words are the peer's, byte
/// for byte): a call waits at most the wait budget, so it says that rather than promising
/// to block until the run ends, and its progress gives the run's age.
pub fn still_running_own_words(outcome: &ResearchOutcome, wait: u64) -> Option<String> {
    let ResearchOutcome::Running { id, .. } = outcome else {
        return None;
    };
    let progress = outcome.progress_with_age().unwrap_or_default();
    Some(format!(
        "Research run {id} is still running.\nProgress: {progress}\n\n\
         Collect it with perplexity_agent_result(response_id=\"{id}\"): a call waits up to wait_seconds, at most {wait} s here, so call again while it is still going. \
         If you no longer need it, stop it with perplexity_agent_cancel(response_id=\"{id}\")."
    ))
}

pub fn render_cancel(id: &str, outcome: Result<CancelOutcome, ApiError>) -> ToolOutput {
    match outcome {
        Ok(CancelOutcome::Requested) => ToolOutput::ok(format!(
            "Cancellation requested for {id}. The run stops shortly after; check with perplexity_agent_result if you need its terminal status."
        )),
        // Live, a finished run and a never-issued id answer the same 400: never claim
        // a cancellation happened. And never mention billing: nobody can know.
        Ok(CancelOutcome::NotRunning) => ToolOutput::ok(format!(
            "Run {id} is not running now \u{2014} Perplexity returns this same response whether the run already finished or the id never existed. If you expected it to still be active, verify with perplexity_agent_result before assuming this cancelled it."
        )),
        // 404 is the official "no such run": say so, and do not invite a retry.
        Ok(CancelOutcome::NoSuchRun) => ToolOutput {
            not_found: true,
            ..ToolOutput::error(render::no_such_run(id, "cancel"))
        },
        // The cancel itself failed (a 503 storm, a dropped connection): the run may well
        // still be running and billing, so say which and how to check or try again.
        Err(e) if !e.is_key_problem() => ToolOutput::error(format!(
            "{e} \u{2014} run {id} may still be running; collect it with perplexity_agent_result(response_id=\"{id}\") or stop it with perplexity_agent_cancel(response_id=\"{id}\")."
        )),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

/// A validated lifecycle call, ready for the guard and then [`run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleCall {
    Agent(ResearchRequest),
    Result { id: String, wait_seconds: u64 },
    Cancel { id: String },
}

/// Runs a validated call; returns the MCP rendering and what the audit wants to know.
pub async fn run(
    client: &PerplexityClient,
    wait: u64,
    call: &LifecycleCall,
    ctx: &CallContext,
    profile: Profile,
) -> (ToolOutput, CallFacts, Outcome) {
    let outcome = match call {
        LifecycleCall::Agent(request) => {
            research(
                client,
                request,
                Duration::from_secs(wait),
                ctx.progress(),
                &*ctx.run_ids,
            )
            .await
        }
        LifecycleCall::Result { id, wait_seconds } => {
            ctx.run_ids.run_id(id);
            let progress = if *wait_seconds > 0 {
                ctx.progress()
            } else {
                None
            };
            // Boxed: a collector follows the run's stream too, and inline its state would
            // size every first call's future as well.
            Box::pin(collect(client, id, *wait_seconds, wait, progress)).await
        }
        LifecycleCall::Cancel { id } => {
            let facts = CallFacts {
                run_id: Some(id.clone()),
                ..CallFacts::default()
            };
            let result = cancel(client, id, wait).await;
            let output = render_cancel(id, result.clone());
            let id = id.clone();
            return (output, facts, Outcome::Cancel { id, result });
        }
    };
    (
        render_outcome(&outcome, profile),
        outcome.facts(),
        Outcome::Research(outcome),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Args {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn agent_validation_order_and_texts() {
        let err = |v| {
            ResearchRequest::from_args(&args(v))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(json!({})),
            "'query' is required and must be a non-empty string."
        );
        assert_eq!(
            err(json!({"query": "  "})),
            "'query' is required and must be a non-empty string."
        );
        assert_eq!(
            err(json!({"query": null})),
            "'query' is required and must be a non-empty string."
        );
        assert_eq!(
            err(json!({"query": "q", "preset": ""})),
            "'preset' must be a non-empty string."
        );
        assert_eq!(
            err(json!({"query": "q", "preset": 5})),
            "'preset' must be a non-empty string."
        );
        assert_eq!(
            err(json!({"query": "q", "recency": "Week"})),
            "'recency' must be one of: day, hour, month, week, year."
        );
        assert_eq!(
            err(json!({"query": "q", "recency": " week"})),
            "'recency' must be one of: day, hour, month, week, year."
        );
        assert_eq!(
            err(json!({"query": "q", "domains": "a.org"})),
            "'domains' must be an array of strings."
        );
        assert_eq!(
            err(json!({"query": "q", "domains": ["a", 1]})),
            "'domains' must be an array of strings."
        );
        // Bounds counted in characters (é is two bytes), checked after trimming.
        let longest = "é".repeat(MAX_QUERY_CHARS);
        assert!(
            ResearchRequest::from_args(&args(json!({"query": format!(" {longest} ")}))).is_ok()
        );
        assert_eq!(
            err(json!({"query": format!("{longest}x")})),
            "'query' must be at most 16384 characters."
        );
        assert_eq!(
            err(json!({"query": "q", "preset": "p".repeat(65)})),
            "'preset' must be at most 64 characters."
        );
        assert_eq!(
            err(json!({"query": "q", "domains": ["a.org", "d".repeat(254)]})),
            "Each entry of 'domains' must be at most 253 characters."
        );
        assert!(
            ResearchRequest::from_args(&args(json!({"query": "q", "domains": ["d".repeat(253)]})))
                .is_ok()
        );
        let many: Vec<&str> = std::iter::repeat_n("", 21).collect();
        assert_eq!(
            err(json!({"query": "q", "domains": many})),
            "'domains' accepts at most 20 entries."
        );
        assert_eq!(
            err(json!({"query": "q", "wait": "yes"})),
            "'wait' must be a boolean."
        );
        assert_eq!(
            err(json!({"query": "q", "preset": "", "recency": "x"})),
            "'preset' must be a non-empty string."
        );

        let ok = ResearchRequest::from_args(&args(json!({
            "query": "  q  ", "preset": null, "recency": null, "domains": [" a.org ", "  ", ""], "wait": null
        })))
        .unwrap();
        assert_eq!(ok.query, "q");
        assert_eq!(ok.preset, "medium");
        assert_eq!(ok.domains, vec![" a.org ".to_owned()]);
        assert!(ok.wait);
        let custom =
            ResearchRequest::from_args(&args(json!({"query": "q", "preset": " wide-research "})))
                .unwrap();
        assert_eq!(custom.preset, "wide-research");
    }

    #[test]
    fn result_validation() {
        let id = |v| {
            response_id_from(&Read::new(&args(v), &CANCEL), "perplexity_agent")
                .map_err(|e| e.to_string())
        };
        let required = "'response_id' is required and must be a non-empty string.";
        assert_eq!(id(json!({})).unwrap_err(), required);
        assert_eq!(id(json!({"response_id": 5})).unwrap_err(), required);
        assert_eq!(
            id(json!({"response_id": "../etc/passwd"})).unwrap_err(),
            "Malformed response_id. Expected the identifier returned by perplexity_agent."
        );
        assert_eq!(id(json!({"response_id": " resp_1 "})).unwrap(), "resp_1");
        let ws = |v| wait_seconds_from(&Read::new(&args(v), &RESULT)).map_err(|e| e.to_string());
        assert_eq!(ws(json!({})).unwrap(), 0);
        assert_eq!(ws(json!({"wait_seconds": null})).unwrap(), 0);
        assert_eq!(ws(json!({"wait_seconds": 99999})).unwrap(), 99999);
        for bad in [json!(true), json!(5.0), json!(-1), json!("5"), json!(1.5)] {
            assert_eq!(
                ws(json!({"wait_seconds": bad})).unwrap_err(),
                "'wait_seconds' must be a non-negative integer."
            );
        }
    }

    #[test]
    fn cancel_texts_never_mention_billing() {
        for outcome in [Ok(CancelOutcome::Requested), Ok(CancelOutcome::NotRunning)] {
            let text = render_cancel("resp_1", outcome).text.to_lowercase();
            for word in ["bill", "cost", "charge", "refund", "money", "save"] {
                assert!(!text.contains(word), "{word} in {text}");
            }
        }
    }
}
