//! Black-box tests of the fake's Agent API, Search API, auth and scenario fields, over
//! real HTTP with the raw client in `common`.

mod common;

use std::time::{Duration, Instant};

use common::{KEY, api, send, send_until};
use fake_perplexity::FakePerplexity;
use serde_json::{Value, json};

fn create(fake: &FakePerplexity) -> String {
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q"})),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_owned()
}

fn get(fake: &FakePerplexity, id: &str) -> Value {
    let r = api(fake.addr(), "GET", &format!("/v1/agent/{id}"), None);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// Polls until the run's status is terminal (timeline view); returns the last object
/// and every status seen.
fn poll_to_end(fake: &FakePerplexity, id: &str) -> (Value, Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let v = get(fake, id);
        let s = v["status"].as_str().unwrap_or("?").to_owned();
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if ["completed", "failed", "incomplete", "cancelled"].contains(&s.as_str()) {
            return (v, seen);
        }
        assert!(Instant::now() < deadline, "run never ended: {seen:?}");
        std::thread::sleep(Duration::from_millis(15));
    }
}

fn types(events: &[(String, Value)]) -> Vec<String> {
    events.iter().map(|(t, _)| t.clone()).collect()
}

fn assert_sequence(events: &[(String, Value)], first: u64) {
    for (i, (ty, data)) in events.iter().enumerate() {
        assert_eq!(&data["type"], ty, "event field matches data.type");
        assert_eq!(
            data["sequence_number"],
            json!(first + i as u64),
            "{events:?}"
        );
    }
}

const FULL: [&str; 9] = [
    "response.created",
    "response.in_progress",
    "response.reasoning.search_queries",
    "response.reasoning.search_results",
    "response.reasoning.fetch_url_queries",
    "response.reasoning.fetch_url_results",
    "response.output_text.delta",
    "response.output_text.done",
    "response.completed",
];

#[test]
fn create_json_mode_returns_a_queued_run_and_records_the_request() {
    let fake = FakePerplexity::start();
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "What?", "preset": "medium"})),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    let id = v["id"].as_str().unwrap();
    assert!(id.starts_with("resp_") && id.len() == 29, "{id}");
    assert!(id[5..].chars().all(|c| c.is_ascii_alphanumeric()));
    assert_eq!(v["object"], "response");
    assert_eq!(v["model"], "fake/model");
    assert_eq!(v["status"], "queued");
    assert_eq!(v["output"], json!([]));
    assert!(v["created_at"].as_u64().unwrap() > 1_600_000_000);
    assert!(v.get("usage").is_none());

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let q = &reqs[0];
    assert_eq!(q.method, "POST");
    assert_eq!(q.path, "/v1/agent");
    assert_eq!(q.query, None);
    assert_eq!(q.headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(q.headers["content-type"], "application/json");
    assert_eq!(
        q.body_json,
        Some(json!({"input": "What?", "preset": "medium"}))
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(q.at_ms <= now && q.at_ms + 10_000 > now);
    let runs = fake.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, id);
}

#[test]
fn create_rejects_bad_bodies_with_400() {
    let fake = FakePerplexity::start();
    let auth = format!("Bearer {KEY}");
    for body in [
        &b"{not json"[..],
        b"[1,2]",
        b"{\"preset\":\"x\"}",
        b"{\"input\":null}",
        b"",
    ] {
        let r = send(
            fake.addr(),
            "POST",
            "/v1/agent",
            &[("Authorization", &auth)],
            Some(body),
        )
        .unwrap();
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(body));
        assert_eq!(r.json()["error"]["type"], "invalid_request");
        assert_eq!(r.json()["error"]["code"], 400);
    }
    assert!(fake.runs().is_empty());
    assert_eq!(fake.requests().len(), 5);
}

#[test]
fn get_follows_the_timeline_to_completed() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 300, "queued_ms": 60}));
    let id = create(&fake);
    let (done, seen) = poll_to_end(&fake, &id);
    assert_eq!(seen.first().map(String::as_str), Some("queued"));
    assert_eq!(seen.last().map(String::as_str), Some("completed"));
    assert!(
        seen.iter()
            .all(|s| ["queued", "in_progress", "completed"].contains(&s.as_str())),
        "{seen:?}"
    );
    let out = done["output"].as_array().unwrap();
    let kinds: Vec<_> = out.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["search_results", "fetch_url_results", "message"]);
    let results = out[0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for (i, r) in results.iter().enumerate() {
        for k in [
            "id",
            "url",
            "title",
            "snippet",
            "date",
            "last_updated",
            "source",
        ] {
            assert!(r.get(k).is_some(), "result lacks {k}: {r}");
        }
        assert_eq!(r["id"], json!(i + 1));
        assert_eq!(r["source"], "web");
    }
    assert_eq!(results[0]["url"], "https://example.org/one");
    assert!(out[0]["queries"].is_array());
    let c = &out[1]["contents"][0];
    assert!(c["url"].is_string() && c["title"].is_string() && c["snippet"].is_string());
    assert_eq!(out[2]["role"], "assistant");
    assert_eq!(
        out[2]["content"][0],
        json!({"type": "output_text", "text": "Fake answer.", "annotations": []})
    );
    assert!(done["usage"].is_object());

    let runs = fake.runs();
    assert_eq!(runs[0].status, json!("completed"));
    let t = runs[0].terminal_at_ms.expect("terminal_at_ms");
    assert!(
        t >= runs[0].created_at_ms + 299 && t <= runs[0].created_at_ms + 301,
        "{runs:?}"
    );

    let r = api(fake.addr(), "GET", "/v1/agent/resp_nope", None);
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json(),
        json!({"error": {"message": "response not found", "type": "not_found", "code": 404}})
    );
}

