//! The pipeline every tool call takes, whichever front end asked: [`Tools::accept`]
//! (validation, a slot, the rate limit, the opening audit record — synchronous, so
//! refusals keep request order), then [`Tools::complete`] (the handler, panic containment,
//! the output budget, the closing audit record), around what the call itself does
//! (`calls.rs`), and what comes back ([`Done`]).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::Value;

use super::args::{self, Args};
use super::calls::{CallContext, Job, Outcome, RunIds};
use super::served::Cached;
use super::{Call, Tools, registry, research};
use crate::cache::{Flight, Hit, Lead};
use crate::call::{ArgError, CallFacts, Refusal, Slot, Slots, ToolOutput};
use crate::drain::CREATE_ANSWER_GRACE;
use crate::guard::{Charge, Pass};
use crate::perplexity::meter::{Meter, Metered};
use crate::spend::{Billing, Cost};

/// Text shown when a handler fails in a way we did not foresee. The details go to
/// stderr (tool name and kind only: a message could carry secrets).
pub const UNEXPECTED_FAILURE: &str = "The tool failed unexpectedly. Check the server's stderr log.";

impl Tools {
    /// Every call takes three steps: [`Tools::validate`] and [`Tools::admit`] (both
    /// synchronous, so a front end can run them in its read loop), then [`Tools::run`].
    ///
    /// Step 1, synchronous and cheap (it runs in the read loop, so refusals come back
    /// in request order): unknown arguments are rejected first — before any other
    /// validation and before the key is read — driven by the tool's schema; then the
    /// per-tool rules. A rejection is audited and costs no rate-limit token.
    fn validate(&self, who: Charge<'_>, name: &str, args: &Args) -> Result<Validated, Refusal> {
        let params = Value::Object(args.clone());
        // A downstream tool (`mcp__…`, never one of ours): its own schema decides.
        let downstream = self.gateway.as_ref().filter(|g| g.exposes(name));
        let validated = match downstream {
            Some(gateway) => gateway
                .check_arguments(name, args)
                .map_err(ArgError::from)
                .map(|()| Call::Downstream {
                    name: name.to_owned(),
                    arguments: args.clone(),
                }),
            None => {
                let Some(spec) = registry::find(name) else {
                    return Err(Refusal::Invalid(ArgError::words(format!(
                        "Unknown tool: {name}"
                    ))));
                };
                args::reject_unknown(args, &spec.accepted(self.profile))
                    .map_err(ArgError::from)
                    .and_then(|()| fresh_is_a_boolean(args))
                    .and_then(|()| (spec.validate)(self, args))
            }
        };
        match validated {
            Ok(call) => Ok(Validated {
                call,
                tool: name.to_owned(),
                params,
            }),
            Err(refused) => {
                let output = ToolOutput::error(refused.to_string());
                self.guard.rejected(who, name, &params, &output);
                Err(Refusal::Invalid(refused))
            }
        }
    }

    /// Step 2: the rate limit and the opening audit record. It waits only with a shared
    /// state backend (one round trip); the local buckets answer without waiting.
    async fn admit(
        &self,
        who: Charge<'_>,
        validated: Validated,
        slot: Option<Slot>,
    ) -> Result<Admitted, Refusal> {
        // A call that fetches n pages costs n tokens: a batch is not a way around the limit.
        let cost = match &validated.call {
            Call::Fetch(call) => call.urls.len() as u32,
            Call::Deep(call) => call.cost(),
            _ => 1,
        };
        let pass = self
            .guard
            .admit(who, &validated.tool, &validated.params, cost)
            .await?;
        // The research cache's key: the admitted caller's, for a tool whose answers are
        // kept (a caller refused the tool never gets this far, so never gets a hit).
        let cache_key = match (registry::find(&validated.tool), &validated.params) {
            (Some(spec), Value::Object(args)) if spec.cached => {
                self.cache.key(pass.caller(), &validated.tool, args)
            }
            _ => None,
        };
        Ok(Admitted(Box::new(AdmittedCall {
            call: validated.call,
            tool: validated.tool,
            pass,
            cache_key,
            _slot: slot,
        })))
    }

