//! The research cache (`PERPLEXITY_CACHE`): a repeated question is answered once and
//! served again at no cost; what is never kept; one run for identical calls in flight;
//! whose answers a caller may be served; a hit with a spent budget; the reference peer's
//! drop-in. The cost on every result is checked on the way.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::http::Http;
use crate::tasks::post;

const HIT: &str = "answered from this server's cache";

/// [`env_with_store`] with the cache on in `scope`.
fn cached(fake: &FakePerplexity, dir: &Scratch, scope: &str) -> Vec<(String, String)> {
    let mut env = env_with_store(fake, dir);
    env.retain(|(k, _)| k != "PERPLEXITY_CACHE");
    env.push(("PERPLEXITY_CACHE".into(), scope.into()));
    env
}

fn ask(s: &mut Server, id: i64, arguments: Value) -> (String, bool) {
    tool_text(&s.request(&call(id, "perplexity_agent", arguments)))
}

#[test]
fn a_repeated_question_is_one_run_and_the_repeat_is_a_free_hit() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "cost": 0.0123}));
    let dir = Scratch::new("cache-repeat");
    let env = cached(&fake, &dir, "caller");
    let mut s = Server::start(&env);
    let (first, is_error) = ask(&mut s, 1, json!({"query": "What is x?"}));
    assert!(!is_error, "{first}");
    assert!(first.ends_with("\n\nCost: 0.0123 USD"), "{first}");
    assert!(!first.contains(HIT));

    // The same question, spaced otherwise and with how to wait said: the same answer,
    // no new run, at no cost.
    let (second, is_error) = ask(&mut s, 2, json!({"query": "  What is\n x? ", "wait": true}));
    assert!(!is_error, "{second}");
    assert_eq!(agent_creates(&fake).len(), 1, "served from the cache");
    assert!(
        second.contains(HIT) && second.contains("when it cost 0.0123 USD"),
        "{second}"
    );
    assert_eq!(
        unwrap_spotlight(&first),
        unwrap_spotlight(&second),
        "the answer as it was given"
    );

    // Another question, and `fresh`, each pay for a run.
    ask(&mut s, 3, json!({"query": "What is y?"}));
    let (fresh, _) = ask(&mut s, 4, json!({"query": "What is x?", "fresh": true}));
    assert!(!fresh.contains(HIT), "{fresh}");
    assert_eq!(agent_creates(&fake).len(), 3);
    let (refused, is_error) = ask(&mut s, 5, json!({"query": "What is x?", "fresh": "yes"}));
    assert!(
        is_error && refused == "'fresh' must be a boolean.",
        "{refused}"
    );

    // server_metrics counts it.
    let metrics = s.request(&call(6, "server_metrics", json!({})));
    let counted = &structured(&metrics)["cache"];
    assert_eq!(counted["scope"], "caller", "{metrics}");
    assert_eq!(
        (counted["hits"].as_u64(), counted["saved"].as_f64()),
        (Some(1), Some(0.0123))
    );
    // The ledger has the hit at cost 0 and what it saved.
    drop(s);
    let (out, err, code) = run_cli(&["usage", "--json", "--by", "tool"], &env);
    assert_eq!(code, 0, "{err}");
    let usage: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(usage["total"]["cache_hits"], 1, "{usage}");
    assert_eq!(usage["total"]["saved"], 0.0123, "{usage}");
    assert_eq!(usage["total"]["requests"], 3, "{usage}");
}

#[test]
fn what_fails_ends_or_expires_is_never_served_again() {
    // A failed run is not kept.
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "final_status": "failed"}));
    let dir = Scratch::new("cache-failed");
    let mut s = Server::start(&cached(&fake, &dir, "caller"));
    for id in 1..=2 {
        let (text, is_error) = ask(&mut s, id, json!({"query": "q"}));
        assert!(is_error && !text.contains(HIT), "{text}");
    }
    assert_eq!(agent_creates(&fake).len(), 2);
    drop(s);

    // A run handed back at the wait budget is not either; nor is an answer past its TTL.
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50}));
    let dir = Scratch::new("cache-ttl");
    let mut env = cached(&fake, &dir, "caller");
    env.push(("PERPLEXITY_CACHE_TTL_SECONDS".into(), "1".into()));
    let mut s = Server::start(&env);
    let (handed_back, _) = ask(&mut s, 1, json!({"query": "q", "wait": false}));
    assert!(handed_back.contains("resp_"), "{handed_back}");
    ask(&mut s, 2, json!({"query": "q"}));
    assert_eq!(agent_creates(&fake).len(), 2, "a hand-back is no answer");
    let (hit, _) = ask(&mut s, 3, json!({"query": "q"}));
    assert!(hit.contains(HIT), "{hit}");
    std::thread::sleep(Duration::from_millis(1300));
    let (expired, _) = ask(&mut s, 4, json!({"query": "q"}));
    assert!(!expired.contains(HIT), "{expired}");
    assert_eq!(agent_creates(&fake).len(), 3);
}