#[test]
fn output_fills_progressively() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 800, "queued_ms": 150, "search_batches": 3, "fetch_pages": 2,
        "sources": [{"title": "A", "url": "https://a.example/"}, {"url": "https://b.example/", "snippet": "own"}, "odd", 7]
    }));
    let id = create(&fake);
    let mut max_items = 0;
    let mut last_len = 0;
    let (done, _) = loop {
        let v = get(&fake, &id);
        let len = v["output"].as_array().unwrap().len();
        assert!(len >= last_len, "output never shrinks");
        last_len = len;
        if v["status"] == "completed" {
            break (v, ());
        }
        max_items = max_items.max(len);
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        max_items, 5,
        "3 search + 2 fetch items appear before the end"
    );
    let out = done["output"].as_array().unwrap();
    assert_eq!(out.len(), 6);
    // round-robin: batch 0 gets sources 0 and 3, batch 1 source 1, batch 2 source 2
    assert_eq!(out[0]["results"][0]["title"], "A");
    assert_eq!(out[0]["results"][1], json!(7));
    assert_eq!(out[1]["results"][0]["snippet"], "own");
    assert_eq!(out[1]["results"][0]["id"], 2);
    assert_eq!(out[2]["results"], json!(["odd"]));
    assert_eq!(out[3]["contents"][0]["url"], "https://a.example/");
    assert_eq!(out[4]["contents"][0]["url"], "https://b.example/");
}

#[test]
fn sse_stream_emits_every_event_in_order_live() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 400}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(r.complete);
    assert!(
        r.elapsed >= Duration::from_millis(390),
        "stream lasted {:?}",
        r.elapsed
    );
    // The official framing: `data:` lines only, no `event:` line, no `[DONE]`.
    assert!(r.frames().iter().all(|(event, _)| event.is_none()));
    assert!(r.text().starts_with("data: {\"type\":\"response.created\""));
    assert!(!r.text().contains("[DONE]"));
    let ev = r.events();
    assert_eq!(types(&ev), FULL);
    assert_sequence(&ev, 0);
    let id = ev[0].1["response"]["id"].as_str().unwrap().to_owned();
    assert_eq!(ev[0].1["response"]["status"], "queued");
    assert_eq!(ev[1].1["response"]["status"], "in_progress");
    assert_eq!(ev[2].1["queries"], json!(["fake query 1"]));
    assert_eq!(ev[3].1["results"].as_array().unwrap().len(), 2);
    assert_eq!(ev[4].1["urls"], json!(["https://example.org/one"]));
    assert_eq!(ev[5].1["contents"].as_array().unwrap().len(), 1);
    let msg_id = format!("msg_{}", &id[5..]);
    assert_eq!(
        ev[6].1,
        json!({"type": "response.output_text.delta", "sequence_number": 6, "item_id": msg_id,
               "output_index": 2, "content_index": 0, "delta": "Fake answer."})
    );
    assert_eq!(
        ev[7].1,
        json!({"type": "response.output_text.done", "sequence_number": 7, "item_id": msg_id,
               "output_index": 2, "content_index": 0, "text": "Fake answer."})
    );
    let fin = &ev[8].1["response"];
    assert_eq!(fin["id"], id.as_str());
    assert_eq!(fin["status"], "completed");
    assert_eq!(fin["output"].as_array().unwrap().len(), 3);
    assert_eq!(fin["output"][2]["id"], msg_id.as_str());
    assert_eq!(fin, &get(&fake, &id));
}

#[test]
fn sse_event_lines_add_an_event_line_to_every_frame() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60, "sse_event_lines": true}));
    let r = create_with(&fake, json!({"input": "q", "stream": true}));
    let frames = r.frames();
    assert_eq!(frames.len(), FULL.len());
    for (event, data) in &frames {
        assert_eq!(event.as_deref(), data["type"].as_str(), "{data}");
    }
    assert!(r.text().starts_with("event: response.created\ndata: {"));
    let id = frames[0].1["response"]["id"].as_str().unwrap().to_owned();
    // Read when each stream request arrives: a resume follows the scenario of now.
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true&starting_after=6"),
        None,
    );
    assert!(r.frames().iter().all(|(e, _)| e.is_some()));
    fake.set_scenario(json!({"sse_event_lines": false}));
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true&starting_after=6"),
        None,
    );
    let frames = r.frames();
    assert_eq!(frames.len(), 2);
    assert!(frames.iter().all(|(e, _)| e.is_none()));
}

#[test]
fn sse_comment_lines_precede_every_frame() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60, "sse_comment_lines": 3}));
    let r = create_with(&fake, json!({"input": "q", "stream": true}));
    let text = r.text();
    let comments = ": keep-alive\n".repeat(3);
    assert!(
        text.starts_with(&format!("{comments}data: {{")),
        "{text:.200}"
    );
    assert_eq!(text.matches(": keep-alive\n").count(), 3 * FULL.len());
    // Without the comments, the very same frames as usual.
    let frames = common::parse_frames(&text.replace(": keep-alive\n", ""));
    assert_eq!(frames.len(), FULL.len());
    assert!(frames.iter().all(|(e, _)| e.is_none()));
}

