//! What a billable request cost: the API's own figure when it reported one (`usage.cost`),
//! else our estimate from the prices below — marked `estimated` in the ledger either way.
//!
//! The table is dated and sourced; a price not published there is not guessed per model:
//! the run is priced by its preset instead (our rough figure, also used to reserve a
//! budget at admission). Update [`PRICES_AS_OF`] with any change.

use serde_json::Value;

use super::money::Micros;
use crate::state::local::Tokens;

/// When the published prices below were read.
pub const PRICES_AS_OF: &str = "2026-10-07";
/// Where: Perplexity's pricing page.
pub const PRICES_SOURCE: &str = "https://docs.perplexity.ai/docs/getting-started/pricing";

/// Agent API tool invocations (the pricing page, per invocation). `search_web` is the
/// name some runs report for `web_search`.
const TOOL_PRICES: &[(&str, Micros)] = &[
    ("web_search", 2_500),
    ("search_web", 2_500),
    ("fetch_url", 500),
    ("finance_search", 5_000),
    ("people_search", 5_000),
    ("image_search", 2_500),
];

/// The Search API: $5.00 per 1,000 successful requests (up to five queries are one).
pub const SEARCH_REQUEST: Micros = 5_000;

/// Token prices per million (input, output) of the models whose prices Perplexity
/// published (the Sonar family, from the same page's earlier edition). Third-party models
/// are billed "at provider rates" with no figure on the page: they fall back to the preset.
const MODEL_PRICES: &[(&str, Micros, Micros)] = &[
    ("sonar", 1_000_000, 1_000_000),
    ("sonar-pro", 3_000_000, 15_000_000),
    ("sonar-reasoning-pro", 2_000_000, 8_000_000),
    ("sonar-deep-research", 2_000_000, 8_000_000),
];

/// Our estimate of one run of a preset, when nothing better is known. Not published
/// figures: scaled from one observed `medium` run that cost 0.039 USD, doubling per step.
/// Older preset names map to their successors.
pub fn preset_estimate(preset: Option<&str>) -> Micros {
    match preset.unwrap_or("medium") {
        "fast" | "fast-search" => 10_000,
        "low" => 20_000,
        "medium" | "pro-search" => 40_000,
        "high" | "deep-research" => 80_000,
        "xhigh" | "advanced-deep-research" => 160_000,
        "wide-research" => 400_000,
        _ => 40_000,
    }
}

/// The most one run may cost before a figure is taken for nonsense (and the run
/// estimated instead): far above any published price, far below what sums can overflow.
pub const MAX_RUN_COST: Micros = 10_000 * super::money::PER_UNIT;

/// A run's cost that can be charged: not negative, not absurd.
fn believable(total: Micros) -> bool {
    (0..=MAX_RUN_COST).contains(&total)
}

/// What one run's `usage` says it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCost {
    pub tokens: Tokens,
    /// The `cost` object as reported, when there was one.
    pub costs: Option<Value>,
    pub total: Micros,
    pub currency: String,
    pub estimated: bool,
}

/// Prices a run from its `usage` (absent for cancelled runs): the reported total; else
/// the sum of reported components; else tokens at the model's price plus the tools it
/// invoked; else `fallback` (the preset's estimate). Every field is optional: the live
/// object contradicts the documented schema in places.
pub fn run_cost(usage: Option<&Value>, model: Option<&str>, fallback: Micros) -> RunCost {
    let int = |v: Option<&Value>| v.and_then(Value::as_i64).filter(|n| *n >= 0);
    let at = |path: &[&str]| {
        let mut v = usage?;
        for key in path {
            v = v.get(*key)?;
        }
        Some(v)
    };
    let input_tokens = int(at(&["input_tokens"])).or(int(at(&["prompt_tokens"])));
    let output_tokens = int(at(&["output_tokens"])).or(int(at(&["completion_tokens"])));
    let reasoning_tokens =
        int(at(&["output_tokens_details", "reasoning_tokens"])).or(int(at(&["reasoning_tokens"])));
    let citation_tokens = int(at(&["citation_tokens"]));
    let invocations: Vec<(&str, i64)> = at(&["tool_calls_details"])
        .and_then(Value::as_object)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|(name, d)| Some((name.as_str(), int(d.get("invocation"))?)))
                .collect()
        })
        .unwrap_or_default();
    let search_queries = int(at(&["num_search_queries"])).or_else(|| {
        let n: i64 = invocations
            .iter()
            .filter(|(name, _)| matches!(*name, "web_search" | "search_web"))
            .map(|(_, n)| n)
            .sum();
        (n > 0).then_some(n)
    });
    let cost = at(&["cost"]).filter(|c| c.is_object());
    let currency = cost
        .and_then(|c| c.get("currency"))
        .and_then(Value::as_str)
        .filter(|c| c.len() <= 8 && c.bytes().all(|b| b.is_ascii_alphabetic()))
        .unwrap_or("USD")
        .to_owned();
    let amount = |v: &Value| v.as_f64().and_then(super::money::from_f64);
    // The parts are summed checked: an upstream (or a proxy) reporting parts that add up
    // past what one run can cost is not believed, whatever each part says on its own.
    let reported = cost
        .and_then(|c| c.get("total_cost"))
        .and_then(amount)
        .or_else(|| {
            let mut parts = cost?
                .as_object()?
                .iter()
                .filter(|(k, _)| k.ends_with("_cost") && *k != "total_cost")
                .filter_map(|(_, v)| amount(v))
                .peekable();
            parts.peek()?;
            parts.try_fold(0, |sum: Micros, part| sum.checked_add(part))
        })
        .filter(|total| believable(*total));
    let (total, estimated) = match reported {
        Some(total) => (total, false),
        None => {
            let ours = estimate(model, input_tokens, output_tokens, &invocations, fallback);
            // Our estimate from reported tokens is held to the same bound: absurd token
            // counts fall back to the preset's figure.
            (if believable(ours) { ours } else { fallback }, true)
        }
    };
    RunCost {
        tokens: Tokens {
            input: input_tokens,
            output: output_tokens,
            reasoning: reasoning_tokens,
            citation: citation_tokens,
            search_queries,
        },
        costs: cost.cloned(),
        total,
        currency,
        estimated,
    }
}

