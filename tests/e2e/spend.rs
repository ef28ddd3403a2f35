//! Spend, black-box: the ledger in the store (one row per billable request, reported or
//! estimated, never counted twice), budgets that refuse new billable calls before any
//! upstream request (atomically, per client, across restarts, exit 5 for the CLI), the
//! 80 % warning, `usage` and the spend in `server_metrics`.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest;

use crate::common::*;
use crate::http::Http;
use crate::tasks::{poll, post, task_call};

/// Runs `usage --json` with `args` against the server's store.
fn usage(env: &[(String, String)], args: &[&str]) -> Value {
    let mut all = vec!["usage", "--json"];
    all.extend_from_slice(args);
    let (out, err, code) = run_cli(&all, env);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The run id a research result names.
fn run_id_in(reply: &Value) -> String {
    let (text, _) = tool_text(reply);
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| w.starts_with("resp_"))
        .unwrap_or_else(|| panic!("no run id in {reply}"))
        .to_owned()
}

fn with(mut env: Vec<(String, String)>, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    env
}

#[test]
fn a_spent_budget_refuses_the_next_run_before_any_request_and_a_restart_keeps_it() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "cost": 0.04}));
    let dir = Scratch::new("spend-budget");
    let audit = dir.path("audit.jsonl");
    let env = with(
        env_with_store(&fake, &dir),
        &[
            ("PERPLEXITY_BUDGET_DAILY", "0.05"),
            ("PERPLEXITY_AUDIT_LOG_PATH", audit.to_str().unwrap()),
        ],
    );
    let mut s = Server::start(&env);
    let first = s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    let (text, is_error) = tool_text(&first);
    assert!(!is_error, "{first}");
    let warning = text.lines().last().unwrap_or_default();
    assert!(
        warning
            .starts_with("Budget: 80% of this server's daily budget is spent (0.04 of 0.05 USD)"),
        "{warning}"
    );
    let run_id = fake.runs()[0].id.clone();
    let creates = agent_creates(&fake).len();
    assert_eq!(creates, 1);

    let second = s.request(&call(2, "perplexity_agent", json!({"query": "q"})));
    let (refusal, is_error) = tool_text(&second);
    assert!(is_error, "{second}");
    assert!(
        refusal.contains("This server's daily budget (0.05 USD) has no room")
            && refusal.contains("Spent today: 0.04 USD")
            && refusal.contains("It resets at ")
            && refusal.contains("T00:00:00+00:00"),
        "{refusal}"
    );
    assert_eq!(agent_creates(&fake).len(), creates, "nothing was sent");
    // Reading results and non-billable tools are never refused by a budget.
    let read = s.request(&call(
        3,
        "perplexity_agent_result",
        json!({"response_id": run_id}),
    ));
    assert_eq!(read["result"]["isError"], false, "{read}");
    let metrics = s.request(&call(4, "server_metrics", json!({})));
    let spend = &metrics["result"]["structuredContent"]["spend"];
    assert_eq!(spend["today"], 0.04, "{metrics}");
    assert_eq!(spend["budget_daily"], 0.05, "{metrics}");
    assert_eq!(spend["callers"][0]["caller"], "local", "{metrics}");
    s.close_stdin();
    s.wait_exit(Duration::from_secs(10));
    let refused: Vec<Value> = audit_records(&audit)
        .into_iter()
        .filter(|r| r["event"] == "tool_result" && r["refused"] == "budget")
        .collect();
    assert_eq!(refused.len(), 1, "audited as refused by the budget");

    // A restart keeps the spend: the ledger is in the store.
    let mut again = Server::start(&env);
    let third = again.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    assert_eq!(third["result"]["isError"], true, "{third}");
    again.close_stdin();
    again.wait_exit(Duration::from_secs(10));
    // And the CLI, on the same store, exits 5 without a request.
    let (out, err, code) = run_cli(&["ask", "q"], &env);
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("daily budget"), "{err}");
    assert_eq!(agent_creates(&fake).len(), creates);
}

