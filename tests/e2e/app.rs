//! The MCP App (`io.modelcontextprotocol/ui`), black-box: offered only to a client that
//! declares the extension — a 2025-11-25 `initialize` on stdio or in an HTTP session, a
//! 2026-07-28 request's `_meta` — with the tools marked, the App listed and read, and
//! research results carrying the App's view as `structuredContent`; everyone else gets
//! the result's own receipt in its place; `PERPLEXITY_UI=off` and the lifecycle profile offer it to
//! no one. What belongs here: the negotiation and the wire; the App itself is tested in a
//! real browser (`tests/browser/`).

use serde_json::{Value, json};

use crate::common::*;
use crate::http::Http;

const EXTENSION: &str = "io.modelcontextprotocol/ui";
const URI: &str = "ui://perplexity-agent/research.html";
const MIME: &str = "text/html;profile=mcp-app";

fn declaring() -> Value {
    json!({"extensions": {EXTENSION: {"mimeTypes": [MIME]}}})
}

fn initialize(id: i64, capabilities: Value) -> Value {
    request(
        id,
        "initialize",
        json!({"protocolVersion": V_LEGACY, "capabilities": capabilities, "clientInfo": {"name": "e2e", "version": "1"}}),
    )
}

/// A 2026-07-28 request whose `_meta` declares the extension.
fn modern_declaring(id: i64, method: &str, mut params: Value) -> Value {
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = declaring();
    params["_meta"] = meta;
    request(id, method, params)
}

