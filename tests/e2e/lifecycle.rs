//! The three research-lifecycle tools against the fake upstream: request bodies,
//! rendering, waits, progress, and the texts the reference peer's clients depend on.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

fn env_with(fake: &FakePerplexity, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = env_for(fake);
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    env
}

fn count(fake: &FakePerplexity, method: &str, path_prefix: &str) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.method == method && r.path.starts_with(path_prefix))
        .count()
}

/// The id in a still-running text.
fn running_id(text: &str) -> String {
    text.strip_prefix("Research run ")
        .and_then(|t| t.split(' ').next())
        .unwrap_or_else(|| panic!("not a still-running text: {text}"))
        .to_owned()
}

#[test]
fn a_completed_run_is_rendered_with_sources_and_spotlighted() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 300,
        "answer_parts": ["Part one. ", "Part two."],
        "sources": [
            {"title": "First", "url": "https://one.example/a"},
            {"title": "Second", "url": "https://two.example/b"},
            {"url": "https://three.example/no-title"},
            {"title": "Dup", "url": "https://one.example/a"}
        ],
        "search_batches": 2
    }));
    // Numbered by search_results id, as the answer text cites them; a page found again
    // under another id stays citable under that id too: the reference peer's drop-in
    // lists it once per id, our own profile once per page with both ids.
    let mut lifecycle = env_for(&fake);
    lifecycle.retain(|(k, _)| k != "PERPLEXITY_TOOLS");
    lifecycle.push(("PERPLEXITY_TOOLS".into(), "lifecycle".into()));
    for (env, sources) in [
        (
            lifecycle,
            "[1] First \u{2014} https://one.example/a\n[2] Second \u{2014} https://two.example/b\n[3] https://three.example/no-title \u{2014} https://three.example/no-title\n[4] Dup \u{2014} https://one.example/a",
        ),
        (
            env_for(&fake),
            "[1][4] First \u{2014} https://one.example/a\n[2] Second \u{2014} https://two.example/b\n[3] https://three.example/no-title \u{2014} https://three.example/no-title",
        ),
    ] {
        let mut s = Server::start(&env);
        let r = s.request(&call(
            1,
            "perplexity_agent",
            json!({"query": "  What is MCP?  "}),
        ));
        assert_frame(Era::Legacy, "tools/call", &r);
        let (text, is_error) = tool_text(&r);
        assert!(!is_error, "{text}");
        let body = unwrap_spotlight(&text);
        assert_eq!(body, format!("Part one. Part two.\n\nSources:\n{sources}"));
    }
    let bodies = agent_creates(&fake);
    assert_eq!(bodies.len(), 2, "exactly one create per call");
    assert_eq!(
        bodies[0],
        json!({"input":"What is MCP?","preset":"medium","background":true,"stream":true})
    );
    let keys: Vec<&String> = bodies[0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["input", "preset", "background", "stream"],
        "wire key order"
    );
}

#[test]
fn filters_go_inside_the_web_search_tool() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100}));
    let mut s = Server::start(&env_for(&fake));
    s.request(&call(
        1,
        "perplexity_agent",
        json!({
            "query": "q", "preset": " fast ", "recency": "week",
            "domains": ["nasa.gov", "  ", "", " esa.int "]
        }),
    ));
    s.request(&call(
        2,
        "perplexity_agent",
        json!({"query": "q", "recency": null, "domains": ["  "]}),
    ));
    let bodies = agent_creates(&fake);
    assert_eq!(bodies[0]["preset"], "fast");
    assert_eq!(
        bodies[0]["tools"],
        json!([{"type":"web_search","filters":{"search_recency_filter":"week","search_domain_filter":["nasa.gov"," esa.int "]}}])
    );
    assert!(
        bodies[1].get("tools").is_none(),
        "no tools entry: the preset keeps its own search configuration"
    );
    for b in &bodies {
        for never in [
            "model",
            "models",
            "store",
            "max_output_tokens",
            "reasoning",
            "instructions",
            "previous_response_id",
            "max_tokens",
        ] {
            assert!(b.get(never).is_none(), "{never} sent");
        }
    }
}