/// An upstream whose cost parts wrap around when summed (each part passes on its own)
/// must not make a charge negative and so lift a budget: the run is estimated, the
/// budget refuses the next, and `usage` never shows a negative spend.
#[test]
fn a_cost_that_overflows_is_estimated_and_never_lifts_a_budget() {
    let mut parts = serde_json::Map::new();
    for i in 0..18 {
        parts.insert(format!("part{i}_cost"), json!(999_999_999_999.0));
    }
    parts.insert("last_cost".into(), json!(446_744_073_627.550_5));
    parts.insert("currency".into(), json!("USD"));
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "cost_object": parts}));
    let dir = Scratch::new("spend-overflow");
    let env = with(
        env_with_store(&fake, &dir),
        &[("PERPLEXITY_BUDGET_DAILY", "0.05")],
    );
    let mut s = Server::start(&env);
    let mut admitted = 0;
    for id in 1..=8 {
        let reply = s.request(&call(id, "perplexity_agent", json!({"query": "q"})));
        if !tool_text(&reply).1 {
            admitted += 1;
        }
    }
    assert_eq!(
        admitted, 1,
        "one run fits a 0.05 budget at the 0.04 estimate"
    );
    assert_eq!(agent_creates(&fake).len(), 1);
    s.close_stdin();
    s.wait_exit(Duration::from_secs(10));
    let by_tool = usage(&env, &["--by", "tool"]);
    let agent = by_tool["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["tool"] == "perplexity_agent")
        .cloned()
        .unwrap_or_else(|| panic!("{by_tool}"));
    assert_eq!(
        (agent["cost"].as_f64(), agent["estimated"].as_i64()),
        (Some(0.04), Some(1)),
        "{by_tool}"
    );
}

#[test]
fn thirty_concurrent_calls_with_room_for_ten_admit_ten() {
    // Each run holds its preset's estimate (medium: 0.04) until its cost is known, so
    // 0.40 has room for ten; the runs take long enough that none settles meanwhile.
    let fake = FakePerplexity::start_with(json!({"duration_ms": 20000}));
    let dir = Scratch::new("spend-burst");
    let env = with(
        env_with_store(&fake, &dir),
        &[("PERPLEXITY_BUDGET_DAILY", "0.40")],
    );
    let mut s = Server::start(&env);
    for id in 0..30 {
        s.send(&call(
            id,
            "perplexity_agent",
            json!({"query": "q", "wait": false}),
        ));
    }
    let mut admitted = 0;
    for _ in 0..30 {
        // In whatever order they end.
        let reply = s.recv();
        let (text, is_error) = tool_text(&reply);
        if is_error {
            assert!(text.contains("has no room"), "{text}");
        } else {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10, "exactly the room");
    assert_eq!(agent_creates(&fake).len(), 10);
}

#[test]
fn an_unreported_cost_is_estimated_and_a_run_collected_again_is_one_row() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 600, "cost": "unreported"}));
    let dir = Scratch::new("spend-estimated");
    let env = env_with_store(&fake, &dir);
    let mut s = Server::start(&env);
    let started = s.request(&call(
        1,
        "perplexity_agent",
        json!({"query": "q", "preset": "high", "wait": false}),
    ));
    let id = run_id_in(&started);
    assert!(id.starts_with("resp_"), "{started}");
    for n in 2..5 {
        let got = s.request(&call(
            n,
            "perplexity_agent_result",
            json!({"response_id": id, "wait_seconds": 10}),
        ));
        assert_eq!(got["result"]["isError"], false, "{got}");
    }
    let search = s.request(&call(9, "perplexity_search", json!({"query": "q"})));
    assert_eq!(search["result"]["isError"], false, "{search}");
    s.close_stdin();
    s.wait_exit(Duration::from_secs(10));
    let by_tool = usage(&env, &["--by", "tool"]);
    let groups = by_tool["groups"].as_array().unwrap();
    let agent = groups
        .iter()
        .find(|g| g["tool"] == "perplexity_agent_result")
        .unwrap();
    assert_eq!(agent["requests"], 1, "three collects, one run: {by_tool}");
    assert_eq!(agent["estimated"], 1, "{by_tool}");
    assert_eq!(agent["cost"], 0.08, "the high preset's estimate: {by_tool}");
    let search = groups
        .iter()
        .find(|g| g["tool"] == "perplexity_search")
        .unwrap();
    assert_eq!(
        (search["requests"].as_i64(), search["cost"].as_f64()),
        (Some(1), Some(0.005))
    );
    assert_eq!(by_tool["total"]["requests"], 2);
}

