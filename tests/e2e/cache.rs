//! The research cache (`PERPLEXITY_CACHE`): a repeated question is answered once and
//! served again at no cost; what is never kept; one run for identical calls in flight
//! (a call that does not wait is handed that run; a waiter that goes away only detaches);
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

/// A call that asks for its run back at once while an identical call's run is in flight
/// is handed that run: its id, in the hand-back the tool gives for a run it started, and
/// no second create. Under the team's cache the two are different callers, and the run
/// becomes the other's too — nobody else's.
#[test]
fn a_call_that_does_not_wait_is_handed_the_run_in_flight_and_only_it_may_name_it() {
    let (h, fake, dir) = team_with(
        "team",
        "cache-handed",
        json!({"duration_ms": 3000, "cost": 0.02}),
    );
    let question = "What did the board decide?";
    let client = h.client;
    let carol = std::thread::spawn(move || {
        post(
            &client,
            CAROL,
            &modern_call(1, "perplexity_agent", json!({"query": question})),
        )
    });
    wait_until("Carol's run to start", Duration::from_secs(5), || {
        !fake.runs().is_empty()
    });
    let run = fake.runs()[0].id.clone();
    let dave = post(
        &h.client,
        DAVE,
        &modern_call(
            2,
            "perplexity_agent",
            json!({"query": question, "wait": false}),
        ),
    );
    let (handed, is_error) = tool_text(&dave);
    assert!(
        !is_error && handed.starts_with(&format!("Research run {run} is still running.")),
        "{handed}"
    );
    assert!(
        !handed.contains("Cost:") && !handed.contains(HIT),
        "{handed}"
    );
    assert_eq!(agent_creates(&fake).len(), 1, "no second run");

    // Frank made no such call: the run is one that never existed, and Perplexity is not
    // asked.
    let asked = || {
        fake.requests()
            .iter()
            .filter(|r| r.path.contains(&run))
            .count()
    };
    let before = asked();
    for (id, tool, verb) in [
        (3, "perplexity_agent_result", "collect"),
        (4, "perplexity_agent_cancel", "cancel"),
    ] {
        let frank = post(
            &h.client,
            FRANK,
            &modern_call(id, tool, json!({"response_id": run})),
        );
        let (text, is_error) = tool_text(&frank);
        assert!(
            is_error
                && text.starts_with(&format!("No research run {run} exists"))
                && text.ends_with(&format!("nothing to {verb}.")),
            "{tool}: {text}"
        );
    }
    assert_eq!(asked(), before, "refused without asking Perplexity");

    let carol = carol.join().unwrap();
    let (answer, is_error) = tool_text(&carol);
    assert!(
        !is_error && answer.contains("Fake answer.") && answer.ends_with("Cost: 0.02 USD"),
        "{answer}"
    );
    // Dave collects it as his own, and may stop it (it has ended by now).
    let collected = post(
        &h.client,
        DAVE,
        &modern_call(5, "perplexity_agent_result", json!({"response_id": run})),
    );
    let (text, is_error) = tool_text(&collected);
    assert!(!is_error && text.contains("Fake answer."), "{text}");
    let cancelled = post(
        &h.client,
        DAVE,
        &modern_call(6, "perplexity_agent_cancel", json!({"response_id": run})),
    );
    let (text, is_error) = tool_text(&cancelled);
    assert!(
        !is_error && text.starts_with(&format!("Run {run} is not running now")),
        "{text}"
    );
    assert_eq!(agent_creates(&fake).len(), 1);

    // Billed once, to Carol, who started it; Dave's call is a hit that cost nothing.
    drop(h);
    let env = cached(&fake, &dir, "team");
    let (out, err, code) = run_cli(&["usage", "--json", "--by", "caller"], &env);
    assert_eq!(code, 0, "{err}");
    let usage: Value = serde_json::from_str(&out).unwrap();
    let group = |name: &str| {
        usage["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["caller"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {usage}"))
    };
    assert_eq!(
        (&group("carol")["requests"], &group("carol")["cost"]),
        (&json!(1), &json!(0.02)),
        "{usage}"
    );
    assert_eq!(
        (
            &group("dave")["requests"],
            &group("dave")["cost"],
            &group("dave")["cache_hits"]
        ),
        (&json!(0), &json!(0.0), &json!(1)),
        "{usage}"
    );
}

