//! Black-box tests of the Streamable HTTP transport, with a raw HTTP/1.1 client.

mod common;

use std::time::Duration;

use common::{HttpServer, TIMEOUT, command, wait_exit};
use serde_json::{Value, json};

#[test]
fn lifecycle_sessions_and_methods() {
    let s = HttpServer::spawn(&[]);
    assert!(s.addr.ip().is_loopback());

    let r = s.post(
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-03-26"}}),
    );
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    let session = r.header("mcp-session-id").unwrap().to_owned();
    assert!(!session.is_empty());
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-03-26");

    // Notifications and responses: 202, no body.
    let r = s.post(
        &[("mcp-session-id", &session)],
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
    let r = s.post(
        &[("mcp-session-id", &session)],
        &json!({"jsonrpc": "2.0", "id": 5, "result": {}}),
    );
    assert_eq!(r.status, 202);

    let r = s.post(
        &[("mcp-session-id", &session)],
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["result"]["tools"].as_array().unwrap().len(), 13);

    let r = s.call(&session, 3, "echo", json!({"text": "over http"}));
    assert_eq!(r["id"], 3);
    assert_eq!(r["result"]["content"][0]["text"], "over http");

    // Requests without a session id are accepted too; unknown ones are 404.
    let r = s
        .post(
            &[],
            &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "pid", "arguments": {}}}),
        )
        .json();
    assert_eq!(r["result"]["content"][0]["text"], s.child.id().to_string());
    let r = s.post(
        &[("mcp-session-id", "nope")],
        &json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}),
    );
    assert_eq!(r.status, 404);

    // Malformed JSON: 400 with a JSON-RPC parse error.
    let r = s
        .request(
            "POST",
            "/mcp",
            &[("content-type", "application/json")],
            Some("{oops"),
        )
        .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32700);
    assert_eq!(r.json()["id"], Value::Null);

    let r = s.request("GET", "/mcp", &[], None).unwrap();
    assert_eq!(r.status, 405);

    let r = s
        .request("DELETE", "/mcp", &[("mcp-session-id", &session)], None)
        .unwrap();
    assert_eq!(r.status, 200);
    let r = s.post(
        &[("mcp-session-id", &session)],
        &json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
    );
    assert_eq!(r.status, 404);
}

#[test]
fn headers_are_recorded() {
    let s = HttpServer::spawn(&[]);
    let session = s.init(&[("Authorization", "Bearer secret-a"), ("X-Custom", "1")]);
    s.call(&session, 1, "echo", json!({"text": "hi"}));
    let r = s.request("GET", "/_headers", &[], None).unwrap();
    assert_eq!(r.status, 200);
    let recorded = r.json();
    let recorded = recorded.as_array().unwrap();
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    assert_eq!(recorded[0]["authorization"], "Bearer secret-a");
    assert_eq!(recorded[0]["x-custom"], "1");
    assert_eq!(recorded[0]["content-type"], "application/json");
    assert!(recorded[1].get("authorization").is_none());
    assert_eq!(recorded[1]["mcp-session-id"], session.as_str());
    // GET /_headers itself is not recorded.
    let again = s.request("GET", "/_headers", &[], None).unwrap().json();
    assert_eq!(again.as_array().unwrap().len(), 3);
}

#[test]
fn redirect_to_answers_307_for_every_post() {
    let s = HttpServer::spawn(&["--redirect-to", "http://127.0.0.1:9/elsewhere"]);
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ] {
        let r = s.post(&[("authorization", "Bearer x")], &msg);
        assert_eq!(r.status, 307);
        assert_eq!(r.header("location"), Some("http://127.0.0.1:9/elsewhere"));
    }
    let recorded = s.request("GET", "/_headers", &[], None).unwrap().json();
    assert_eq!(recorded.as_array().unwrap().len(), 2);
}

#[test]
fn require_header_gates_posts() {
    let s = HttpServer::spawn(&["--require-header", "Authorization: Bearer right"]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    assert_eq!(s.post(&[], &init).status, 401);
    assert_eq!(
        s.post(&[("authorization", "Bearer wrong")], &init).status,
        401
    );
    assert_eq!(
        s.post(&[("authorization", "bearer right")], &init).status,
        401
    );
    let r = s.post(&[("authorization", "Bearer right")], &init);
    assert_eq!(r.status, 200);
    assert!(r.header("mcp-session-id").is_some());
}

#[test]
fn concurrency_and_cancellation_over_http() {
    let s = HttpServer::spawn(&[]);
    let session = s.init(&[]);
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..2)
            .map(|i| {
                let (s, session) = (&s, &session);
                scope.spawn(move || s.call(session, 10 + i, "slow", json!({"ms": 500})))
            })
            .collect();
        for c in calls {
            assert_eq!(
                c.join().unwrap()["result"]["content"][0]["text"],
                "slept 500"
            );
        }
    });
    let stats = s.stats(&session);
    assert_eq!(stats["max_in_flight"], 2);
    assert_eq!(stats["in_flight"], 0);

    std::thread::scope(|scope| {
        let slow = scope.spawn(|| {
            s.post(
                &[("mcp-session-id", &session)],
                &json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                        "params": {"name": "slow", "arguments": {"ms": 10_000}}}),
            )
        });
        std::thread::sleep(Duration::from_millis(300));
        let r = s.post(
            &[("mcp-session-id", &session)],
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 77, "reason": "test"}}),
        );
        assert_eq!(r.status, 202);
        // The cancelled call's POST ends at once with 202 and no JSON-RPC reply.
        let r = slow.join().unwrap();
        assert_eq!(r.status, 202);
        assert!(r.body.is_empty());
    });
    let stats = s.stats(&session);
    assert_eq!(stats["cancelled"], json!([77]));
    assert_eq!(stats["in_flight"], 0);
}

#[test]
fn invalid_frames_over_http_are_sse_events() {
    let s = HttpServer::spawn(&["--invalid-frames"]);
    let r = s.post(
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let data: Vec<&str> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.len(), 3, "{}", r.body);
    assert_eq!(data[0], "this is not json");
    assert_eq!(data[1], "[1,2,3]");
    let v: Value = serde_json::from_str(data[2]).unwrap();
    assert_eq!(v["id"], 1);
}

#[test]
fn crash_exits_the_http_server() {
    let mut s = HttpServer::spawn(&[]);
    let session = s.init(&[]);
    let r = s.request(
        "POST",
        "/mcp",
        &[("content-type", "application/json"), ("mcp-session-id", &session)],
        Some(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash","arguments":{}}}"#),
    );
    assert!(r.is_err(), "crash got an HTTP response: {r:?}");
    assert_eq!(wait_exit(&mut s.child, TIMEOUT).code(), Some(1));
}

#[test]
fn exit_after_init_over_http() {
    let mut s = HttpServer::spawn(&["--exit-after-init"]);
    let r = s.post(
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(wait_exit(&mut s.child, TIMEOUT).code(), Some(0));
}

#[test]
fn http_only_on_loopback() {
    let out = command(&["--http", "--bind", "192.0.2.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}
