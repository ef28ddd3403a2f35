//! What the spend ledger and a budget cost a billable call, without the network: the
//! admission (`reserve`) and the settlement (`settle`, one run with its reported cost
//! written to a store on a temporary file), with no budget and with one; then a `/metrics`
//! rendering of 10,000 series. Run: `cargo bench --bench spend` (prints percentiles; no
//! assertions).

use std::sync::Arc;
use std::time::Instant;

use perplexity_agent::call::{Budget, Caller, FrontEnd};
use perplexity_agent::perplexity::meter::{Metered, MeteredKind};
use perplexity_agent::spend::{Billing, Spend, SpendConfig};
use perplexity_agent::state::State;
use perplexity_agent::state::local::{StoreConfig, StoreHandle};
use serde_json::json;

const CALLS: usize = 5_000;

fn percentiles(mut samples: Vec<f64>) -> String {
    samples.sort_by(f64::total_cmp);
    let pct = |q: f64| samples[((q * samples.len() as f64) as usize).min(samples.len() - 1)];
    format!("p50 {:.1} µs, p99 {:.1} µs", pct(0.50), pct(0.99))
}

fn calls(dir: &std::path::Path, name: &str, budget: Budget) -> (Vec<f64>, Vec<f64>) {
    let store = Arc::new(StoreHandle::new(Some(StoreConfig {
        path: dir.join(format!("{name}.sqlite")),
        snapshot_retention: 100,
        max_tabs_per_space: 50,
        max_history_per_space: None,
    })));
    let spend = Spend::new(
        SpendConfig {
            budget,
            ..SpendConfig::default()
        },
        Arc::new(State::local(store)),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let caller = Caller::local();
    let who = Billing {
        caller: &caller,
        own: Budget::default(),
        front_end: FrontEnd::McpHttp,
        tool: "perplexity_agent",
    };
    let usage = json!({"input_tokens": 120, "output_tokens": 45,
        "cost": {"currency": "USD", "total_cost": 0.0123}});
    let (mut admit, mut settle) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        for i in 0..CALLS + 200 {
            let t0 = Instant::now();
            let hold = spend.reserve(&who, 40_000).await.expect("room");
            let t1 = Instant::now();
            let metered = vec![Metered {
                key: format!("resp_bench_{name}_{i}"),
                kind: MeteredKind::Run,
                model: None,
                usage: Some(usage.clone()),
            }];
            let _ = spend
                .settle(&who, Some(hold), metered, 40_000, None, None)
                .await;
            let t2 = Instant::now();
            if i >= 200 {
                admit.push((t1 - t0).as_secs_f64() * 1e6);
                settle.push((t2 - t1).as_secs_f64() * 1e6);
            }
        }
    });
    (admit, settle)
}

fn main() {
    let dir = std::env::temp_dir().join(format!("pa-spend-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (name, budget) in [
        ("no budget", Budget::default()),
        (
            "daily budget",
            Budget {
                daily: Some(1_000_000_000_000),
                monthly: None,
            },
        ),
    ] {
        let (admit, settle) = calls(&dir, &name.replace(' ', "-"), budget);
        println!(
            "{name}: admission {}; settlement (ledger row written) {} — {CALLS} calls",
            percentiles(admit),
            percentiles(settle)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);

    perplexity_agent::telemetry::install().expect("recorder");
    for i in 0..10_000 {
        perplexity_agent::telemetry::spent(&format!("client-{i}"), "perplexity_agent", 1);
    }
    let mut renders = Vec::new();
    let mut bytes = 0;
    for _ in 0..50 {
        let t0 = Instant::now();
        let text = perplexity_agent::telemetry::render().expect("installed");
        renders.push(t0.elapsed().as_secs_f64() * 1e6);
        bytes = text.len();
    }
    println!(
        "/metrics with 10,000 series ({bytes} bytes): {} per rendering",
        percentiles(renders)
    );
}