#[test]
fn wait_false_returns_the_id_at_once_without_polling() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 5000}));
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call(
        1,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error);
    let id = running_id(&text);
    // A call waits at most the wait budget: the text says so rather than promising to
    // block until the run ends.
    assert_eq!(
        text,
        format!(
            "Research run {id} is still running.\nProgress: just submitted\n\nCollect it with perplexity_agent_result(response_id=\"{id}\"): a call waits up to wait_seconds, at most 55 s here, so call again while it is still going. If you no longer need it, stop it with perplexity_agent_cancel(response_id=\"{id}\")."
        )
    );
    assert_eq!(
        count(&fake, "GET", "/v1/agent"),
        0,
        "no GET after wait: false"
    );
    assert!(
        agent_creates(&fake)[0].get("stream").is_none(),
        "no stream needed"
    );
    // The drop-in profile keeps the reference peer's words, byte for byte.
    let mut reference = Server::start(&env_with(&fake, &[("PERPLEXITY_TOOLS", "lifecycle")]));
    let (text, _) = tool_text(&reference.request(&call(
        1,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    )));
    let reference_id = running_id(&text);
    assert_eq!(
        text,
        format!(
            "Research run {reference_id} is still running.\nProgress: just submitted\n\nCollect it with perplexity_agent_result(response_id=\"{reference_id}\"). Pass wait_seconds to block until it finishes, or call it again later. If you no longer need it, stop it with perplexity_agent_cancel(response_id=\"{reference_id}\")."
        )
    );
}