/// `call`s of `perplexity_agent` with `query` as `ids` over stdio, the first once its run
/// has started (so it leads) and the others just after (so they follow it).
fn one_flight(s: &mut Server, fake: &FakePerplexity, ids: &[&str], query: &str) {
    s.send(&call(ids[0], "perplexity_agent", json!({"query": query})));
    wait_until("the leader's run to start", Duration::from_secs(5), || {
        !fake.runs().is_empty()
    });
    for id in &ids[1..] {
        s.send(&call(*id, "perplexity_agent", json!({"query": query})));
    }
    // The followers are accepted in order and join at once; give them that moment.
    std::thread::sleep(Duration::from_millis(300));
}

fn cancel(s: &mut Server, id: &str) {
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}));
}

fn upstream_cancels(fake: &FakePerplexity) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.path.ends_with("/cancel"))
        .count()
}

/// The caller of the call leading a flight goes away: it only detaches. The run goes on
/// and the calls waiting for it get its answer — one run, no cancel upstream, no reply to
/// the caller that went away.
#[test]
fn a_leader_that_goes_away_only_detaches_while_others_wait() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 2000, "cost": 0.03}));
    let dir = Scratch::new("cache-detach");
    let mut s = Server::start(&cached(&fake, &dir, "caller"));
    one_flight(&mut s, &fake, &["lead", "f1", "f2"], "the same");
    cancel(&mut s, "lead");
    let mut answered = Vec::new();
    for _ in 0..2 {
        let frame = s.recv();
        let (text, is_error) = tool_text(&frame);
        assert!(!is_error && text.contains("Fake answer."), "{text}");
        assert!(
            text.contains(HIT) && text.contains("when it cost 0.03 USD"),
            "{text}"
        );
        answered.push(frame["id"].as_str().unwrap().to_owned());
    }
    answered.sort();
    assert_eq!(answered, ["f1", "f2"]);
    s.expect_silence(Duration::from_millis(500));
    assert_eq!(agent_creates(&fake).len(), 1, "one run for all");
    assert_eq!(upstream_cancels(&fake), 0, "the run was not stopped");
    // The run is kept for the next identical call, and billed once, to the call that
    // started it.
    let (again, _) = ask(&mut s, 9, json!({"query": "the same"}));
    assert!(again.contains(HIT), "{again}");
    drop(s);
    let (out, err, code) = run_cli(
        &["usage", "--json", "--by", "tool"],
        &cached(&fake, &dir, "caller"),
    );
    assert_eq!(code, 0, "{err}");
    let usage: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            &usage["total"]["requests"],
            &usage["total"]["cost"],
            &usage["total"]["cache_hits"]
        ),
        (&json!(1), &json!(0.03), &json!(3)),
        "{usage}"
    );
}