#[test]
fn sse_first_event_arrives_before_the_run_ends() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 800}));
    let (_s, raw, took) = send_until(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
        "response.created",
    );
    assert!(
        took < Duration::from_millis(500),
        "first event took {took:?}"
    );
    assert!(!String::from_utf8_lossy(&raw).contains("response.completed"));
}

#[test]
fn stream_false_scenario_answers_json() {
    let fake = FakePerplexity::start_with(json!({"stream": false}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["status"], "queued");
}

#[test]
fn resume_replays_after_starting_after_then_follows_live() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 300}));
    let id = create(&fake);
    // Live: started right away, it follows the run to the end.
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true&starting_after=0"),
        None,
    );
    assert!(r.complete);
    let ev = r.events();
    assert_eq!(types(&ev), FULL[1..]);
    assert_sequence(&ev, 1);
    // Replay of a finished run.
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true&starting_after=2"),
        None,
    );
    assert!(r.elapsed < Duration::from_millis(200));
    let ev = r.events();
    assert_eq!(types(&ev), FULL[3..]);
    assert_sequence(&ev, 3);
    // The alias path the official SDKs use.
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/responses/{id}?stream=true&starting_after=6"),
        None,
    );
    assert_eq!(types(&r.events()), FULL[7..]);
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true"),
        None,
    );
    assert_eq!(types(&r.events()), FULL);
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true&starting_after=8"),
        None,
    );
    assert!(r.complete && r.events().is_empty());

    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true&starting_after=x"),
        None,
    );
    assert_eq!(r.status, 400);
    let r = api(
        fake.addr(),
        "GET",
        "/v1/agent/resp_unknown?stream=true",
        None,
    );
    assert_eq!(r.status, 404);
    fake.set_scenario(json!({"resume": false}));
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true"),
        None,
    );
    assert_eq!(r.status, 404);
    // stream=false is a plain GET
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=false"),
        None,
    );
    assert_eq!(r.json()["status"], "completed");
}

#[test]
fn stream_drop_after_cuts_the_create_stream_and_resume_finishes_it() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 300, "stream_drop_after": 2}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    assert_eq!(r.status, 200);
    assert!(!r.complete, "the chunked body must not be terminated");
    let ev = r.events();
    assert_eq!(types(&ev), FULL[..2]);
    assert!(
        r.elapsed < Duration::from_millis(250),
        "cut right after event 2: {:?}",
        r.elapsed
    );
    let id = ev[0].1["response"]["id"].as_str().unwrap().to_owned();
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true&starting_after=1"),
        None,
    );
    assert!(r.complete);
    let ev = r.events();
    assert_eq!(types(&ev), FULL[2..]);
    assert_sequence(&ev, 2);
    // As many as there are events: the stream ends normally.
    fake.set_scenario(json!({"duration_ms": 50, "stream_drop_after": 9}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    assert!(r.complete);
    assert_eq!(r.events().len(), 9);
}

#[test]
fn cancel_moves_a_running_run_to_cancelled() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 5000, "cancel_delay_ms": 300}));
    let id = create(&fake);
    let r = api(fake.addr(), "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"response_id": id, "status": "cancelling"}));
    // The SDK's status literal has no `cancelling`: a GET shows `in_progress` meanwhile.
    assert_eq!(get(&fake, &id)["status"], "in_progress");
    assert_eq!(fake.runs()[0].status, json!("cancelling"));
    assert_eq!(fake.runs()[0].terminal_at_ms, None);
    // Cancelling again while cancelling is still a 200.
    let r = api(fake.addr(), "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!(r.status, 200);
    let (done, seen) = poll_to_end(&fake, &id);
    assert_eq!(seen.last().map(String::as_str), Some("cancelled"));
    assert!(done.get("usage").is_none());
    assert!(
        done["output"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["type"] != "message")
    );
    let info = &fake.runs()[0];
    let t = info.terminal_at_ms.expect("terminal");
    assert!(
        t >= info.created_at_ms + 150 && t < info.created_at_ms + 2000,
        "{info:?}"
    );

    let terminal = json!({"error": {"message": "the run is already terminal and cannot be cancelled", "type": "invalid_request", "code": 400}});
    let r = api(fake.addr(), "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!((r.status, r.json()), (400, terminal.clone()));
    let not_found =
        json!({"error": {"message": "response not found", "type": "not_found", "code": 404}});
    let r = api(fake.addr(), "POST", "/v1/agent/resp_unknown/cancel", None);
    assert_eq!((r.status, r.json()), (404, not_found.clone()));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/responses/resp_unknown/cancel",
        None,
    );
    assert_eq!((r.status, r.json()), (404, not_found));
    // The old answer, on request: that status with the terminal body.
    fake.set_scenario(json!({"cancel_unknown_status": 400}));
    let r = api(fake.addr(), "POST", "/v1/agent/resp_unknown/cancel", None);
    assert_eq!((r.status, r.json()), (400, terminal));
    fake.set_scenario(json!({"cancel_unknown_status": 409}));
    let r = api(fake.addr(), "POST", "/v1/agent/resp_unknown/cancel", None);
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (409, json!(409))
    );

    // `cancelling_status` restores the old `cancelling` in GETs.
    fake.set_scenario(
        json!({"duration_ms": 5000, "cancel_delay_ms": 300, "cancelling_status": "cancelling"}),
    );
    let other = create(&fake);
    let r = api(
        fake.addr(),
        "POST",
        &format!("/v1/responses/{other}/cancel"),
        None,
    );
    assert_eq!(
        r.json(),
        json!({"response_id": other, "status": "cancelling"})
    );
    assert_eq!(get(&fake, &other)["status"], "cancelling");

    // A completed run cannot be cancelled either.
    fake.set_scenario(json!({"duration_ms": 20}));
    let id = create(&fake);
    poll_to_end(&fake, &id);
    let r = api(fake.addr(), "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!(r.status, 400);
    assert_eq!(get(&fake, &id)["status"], "completed");
}

#[test]
fn cancel_during_a_live_stream_ends_it_with_response_cancelled() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 3000, "cancel_delay_ms": 100}));
    let addr = fake.addr();
    let (streamer, id) = common::stream_in_background(&fake);
    std::thread::sleep(Duration::from_millis(100));
    let r = api(addr, "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!(r.status, 200);
    let r = streamer.join().unwrap();
    assert!(r.complete);
    assert!(r.elapsed < Duration::from_millis(2000), "{:?}", r.elapsed);
    let ev = r.events();
    assert_sequence(&ev, 0);
    let last = ev.last().unwrap();
    assert_eq!(last.0, "response.cancelled");
    assert_eq!(last.1["response"]["status"], "cancelled");
    assert!(!types(&ev).contains(&"response.output_text.delta".to_owned()));
    // A resume afterwards replays the same cancelled timeline.
    let again = api(addr, "GET", &format!("/v1/agent/{id}?stream=true"), None).events();
    assert_eq!(types(&again), types(&ev));
}

