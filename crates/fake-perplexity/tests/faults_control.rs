//! Black-box tests of fault injection, the `/_control` endpoints and the binary.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{KEY, api, send};
use fake_perplexity::FakePerplexity;
use serde_json::json;

fn create_body() -> serde_json::Value {
    json!({"input": "q"})
}

#[test]
fn status_fault_with_headers_counts_down_times() {
    let fake = FakePerplexity::start();
    fake.push_fault(
        json!({"route": "create", "status": 503, "times": 2, "headers": {"Retry-After": "1"}}),
    );
    for _ in 0..2 {
        let r = api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
        assert_eq!(r.status, 503);
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(r.body.is_empty(), "no body unless one is given");
    }
    let r = api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
    assert_eq!(r.status, 200);
    assert_eq!(fake.runs().len(), 1, "faulted creates make no run");
    assert_eq!(fake.requests().len(), 3, "faulted requests are recorded");
}

#[test]
fn faults_match_routes_first_match_wins() {
    let fake = FakePerplexity::start();
    fake.push_fault(json!({"route": "get", "status": 500, "body": "plain text"}));
    fake.push_fault(json!({"route": "stream", "status": 502, "json": {"x": 1}}));
    fake.push_fault(json!({"route": "search", "status": 429, "body": ""}));
    fake.push_fault(json!({"route": "cancel", "status": 504}));
    fake.push_fault(json!({"route": "any", "status": 418}));
    // create only matches `any`
    let r = api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
    assert_eq!(r.status, 418);
    let r = api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
    assert_eq!(r.status, 200);
    let id = r.json()["id"].as_str().unwrap().to_owned();
    let r = api(
        fake.addr(),
        "GET",
        &format!("/v1/agent/{id}?stream=true"),
        None,
    );
    assert_eq!((r.status, r.json()), (502, json!({"x": 1})));
    let r = api(fake.addr(), "GET", &format!("/v1/agent/{id}"), None);
    assert_eq!((r.status, r.text()), (500, "plain text".to_owned()));
    let r = api(fake.addr(), "POST", "/search", Some(&json!({"query": "q"})));
    assert_eq!((r.status, r.body.len()), (429, 0));
    let r = api(fake.addr(), "POST", &format!("/v1/agent/{id}/cancel"), None);
    assert_eq!(r.status, 504);
    // all used up
    let r = api(fake.addr(), "GET", &format!("/v1/agent/{id}"), None);
    assert_eq!(r.status, 200);
}

#[test]
fn faults_come_before_auth() {
    let fake = FakePerplexity::start();
    fake.push_fault(json!({"status": 503}));
    let r = send(fake.addr(), "GET", "/v1/agent/x", &[], None).unwrap();
    assert_eq!(r.status, 503);
}

#[test]
fn redirect_fault() {
    let fake = FakePerplexity::start();
    fake.push_fault(json!({"kind": "redirect"}));
    fake.push_fault(json!({"kind": "redirect", "status": 307, "location": "http://127.0.0.1:9/x"}));
    let r = api(fake.addr(), "GET", "/v1/agent/x", None);
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("http://127.0.0.1:1/elsewhere"));
    let r = api(fake.addr(), "GET", "/v1/agent/x", None);
    assert_eq!(r.status, 307);
    assert_eq!(r.header("location"), Some("http://127.0.0.1:9/x"));
}

#[test]
fn invalid_and_non_object_json_faults() {
    let fake = FakePerplexity::start();
    fake.push_fault(json!({"kind": "invalid_json"}));
    fake.push_fault(json!({"kind": "non_object_json", "status": 201}));
    let r = api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
    assert_eq!((r.status, r.text()), (200, "<html>oops".to_owned()));
    let r = api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
    assert_eq!((r.status, r.json()), (201, json!([1, 2, 3])));
}

