//! A call answered from the research cache (`cache/`): the answer as its run gave it,
//! marked as a hit, at no cost — recorded in the ledger as a hit with what it saved and
//! audited with the cache's scope. Under the reference peer's drop-in the reply is the
//! answer exactly as it was first given. A call that asked for its run back at once while
//! an identical run was in flight is handed that run, as if it had started it; so is a
//! waiting call whose leader was handed back at its wait budget.

use serde_json::json;

use super::calls::{CallContext, Outcome};
use super::{Tools, research};
use crate::cache::{Follow, Hit};
use crate::call::{CallFacts, ToolOutput};
use crate::drain::CREATE_ANSWER_GRACE;
use crate::perplexity::agent::RunSnapshot;
use crate::perplexity::wait::RunIdSink;
use crate::spend::Billing;

/// What the research cache made of a call before it runs.
pub(super) enum Cached {
    /// Served (a hit, the answer of the run it waited for) or handed a run in flight.
    /// Boxed: the frame that awaits this holds it no larger than a pointer.
    Answered(Box<Answered>),
    /// Nothing for it: the call runs.
    Missed,
    /// Its caller went away while it waited for a run's id.
    Abandoned,
}

/// A call the cache answered: its result within the output budget (`shown`) and whole.
pub(super) struct Answered {
    pub shown: ToolOutput,
    pub full: ToolOutput,
    pub truncated: bool,
    pub facts: CallFacts,
    pub outcome: Outcome,
}

impl Tools {
    /// A call's `hit`, if any, served; else, for a call that asked for its run back at
    /// once (or whose leader handed its run on), the run of the identical call it
    /// `follow`s, once Perplexity names it (within the grace a create's answer gets, else
    /// the call starts its own).
    pub(super) async fn consult_cache(
        &self,
        billing: &Billing<'_>,
        hit: Option<Hit>,
        follow: Option<Follow>,
        scope: &'static str,
        wait: u64,
        ctx: &CallContext,
    ) -> Cached {
        if let Some(hit) = hit {
            let served = self.served(billing, hit, scope, ctx).await;
            return self.answered(billing, served).await;
        }
        let Some(follow) = follow else {
            return Cached::Missed;
        };
        let named = tokio::select! {
            named = follow.run_id(CREATE_ANSWER_GRACE) => named,
            () = ctx.cancel.cancelled() => return Cached::Abandoned,
        };
        // Shared before the caller hears of it: it may then collect and stop the run.
        match named {
            Some(id) if self.run_owners.share(&id, billing.caller).await => {
                let handed = self.handed(billing, id, scope, wait, ctx).await;
                self.answered(billing, handed).await
            }
            _ => Cached::Missed,
        }
    }

    /// An answer cut to the caller's output budget, as every result is.
    async fn answered(
        &self,
        billing: &Billing<'_>,
        (full, facts, outcome): (ToolOutput, CallFacts, Outcome),
    ) -> Cached {
        let mut shown = full.clone();
        let truncated = self.guard.budget(&mut shown, billing.caller).await;
        Cached::Answered(Box::new(Answered {
            shown,
            full,
            truncated,
            facts,
            outcome,
        }))
    }

    async fn served(
        &self,
        billing: &Billing<'_>,
        hit: Hit,
        scope: &'static str,
        ctx: &CallContext,
    ) -> (ToolOutput, CallFacts, Outcome) {
        let task_id = ctx.task_id.get().cloned();
        let saved = hit.saved();
        self.spend
            .record_hit(billing, saved, task_id.as_deref())
            .await;
        self.cache.hit(billing.tool, saved);
        let mut output = hit.output();
        let run = hit.run();
        if self.profile.tells_cost() {
            output.mark("cache", &hit.marker());
            output.mark(
                "cost",
                &json!({"total": 0, "currency": "USD", "estimated": false}),
            );
            output.push_cost_line(&said(&hit, saved));
        }
        // Under `team` the answer may be another caller's, and its run id theirs: a
        // capability to read or stop that run, which the answer does not need. A caller
        // the run is not visible to gets the answer without it (the audit keeps it).
        let named = run.as_ref().map(|(id, _)| id.clone()).or_else(|| {
            let structured = output.structured.as_ref()?;
            structured.get("response_id")?.as_str().map(str::to_owned)
        });
        if let Some(id) = named.as_deref()
            && scope == "team"
            && !self.run_owners.visible(id, billing.caller).await
        {
            for shown in [output.structured.as_mut(), output.view.as_mut()] {
                if let Some(fields) = shown.and_then(serde_json::Value::as_object_mut) {
                    fields.remove("response_id");
                }
            }
        }
        let facts = CallFacts {
            run_id: run.as_ref().map(|(id, _)| id.clone()),
            cache_hit: Some(scope),
            task_id,
            ..CallFacts::default()
        };
        let outcome = match run {
            Some((id, body)) => Outcome::Research(research::ResearchOutcome::Finished {
                id,
                run: RunSnapshot::new(body),
            }),
            None => Outcome::Served,
        };
        (output, facts, outcome)
    }

    /// A `wait: false` call handed the run an identical call has in flight (or a waiting
    /// one whose leader was handed back at its wait budget, the run going on): the hand-back
    /// the tool gives for a run it just started (the caller collects it the same way), with
    /// no run created and nothing billed — the run is billed to the call that started it.
    /// Recorded as a hit that saved nothing yet (what the run costs is not known yet).
    async fn handed(
        &self,
        billing: &Billing<'_>,
        id: String,
        scope: &'static str,
        wait: u64,
        ctx: &CallContext,
    ) -> (ToolOutput, CallFacts, Outcome) {
        let task_id = ctx.task_id.get().cloned();
        self.spend.record_hit(billing, 0, task_id.as_deref()).await;
        self.cache.hit(billing.tool, 0);
        // Named like a run the call touched: a task, the CLI and an abandoned call say it.
        ctx.run_ids.run_id(&id);
        let outcome = research::ResearchOutcome::Running {
            id: id.clone(),
            progress: None,
        };
        // As `calls.rs` renders a lifecycle call's hand-back.
        let mut output = research::render_outcome(&outcome, self.profile);
        if self.profile.own_words()
            && let Some(text) = research::still_running_own_words(&outcome, wait)
        {
            output.text = text;
        }
        let facts = CallFacts {
            run_id: Some(id),
            cache_hit: Some(scope),
            task_id,
            ..CallFacts::default()
        };
        (output, facts, Outcome::Research(outcome))
    }
}

/// `0 USD (answered from this server's cache: the answer was made 4 min ago, …)`.
fn said(hit: &Hit, saved: i64) -> String {
    let age = hit.age_seconds();
    let made = match age {
        0..60 => format!("{age} s ago"),
        60..7200 => format!("{} min ago", age / 60),
        _ => format!("{} h ago", age / 3600),
    };
    let cost = match saved {
        0 => String::new(),
        _ => format!(", when it cost {} USD", crate::spend::money::format(saved)),
    };
    format!(
        "0 USD (answered from this server's cache: the answer was made {made}{cost}). Call again with fresh: true for a new run."
    )
}
