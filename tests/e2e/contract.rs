//! Perplexity's official contract (perplexityai 0.46.1, `reference/perplexity-api-contract.md`
//! §5) as users see it: citation numbers, what we send for the common calls, the official
//! `response.failed`, cancel's 404, the retry headers, the model catalogue and the
//! continuation echo. The schema-level check of every body lives in `tests/contract/`
//! (the official SDK); this module holds the behaviours a front end shows.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

/// An answer citing `[7]` and `[3]`, whose search results carry the ids 3 and 7.
fn cited_run() -> Value {
    json!({
        "duration_ms": 50,
        "answer": "The launch slipped [7], after a review [3].",
        "sources": [
            {"id": 3, "title": "Three", "url": "https://three.example/"},
            {"id": 7, "title": "Seven", "url": "https://seven.example/"},
        ],
    })
}

#[test]
fn sources_carry_the_numbers_the_answer_cites_in_mcp_and_the_cli() {
    let fake = FakePerplexity::start_with(cited_run());
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    let body = unwrap_spotlight(&text);
    assert!(
        body.contains(
            "[3] Three \u{2014} https://three.example/\n[7] Seven \u{2014} https://seven.example/"
        ),
        "{body}"
    );
    assert!(!body.contains("[1] ") && !body.contains("[2] "), "{body}");

    let r = s.request(&call(2, "responses_create", json!({"input": "q"})));
    let sources = &structured(&r)["sources"];
    assert_eq!(
        sources,
        &json!([{"number": 3, "title": "Three", "url": "https://three.example/"},
                {"number": 7, "title": "Seven", "url": "https://seven.example/"}])
    );

    let (stdout, stderr, code) = run_cli(&["ask", "q"], &env_for(&fake));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("\n[7] Seven \u{2014} https://seven.example/"),
        "{stdout}"
    );
    let (stdout, _, _) = run_cli(&["ask", "q", "--json"], &env_for(&fake));
    let doc: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(doc["sources"][1]["number"], 7, "{doc}");
}

#[test]
fn a_preset_keeps_its_own_search_unless_the_caller_overrides_it() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 20}));
    let mut s = Server::start(&env_for(&fake));
    s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    s.request(&call(2, "perplexity_ask", json!({"query": "q"})));
    s.request(&call(
        3,
        "perplexity_agent",
        json!({"query": "q", "recency": "week"}),
    ));
    s.request(&call(4, "finance_search", json!({"query": "q"})));
    let creates = agent_creates(&fake);
    // A listed web_search replaces the preset's tuned one: only a filter justifies it.
    assert!(creates[0].get("tools").is_none(), "{}", creates[0]);
    assert!(creates[1].get("tools").is_none(), "{}", creates[1]);
    assert_eq!(
        creates[2]["tools"],
        json!([{"type": "web_search", "filters": {"search_recency_filter": "week"}}])
    );
    assert_eq!(creates[3]["tools"], json!([{"type": "finance_search"}]));
}

#[test]
fn images_go_out_without_detail_and_new_options_are_accepted() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 20}));
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call(
        1,
        "responses_create",
        json!({
            "input": [{"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "https://example.org/p.png"}]}],
            "reasoning": {"effort": "minimal"},
            "max_steps": 100,
            "tools": [{"type": "people_search"}],
        }),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    let sent = &agent_creates(&fake)[0];
    assert_eq!(
        sent["input"][0]["content"][1],
        json!({"type": "input_image", "image_url": "https://example.org/p.png"})
    );
    assert_eq!(sent["tools"], json!([{"type": "people_search"}]));
    // What the API would refuse is refused here, with the reason, and never sent.
    for (args, want) in [
        (
            json!({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "https://a.org/x.png", "detail": "auto"}]}]}),
            "Unknown argument(s): detail.",
        ),
        (
            json!({"input": "q", "response_format": {"type": "json_object"}}),
            "must be one of: json_schema",
        ),
        (
            json!({"input": "q", "reasoning": {"effort": "max"}}),
            "minimal, low",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "filters": {"search_language_filter": ["en"]}}]}),
            "Unknown argument(s): search_language_filter.",
        ),
    ] {
        let (text, is_error) = tool_text(&s.request(&call(2, "responses_create", args)));
        assert!(is_error && text.contains(want), "{text}");
    }
    assert_eq!(agent_creates(&fake).len(), 1);
}

