//! The suite's fixture resources, prompts and completions (names and contents as the
//! scenarios expect them), plus the media both tools and prompts embed.

use perplexity_agent::mcp::protocol::{RpcError, code};
use serde_json::{Map, Value, json};

/// A 1x1 PNG.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV file of eight silent 8-bit samples at 8 kHz.
pub const WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

const STATIC_TEXT: &str = "test://static-text";
const STATIC_BINARY: &str = "test://static-binary";
const WATCHED: &str = "test://watched-resource";

/// The first one is readable (the `caching` scenario reads whatever comes first).
pub fn resources() -> Value {
    json!({"resources": [
        {"uri": STATIC_TEXT, "name": "static-text", "description": "A static text resource.", "mimeType": "text/plain"},
        {"uri": STATIC_BINARY, "name": "static-binary", "description": "A static binary resource (a PNG).", "mimeType": "image/png"},
        {"uri": WATCHED, "name": "watched-resource", "description": "A resource to subscribe to (legacy sessions).", "mimeType": "text/plain"},
    ]})
}

pub fn templates() -> Value {
    json!({"resourceTemplates": [{
        "uriTemplate": "test://template/{id}/data",
        "name": "template",
        "description": "Data for an id, substituted into the URI.",
        "mimeType": "application/json",
    }]})
}

/// `resources/read`; an unknown URI is -32602 with the URI in `data` (SEP-2164).
pub fn read(params: &Map<String, Value>) -> Result<Value, RpcError> {
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let content = match uri {
        STATIC_TEXT => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
        }
        STATIC_BINARY => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
        WATCHED => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "The watched resource, as it is now."})
        }
        _ => match template_id(uri) {
            Some(id) => {
                let data =
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                json!({"uri": uri, "mimeType": "application/json", "text": data.to_string()})
            }
            None => {
                return Err(RpcError::new(code::INVALID_PARAMS, "Resource not found")
                    .with_data(json!({"uri": uri})));
            }
        },
    };
    Ok(json!({"contents": [content]}))
}

/// Legacy `resources/subscribe` and `unsubscribe`: nothing here ever changes, so a
/// subscription is only acknowledged (for a resource that exists).
pub fn subscribe(params: &Map<String, Value>) -> Result<Value, RpcError> {
    read(params).map(|_| json!({}))
}

fn template_id(uri: &str) -> Option<&str> {
    uri.strip_prefix("test://template/")?
        .strip_suffix("/data")
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

pub fn prompts() -> Value {
    let arg = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    json!({"prompts": [
        {"name": "test_simple_prompt", "description": "A prompt without arguments."},
        {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments.",
         "arguments": [arg("arg1", "First test argument"), arg("arg2", "Second test argument")]},
        {"name": "test_prompt_with_embedded_resource", "description": "A prompt that embeds a resource.",
         "arguments": [arg("resourceUri", "URI of the resource to embed")]},
        {"name": "test_prompt_with_image", "description": "A prompt with an image."},
        {"name": "test_input_required_result_prompt", "description": "A prompt that asks the client for context first (MRTR on 2026-07-28; on the SSE stream in a legacy session)."},
    ]})
}

/// `prompts/get` of every prompt but the interactive one.
pub fn prompt(name: &str, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let arg = |key: &str| {
        params
            .get("arguments")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                RpcError::new(
                    code::INVALID_PARAMS,
                    format!("Missing required argument: {key}"),
                )
            })
    };
    let messages = match name {
        "test_simple_prompt" => vec![user_text("This is a simple prompt for testing.")],
        "test_prompt_with_arguments" => {
            let (arg1, arg2) = (arg("arg1")?, arg("arg2")?);
            vec![user_text(&format!(
                "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
            ))]
        }
        "test_prompt_with_embedded_resource" => {
            let resource = json!({"uri": arg("resourceUri")?, "mimeType": "text/plain", "text": "Embedded resource content for testing."});
            vec![
                json!({"role": "user", "content": {"type": "resource", "resource": resource}}),
                user_text("Please process the embedded resource above."),
            ]
        }
        "test_prompt_with_image" => vec![
            json!({"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}}),
            user_text("Please analyze the image above."),
        ],
        _ => {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!("Unknown prompt: {name}"),
            ));
        }
    };
    Ok(json!({"messages": messages}))
}

pub fn prompt_result(text: &str) -> Value {
    json!({"messages": [user_text(text)]})
}

fn user_text(text: &str) -> Value {
    json!({"role": "user", "content": {"type": "text", "text": text}})
}

/// `completion/complete`: suggestions for `test_prompt_with_arguments`, by prefix.
pub fn complete(params: &Map<String, Value>) -> Result<Value, RpcError> {
    let reference = params.get("ref").filter(|r| r.is_object());
    let argument = params.get("argument").filter(|a| a.is_object());
    let (Some(reference), Some(argument)) = (reference, argument) else {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            "completion/complete needs `ref` and `argument` objects.",
        ));
    };
    let candidates: &[&str] = match (
        reference["type"].as_str(),
        reference["name"].as_str(),
        argument["name"].as_str(),
    ) {
        (Some("ref/prompt"), Some("test_prompt_with_arguments"), Some("arg1")) => {
            &["paris", "park", "party"]
        }
        (Some("ref/prompt"), Some("test_prompt_with_arguments"), Some("arg2")) => {
            &["hello", "world"]
        }
        _ => &[],
    };
    let prefix = argument["value"].as_str().unwrap_or_default();
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|c| c.starts_with(prefix))
        .collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}