#[test]
fn status_sequence_overrides_status_per_get() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 100, "status_sequence": ["in_progress", "weird", null]
    }));
    let id = create(&fake);
    assert_eq!(get(&fake, &id)["status"], "in_progress");
    assert_eq!(get(&fake, &id)["status"], "weird");
    std::thread::sleep(Duration::from_millis(150));
    let v = get(&fake, &id);
    assert_eq!(v["status"], Value::Null);
    assert_eq!(
        v["output"].as_array().unwrap().len(),
        3,
        "output follows the timeline"
    );
    assert_eq!(
        get(&fake, &id)["status"],
        Value::Null,
        "the last value repeats"
    );
    // Control view is the timeline's.
    assert_eq!(fake.runs()[0].status, json!("completed"));
}

#[test]
fn final_status_variants() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 30, "final_status": "failed"}));
    let (v, _) = poll_to_end(&fake, &create(&fake));
    assert_eq!(v["error"]["message"], "fake failure");
    assert!(
        v["output"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["type"] != "message")
    );

    fake.set_scenario(json!({"duration_ms": 30, "final_status": "failed", "error_message": null}));
    let (v, _) = poll_to_end(&fake, &create(&fake));
    assert!(v["error"].is_object() && v["error"].get("message").is_none());

    fake.set_scenario(json!({"duration_ms": 30, "final_status": "incomplete", "answer_parts": ["Part one. ", "Part two."]}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    let ev = r.events();
    assert_eq!(ev.last().unwrap().0, "response.incomplete");
    let deltas: Vec<_> = ev
        .iter()
        .filter(|(t, _)| t == "response.output_text.delta")
        .map(|(_, d)| d["delta"].clone())
        .collect();
    assert_eq!(deltas, [json!("Part one. "), json!("Part two.")]);
    let msg = ev.last().unwrap().1["response"]["output"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(msg["type"], "message");
    assert_eq!(msg["content"].as_array().unwrap().len(), 2);

    fake.set_scenario(json!({"duration_ms": 30, "final_status": "requires_action", "answer": "x"}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    let last = r.events().last().unwrap().clone();
    assert_eq!(last.0, "response.completed");
    assert_eq!(last.1["response"]["status"], "requires_action");

    fake.set_scenario(json!({"duration_ms": 30, "final_status": "cancelled"}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    let last = r.events().last().unwrap().clone();
    assert_eq!(last.0, "response.cancelled");
    assert!(last.1["response"].get("usage").is_none());
}

#[test]
fn final_response_create_response_and_terminal_shape() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 30,
        "final_response": {"id": "ignored", "status": "completed", "output": "not an array"},
        "create_response": {"weird": true}
    }));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q"})),
    );
    assert_eq!(r.json(), json!({"weird": true}));
    let id = fake.runs()[0].id.clone();
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(
        get(&fake, &id),
        json!({"id": id, "status": "completed", "output": "not an array"})
    );
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    let ev = r.events();
    let last = &ev.last().unwrap().1["response"];
    assert_eq!(last["output"], "not an array");
    assert_eq!(last["id"], ev[0].1["response"]["id"]);

    fake.set_scenario(json!({"duration_ms": 30, "stream_terminal_full": false}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    let ev = r.events();
    let id = ev[0].1["response"]["id"].clone();
    assert_eq!(
        ev.last().unwrap().1["response"],
        json!({"id": id, "status": "completed"})
    );
    assert!(
        ev[0].1["response"]["output"].is_array(),
        "created stays full"
    );
}

#[test]
fn auth_is_required() {
    let fake = FakePerplexity::start();
    let body = br#"{"input":"q"}"#;
    let unauthorized = json!({"error": {"message": "Invalid API key", "code": 401}});
    for headers in [
        vec![],
        vec![("Authorization", "Bearer ")],
        vec![("Authorization", "Basic abc")],
        vec![("Authorization", "Bearer")],
    ] {
        let r = send(fake.addr(), "POST", "/v1/agent", &headers, Some(body)).unwrap();
        assert_eq!(
            (r.status, r.json()),
            (401, unauthorized.clone()),
            "{headers:?}"
        );
    }
    for path in ["/v1/agent/resp_x", "/v1/agent/resp_x?stream=true"] {
        let r = send(fake.addr(), "GET", path, &[], None).unwrap();
        assert_eq!(r.status, 401);
    }
    let r = send(
        fake.addr(),
        "POST",
        "/search",
        &[],
        Some(br#"{"query":"q"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 401);
    assert!(fake.runs().is_empty());
    assert_eq!(
        fake.requests().len(),
        7,
        "rejected requests are recorded too"
    );

    fake.set_scenario(json!({"expected_key": "pplx-right"}));
    let r = api(
        fake.addr(),
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q"})),
    );
    assert_eq!(r.status, 401);
    let r = send(
        fake.addr(),
        "POST",
        "/v1/agent",
        &[("Authorization", "Bearer pplx-right")],
        Some(body),
    )
    .unwrap();
    assert_eq!(r.status, 200);
}

#[test]
fn search_returns_scenario_or_default_results() {
    let fake = FakePerplexity::start();
    let r = api(
        fake.addr(),
        "POST",
        "/search",
        Some(&json!({"query": "rust"})),
    );
    assert_eq!(r.status, 200);
    let v = r.json();
    assert!(v["id"].as_str().unwrap().starts_with("search_"));
    let t = v["server_time"].as_str().unwrap();
    assert!(
        t.len() == 20 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
        "{t}"
    );
    assert_eq!(v["results"].as_array().unwrap().len(), 3);
    for r in v["results"].as_array().unwrap() {
        assert!(r["url"].is_string() && r["title"].is_string() && r["snippet"].is_string());
    }
    let r = api(
        fake.addr(),
        "POST",
        "/search",
        Some(&json!({"query": ["a", "b"], "max_results": 2})),
    );
    assert_eq!(r.json()["results"].as_array().unwrap().len(), 2);

    fake.set_scenario(json!({"search_results": [{"url": "u1"}, 5, {"url": "u3"}]}));
    let r = api(
        fake.addr(),
        "POST",
        "/search",
        Some(&json!({"query": "q", "max_results": 2})),
    );
    assert_eq!(r.json()["results"], json!([{"url": "u1"}, 5]));

    let r = api(
        fake.addr(),
        "POST",
        "/search",
        Some(&json!({"max_results": 2})),
    );
    assert_eq!(r.status, 422);
    assert!(r.json()["detail"].is_array());
    let auth = format!("Bearer {KEY}");
    let r = send(
        fake.addr(),
        "POST",
        "/search",
        &[("Authorization", &auth)],
        Some(b"nope"),
    )
    .unwrap();
    assert_eq!(r.status, 400);
}

#[test]
fn unknown_routes_get_404_json() {
    let fake = FakePerplexity::start();
    for (m, p) in [
        ("GET", "/"),
        ("GET", "/v1/agent"),
        ("POST", "/v1/agents"),
        ("DELETE", "/v1/agent/x"),
        ("GET", "/search"),
        ("GET", "/v1/agent/x/cancel"),
    ] {
        let r = api(fake.addr(), m, p, None);
        assert_eq!(r.status, 404, "{m} {p}");
        assert_eq!(r.json()["error"]["code"], 404);
    }
    assert_eq!(fake.requests().len(), 6);
}

#[test]
fn large_bodies_and_repeated_headers_are_recorded_in_full() {
    let fake = FakePerplexity::start();
    let big = "a".repeat(64 * 1024 * 1024 + 10);
    let body = format!(r#"{{"input":"{big}"}}"#);
    let auth = format!("Bearer {KEY}");
    let r = send(
        fake.addr(),
        "POST",
        "/v1/agent?x=1",
        &[("Authorization", &auth), ("X-Dup", "a"), ("x-dup", "b")],
        Some(body.as_bytes()),
    )
    .unwrap();
    assert_eq!(r.status, 200);
    let reqs = fake.requests();
    assert_eq!(reqs[0].body.len(), body.len());
    assert_eq!(
        reqs[0].body_json.as_ref().unwrap()["input"]
            .as_str()
            .unwrap()
            .len(),
        big.len()
    );
    assert_eq!(reqs[0].headers["x-dup"], "a, b");
    assert_eq!(reqs[0].query.as_deref(), Some("x=1"));
    assert_eq!(reqs[0].path, "/v1/agent");
}

#[test]
fn dropping_the_fake_stops_the_server() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 10_000}));
    let addr = fake.addr();
    assert_eq!(fake.base_url(), format!("http://127.0.0.1:{}", addr.port()));
    // A live stream must not keep the server alive.
    let (_stream, _, _) = send_until(
        addr,
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
        "response.created",
    );
    let t = Instant::now();
    drop(fake);
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usable_and_droppable_inside_a_tokio_runtime() {
    let fake = FakePerplexity::start();
    let addr = fake.addr();
    let r = tokio::task::spawn_blocking(move || {
        api(addr, "POST", "/v1/agent", Some(&json!({"input": "q"})))
    })
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    drop(fake);
}

#[tokio::test(flavor = "current_thread")]
async fn droppable_inside_a_current_thread_runtime() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50}));
    assert_eq!(fake.runs().len(), 0);
    drop(fake);
}