#[test]
fn oversized_fault_sizes_exactly() {
    let fake = FakePerplexity::start();
    let n = 3 * 1024 * 1024 + 7;
    fake.push_fault(json!({"kind": "oversized", "bytes": n}));
    fake.push_fault(json!({"kind": "oversized", "bytes": n, "chunked": true}));
    fake.push_fault(json!({"kind": "oversized", "bytes": 5}));
    let r = api(fake.addr(), "GET", "/v1/agent/x", None);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some(n.to_string().as_str()));
    assert!(r.header("transfer-encoding").is_none());
    assert_eq!(r.body.len(), n);
    assert!(r.complete);
    assert!(r.body.starts_with(b"{\"padding\":\"xxx") && r.body.ends_with(b"xx\"}"));
    serde_json::from_slice::<serde_json::Value>(&r.body).expect("JSON-ish");

    let r = api(fake.addr(), "GET", "/v1/agent/x", None);
    assert!(r.header("content-length").is_none());
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert!(r.complete);
    assert_eq!(r.body.len(), n);

    let r = api(fake.addr(), "GET", "/v1/agent/x", None);
    assert_eq!(r.body, b"{\"pad");
}

#[test]
fn slow_fault_delays_then_handles_normally() {
    let fake = FakePerplexity::start();
    fake.push_fault(json!({"kind": "slow", "delay_ms": 250, "route": "create"}));
    let r = api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
    assert!(r.elapsed >= Duration::from_millis(250), "{:?}", r.elapsed);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "queued");
    let r = api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
    assert!(r.elapsed < Duration::from_millis(250));
}

#[test]
fn drop_fault_closes_the_connection_without_a_response() {
    let fake = FakePerplexity::start();
    fake.push_fault(json!({"kind": "drop", "route": "get", "times": 2}));
    let auth = format!("Bearer {KEY}");
    for _ in 0..2 {
        let e = send(
            fake.addr(),
            "GET",
            "/v1/agent/x",
            &[("Authorization", &auth)],
            None,
        )
        .unwrap_err();
        assert!(e.contains("without a response"), "{e}");
    }
    let r = api(fake.addr(), "GET", "/v1/agent/x", None);
    assert_eq!(r.status, 404);
    assert_eq!(fake.requests().len(), 3);
}

#[test]
#[should_panic(expected = "invalid fault")]
fn push_fault_panics_on_invalid_fault() {
    FakePerplexity::start().push_fault(json!({"kind": "nope"}));
}

#[test]
#[should_panic(expected = "invalid scenario")]
fn set_scenario_panics_on_invalid_scenario() {
    FakePerplexity::start().set_scenario(json!({"duration_ms": "long"}));
}