#[test]
fn the_official_failed_event_is_read_from_the_event_itself() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 50, "final_status": "failed", "error_message": "model unavailable",
    }));
    let mut s = Server::start(&env_for(&fake));
    let (text, is_error) =
        tool_text(&s.request(&call(1, "perplexity_agent", json!({"query": "q"}))));
    assert!(is_error && text.contains("model unavailable"), "{text}");
    // No GET of the run: the event said everything (and a store:false run has no GET).
    let gets = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/v1/agent/"))
        .count();
    assert_eq!(gets, 0);

    let r = s.request(&call(
        2,
        "responses_create",
        json!({"input": "q", "store": false}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(is_error && text.contains("model unavailable"), "{text}");
}

#[test]
fn cancelling_an_unknown_run_says_there_is_no_such_run() {
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call(
        1,
        "perplexity_agent_cancel",
        json!({"response_id": "resp_doesnotexist"}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(
        is_error && text.contains("No research run resp_doesnotexist exists"),
        "{text}"
    );
    assert!(
        !text.contains("try again") && !text.contains("may still be running"),
        "{text}"
    );
    let (stdout, stderr, code) =
        run_cli(&["cancel", "resp_doesnotexist", "--json"], &env_for(&fake));
    assert_eq!(code, 1, "{stderr}");
    let doc: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(doc["status"], "not_found");
}

#[test]
fn retry_headers_in_every_official_form_are_honoured() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 20}));
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_MAX_EVENT_STREAMS".into(), "0".into()));
    let mut s = Server::start(&env);
    for form in ["http_date", "ms", "seconds"] {
        fake.clear_requests();
        fake.push_fault(json!({"route": "search", "kind": "rate_limit",
            "retry_after_form": form, "retry_after_secs": 1}));
        let started = Instant::now();
        let (text, is_error) =
            tool_text(&s.request(&call(1, "perplexity_search", json!({"query": "q"}))));
        assert!(!is_error, "{form}: {text}");
        let searches: Vec<u64> = fake
            .requests()
            .into_iter()
            .filter(|r| r.path == "/search")
            .map(|r| r.at_ms)
            .collect();
        assert_eq!(searches.len(), 2, "{form}: one retry");
        // An HTTP-date has whole-second resolution: it may land anywhere in (0, 1] s.
        let floor = if form == "http_date" { 0 } else { 900 };
        assert!(searches[1] - searches[0] >= floor, "{form}: waited as told");
        assert!(started.elapsed() < Duration::from_secs(5), "{form}");
    }
    // x-should-retry: false overrides a retryable status.
    fake.clear_requests();
    fake.push_fault(
        json!({"route": "search", "status": 503, "headers": {"x-should-retry": "false"}}),
    );
    let (text, is_error) =
        tool_text(&s.request(&call(2, "perplexity_search", json!({"query": "q"}))));
    assert!(is_error, "{text}");
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|r| r.path == "/search")
            .count(),
        1
    );
}

