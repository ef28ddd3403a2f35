//! Black-box tests of the official shapes (perplexityai 0.46.1) the fake speaks by
//! default, and of the scenario switches that bring the old shapes back: the failed
//! event, `ErrorInfo`, running GETs, finance and extra items, the response echoes, the
//! `/v1/responses` alias, `/v1/models`, strict create bodies, `/search` filters and the
//! `rate_limit` fault.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{api, send};
use fake_perplexity::FakePerplexity;
use serde_json::{Value, json};

fn create_with(fake: &FakePerplexity, body: Value) -> common::Resp {
    api(fake.addr(), "POST", "/v1/agent", Some(&body))
}

fn stream(fake: &FakePerplexity) -> Vec<(String, Value)> {
    let r = create_with(fake, json!({"input": "q", "stream": true}));
    assert!(r.complete);
    r.events()
}

fn get(fake: &FakePerplexity, id: &str) -> Value {
    let r = api(fake.addr(), "GET", &format!("/v1/agent/{id}"), None);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn the_failed_event_carries_only_the_error_and_the_run_an_error_info() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 40, "final_status": "failed", "error_message": "model unavailable"
    }));
    let ev = stream(&fake);
    let (ty, last) = ev.last().unwrap();
    assert_eq!(ty, "response.failed");
    let error = json!({"message": "model unavailable", "type": "server_error", "code": "500"});
    assert_eq!(
        last,
        &json!({"type": "response.failed", "sequence_number": ev.len() - 1, "error": error})
    );
    // The run itself: the same ErrorInfo (`code` a string), usage, no message.
    let id = ev[0].1["response"]["id"].as_str().unwrap().to_owned();
    let v = get(&fake, &id);
    assert_eq!(
        (v["status"].clone(), v["error"].clone()),
        (json!("failed"), error)
    );
    assert!(v["usage"].is_object());

    // The old event, on request: the response instead of the error.
    fake.set_scenario(json!({
        "duration_ms": 40, "final_status": "failed", "failed_event_response": true
    }));
    let ev = stream(&fake);
    let last = &ev.last().unwrap().1;
    assert!(last.get("error").is_none());
    assert_eq!(last["response"]["status"], "failed");
    assert_eq!(
        last["response"]["error"],
        json!({"message": "fake failure", "type": "server_error", "code": "500"})
    );

    // `error_message: null` (off contract): an error without a message.
    fake.set_scenario(json!({"duration_ms": 40, "final_status": "failed", "error_message": null}));
    let ev = stream(&fake);
    assert_eq!(
        ev.last().unwrap().1["error"],
        json!({"type": "server_error", "code": "500"})
    );
}

#[test]
fn an_incomplete_run_keeps_its_status_on_the_message() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 40, "final_status": "incomplete"}));
    let ev = stream(&fake);
    let (ty, last) = ev.last().unwrap();
    assert_eq!(ty, "response.incomplete");
    let out = last["response"]["output"].as_array().unwrap();
    let msg = out.last().unwrap();
    assert_eq!(
        (msg["type"].clone(), msg["status"].clone()),
        (json!("message"), json!("incomplete"))
    );
    assert!(last["response"]["usage"].is_object());
}

#[test]
fn running_output_empty_shows_no_partial_results_in_gets_but_on_the_stream() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 600, "queued_ms": 10, "running_output": "empty"
    }));
    let (streamer, id) = common::stream_in_background(&fake);
    std::thread::sleep(Duration::from_millis(450));
    let v = get(&fake, &id);
    assert_eq!(v["status"], "in_progress");
    assert_eq!(
        v["output"],
        json!([]),
        "search and fetch have happened, yet []"
    );
    let ev = streamer.join().unwrap().events();
    assert!(
        ev.iter()
            .any(|(t, _)| t == "response.reasoning.search_results")
    );
    assert!(
        ev.iter()
            .any(|(t, _)| t == "response.reasoning.fetch_url_results")
    );
    let done = get(&fake, &id);
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["output"].as_array().unwrap().len(),
        3,
        "terminal: everything"
    );

    // Progressive (the default): the GET shows them as they come.
    fake.set_scenario(json!({"duration_ms": 600, "queued_ms": 10}));
    let id = create_with(&fake, json!({"input": "q"})).json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    std::thread::sleep(Duration::from_millis(450));
    assert_eq!(get(&fake, &id)["output"].as_array().unwrap().len(), 2);
}