#[test]
fn an_orphaned_tasks_cost_is_recorded_once_after_a_restart() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 15000, "cost": 0.02}));
    let dir = Scratch::new("spend-orphan");
    let env = env_with_store(&fake, &dir);
    let mut first = Server::start(&env);
    let created = first.request(&task_call(1, "perplexity_agent", json!({"query": "q"})));
    let task_id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    wait_until("the create", Duration::from_secs(10), || {
        agent_creates(&fake).len() == 1
    });
    signal(first.pid(), "KILL");
    let _ = first.wait_exit(Duration::from_secs(5));
    assert_eq!(
        usage(&env, &[])["total"]["requests"],
        0,
        "nothing known yet"
    );

    let mut second = Server::start(&env);
    let done = poll(&mut second, &task_id, 2);
    assert_eq!(done["status"], "completed", "{done}");
    let _ = poll(&mut second, &task_id, 100);
    second.close_stdin();
    second.wait_exit(Duration::from_secs(10));
    let mut third = Server::start(&env);
    let _ = poll(&mut third, &task_id, 2);
    third.close_stdin();
    third.wait_exit(Duration::from_secs(10));
    let total = usage(&env, &[])["total"].clone();
    assert_eq!(
        (total["requests"].as_i64(), total["cost"].as_f64()),
        (Some(1), Some(0.02)),
        "{total}"
    );
}

fn sha(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const CAPPED: &str = "pa_spend-capped-0123456789abcdef0123456789abcdef";
const FREE: &str = "pa_spend-free-0123456789abcdef0123456789abcdef01";

#[test]
fn a_clients_budget_is_its_own_and_its_spend_is_no_one_elses_to_see() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "cost": 0.03}));
    let dir = Scratch::new("spend-clients");
    let file = dir.path("clients.toml");
    std::fs::write(
        &file,
        format!(
            "[[client]]\nname = \"capped\"\ntoken_sha256 = \"{}\"\nbudget_daily = 0.05\ncreated = \"2026-12-03T10:00:00Z\"\n\n[[client]]\nname = \"free\"\ntoken_sha256 = \"{}\"\ncreated = \"2026-12-03T10:00:01Z\"\n",
            sha(CAPPED),
            sha(FREE)
        ),
    )
    .unwrap();
    let env = with(
        env_with_store(&fake, &dir),
        &[("PERPLEXITY_HTTP_CLIENTS_FILE", file.to_str().unwrap())],
    );
    let http = Http::start(&env);
    let ask = |token: &str, id: i64| {
        post(
            &http,
            token,
            &modern_call(id, "perplexity_agent", json!({"query": "q"})),
        )
    };
    // capped: 0 + 0.04 fits 0.05; then 0.03 spent + 0.04 does not.
    assert_eq!(ask(CAPPED, 1)["result"]["isError"], false);
    let refused = ask(CAPPED, 2);
    let (text, is_error) = tool_text(&refused);
    assert!(
        is_error && text.contains("The daily budget of client 'capped' (0.05 USD)"),
        "{refused}"
    );
    assert!(!text.contains("free"), "{text}");
    // free has no budget of its own and the server none: never refused.
    for id in 3..6 {
        assert_eq!(ask(FREE, id)["result"]["isError"], false);
    }
    // Each client's server_metrics shows its own spend only.
    let metrics = post(&http, CAPPED, &modern_call(9, "server_metrics", json!({})));
    let spend = &metrics["result"]["structuredContent"]["spend"];
    assert_eq!(
        spend["callers"],
        json!([{"caller": "capped", "today": 0.03, "this_month": 0.03}]),
        "{metrics}"
    );
    assert!(
        spend.get("today").is_none(),
        "the server's total is the operator's: {spend}"
    );
    let theirs = post(&http, FREE, &modern_call(10, "server_metrics", json!({})));
    let callers = &theirs["result"]["structuredContent"]["spend"]["callers"];
    assert_eq!(callers.as_array().map(Vec::len), Some(1), "{theirs}");
    assert_eq!(callers[0]["caller"], "free");
    // The operator sees everyone.
    let by_caller = usage(&env, &["--by", "caller"]);
    let names: Vec<&str> = by_caller["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["caller"].as_str())
        .collect();
    assert_eq!(names, ["free", "capped"], "largest first: {by_caller}");
}

