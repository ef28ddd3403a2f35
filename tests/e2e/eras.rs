//! Both protocol eras on one stdio process, decided per request; every frame checked
//! against the official schema of its era.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

fn init(version: Value) -> Value {
    request(
        1,
        "initialize",
        json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    )
}

#[test]
fn legacy_initialize_negotiates_and_is_never_shaped() {
    let mut s = Server::start(&[]);
    for (asked, answered) in [
        (json!("2025-11-25"), "2025-11-25"),
        (json!("2025-06-18"), "2025-06-18"),
        (json!("2025-03-26"), "2025-03-26"),
        (json!("2024-11-05"), "2025-11-25"),
        (json!("2026-07-28"), "2025-11-25"),
        (json!("1999-01-01"), "2025-11-25"),
        (json!(20251125), "2025-11-25"),
        (json!(null), "2025-11-25"),
    ] {
        let r = s.request(&init(asked.clone()));
        assert_frame(Era::Legacy, "initialize", &r);
        let result = &r["result"];
        assert_eq!(result["protocolVersion"], answered, "asked {asked}");
        assert_eq!(result["serverInfo"]["name"], "perplexity-agent");
        assert_eq!(result["serverInfo"]["title"], "Perplexity Agent");
        assert_eq!(result["capabilities"]["tools"], json!({}));
        let instructions = result["instructions"].as_str().unwrap();
        assert!(instructions.contains("perplexity_agent_result"));
        assert!(instructions.contains("perplexity_agent_cancel"));
        for key in ["resultType", "_meta", "ttlMs", "cacheScope"] {
            assert!(result.get(key).is_none(), "{key} in a legacy result");
        }
    }
    // initialize carrying modern `_meta` is still legacy on stdio.
    let r = s.request(&request(
        2,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "_meta": modern_meta()}),
    ));
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    assert!(r["result"].get("resultType").is_none());
    // The request without params at all.
    let r = s.request(&json!({"jsonrpc":"2.0","id":3,"method":"initialize"}));
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn server_discover_is_always_answered_and_shaped() {
    let mut s = Server::start(&[]);
    for id in [json!("server-discover-probe-1"), json!(0), json!(1)] {
        for params in [None, Some(json!({})), Some(json!({"_meta": modern_meta()}))] {
            let mut req = json!({"jsonrpc":"2.0","id":id,"method":"server/discover"});
            if let Some(p) = params {
                req["params"] = p;
            }
            let r = s.request(&req);
            assert_frame(Era::Modern, "server/discover", &r);
            let result = &r["result"];
            assert_eq!(
                result["supportedVersions"],
                json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
            );
            assert_eq!(
                result["capabilities"],
                json!({"tools": {}, "resources": {}, "prompts": {}, "completions": {},
                       "extensions": {"io.modelcontextprotocol/tasks": {}}})
            );
            assert_eq!(result["resultType"], "complete");
            assert_eq!(result["ttlMs"], 300000);
            assert_eq!(result["cacheScope"], "private");
            assert_eq!(result["_meta"][SERVER_INFO]["name"], "perplexity-agent");
            assert!(
                result["instructions"]
                    .as_str()
                    .unwrap()
                    .contains("perplexity_agent_cancel")
            );
        }
    }
    // With a version key, discover is validated like any modern request.
    let r = s.request(&request(
        9,
        "server/discover",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}),
    ));
    assert_eq!(r["error"]["code"], -32022);
}