#[test]
fn extra_items_are_appended_and_announced_before_the_message() {
    let extras = json!([
        {"type": "mcp_call", "id": "mcpc_1", "server_label": "docs", "name": "search_docs",
         "arguments": "{}", "output": "[]", "error": null},
        {"type": "people_search_results", "results": []}
    ]);
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60, "extra_items": extras}));
    let ev = stream(&fake);
    let n = ev.len();
    assert_eq!(ev[n - 3].0, "response.output_item.done");
    assert_eq!(
        ev[n - 3].1,
        json!({"type": "response.output_item.done", "sequence_number": n - 3,
               "output_index": 2, "item": extras[0]})
    );
    assert_eq!(ev[n - 2].1["output_index"], 3);
    assert_eq!(ev[n - 2].1["item"], extras[1]);
    let delta = ev
        .iter()
        .find(|(t, _)| t == "response.output_text.delta")
        .unwrap();
    assert_eq!(
        delta.1["output_index"], 4,
        "the message comes after the extras"
    );
    let out = ev[n - 1].1["response"]["output"]
        .as_array()
        .unwrap()
        .clone();
    let kinds: Vec<_> = out.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "search_results",
            "fetch_url_results",
            "mcp_call",
            "people_search_results",
            "message"
        ]
    );
    // Only at the terminal instant: a cancelled run never gets them.
    fake.set_scenario(json!({"duration_ms": 5000, "cancel_delay_ms": 20, "extra_items": extras}));
    let id = create_with(&fake, json!({"input": "q"})).json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        api(fake.addr(), "POST", &format!("/v1/agent/{id}/cancel"), None).status,
        200
    );
    std::thread::sleep(Duration::from_millis(80));
    let v = get(&fake, &id);
    assert_eq!(v["status"], "cancelled");
    assert!(
        v["output"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["type"] != "mcp_call")
    );
}

#[test]
fn the_response_object_echoes_background_store_and_previous_response_id() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 30}));
    let r = create_with(&fake, json!({"input": "q"}));
    let v = r.json();
    let id = v["id"].as_str().unwrap().to_owned();
    let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "id",
            "object",
            "created_at",
            "model",
            "background",
            "store",
            "previous_response_id",
            "status",
            "output"
        ]
    );
    assert_eq!(
        (&v["background"], &v["store"], &v["previous_response_id"]),
        (&json!(true), &json!(true), &Value::Null)
    );
    let r = create_with(
        &fake,
        json!({"input": "q", "background": false, "store": false, "previous_response_id": id}),
    );
    let v = r.json();
    assert_eq!(
        (&v["background"], &v["store"], &v["previous_response_id"]),
        (&json!(false), &json!(false), &json!(id))
    );
    assert_eq!(v["status"], "completed");
    let usage = &v["usage"];
    for k in ["input_tokens", "output_tokens", "total_tokens"] {
        assert!(usage[k].is_u64(), "{usage}");
    }
    for k in ["input_cost", "output_cost", "total_cost"] {
        assert!(usage["cost"][k].is_f64(), "{usage}");
    }
    assert_eq!(usage["cost"]["currency"], "USD");
}