#[test]
fn a_run_that_outlasts_the_budget_is_handed_back_not_cancelled() {
    // Search batches land at about 1.5 s, 3 s and 4.5 s: one before the 2 s budget ends,
    // with room to spare on a loaded machine.
    let fake = FakePerplexity::start_with(
        json!({"duration_ms": 10000, "search_batches": 3, "sources": [
        {"title":"a","url":"https://a.example"},{"title":"b","url":"https://b.example"},
        {"title":"c","url":"https://c.example"}]}),
    );
    let mut s = Server::start(&env_with(&fake, &[("PERPLEXITY_AGENT_WAIT_SECONDS", "2")]));
    let started = Instant::now();
    let r = s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    let took = started.elapsed();
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "still running is not an error: {text}");
    // The run's age (Perplexity's created_at), not how long this call waited.
    assert!(
        text.contains("is still running.\nProgress: status in_progress, running for ")
            && text.contains(" s; 1 search result(s) gathered"),
        "{text}"
    );
    assert!(
        took < Duration::from_secs(5),
        "the wait budget is a real bound: {took:?}"
    );
    assert_eq!(
        count(&fake, "POST", "/v1/agent/"),
        0,
        "never cancelled on timeout"
    );

    // Collect it later: a plain check makes one GET and still gives the run's age.
    let id = running_id(&text);
    fake.clear_requests();
    let r = s.request(&call(
        2,
        "perplexity_agent_result",
        json!({"response_id": id}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error);
    assert!(
        text.contains("Progress: status in_progress, running for "),
        "{text}"
    );
    assert_eq!(count(&fake, "GET", "/v1/agent/"), 1);

    // wait_seconds beyond the budget is clamped, not rejected.
    let started = Instant::now();
    let r = s.request(&call(
        3,
        "perplexity_agent_result",
        json!({"response_id": id, "wait_seconds": 100000}),
    ));
    assert!(started.elapsed() < Duration::from_secs(6));
    let (text, _) = tool_text(&r);
    assert!(
        text.contains("running for ") && text.contains("at most 2 s here"),
        "the wait is the clamped one: {text}"
    );
}

#[test]
fn terminal_outcomes() {
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    let cases = [
        (
            json!({"final_status": "failed", "error_message": "quota exhausted"}),
            "The research run failed: quota exhausted",
            true,
        ),
        (
            json!({"final_status": "failed", "error_message": null}),
            "The research run failed",
            true,
        ),
        (
            json!({"final_status": "cancelled"}),
            "The research run was cancelled.",
            true,
        ),
    ];
    for (i, (mut scenario, expected, error)) in cases.into_iter().enumerate() {
        scenario["duration_ms"] = json!(100);
        fake.set_scenario(scenario);
        let r = s.request(&call(i as i64, "perplexity_agent", json!({"query": "q"})));
        // The run exists, so the error names it (the peer's text did not).
        let id = fake.runs().last().map(|r| r.id.clone()).unwrap();
        assert_eq!(
            tool_text(&r),
            (format!("{expected} (response_id: {id})"), error)
        );
    }
    fake.set_scenario(
        json!({"duration_ms": 100, "final_status": "failed", "error_message": "x".repeat(900)}),
    );
    let (text, _) = tool_text(&s.request(&call(10, "perplexity_agent", json!({"query": "q"}))));
    let id = fake.runs().last().map(|r| r.id.clone()).unwrap();
    assert_eq!(
        text.chars().count(),
        "The research run failed: ".len() + 500 + format!(" (response_id: {id})").len()
    );
    assert!(text.ends_with(&format!("x\u{2026} (response_id: {id})")));

    fake.set_scenario(json!({"duration_ms": 100, "final_status": "incomplete", "answer": "Half."}));
    let (text, error) = tool_text(&s.request(&call(11, "perplexity_agent", json!({"query": "q"}))));
    assert!(!error);
    let body = unwrap_spotlight(&text);
    assert!(
        body.starts_with(
            "NOTE: Perplexity marked this run INCOMPLETE; the answer below may be partial.\n\nHalf."
        ),
        "{body}"
    );

    fake.set_scenario(json!({"duration_ms": 100, "answer": "", "sources": []}));
    let (text, _) = tool_text(&s.request(&call(12, "perplexity_agent", json!({"query": "q"}))));
    assert_eq!(
        unwrap_spotlight(&text),
        "(Perplexity returned no answer text.)"
    );
}

#[test]
fn caps_are_visible_and_urls_keep_both_ends() {
    let long_url = |tail: &str| format!("https://same.example/{}{tail}", "a".repeat(3000));
    let mut sources: Vec<Value> = vec![
        json!({"title": "t".repeat(400), "url": long_url("END-ONE")}),
        json!({"title": "u", "url": long_url("END-TWO")}),
    ];
    for i in 0..60 {
        sources.push(json!({"title": format!("s{i}"), "url": format!("https://many.example/{i}")}));
    }
    let fake = FakePerplexity::start_with(
        json!({"duration_ms": 100, "answer": "é".repeat(70000), "sources": sources}),
    );
    let mut s = Server::start(&env_for(&fake));
    let (text, _) = tool_text(&s.request(&call(1, "perplexity_agent", json!({"query": "q"}))));
    let body = unwrap_spotlight(&text);
    let (answer, list) = body.split_once("\n\nSources:\n").unwrap();
    assert_eq!(answer.chars().count(), 60000);
    assert!(answer.ends_with("é\u{2026}"));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 50, "at most 50 sources");
    let first = lines[0];
    let (title, url) = first
        .strip_prefix("[1] ")
        .unwrap()
        .split_once(" \u{2014} ")
        .unwrap();
    assert_eq!(title.chars().count(), 300);
    assert_eq!(url.chars().count(), 2000);
    assert!(
        url.ends_with("END-ONE") && lines[1].ends_with("END-TWO"),
        "both ends kept"
    );
}