#[test]
fn modern_results_are_shaped_and_never_echo_request_meta() {
    let mut s = Server::start(&[]);
    let mut meta = modern_meta();
    meta["progressToken"] = json!("tok-echo-7f3a");
    meta["vendor.example/extra"] = json!({"kept": true});
    let r = s.request(&request(1, "tools/list", json!({"_meta": meta})));
    assert_frame(Era::Modern, "tools/list", &r);
    let result = &r["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["ttlMs"], 300000);
    assert_eq!(result["cacheScope"], "private");
    assert_eq!(
        result["_meta"],
        json!({SERVER_INFO: {"name":"perplexity-agent","title":"Perplexity Agent","version": env!("CARGO_PKG_VERSION")}})
    );
    assert!(
        !r.to_string().contains("tok-echo-7f3a"),
        "request _meta echoed: {r}"
    );
    assert!(
        !r.to_string().contains("vendor.example"),
        "request _meta echoed: {r}"
    );

    // ping is answered in the modern era on stdio, shaped, without caching hints.
    let r = s.request(&request(2, "ping", json!({"_meta": modern_meta()})));
    assert_frame(Era::Modern, "ping", &r);
    assert_eq!(r["result"]["resultType"], "complete");
    assert!(r["result"].get("ttlMs").is_none());

    // A modern tool call that fails validation is still a shaped result.
    let r = s.request(&modern_call(3, "perplexity_agent", json!({"bogus": 1})));
    assert_frame(Era::Modern, "tools/call", &r);
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(r["result"]["isError"], true);
    assert!(r["result"].get("ttlMs").is_none() && r["result"].get("cacheScope").is_none());

    // Legacy strings are accepted inside modern `_meta`; the result is still modern.
    let mut old = modern_meta();
    old["io.modelcontextprotocol/protocolVersion"] = json!("2025-06-18");
    let r = s.request(&request(4, "tools/list", json!({"_meta": old})));
    assert_eq!(r["result"]["resultType"], "complete");
}

#[test]
fn modern_meta_errors_come_from_the_dispatcher_unshaped() {
    let mut s = Server::start(&[]);
    let version = |v: Value| json!({"_meta": {"io.modelcontextprotocol/protocolVersion": v, "io.modelcontextprotocol/clientCapabilities": {}}});
    let r = s.request(&request(1, "tools/list", version(json!("1900-01-01"))));
    assert_frame(Era::Modern, "tools/list", &r);
    assert_eq!(
        r["error"],
        json!({"code":-32022,"message":"Unsupported protocol version.","data":{"supported":["2026-07-28","2025-11-25","2025-06-18","2025-03-26"],"requested":"1900-01-01"}})
    );
    let r = s.request(&request(2, "tools/list", version(json!(20260728))));
    assert_eq!(r["error"]["data"]["requested"], "20260728");
    assert_frame(Era::Modern, "tools/list", &r);

    for caps in [None, Some(json!([])), Some(json!("x")), Some(json!(null))] {
        let mut meta = json!({"io.modelcontextprotocol/protocolVersion": V_MODERN});
        if let Some(c) = caps {
            meta["io.modelcontextprotocol/clientCapabilities"] = c;
        }
        let r = s.request(&request(3, "tools/list", json!({"_meta": meta})));
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(
            r["error"]["message"],
            "Malformed request: io.modelcontextprotocol/clientCapabilities is required on every 2026-07-28 request and must be an object."
        );
        assert_eq!(
            r["error"]["data"],
            json!({"missing": ["io.modelcontextprotocol/clientCapabilities"]})
        );
        assert!(r.get("result").is_none());
    }

    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/logLevel"] = json!("loud");
    let r = s.request(&request(4, "tools/list", json!({"_meta": meta})));
    assert_eq!(r["error"]["code"], -32602);

    // Validation happens before the handler: an unknown tool with bad `_meta` reports
    // the `_meta` problem, not "Unknown tool".
    let r = s.request(&request(
        5,
        "tools/call",
        json!({"name": "x", "_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01"}}),
    ));
    assert_eq!(r["error"]["code"], -32022);
    // Errors are never shaped.
    assert!(r.get("result").is_none() && r["error"].get("resultType").is_none());
}

#[test]
fn eras_do_not_leak_into_each_other() {
    let mut s = Server::start(&[]);
    let legacy1 = s.request(&request(1, "tools/list", json!({})));
    let modern = s.request(&request(2, "tools/list", json!({"_meta": modern_meta()})));
    let legacy2 = s.request(&request(3, "tools/list", json!({})));
    let only_caps = s.request(&request(
        4,
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
    ));
    for r in [&legacy1, &legacy2, &only_caps] {
        assert_frame(Era::Legacy, "tools/list", r);
        assert_eq!(
            r["result"].as_object().unwrap().keys().collect::<Vec<_>>(),
            ["tools"]
        );
    }
    assert_frame(Era::Modern, "tools/list", &modern);
    assert_eq!(legacy1["result"], legacy2["result"]);
    // The same tools; only 2025-11-25 marks the ones that can run as tasks.
    let mut unmarked = legacy1["result"]["tools"].clone();
    for tool in unmarked.as_array_mut().unwrap() {
        tool.as_object_mut().unwrap().remove("execution");
    }
    assert_eq!(modern["result"]["tools"], unmarked);
}

