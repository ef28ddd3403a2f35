//! The Perplexity client's rules, seen through the tools: retries, deadlines,
//! redirects, body caps, invalid JSON, headers, and the API base restriction.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;

fn env_with(fake: &FakePerplexity, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = env_for(fake);
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    env
}

fn gets(fake: &FakePerplexity) -> usize {
    fake.requests().iter().filter(|r| r.method == "GET").count()
}

/// A run the tests can poll (created directly through the tool, then faults apply).
fn start_run(s: &mut Server) -> String {
    let r = s.request(&call(
        100,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    text.split(' ').nth(2).unwrap().to_owned()
}

fn check(s: &mut Server, id: &str) -> (String, bool) {
    tool_text(&s.request(&call(
        1,
        "perplexity_agent_result",
        json!({"response_id": id}),
    )))
}

#[test]
fn retryable_statuses_are_retried_three_times_with_backoff() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let mut s = Server::start(&env_for(&fake));
    let id = start_run(&mut s);
    fake.clear_requests();
    fake.push_fault(json!({"route": "get", "status": 429, "body": "", "times": 3}));
    let started = Instant::now();
    let r = s.request(&call(
        1,
        "perplexity_agent_result",
        json!({"response_id": id, "wait_seconds": 30}),
    ));
    let took = started.elapsed();
    let (text, is_error) = tool_text(&r);
    assert!(is_error);
    assert!(
        text.starts_with("Perplexity returned HTTP 429. (after 3 attempts) \u{2014} run "),
        "{text}"
    );
    assert_eq!(gets(&fake), 3);
    assert!(
        took >= Duration::from_secs(3),
        "backoff [1,2) + [2,3) s: {took:?}"
    );

    // Retry-After is honoured (0 s here), and a retry that succeeds is invisible.
    fake.clear_requests();
    fake.push_fault(json!({"route": "get", "status": 503, "headers": {"Retry-After": "0"}}));
    let started = Instant::now();
    let (text, is_error) = check(&mut s, &id);
    assert!(!is_error, "{text}");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "Retry-After: 0 means no backoff"
    );
    assert_eq!(gets(&fake), 2);

    // A 500 with a message: the message, retried.
    fake.clear_requests();
    fake.push_fault(json!({"route": "get", "status": 500, "json": {"error": {"message": "upstream hiccup"}}, "headers": {"Retry-After": "0"}, "times": 3}));
    let (text, _) = check(&mut s, &id);
    assert!(
        text.starts_with("upstream hiccup (after 3 attempts)"),
        "{text}"
    );
}

#[test]
fn other_statuses_are_not_retried() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    // Where a followed redirect would carry the key.
    let trap = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    let id = start_run(&mut s);
    for (fault, expected) in [
        (
            json!({"status": 401, "json": {"error": {"message": "Invalid API key", "code": 401}}}),
            "Invalid API key",
        ),
        (json!({"status": 501}), "Perplexity returned HTTP 501."),
        (
            json!({"status": 400, "json": {"error": {"message": ""}}}),
            "Perplexity returned HTTP 400.",
        ),
        (
            json!({"status": 403, "body": "<html>denied</html>"}),
            "Perplexity returned HTTP 403.",
        ),
        (
            json!({"kind": "redirect", "status": 302, "location": format!("{}/steal", trap.base_url())}),
            "Perplexity returned an HTTP 302 redirect, which this server refuses to follow.",
        ),
        (
            json!({"kind": "redirect", "status": 307}),
            "Perplexity returned an HTTP 307 redirect, which this server refuses to follow.",
        ),
        (
            json!({"kind": "invalid_json"}),
            "Perplexity returned a response that is not valid JSON (HTTP 200).",
        ),
        (
            json!({"kind": "non_object_json"}),
            "Perplexity returned a response that is not valid JSON (HTTP 200).",
        ),
        (
            json!({"kind": "oversized", "bytes": 33_554_433}),
            "Perplexity response exceeded the 33554432-byte limit.",
        ),
        (
            json!({"kind": "oversized", "bytes": 33_554_433, "chunked": true}),
            "Perplexity response exceeded the 33554432-byte limit.",
        ),
        (
            json!({"kind": "oversized", "bytes": 33_554_433, "status": 500}),
            "Perplexity response exceeded the 33554432-byte limit.",
        ),
    ] {
        fake.clear_requests();
        let mut fault = fault;
        fault["route"] = json!("get");
        fake.push_fault(fault.clone());
        let (text, is_error) = check(&mut s, &id);
        assert!(is_error, "{fault}");
        assert_eq!(
            text.split(" \u{2014} ").next().unwrap(),
            expected,
            "{fault}"
        );
        assert!(
            text.contains(&format!("run {id} may still be running")),
            "{text}"
        );
        assert_eq!(gets(&fake), 1, "not retried: {fault}");
    }
    assert!(trap.requests().is_empty(), "a redirect was followed");
    // Exactly the cap is accepted.
    fake.push_fault(json!({"route": "get", "kind": "oversized", "bytes": 33_554_432}));
    let (text, is_error) = check(&mut s, &id);
    assert!(!is_error, "{text:.200}");
}