fn create_with(fake: &FakePerplexity, body: Value) -> common::Resp {
    api(fake.addr(), "POST", "/v1/agent", Some(&body))
}

fn function_tools() -> Value {
    json!([{"type": "web_search"}, {"type": "function", "name": "get_weather", "parameters": {}}])
}

const CALLS_DONE: [&str; 9] = [
    "response.created",
    "response.in_progress",
    "response.reasoning.search_queries",
    "response.reasoning.search_results",
    "response.reasoning.fetch_url_queries",
    "response.reasoning.fetch_url_results",
    "response.output_item.done",
    "response.output_item.done",
    "response.completed",
];

#[test]
fn function_calls_end_the_run_and_the_next_round_answers() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 200,
        "function_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "lookup", "arguments": "{\"q\": 1}", "call_id": "call_mine"}
        ],
        "function_call_status": "requires_action"
    }));
    let r = create_with(
        &fake,
        json!({"input": "q", "stream": true, "tools": function_tools()}),
    );
    assert!(r.complete);
    let ev = r.events();
    assert_eq!(types(&ev), CALLS_DONE);
    assert_sequence(&ev, 0);
    let id = ev[0].1["response"]["id"].as_str().unwrap().to_owned();
    let suffix = &id[5..];
    assert_eq!(ev[6].1["output_index"], 2);
    assert_eq!(
        ev[6].1["item"],
        json!({
            "id": format!("fc_1_{suffix}"), "type": "function_call", "status": "completed",
            "name": "get_weather", "call_id": format!("call_1_{suffix}"),
            "arguments": "{\"city\":\"Paris\"}", "thought_signature": "fake-signature"
        })
    );
    assert_eq!(ev[7].1["output_index"], 3);
    assert_eq!(ev[7].1["item"]["id"], format!("fc_2_{suffix}"));
    assert_eq!(ev[7].1["item"]["call_id"], "call_mine");
    assert_eq!(ev[7].1["item"]["arguments"], "{\"q\": 1}");
    let fin = &ev[8].1["response"];
    assert_eq!(fin["status"], "requires_action");
    assert!(fin["usage"].is_object());
    let out = fin["output"].as_array().unwrap();
    let kinds: Vec<_> = out.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "search_results",
            "fetch_url_results",
            "function_call",
            "function_call"
        ]
    );
    assert_eq!(fin, &get(&fake, &id));
    // Resumes replay the function call events with their sequence numbers.
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true&starting_after=5"),
        None,
    );
    let again = r.events();
    assert_eq!(types(&again), CALLS_DONE[6..]);
    assert_sequence(&again, 6);
    assert_eq!(again[0].1["item"], ev[6].1["item"]);
    // Terminal for the fake.
    let r = api(fake.addr(), "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!(r.status, 400);
    let info = &fake.runs()[0];
    assert_eq!(
        (info.round, info.status.clone()),
        (0, json!("requires_action"))
    );
    assert!(info.terminal_at_ms.is_some());

    // Round 1 (function_call_rounds 1): an ordinary answer.
    let r = create_with(
        &fake,
        json!({"input": [{"type": "function_call_output", "call_id": "call_mine", "output": "{}"}],
               "tools": function_tools(), "previous_response_id": id}),
    );
    assert_eq!(r.status, 200);
    let second = r.json()["id"].as_str().unwrap().to_owned();
    let (done, _) = poll_to_end(&fake, &second);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][2]["type"], "message");
    assert_eq!(fake.runs()[1].round, 1);
    // Round 2, through the control endpoint.
    let r = create_with(&fake, json!({"input": "q", "previous_response_id": second}));
    assert_eq!(r.status, 200);
    let runs = api(fake.addr(), "GET", "/_control/runs", None).json();
    let rounds: Vec<_> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["round"].clone())
        .collect();
    assert_eq!(rounds, [json!(0), json!(1), json!(2)]);

    // More rounds of calls; the JSON-mode status is `completed` by default.
    fake.set_scenario(json!({
        "duration_ms": 30, "function_call_rounds": 2,
        "function_calls": [{"name": "f", "arguments": "{}"}]
    }));
    let r = create_with(
        &fake,
        json!({"input": "q", "tools": function_tools(), "previous_response_id": id}),
    );
    let (done, _) = poll_to_end(&fake, r.json()["id"].as_str().unwrap());
    assert_eq!(done["status"], "completed");
    let last = done["output"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["type"].clone(), last["name"].clone()),
        (json!("function_call"), json!("f"))
    );
}

