//! Citations that resolve, black-box: an answer's `[n]` markers checked against the
//! sources it came with (`structuredContent.citations` / `unresolved`, one line of text
//! for a marker that points nowhere), a page returned under two numbers listed once — over
//! stdio, over HTTP and through the CLI; the reference peer's drop-in unchanged.

use serde_json::{Value, json};

use crate::common::*;
use crate::http::{Http, http_env};

/// Markers [1], [2], [3] and [5] over three sources, two of them one page (the tracking
/// parameter, the case of the host, the default port and the fragment aside).
fn answer_citing_five_of_three() -> Value {
    json!({"duration_ms": 50, "cost": 0.01,
           "answer": "Water boils at 100 °C [1][2], lower up a mountain [5]; see also [3].",
           "sources": [{"title": "Boiling", "url": "https://a.example/boil?utm_source=feed"},
                       {"title": "Altitude", "url": "https://b.example/alt"},
                       {"title": "Boiling again", "url": "HTTPS://A.example:443/boil#top"}]})
}

const UNRESOLVED: &str = "Unresolved citation: [5] names no source Perplexity returned.";

/// What every front end says of that answer's citations.
fn assert_resolved(result: &Value) {
    let got = &result["structuredContent"];
    assert_eq!(got["status"], "completed", "{result}");
    assert!(
        got["response_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("resp_")),
        "{result}"
    );
    assert_eq!(
        got["citations"],
        json!([
            {"n": 1, "numbers": [1, 3], "url": "https://a.example/boil?utm_source=feed", "title": "Boiling"},
            {"n": 2, "numbers": [2], "url": "https://b.example/alt", "title": "Altitude"},
        ]),
        "{result}"
    );
    assert_eq!(got["unresolved"], json!([5]), "{result}");
    let (text, is_error) = tool_text(&json!({"result": result}));
    assert!(!is_error, "{text}");
    let answer = unwrap_spotlight(&text);
    assert!(
        answer.contains(
            "\n\nSources:\n[1][3] Boiling \u{2014} https://a.example/boil?utm_source=feed\n[2] Altitude \u{2014} https://b.example/alt"
        ),
        "one line per page: {text}"
    );
    assert!(
        text.contains(&format!("\n\n{UNRESOLVED}\n\nCost: 0.01 USD")),
        "one line, after the answer, before its cost: {text}"
    );
}

#[test]
fn every_marker_resolves_or_is_said_over_stdio_and_http() {
    let fake = FakePerplexity::start_with(answer_citing_five_of_three());
    let env = env_for(&fake);
    let mut s = Server::start(&env);
    for (id, tool) in [(1, "perplexity_agent"), (2, "perplexity_ask")] {
        let reply = s.request(&call(id, tool, json!({"query": "q"})));
        assert_resolved(&reply["result"]);
    }

    let mut env = env_for(&fake);
    env.extend(http_env(&[]));
    let server = Http::start(&env);
    let reply = server
        .modern(&modern_call(3, "perplexity_agent", json!({"query": "q"})))
        .json();
    assert_resolved(&reply["result"]);
}

#[test]
fn a_run_with_every_marker_resolved_says_nothing_more() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50,
        "answer": "Boils at 100 °C [1]; code `a[7]` is no citation.",
        "sources": [{"title": "Boiling", "url": "https://a.example/boil"}]}));
    let mut s = Server::start(&env_for(&fake));
    let reply = s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    assert_eq!(structured(&reply)["unresolved"], json!([]), "{reply}");
    assert_eq!(structured(&reply)["citations"][0]["n"], 1, "{reply}");
    assert!(!tool_text(&reply).0.contains("Unresolved"), "{reply}");
}

#[test]
fn the_cli_says_it_on_stderr_and_in_json() {
    let fake = FakePerplexity::start_with(answer_citing_five_of_three());
    let env = env_for(&fake);
    let (out, err, code) = run_cli(&["ask", "q"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\n[1][3] Boiling \u{2014} "), "{out}");
    assert!(err.contains(UNRESOLVED), "{err}");
    let (out, err, code) = run_cli(&["ask", "q", "--json"], &env);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["unresolved"], json!([5]), "{doc}");
    assert_eq!(doc["citations"][0]["numbers"], json!([1, 3]), "{doc}");
}

#[test]
fn the_reference_peers_drop_in_lists_sources_as_returned_and_adds_nothing() {
    let fake = FakePerplexity::start_with(answer_citing_five_of_three());
    let mut env = env_for(&fake);
    env.retain(|(k, _)| k != "PERPLEXITY_TOOLS");
    env.push(("PERPLEXITY_TOOLS".into(), "lifecycle".into()));
    let mut s = Server::start(&env);
    let reply = s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    assert!(structured(&reply).is_null(), "{reply}");
    let text = unwrap_spotlight(&tool_text(&reply).0);
    assert!(
        text.ends_with(
            "\n\nSources:\n[1] Boiling \u{2014} https://a.example/boil?utm_source=feed\n[2] Altitude \u{2014} https://b.example/alt\n[3] Boiling again \u{2014} HTTPS://A.example:443/boil#top"
        ),
        "{text}"
    );
    assert!(!tool_text(&reply).0.contains("Unresolved"), "{reply}");
}
