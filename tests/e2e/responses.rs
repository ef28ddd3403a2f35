//! `responses_create` / `responses_retrieve`: the full Agent API surface sent as
//! validated, function calls handed back and continued, JSON answers parsed, snapshots
//! kept in (and read from) the local store — and a broken store never breaks a call.

use serde_json::json;

use crate::common::*;

fn gets(fake: &FakePerplexity) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/v1/agent/"))
        .count()
}

fn env_with_store(fake: &FakePerplexity, store: &std::path::Path) -> Vec<(String, String)> {
    let mut env = env_for(fake);
    env.push(("PERPLEXITY_STORE_PATH".into(), store.display().to_string()));
    env
}

#[test]
fn a_full_surface_request_is_answered_kept_and_read_back_locally() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "answer": "Two bullets."}));
    let dir = Scratch::new("responses");
    let db = dir.path("data/store.sqlite");
    let mut s = Server::start(&env_with_store(&fake, &db));
    let r = s.request(&call(
        1,
        "responses_create",
        json!({
            "input": [{"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "https://example.org/p.jpg"}]}],
            "models": ["openai/gpt-5", "perplexity/sonar"],
            "instructions": "Be brief.",
            "reasoning": {"effort": "low"},
            "tools": [{"type": "web_search", "filters": {"search_recency_filter": "week"}},
                      {"type": "fetch_url", "max_urls": 2}],
            "max_steps": 3,
            "language_preference": "en"
        }),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    let out = structured(&r);
    assert_eq!(out["status"], "completed");
    assert_eq!(out["answer"], "Two bullets.");
    assert_eq!(out["model"], "fake/model");
    assert_eq!(out["sources"].as_array().unwrap().len(), 2);
    assert_eq!(out["snapshot"], "saved");
    assert!(out["usage"].is_object());
    let id = out["response_id"].as_str().unwrap().to_owned();
    assert!(
        text.starts_with(&format!("Response {id}: completed")),
        "{text}"
    );

    let sent = &agent_creates(&fake)[0];
    assert_eq!(sent["models"], json!(["openai/gpt-5", "perplexity/sonar"]));
    assert!(sent.get("preset").is_none() && sent.get("model").is_none());
    assert_eq!(
        sent["input"][0]["content"][1],
        json!({"type": "input_image", "image_url": "https://example.org/p.jpg"}),
        "no detail: the API's image parts have none"
    );
    assert_eq!(sent["reasoning"], json!({"effort": "low"}));
    assert_eq!(
        sent["tools"][1],
        json!({"type": "fetch_url", "max_urls": 2})
    );
    assert_eq!(sent["background"], true);
    assert!(
        sent.get("store").is_none(),
        "store: true is the default, never sent"
    );

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&db), 0o600);
        assert_eq!(mode(db.parent().unwrap()), 0o700);
    }

    // Read back from the local snapshot: no request upstream.
    let before = gets(&fake);
    let r = s.request(&call(2, "responses_retrieve", json!({"response_id": id})));
    assert!(!tool_text(&r).1);
    assert_eq!(structured(&r)["snapshot"], "local");
    assert_eq!(structured(&r)["answer"], "Two bullets.");
    assert_eq!(gets(&fake), before, "served from the store");

    // A well-formed id nobody issued: not found, here or upstream.
    let r = s.request(&call(
        3,
        "responses_retrieve",
        json!({"response_id": "resp_nobodyissuedthis0000"}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(
        is_error && text.contains("No response with this id"),
        "{text}"
    );
}

#[test]
fn json_answers_are_parsed_and_a_non_json_answer_is_an_error() {
    let fake = FakePerplexity::start_with(
        json!({"duration_ms": 50, "answer": "{\"summary\":\"ok\",\"n\":2}"}),
    );
    let mut s = Server::start(&env_for(&fake));
    let format = json!({"type": "json_schema", "json_schema": {"name": "summary", "schema": {"type": "object"}}});
    let r = s.request(&call(
        1,
        "responses_create",
        json!({"input": "q", "response_format": format}),
    ));
    assert!(!tool_text(&r).1);
    assert_eq!(structured(&r)["parsed"], json!({"summary": "ok", "n": 2}));
    // No store location known: the call still answers, and says so.
    assert_eq!(structured(&r)["snapshot"], "unavailable");
    assert!(tool_text(&r).0.contains("PERPLEXITY_STORE_PATH"));
    assert_eq!(agent_creates(&fake)[0]["response_format"], format);

    fake.set_scenario(json!({"duration_ms": 50, "answer": "Not JSON at all."}));
    let r = s.request(&call(
        2,
        "responses_create",
        json!({"input": "q", "response_format": format}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(is_error && text.contains("not valid JSON"), "{text}");
    assert!(
        structured(&r)["response_id"].is_string(),
        "the run is still named"
    );
}

#[test]
fn function_calls_come_back_and_the_caller_continues_the_run() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 50,
        "answer": "Ticket T-1 is open.",
        "function_calls": [{"name": "lookup_ticket", "arguments": {"id": "T-1"}}],
    }));
    let dir = Scratch::new("fcalls");
    let mut s = Server::start(&env_with_store(&fake, &dir.path("store.sqlite")));
    let function = json!({"type": "function", "name": "lookup_ticket", "description": "Look up a ticket",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}});
    let r = s.request(&call(
        1,
        "responses_create",
        json!({"input": "Is T-1 open?", "tools": [function]}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    let out = structured(&r).clone();
    let calls = out["function_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "lookup_ticket");
    assert_eq!(calls[0]["arguments"], "{\"id\":\"T-1\"}");
    let call_id = calls[0]["call_id"].as_str().unwrap();
    let id = out["response_id"].as_str().unwrap();
    assert!(
        text.contains(&format!("previous_response_id=\"{id}\"")),
        "{text}"
    );
    assert_eq!(agent_creates(&fake)[0]["tools"][0]["strict"], true);

    let r = s.request(&call(2, "responses_create", json!({
        "input": [{"type": "function_call_output", "call_id": call_id, "output": "{\"state\":\"open\"}"}],
        "previous_response_id": id,
        "tools": [function],
    })));
    assert!(!tool_text(&r).1, "{}", tool_text(&r).0);
    assert_eq!(structured(&r)["answer"], "Ticket T-1 is open.");
    assert_eq!(structured(&r)["function_calls"], json!([]));
    let sent = &agent_creates(&fake)[1];
    assert_eq!(sent["previous_response_id"], id);
    assert_eq!(sent["input"][0]["call_id"], call_id);
}

#[test]
fn a_run_waiting_for_function_outputs_ends_the_wait_at_once() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 50,
        "function_calls": [{"name": "f", "arguments": "{}"}],
        "function_call_status": "requires_action",
    }));
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_AGENT_WAIT_SECONDS".into(), "30".into()));
    let mut s = Server::start(&env);
    let started = std::time::Instant::now();
    let r = s.request(&call(
        1,
        "responses_create",
        json!({"input": "q", "tools": [{"type": "function", "name": "f"}]}),
    ));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "waited for a run that waits for us"
    );
    assert!(!tool_text(&r).1);
    assert_eq!(structured(&r)["status"], "requires_action");
    assert_eq!(structured(&r)["function_calls"][0]["name"], "f");
}

