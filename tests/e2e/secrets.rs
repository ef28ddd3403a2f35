//! The API key goes into the Authorization header to the API base and nowhere else:
//! not stdout, stderr (even at trace level), URLs, bodies or other headers — even when
//! the upstream echoes it back.

use serde_json::json;

use crate::common::*;

#[test]
fn the_key_never_leaves_the_authorization_header() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 200}));
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_LOG".into(), "trace".into()));
    env.push(("PERPLEXITY_AGENT_WAIT_SECONDS".into(), "3".into()));
    let mut s = Server::start(&env);
    let echo = format!("Invalid API key {KEY} (Authorization: Bearer {KEY})");
    s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    s.request(&call(
        2,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    ));
    s.request(&call(
        3,
        "perplexity_agent_result",
        json!({"response_id": "resp_x", "wait_seconds": 1}),
    ));
    s.request(&call(
        4,
        "perplexity_agent_cancel",
        json!({"response_id": "resp_x"}),
    ));
    // Upstream error bodies, failed runs and answers that echo the key are scrubbed.
    fake.push_fault(json!({"route": "get", "status": 401, "json": {"error": {"message": echo}}}));
    let (text, _) = tool_text(&s.request(&call(
        5,
        "perplexity_agent_result",
        json!({"response_id": "resp_x"}),
    )));
    assert!(text.starts_with("Invalid API key [redacted]"), "{text}");
    fake.set_scenario(json!({"duration_ms": 100, "final_status": "failed", "error_message": echo}));
    s.request(&call(6, "perplexity_agent", json!({"query": "q"})));
    fake.set_scenario(json!({"duration_ms": 100, "answer": echo, "stream": false}));
    s.request(&call(7, "perplexity_agent", json!({"query": "q"})));
    fake.set_scenario(json!({"duration_ms": 100, "answer": echo}));
    s.request(&call(8, "perplexity_agent", json!({"query": "q"})));
    fake.push_fault(json!({"route": "get", "kind": "redirect"}));
    s.request(&call(
        9,
        "perplexity_agent_result",
        json!({"response_id": "resp_x"}),
    ));
    s.request(&call(
        10,
        "perplexity_agent",
        json!({"query": "q", "api_key": KEY}),
    ));
    s.close_stdin();
    s.wait_exit(std::time::Duration::from_secs(15));
    s.drain();

    let stdout = s.seen.join("\n");
    assert!(stdout.contains("[redacted]"), "the echo test has teeth");
    assert_eq!(s.seen.len(), 10);
    assert!(!stdout.contains(KEY), "key on stdout");
    let stderr = s.stderr();
    assert!(stderr.len() > 1000, "trace logging was on");
    assert!(!stderr.contains(KEY), "key on stderr");
    let requests = fake.requests();
    assert!(requests.len() >= 8);
    for r in &requests {
        assert!(!r.path.contains(KEY) && !r.query.as_deref().unwrap_or("").contains(KEY));
        assert!(!r.body.contains(KEY), "key in a body: {}", r.body);
        for (name, value) in &r.headers {
            if name == "authorization" {
                assert_eq!(value, &format!("Bearer {KEY}"));
            } else {
                assert!(!value.contains(KEY), "key in header {name}");
            }
        }
    }
}

#[test]
fn a_key_the_upstream_echoes_json_escaped_is_scrubbed_after_decoding() {
    let fake = FakePerplexity::start();
    // The key with its first letter written as a JSON escape: invisible to a byte scrub.
    let escaped = format!("\\u0070{}", &KEY[1..]);
    let run = format!(
        r#"{{"id":"resp_x","object":"response","created_at":1,"model":"m","status":"completed","output":[{{"type":"message","id":"m","role":"assistant","status":"completed","content":[{{"type":"output_text","text":"echo {escaped}"}}]}}]}}"#
    );
    fake.push_fault(json!({"route": "get", "status": 200, "body": run}));
    fake.push_fault(json!({"route": "create", "status": 400,
        "body": format!(r#"{{"error":{{"message":"bad header {escaped}"}}}}"#)}));
    let mut s = Server::start(&env_for(&fake));
    let (text, _) = tool_text(&s.request(&call(
        1,
        "perplexity_agent_result",
        json!({"response_id": "resp_x"}),
    )));
    assert!(text.contains("echo [redacted]"), "{text}");
    let (text, is_error) = tool_text(&s.request(&call(2, "perplexity_ask", json!({"query": "q"}))));
    assert!(is_error && text.contains("bad header [redacted]"), "{text}");
    assert!(
        !s.seen.iter().any(|l| l.contains(KEY)),
        "the key reached stdout"
    );
    assert!(!s.stderr().contains(KEY));
}

#[test]
fn key_shaped_strings_from_clients_are_never_reflected() {
    let fake = FakePerplexity::start();
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_LOG".into(), "debug".into()));
    env.push(("PERPLEXITY_AGENT_WAIT_SECONDS".into(), "2".into()));
    env.push(("PERPLEXITY_TOOLS".into(), "all".into()));
    let mut s = Server::start(&env);
    let pplx = "pplx-ClientShaped0123456";
    let token = "c1ient5upplied0token0abcdefghij";
    let bearer = format!("Bearer {token}");
    let planted = [pplx, token, KEY];
    let requests = [
        // Unknown argument names (the configured key among them).
        call(
            1,
            "perplexity_agent",
            json!({"query": "q", pplx: 1, KEY: 2}),
        ),
        // Run ids, in every lifecycle text that names the run.
        call(2, "perplexity_agent_result", json!({"response_id": pplx})),
        call(3, "perplexity_agent_cancel", json!({"response_id": pplx})),
        call(4, "perplexity_agent_result", json!({"response_id": bearer})),
        // Fetch errors name the URL.
        call(
            5,
            "fetch_url",
            json!({"url": format!("http://127.0.0.1:9/{pplx}")}),
        ),
        call(
            6,
            "fetch_url",
            json!({"url": format!("http://{pplx}.invalid/")}),
        ),
        // Method and tool names, resource URIs.
        request(7, pplx, json!({})),
        call(8, pplx, json!({})),
        call(9, &bearer, json!({})),
        request(
            10,
            "resources/read",
            json!({"uri": format!("perplexity://runs/{pplx}")}),
        ),
        request(
            11,
            "resources/read",
            json!({"uri": format!("perplexity://{bearer}")}),
        ),
        // An answer that quotes the query back.
        call(
            12,
            "perplexity_ask",
            json!({"query": format!("say {pplx} and {bearer}")}),
        ),
    ];
    for message in &requests {
        s.request(message);
    }
    for line in &s.seen {
        for secret in planted {
            assert!(!line.contains(secret), "{secret} reflected in {line}");
        }
    }
    let stderr = s.stderr();
    for secret in planted {
        assert!(!stderr.contains(secret), "{secret} in stderr: {stderr}");
    }
    assert!(
        s.seen.iter().any(|l| l.contains("pplx-***REDACTED***")),
        "the scrub ran (and the test can see it)"
    );
}
