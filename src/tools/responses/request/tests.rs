use serde_json::{Value, json};

use super::*;

fn args(v: Value) -> Args {
    v.as_object().cloned().unwrap()
}

fn body(v: Value) -> Value {
    Value::Object(validate(&args(v)).unwrap().body.0)
}

fn err(v: Value) -> String {
    validate(&args(v)).unwrap_err()
}

#[test]
fn plain_question_gets_the_default_preset_in_background() {
    assert_eq!(
        body(json!({"input": "q"})),
        json!({"preset": "medium", "input": "q", "background": true})
    );
    let call = validate(&args(json!({"input": "q", "store": false}))).unwrap();
    assert!(!call.store && call.wait && !call.expects_json);
    assert_eq!(
        Value::Object(call.body.0),
        json!({"preset": "medium", "input": "q", "store": false, "background": false})
    );
    // A named model replaces the default preset; nulls are absent.
    assert_eq!(
        body(json!({"input": "q", "model": "openai/gpt-5", "preset": null, "tools": null})),
        json!({"model": "openai/gpt-5", "input": "q", "background": true})
    );
}

#[test]
fn the_full_surface_is_rebuilt_from_validated_values() {
    let full = json!({
        "models": ["openai/gpt-5.6-luna", "perplexity/sonar"],
        "instructions": "Answer in three bullet points.",
        "input": [
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "https://example.org/p.jpg"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K"}]},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "{\"ok\":true}"}],
        "tools": [
            {"type": "web_search", "search_context_size": "high",
             "filters": {"search_recency_filter": "month", "search_domain_filter": ["a.org"],
                         "search_after_date_filter": "2/29/2024"},
             "user_location": {"country": "US", "latitude": 40.7}},
            {"type": "fetch_url", "max_urls": 3},
            {"type": "finance_search"},
            {"type": "people_search"},
            {"type": "function", "name": "lookup_ticket", "description": "Look up a ticket",
             "parameters": {"type": "object"}}],
        "max_steps": 60,
        "max_output_tokens": 4000,
        "reasoning": {"effort": "minimal"},
        "response_format": {"type": "json_schema", "json_schema": {"name": "summary", "schema": {"type": "object"}}},
        "previous_response_id": "resp_abc",
        "language_preference": "de",
        "temperature": 0.3,
        "top_p": 0.95,
        "profile": {"type": "custom", "id": "research-v2", "version": "7"},
        "store": true,
        "wait": false
    });
    let call = validate(&args(full)).unwrap();
    assert!(call.expects_json && !call.wait && call.store);
    let b = Value::Object(call.body.0);
    assert_eq!(
        b["models"],
        json!(["openai/gpt-5.6-luna", "perplexity/sonar"])
    );
    assert!(b.get("preset").is_none(), "a model chain needs no preset");
    // Image parts carry no `detail`: the API has none and rejects unknown fields.
    assert_eq!(
        b["input"][0]["content"][1],
        json!({"type": "input_image", "image_url": "https://example.org/p.jpg"})
    );
    assert_eq!(b["tools"][3], json!({"type": "people_search"}));
    assert_eq!(b["tools"][4]["strict"], true, "strict defaults to true");
    assert_eq!(b["max_steps"], 60);
    assert_eq!(b["reasoning"], json!({"effort": "minimal"}));
    assert_eq!(
        b["tools"][0]["filters"]["search_after_date_filter"],
        "2/29/2024"
    );
    assert_eq!(b["background"], true);
    assert!(b.get("store").is_none() && b.get("wait").is_none());
    assert_eq!(b["previous_response_id"], "resp_abc");
    assert_eq!(
        (b["temperature"].clone(), b["top_p"].clone()),
        (json!(0.3), json!(0.95))
    );
    assert_eq!(
        b["profile"],
        json!({"type": "custom", "id": "research-v2", "version": "7"})
    );
    let connector = body(
        json!({"input": "q", "tools": [{"type": "connector", "id": "conn_1",
        "server_label": "drive", "allowed_tools": ["search_files"], "server_description": "Team drive"}]}),
    );
    assert_eq!(
        connector["tools"][0],
        json!({"type": "connector", "id": "conn_1", "server_label": "drive",
               "allowed_tools": ["search_files"], "server_description": "Team drive"})
    );
}

