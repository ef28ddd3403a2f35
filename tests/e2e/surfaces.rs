//! Resources, prompts and completions over stdio, in both eras: the run resource reads
//! a real run through the guard, unknown runs are -32602 with `data.uri`, and every frame
//! validates against its era's schema (the harness checks that for each reply).

use serde_json::{Value, json};

use crate::common::*;

fn with_meta(era: Era, params: Value) -> Value {
    let mut params = params;
    if era == Era::Modern {
        params["_meta"] = modern_meta();
    }
    params
}

#[test]
fn the_run_resource_reads_a_run_in_both_eras() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50}));
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call(
        1,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    ));
    let id = tool_text(&r).0.split(' ').nth(2).unwrap().to_owned();
    std::thread::sleep(std::time::Duration::from_millis(200));
    for era in [Era::Legacy, Era::Modern] {
        let list = s.request(&request(
            2,
            "resources/templates/list",
            with_meta(era, json!({})),
        ));
        assert_eq!(
            list["result"]["resourceTemplates"][0]["uriTemplate"],
            "perplexity://runs/{response_id}"
        );
        let listed = s.request(&request(3, "resources/list", with_meta(era, json!({}))));
        assert_eq!(
            listed["result"]["resources"],
            json!([]),
            "runs are never listed"
        );

        let uri = format!("perplexity://runs/{id}");
        let read = s.request(&request(
            4,
            "resources/read",
            with_meta(era, json!({"uri": uri})),
        ));
        let contents = &read["result"]["contents"][0];
        assert_eq!(contents["uri"], uri);
        assert_eq!(contents["mimeType"], "text/markdown");
        let text = contents["text"].as_str().unwrap();
        assert!(text.contains("<untrusted-web-content-"), "{text}");
        if era == Era::Modern {
            assert_eq!(read["result"]["ttlMs"], 0, "a run's state is never cached");
        }

        let unknown = "perplexity://runs/resp_doesnotexist";
        let r = s.request(&request(
            5,
            "resources/read",
            with_meta(era, json!({"uri": unknown})),
        ));
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(r["error"]["data"]["uri"], unknown);
    }
    // Malformed ids never reach the upstream.
    let before = fake.requests().len();
    let r = s.request(&request(
        6,
        "resources/read",
        json!({"uri": "perplexity://runs/../admin"}),
    ));
    assert_eq!(r["error"]["data"]["uri"], "perplexity://runs/../admin");
    assert_eq!(fake.requests().len(), before);
}

#[test]
fn prompts_and_completions_in_both_eras() {
    let mut s = Server::start(&[]);
    for era in [Era::Legacy, Era::Modern] {
        let list = s.request(&request(1, "prompts/list", with_meta(era, json!({}))));
        let names: Vec<&str> = list["result"]["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"research_brief"), "{names:?}");

        let get = s.request(&request(
            2,
            "prompts/get",
            with_meta(era, json!({"name": "research_brief", "arguments": {"topic": "solid-state batteries", "recency": "month"}})),
        ));
        let text = get["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap();
        assert!(text.contains("perplexity_agent") && text.contains("solid-state batteries"));

        let bad = s.request(&request(
            3,
            "prompts/get",
            with_meta(
                era,
                json!({"name": "research_brief", "arguments": {"topic": "x", "recency": "decade"}}),
            ),
        ));
        assert_eq!(bad["error"]["code"], -32602);

        let done = s.request(&request(
            4,
            "completion/complete",
            with_meta(era, json!({"ref": {"type": "ref/prompt", "name": "research_brief"}, "argument": {"name": "recency", "value": "h"}})),
        ));
        assert_eq!(done["result"]["completion"]["values"], json!(["hour"]));
    }
    let init = s.request(&request(
        9,
        "initialize",
        json!({"protocolVersion": V_LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    ));
    assert_eq!(
        init["result"]["capabilities"],
        json!({"tools": {}, "resources": {}, "prompts": {}, "completions": {}, "logging": {},
               "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}})
    );
}