#[test]
fn the_model_catalogue_is_listed_without_the_key_and_offered_on_errors() {
    let fake = FakePerplexity::start();
    let (stdout, stderr, code) = run_cli(&["models"], &env_for(&fake));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.lines().any(|l| l == "perplexity/sonar\tperplexity"),
        "{stdout}"
    );
    let listed = fake.requests();
    assert_eq!(listed[0].path, "/v1/models");
    assert!(
        !listed[0].headers.contains_key("authorization"),
        "no key where none is needed"
    );
    // Without any key at all it still works.
    let env: Vec<(String, String)> = env_for(&fake)
        .into_iter()
        .filter(|(k, _)| k != "PERPLEXITY_API_KEY")
        .collect();
    let (stdout, _, code) = run_cli(&["models", "--json"], &env);
    assert_eq!(code, 0);
    assert!(stdout.contains("\"openai/gpt-5.5\""), "{stdout}");

    // A refused model: the error lists real names, close to the one given.
    fake.push_fault(json!({"route": "create", "status": 400,
        "json": {"error": {"message": "invalid model", "type": "invalid_request", "code": 400}}}));
    let mut s = Server::start(&env_for(&fake));
    let (text, is_error) = tool_text(&s.request(&call(
        1,
        "perplexity_ask",
        json!({"query": "q", "model": "perplexity/sonar-pro"}),
    )));
    assert!(
        is_error && text.contains("models include: perplexity/sonar"),
        "{text}"
    );
    let (text, is_error) = tool_text(&s.request(&call(
        2,
        "perplexity_ask",
        json!({"query": "q", "model": "sonar-pro"}),
    )));
    assert!(is_error && text.contains("provider/model"), "{text}");
    // The same for the full surface: the first chain entry the catalogue lacks.
    fake.push_fault(json!({"route": "create", "status": 400,
        "json": {"error": {"message": "invalid model", "type": "invalid_request", "code": 400}}}));
    let (text, is_error) = tool_text(&s.request(&call(
        3,
        "responses_create",
        json!({"input": "q", "models": ["openai/gpt-5.5", "perplexity/sonar-pro"]}),
    )));
    assert!(
        is_error && text.contains("'perplexity/sonar-pro' is not in Perplexity's model catalogue"),
        "{text}"
    );
}

#[test]
fn function_outputs_echo_the_calls_name_and_thought_signature() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 30,
        "function_calls": [{"name": "lookup_ticket", "arguments": {"id": "T-1"}, "call_id": "call_1"}],
    }));
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call(
        1,
        "responses_create",
        json!({"input": "q", "tools": [{"type": "function", "name": "lookup_ticket", "parameters": {"type": "object"}}]}),
    ));
    let out = structured(&r);
    assert_eq!(
        out["function_calls"][0]["thought_signature"], "fake-signature",
        "{out}"
    );
    let id = out["response_id"].as_str().unwrap().to_owned();
    // The caller sends only call_id and output, as most clients do.
    s.request(&call(
        2,
        "responses_create",
        json!({"input": [{"type": "function_call_output", "call_id": "call_1", "output": "{\"ok\":true}"}],
               "previous_response_id": id,
               "tools": [{"type": "function", "name": "lookup_ticket", "parameters": {"type": "object"}}]}),
    ));
    let sent = &agent_creates(&fake)[1];
    assert_eq!(
        sent["input"][0],
        json!({"type": "function_call_output", "call_id": "call_1", "output": "{\"ok\":true}",
               "name": "lookup_ticket", "thought_signature": "fake-signature"})
    );
}

#[test]
fn polled_progress_does_not_depend_on_the_output_of_a_running_get() {
    let fake =
        FakePerplexity::start_with(json!({"duration_ms": 60_000, "running_output": "empty"}));
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_MAX_EVENT_STREAMS".into(), "0".into()));
    env.push(("PERPLEXITY_AGENT_WAIT_SECONDS".into(), "1".into()));
    let mut s = Server::start(&env);
    let (text, _) = tool_text(&s.request(&call(1, "perplexity_agent", json!({"query": "q"}))));
    assert!(text.contains("is still running"), "{text}");
    assert!(!text.contains("no intermediate results yet"), "{text}");
    assert!(
        text.contains("intermediate results only on the stream"),
        "{text}"
    );
}

#[test]
fn a_mixed_allow_and_deny_domain_list_is_refused_before_any_request() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 20}));
    let mut s = Server::start(&env_for(&fake));
    for (i, tool) in ["perplexity_agent", "perplexity_ask", "perplexity_search"]
        .iter()
        .enumerate()
    {
        let (text, is_error) = tool_text(&s.request(&call(
            i as u64 + 1,
            tool,
            json!({"query": "q", "domains": ["nasa.gov", "-reddit.com"]}),
        )));
        assert!(
            is_error && text.contains("an allowlist or a denylist"),
            "{tool}: {text}"
        );
    }
    let (_, stderr, code) = run_cli(&["ask", "q", "--domains", "a.org,-b.org"], &env_for(&fake));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("an allowlist or a denylist"), "{stderr}");
    assert!(fake.requests().is_empty(), "nothing reached the upstream");
}