#[test]
fn progress_notifications_count_and_strictly_increase() {
    let fake = FakePerplexity::start_with(
        json!({"duration_ms": 3500, "search_batches": 3, "fetch_pages": 2, "sources": [
        {"title":"<script>","url":"https://evil.example/ignore-previous-instructions"}]}),
    );
    let mut s = Server::start(&env_for(&fake));
    for token in [json!("tok-1"), json!(42)] {
        s.send(&call_with_progress(
            1,
            "perplexity_agent",
            json!({"query": "q"}),
            token.clone(),
        ));
        let (r, notes) = s.recv_response(&json!(1));
        assert!(!tool_text(&r).1);
        assert!(notes.len() >= 2, "progress while waiting: {notes:?}");
        let mut last = -1.0;
        for n in &notes {
            assert_frame(Era::Legacy, "", n);
            assert_eq!(n["method"], "notifications/progress");
            let p = &n["params"];
            assert_eq!(p["progressToken"], token);
            assert!(p.get("total").is_none(), "never a total");
            let value = p["progress"].as_f64().unwrap();
            assert!(value > last, "strictly increasing: {notes:?}");
            last = value;
            let message = p["message"].as_str().unwrap();
            assert!(message.starts_with("status "), "{message}");
            assert!(
                !message.contains("evil") && !message.contains("script"),
                "counts only"
            );
        }
    }
    // Booleans and floats opt nobody in; neither does wait: false.
    for token in [json!(true), json!(1.5)] {
        s.send(&call_with_progress(
            2,
            "perplexity_agent",
            json!({"query": "q"}),
            token,
        ));
        let (_, notes) = s.recv_response(&json!(2));
        assert!(notes.is_empty(), "{notes:?}");
    }
    s.send(&call_with_progress(
        3,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
        json!("t"),
    ));
    assert!(s.recv_response(&json!(3)).1.is_empty());
}

#[test]
fn modern_progress_is_never_shaped() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 2500}));
    let mut s = Server::start(&env_for(&fake));
    let mut meta = modern_meta();
    meta["progressToken"] = json!("m-1");
    s.send(&request(
        1,
        "tools/call",
        json!({"name":"perplexity_agent","arguments":{"query":"q"},"_meta": meta}),
    ));
    let (r, notes) = s.recv_response(&json!(1));
    assert_frame(Era::Modern, "tools/call", &r);
    assert_eq!(r["result"]["resultType"], "complete");
    assert!(!notes.is_empty());
    for n in &notes {
        assert_frame(Era::Modern, "", n);
        assert!(n.get("resultType").is_none() && n["params"].get("_meta").is_none());
    }
}

#[test]
fn polling_is_the_fallback_when_the_upstream_does_not_stream() {
    let fake = FakePerplexity::start_with(
        json!({"duration_ms": 1000, "stream": false, "answer": "Polled."}),
    );
    let mut s = Server::start(&env_for(&fake));
    s.send(&call_with_progress(
        1,
        "perplexity_agent",
        json!({"query": "q"}),
        json!("p"),
    ));
    let (r, notes) = s.recv_response(&json!(1));
    let (text, _) = tool_text(&r);
    assert!(unwrap_spotlight(&text).starts_with("Polled."));
    // First GET at once (not terminal → one progress note), the next after 2 s.
    assert_eq!(count(&fake, "GET", "/v1/agent/"), 2);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0]["params"]["progress"].as_f64().unwrap() < 1.0);
}

#[test]
fn without_a_free_stream_slot_the_run_is_polled() {
    // PERPLEXITY_MAX_EVENT_STREAMS=0: every wait polls (what the 129th concurrent wait
    // does by default), so no upstream connection is held for the whole wait.
    let fake = FakePerplexity::start_with(json!({"duration_ms": 300, "answer": "Polled."}));
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_MAX_EVENT_STREAMS".into(), "0".into()));
    let mut s = Server::start(&env);
    let (text, is_error) =
        tool_text(&s.request(&call(1, "perplexity_agent", json!({"query": "q"}))));
    assert!(
        !is_error && unwrap_spotlight(&text).starts_with("Polled."),
        "{text}"
    );
    let requests = fake.requests();
    let create = requests.iter().find(|r| r.method == "POST").unwrap();
    assert!(
        create.body_json.as_ref().unwrap().get("stream").is_none(),
        "no stream asked for: {}",
        create.body
    );
    assert!(
        requests
            .iter()
            .filter(|r| r.method == "GET")
            .all(|r| r.query.is_none()),
        "plain polls only"
    );
}