#[test]
fn function_calls_need_a_function_tool_and_previous_ids_must_be_known() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 30, "function_calls": [{"name": "f", "arguments": {}}]
    }));
    // No function tool (or a tool that is not an object of that type): a message.
    for tools in [
        None,
        Some(json!([{"type": "web_search"}])),
        Some(json!(["function"])),
        Some(json!({"type": "function"})),
    ] {
        let mut body = json!({"input": "q"});
        if let Some(t) = &tools {
            body["tools"] = t.clone();
        }
        let id = create_with(&fake, body).json()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (done, _) = poll_to_end(&fake, &id);
        let last = done["output"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["type"], "message", "{tools:?}");
    }
    // `function_call_rounds: 0`: never.
    fake.set_scenario(json!({
        "duration_ms": 30, "function_call_rounds": 0,
        "function_calls": [{"name": "f", "arguments": {}}]
    }));
    let id = create_with(&fake, json!({"input": "q", "tools": function_tools()})).json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (done, _) = poll_to_end(&fake, &id);
    assert_eq!(done["output"][2]["type"], "message");

    let before = fake.runs().len();
    let not_found = json!({"error": {"message": "previous response not found", "type": "invalid_request", "code": 400}});
    let r = create_with(
        &fake,
        json!({"input": "q", "previous_response_id": "resp_unknown"}),
    );
    assert_eq!((r.status, r.json()), (400, not_found));
    for bad in [json!(5), json!({}), json!([id]), json!(true)] {
        let r = create_with(&fake, json!({"input": "q", "previous_response_id": bad}));
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(r.json()["error"]["type"], "invalid_request");
    }
    assert_eq!(fake.runs().len(), before, "no run created");
    // `null` is no previous response at all.
    let r = create_with(&fake, json!({"input": "q", "previous_response_id": null}));
    assert_eq!(r.status, 200);
    assert_eq!(fake.runs().last().unwrap().round, 0);
    // Known after a reset? No: reset forgets the runs.
    fake.reset();
    let r = create_with(&fake, json!({"input": "q", "previous_response_id": id}));
    assert_eq!(r.status, 400);
}