#[test]
fn usage_groups_a_week_of_spend() {
    let fake = FakePerplexity::start();
    let dir = Scratch::new("spend-week");
    let env = env_with_store(&fake, &dir);
    // The schema is the binary's: let it create the store, then plant a week of rows.
    let _ = usage(&env, &[]);
    let db = rusqlite::Connection::open(dir.path("store.sqlite")).unwrap();
    let day_ms = 86_400_000_i64;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let today = now - now % day_ms;
    for d in 0..7_i64 {
        for (n, (who, tool, model, micros)) in [
            ("alice", "perplexity_agent", Some("openai/gpt-5.5"), 10_000),
            ("bot", "perplexity_search", None, 5_000),
        ]
        .into_iter()
        .enumerate()
        {
            db.execute(
                "INSERT INTO ledger (request, at_ms, caller, caller_name, front_end, tool, model,
                     total_micros, currency, estimated)
                 VALUES (?1, ?2, ?3, ?3, 'mcp-http', ?4, ?5, ?6, 'USD', ?7)",
                rusqlite::params![
                    format!("{}r{d}-{n}", if model.is_none() { "search:" } else { "" }),
                    today - d * day_ms + 3_600_000,
                    who,
                    tool,
                    model,
                    micros,
                    model.is_none()
                ],
            )
            .unwrap();
        }
    }
    let by_day = usage(&env, &["--by", "day"]);
    let days = by_day["groups"].as_array().unwrap();
    assert_eq!(days.len(), 7, "{by_day}");
    assert!(
        days.iter()
            .all(|d| d["cost"] == 0.015 && d["requests"] == 2),
        "{by_day}"
    );
    assert_eq!(by_day["total"]["cost"], 0.105);
    let by_model = usage(&env, &["--by", "model"]);
    assert_eq!(by_model["groups"][0]["model"], "openai/gpt-5.5");
    assert_eq!(by_model["groups"][1]["model"], "(search api)");
    assert_eq!(by_model["groups"][1]["estimated"], 7);
    // --since cuts by day in the budget zone.
    let two_days = usage(&env, &["--since", &day_string(today - day_ms)]);
    assert_eq!(two_days["total"]["requests"], 4, "{two_days}");
    // The table for people.
    let (out, _, code) = run_cli(&["usage", "--by", "caller"], &env);
    assert_eq!(code, 0);
    assert!(out.starts_with("CALLER"), "{out}");
    assert!(
        out.contains("alice") && out.contains("0.07") && out.contains("TOTAL"),
        "{out}"
    );
    let (_, err, code) = run_cli(&["usage", "--since", "yesterday"], &env);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("YYYY-MM-DD"), "{err}");
}