#[test]
fn control_endpoints_work_over_http() {
    let fake = FakePerplexity::start();
    let a = fake.addr();
    let post = |path: &str, body: &str| send(a, "POST", path, &[], Some(body.as_bytes())).unwrap();

    let r = post(
        "/_control/scenario",
        r#"{"duration_ms": 40, "final_status": "failed"}"#,
    );
    assert_eq!((r.status, r.json()), (200, json!({"ok": true})));
    assert_eq!(
        post("/_control/scenario", r#"{"duraton_ms": 40}"#).status,
        400
    );
    assert_eq!(post("/_control/scenario", "nope").status, 400);
    assert_eq!(post("/_control/faults", r#"{"kind": "boom"}"#).status, 400);
    let r = post(
        "/_control/faults",
        r#"[{"route": "get", "status": 500}, {"route": "get", "status": 501}]"#,
    );
    assert_eq!(r.status, 200);

    let id = api(a, "POST", "/v1/agent", Some(&create_body())).json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(api(a, "GET", &format!("/v1/agent/{id}"), None).status, 500);
    assert_eq!(api(a, "GET", &format!("/v1/agent/{id}"), None).status, 501);
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(
        api(a, "GET", &format!("/v1/agent/{id}"), None).json()["status"],
        "failed"
    );

    let r = send(a, "GET", "/_control/requests", &[], None).unwrap();
    let reqs = r.json();
    let reqs = reqs.as_array().unwrap();
    assert_eq!(reqs.len(), 4, "control calls are not recorded");
    assert_eq!(reqs[0]["method"], "POST");
    assert_eq!(reqs[0]["path"], "/v1/agent");
    assert_eq!(reqs[0]["query"], serde_json::Value::Null);
    assert_eq!(reqs[0]["body_json"], create_body());
    assert_eq!(reqs[0]["headers"]["authorization"], format!("Bearer {KEY}"));
    assert!(reqs[0]["at_ms"].as_u64().unwrap() > 0);
    assert!(reqs[0]["body"].is_string());

    let r = send(a, "GET", "/_control/runs", &[], None).unwrap();
    let runs = r.json();
    assert_eq!(runs[0]["id"], id.as_str());
    assert_eq!(runs[0]["status"], "failed");
    assert!(
        runs[0]["created_at_ms"].as_u64().unwrap() <= runs[0]["terminal_at_ms"].as_u64().unwrap()
    );

    assert_eq!(
        send(a, "DELETE", "/_control/requests", &[], None)
            .unwrap()
            .status,
        200
    );
    assert!(fake.requests().is_empty());

    post("/_control/faults", r#"{"status": 500}"#);
    assert_eq!(post("/_control/reset", "").status, 200);
    assert!(fake.runs().is_empty());
    let r = api(a, "POST", "/v1/agent", Some(&create_body()));
    assert_eq!(r.status, 200, "faults were cleared");
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(
        send(a, "GET", "/_control/nope", &[], None).unwrap().status,
        404
    );
    assert_eq!(
        send(a, "GET", "/_control/reset", &[], None).unwrap().status,
        404
    );
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn library_helpers_mirror_the_control_endpoints() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 10_000}));
    fake.push_fault(json!([{"status": 500}]));
    assert_eq!(
        api(fake.addr(), "POST", "/v1/agent", Some(&create_body())).status,
        500
    );
    api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
    assert_eq!(fake.requests().len(), 2);
    fake.clear_requests();
    assert!(fake.requests().is_empty());
    assert_eq!(fake.runs().len(), 1);
    assert_eq!(fake.runs()[0].status, json!("queued"));
    fake.reset();
    assert!(fake.runs().is_empty());
    // Default scenario again: a run completes in 300 ms.
    api(fake.addr(), "POST", "/v1/agent", Some(&create_body()));
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(fake.runs()[0].status, json!("completed"));
}

#[test]
fn binary_prints_its_address_serves_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-perplexity"))
        .args(["--port", "0", "--scenario", r#"{"duration_ms": 20}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .trim_end()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {line:?}"));
    assert!(addr.starts_with("127.0.0.1:"));
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    let r = api(
        addr,
        "POST",
        "/v1/agent",
        Some(&json!({"input": "q", "stream": true})),
    );
    assert_eq!(r.events().last().unwrap().0, "response.completed");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing else on stdout");
}

#[test]
fn binary_reads_scenario_files_and_refuses_bad_input() {
    let exe = env!("CARGO_BIN_EXE_fake-perplexity");
    let out = Command::new(exe)
        .args(["--bind", "0.0.0.0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
    let out = Command::new(exe)
        .args(["--scenario", r#"{"bogus": 1}"#])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus"));

    let path = std::env::temp_dir().join(format!(
        "fake-perplexity-scenario-{}.json",
        std::process::id()
    ));
    std::fs::write(&path, r#"{"search_results": [{"url": "from-file"}]}"#).unwrap();
    let mut child = Command::new(exe)
        .args(["--scenario", &format!("@{}", path.display())])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: std::net::SocketAddr = line
        .trim_end()
        .trim_start_matches("listening on http://")
        .parse()
        .unwrap();
    let r = api(addr, "POST", "/search", Some(&json!({"query": "q"})));
    assert_eq!(r.json()["results"], json!([{"url": "from-file"}]));
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
}
