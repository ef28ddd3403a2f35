//! Guard overhead per call: unknown-argument check + validation + rate limit + audit
//! records (log on, to a temporary file) for a `perplexity_agent` call, without the
//! network. Run: `cargo bench --bench guard` (prints medians; no assertions).

use std::time::Instant;

use futures_util::FutureExt;

use perplexity_agent::call::{CallFacts, FrontEnd, ToolOutput};
use perplexity_agent::guard::{Guard, GuardConfig};
use perplexity_agent::tools::{args, research};
use serde_json::{Value, json};

fn main() {
    let dir = std::env::temp_dir().join(format!("pa-guard-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let log = dir.join("audit.jsonl");
    let guard = std::sync::Arc::new(
        Guard::new(
            &GuardConfig {
                rate_per_minute: 1_000_000,
                rate_burst: 1_000_000,
                audit_log_path: Some(log.display().to_string()),
                max_output_chars: 100_000,
                replica_id: "bench".to_owned(),
            },
            || &[],
        )
        .expect("guard"),
    );
    let params = json!({"query": "How did the Artemis II schedule change this year?", "preset": "medium",
        "recency": "month", "domains": ["nasa.gov", "-reddit.com"]});
    let Value::Object(map) = params.clone() else {
        unreachable!()
    };
    let output = ToolOutput::ok("x".repeat(4_000));
    let facts = CallFacts::default();

    let caller = perplexity_agent::call::Caller::local();
    let mut samples = Vec::with_capacity(20_000);
    for i in 0..21_000 {
        let started = Instant::now();
        args::reject_unknown(&map, &research::AGENT_ARGS).expect("known args");
        let call = research::ResearchRequest::from_args(&map).expect("valid");
        std::hint::black_box(&call);
        let pass = guard
            .admit(
                perplexity_agent::guard::Charge::of(FrontEnd::McpStdio, &caller),
                "perplexity_agent",
                &params,
                1,
            )
            .now_or_never()
            .expect("the local buckets never wait")
            .expect("admitted");
        let mut shown = output.clone();
        let truncated = guard
            .budget(&mut shown, &caller)
            .now_or_never()
            .expect("the local cache never waits");
        pass.finish(&output, &facts, truncated);
        if i >= 1_000 {
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    guard.flush();
    samples.sort_by(f64::total_cmp);
    let pct = |q: f64| samples[((q * samples.len() as f64) as usize).min(samples.len() - 1)];
    println!(
        "guard overhead per call (validation + rate limit + audit on + budget), n={}: median {:.1} µs, p90 {:.1} µs, p99 {:.1} µs",
        samples.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99)
    );
    let lines = std::fs::read_to_string(&log)
        .map(|s| s.lines().count())
        .unwrap_or(0);
    println!("audit records written: {lines}");
    let _ = std::fs::remove_dir_all(&dir);
}