#[test]
fn finance_results_come_with_the_last_search_batch() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 200, "search_batches": 2,
        "finance_results": [{"ticker": "ACME", "price": 12.5}, "raw"]
    }));
    let body = json!({"input": "q", "stream": true, "tools": [{"type": "finance_search"}]});
    let ev = create_with(&fake, body.clone()).events();
    assert_eq!(
        types(&ev),
        [
            "response.created",
            "response.in_progress",
            "response.reasoning.search_queries",
            "response.reasoning.search_results",
            "response.reasoning.search_queries",
            "response.reasoning.search_results",
            "response.output_item.done",
            "response.reasoning.fetch_url_queries",
            "response.reasoning.fetch_url_results",
            "response.output_text.delta",
            "response.output_text.done",
            "response.completed"
        ]
    );
    assert_sequence(&ev, 0);
    // The SDK has no finance item: it arrives as `unknown` with a payload.
    let item = json!({"type": "unknown", "item_name": "finance_results",
                      "payload": {"results": [{"ticker": "ACME", "price": 12.5}, "raw"]}});
    assert_eq!(
        ev[6].1,
        json!({"type": "response.output_item.done", "sequence_number": 6,
               "output_index": 2, "item": item})
    );
    assert_eq!(ev[9].1["output_index"], 4, "the message comes after it");
    let out = ev[11].1["response"]["output"].as_array().unwrap().clone();
    assert_eq!(out.len(), 5);
    assert_eq!(out[2], item);
    assert_eq!(out[4]["type"], "message");
    // Without the tool, no item.
    let id = create(&fake);
    let (done, _) = poll_to_end(&fake, &id);
    assert!(
        done["output"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["type"] != "unknown" && i["type"] != "finance_results")
    );
    // The old shape, on request.
    fake.set_scenario(json!({
        "duration_ms": 60, "finance_item": "finance_results",
        "finance_results": [{"ticker": "ACME"}]
    }));
    let ev = create_with(&fake, body).events();
    let fin = ev
        .iter()
        .find(|(t, _)| t == "response.reasoning.finance_results")
        .expect("the old event");
    assert_eq!(fin.1["results"], json!([{"ticker": "ACME"}]));
    assert!(!types(&ev).contains(&"response.output_item.done".to_owned()));
    assert_eq!(
        ev.last().unwrap().1["response"]["output"][1],
        json!({"type": "finance_results", "results": [{"ticker": "ACME"}]})
    );
}

#[test]
fn background_false_answers_the_final_response() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 300}));
    let r = create_with(&fake, json!({"input": "q", "background": false}));
    assert_eq!(r.status, 200);
    assert!(r.elapsed >= Duration::from_millis(290), "{:?}", r.elapsed);
    let v = r.json();
    assert_eq!(v["status"], "completed");
    assert!(v["usage"].is_object());
    assert_eq!(v, get(&fake, v["id"].as_str().unwrap()));
    // Anything but the boolean false keeps the background answer.
    for background in [json!(true), json!("false"), json!(0), Value::Null] {
        let r = create_with(&fake, json!({"input": "q", "background": background}));
        assert_eq!(r.json()["status"], "queued", "{background}");
        assert!(r.elapsed < Duration::from_millis(250));
    }
    // A stream stays a stream.
    let r = create_with(
        &fake,
        json!({"input": "q", "background": false, "stream": true}),
    );
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(types(&r.events()), FULL);

    // create_response: the foreground timing, that body.
    fake.set_scenario(
        json!({"duration_ms": 200, "create_response": {"weird": true}, "stream": false}),
    );
    let r = create_with(
        &fake,
        json!({"input": "q", "background": false, "stream": true}),
    );
    assert!(r.elapsed >= Duration::from_millis(190), "{:?}", r.elapsed);
    assert_eq!(r.json(), json!({"weird": true}));

    // Function calls: the final response carries them.
    fake.set_scenario(json!({
        "duration_ms": 50, "function_call_status": "requires_action",
        "function_calls": [{"name": "f", "arguments": "{}"}]
    }));
    let r = create_with(
        &fake,
        json!({"input": "q", "background": false, "tools": function_tools()}),
    );
    let v = r.json();
    assert_eq!(v["status"], "requires_action");
    assert_eq!(v["output"][2]["type"], "function_call");
}