#[test]
fn a_dropped_stream_is_resumed_or_replaced_by_polling() {
    let fake = FakePerplexity::start_with(
        json!({"duration_ms": 600, "stream_drop_after": 2, "answer": "Resumed."}),
    );
    let mut s = Server::start(&env_for(&fake));
    let (text, _) = tool_text(&s.request(&call(1, "perplexity_agent", json!({"query": "q"}))));
    assert!(unwrap_spotlight(&text).starts_with("Resumed."));
    let resumes: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .collect();
    assert!(
        resumes[0]
            .query
            .as_deref()
            .unwrap_or("")
            .contains("starting_after=1"),
        "{resumes:?}"
    );
    assert_eq!(agent_creates(&fake).len(), 1, "the create is never re-sent");

    fake.set_scenario(
        json!({"duration_ms": 600, "stream_drop_after": 1, "resume": false, "answer": "Polled."}),
    );
    fake.clear_requests();
    let (text, _) = tool_text(&s.request(&call(2, "perplexity_agent", json!({"query": "q"}))));
    assert!(unwrap_spotlight(&text).starts_with("Polled."));
    assert_eq!(agent_creates(&fake).len(), 1);

    // A terminal event without the full run: one GET fetches it.
    fake.set_scenario(
        json!({"duration_ms": 300, "stream_terminal_full": false, "answer": "Fetched."}),
    );
    fake.clear_requests();
    let (text, _) = tool_text(&s.request(&call(3, "perplexity_agent", json!({"query": "q"}))));
    assert!(unwrap_spotlight(&text).starts_with("Fetched."));
    assert_eq!(count(&fake, "GET", "/v1/agent/"), 1);
}

#[test]
fn create_answers_without_a_usable_id() {
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    for (i, (response, expected)) in [
        (
            json!({"status": "queued"}),
            "Perplexity accepted the request but returned no id.",
        ),
        (
            json!({"id": ""}),
            "Perplexity accepted the request but returned no id.",
        ),
        (
            json!({"id": 5}),
            "Perplexity accepted the request but returned no id.",
        ),
        (
            json!({"id": "../../etc/passwd"}),
            "Malformed response_id. Expected the identifier returned by perplexity_agent.",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        fake.set_scenario(json!({"create_response": response, "stream": false}));
        fake.clear_requests();
        let r = s.request(&call(i as i64, "perplexity_agent", json!({"query": "q"})));
        assert_eq!(tool_text(&r), (expected.to_owned(), true));
        assert_eq!(
            count(&fake, "GET", "/"),
            0,
            "the bad id never reaches a URL"
        );
    }
}

#[test]
fn errors_after_create_carry_the_response_id() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 5000, "stream": false}));
    let mut s = Server::start(&env_for(&fake));
    fake.push_fault(json!({"route": "get", "status": 401, "json": {"error": {"message": "Invalid API key", "code": 401}}}));
    let (text, is_error) =
        tool_text(&s.request(&call(1, "perplexity_agent", json!({"query": "q"}))));
    assert!(is_error);
    let id = fake.runs()[0].id.clone();
    assert_eq!(
        text,
        format!(
            "Invalid API key \u{2014} run {id} may still be running; collect it with perplexity_agent_result(response_id=\"{id}\") or stop it with perplexity_agent_cancel(response_id=\"{id}\")."
        )
    );
    // The result tool too (the id is known from the argument).
    fake.push_fault(json!({"route": "get", "status": 404}));
    let (text, _) = tool_text(&s.request(&call(
        2,
        "perplexity_agent_result",
        json!({"response_id": id}),
    )));
    // 404 is "no such run": no invitation to poll again.
    assert_eq!(
        text,
        format!(
            "No research run {id} exists for this API key (a wrong id, another account's run, a run created with store: false, or one that has expired): there is nothing to collect."
        )
    );
}

