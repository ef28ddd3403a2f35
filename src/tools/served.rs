//! A call answered from the research cache (`cache/`): the answer as its run gave it,
//! marked as a hit, at no cost — recorded in the ledger as a hit with what it saved and
//! audited with the cache's scope. Under the reference peer's drop-in the reply is the
//! answer exactly as it was first given.

use serde_json::json;

use super::calls::{CallContext, Outcome};
use super::{Tools, research};
use crate::cache::Hit;
use crate::call::{CallFacts, ToolOutput};
use crate::perplexity::agent::RunSnapshot;
use crate::spend::Billing;

impl Tools {
    pub(super) async fn served(
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