#[test]
fn every_bound_is_enforced() {
    let long = |n: usize| "x".repeat(n);
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), "'input' is required."),
        (json!({"input": "  "}), "'input' must be a non-empty string"),
        (
            json!({"input": long(16_385)}),
            "'input' must be a non-empty string",
        ),
        (
            json!({"input": vec![json!({"type":"message","role":"user","content":"q"}); 65]}),
            "list of 1 to 64",
        ),
        (json!({"input": []}), "list of 1 to 64"),
        (json!({"input": [5]}), "'input[0]' must be an object."),
        (
            json!({"input": [{"type": "message", "role": "boss", "content": "q"}]}),
            "'input[0].role' must be one of",
        ),
        (
            json!({"input": [{"type": "message", "role": "user", "content": long(16_385)}]}),
            "'input[0].content' must be a string of 1 to 16384",
        ),
        (
            json!({"input": [{"type": "message", "role": "user", "content": "q", "name": "x"}]}),
            "In 'input[0]': Unknown argument(s): name.",
        ),
        (
            json!({"input": [{"type": "exec", "cmd": "rm"}]}),
            "'input[0].type' must be one of",
        ),
        (
            json!({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "ftp://a/b.png"}]}]}),
            "must be an http(s) URL",
        ),
        (
            json!({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": format!("https://a.org/{}", long(2048))}]}]}),
            "must be an http(s) URL",
        ),
        (
            json!({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "data:text/html;base64,PGI+"}]}]}),
            "must be an http(s) URL",
        ),
        (
            json!({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,not base64!"}]}]}),
            "a data URL must be",
        ),
        (
            json!({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "https://a.org/x.png", "detail": "low"}]}]}),
            "In 'input[0].content[0]': Unknown argument(s): detail.",
        ),
        (
            json!({"input": [{"type": "function_call_output", "call_id": long(257), "output": "x"}]}),
            "'input[0].call_id' must be a string of 1 to 256",
        ),
        (
            json!({"input": [{"type": "function_call_output", "call_id": "c", "output": long(16_385)}]}),
            "'input[0].output' must be a string of 0 to 16384",
        ),
        (
            json!({"input": [{"type": "function_call", "call_id": "c", "name": "a b", "arguments": "{}"}]}),
            "'input[0].name' must be 1 to 128",
        ),
        (
            json!({"input": "q", "model": "a/x", "models": ["b/y"]}),
            "Give 'model' or 'models', not both.",
        ),
        (
            json!({"input": "q", "models": ["a", "b", "c", "d", "e", "f"]}),
            "'models' must be an array of 1 to 5",
        ),
        (
            json!({"input": "q", "models": []}),
            "'models' must be an array of 1 to 5",
        ),
        (
            json!({"input": "q", "model": long(129)}),
            "'model' must be a provider/model id",
        ),
        (
            json!({"input": "q", "models": ["a/ok", "bad model"]}),
            "'models[1]' must be a provider/model id",
        ),
        (
            json!({"input": "q", "model": "anthropic/claude-x"}),
            "Anthropic models need 'max_output_tokens'",
        ),
        (
            json!({"input": "q", "preset": long(65)}),
            "'preset' must be a string of 1 to 64",
        ),
        (
            json!({"input": "q", "instructions": long(16_385)}),
            "'instructions' must be a string of 1 to 16384",
        ),
        (
            json!({"input": "q", "reasoning": {"effort": "extreme"}}),
            "'reasoning.effort' must be one of: minimal, low, medium, high, xhigh.",
        ),
        (
            json!({"input": "q", "reasoning": {"effort": "low", "budget": 5}}),
            "In 'reasoning': Unknown argument(s): budget.",
        ),
        (
            json!({"input": "q", "response_format": {"type": "json_schema"}}),
            "'response_format.json_schema' is required",
        ),
        (
            json!({"input": "q", "response_format": {"type": "text", "json_schema": {}}}),
            "'response_format.type' must be one of: json_schema.",
        ),
        (
            json!({"input": "q", "response_format": {"type": "yaml"}}),
            "'response_format.type' must be one of",
        ),
        (
            json!({"input": "q", "response_format": {"type": "json_schema", "json_schema": {"name": long(65), "schema": {}}}}),
            "'response_format.json_schema.name' must be 1 to 64",
        ),
        (
            json!({"input": "q", "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"d": long(65_536)}}}}),
            "'response_format.json_schema.schema' must be at most 65536",
        ),
        (
            json!({"input": "q", "tools": vec![json!({"type": "finance_search"}); 17]}),
            "'tools' must be an array of 0 to 16",
        ),
        (
            json!({"input": "q", "tools": [{"type": "shell"}]}),
            "'tools[0].type' must be one of",
        ),
        (
            json!({"input": "q", "tools": [{"type": "fetch_url", "max_urls": 11}]}),
            "'tools[0].max_urls' must be an integer from 1 to 10.",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "filters": {"search_domain_filter": ["a.org", "-b.org"]}}]}),
            "an allowlist or a denylist",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "filters": {"search_domain_filter": vec!["a.org"; 21]}}]}),
            "'tools[0].filters.search_domain_filter' must be an array of 0 to 20",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "filters": {"search_language_filter": ["en"]}}]}),
            "Unknown argument(s): search_language_filter.",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "search_context_size": "low", "max_tokens": 500}]}),
            "cannot be combined with max_tokens",
        ),
        (
            // Perplexity's remote-MCP and sandbox tools are never offered (SECURITY.md).
            json!({"input": "q", "tools": [{"type": "mcp", "server_label": "x", "server_url": "https://mcp.example/"}]}),
            "'tools[0].type' must be one of: web_search, fetch_url, finance_search, people_search, function, connector.",
        ),
        (
            json!({"input": "q", "tools": [{"type": "sandbox"}]}),
            "'tools[0].type' must be one of",
        ),
        (
            json!({"input": "q", "temperature": 2.5}),
            "'temperature' must be a number from 0 to 2.",
        ),
        (
            json!({"input": "q", "temperature": -0.1}),
            "'temperature' must be a number from 0 to 2.",
        ),
        (
            json!({"input": "q", "temperature": "hot"}),
            "'temperature' must be a number",
        ),
        (
            json!({"input": "q", "top_p": 1.01}),
            "'top_p' must be a number from 0 to 1.",
        ),
        (
            json!({"input": "q", "profile": {"id": "p"}}),
            "'profile.type' is required.",
        ),
        (
            json!({"input": "q", "profile": {"type": "saved", "id": "p"}}),
            "'profile.type' must be one of: custom.",
        ),
        (
            json!({"input": "q", "profile": {"type": "custom", "id": "a b"}}),
            "'profile.id' must be 1 to 128 letters",
        ),
        (
            json!({"input": "q", "profile": {"type": "custom", "id": "p", "version": long(129)}}),
            "'profile.version' must be 1 to 128 letters",
        ),
        (
            json!({"input": "q", "profile": {"type": "custom", "id": "p", "owner": "x"}}),
            "In 'profile': Unknown argument(s): owner.",
        ),
        (
            json!({"input": "q", "tools": [{"type": "connector", "server_label": "drive"}]}),
            "'tools[0].id' is required.",
        ),
        (
            json!({"input": "q", "tools": [{"type": "connector", "id": "c", "server_label": "my drive"}]}),
            "'tools[0].server_label' must be 1 to 64 letters",
        ),
        (
            json!({"input": "q", "tools": [{"type": "connector", "id": "c", "server_label": "d", "allowed_tools": []}]}),
            "'tools[0].allowed_tools' must be an array of 1 to 64 entries.",
        ),
        (
            json!({"input": "q", "tools": [{"type": "connector", "id": "c", "server_label": "d", "allowed_tools": ["a/b"]}]}),
            "'tools[0].allowed_tools' lists tool names",
        ),
        (
            // A connector names an account integration, never a URL or headers.
            json!({"input": "q", "tools": [{"type": "connector", "id": "c", "server_label": "d", "server_url": "https://x/"}]}),
            "In 'tools[0]': Unknown argument(s): server_url.",
        ),
        (
            json!({"input": "q", "response_format": {"type": "json_object"}}),
            "'response_format.type' must be one of: json_schema.",
        ),
        (
            json!({"input": "q", "reasoning": {"effort": "max"}}),
            "'reasoning.effort' must be one of: minimal, low, medium, high, xhigh.",
        ),
        (
            json!({"input": "q", "model": "sonar-pro"}),
            "must be a provider/model id",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "filters": {"search_after_date_filter": "2/30/2026"}}]}),
            "must be a real date",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "filters": {"recency": "day"}}]}),
            "In 'tools[0].filters': Unknown argument(s): recency.",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "max_tokens_per_page": 0}]}),
            "'tools[0].max_tokens_per_page' must be an integer from 1 to 1000000.",
        ),
        (
            json!({"input": "q", "tools": [{"type": "web_search", "user_location": {"latitude": 91}}]}),
            "'tools[0].user_location.latitude' must be a number",
        ),
        (
            json!({"input": "q", "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "f"}]}),
            "Two function tools are named 'f'.",
        ),
        (
            json!({"input": "q", "tools": [{"type": "function", "name": "f", "description": long(4097)}]}),
            "'tools[0].description' must be a string of 0 to 4096",
        ),
        (
            json!({"input": "q", "tools": [{"type": "function", "name": "f", "parameters": {"d": long(65_536)}}]}),
            "'tools[0].parameters' must be at most 65536",
        ),
        (
            json!({"input": "q", "tools": [{"type": "function", "name": "f", "code": "rm -rf /"}]}),
            "In 'tools[0]': Unknown argument(s): code.",
        ),
        (
            json!({"input": "q", "max_steps": 101}),
            "'max_steps' must be an integer from 1 to 100.",
        ),
        (
            json!({"input": "q", "max_steps": 5.0}),
            "'max_steps' must be an integer from 1 to 100.",
        ),
        (
            json!({"input": "q", "max_output_tokens": 1_000_001}),
            "'max_output_tokens' must be an integer from 1 to 1000000.",
        ),
        (
            json!({"input": "q", "language_preference": "EN"}),
            "'language_preference' must be a two-letter",
        ),
        (
            json!({"input": "q", "previous_response_id": "../x"}),
            "'previous_response_id' must be a response id",
        ),
        (
            json!({"input": "q", "previous_response_id": long(257)}),
            "'previous_response_id' must be a response id",
        ),
        (
            json!({"input": "q", "store": "no"}),
            "'store' must be a boolean.",
        ),
        (
            json!({"input": "q", "store": false, "wait": false}),
            "cannot be collected later",
        ),
        (
            json!({"input": "q", "auto_execute_functions": true}),
            "needs 'functions'",
        ),
        (
            json!({"input": "q", "functions": ["rm_rf"]}),
            "'functions' lists gateway tools",
        ),
        (
            json!({"input": "q", "functions": []}),
            "'functions' must be an array of 1 to 16",
        ),
        (
            json!({"input": "q", "functions": ["mcp__a__b"], "max_function_rounds": 3}),
            "applies only with 'auto_execute_functions'",
        ),
        (
            json!({"input": "q", "functions": ["mcp__a__b"], "auto_execute_functions": true, "max_function_rounds": 11}),
            "'max_function_rounds' must be an integer from 1 to 10.",
        ),
        (
            json!({"input": "q", "functions": ["mcp__a__b"], "auto_execute_functions": true, "store": false}),
            "needs 'store' and 'wait' true",
        ),
        (
            json!({"input": "q", "functions": ["mcp__a__b"], "auto_execute_functions": true, "tools": [{"type": "function", "name": "mine"}]}),
            "your own function tools are client-driven",
        ),
    ];
    for (input, expected) in cases {
        let got = err(input.clone());
        assert!(
            got.contains(expected),
            "{input:.200}\n got: {got}\nwant: {expected}"
        );
    }
}

