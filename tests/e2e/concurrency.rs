//! Requests are handled concurrently: ping during a long wait, cancellation of a wait,
//! EOF with calls in flight, SIGTERM.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;

#[test]
fn ping_and_tools_list_are_answered_during_a_long_wait() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 3000}));
    let mut s = Server::start(&env_for(&fake));
    s.send(&call(1, "perplexity_agent", json!({"query": "slow"})));
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let pong = s.request(&request(2, "ping", json!({})));
    assert_eq!(pong["result"], json!({}));
    let list = s.request(&request(3, "tools/list", json!({})));
    assert!(list["result"]["tools"].is_array());
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "answered while the call waits"
    );
    let (done, _) = s.recv_response(&json!(1));
    assert!(!tool_text(&done).1);
}

#[test]
fn several_runs_are_awaited_in_parallel() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 1500}));
    let mut s = Server::start(&env_for(&fake));
    let started = Instant::now();
    for id in 1..=4 {
        s.send(&call(
            id,
            "perplexity_agent",
            json!({"query": format!("q{id}")}),
        ));
    }
    let mut seen = Vec::new();
    for _ in 1..=4 {
        let frame = s.recv();
        assert!(!tool_text(&frame).1);
        seen.push(frame["id"].as_i64().unwrap());
    }
    seen.sort();
    assert_eq!(seen, [1, 2, 3, 4]);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "not one after another: {:?}",
        started.elapsed()
    );
}

#[test]
fn cancelled_requests_get_no_reply_and_the_run_is_not_cancelled() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 10000}));
    let mut s = Server::start(&env_for(&fake));
    s.send(&call("call-1", "perplexity_agent", json!({"query": "q"})));
    wait_until("the run to exist", Duration::from_secs(5), || {
        !fake.runs().is_empty()
    });
    let id = fake.runs()[0].id.clone();
    // A cancellation for another id (and a numeric look-alike) changes nothing.
    s.send(
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"other"}}),
    );
    s.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-1","reason":"user"}}));
    let pong = s.request(&request(2, "ping", json!({})));
    assert_eq!(pong["id"], 2);
    s.expect_silence(Duration::from_millis(800));
    assert!(
        !fake.requests().iter().any(|r| r.path.ends_with("/cancel")),
        "the upstream run is never cancelled on our own accord"
    );
    wait_until("the abandoned id on stderr", Duration::from_secs(5), || {
        s.stderr().contains(&id)
    });
    // The server is fine afterwards.
    let r = s.request(&call(
        3,
        "perplexity_agent_result",
        json!({"response_id": id}),
    ));
    assert!(tool_text(&r).0.contains("is still running"));
}

/// Cancelled while the create is on the wire: the create may already have started a paid
/// run, so the call goes on until the answer names it, then logs the id (dropping the
/// create there left a run nobody could collect). Still no reply.
#[test]
fn a_call_cancelled_mid_create_still_names_its_run() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 10000}));
    fake.push_fault(json!({"route": "create", "kind": "slow", "delay_ms": 1500, "times": 1}));
    let mut s = Server::start(&env_for(&fake));
    s.send(&call("mid", "perplexity_agent", json!({"query": "q"})));
    wait_until("the create to arrive", Duration::from_secs(5), || {
        fake.requests().iter().any(|r| r.method == "POST")
    });
    assert!(fake.runs().is_empty(), "the fake answers the create later");
    s.send(
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"mid"}}),
    );
    wait_until("the run's id on stderr", Duration::from_secs(10), || {
        let runs = fake.runs();
        !runs.is_empty() && s.stderr().contains(&runs[0].id)
    });
    s.expect_silence(Duration::from_millis(300));
}

#[test]
fn eof_with_calls_in_flight_answers_them_then_exits_zero() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 1200}));
    let mut s = Server::start(&env_for(&fake));
    s.send(&call(1, "perplexity_agent", json!({"query": "a"})));
    s.send(&call(
        2,
        "perplexity_agent",
        json!({"query": "b", "wait": false}),
    ));
    s.send(&request(3, "ping", json!({})));
    s.close_stdin();
    let status = s.wait_exit(Duration::from_secs(15));
    assert!(status.success());
    let frames = s.drain();
    let mut ids: Vec<i64> = frames.iter().map(|f| f["id"].as_i64().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, [1, 2, 3]);
}

#[test]
fn the_call_past_the_slot_cap_is_refused_at_once_without_a_rate_token() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 4000}));
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_RATE_PER_MINUTE".into(), "1".into()));
    env.push(("PERPLEXITY_RATE_BURST".into(), "65".into()));
    let mut s = Server::start(&env);
    // 64 slots: the 65th call is refused in order, before anything upstream.
    for id in 1..=65 {
        s.send(&call(id, "perplexity_agent", json!({"query": "slow"})));
    }
    let started = Instant::now();
    let (refused, _) = s.recv_response(&json!(65));
    let (text, is_error) = tool_text(&refused);
    assert!(is_error);
    assert_eq!(
        text,
        "This server is already handling 64 tool calls. Retry when one of them has finished."
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once"
    );
    // The busy refusal took no token: a 66th call, once the slots free up, is admitted
    // with the burst's last token.
    for _ in 1..=64 {
        assert!(!tool_text(&s.recv()).1);
    }
    let last = s.request(&call(66, "perplexity_agent", json!({"query": "q"})));
    assert!(!tool_text(&last).1, "{last}");
}