    /// The one way in, awaited where refusals must keep request order (a read loop):
    /// validation, a call slot of `slots` (the MCP transports' cap per connection; a
    /// busy refusal costs no rate-limit token), then the rate limit and the opening
    /// audit record. Without a shared state backend nothing in it waits.
    pub async fn accept(
        &self,
        who: Charge<'_>,
        name: &str,
        args: &Args,
        slots: Option<&Slots>,
    ) -> Result<Admitted, Refusal> {
        let validated = self.validate(who, name, args)?;
        let slot = slots.map(Slots::take).transpose().inspect_err(|_| {
            crate::telemetry::refused(crate::telemetry::Refusal::Busy);
        })?;
        self.admit(who, validated, slot).await
    }

    /// Step 3: the handler, then the output budget and the closing audit record. A
    /// panic in a handler becomes [`UNEXPECTED_FAILURE`], never a dead server.
    /// Not an `async fn`, which would hold `admitted` beside `complete`'s own copy.
    pub fn run<'a>(
        &'a self,
        admitted: Admitted,
        ctx: &'a CallContext,
    ) -> impl Future<Output = Option<ToolOutput>> + 'a {
        self.complete(admitted, ctx)
            .map(|done| done.map(|done| done.output))
    }

    /// [`Tools::run`], keeping the typed outcome for front ends that render it for
    /// people. `None` when the caller abandoned the call.
    pub async fn complete(&self, admitted: Admitted, ctx: &CallContext) -> Option<Done> {
        // Read in place, not moved out: the call's parts stay in their box instead of
        // adding their size to this future for as long as the call waits. The slot is
        // held until the call has finished (it goes with the box, at the end).
        let admitted = admitted.0;
        let (call, tool) = (&admitted.call, &admitted.tool);
        let wait = ctx.wait.unwrap_or(self.wait).as_secs();
        // The awaits at either end of a call (owners, budget hold, settlement, the
        // output budget) are boxed: inline, the largest would size this future for the
        // whole call, and 1,000 waiting calls each pay for it while they wait.
        let caller = admitted.pass.caller().clone();
        // Isolation, before any upstream request: a run the caller did not start is
        // answered as one that never existed (owners.rs).
        let hidden = match call.named_run() {
            Some(id) => !Box::pin(self.run_owners.visible(id, &caller)).await,
            None => false,
        };
        let billing = Billing {
            caller: &caller,
            own: admitted.pass.budget(),
            front_end: admitted.pass.front_end(),
            tool,
        };
        // The research cache, before budgets: a hit costs nothing, so it is served even
        // when no budget has room; an identical call in flight is waited for instead of
        // paid for twice, and one that asked for its run back at once (`wait: false`) is
        // handed that run (it never leads: it would hand its followers no answer), as is
        // a waiting one whose leader was handed back at its wait budget.
        let mut lead = None;
        if let Some(key) = admitted.cache_key.as_ref().filter(|_| !hidden) {
            let scope = key.scope;
            let mut hit = Box::pin(self.cache.get(key)).await;
            let mut handed_on = None;
            if hit.is_none() && admitted.waits() {
                match self.cache.fly(key) {
                    Flight::Lead(leading) => lead = Some(leading),
                    Flight::Follow(mut follow) => {
                        let landed = tokio::select! {
                            landed = follow.answer() => landed,
                            () = ctx.cancel.cancelled() => {
                                let task = ctx.task_id.get().map(String::as_str);
                                self.guard.abandoned(admitted.pass, &[], task);
                                return None;
                            }
                        };
                        hit = landed.map(|answer| Hit::now((*answer).clone()));
                        // Handed back at its wait budget, the run still going: this call is
                        // handed that run, as one that does not wait is, not a second one.
                        handed_on = follow.run_goes_on().then_some(follow);
                    }
                }
            }
            let follow = match hit {
                None if !admitted.waits() => self.cache.follow(key),
                None => handed_on,
                _ => None,
            };
            // `hit` moves into the box, and what comes back is a box: no wait of this call
            // holds either.
            match Box::pin(self.consult_cache(&billing, hit, follow, scope, wait, ctx)).await {
                Cached::Abandoned => {
                    let task = ctx.task_id.get().map(String::as_str);
                    self.guard.abandoned(admitted.pass, &[], task);
                    return None;
                }
                Cached::Answered(done) => {
                    admitted
                        .pass
                        .finish(&done.full, &done.facts, done.truncated);
                    return Some(Done {
                        output: done.shown,
                        full: done.full,
                        outcome: done.outcome,
                        panicked: false,
                    });
                }
                Cached::Missed => self.cache.miss(tool),
            }
        }
        // Whom the runs this call creates are bound to; a leader's are also published to
        // its flight, so an identical call that asked for its run back at once gets it.
        let owners = match &lead {
            Some(leading) => {
                let publisher = leading.publisher();
                Arc::new(self.run_owners.announcing(move |id| publisher.publish(id)))
            }
            None => self.run_owners.clone(),
        };
        let _ = ctx.run_ids.owner.set((caller.clone(), owners));
        // Budgets, before any upstream request: a call that would start billable work
        // holds its estimate (spend/mod.rs), or is refused here.
        let hold = match call.budget_estimate().filter(|_| !hidden) {
            None => None,
            Some(estimate) => match Box::pin(self.spend.reserve(&billing, estimate)).await {
                Ok(hold) => Some(hold),
                Err(refusal) => return Some(over_budget(admitted.pass, refusal, ctx)),
            },
        };
        let per_run = call.per_run_estimate();
        let meter = Arc::new(Meter::default());
        let run = AssertUnwindSafe(async {
            // Debug builds only: lets the black-box tests prove the containment below for
            // every front end (a release binary has no such switch).
            #[cfg(debug_assertions)]
            if std::env::var_os("PERPLEXITY_AGENT_TEST_PANIC").is_some_and(|t| t == tool.as_str()) {
                panic!("test panic in {tool}");
            }
            if hidden {
                return (call.not_found(), Outcome::Output);
            }
            let job = Job {
                tools: self,
                caller: &caller,
                front_end: admitted.pass.front_end(),
                wait,
                ctx,
            };
            call.execute(job).await
        })
        .catch_unwind();
        // Every upstream request of the call carries its trace, and every log line the
        // call writes names the trace id.
        let span = tracing::info_span!("call", trace_id = %admitted.pass.trace_id());
        // And everything it is billed for is metered for the ledger.
        let run = tracing::Instrument::instrument(
            crate::perplexity::meter::scope(
                meter.clone(),
                crate::perplexity::trace::scope(admitted.pass.traceparent(), run),
            ),
            span,
        );
        // A leader whose caller went away while identical calls wait for its run only
        // detaches: the run goes on for them and this call still settles it (billed once,
        // to the call that started it), unless they all go away too.
        let ended = {
            tokio::pin!(run);
            let finished = tokio::select! {
                ran = &mut run => Some(ran),
                () = ctx.cancel.cancelled() => None,
            };
            match finished {
                Some(ran) => Ended::Ran(ran),
                // With `finished` already matched away; see `after_cancel`.
                None => {
                    let followed = lead.as_ref().filter(|l| l.followed());
                    after_cancel(run.as_mut(), followed, &ctx.run_ids).await
                }
            }
        };
        let (ran, detached) = match ended {
            Ended::Ran(ran) => (ran, false),
            Ended::ForOthers(ran) => (*ran, true),
            Ended::Abandoned => {
                let task = ctx.task_id.get().map(String::as_str);
                let metered = meter.take();
                let running = unsettled(&ctx.run_ids.snapshot(), &metered);
                Box::pin(self.spend.settle(
                    &billing,
                    hold,
                    metered,
                    per_run,
                    task,
                    running.as_deref(),
                ))
                .await;
                self.guard
                    .abandoned(admitted.pass, &ctx.run_ids.snapshot(), task);
                return None;
            }
        };
        let mut panicked = false;
        let ((mut output, mut facts), typed) = match ran {
            Ok(done) => done,
            Err(_) => {
                tracing::error!(tool = %tool, kind = "panic", "tool failed unexpectedly");
                panicked = true;
                (
                    (ToolOutput::error(UNEXPECTED_FAILURE), CallFacts::default()),
                    Outcome::Output,
                )
            }
        };
        facts.task_id = ctx.task_id.get().cloned();
        // Only a complete answer is kept, as the tool gave it (before the cost line and
        // any budget warning, which are this call's).
        let kept = lead
            .as_ref()
            .filter(|_| !panicked && complete(&output, &typed))
            .map(|_| output.clone());
        let metered = meter.take();
        let running = unsettled(&ctx.run_ids.snapshot(), &metered);
        let settled = Box::pin(self.spend.settle(
            &billing,
            hold,
            metered,
            per_run,
            facts.task_id.as_deref(),
            running.as_deref(),
        ))
        .await;
        if let (Some(lead), Some(key)) = (lead, admitted.cache_key.as_ref()) {
            let answer = kept.map(|kept| {
                crate::cache::answer(&kept, run_of(&typed), settled.cost.map_or(0, |c| c.total))
            });
            match (answer, &typed) {
                (Some(answer), _) => {
                    Box::pin(self.cache.put(key, &answer)).await;
                    lead.land(Some(answer));
                }
                // Handed back at the wait budget: the run goes on, for the followers too.
                (None, Outcome::Research(research::ResearchOutcome::Running { id, .. })) => {
                    lead.hand_on(id);
                }
                (None, _) => lead.land(None),
            }
        }
        if detached {
            // Its caller went away: no reply, and the closing record says it was abandoned.
            let task = ctx.task_id.get().map(String::as_str);
            self.guard
                .abandoned(admitted.pass, &ctx.run_ids.snapshot(), task);
            return None;
        }
        if self.profile().tells_cost() {
            tell_cost(&mut output, settled.cost, &typed);
        }
        if let Some(warning) = settled.warning.filter(|_| !output.is_error) {
            output.text.push_str("\n\n");
            output.text.push_str(&warning);
        }
        let mut shown = output.clone();
        let truncated = Box::pin(self.guard.budget(&mut shown, &caller)).await;
        admitted.pass.finish(&output, &facts, truncated);
        Some(Done {
            output: shown,
            full: output,
            outcome: typed,
            panicked,
        })
    }
}