#[test]
fn network_failures_are_retried_and_named_by_kind() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let mut s = Server::start(&env_with(&fake, &[("PERPLEXITY_AGENT_WAIT_SECONDS", "4")]));
    let id = start_run(&mut s);
    fake.clear_requests();
    fake.push_fault(json!({"route": "get", "kind": "drop", "times": 1}));
    let (text, is_error) = check(&mut s, &id);
    assert!(!is_error, "a dropped connection is retried: {text}");
    assert_eq!(gets(&fake), 2);

    // A plain check slower than its window: bounded, and a timeout by kind.
    fake.clear_requests();
    fake.push_fault(json!({"route": "get", "kind": "slow", "delay_ms": 10000, "times": 5}));
    let started = Instant::now();
    let (text, is_error) = check(&mut s, &id);
    assert!(is_error);
    assert!(
        text.starts_with("network error (timeout) (deadline exceeded) \u{2014} run "),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_plain_check_survives_one_transient_failure() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let mut s = Server::start(&env_for(&fake));
    let id = start_run(&mut s);
    fake.push_fault(json!({"route": "get", "status": 503}));
    let (text, is_error) = check(&mut s, &id);
    assert!(!is_error, "{text}");
    assert!(text.contains("is still running"));
}

#[test]
fn the_deadline_bounds_retries() {
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_with(&fake, &[("PERPLEXITY_AGENT_WAIT_SECONDS", "2")]));
    fake.push_fault(json!({"route": "create", "status": 503, "times": 10}));
    let started = Instant::now();
    let (text, is_error) =
        tool_text(&s.request(&call(1, "perplexity_agent", json!({"query": "q"}))));
    assert!(is_error);
    assert_eq!(text, "Perplexity returned HTTP 503. (deadline exceeded)");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn invalid_json_on_create_says_a_run_may_exist() {
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    fake.push_fault(json!({"route": "create", "kind": "invalid_json"}));
    let (text, is_error) = tool_text(&s.request(&call(
        1,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    )));
    assert!(is_error);
    assert_eq!(
        text,
        "Perplexity returned a response that is not valid JSON (HTTP 200). A research run may have been started anyway, but Perplexity did not say which."
    );
}

#[test]
fn requests_carry_the_expected_headers() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100}));
    let mut s = Server::start(&env_for(&fake));
    s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    let reqs = fake.requests();
    let create = &reqs[0];
    assert_eq!(create.headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(
        create.headers["user-agent"],
        format!("perplexity-agent/{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(create.headers["content-type"], "application/json");
    assert_eq!(create.headers["accept"], "text/event-stream");
    s.request(&call(
        2,
        "perplexity_agent_result",
        json!({"response_id": "resp_abc"}),
    ));
    let get = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "GET")
        .unwrap();
    assert!(
        !get.headers.contains_key("content-type"),
        "no body, no content type"
    );
    assert_eq!(get.path, "/v1/agent/resp_abc");
}

#[test]
fn the_api_base_may_only_be_loopback_http() {
    for base in [
        "https://api.perplexity.ai",
        "http://10.0.0.1:8080",
        "http://example.com",
        "https://127.0.0.1:1",
        "http://localhost.example.com",
        "not a url",
    ] {
        let mut s = Server::start(&[
            ("PERPLEXITY_API_BASE".into(), base.into()),
            ("PERPLEXITY_API_KEY".into(), KEY.into()),
        ]);
        let status = s.wait_exit(Duration::from_secs(10));
        assert_eq!(status.code(), Some(4), "{base}");
        let err = s.stderr();
        assert!(
            err.contains("PERPLEXITY_API_BASE") && err.contains("loopback"),
            "{err}"
        );
        assert!(!err.contains(KEY));
        assert!(s.drain().is_empty());
    }
}

#[test]
fn no_ambient_proxy_is_used() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100}));
    let trap = FakePerplexity::start();
    let mut env = env_for(&fake);
    for var in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        env.push((var.into(), trap.base_url()));
    }
    let mut s = Server::start(&env);
    let (text, is_error) =
        tool_text(&s.request(&call(1, "perplexity_agent", json!({"query": "q"}))));
    assert!(!is_error, "{text}");
    assert!(trap.requests().is_empty(), "an ambient proxy was used");
}

