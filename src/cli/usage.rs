//! `usage`: what the spend ledger in the local store says was spent, grouped by caller,
//! tool, day or model — a table for people, one JSON document for scripts. Whoever can
//! read the store file is its operator, so every caller's spend is shown.

use clap::{Args, ValueEnum};
use serde_json::json;

use super::output::{self, CliError, Ended, Exit};
use crate::spend::{Grouping, money};
use crate::tools::Tools;

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Group by caller, tool, day or model.
    #[arg(long, value_enum, default_value = "day")]
    pub by: By,
    /// From this day on (YYYY-MM-DD, a day in PERPLEXITY_BUDGET_TZ; default: the last 30 days).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    Caller,
    Tool,
    Day,
    Model,
}

pub async fn run(args: UsageArgs, tools: &Tools) -> Ended {
    let spend = tools.spend();
    let zone = &spend.config().zone;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let since_ms = match &args.since {
        Some(date) => zone.start_of(date).map_err(CliError::usage)?,
        None => zone.days_before(now, 29),
    };
    let since = zone.day_of(since_ms);
    let (by, label) = match args.by {
        By::Caller => (Grouping::Caller, "caller"),
        By::Tool => (Grouping::Tool, "tool"),
        By::Day => (Grouping::Day, "day"),
        By::Model => (Grouping::Model, "model"),
    };
    let groups = spend
        .usage(since_ms, by)
        .await
        .map_err(|e| CliError::config(e.to_string()))?;
    let requests: u64 = groups.iter().map(|g| g.requests).sum();
    let estimated: u64 = groups.iter().map(|g| g.estimated).sum();
    let total: i64 = groups.iter().map(|g| g.total).sum();
    if args.json {
        output::document(&json!({
            "by": label,
            "since": since,
            "time_zone": zone.name(),
            "currency": "USD",
            "groups": groups.iter().map(|g| json!({
                label: g.key,
                "requests": g.requests,
                "estimated": g.estimated,
                "cost": money::as_f64(g.total),
            })).collect::<Vec<_>>(),
            "total": {"requests": requests, "estimated": estimated, "cost": money::as_f64(total)},
        }));
        return Ok(Exit::Success);
    }
    if groups.is_empty() {
        output::lines(&format!(
            "No billable requests since {since} ({}).",
            zone.name()
        ));
        return Ok(Exit::Success);
    }
    // Keys are ours or the callers' names (a safe alphabet) or model ids: still made
    // inert, as anything upstream-given printed to a terminal is.
    let keys: Vec<String> = groups
        .iter()
        .map(|g| crate::text::inert_line(&g.key))
        .collect();
    let width = keys
        .iter()
        .map(|k| k.chars().count())
        .chain([label.len(), 5])
        .max()
        .unwrap_or(5);
    let mut text = format!(
        "{:<width$}  {:>8}  {:>9}  {:>12}\n",
        label.to_uppercase(),
        "REQUESTS",
        "ESTIMATED",
        "COST (USD)"
    );
    for (g, key) in groups.iter().zip(&keys) {
        text.push_str(&format!(
            "{key:<width$}  {:>8}  {:>9}  {:>12}\n",
            g.requests,
            g.estimated,
            money::format(g.total)
        ));
    }
    text.push_str(&format!(
        "{:<width$}  {requests:>8}  {estimated:>9}  {:>12}\n",
        "TOTAL",
        money::format(total)
    ));
    text.push_str(&format!(
        "Since {since} ({}). Estimated: priced by perplexity-agent (prices as of {}), not reported by Perplexity.",
        zone.name(),
        crate::spend::prices::PRICES_AS_OF
    ));
    output::lines(&text);
    Ok(Exit::Success)
}