#[test]
fn store_false_runs_in_the_foreground_and_is_kept_nowhere() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50}));
    let dir = Scratch::new("nostore");
    let mut s = Server::start(&env_with_store(&fake, &dir.path("store.sqlite")));
    let r = s.request(&call(
        1,
        "responses_create",
        json!({"input": "q", "store": false}),
    ));
    assert!(!tool_text(&r).1, "{}", tool_text(&r).0);
    assert_eq!(structured(&r)["snapshot"], "off");
    let sent = &agent_creates(&fake)[0];
    assert_eq!(
        (&sent["store"], &sent["background"]),
        (&json!(false), &json!(false))
    );
    let id = structured(&r)["response_id"].as_str().unwrap().to_owned();
    let r = s.request(&call(2, "responses_retrieve", json!({"response_id": id})));
    assert!(tool_text(&r).1, "not kept locally, not kept upstream");
}

#[test]
fn a_run_not_awaited_is_collected_later_and_then_kept() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 300}));
    let dir = Scratch::new("later");
    let mut env = env_with_store(&fake, &dir.path("store.sqlite"));
    env.push(("PERPLEXITY_SNAPSHOT_RETENTION".into(), "2".into()));
    let mut s = Server::start(&env);
    let r = s.request(&call(
        1,
        "responses_create",
        json!({"input": "q", "wait": false}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error && text.contains("still running"), "{text}");
    assert_eq!(structured(&r)["snapshot"], "pending");
    let first = structured(&r)["response_id"].as_str().unwrap().to_owned();
    assert!(text.contains(&format!("responses_retrieve(response_id=\"{first}\")")));

    let r = s.request(&call(
        2,
        "responses_retrieve",
        json!({"response_id": first, "wait_seconds": 10}),
    ));
    assert_eq!(structured(&r)["status"], "completed");
    assert_eq!(structured(&r)["snapshot"], "saved");

    // Retention 2: two newer responses push the first out of the store.
    for i in 3..5 {
        s.request(&call(i, "responses_create", json!({"input": "q"})));
    }
    let before = gets(&fake);
    let r = s.request(&call(
        9,
        "responses_retrieve",
        json!({"response_id": first}),
    ));
    assert_eq!(
        structured(&r)["snapshot"],
        "saved",
        "fetched again and re-kept"
    );
    assert_eq!(gets(&fake), before + 1, "no longer local");
}

#[test]
fn a_damaged_store_fails_only_what_needs_it() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50}));
    let dir = Scratch::new("corrupt");
    let db = dir.path("store.sqlite");
    std::fs::write(&db, vec![0x5a; 8192]).unwrap();
    let mut s = Server::start(&env_with_store(&fake, &db));
    let r = s.request(&call(1, "responses_create", json!({"input": "q"})));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "the answer still arrives: {text}");
    assert_eq!(structured(&r)["snapshot"], "unavailable");
    assert!(text.contains("damaged or not a database"), "{text}");
    let id = structured(&r)["response_id"].as_str().unwrap().to_owned();
    // Retrieval falls back to Perplexity's copy.
    let r = s.request(&call(2, "responses_retrieve", json!({"response_id": id})));
    assert!(!tool_text(&r).1);
    assert_eq!(structured(&r)["answer"], "Fake answer.");
    // Tools that never touch the store are unaffected, and so is the loop.
    let r = s.request(&call(3, "perplexity_ask", json!({"query": "q"})));
    assert!(!tool_text(&r).1);
    assert!(s.stderr().contains("response snapshot not saved"));

    // Repaired (moved aside): picked up without a restart.
    std::fs::remove_file(&db).unwrap();
    let r = s.request(&call(4, "responses_create", json!({"input": "q"})));
    assert_eq!(structured(&r)["snapshot"], "saved");
}