#[test]
fn collect_a_finished_run_and_validate_ids_before_any_request() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "answer": "Done."}));
    let mut s = Server::start(&env_for(&fake));
    let (text, _) = tool_text(&s.request(&call(
        1,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    )));
    let id = running_id(&text);
    std::thread::sleep(Duration::from_millis(300));
    let r = s.request(&call(
        2,
        "perplexity_agent_result",
        json!({"response_id": format!("  {id} "), "wait_seconds": null}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error);
    assert!(unwrap_spotlight(&text).starts_with("Done."));

    fake.clear_requests();
    for (args, expected) in [
        (
            json!({}),
            "'response_id' is required and must be a non-empty string.",
        ),
        (
            json!({"response_id": "  "}),
            "'response_id' is required and must be a non-empty string.",
        ),
        (
            json!({"response_id": null}),
            "'response_id' is required and must be a non-empty string.",
        ),
        (
            json!({"response_id": "../etc/passwd"}),
            "Malformed response_id. Expected the identifier returned by perplexity_agent.",
        ),
        (
            json!({"response_id": "a".repeat(129)}),
            "Malformed response_id. Expected the identifier returned by perplexity_agent.",
        ),
        (
            json!({"response_id": "resp_1", "wait_seconds": true}),
            "'wait_seconds' must be a non-negative integer.",
        ),
        (
            json!({"response_id": "resp_1", "wait_seconds": 5.0}),
            "'wait_seconds' must be a non-negative integer.",
        ),
        (
            json!({"response_id": "resp_1", "wait_seconds": -1}),
            "'wait_seconds' must be a non-negative integer.",
        ),
        (
            json!({"response_id": "resp_1", "wait": true}),
            "Unknown argument(s): wait. Accepted: response_id, wait_seconds.",
        ),
    ] {
        let r = s.request(&call(3, "perplexity_agent_result", args.clone()));
        assert_eq!(tool_text(&r), (expected.to_owned(), true), "{args}");
    }
    let r = s.request(&call(
        4,
        "perplexity_agent_cancel",
        json!({"response_id": "x/../y"}),
    ));
    assert_eq!(
        tool_text(&r).0,
        "Malformed response_id. Expected the identifier returned by perplexity_agent."
    );
    let r = s.request(&call(
        5,
        "perplexity_agent",
        json!({"query": "q", "domain": ["a.org"], "api_key": "k"}),
    ));
    assert_eq!(
        tool_text(&r).0,
        "Unknown argument(s): api_key, domain. Accepted: domains, fresh, preset, query, recency, wait."
    );
    assert!(
        fake.requests().is_empty(),
        "validation never reaches the network"
    );
}

#[test]
fn cancel_outcomes_are_decided_by_status_code() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 10000}));
    let mut s = Server::start(&env_for(&fake));
    let (text, _) = tool_text(&s.request(&call(
        1,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    )));
    let id = running_id(&text);
    let r = s.request(&call(
        2,
        "perplexity_agent_cancel",
        json!({"response_id": id}),
    ));
    assert_eq!(
        tool_text(&r),
        (
            format!(
                "Cancellation requested for {id}. The run stops shortly after; check with perplexity_agent_result if you need its terminal status."
            ),
            false
        )
    );
    let cancel = fake
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/cancel"))
        .unwrap();
    assert_eq!(cancel.path, format!("/v1/agent/{id}/cancel"));
    assert_eq!(cancel.body, "");
    assert_eq!(
        cancel.headers.get("content-length").map(String::as_str),
        Some("0")
    );
    assert!(!cancel.headers.contains_key("content-type"));

    let not_running = |id: &str| {
        format!(
            "Run {id} is not running now \u{2014} Perplexity returns this same response whether the run already finished or the id never existed. If you expected it to still be active, verify with perplexity_agent_result before assuming this cancelled it."
        )
    };
    std::thread::sleep(Duration::from_millis(300));
    let r = s.request(&call(
        3,
        "perplexity_agent_cancel",
        json!({"response_id": id}),
    ));
    assert_eq!(tool_text(&r), (not_running(&id), false), "already terminal");
    let r = s.request(&call(
        4,
        "perplexity_agent_cancel",
        json!({"response_id": "resp_never_issued"}),
    ));
    // The official answer for an id that never existed is 404: "no such run".
    let (text, is_error) = tool_text(&r);
    assert!(
        is_error && text.starts_with("No research run resp_never_issued exists"),
        "{text}"
    );
    fake.push_fault(json!({"route": "cancel", "status": 400}));
    let r = s.request(&call(
        5,
        "perplexity_agent_cancel",
        json!({"response_id": "resp_x"}),
    ));
    assert_eq!(
        tool_text(&r),
        (not_running("resp_x"), false),
        "bodiless 400"
    );

    fake.push_fault(json!({"route": "cancel", "status": 401, "json": {"error": {"message": "Your API key has already been revoked", "code": 401}}}));
    let r = s.request(&call(
        6,
        "perplexity_agent_cancel",
        json!({"response_id": "resp_x"}),
    ));
    assert_eq!(
        tool_text(&r),
        ("Your API key has already been revoked".to_owned(), true),
        "never matched on text"
    );
    fake.set_scenario(json!({"cancel_unknown_status": 404}));
    let r = s.request(&call(
        7,
        "perplexity_agent_cancel",
        json!({"response_id": "resp_unknown"}),
    ));
    // A 404 is the official "no such run": an error that says so, never "try again".
    let (text, is_error) = tool_text(&r);
    assert!(
        is_error && text.starts_with("No research run resp_unknown exists"),
        "{text}"
    );
}