/// The call leading a flight is handed back at its wait budget, its run still going: the
/// calls waiting for it are handed that same run, as a call that does not wait is — one
/// run, never a second paid for the same question — and collect it.
#[test]
fn a_leader_handed_back_at_its_wait_budget_hands_its_run_to_the_waiting_calls() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 4000, "cost": 0.03}));
    let dir = Scratch::new("cache-hand-on");
    let mut env = cached(&fake, &dir, "caller");
    env.push(("PERPLEXITY_AGENT_WAIT_SECONDS".into(), "1".into()));
    let mut s = Server::start(&env);
    one_flight(&mut s, &fake, &["lead", "f1", "f2"], "a long one");
    let run = fake.runs()[0].id.clone();
    let mut handed = Vec::new();
    for _ in 0..3 {
        let frame = s.recv();
        let (text, is_error) = tool_text(&frame);
        assert!(
            !is_error && text.starts_with(&format!("Research run {run} is still running.")),
            "{text}"
        );
        handed.push(frame["id"].as_str().unwrap().to_owned());
    }
    handed.sort();
    assert_eq!(handed, ["f1", "f2", "lead"]);
    assert_eq!(agent_creates(&fake).len(), 1, "one run for all");
    // Each collect waits at most the budget: called again until the run has ended.
    let mut id = 9;
    wait_until("the run to be collected", Duration::from_secs(10), || {
        id += 1;
        let reply = s.request(&call(
            id,
            "perplexity_agent_result",
            json!({"response_id": run}),
        ));
        let (text, is_error) = tool_text(&reply);
        assert!(!is_error, "{text}");
        text.contains("Fake answer.")
    });
    assert_eq!(agent_creates(&fake).len(), 1);
}

/// Under the team's cache the waiting call handed the run on is another caller: the run
/// becomes theirs too, to collect — and nobody else's.
#[test]
fn a_run_handed_on_at_the_wait_budget_is_the_waiting_callers_and_nobody_elses() {
    let (h, fake, _dir) = team_with_env(
        "team",
        "cache-hand-on-team",
        json!({"duration_ms": 4000, "cost": 0.02}),
        &[("PERPLEXITY_AGENT_WAIT_SECONDS", "1")],
    );
    let question = json!({"query": "the team's long question"});
    let ask_as = |token: &'static str, id: i64| {
        let (client, asked) = (h.client, question.clone());
        std::thread::spawn(move || {
            tool_text(&post(
                &client,
                token,
                &modern_call(id, "perplexity_agent", asked),
            ))
        })
    };
    let carol = ask_as(CAROL, 1);
    wait_until("Carol's run to start", Duration::from_secs(5), || {
        !fake.runs().is_empty()
    });
    let dave = ask_as(DAVE, 2);
    let run = fake.runs()[0].id.clone();
    for (who, handed) in [("carol", carol), ("dave", dave)] {
        let (text, is_error) = handed.join().unwrap();
        assert!(
            !is_error && text.starts_with(&format!("Research run {run} is still running.")),
            "{who}: {text}"
        );
    }
    assert_eq!(agent_creates(&fake).len(), 1, "one run for both");
    let result = |token: &str, id: i64| {
        let asked = json!({"response_id": run});
        tool_text(&post(
            &h.client,
            token,
            &modern_call(id, "perplexity_agent_result", asked),
        ))
    };
    let (text, is_error) = result(FRANK, 3);
    assert!(
        is_error && text.starts_with(&format!("No research run {run} exists")),
        "{text}"
    );
    let mut id = 3;
    wait_until("Dave to collect the run", Duration::from_secs(10), || {
        id += 1;
        let (text, is_error) = result(DAVE, id);
        assert!(!is_error, "{text}");
        text.contains("Fake answer.")
    });
    assert_eq!(agent_creates(&fake).len(), 1);
}