#[test]
fn two_servers_share_one_store() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 20}));
    let dir = Scratch::new("shared");
    let env = env_with_store(&fake, &dir.path("store.sqlite"));
    let mut a = Server::start(&env);
    let mut b = Server::start(&env);
    let mut ids = Vec::new();
    for i in 0..10 {
        for s in [&mut a, &mut b] {
            s.send(&call(i, "responses_create", json!({"input": "q"})));
        }
        for s in [&mut a, &mut b] {
            let r = s.recv_response(&json!(i)).0;
            assert_eq!(structured(&r)["snapshot"], "saved", "{r}");
            ids.push(structured(&r)["response_id"].as_str().unwrap().to_owned());
        }
    }
    let before = gets(&fake);
    for (i, id) in ids.iter().enumerate() {
        let s = if i % 2 == 0 { &mut b } else { &mut a };
        let r = s.request(&call(
            100 + i as i64,
            "responses_retrieve",
            json!({"response_id": id}),
        ));
        assert_eq!(structured(&r)["snapshot"], "local");
    }
    assert_eq!(
        gets(&fake),
        before,
        "each server reads the other's snapshots"
    );
}

#[test]
fn sampling_a_profile_and_an_allowed_connector_reach_the_api() {
    // The fake runs strict (unknown fields are a 400, as live), so acceptance is the
    // check that these are fields the API has.
    let fake = FakePerplexity::start_with(json!({"duration_ms": 0, "answer": "ok"}));
    let mut env = env_for(&fake);
    env.push((
        "PERPLEXITY_ALLOWED_CONNECTORS".into(),
        "conn_drive, conn_mail".into(),
    ));
    let mut s = Server::start(&env);
    let connector = json!({"type": "connector", "id": "conn_drive", "server_label": "drive",
                           "allowed_tools": ["search_files"], "server_description": "The team drive"});
    let r = s.request(&call(
        1,
        "responses_create",
        json!({"input": "q", "temperature": 0.2, "top_p": 0.9,
               "profile": {"type": "custom", "id": "research-v2", "version": "3"},
               "tools": [connector]}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    let sent = &agent_creates(&fake)[0];
    assert_eq!(
        (sent["temperature"].clone(), sent["top_p"].clone()),
        (json!(0.2), json!(0.9))
    );
    assert_eq!(
        sent["profile"],
        json!({"type": "custom", "id": "research-v2", "version": "3"})
    );
    assert_eq!(sent["tools"], json!([connector]));
}

#[test]
fn a_connector_is_sent_only_when_the_operator_allows_it() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 0}));
    for allowed in [None, Some("conn_mail")] {
        let mut env = env_for(&fake);
        if let Some(ids) = allowed {
            env.push(("PERPLEXITY_ALLOWED_CONNECTORS".into(), ids.into()));
        }
        let mut s = Server::start(&env);
        let r = s.request(&call(
            1,
            "responses_create",
            json!({"input": "q", "tools": [{"type": "connector", "id": "conn_drive", "server_label": "drive"}]}),
        ));
        let (text, is_error) = tool_text(&r);
        assert!(
            is_error
                && text.contains("Connector 'conn_drive' is not allowed on this server")
                && text.contains("PERPLEXITY_ALLOWED_CONNECTORS"),
            "{allowed:?}: {text}"
        );
    }
    assert!(
        fake.requests().is_empty(),
        "a refused connector reached the API"
    );
    // A malformed list stops the server at start, naming the variable.
    let mut env = env_for(&fake);
    env.push((
        "PERPLEXITY_ALLOWED_CONNECTORS".into(),
        "ok, not an id".into(),
    ));
    let (_, stderr, code) = run_cli(&["serve"], &env);
    assert!(
        code != 0 && stderr.contains("PERPLEXITY_ALLOWED_CONNECTORS"),
        "{stderr}"
    );
}
