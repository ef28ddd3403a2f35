//! `usage`: what the spend ledger in the local store says was spent, grouped by caller,
//! tool, day or model — a table for people, one JSON document for scripts. Whoever can
//! read the store file is its operator, so every caller's spend is shown.

use clap::{Args, ValueEnum};
use serde_json::json;

use super::output::{self, CliError, Ended, Exit};
use crate::spend::Grouping;
use crate::spend::money::{self, Micros};
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
    let hits: u64 = groups.iter().map(|g| g.cache_hits).sum();
    let saved: i64 = groups.iter().map(|g| g.saved).sum();
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
                "cache_hits": g.cache_hits,
                "saved": money::as_f64(g.saved),
            })).collect::<Vec<_>>(),
            "total": {"requests": requests, "estimated": estimated, "cost": money::as_f64(total),
                "cache_hits": hits, "saved": money::as_f64(saved)},
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
    // One number of decimals for the whole money column, so its points line up: the
    // fewest that show every amount in it exactly (searches cost fractions of a cent).
    let amounts: Vec<i64> = groups.iter().map(|g| g.total).chain([total]).collect();
    let decimals = amounts.iter().map(|a| decimals_of(*a)).max().unwrap_or(2);
    let costs: Vec<String> = amounts.iter().map(|a| fixed(*a, decimals)).collect();
    let req_w = column_width(
        "REQUESTS",
        groups.iter().map(|g| g.requests).chain([requests]),
    );
    let est_w = column_width(
        "ESTIMATED",
        groups.iter().map(|g| g.estimated).chain([estimated]),
    );
    let cost_w = costs
        .iter()
        .map(String::len)
        .chain([12])
        .max()
        .unwrap_or(12);
    let mut text = format!(
        "{:<width$}  {:>req_w$}  {:>est_w$}  {:>cost_w$}\n",
        label.to_uppercase(),
        "REQUESTS",
        "ESTIMATED",
        "COST (USD)"
    );
    let rows = groups
        .iter()
        .zip(&keys)
        .map(|(g, key)| (key.as_str(), g.requests, g.estimated))
        .chain([("TOTAL", requests, estimated)]);
    for ((key, n, est), cost) in rows.zip(&costs) {
        text.push_str(&format!(
            "{key:<width$}  {n:>req_w$}  {est:>est_w$}  {cost:>cost_w$}\n"
        ));
    }
    if hits > 0 {
        text.push_str(&format!(
            "The research cache answered {hits} call(s) without a request, saving {} USD.\n",
            money::format(saved)
        ));
    }
    text.push_str(&format!(
        "Since {since} ({}). Estimated: priced by perplexity-agent (prices as of {}), not reported by Perplexity.",
        zone.name(),
        crate::spend::prices::PRICES_AS_OF
    ));
    output::lines(&text);
    Ok(Exit::Success)
}

/// A count column as wide as its heading or its widest number.
fn column_width(heading: &str, values: impl Iterator<Item = u64>) -> usize {
    values
        .map(|v| v.to_string().len())
        .max()
        .unwrap_or(0)
        .max(heading.len())
}

/// The decimals an amount needs to be shown exactly: two at least, six (millionths) at
/// most.
fn decimals_of(amount: Micros) -> usize {
    let mut fraction = amount.unsigned_abs() % money::PER_UNIT as u64;
    let mut places = 6;
    while places > 2 && fraction.is_multiple_of(10) {
        fraction /= 10;
        places -= 1;
    }
    places
}

/// An amount with exactly `decimals` decimals (2 to 6), cut, never rounded: the column's
/// decimals are chosen so that nothing is cut.
fn fixed(amount: Micros, decimals: usize) -> String {
    let sign = if amount < 0 { "-" } else { "" };
    let a = amount.unsigned_abs();
    let per_unit = money::PER_UNIT as u64;
    let fraction = format!("{:06}", a % per_unit);
    let shown = fraction.get(..decimals.clamp(2, 6)).unwrap_or(&fraction);
    format!("{sign}{}.{shown}", a / per_unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_money_column_shows_every_amount_exactly_with_one_number_of_decimals() {
        assert_eq!(decimals_of(1_000_000), 2);
        assert_eq!(decimals_of(100_000), 2);
        assert_eq!(decimals_of(12_500), 4);
        assert_eq!(decimals_of(1), 6);
        assert_eq!(fixed(1_000_000, 4), "1.0000");
        assert_eq!(fixed(12_500, 4), "0.0125");
        assert_eq!(fixed(100_000, 2), "0.10");
        assert_eq!(fixed(-5, 6), "-0.000005");
    }
}