#[test]
fn the_responses_alias_is_the_same_api() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 5000, "cancel_delay_ms": 20}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/responses",
        Some(&json!({"input": "q"})),
    );
    assert_eq!(r.status, 200);
    let id = r.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        api(fake.addr(), "GET", &format!("/v1/responses/{id}"), None).json()["id"],
        id.as_str()
    );
    assert_eq!(get(&fake, &id)["id"], id.as_str(), "one run, both paths");
    let r = api(
        fake.addr(),
        "POST",
        &format!("/v1/responses/{id}/cancel"),
        None,
    );
    assert_eq!(r.json(), json!({"response_id": id, "status": "cancelling"}));
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/responses/{id}?stream=true"),
        None,
    );
    assert_eq!(r.events().last().unwrap().0, "response.cancelled");
    let r = api(
        fake.addr(),
        "POST",
        "/v1/responses",
        Some(&json!({"input": "q", "stream": true})),
    );
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let r = api(fake.addr(), "GET", "/v1/responses/resp_nope", None);
    assert_eq!(r.status, 404);
    assert_eq!(api(fake.addr(), "GET", "/v1/responses", None).status, 404);
    // Fault routes match both paths.
    fake.push_fault(json!({"route": "create", "status": 503, "times": 2}));
    assert_eq!(
        api(
            fake.addr(),
            "POST",
            "/v1/responses",
            Some(&json!({"input": "q"}))
        )
        .status,
        503
    );
    assert_eq!(
        api(
            fake.addr(),
            "POST",
            "/v1/agent",
            Some(&json!({"input": "q"}))
        )
        .status,
        503
    );
    fake.push_fault(json!({"route": "get", "status": 502}));
    assert_eq!(
        api(fake.addr(), "GET", &format!("/v1/responses/{id}"), None).status,
        502
    );
    let paths: Vec<_> = fake.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths[0], "/v1/responses", "recorded as sent");
}

#[test]
fn models_are_listed_without_a_key() {
    let fake = FakePerplexity::start_with(json!({"expected_key": "pplx-right"}));
    let r = send(fake.addr(), "GET", "/v1/models", &[], None).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert_eq!(v["object"], "list");
    let data = v["data"].as_array().unwrap();
    let ids: Vec<_> = data.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "openai/gpt-5.5",
            "openai/gpt-5-mini",
            "anthropic/claude-sonnet-4-6",
            "anthropic/claude-opus-4-6",
            "google/gemini-3-flash-preview",
            "google/gemini-3-pro-preview",
            "xai/grok-4-1",
            "perplexity/sonar"
        ]
    );
    assert_eq!(
        data[7],
        json!({"id": "perplexity/sonar", "object": "model", "created": 1_767_225_600, "owned_by": "perplexity"})
    );
    assert_eq!(data[2]["owned_by"], "anthropic");
    // A wrong key does not matter either; the request is recorded.
    let r = send(
        fake.addr(),
        "GET",
        "/v1/models",
        &[("Authorization", "Bearer wrong")],
        None,
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(fake.requests()[0].path, "/v1/models");

    fake.set_scenario(json!({"models": ["acme/one", "bare"]}));
    let v = api(fake.addr(), "GET", "/v1/models", None).json();
    assert_eq!(
        v["data"],
        json!([
            {"id": "acme/one", "object": "model", "created": 1_767_225_600, "owned_by": "acme"},
            {"id": "bare", "object": "model", "created": 1_767_225_600, "owned_by": "perplexity"}
        ])
    );
    fake.set_scenario(json!({"models": []}));
    assert_eq!(
        api(fake.addr(), "GET", "/v1/models", None).json()["data"],
        json!([])
    );

    // Faults: route `models` (and `any`) match it, nothing else does.
    fake.push_fault(json!({"route": "search", "status": 500}));
    fake.push_fault(json!({"route": "models", "kind": "rate_limit"}));
    fake.push_fault(json!({"route": "any", "status": 503}));
    assert_eq!(api(fake.addr(), "GET", "/v1/models", None).status, 429);
    assert_eq!(api(fake.addr(), "GET", "/v1/models", None).status, 503);
    assert_eq!(api(fake.addr(), "GET", "/v1/models", None).status, 200);
    assert_eq!(api(fake.addr(), "POST", "/v1/models", None).status, 404);
}

fn strict_error(field: &str) -> Value {
    json!({"error": {
        "message": format!("invalid request body: json: unknown field \"{field}\""),
        "type": "invalid_request", "code": 400, "param": field
    }})
}