#[test]
fn no_certificate_store_is_needed_until_tls_is() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "answer": "Fine."}));
    let empty = std::env::temp_dir().join(format!("pa-no-certs-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let mut env = env_for(&fake);
    env.push(("SSL_CERT_DIR".into(), empty.display().to_string()));
    env.push((
        "SSL_CERT_FILE".into(),
        empty.join("none.pem").display().to_string(),
    ));
    let mut s = Server::start(&env);
    let r = s.request(&request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25"}),
    ));
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    let (text, is_error) =
        tool_text(&s.request(&call(2, "perplexity_agent", json!({"query": "q"}))));
    assert!(!is_error, "{text}");
    assert!(unwrap_spotlight(&text).starts_with("Fine."));
}

fn circuit_open(s: &mut Server) -> bool {
    let r = s.request(&call(9, "server_metrics", json!({})));
    r["result"]["structuredContent"]["upstream_circuit_open"]
        .as_bool()
        .expect("server_metrics says whether the circuit is open")
}

#[test]
fn five_outages_open_the_circuit_then_one_probe_decides() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let mut s = Server::start(&env_with(
        &fake,
        &[
            ("PERPLEXITY_MAX_RETRIES", "1"),
            ("PERPLEXITY_CIRCUIT_COOLDOWN_SECONDS", "1"),
        ],
    ));
    let id = start_run(&mut s);
    fake.clear_requests();
    // Six outages: five open the breaker, the sixth is the failed probe.
    fake.push_fault(json!({"route": "get", "status": 503, "times": 6}));
    for n in 1..=5 {
        let (text, is_error) = check(&mut s, &id);
        assert!(
            is_error && text.starts_with("Perplexity returned HTTP 503."),
            "{text}"
        );
        assert_eq!(gets(&fake), n);
    }
    assert!(circuit_open(&mut s));

    // Open: fails fast, nothing leaves the process, and the run is still named.
    let started = Instant::now();
    let (text, is_error) = check(&mut s, &id);
    assert!(is_error);
    assert!(
        text.starts_with("Perplexity is unavailable: 5 requests in a row failed, so requests are paused. Try again in 1s. \u{2014} run "),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(gets(&fake), 5);

    // After the cool-down exactly one probe goes; it fails, so the breaker re-opens.
    std::thread::sleep(Duration::from_millis(1100));
    let (text, _) = check(&mut s, &id);
    assert!(text.starts_with("Perplexity returned HTTP 503."), "{text}");
    assert_eq!(gets(&fake), 6);
    let (text, _) = check(&mut s, &id);
    assert!(text.contains("requests are paused"), "{text}");
    assert_eq!(gets(&fake), 6);

    // The next probe succeeds and closes it.
    std::thread::sleep(Duration::from_millis(1100));
    let (text, is_error) = check(&mut s, &id);
    assert!(!is_error, "{text}");
    assert!(!circuit_open(&mut s));
    let (_, is_error) = check(&mut s, &id);
    assert!(!is_error);
    assert_eq!(gets(&fake), 8);
}

#[test]
fn refusals_are_not_outages() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let mut s = Server::start(&env_with(&fake, &[("PERPLEXITY_MAX_RETRIES", "1")]));
    let id = start_run(&mut s);
    fake.clear_requests();
    fake.push_fault(json!({"route": "get", "status": 401, "json": {"error": {"message": "Invalid API key"}}, "times": 6}));
    for n in 1..=6 {
        let (text, _) = check(&mut s, &id);
        assert!(text.starts_with("Invalid API key"), "{text}");
        assert_eq!(gets(&fake), n, "a 401 reaches the upstream every time");
    }
    assert!(!circuit_open(&mut s));
}