/// A UTC day as `YYYY-MM-DD`.
fn day_string(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .unwrap()
        .strftime("%Y-%m-%d")
        .to_string()
}

#[test]
fn spend_by_another_process_on_the_store_counts_at_once() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "cost": 0.04}));
    let dir = Scratch::new("spend-shared");
    let env = with(
        env_with_store(&fake, &dir),
        &[("PERPLEXITY_BUDGET_DAILY", "0.05")],
    );
    let mut s = Server::start(&env);
    // The server reads the ledger (a budgeted search: 0.005), then the CLI spends beside it.
    let first = s.request(&call(1, "perplexity_search", json!({"query": "q"})));
    assert_eq!(first["result"]["isError"], false, "{first}");
    let (_, err, code) = run_cli(&["ask", "q"], &env);
    assert_eq!(code, 0, "{err}");
    let refused = s.request(&call(2, "perplexity_agent", json!({"query": "q"})));
    let (text, is_error) = tool_text(&refused);
    assert!(
        is_error && text.contains("Spent today: 0.045 USD"),
        "{refused}"
    );
    assert_eq!(agent_creates(&fake).len(), 1, "only the CLI's run");
}

/// Plants ledger rows a minute old (request, tool, micros, estimated) in a new store:
/// the store's directory (removed when dropped) and the environment that reads it.
fn planted(
    fake: &FakePerplexity,
    name: &str,
    rows: &[(&str, &str, i64, bool)],
) -> (Scratch, Vec<(String, String)>) {
    let dir = Scratch::new(name);
    let env = env_with_store(fake, &dir);
    // The schema is the binary's: let it create the store first.
    let _ = usage(&env, &[]);
    let db = rusqlite::Connection::open(dir.path("store.sqlite")).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for (request, tool, micros, estimated) in rows {
        db.execute(
            "INSERT INTO ledger (request, at_ms, caller, caller_name, front_end, tool, model,
                 total_micros, currency, estimated)
             VALUES (?1, ?2, 'local', 'local', 'cli', ?3, NULL, ?4, 'USD', ?5)",
            rusqlite::params![request, now - 60_000, tool, micros, estimated],
        )
        .unwrap();
    }
    (dir, env)
}

/// The table for people keeps each column's numbers right-aligned with one number of
/// decimals: enough for the smallest fraction in it (a search's fraction of a cent), so
/// `1.0000` stands over `0.0125`, not `1.00`; whole cents keep two.
#[test]
fn the_usage_table_aligns_its_money_column() {
    let fake = FakePerplexity::start();
    let (_dir, env) = planted(
        &fake,
        "spend-table",
        &[
            ("resp_a", "deep_research", 1_000_000, false),
            ("resp_b", "perplexity_agent", 50_000, false),
            ("resp_c", "perplexity_agent", 50_000, false),
            ("search:d", "perplexity_search", 12_500, true),
        ],
    );
    let (out, err, code) = run_cli(&["usage", "--by", "tool"], &env);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..5],
        [
            "TOOL               REQUESTS  ESTIMATED    COST (USD)",
            "deep_research             1          0        1.0000",
            "perplexity_agent          2          0        0.1000",
            "perplexity_search         1          1        0.0125",
            "TOTAL                     4          1        1.1125",
        ],
        "{out}"
    );
    assert!(lines[5].starts_with("Since "), "{out}");

    let (_dir, env) = planted(
        &fake,
        "spend-table-cents",
        &[
            ("resp_a", "deep_research", 1_000_000, false),
            ("resp_b", "perplexity_agent", 100_000, false),
        ],
    );
    let (out, err, code) = run_cli(&["usage", "--by", "tool"], &env);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "TOOL              REQUESTS  ESTIMATED    COST (USD)",
            "deep_research            1          0          1.00",
            "perplexity_agent         1          0          0.10",
            "TOTAL                    2          0          1.10",
        ],
        "{out}"
    );
}
