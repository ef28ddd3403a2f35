//! `deep_research` against the fake: concurrent searches, deduplicated sources, a JSON
//! report from the Agent API, and the citation validator's verdict.

use serde_json::{Value, json};

use crate::common::*;

fn report(claims: Value) -> String {
    json!({"answer": "The answer.", "key_findings": ["One finding."], "open_questions": ["Still open?"], "claims": claims}).to_string()
}

#[test]
fn a_validated_report_from_deduplicated_sources() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 100,
        "search_results": [
            {"title": "Alpha", "url": "https://alpha.example/a", "snippet": "First."},
            {"title": "Alpha again", "url": "https://alpha.example/a/?utm_source=x", "snippet": "Same page."},
            {"title": "Beta", "url": "https://beta.example/b", "snippet": "Second."}
        ],
        "answer": report(json!([
            {"text": "Supported.", "urls": ["https://alpha.example/a"], "confidence": "high"},
            {"text": "Invented.", "urls": ["https://nowhere.example/x"], "confidence": "high"},
            {"text": "Bare.", "urls": [], "confidence": "medium"}
        ]))
    }));
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call_with_progress(
        1,
        "deep_research",
        json!({"question": "solar", "num_subquestions": 3}),
        json!("p"),
    ));
    let result = &r["result"];
    assert_eq!(result["isError"], false, "{r}");
    let out = &result["structuredContent"];
    assert_eq!(out["subquestions"].as_array().unwrap().len(), 3);
    assert_eq!(
        out["sources"].as_array().unwrap().len(),
        2,
        "deduplicated by canonical URL"
    );
    let v = &out["validation_report"];
    assert_eq!(
        (v["total_claims"].as_i64(), v["passed"].as_bool()),
        (Some(3), Some(false))
    );
    assert_eq!(out["claims"][0]["confidence"], "high");
    assert_eq!(out["claims"][1]["confidence"], "low");
    assert_eq!(out["claims"][2]["confidence"], "uncertain");
    // The reason for a weak claim is beside it for an MCP client too.
    assert!(out["claims"][0]["why"].is_null(), "{out}");
    assert!(
        out["claims"][1]["why"]
            .as_str()
            .is_some_and(|w| !w.is_empty()),
        "{out}"
    );
    assert!(
        out["claims"][2]["why"]
            .as_str()
            .is_some_and(|w| !w.is_empty()),
        "{out}"
    );
    assert!(out["response_id"].as_str().unwrap().starts_with("resp_"));
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Validation: 2 problem(s)") && text.contains("<untrusted-web-content-"),
        "{text}"
    );

    let requests = fake.requests();
    assert_eq!(requests.iter().filter(|r| r.path == "/search").count(), 3);
    let create = requests.iter().find(|r| r.path == "/v1/agent").unwrap();
    let body = create.body_json.as_ref().unwrap();
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert!(
        body["input"]
            .as_str()
            .unwrap()
            .contains("[2] Beta \u{2014} https://beta.example/b")
    );
}

#[test]
fn the_searches_cost_rate_limit_tokens_and_bad_arguments_nothing() {
    let fake = FakePerplexity::start();
    let mut env = env_for(&fake);
    env.retain(|(k, _)| !k.starts_with("PERPLEXITY_RATE"));
    env.push(("PERPLEXITY_RATE_BURST".into(), "4".into()));
    env.push(("PERPLEXITY_RATE_PER_MINUTE".into(), "1".into()));
    let mut s = Server::start(&env);
    let (text, is_error) = tool_text(&s.request(&call(
        1,
        "deep_research",
        json!({"question": "q", "num_subquestions": 9}),
    )));
    assert!(is_error && text.contains("from 1 to 8"), "{text}");
    // Two sub-questions cost three tokens (two searches, one report): the bucket of four
    // pays for one such call, not two.
    s.request(&call(
        2,
        "deep_research",
        json!({"question": "q", "num_subquestions": 2}),
    ));
    let before = fake.requests().len();
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|r| r.path == "/search")
            .count(),
        2
    );
    let (text, is_error) = tool_text(&s.request(&call(
        3,
        "deep_research",
        json!({"question": "q", "num_subquestions": 2}),
    )));
    assert!(
        is_error && text.starts_with("Rate limit exceeded"),
        "{text}"
    );
    assert_eq!(
        fake.requests().len(),
        before,
        "a refused call sends nothing"
    );
}