/// What a call whose caller went away mid-run still waits for: while `followed`, the run
/// itself, for the identical calls that wait for it, until they are all gone too; then,
/// for a create still on the wire, its answer (the run's id, to log), at most
/// [`CREATE_ANSWER_GRACE`]. Built here and boxed, like the other one-off waits of
/// [`Tools::complete`], so no part of it sizes the waiting call; the run's result is
/// boxed for the same reason (a flag set in the waiting frame instead would size every
/// waiting call).
fn after_cancel<'a, F: Future>(
    mut run: std::pin::Pin<&'a mut F>,
    followed: Option<&'a Lead>,
    ids: &'a RunIds,
) -> std::pin::Pin<Box<impl Future<Output = Ended<F::Output>> + 'a>> {
    Box::pin(async move {
        if let Some(leading) = followed {
            tokio::select! {
                ran = run.as_mut() => return Ended::ForOthers(Box::new(ran)),
                () = leading.deserted() => {}
            }
        }
        if ids.awaiting_id() {
            let answered = async {
                tokio::select! {
                    _ = run.as_mut() => {}
                    () = ids.id_known() => {}
                }
            };
            let _ = tokio::time::timeout(CREATE_ANSWER_GRACE, answered).await;
        }
        Ended::Abandoned
    })
}