#[test]
fn logging_set_level_is_legacy_only() {
    let mut s = Server::start(&[]);
    let r = s.request(&request(1, "logging/setLevel", json!({"level": "debug"})));
    assert_eq!(r["result"], json!({}));
    assert_frame(Era::Legacy, "logging/setLevel", &r);
    let r = s.request(&request(2, "logging/setLevel", json!({"level": "chatty"})));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.request(&request(
        3,
        "logging/setLevel",
        json!({"level": "debug", "_meta": modern_meta()}),
    ));
    assert_eq!(
        r["error"],
        json!({"code":-32601,"message":"Method not found: logging/setLevel"})
    );
}

#[test]
fn tool_list_is_exact_and_follows_the_environment() {
    let mut all = Server::start(&[("PERPLEXITY_TOOLS".into(), "all".into())]);
    let r = all.request(&request(1, "tools/list", json!({})));
    let names = tool_names(&r);
    assert_eq!(
        names,
        [
            "perplexity_agent",
            "perplexity_agent_result",
            "perplexity_agent_cancel",
            "perplexity_ask",
            "perplexity_search",
            "deep_research",
            "responses_create",
            "responses_retrieve",
            "finance_search",
            "fetch_url",
            "retrieve",
            "server_metrics"
        ]
    );
    let mut s = Server::start(&[("PERPLEXITY_TOOLS".into(), "lifecycle".into())]);
    let r = s.request(&request(1, "tools/list", json!({})));
    let tools = r["result"]["tools"].as_array().unwrap();
    assert_eq!(
        tool_names(&r),
        [
            "perplexity_agent",
            "perplexity_agent_result",
            "perplexity_agent_cancel"
        ]
    );
    let agent = &tools[0];
    assert_eq!(agent["title"], "Perplexity Agent Research");
    assert_eq!(
        agent["annotations"],
        json!({"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":true})
    );
    assert_eq!(agent["inputSchema"]["additionalProperties"], false);
    assert_eq!(agent["inputSchema"]["required"], json!(["query"]));
    assert_eq!(
        agent["inputSchema"]["properties"]["domains"]["maxItems"],
        20
    );
    assert!(agent.get("outputSchema").is_none());
    assert_eq!(tools[1]["title"], "Collect Perplexity Research");
    assert_eq!(
        tools[1]["annotations"],
        json!({"readOnlyHint":true,"openWorldHint":true})
    );
    let ws = &tools[1]["inputSchema"]["properties"]["wait_seconds"];
    assert_eq!(ws["maximum"], 55);
    assert!(ws["description"].as_str().unwrap().contains("CLAMPED"));
    assert!(ws["description"].as_str().unwrap().contains("55s here"));
    assert_eq!(tools[2]["title"], "Cancel Perplexity Research");
    assert_eq!(
        tools[2]["annotations"],
        json!({"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true})
    );
    assert!(
        tools[1]["inputSchema"]["properties"]["response_id"]
            .get("pattern")
            .is_none()
    );

    for (raw, expected) in [
        ("120", 120),
        ("0", 55),
        ("soon", 55),
        ("99999", 1800),
        ("+30", 30),
    ] {
        let mut s = Server::start(&[("PERPLEXITY_AGENT_WAIT_SECONDS".into(), raw.into())]);
        let r = s.request(&request(1, "tools/list", json!({})));
        let ws = &r["result"]["tools"][1]["inputSchema"]["properties"]["wait_seconds"];
        assert_eq!(ws["maximum"], expected, "{raw}");
        assert!(
            ws["description"]
                .as_str()
                .unwrap()
                .contains(&format!("({expected}s here"))
        );
    }
}

#[test]
fn tool_profiles_are_validated_at_startup() {
    let mut s = Server::start(&[("PERPLEXITY_TOOLS".into(), "lifecycle,bogus".into())]);
    let status = s.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(4));
    assert!(s.stderr().contains("'bogus'"), "{}", s.stderr());
    assert!(s.drain().is_empty(), "nothing on stdout");

    let mut s = Server::start_with_args(&["serve", "--tools", "perplexity_agent_result"], &[]);
    let r = s.request(&request(1, "tools/list", json!({})));
    assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 1);
    let r = s.request(&call(2, "perplexity_agent", json!({"query": "x"})));
    assert_eq!(
        r["error"],
        json!({"code":-32602,"message":"Tool perplexity_agent is not offered by this server: it is enabled with PERPLEXITY_TOOLS=default,lifecycle (or all)."})
    );
    // The reference profile keeps the peer's words for a tool it does not offer.
    let mut s = Server::start(&[("PERPLEXITY_TOOLS".into(), "lifecycle".into())]);
    let r = s.request(&call(1, "fetch_url", json!({"url": "http://x"})));
    assert_eq!(
        r["error"],
        json!({"code":-32602,"message":"Unknown tool: 'fetch_url'"})
    );
}