#[test]
fn the_research_command_prints_the_report_and_its_warnings() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 100,
        "search_results": [{"title": "Alpha", "url": "https://alpha.example/a", "snippet": "First."}],
        "answer": report(json!([
            {"text": "Supported.", "urls": ["https://alpha.example/a"], "confidence": "high"},
            {"text": "Bare.", "urls": [], "confidence": "medium"}
        ]))
    }));
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env_for(&fake))
            .output()
            .unwrap()
    };
    let out = run(&["research", "solar", "power", "--subquestions", "2"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Pinned whole: the report's sections, in the model's words, without its wrapping,
    // and why a claim is weak beside it.
    assert_eq!(
        stdout,
        "The answer.\n\nKey findings:\n- One finding.\n\nOpen questions:\n- Still open?\n\nClaims:\n1. Supported. [high] https://alpha.example/a\n2. Bare. [uncertain]\n   Why uncertain: no supporting URL\n\nSources:\n[1] Alpha \u{2014} https://alpha.example/a\n"
    );
    assert!(
        !stdout.contains("untrusted-web-content"),
        "plain text for people"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: claim 2: no supporting URL"));

    let out = run(&["research", "solar", "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["validation_report"]["total_claims"], 2);

    let out = run(&["research", "solar", "--subquestions", "9"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_model_may_choose_the_sub_questions_and_the_angles_are_the_fallback() {
    // One scripted answer serves both runs: the decomposition reads `subquestions`, the
    // report its own keys.
    let answer = json!({
        "subquestions": ["solar cost per watt 2026", "  ", "solar cost per watt 2026", "grid storage needs"],
        "answer": "A.", "key_findings": [], "open_questions": [],
        "claims": [{"text": "C.", "urls": ["https://example.org/one"], "confidence": "high"}]
    });
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "answer": answer.to_string()}));
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call(
        1,
        "deep_research",
        json!({"question": "solar", "num_subquestions": 3, "use_model_decomposition": true}),
    ));
    let out = structured(&r);
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(out["decomposition"], "model");
    assert_eq!(
        out["subquestions"],
        json!(["solar cost per watt 2026", "grid storage needs"]),
        "blank and duplicate proposals dropped"
    );
    let requests = fake.requests();
    let searched: Vec<String> = requests
        .iter()
        .filter(|r| r.path == "/search")
        .map(|r| {
            r.body_json.as_ref().unwrap()["query"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(searched.len(), 2);
    let first = requests.iter().find(|r| r.path == "/v1/agent").unwrap();
    let body = first.body_json.as_ref().unwrap();
    assert_eq!(
        body["response_format"]["json_schema"]["name"],
        "subquestions"
    );
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["properties"]["subquestions"]["maxItems"],
        3
    );

    // A decomposition that fails: the fixed angles, and the report still arrives.
    fake.clear_requests();
    fake.push_fault(json!({"route": "create", "status": 400, "json": {"error": {"message": "bad", "code": 400}}}));
    let r = s.request(&call(
        2,
        "deep_research",
        json!({"question": "solar", "num_subquestions": 2, "use_model_decomposition": true}),
    ));
    let out = structured(&r);
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(out["decomposition"], "angles_after_model_failed");
    assert_eq!(
        out["subquestions"],
        json!(["solar", "solar latest developments"])
    );
    assert!(
        tool_text(&r)
            .0
            .contains("fixed angles were searched instead")
    );
}

/// Out of the box, without a scripted answer: the fake writes a document of the schema
/// each run asks for (crates/fake-perplexity/README.md), so `research` succeeds on a
/// fresh checkout, citing only URLs its searches returned.
#[test]
fn research_against_the_default_fake_prints_a_validated_report() {
    let fake = FakePerplexity::start();
    let (stdout, stderr, code) = run_cli(&["research", "q"], &env_for(&fake));
    assert_eq!(code, 0, "{stderr}");
    for section in ["Key findings:\n- ", "Claims:\n1. ", "Sources:\n[1] "] {
        assert!(stdout.contains(section), "{section:?} in {stdout}");
    }
    // The claims cite the sources the searches returned, copied from the fake's input.
    assert!(
        stdout.contains("\n1. Fake claim 1. [high] https://example.org/ https://example.org/one\n"),
        "{stdout}"
    );
    assert!(
        !stderr.contains("warning:"),
        "every claim supported: {stderr}"
    );
}

/// The same over MCP with the model's decomposition: both runs answer their schema
/// (checked with a JSON Schema validator against what the fake really sent back), so the
/// sub-questions are the model's and the report passes validation.
#[test]
fn the_default_fake_answers_each_deep_research_schema() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50}));
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call(
        1,
        "deep_research",
        json!({"question": "solar", "num_subquestions": 3, "use_model_decomposition": true}),
    ));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let out = structured(&r);
    assert_eq!(out["decomposition"], "model", "{out}");
    assert_eq!(out["validation_report"]["passed"], true, "{out}");
    assert!(out["validation_report"]["total_claims"].as_u64() > Some(0));

    let creates = agent_creates(&fake);
    let runs = fake.runs();
    assert_eq!((creates.len(), runs.len()), (2, 2));
    for (create, run) in creates.iter().zip(&runs) {
        let schema = &create["response_format"]["json_schema"]["schema"];
        let validator = jsonschema::validator_for(schema).unwrap();
        let answer: Value = serde_json::from_str(&answer_text(&fake, &run.id)).unwrap();
        assert!(validator.is_valid(&answer), "{answer} against {schema}");
    }
}