/// How a call's run ended for the call.
enum Ended<R> {
    Ran(R),
    /// After its caller went away, for the identical calls still waiting for it.
    ForOthers(Box<R>),
    /// Its caller went away, and nobody else waits for the run (any more).
    Abandoned,
}

/// What a billable call cost, in its `structuredContent` (`cost`) and one line of text
/// after the result (after a spotlighted answer's closing delimiter, as a budget warning
/// is). A cancelled run's cost is not known yet when the call ends, and says so.
fn tell_cost(output: &mut ToolOutput, cost: Option<Cost>, outcome: &Outcome) {
    let cancelled = matches!(outcome, Outcome::Research(research::ResearchOutcome::Finished { run, .. }) if run.status() == Some("cancelled"));
    let (value, said) = match cost {
        _ if cancelled && cost.is_none_or(|c| c.estimated) => (
            serde_json::json!({"total": null, "currency": "USD", "estimated": false, "known": false}),
            "not known yet (a cancelled run is billed for what it did).".to_owned(),
        ),
        Some(cost) => (cost.as_json(), cost.said()),
        None => return,
    };
    output.mark("cost", &value);
    // An error's text stays the error: its cost is in the structured result and the
    // ledger.
    if !output.is_error {
        output.push_cost_line(&said);
    }
}