#[test]
fn image_data_is_bounded_per_request() {
    let data = format!(
        "data:image/png;base64,{}",
        "A".repeat(MAX_IMAGE_DATA_CHARS - 32)
    );
    let part = json!({"type": "input_image", "image_url": data});
    let one = json!({"input": [{"type": "message", "role": "user", "content": [part.clone()]}]});
    assert!(validate(&args(one)).is_ok());
    let three = json!({"input": [{"type": "message", "role": "user", "content": [part.clone(), part.clone(), part]}]});
    assert!(err(three).contains("at most 4194304 characters of data URLs together"));
}

/// The nested shapes are shown as written: the lists their readers take from constants
/// must be the ones shown (the flat arguments' bounds come from the table itself).
#[test]
fn the_shown_shapes_list_what_their_readers_take() {
    let tool_types: Vec<Value> = tool_shape()["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["properties"]["type"]["const"].clone())
        .collect();
    assert_eq!(json!(tool_types), json!(TOOL_TYPES));
    assert_eq!(
        reasoning_shape()["properties"]["effort"]["enum"],
        json!(EFFORTS)
    );
    assert_eq!(
        format_shape()["properties"]["type"]["enum"],
        json!(FORMAT_TYPES)
    );
    let input = input_shape();
    assert_eq!(input["oneOf"][0]["maxLength"], json!(MAX_TEXT_CHARS));
    assert_eq!(input["oneOf"][1]["maxItems"], json!(MAX_INPUT_ITEMS));
}