fn estimate(
    model: Option<&str>,
    input: Option<i64>,
    output: Option<i64>,
    invocations: &[(&str, i64)],
    fallback: Micros,
) -> Micros {
    let tools: Micros = invocations
        .iter()
        .map(|(name, n)| {
            TOOL_PRICES
                .iter()
                .find(|(t, _)| t == name)
                .map_or(0, |(_, price)| price.saturating_mul(*n))
        })
        .fold(0, Micros::saturating_add);
    let priced = model.and_then(|m| MODEL_PRICES.iter().find(|(name, _, _)| *name == m));
    match (priced, input, output) {
        (Some((_, per_in, per_out)), Some(i), Some(o)) => {
            let tokens = (i128::from(i) * i128::from(*per_in)
                + i128::from(o) * i128::from(*per_out))
                / 1_000_000;
            Micros::try_from(tokens)
                .unwrap_or(Micros::MAX)
                .saturating_add(tools)
        }
        _ => fallback.max(tools),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reported_cost_is_taken_and_anything_else_is_estimated() {
        // The fake's (the SDK's) shape: the reported total wins.
        let usage = json!({"input_tokens": 120, "output_tokens": 45,
            "tool_calls_details": {"search_web": {"invocation": 2}},
            "cost": {"currency": "USD", "input_cost": 0.0006, "total_cost": 0.0123}});
        let c = run_cost(Some(&usage), None, 40_000);
        assert_eq!((c.total, c.estimated), (12_300, false));
        assert_eq!(
            (c.tokens.input, c.tokens.output, c.tokens.search_queries),
            (Some(120), Some(45), Some(2))
        );
        // Components without a total are summed.
        let parts =
            json!({"cost": {"input_cost": 0.001, "output_cost": 0.002, "tool_calls_cost": 0.015}});
        assert_eq!(run_cost(Some(&parts), None, 0).total, 18_000);
        // Tokens of a priced model, plus the tools.
        let tokens = json!({"input_tokens": 1_000_000, "output_tokens": 100_000,
            "tool_calls_details": {"fetch_url": {"invocation": 2}}});
        let c = run_cost(Some(&tokens), Some("sonar-pro"), 40_000);
        assert_eq!(
            (c.total, c.estimated),
            (3_000_000 + 1_500_000 + 1_000, true)
        );
        // No usage at all (a cancelled run): the preset's estimate.
        let c = run_cost(None, Some("openai/gpt-5.2"), preset_estimate(Some("high")));
        assert_eq!(
            (c.total, c.estimated, c.currency.as_str()),
            (80_000, true, "USD")
        );
        // Parts that wrap around when summed, or add up to an absurd figure, are not
        // believed: the run is estimated (never a negative charge).
        let mut wrapping = serde_json::Map::new();
        for i in 0..18 {
            wrapping.insert(format!("p{i}_cost"), json!(999_999_999_999.0));
        }
        wrapping.insert("last_cost".into(), json!(446_744_073_627.550_5));
        let c = run_cost(Some(&json!({"cost": wrapping})), None, 40_000);
        assert_eq!((c.total, c.estimated), (40_000, true));
        let absurd = json!({"cost": {"input_cost": 20_000.0}});
        assert_eq!(run_cost(Some(&absurd), None, 9).total, 9);
        let tokens = json!({"input_tokens": i64::MAX, "output_tokens": i64::MAX});
        let c = run_cost(Some(&tokens), Some("sonar-pro"), 11);
        assert_eq!((c.total, c.estimated), (11, true));
        // Nonsense is absent, never a negative or huge charge.
        let junk = json!({"input_tokens": -5, "cost": {"total_cost": -3.0, "currency": "<b>"}});
        let c = run_cost(Some(&junk), None, 7);
        assert_eq!(
            (c.total, c.tokens.input, c.currency.as_str()),
            (7, None, "USD")
        );
    }
}