#[test]
fn strict_fields_refuse_what_the_sdk_does_not_know() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 20}));
    for (body, field) in [
        (
            json!({"input": "q", "frequency_penalty": 0.2}),
            "frequency_penalty",
        ),
        (
            json!({"input": [{"type": "message", "role": "user", "content": [
                {"type": "input_image", "image_url": "https://a.org/x.png", "detail": "auto"}]}]}),
            "detail",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "filters": {"search_language_filter": ["en"]}}]}),
            "search_language_filter",
        ),
        (
            json!({"input": [{"type": "function_call_output", "call_id": "c", "output": "{}", "status": "completed"}]}),
            "status",
        ),
        (
            json!({"input": "q", "reasoning": {"effort": "low", "summary": "auto"}}),
            "summary",
        ),
    ] {
        for path in ["/v1/agent", "/v1/responses"] {
            let r = api(fake.addr(), "POST", path, Some(&body));
            assert_eq!(
                (r.status, r.json()),
                (400, strict_error(field)),
                "{path} {body}"
            );
        }
    }
    for (body, param) in [
        (
            json!({"input": "q", "reasoning": {"effort": "max"}}),
            "reasoning.effort",
        ),
        (
            json!({"input": "q", "response_format": {"type": "json_object"}}),
            "response_format.type",
        ),
        (json!({"input": "q", "max_steps": 101}), "max_steps"),
        (json!({"input": "q", "max_steps": 0}), "max_steps"),
    ] {
        let r = create_with(&fake, body.clone());
        assert_eq!(r.status, 400, "{body}");
        let e = r.json()["error"].clone();
        assert_eq!(
            (e["type"].clone(), e["code"].clone(), e["param"].clone()),
            (json!("invalid_request"), json!(400), json!(param))
        );
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid request body: "),
            "{e}"
        );
    }
    assert!(fake.runs().is_empty(), "no run created");
    // What the SDK knows passes.
    let r = create_with(
        &fake,
        json!({
            "input": [{"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "https://example.org/p.png"}]}],
            "reasoning": {"effort": "minimal"}, "max_steps": 100, "model": "openai/gpt-5.5",
            "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}},
            "tools": [{"type": "people_search"}, {"type": "function", "name": "f", "parameters": {"anything": {"goes": 1}}}]
        }),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // strict_fields false: recorded only, as before.
    fake.set_scenario(json!({"duration_ms": 20, "strict_fields": false}));
    let r = create_with(
        &fake,
        json!({"input": "q", "frequency_penalty": 0.2, "max_steps": 500}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(fake.runs().len(), 2);
}

#[test]
fn search_accepts_search_mode_and_refuses_recency_with_dates() {
    let fake = FakePerplexity::start();
    let r = api(
        fake.addr(),
        "POST",
        "/search",
        Some(&json!({"query": "q", "search_mode": "academic"})),
    );
    assert_eq!(r.status, 200);
    let results = r.json()["results"].as_array().unwrap().clone();
    for res in &results {
        for k in ["title", "url", "snippet", "date", "last_updated"] {
            assert!(res[k].is_string(), "{res}");
        }
    }
    let refused = json!({"error": {
        "message": "recency cannot be used together with published_after or published_before",
        "type": "invalid_request", "code": 400
    }});
    for dates in [
        json!({"search_after_date_filter": "1/1/2026"}),
        json!({"search_before_date_filter": "1/1/2026"}),
    ] {
        let mut body = json!({"query": "q", "search_recency_filter": "week"});
        body.as_object_mut()
            .unwrap()
            .extend(dates.as_object().unwrap().clone());
        let r = api(fake.addr(), "POST", "/search", Some(&body));
        assert_eq!((r.status, r.json()), (400, refused.clone()), "{body}");
    }
    // Either alone (or a null) is fine.
    for body in [
        json!({"query": "q", "search_recency_filter": "week", "search_after_date_filter": null}),
        json!({"query": "q", "search_after_date_filter": "1/1/2026", "search_before_date_filter": "2/1/2026"}),
        json!({"query": "q", "search_recency_filter": "week", "last_updated_after_filter": "1/1/2026"}),
    ] {
        assert_eq!(
            api(fake.addr(), "POST", "/search", Some(&body)).status,
            200,
            "{body}"
        );
    }
}

#[test]
fn rate_limit_faults_answer_429_with_the_retry_hint_in_each_form() {
    let fake = FakePerplexity::start();
    let body = json!({"error": {"message": "rate limit exceeded", "type": "request_rate_limit_exceeded", "code": 429}});
    // Default: 429, Retry-After in whole seconds, before authentication, one use.
    fake.push_fault(json!({"kind": "rate_limit"}));
    let before = now_secs();
    let r = send(
        fake.addr(),
        "POST",
        "/v1/agent",
        &[],
        Some(br#"{"input":"q"}"#),
    )
    .unwrap();
    let after = now_secs();
    assert_eq!((r.status, r.json()), (429, body.clone()));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.header("x-ratelimit-limit"), Some("50"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    let reset: u64 = r.header("x-ratelimit-reset").unwrap().parse().unwrap();
    assert!(reset > before && reset <= after + 2, "{reset}");
    assert!(r.header("retry-after-ms").is_none() && r.header("x-should-retry").is_none());
    assert!(fake.runs().is_empty());
    assert_eq!(create_with(&fake, json!({"input": "q"})).status, 200);

    // Fractional seconds round up.
    fake.push_fault(json!({"kind": "rate_limit", "retry_after_secs": 2.2, "should_retry": true}));
    let r = api(fake.addr(), "GET", "/v1/agent/x", None);
    assert_eq!(r.header("retry-after"), Some("3"));
    assert_eq!(r.header("x-should-retry"), Some("true"));

    // An HTTP-date.
    fake.push_fault(
        json!({"kind": "rate_limit", "retry_after_form": "http_date", "retry_after_secs": 30}),
    );
    let r = api(fake.addr(), "POST", "/search", Some(&json!({"query": "q"})));
    assert_eq!(r.status, 429);
    let date = r.header("retry-after").unwrap().to_owned();
    assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
    assert_eq!(&date[3..5], ", ");
    let reset: u64 = r.header("x-ratelimit-reset").unwrap().parse().unwrap();
    assert!(reset >= before + 30 && reset <= now_secs() + 31, "{reset}");
    let secs_of_day = reset % 86_400;
    let hms = format!(
        "{:02}:{:02}:{:02}",
        secs_of_day / 3600,
        secs_of_day % 3600 / 60,
        secs_of_day % 60
    );
    assert!(date.contains(&hms), "{date} vs {hms}");

    // Milliseconds, another status, x-should-retry false, several uses.
    fake.push_fault(json!({
        "kind": "rate_limit", "route": "search", "status": 503, "retry_after_form": "ms",
        "retry_after_secs": 0.25, "should_retry": false, "times": 2
    }));
    for _ in 0..2 {
        let r = api(fake.addr(), "POST", "/search", Some(&json!({"query": "q"})));
        assert_eq!(r.status, 503);
        assert_eq!(r.json()["error"]["code"], 503);
        assert_eq!(r.header("retry-after-ms"), Some("250"));
        assert!(r.header("retry-after").is_none());
        assert_eq!(r.header("x-should-retry"), Some("false"));
    }
    assert_eq!(
        api(fake.addr(), "POST", "/search", Some(&json!({"query": "q"}))).status,
        200
    );

    // No retry header at all.
    fake.push_fault(json!({"kind": "rate_limit", "retry_after_form": "none"}));
    let r = api(fake.addr(), "GET", "/v1/agent/x", None);
    assert_eq!(r.status, 429);
    assert!(r.header("retry-after").is_none() && r.header("retry-after-ms").is_none());
    assert!(r.header("x-ratelimit-reset").is_some());

    // Invalid ones are refused by the control endpoint.
    for bad in [
        r#"{"kind": "rate_limit", "retry_after_form": "minutes"}"#,
        r#"{"kind": "rate_limit", "retry_after_secs": -1}"#,
        r#"{"kind": "rate_limit", "should_retry": "no"}"#,
    ] {
        let r = send(
            fake.addr(),
            "POST",
            "/_control/faults",
            &[],
            Some(bad.as_bytes()),
        )
        .unwrap();
        assert_eq!(r.status, 400, "{bad}");
    }
}