/// The text of run `id`'s message, read with a plain HTTP GET of the fake.
fn answer_text(fake: &FakePerplexity, id: &str) -> String {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(fake.addr()).unwrap();
    write!(
        tcp,
        "GET /v1/agent/{id} HTTP/1.1\r\nHost: fake\r\nAuthorization: Bearer {KEY}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).unwrap();
    let (_, body) = raw.split_once("\r\n\r\n").unwrap();
    let run: Value = serde_json::from_str(body).unwrap();
    let message = run["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "message")
        .unwrap_or_else(|| panic!("no message in {run}"));
    message["content"][0]["text"].as_str().unwrap().to_owned()
}

/// Why a claim was downgraded is in the report beside the claim (stdout, and each claim
/// of `--json`), not only in the warnings on stderr.
#[test]
fn the_research_command_says_why_a_claim_is_weak_beside_it() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 100,
        "search_results": [{"title": "Alpha", "url": "https://alpha.example/a", "snippet": "First."}],
        "answer": report(json!([
            {"text": "Supported.", "urls": ["https://alpha.example/a"], "confidence": "high"},
            {"text": "Invented.", "urls": ["https://nowhere.example/x"], "confidence": "high"},
            {"text": "Bare.", "urls": [], "confidence": "medium"}
        ]))
    }));
    let (stdout, stderr, code) = run_cli(
        &["research", "solar", "--subquestions", "1"],
        &env_for(&fake),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            "\nClaims:\n\
             1. Supported. [high] https://alpha.example/a\n\
             2. Invented. [low] https://nowhere.example/x\n   \
             Why low: cites URL(s) never retrieved: https://nowhere.example/x\n\
             3. Bare. [uncertain]\n   \
             Why uncertain: no supporting URL\n\
             \nSources:\n"
        ),
        "{stdout}"
    );
    let (stdout, _, code) = run_cli(&["research", "solar", "--json"], &env_for(&fake));
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let why: Vec<&Value> = doc["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["why"])
        .collect();
    assert_eq!(
        why,
        [
            &Value::Null,
            &json!("cites URL(s) never retrieved: https://nowhere.example/x"),
            &json!("no supporting URL")
        ],
        "{doc}"
    );
}