/// An answer worth serving again: complete, not an error, not a hand-back.
fn complete(output: &ToolOutput, outcome: &Outcome) -> bool {
    use research::ResearchOutcome;
    !output.is_error
        && match outcome {
            Outcome::Research(ResearchOutcome::Finished { run, .. }) => {
                run.status() == Some("completed")
            }
            Outcome::Search(Ok(_)) => true,
            Outcome::Report { report, .. } => report.is_some(),
            _ => false,
        }
}

/// The run behind a research outcome, kept with its answer so a hit renders as the run
/// did for the CLI and the TUI.
fn run_of(outcome: &Outcome) -> Option<(&str, &Value)> {
    match outcome {
        Outcome::Research(research::ResearchOutcome::Finished { id, run }) => {
            Some((id.as_str(), run.raw()))
        }
        _ => None,
    }
}

/// `fresh` (where a profile takes it) is a boolean.
fn fresh_is_a_boolean(args: &Args) -> Result<(), ArgError> {
    match args::optional(args, "fresh") {
        Some(v) if !v.is_boolean() => Err(ArgError::of("fresh", "must be a boolean.")),
        _ => Ok(()),
    }
}

/// A run the call started and did not see end: it keeps the call's budget hold.
fn unsettled(run_ids: &[String], metered: &[Metered]) -> Option<String> {
    run_ids
        .iter()
        .find(|id| !metered.iter().any(|m| &m.key == *id))
        .cloned()
}

/// The call a budget refused after admission: audited as refused (`budget`), nothing sent.
fn over_budget(pass: Pass, text: String, ctx: &CallContext) -> Done {
    let output = ToolOutput::error(text);
    let facts = CallFacts {
        refused: Some("budget"),
        task_id: ctx.task_id.get().cloned(),
        ..CallFacts::default()
    };
    pass.finish(&output, &facts, false);
    Done {
        full: output.clone(),
        output,
        outcome: Outcome::OverBudget,
        panicked: false,
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

/// A call whose arguments passed validation.
pub struct Validated {
    call: Call,
    tool: String,
    params: Value,
}

/// A call the guard admitted: it holds its rate-limit token, audit pair and call slot.
/// Boxed: it is handed through a transport's future, the runner's and the pipeline's,
/// and each would otherwise keep its own copy for as long as the call waits.
pub struct Admitted(Box<AdmittedCall>);

struct AdmittedCall {
    call: Call,
    tool: String,
    pass: Pass,
    /// Where the research cache keeps this call's answer (`None`: not cached).
    cache_key: Option<crate::cache::Key>,
    _slot: Option<Slot>,
}

impl Admitted {
    /// False when the caller asked for its run back at once (`wait: false`): the
    /// hand-back is then the whole answer, even for a task.
    pub fn waits(&self) -> bool {
        self.0.waits()
    }
}

impl AdmittedCall {
    fn waits(&self) -> bool {
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