/// Tools carrying `_meta.ui`, by name.
fn marked(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["_meta"]["ui"].is_object())
        .map(|t| {
            assert_eq!(t["_meta"]["ui"]["resourceUri"], URI, "{t}");
            t["name"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn answer_with_sources() -> Value {
    json!({"duration_ms": 50, "answer": "Water boils at 100 °C [2], lower up a mountain [3].",
           "sources": [{"title": "Boiling", "url": "https://a.example/boil"},
                       {"title": "Altitude", "url": "https://b.example/alt"},
                       {"title": "Pressure", "url": "https://c.example/p"}]})
}

/// A research result for a client without the App: its receipt (the run, its status,
/// what its markers cite), never the App's view with the answer.
fn assert_receipt(answer: &Value) {
    let got = &answer["result"]["structuredContent"];
    assert_eq!(got["status"], "completed", "{answer}");
    assert!(got["view"].is_null() && got["answer"].is_null(), "{answer}");
    assert_eq!(got["unresolved"], json!([]), "{answer}");
}

/// The App's read: the HTML, its type, a CSP that allows no domain.
fn assert_app(read: &Value) {
    let content = &read["result"]["contents"][0];
    assert_eq!(content["uri"], URI, "{read}");
    assert_eq!(content["mimeType"], MIME);
    let html = content["text"].as_str().unwrap();
    assert!(html.starts_with("<!doctype html>") || html.starts_with("<!DOCTYPE html>"));
    let csp = &content["_meta"]["ui"]["csp"];
    assert_eq!(csp["connectDomains"], json!([]), "{content}");
    assert_eq!(csp["resourceDomains"], json!([]), "{content}");
}

#[test]
fn a_stdio_client_that_declares_the_app_gets_it_and_one_that_does_not_gets_none_of_it() {
    let fake = FakePerplexity::start_with(answer_with_sources());
    let env = env_for(&fake);
    let tools = [
        "deep_research",
        "finance_search",
        "perplexity_agent",
        "perplexity_agent_result",
        "perplexity_ask",
        "perplexity_search",
    ];

    // Declared at initialize: the tools are marked, the App is listed and read.
    let mut s = Server::start(&env);
    let init = s.request(&initialize(1, declaring()));
    assert_frame(Era::Legacy, "initialize", &init);
    assert_eq!(
        init["result"]["capabilities"]["extensions"][EXTENSION],
        json!({}),
        "{init}"
    );
    let list = s.request(&request(2, "tools/list", json!({})));
    assert_frame(Era::Legacy, "tools/list", &list);
    let mut names = marked(&list);
    names.sort();
    assert_eq!(names, tools);
    let resources = s.request(&request(3, "resources/list", json!({})));
    assert_frame(Era::Legacy, "resources/list", &resources);
    assert_eq!(resources["result"]["resources"][0]["uri"], URI);
    assert_eq!(resources["result"]["resources"][0]["mimeType"], MIME);
    let read = s.request(&request(4, "resources/read", json!({"uri": URI})));
    assert_frame(Era::Legacy, "resources/read", &read);
    assert_app(&read);
    // A research answer carries the App's view: the answer, and sources by their ids.
    let answer = s.request(&call(5, "perplexity_agent", json!({"query": "q"})));
    assert_frame(Era::Legacy, "tools/call", &answer);
    let view = structured(&answer);
    assert_eq!(view["view"], "research", "{answer}");
    assert_eq!(view["status"], "completed");
    assert!(view["answer"].as_str().unwrap().contains("[2]"), "{view}");
    let run = view["response_id"].as_str().unwrap().to_owned();
    assert!(run.starts_with("resp_"), "{view}");
    let ids: Vec<i64> = view["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(view["sources"][1]["url"], "https://b.example/alt");
    let with_view = tool_text(&answer).0;
    s.close_stdin();
    s.wait_exit(std::time::Duration::from_secs(10));

    // Not declared: no `_meta.ui`, no App; the result's own receipt, not the view.
    let mut plain = Server::start(&env);
    let init = plain.request(&initialize(1, json!({})));
    assert!(
        init["result"]["capabilities"]["extensions"].is_null(),
        "{init}"
    );
    let list = plain.request(&request(2, "tools/list", json!({})));
    assert!(!list.to_string().contains("\"ui\""), "{list}");
    let resources = plain.request(&request(3, "resources/list", json!({})));
    assert_eq!(resources["result"]["resources"], json!([]));
    let read = plain.request(&request(4, "resources/read", json!({"uri": URI})));
    assert_eq!(read["error"]["code"], -32602, "{read}");
    let answer = plain.request(&call(5, "perplexity_agent", json!({"query": "q"})));
    assert_receipt(&answer);
    // The text is the same text (the spotlight's nonce aside).
    assert_eq!(
        unwrap_spotlight(&tool_text(&answer).0),
        unwrap_spotlight(&with_view).replace(&run, fake.runs()[1].id.as_str())
    );
    plain.close_stdin();
    plain.wait_exit(std::time::Duration::from_secs(10));
}

#[test]
fn over_http_each_modern_request_and_each_legacy_session_decides_for_itself() {
    let fake = FakePerplexity::start_with(answer_with_sources());
    let mut env = env_for(&fake);
    env.extend(crate::http::http_env(&[]));
    let server = Http::start(&env);
    // 2026-07-28: the request that declares gets the marks; the next, not declaring, not.
    let declared = server
        .modern(&modern_declaring(1, "tools/list", json!({})))
        .json();
    assert_frame(Era::Modern, "tools/list", &declared);
    assert_eq!(marked(&declared).len(), 6);
    let bare = server.modern(&request(2, "tools/list", json!({"_meta": modern_meta()})));
    assert!(!bare.text().contains("\"ui\""), "{}", bare.text());
    let read = server
        .modern(&modern_declaring(3, "resources/read", json!({"uri": URI})))
        .json();
    assert_frame(Era::Modern, "resources/read", &read);
    assert_app(&read);
    let answer = server
        .modern(&modern_declaring(
            4,
            "tools/call",
            json!({"name": "perplexity_ask", "arguments": {"query": "q"}}),
        ))
        .json();
    assert_eq!(structured(&answer)["view"], "research", "{answer}");
    let plain = server
        .modern(&modern_call(5, "perplexity_ask", json!({"query": "q"})))
        .json();
    assert_receipt(&plain);

    // 2025-11-25: a session whose initialize declared it, beside one whose did not.
    let with = session(&server, declaring());
    let without = session(&server, json!({}));
    let list = |session: &str| {
        server
            .post(
                &request(6, "tools/list", json!({})),
                &[
                    ("Mcp-Session-Id", session),
                    ("MCP-Protocol-Version", V_LEGACY),
                ],
            )
            .json()
    };
    assert_eq!(marked(&list(&with)).len(), 6);
    assert!(marked(&list(&without)).is_empty());
    // And the cached lists stay apart: the first again.
    assert_eq!(marked(&list(&with)).len(), 6);
}

fn session(server: &Http, capabilities: Value) -> String {
    let r = server.post(&initialize(0, capabilities), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.header("mcp-session-id").unwrap().to_owned()
}

#[test]
fn switched_off_or_in_the_lifecycle_profile_the_app_is_offered_to_no_one() {
    let fake = FakePerplexity::start();
    for (variable, value) in [("PERPLEXITY_UI", "off"), ("PERPLEXITY_TOOLS", "lifecycle")] {
        let mut env = env_for(&fake);
        env.push((variable.to_owned(), value.to_owned()));
        let mut s = Server::start(&env);
        let init = s.request(&initialize(1, declaring()));
        assert!(
            init["result"]["capabilities"]["extensions"].is_null(),
            "{variable}: {init}"
        );
        let list = s.request(&request(2, "tools/list", json!({})));
        assert!(marked(&list).is_empty(), "{variable}");
        let resources = s.request(&request(3, "resources/list", json!({})));
        assert_eq!(resources["result"]["resources"], json!([]), "{variable}");
        s.close_stdin();
        s.wait_exit(std::time::Duration::from_secs(10));
    }
}