#[test]
fn twenty_identical_calls_at_once_make_one_run() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 1500, "cost": 0.04}));
    let dir = Scratch::new("cache-flight");
    let mut s = Server::start(&cached(&fake, &dir, "caller"));
    for id in 1..=20 {
        s.send(&call(id, "perplexity_ask", json!({"query": "the same"})));
    }
    let mut hits = 0;
    for _ in 0..20 {
        let (text, is_error) = tool_text(&s.recv());
        assert!(!is_error, "{text}");
        hits += usize::from(text.contains(HIT));
    }
    assert_eq!(agent_creates(&fake).len(), 1, "one run for all");
    assert_eq!(hits, 19);
}

/// A clients file of two clients with every tool and one with `search` only.
fn three_clients(dir: &Scratch) -> std::path::PathBuf {
    let line = |name: &str, token: &str, tools: &str| {
        let sha: String = <sha2::Sha256 as sha2::Digest>::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!(
            "[[client]]\nname = \"{name}\"\ntoken_sha256 = \"{sha}\"\n{tools}created = \"2026-12-07T10:00:00Z\"\n\n"
        )
    };
    let file = dir.path("clients.toml");
    let text = [
        line("carol", CAROL, ""),
        line("dave", DAVE, ""),
        line("erin", ERIN, "tools = \"search\"\n"),
    ]
    .concat();
    std::fs::write(&file, text).unwrap();
    file
}

const CAROL: &str = "pa_cache-carol-0123456789abcdef0123456789abcdef";
const DAVE: &str = "pa_cache-dave-0123456789abcdef0123456789abcdef01";
const ERIN: &str = "pa_cache-erin-0123456789abcdef0123456789abcdef01";

fn team(scope: &str, name: &str) -> (Http, FakePerplexity, Scratch) {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "cost": 0.02}));
    let dir = Scratch::new(name);
    let file = three_clients(&dir);
    let mut env = cached(&fake, &dir, scope);
    env.push((
        "PERPLEXITY_HTTP_CLIENTS_FILE".into(),
        file.display().to_string(),
    ));
    env.push((
        "PERPLEXITY_AUDIT_LOG_PATH".into(),
        dir.path("audit.jsonl").display().to_string(),
    ));
    (Http::start(&env), fake, dir)
}

#[test]
fn one_callers_answer_answers_no_other_caller_unless_the_scope_is_the_team() {
    let question = || json!({"query": "What did the board decide?"});
    let (h, fake, _dir) = team("caller", "cache-caller-scope");
    let carol = post(&h, CAROL, &modern_call(1, "perplexity_ask", question()));
    assert_eq!(carol["result"]["isError"], false, "{carol}");
    // Dave's call reaches the upstream, and nothing in his answer says Carol asked.
    let dave = post(&h, DAVE, &modern_call(2, "perplexity_ask", question()));
    let (text, is_error) = tool_text(&dave);
    assert!(!is_error && !text.contains(HIT), "{text}");
    assert_eq!(agent_creates(&fake).len(), 2);
    // Carol's own repeat is hers.
    let again = post(&h, CAROL, &modern_call(3, "perplexity_ask", question()));
    assert!(tool_text(&again).0.contains(HIT), "{again}");
    assert_eq!(agent_creates(&fake).len(), 2);
    drop(h);

    let (h, fake, dir) = team("team", "cache-team-scope");
    post(&h, CAROL, &modern_call(1, "perplexity_ask", question()));
    let dave = post(&h, DAVE, &modern_call(2, "perplexity_ask", question()));
    let (text, _) = tool_text(&dave);
    assert!(text.contains(HIT), "the team's answer: {text}");
    assert_eq!(agent_creates(&fake).len(), 1);
    // A caller refused the tool gets no hit: the refusal comes first.
    let erin = post(&h, ERIN, &modern_call(3, "perplexity_ask", question()));
    let refused = erin["error"].is_object() || erin["result"]["isError"] == true;
    assert!(refused && !erin.to_string().contains(HIT), "{erin}");
    // The audit record of Dave's call says it was the team's answer.
    let records = audit_records(&dir.path("audit.jsonl"));
    let served = records
        .iter()
        .filter(|r| r["event"] == "tool_result" && r["caller"] == "dave")
        .collect::<Vec<_>>();
    assert_eq!(served.len(), 1, "{records:?}");
    assert_eq!(served[0]["cache"], json!({"hit": true, "scope": "team"}));
}

