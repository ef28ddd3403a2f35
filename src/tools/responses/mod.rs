//! `responses_create` and `responses_retrieve`: the full Agent API surface, with the
//! lifecycle tools' wait/resume semantics, function calls handed back to the caller, and
//! finished responses kept as snapshots in the local store.
//!
//! - Function tools are client-driven: `function_call` items come back with their
//!   `call_id`; the caller runs them and continues with `function_call_output` items and
//!   `previous_response_id`. Nothing here executes anything a caller or model names.
//! - The response id is the capability to read a snapshot (128+ random bits upstream);
//!   no tool lists snapshots, and ids are checked against the id pattern before use.
//! - The store is optional at run time: when it cannot be opened the call still answers
//!   (from upstream) and says the snapshot was not kept.
//!
//! Touches: the network through `crate::perplexity`; the store through `crate::store`.

mod continuation;
pub mod functions;
mod render;
pub mod request;
pub mod snapshots;

use std::time::Duration;

use tokio::time::Instant;

use super::args::{Arg, Args, Read, input_schema};
use super::research::{ResearchOutcome, collect, response_id, response_id_from, wait_seconds_from};
use super::{CallContext, schema_object, starts_a_run};
use crate::call::ToolOutput;
use crate::call::{ArgError, CallFacts};
use crate::perplexity::PerplexityClient;
use crate::perplexity::agent::RunSnapshot;
use crate::perplexity::wait::{RunIdSink, WaitErrorKind, Waited, create_and_wait, create_only};
pub use request::{CREATE, CreateCall};
use snapshots::Snapshots;

pub const RETRIEVE: [Arg; 2] = [
    response_id("The response_id returned by responses_create."),
    super::research::wait_seconds(
        "Seconds to wait for a run that is still going; 0 checks once. A larger value is clamped to this server's wait budget ({wait}s here).",
    ),
];

/// What became of the local snapshot, for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    /// Saved now.
    Saved,
    /// Read from the local store.
    Local,
    /// `store: false`: neither Perplexity nor we keep it.
    Off,
    /// Not finished yet: saved once it is.
    Pending,
    /// The store failed; the message says why and what to do.
    Unavailable(String),
}

impl Snapshot {
    fn label(&self) -> &'static str {
        match self {
            Snapshot::Saved => "saved",
            Snapshot::Local => "local",
            Snapshot::Off => "off",
            Snapshot::Pending => "pending",
            Snapshot::Unavailable(_) => "unavailable",
        }
    }
}

pub fn create_definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::Tool;
    Tool::new(
        name,
        "The full Perplexity Agent API: input as text or messages (with images and function results), a model, a fallback chain of models or a preset, instructions, reasoning effort, a JSON-schema response format, tools (web_search with filters, fetch_url, finance_search, people_search, your own functions), step and token limits, and continuation with previous_response_id. Function calls come back to you with their call_id: run them and continue with function_call_output items and previous_response_id. Waits for the answer like perplexity_agent; a longer run hands back a response_id to collect with responses_retrieve.",
        input_schema(&CREATE, 0),
    )
    .with_title("Perplexity Agent API (full surface)")
    .with_raw_output_schema(schema_object(render::output_schema()))
    .with_annotations(starts_a_run())
}

pub fn retrieve_definition(name: &'static str, wait: u64) -> rmcp::model::Tool {
    use rmcp::model::{Tool, ToolAnnotations};
    Tool::new(
        name,
        "Read a response by its response_id: the snapshot kept locally after responses_create, else Perplexity's copy (kept locally once finished). Pass wait_seconds to wait for a run that is still going.",
        input_schema(&RETRIEVE, wait),
    )
    .with_title("Read a Perplexity Response")
    .with_raw_output_schema(schema_object(render::output_schema()))
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(true))
}

/// A validated `responses_retrieve` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrieveCall {
    pub id: String,
    pub wait_seconds: u64,
}

pub fn validate_retrieve(args: &Args) -> Result<RetrieveCall, ArgError> {
    let read = Read::new(args, &RETRIEVE);
    Ok(RetrieveCall {
        id: response_id_from(&read, "responses_create")?,
        wait_seconds: wait_seconds_from(&read)?,
    })
}