#[test]
fn background_false_follows_a_cancel_and_a_reset() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 5000, "cancel_delay_ms": 100}));
    let addr = fake.addr();
    let (waiting, id) =
        common::create_in_background(&fake, json!({"input": "q", "background": false}));
    std::thread::sleep(Duration::from_millis(50));
    let r = api(addr, "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!(r.status, 200);
    let r = waiting.join().unwrap();
    assert!(r.elapsed < Duration::from_millis(2000), "{:?}", r.elapsed);
    assert_eq!(r.json()["status"], "cancelled");
    assert!(r.json().get("usage").is_none());

    let waiting = std::thread::spawn(move || {
        api(
            addr,
            "POST",
            "/v1/agent",
            Some(&json!({"input": "q", "background": false})),
        )
    });
    while fake.runs().len() < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    fake.reset();
    let r = waiting.join().unwrap();
    assert!(r.elapsed < Duration::from_millis(2000), "{:?}", r.elapsed);
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["message"], "response not found");
}

#[test]
fn store_false_hides_the_run_from_retrieve_and_cancel() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 2000}));
    let r = create_with(&fake, json!({"input": "q", "store": false}));
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["status"], "queued");
    let id = v["id"].as_str().unwrap().to_owned();
    let not_found =
        json!({"error": {"message": "response not found", "type": "not_found", "code": 404}});
    for path in [
        format!("/v1/agent/{id}"),
        format!("/v1/agent/{id}?stream=true"),
        format!("/v1/agent/{id}?stream=true&starting_after=1"),
    ] {
        let r = api(fake.addr(), "GET", &path, None);
        assert_eq!((r.status, r.json()), (404, not_found.clone()), "{path}");
    }
    let r = api(fake.addr(), "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!((r.status, r.json()), (404, not_found.clone()));
    assert_ne!(fake.runs()[0].status, json!("cancelling"), "not cancelled");
    // Still listed, and it plays out: a foreground create sees its end.
    fake.set_scenario(json!({"duration_ms": 100, "cancel_unknown_status": 400}));
    let r = api(fake.addr(), "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"]["message"],
        "the run is already terminal and cannot be cancelled"
    );
    let r = create_with(
        &fake,
        json!({"input": "q", "store": false, "background": false}),
    );
    assert_eq!(r.json()["status"], "completed");
    let hidden = r.json()["id"].as_str().unwrap().to_owned();
    let r = api(fake.addr(), "GET", &format!("/v1/agent/{hidden}"), None);
    assert_eq!(r.status, 404);
    let runs = fake.runs();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1].status, json!("completed"));
    // Its own create stream is complete.
    let r = create_with(&fake, json!({"input": "q", "store": false, "stream": true}));
    assert!(r.complete);
    assert_eq!(types(&r.events()), FULL);
    // It can still be the previous response of a later round.
    let r = create_with(&fake, json!({"input": "q", "previous_response_id": hidden}));
    assert_eq!(r.status, 200);
    assert_eq!(fake.runs().last().unwrap().round, 1);
    // Anything but the boolean false stores.
    let r = create_with(&fake, json!({"input": "q", "store": "false"}));
    let id = r.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(get(&fake, &id)["id"], id.as_str());
}

#[test]
fn a_json_schema_answer_by_default_and_a_bad_schema_is_not_fatal() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 0}));
    let format = |schema: Value| json!({"type": "json_schema", "json_schema": {"name": "r", "schema": schema}});
    let answer = |body: Value| {
        let mut body = body;
        body["background"] = json!(false);
        let r = create_with(&fake, body);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["output"][2]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let schema = json!({"type": "object", "properties": {"answer": {"type": "string"},
        "sources": {"type": "array", "items": {"type": "string"}, "maxItems": 1}},
        "required": ["answer", "sources"], "additionalProperties": false});
    let text = answer(json!({"input": "q", "response_format": format(schema)}));
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"answer": "Fake answer.", "sources": ["https://example.org/one"]})
    );
    // Schemas that cannot be answered get the plain answer, and the fake lives on.
    for schema in [
        json!(false),
        json!(7),
        json!({"$ref": "#"}),
        json!({"type": ["x"]}),
    ] {
        let text = answer(json!({"input": "q", "response_format": format(schema.clone())}));
        assert_eq!(text, "Fake answer.", "{schema}");
    }
    // Without strict fields a format of another type is only recorded.
    fake.set_scenario(json!({"duration_ms": 0, "strict_fields": false}));
    let odd = json!({"type": "json_object", "json_schema": {"schema": {"type": "object"}}});
    assert_eq!(
        answer(json!({"input": "q", "response_format": odd})),
        "Fake answer."
    );
    // A scripted answer wins.
    fake.set_scenario(json!({"duration_ms": 0, "answer": "Scripted."}));
    let text = answer(json!({"input": "q", "response_format": format(json!({"type": "object"}))}));
    assert_eq!(text, "Scripted.");
}