#[test]
fn the_key_is_read_at_call_time_and_its_absence_is_a_tool_error() {
    let fake = FakePerplexity::start();
    for key in [None, Some("   ")] {
        let mut env = vec![("PERPLEXITY_API_BASE".to_owned(), fake.base_url())];
        if let Some(k) = key {
            env.push(("PERPLEXITY_API_KEY".to_owned(), k.to_owned()));
        }
        let mut s = Server::start(&env);
        let r = s.request(&request(1, "tools/list", json!({})));
        assert!(r["result"]["tools"].is_array(), "tools/list needs no key");
        for (tool, args) in [
            ("perplexity_agent", json!({"query": "q"})),
            ("perplexity_agent_result", json!({"response_id": "resp_1"})),
            ("perplexity_agent_cancel", json!({"response_id": "resp_1"})),
        ] {
            let r = s.request(&call(2, tool, args));
            assert_eq!(
                tool_text(&r),
                ("PERPLEXITY_API_KEY is not set. Add it to the 'env' block of this server's entry in your MCP client configuration.".to_owned(), true),
                "{tool}"
            );
        }
    }
    assert!(
        fake.requests().is_empty(),
        "never an empty Authorization header"
    );
}

#[test]
fn python_whitespace_and_big_integers_match_the_reference() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 1500}));
    let mut s = Server::start(&env_with(&fake, &[("PERPLEXITY_AGENT_WAIT_SECONDS", "1")]));
    // Python's strip() also removes U+001C..U+001F: such a query must not start a run.
    let r = s.request(&call(
        1,
        "perplexity_agent",
        json!({"query": "\u{1c}\u{1d}\u{1e}\u{1f}"}),
    ));
    assert_eq!(
        tool_text(&r).0,
        "'query' is required and must be a non-empty string."
    );
    let r = s.request(&call(
        2,
        "perplexity_agent_result",
        json!({"response_id": "\u{1c}abc\u{1f}", "wait_seconds": -1}),
    ));
    assert_eq!(
        tool_text(&r).0,
        "'wait_seconds' must be a non-negative integer."
    );
    assert!(fake.requests().is_empty());
    // An integer beyond 64 bits is clamped like any other large wait, and `-0` is 0.
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"perplexity_agent_result\",\"arguments\":{\"response_id\":\"resp_none\",\"wait_seconds\":18446744073709551616}}}\n");
    let (text, _) = tool_text(&s.recv_response(&json!(3)).0);
    assert!(!text.contains("non-negative integer"), "{text}");
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"perplexity_agent_result\",\"arguments\":{\"response_id\":\"resp_none\",\"wait_seconds\":-0}}}\n");
    let (text, _) = tool_text(&s.recv_response(&json!(4)).0);
    assert!(!text.contains("non-negative integer"), "{text}");
    // A progress token beyond 64 bits still opts in, and is echoed exactly.
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"perplexity_agent\",\"arguments\":{\"query\":\"q\"},\"_meta\":{\"progressToken\":18446744073709551616}}}\n");
    let (_, notes) = s.recv_response(&json!(5));
    assert!(!notes.is_empty());
    assert!(
        s.seen
            .iter()
            .any(|l| l.contains("\"progressToken\":18446744073709551616"))
    );
}