/// Every call of a flight goes away, the leader first: nobody is left waiting, and the
/// run is left as any abandoned call leaves it (it goes on upstream, named on stderr once,
/// to collect) — never a run per waiter, never a cancel per waiter.
#[test]
fn when_every_waiter_has_gone_the_run_is_left_once() {
    // Longer than the waits below: a leader that kept waiting for its run would be seen.
    let fake = FakePerplexity::start_with(json!({"duration_ms": 15000}));
    let dir = Scratch::new("cache-all-gone");
    let mut s = Server::start(&cached(&fake, &dir, "caller"));
    one_flight(&mut s, &fake, &["lead", "f1", "f2"], "the same");
    let run = fake.runs()[0].id.clone();
    for id in ["lead", "f1", "f2"] {
        cancel(&mut s, id);
    }
    wait_until("the run named on stderr", Duration::from_secs(5), || {
        s.stderr()
            .contains(&format!("stopped waiting for research run {run}"))
    });
    s.expect_silence(Duration::from_millis(800));
    assert_eq!(
        s.stderr()
            .matches(&format!("stopped waiting for research run {run}"))
            .count(),
        1,
        "{}",
        s.stderr()
    );
    assert_eq!(
        agent_creates(&fake).len(),
        1,
        "no waiter started a run of its own"
    );
    assert_eq!(upstream_cancels(&fake), 0);
    // The server is fine afterwards, and the run can still be collected.
    let r = s.request(&call(
        "after",
        "perplexity_agent_result",
        json!({"response_id": run}),
    ));
    assert!(tool_text(&r).0.contains("is still running"), "{r}");
}

/// A clients file of three clients with every tool and one with `search` only.
fn clients_file(dir: &Scratch) -> std::path::PathBuf {
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
        line("frank", FRANK, ""),
    ]
    .concat();
    std::fs::write(&file, text).unwrap();
    file
}

const CAROL: &str = "pa_cache-carol-0123456789abcdef0123456789abcdef";
const DAVE: &str = "pa_cache-dave-0123456789abcdef0123456789abcdef01";
const ERIN: &str = "pa_cache-erin-0123456789abcdef0123456789abcdef01";
const FRANK: &str = "pa_cache-frank-0123456789abcdef0123456789abcdef0";

fn team(scope: &str, name: &str) -> (Http, FakePerplexity, Scratch) {
    team_with(scope, name, json!({"duration_ms": 50, "cost": 0.02}))
}

/// [`team`] with the fake upstream playing `scenario`.
fn team_with(scope: &str, name: &str, scenario: Value) -> (Http, FakePerplexity, Scratch) {
    team_with_env(scope, name, scenario, &[])
}

/// [`team_with`], with `extra` in the server's environment.
fn team_with_env(
    scope: &str,
    name: &str,
    scenario: Value,
    extra: &[(&str, &str)],
) -> (Http, FakePerplexity, Scratch) {
    let fake = FakePerplexity::start_with(scenario);
    let dir = Scratch::new(name);
    let file = clients_file(&dir);
    let mut env = cached(&fake, &dir, scope);
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
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
    let carol = post(&h, CAROL, &modern_call(1, "perplexity_ask", question()));
    let run = structured(&carol)["response_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let dave = post(&h, DAVE, &modern_call(2, "perplexity_ask", question()));
    let (text, _) = tool_text(&dave);
    assert!(text.contains(HIT), "the team's answer: {text}");
    assert_eq!(agent_creates(&fake).len(), 1);
    // The answer, not Carol's run: its id stays hers; her own repeat names it.
    assert!(!dave.to_string().contains(&run), "{dave}");
    assert_eq!(structured(&dave)["status"], "completed", "{dave}");
    let again = post(&h, CAROL, &modern_call(4, "perplexity_ask", question()));
    assert_eq!(structured(&again)["response_id"], run.as_str(), "{again}");
    // A caller refused the tool gets no hit: the refusal comes first.
    let erin = post(&h, ERIN, &modern_call(3, "perplexity_ask", question()));
    let refused = erin["error"].is_object() || erin["result"]["isError"] == true;
    assert!(refused && !erin.to_string().contains(HIT), "{erin}");
    // The audit record of Dave's call says it was the team's answer (the log is written
    // behind the calls: a loaded machine may show it a moment later).
    let served = || {
        audit_records(&dir.path("audit.jsonl"))
            .into_iter()
            .filter(|r| r["event"] == "tool_result" && r["caller"] == "dave")
            .collect::<Vec<_>>()
    };
    wait_until("Dave's audit record", Duration::from_secs(5), || {
        !served().is_empty()
    });
    let served = served();
    assert_eq!(served.len(), 1, "{served:?}");
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