#[test]
fn a_hit_is_served_when_no_budget_has_room_and_a_miss_is_refused() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "cost": 0.04}));
    let dir = Scratch::new("cache-budget");
    let mut env = cached(&fake, &dir, "caller");
    env.push(("PERPLEXITY_BUDGET_DAILY".into(), "0.05".into()));
    let mut s = Server::start(&env);
    let (first, is_error) = ask(&mut s, 1, json!({"query": "q"}));
    assert!(!is_error, "{first}");
    // 0.04 of 0.05 spent: another run's estimate has no room, a hit needs none.
    let (hit, is_error) = ask(&mut s, 2, json!({"query": "q"}));
    assert!(!is_error && hit.contains(HIT), "{hit}");
    let (miss, is_error) = ask(&mut s, 3, json!({"query": "another"}));
    assert!(is_error && miss.contains("has no room"), "{miss}");
    assert_eq!(agent_creates(&fake).len(), 1);
}

#[test]
fn the_drop_in_caches_only_when_asked_and_then_replies_as_the_peer_did() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "cost": 0.02}));
    let dir = Scratch::new("cache-drop-in");
    let mut env = env_with_store(&fake, &dir);
    env.retain(|(k, _)| k != "PERPLEXITY_CACHE" && k != "PERPLEXITY_TOOLS");
    env.push(("PERPLEXITY_TOOLS".into(), "lifecycle".into()));
    let mut s = Server::start(&env);
    let (a, _) = ask(&mut s, 1, json!({"query": "q"}));
    let (b, _) = ask(&mut s, 2, json!({"query": "q"}));
    assert_eq!(
        agent_creates(&fake).len(),
        2,
        "off unless PERPLEXITY_CACHE is set"
    );
    assert!(!a.contains("Cost:") && !b.contains("Cost:"), "{a}");
    let (refused, is_error) = ask(&mut s, 3, json!({"query": "q", "fresh": true}));
    assert!(
        is_error && refused.starts_with("Unknown argument(s): fresh."),
        "{refused}"
    );
    drop(s);

    env.push(("PERPLEXITY_CACHE".into(), "caller".into()));
    let mut s = Server::start(&env);
    let (first, _) = ask(&mut s, 1, json!({"query": "p"}));
    let (second, _) = ask(&mut s, 2, json!({"query": "p"}));
    assert_eq!(agent_creates(&fake).len(), 3);
    assert_eq!(first, second, "byte for byte the answer the peer gave");
}

#[test]
fn the_cli_says_the_cost_on_stderr_and_asks_fresh_with_a_flag() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "cost": 0.0123}));
    let dir = Scratch::new("cache-cli");
    let env = cached(&fake, &dir, "caller");
    let (out, err, code) = run_cli(&["ask", "What is x?"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Fake answer."), "{out}");
    assert!(err.contains("cost: 0.0123 USD"), "{err}");
    let (again, err, code) = run_cli(&["ask", "What is x?"], &env);
    assert_eq!((code, again), (0, out), "the same answer on stdout");
    assert!(err.contains(HIT) && err.contains("--fresh"), "{err}");
    assert_eq!(agent_creates(&fake).len(), 1);
    let (out, err, code) = run_cli(&["ask", "--fresh", "--json", "What is x?"], &env);
    assert!(code == 0 && !err.contains(HIT), "{err}");
    assert_eq!(agent_creates(&fake).len(), 2);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc["cost"],
        json!({"total": 0.0123, "currency": "USD", "estimated": false})
    );
    let (out, _, _) = run_cli(&["ask", "--json", "What is x?"], &env);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&doc["cost"]["total"], &doc["cache"]["hit"]),
        (&json!(0), &json!(true))
    );
    // A search served again prints as the tool gave it.
    let (first, _, _) = run_cli(&["search", "mcp"], &env);
    let (second, err, code) = run_cli(&["search", "mcp"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(HIT), "{err}");
    assert!(
        first.contains("example.org") && second.contains("example.org"),
        "{second}"
    );
}