#[test]
fn a_cancel_that_fails_names_the_run_that_may_still_be_running() {
    let fake = FakePerplexity::start();
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_AGENT_WAIT_SECONDS".into(), "1".into()));
    let mut s = Server::start(&env);
    fake.push_fault(json!({"route": "cancel", "status": 503, "times": 50}));
    let (text, is_error) = tool_text(&s.request(&call(
        1,
        "perplexity_agent_cancel",
        json!({"response_id": "resp_storm"}),
    )));
    assert!(is_error, "{text}");
    assert!(
        text.ends_with(" \u{2014} run resp_storm may still be running; collect it with perplexity_agent_result(response_id=\"resp_storm\") or stop it with perplexity_agent_cancel(response_id=\"resp_storm\")."),
        "{text}"
    );
}

/// Wall-clock milliseconds, the clock the fake stamps its requests with.
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How late an answer came after the run it collected ended: the run ends
/// `duration_ms` after the fake received its create.
fn lateness_ms(fake: &FakePerplexity, duration_ms: u64, answered_at: u64) -> i64 {
    let created = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == "/v1/agent")
        .map(|r| r.at_ms)
        .expect("a create");
    answered_at as i64 - (created + duration_ms) as i64
}

#[test]
fn a_late_collector_hears_the_end_as_soon_as_the_first_call_would() {
    // Polling would have GET at once, at +2 s and at +5 s: a run ending at +3 s would be
    // collected two seconds late. The resumed stream tells at once.
    let duration = 3000;
    let fake = FakePerplexity::start_with(json!({"duration_ms": duration, "answer": "Late."}));
    let mut s = Server::start(&env_for(&fake));
    // Starts a run without waiting, then collects it, waiting up to `wait` seconds.
    let mut later = |n: i64, wait: u64| {
        let (text, _) = tool_text(&s.request(&call(
            n,
            "perplexity_agent",
            json!({"query": "q", "wait": false}),
        )));
        let id = running_id(&text);
        let (text, is_error) = tool_text(&s.request(&call(
            n + 1,
            "perplexity_agent_result",
            json!({"response_id": id, "wait_seconds": wait}),
        )));
        assert!(!is_error, "{text}");
        (id, text)
    };
    let (_, text) = later(1, 30);
    let late = lateness_ms(&fake, duration, wall_ms());
    assert!(unwrap_spotlight(&text).starts_with("Late."), "{text}");
    assert!(late < 250, "the answer came {late} ms after the run ended");
    let resumed = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.query.as_deref() == Some("stream=true"))
        .count();
    assert_eq!(resumed, 1, "the collector follows the run's stream once");

    // With no resume offered, polling still collects.
    fake.set_scenario(json!({"duration_ms": 1500, "resume": false, "answer": "Polled."}));
    fake.clear_requests();
    let (_, text) = later(3, 30);
    assert!(unwrap_spotlight(&text).starts_with("Polled."), "{text}");

    // A wait shorter than the run hands it back at the budget, still running.
    fake.set_scenario(json!({"duration_ms": 10_000}));
    let started = Instant::now();
    let (id, text) = later(5, 1);
    assert_eq!(running_id(&text), id);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
}