/// The default profile (nothing set): the six tools a research session uses, within the
/// context budget of the lean start-up work, every other tool one setting away and saying which.
#[test]
fn the_default_profile_is_lean_and_names_the_setting_for_the_rest() {
    for era in [Era::Legacy, Era::Modern] {
        let mut s = Server::start(&[]);
        let r = match era {
            Era::Legacy => s.request(&request(1, "tools/list", json!({}))),
            Era::Modern => s.request(&request(1, "tools/list", json!({"_meta": modern_meta()}))),
        };
        let names = tool_names(&r);
        assert_eq!(
            names,
            [
                "perplexity_agent",
                "perplexity_agent_result",
                "perplexity_agent_cancel",
                "perplexity_search",
                "fetch_url",
                "retrieve"
            ]
        );
        let bytes = serde_json::to_string(&r["result"]).unwrap().len();
        assert!(
            bytes <= 8_000,
            "{era:?}: the default tools/list is {bytes} bytes"
        );
    }
    let mut s = Server::start(&[]);
    for (i, (tool, group)) in [
        ("deep_research", "research"),
        ("perplexity_ask", "ask"),
        ("server_metrics", "admin"),
    ]
    .into_iter()
    .enumerate()
    {
        let r = s.request(&call(i as u64 + 1, tool, json!({})));
        let message = r["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("PERPLEXITY_TOOLS=default,{group}")),
            "{message}"
        );
    }
}

#[test]
fn tools_call_protocol_errors() {
    let mut s = Server::start(&[]);
    let r = s.request(&call(1, "nope", json!({})));
    assert_eq!(
        r["error"],
        json!({"code":-32602,"message":"Unknown tool: 'nope'"})
    );
    let r = s.request(&request(2, "tools/call", json!({})));
    assert_eq!(
        r["error"],
        json!({"code":-32602,"message":"Unknown tool: None"})
    );
    let r = s.request(&request(3, "tools/call", json!({"name": null})));
    assert_eq!(r["error"]["message"], "Unknown tool: None");
    for args in [json!([1]), json!("x"), json!(5)] {
        let r = s.request(&request(
            4,
            "tools/call",
            json!({"name":"perplexity_agent","arguments":args}),
        ));
        assert_eq!(
            r["error"],
            json!({"code":-32602,"message":"'arguments' must be an object."})
        );
    }
    for args in [None, Some(json!(null))] {
        let mut params = json!({"name":"perplexity_agent"});
        if let Some(a) = args {
            params["arguments"] = a;
        }
        let r = s.request(&request(5, "tools/call", params));
        assert_frame(Era::Legacy, "tools/call", &r);
        assert_eq!(
            tool_text(&r),
            (
                "'query' is required and must be a non-empty string.".to_owned(),
                true
            )
        );
    }
    let r = s.request(&request(6, "tools/list", json!({"cursor": "abc"})));
    assert_eq!(r["error"]["code"], -32602);
    // tools/list and tools/call work with no initialize and no key.
    let r = s.request(&call(
        7,
        "perplexity_agent_result",
        json!({"response_id": "../etc/passwd"}),
    ));
    assert_eq!(
        tool_text(&r),
        (
            "Malformed response_id. Expected the identifier returned by perplexity_agent."
                .to_owned(),
            true
        )
    );
}

#[test]
fn the_schema_check_has_teeth() {
    let bad = [
        (
            Era::Modern,
            "tools/list",
            json!({"jsonrpc":"2.0","id":1,"result":{"tools":[]}}),
        ),
        (
            Era::Legacy,
            "initialize",
            json!({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}),
        ),
        (
            Era::Legacy,
            "tools/call",
            json!({"jsonrpc":"2.0","id":{"a":1},"result":{"content":[]}}),
        ),
        (
            Era::Modern,
            "server/discover",
            json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":[],"capabilities":{}}}),
        ),
        (
            Era::Legacy,
            "ping",
            json!({"jsonrpc":"2.0","id":{"a":1},"result":{}}),
        ),
        (
            Era::Legacy,
            "ping",
            json!({"jsonrpc":"2.0","id":1.5,"result":{}}),
        ),
    ];
    for (era, method, frame) in bad {
        let caught = std::panic::catch_unwind(|| assert_frame(era, method, &frame));
        assert!(
            caught.is_err(),
            "{frame} passed as a valid {method} ({era:?})"
        );
    }
}