/// Creates the run and waits for it within the budget (unless `wait` is false).
pub async fn create(
    client: &PerplexityClient,
    store: &Snapshots,
    wait: u64,
    call: &CreateCall,
    ctx: &CallContext,
) -> Rendered {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(wait);
    let mut body = call.body.clone();
    continuation::echo_call_details(client, store, &mut body, deadline).await;
    let outcome = if call.wait {
        match create_and_wait(client, &body, deadline, ctx.progress(), &*ctx.run_ids).await {
            Ok((id, Waited::Terminal(run))) => ResearchOutcome::Finished { id, run },
            Ok((id, Waited::Running(p))) => ResearchOutcome::Running {
                id,
                progress: Some((p, started.elapsed().as_secs_f64())),
            },
            Err(e) => ResearchOutcome::Failed(
                super::research::with_model_suggestions(client, &named_models(&body), e, deadline)
                    .await,
            ),
        }
    } else {
        match create_only(client, &body, deadline, &*ctx.run_ids).await {
            Ok(id) => ResearchOutcome::Running { id, progress: None },
            Err(e) => ResearchOutcome::Failed(WaitErrorKind::from(e).into()),
        }
    };
    let snapshot = match (&outcome, call.store) {
        (_, false) => Snapshot::Off,
        (ResearchOutcome::Finished { id, run }, true) => save(store, id, run).await,
        _ => Snapshot::Pending,
    };
    let shape = render::Shape {
        expects_json: call.expects_json,
        stored_upstream: call.store,
    };
    typed(render::outcome(&outcome, &snapshot, shape), outcome)
}

/// A responses tool's result, its audit facts and the run's typed outcome (`Output` when
/// no run outcome stands behind it).
pub type Rendered = (ToolOutput, CallFacts, crate::tools::Outcome);

/// A rendering with the outcome it was rendered from.
pub(crate) fn typed(
    (output, facts): (ToolOutput, CallFacts),
    outcome: ResearchOutcome,
) -> Rendered {
    (output, facts, crate::tools::Outcome::Research(outcome))
}

/// `model` and the `models` chain of a create body, for catalogue suggestions.
fn named_models(body: &crate::perplexity::agent::FullRun) -> Vec<&str> {
    let chain = body.0.get("models").and_then(serde_json::Value::as_array);
    body.0
        .get("model")
        .into_iter()
        .chain(chain.into_iter().flatten())
        .filter_map(serde_json::Value::as_str)
        .collect()
}

/// What reading a response Perplexity does not have answers (`owners.rs` gives it for
/// a response the caller may not name).
pub fn render_missing(id: &str, missing: crate::perplexity::error::ApiError) -> ToolOutput {
    let shape = render::Shape {
        expects_json: false,
        stored_upstream: true,
    };
    let outcome =
        ResearchOutcome::Failed(crate::perplexity::wait::WaitError::api(missing, Some(id)));
    render::outcome(&outcome, &Snapshot::Pending, shape).0
}

/// The local snapshot, else Perplexity's copy (saved locally once settled).
pub async fn retrieve(
    client: &PerplexityClient,
    store: &Snapshots,
    wait: u64,
    call: &RetrieveCall,
    ctx: &CallContext,
) -> Rendered {
    let shape = render::Shape {
        expects_json: false,
        stored_upstream: true,
    };
    let id = call.id.clone();
    let local = store.of_response(&id).await;
    let unavailable = match local {
        Ok(Some(body)) => {
            let outcome = ResearchOutcome::Finished {
                id: call.id.clone(),
                run: RunSnapshot::new(body),
            };
            return typed(render::outcome(&outcome, &Snapshot::Local, shape), outcome);
        }
        Ok(None) => None,
        Err(e) => Some(Snapshot::Unavailable(e)),
    };
    ctx.run_ids.run_id(&call.id);
    let progress = (call.wait_seconds > 0).then(|| ctx.progress()).flatten();
    let outcome = collect(client, &call.id, call.wait_seconds, wait, progress).await;
    let snapshot = match (&outcome, unavailable) {
        (_, Some(unavailable)) => unavailable,
        (ResearchOutcome::Finished { id, run }, None) => save(store, id, run).await,
        _ => Snapshot::Pending,
    };
    typed(render::outcome(&outcome, &snapshot, shape), outcome)
}

/// Keeps a settled response (in the store, or shared by the replicas).
pub(crate) async fn save(store: &Snapshots, id: &str, run: &RunSnapshot) -> Snapshot {
    match store.put(id, run.raw()).await {
        Ok(()) => Snapshot::Saved,
        Err(e) => {
            tracing::warn!(error = %e, "response snapshot not saved");
            Snapshot::Unavailable(e)
        }
    }
}
