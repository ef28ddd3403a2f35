//! `responses_create`'s request surface: every field of the Agent API create body that a
//! caller may set, each bounded (SECURITY.md, "Smuggled or misspelt arguments"), unknown keys rejected at every
//! level. The body sent upstream is rebuilt from the validated values, field by field:
//! nothing a caller wrote reaches Perplexity without having been checked.

use serde_json::{Map, Value, json};

use super::super::args::{Arg, Args, Kind, Read};
use super::super::search::LANGUAGE;
use crate::perplexity::agent::{FullRun, RECENCY_VALUES};
use crate::text::PutSome;

pub const MAX_TEXT_CHARS: usize = 16_384;
pub const MAX_INPUT_ITEMS: usize = 64;
pub const MAX_PARTS: usize = 64;
pub const MAX_MODEL_CHARS: usize = 128;
pub const MAX_MODELS: usize = 5;
pub const MAX_PRESET_CHARS: usize = 64;
pub const MAX_TOOLS: usize = 16;
pub const MAX_CALL_ID_CHARS: usize = 256;
pub const MAX_FUNCTION_NAME_CHARS: usize = 128;
pub const MAX_DESCRIPTION_CHARS: usize = 4_096;
/// Serialized size of a function's parameter schema or a response_format schema.
pub const MAX_SCHEMA_CHARS: usize = 65_536;
/// An http(s) image URL (the documented bound).
pub const MAX_IMAGE_URL_CHARS: usize = 2_048;
/// A `data:image/…;base64,…` URL (ours): about 1.5 MB of image.
pub const MAX_IMAGE_DATA_CHARS: usize = 2 * 1024 * 1024;
/// All image data of one request together (ours), so 64 × 64 parts cannot add up.
pub const MAX_TOTAL_IMAGE_DATA_CHARS: usize = 4 * 1024 * 1024;
pub const MAX_TOKENS: i64 = 1_000_000;
pub const DEFAULT_PRESET: &str = "medium";
pub const DEFAULT_FUNCTION_ROUNDS: i64 = 8;

pub const ROLES: [&str; 4] = ["user", "assistant", "system", "developer"];
/// The official SDK's `reasoning.effort` literal (perplexityai 0.46.1).
pub const EFFORTS: [&str; 5] = ["minimal", "low", "medium", "high", "xhigh"];
/// `response_format.type`: the API knows only `json_schema` (text is the default).
pub const FORMAT_TYPES: [&str; 1] = ["json_schema"];
pub const TOOL_TYPES: [&str; 6] = [
    "web_search",
    "fetch_url",
    "finance_search",
    "people_search",
    "function",
    "connector",
];
/// `temperature` and `top_p` (the Node SDK's `ResponsesRequestInput` types them as
/// bare numbers; the API's documented ranges are these).
pub const MAX_TEMPERATURE: f64 = 2.0;
pub const MAX_TOP_P: f64 = 1.0;
/// A saved profile's id and version, and a connector's id (ours: bounded names).
pub const MAX_PROFILE_CHARS: usize = 128;
pub const MAX_CONNECTOR_ID_CHARS: usize = 128;
/// A connector's `server_label` (the name its tools are shown under) and its tools.
pub const MAX_LABEL_CHARS: usize = 64;
pub const MAX_CONNECTOR_TOOLS: usize = 64;
/// The API's `max_steps` bound.
pub const MAX_STEPS: i64 = 100;
pub const CONTEXT_SIZES: [&str; 3] = ["low", "medium", "high"];
const IMAGE_TYPES: [&str; 4] = ["png", "jpeg", "gif", "webp"];
const DATE_FILTERS: [&str; 4] = [
    "search_after_date_filter",
    "search_before_date_filter",
    "last_updated_after_filter",
    "last_updated_before_filter",
];

/// `responses_create`'s arguments. Their bounds are read from here (`Read::*_in`),
/// in the nested reader's words; the nested shapes (input items, tools, the response
/// format, the profile) are shown as written and read by their own readers below.
pub const CREATE: [Arg; 20] = [
    Arg::new("input", Kind::Shown(input_shape)).required(),
    Arg::new("model", Kind::Shown(model_shape)),
    Arg::new("models", Kind::list(&MODEL_ID, 1, MAX_MODELS))
        .about("A fallback chain of model ids, tried in order; not with model."),
    Arg::new("preset", Kind::text(1, MAX_PRESET_CHARS))
        .about("A preset (fast, low, medium, high, xhigh, wide-research); medium when no model is named. A model or tools given here override the preset's."),
    Arg::new("instructions", Kind::text(1, MAX_TEXT_CHARS))
        .about("A system prompt; it replaces the preset's."),
    Arg::new("reasoning", Kind::Shown(reasoning_shape)),
    Arg::new("response_format", Kind::Shown(format_shape)),
    Arg::new("tools", Kind::list(&Kind::Shown(tool_shape), 0, MAX_TOOLS))
        .about("Tools the agent may use. A preset brings its own; a tool listed here replaces the preset's tool of that type (so list web_search only to change its settings)."),
    Arg::new("max_steps", Kind::count(1, MAX_STEPS)),
    Arg::new("max_output_tokens", TOKENS),
    Arg::new(
        "previous_response_id",
        Kind::pattern("^[A-Za-z0-9_-]{1,256}$", |id| is_word(id, 256), "must be a response id (1 to 256 letters, digits, _ or -) from an earlier responses_create."),
    )
    .about("Continue from this completed response (e.g. with function_call_output items as input)."),
    Arg::new("language_preference", LANGUAGE),
    Arg::new("temperature", Kind::number(0, MAX_TEMPERATURE))
        .about("Sampling temperature; lower is more deterministic."),
    Arg::new("top_p", Kind::number(0, MAX_TOP_P))
        .about("Nucleus sampling: the probability mass the model samples from."),
    Arg::new("profile", Kind::Shown(profile_shape)),
    Arg::new("store", Kind::Bool { default: true })
        .about("false: neither Perplexity nor this server keeps the response; it can then only be awaited within this call."),
    Arg::new("wait", Kind::Bool { default: true })
        .about("Wait for the answer. false: get the response_id at once, to collect with responses_retrieve."),
    // Read entry by entry below, where the message names the whole list.
    Arg::new("functions", Kind::list(&GATEWAY_FUNCTION, 1, MAX_TOOLS))
        .about("Gateway tools (mcp__<server>__<tool>) the operator lets the agent call, offered to it as functions."),
    Arg::new("auto_execute_functions", Kind::Bool { default: false })
        .about("Run the agent's calls of 'functions' here and continue the run with their outputs until it answers."),
    Arg::new("max_function_rounds", Kind::int(1, 10, DEFAULT_FUNCTION_ROUNDS))
        .about("With auto_execute_functions: at most this many rounds of function calls."),
];

const TOKENS: Kind = Kind::count(1, MAX_TOKENS);

const GATEWAY_FUNCTION: Kind = Kind::pattern("^mcp__[A-Za-z0-9_-]+$", is_gateway_function, "");

/// A gateway tool's name as `functions` lists it.
fn is_gateway_function(name: &str) -> bool {
    name.starts_with("mcp__") && name.len() <= MAX_FUNCTION_NAME_CHARS
}

fn text_shape() -> Value {
    json!({"type":"string","minLength":1,"maxLength":MAX_TEXT_CHARS})
}

/// A model id as the schemas show it; `perplexity_ask` reads its `model` by it (here
/// [`model_id`] reads them, provider/model only).
pub const MODEL_ID: Kind = Kind::Str {
    min: 1,
    max: MAX_MODEL_CHARS,
    pattern: "^[A-Za-z0-9._:/-]+$",
    valid: is_model_id,
    problem: "must be a model id of at most {max} characters (letters, digits and . _ : / -), e.g. openai/gpt-5.",
};

fn function_name_shape() -> Value {
    json!({"type":"string","pattern":"^[A-Za-z0-9_-]{1,128}$"})
}

fn model_shape() -> Value {
    json!({"description":"A model id such as openai/gpt-5 (Anthropic models need max_output_tokens); not with models.", "allOf":[MODEL_ID.schema(0)]})
}

fn input_shape() -> Value {
    let text = text_shape();
    let fname = function_name_shape();
    let call_id = json!({"type":"string","minLength":1,"maxLength":MAX_CALL_ID_CHARS});
    let part = json!({"oneOf":[
        {"type":"object","properties":{"type":{"const":"input_text"},"text":text},"required":["type","text"],"additionalProperties":false},
        {"type":"object","properties":{"type":{"const":"input_image"},
            "image_url":{"type":"string","maxLength":MAX_IMAGE_DATA_CHARS,"description":"An http(s) URL (at most 2048 characters) or a base64 data:image/(png|jpeg|gif|webp) URL."}},
         "required":["type","image_url"],"additionalProperties":false}]});
    let item = json!({"oneOf":[
        {"type":"object","properties":{"type":{"const":"message"},"role":{"type":"string","enum":ROLES},
            "content":{"oneOf":[text,{"type":"array","items":part,"minItems":1,"maxItems":MAX_PARTS}]}},
         "required":["type","role","content"],"additionalProperties":false},
        {"type":"object","properties":{"type":{"const":"function_call"},"call_id":call_id,"name":fname,
            "arguments":{"type":"string","maxLength":MAX_TEXT_CHARS},"thought_signature":text},
         "required":["type","call_id","name","arguments"],"additionalProperties":false},
        {"type":"object","properties":{"type":{"const":"function_call_output"},"call_id":call_id,
            "output":{"type":"string","maxLength":MAX_TEXT_CHARS},"name":fname,"thought_signature":text},
         "required":["type","call_id","output"],"additionalProperties":false}]});
    json!({"description":"A question (text), or a list of input items: messages (text and image parts), function_call items and function_call_output items.",
        "oneOf":[text, {"type":"array","items":item,"minItems":1,"maxItems":MAX_INPUT_ITEMS}]})
}

fn reasoning_shape() -> Value {
    json!({"type":"object","properties":{"effort":{"type":"string","enum":EFFORTS}},"additionalProperties":false})
}

fn format_shape() -> Value {
    json!({"type":"object","properties":{
            "type":{"type":"string","enum":FORMAT_TYPES},
            "json_schema":{"type":"object","properties":{
                "name":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,64}$"},
                "schema":{"type":"object","description":"A JSON Schema, at most 65536 characters serialized."},
                "description":{"type":"string","maxLength":MAX_DESCRIPTION_CHARS},
                "strict":{"type":"boolean"}},
                "required":["name","schema"],"additionalProperties":false}},
        "required":["type"],"additionalProperties":false,
        "description":"json_schema (with json_schema) for an answer in that shape, parsed for you into 'parsed'."})
}

fn tool_shape() -> Value {
    let fname = function_name_shape();
    let date = json!({"type":"string","pattern":"^\\d{1,2}/\\d{1,2}/\\d{4}$"});
    let filters = json!({"type":"object","properties":{
            "search_domain_filter":{"type":"array","items":{"type":"string","minLength":1,"maxLength":253},"maxItems":20,"description":"Domains to use, or (each prefixed with '-') to avoid; not both."},
            "search_recency_filter":{"type":"string","enum":RECENCY_VALUES},
            "search_after_date_filter":date,"search_before_date_filter":date,
            "last_updated_after_filter":date,"last_updated_before_filter":date},
        "additionalProperties":false});
    let tokens = TOKENS.schema(0);
    json!({"oneOf":[
        {"type":"object","properties":{"type":{"const":"web_search"},"filters":filters,
            "search_context_size":{"type":"string","enum":CONTEXT_SIZES,"description":"Not with max_tokens or max_tokens_per_page (explicit budgets replace it)."},
            "max_tokens":tokens,"max_tokens_per_page":tokens,
            "user_location":{"type":"object","properties":{
                "country":{"type":"string","pattern":"^[A-Z]{2}$"},
                "city":{"type":"string","minLength":1,"maxLength":128},
                "region":{"type":"string","minLength":1,"maxLength":128},
                "latitude":{"type":"number","minimum":-90,"maximum":90},
                "longitude":{"type":"number","minimum":-180,"maximum":180}},"additionalProperties":false}},
         "required":["type"],"additionalProperties":false},
        {"type":"object","properties":{"type":{"const":"fetch_url"},"max_urls":{"type":"integer","minimum":1,"maximum":10}},
         "required":["type"],"additionalProperties":false},
        {"type":"object","properties":{"type":{"const":"finance_search"}},"required":["type"],"additionalProperties":false},
        {"type":"object","properties":{"type":{"const":"people_search"}},"required":["type"],"additionalProperties":false,"description":"Perplexity's people search (professional profiles)."},
        {"type":"object","properties":{"type":{"const":"function"},"name":fname,
            "description":{"type":"string","maxLength":MAX_DESCRIPTION_CHARS},
            "parameters":{"type":"object","description":"A JSON Schema, at most 65536 characters serialized."},
            "strict":{"type":"boolean","default":true}},
         "required":["type","name"],"additionalProperties":false},
        {"type":"object","properties":{"type":{"const":"connector"},
            "id":{"type":"string","pattern":"^[A-Za-z0-9._:-]{1,128}$","description":"A connector configured on the Perplexity account of this server's API key; the operator must allow it (PERPLEXITY_ALLOWED_CONNECTORS)."},
            "server_label":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,64}$"},
            "allowed_tools":{"type":"array","items":fname,"minItems":1,"maxItems":MAX_CONNECTOR_TOOLS},
            "server_description":{"type":"string","maxLength":MAX_DESCRIPTION_CHARS}},
         "required":["type","id","server_label"],"additionalProperties":false}]})
}

fn profile_shape() -> Value {
    let name = json!({"type":"string","pattern":"^[A-Za-z0-9._:-]{1,128}$"});
    json!({"type":"object","properties":{"type":{"const":"custom"},"id":name,"version":name},
        "required":["type","id"],"additionalProperties":false,
        "description":"A saved configuration (profile) of the Perplexity account, by id and optionally version."})
}

/// A validated `responses_create` call.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateCall {
    pub body: FullRun,
    /// `store: false`: the run is not kept upstream nor in the local store, so it can
    /// only be awaited within this call.
    pub store: bool,
    pub wait: bool,
    /// The answer must be JSON (`response_format` json_schema).
    pub expects_json: bool,
    /// Gateway tools offered to the agent as functions (checked against the gateway
    /// before the call is admitted; their definitions are added to `tools` then).
    pub functions: Vec<String>,
    /// Run those functions here until the agent answers (at most `max_rounds` rounds).
    pub auto_execute: bool,
    pub max_rounds: u32,
}

impl CreateCall {
    /// The response this one continues, if any.
    pub fn previous_response_id(&self) -> Option<&str> {
        self.body
            .0
            .get("previous_response_id")
            .and_then(serde_json::Value::as_str)
    }
}

pub fn validate(args: &Args) -> Result<CreateCall, String> {
    let top = Read::new(args, &CREATE);
    let mut body = Map::new();

    let model = top
        .get("model")
        .map(|v| model_id(&top, "model", v))
        .transpose()?;
    let models = match top.list_in("models")? {
        None => None,
        Some(list) => Some(
            list.iter()
                .enumerate()
                .map(|(i, v)| model_id(&top, &format!("models[{i}]"), v))
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    if model.is_some() && models.is_some() {
        return Err("Give 'model' or 'models', not both.".to_owned());
    }
    let preset = top.text_in("preset")?;
    if preset.is_some_and(|p| p.trim().is_empty()) {
        return Err("'preset' must not be blank.".to_owned());
    }
    let max_output_tokens = top.int_in("max_output_tokens")?;
    let named: Vec<&str> = model
        .iter()
        .chain(models.iter().flatten())
        .copied()
        .collect();
    // Anthropic models answer 400 without it (live): refuse before it is billed.
    if max_output_tokens.is_none() && named.iter().any(|m| m.starts_with("anthropic/")) {
        return Err("Anthropic models need 'max_output_tokens' (e.g. 4096).".to_owned());
    }
    body.put_some("model", model);
    body.put_some("models", models.as_ref());
    match preset {
        Some(preset) => {
            body.insert("preset".into(), json!(preset));
        }
        // The API needs one of model, models, preset.
        None if named.is_empty() => {
            body.insert("preset".into(), json!(DEFAULT_PRESET));
        }
        None => {}
    }
    body.put_some("instructions", top.text_in("instructions")?);
    let input = top.required("input", top.get("input"))?;
    body.insert("input".into(), validate_input(input)?);
    let mut functions = Vec::new();
    if let Some(tools) = top.list_in("tools")? {
        let tools = tools
            .iter()
            .enumerate()
            .map(|(i, tool)| validate_tool(&format!("tools[{i}]"), tool, &mut functions))
            .collect::<Result<Vec<_>, _>>()?;
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
    }
    body.put_some("max_steps", top.int_in("max_steps")?);
    body.put_some("max_output_tokens", max_output_tokens);
    if let Some(v) = top.get("reasoning") {
        let reasoning = Read::of("reasoning", v, &["effort"])?;
        if let Some(effort) = reasoning.choice_at("effort", &EFFORTS)? {
            body.insert("reasoning".into(), json!({"effort": effort}));
        }
    }
    let mut expects_json = false;
    if let Some(v) = top.get("response_format") {
        let (format, json_answer) = validate_format(v)?;
        expects_json = json_answer;
        body.insert("response_format".into(), format);
    }
    body.put_some("language_preference", top.text_in("language_preference")?);
    for key in ["temperature", "top_p"] {
        body.put_some(key, top.number_in(key)?);
    }
    if let Some(v) = top.get("profile") {
        let f = Read::of("profile", v, &["type", "id", "version"])?;
        f.required("type", f.choice_at("type", &["custom"])?)?;
        let mut profile =
            json!({"type": "custom", "id": bounded_name(&f, "id", MAX_PROFILE_CHARS)?});
        if f.get("version").is_some() {
            profile["version"] = json!(bounded_name(&f, "version", MAX_PROFILE_CHARS)?);
        }
        body.insert("profile".into(), profile);
    }
    body.put_some("previous_response_id", top.text_in("previous_response_id")?);
    let functions: Vec<String> = match top.list_in("functions")? {
        None => Vec::new(),
        Some(list) => list
            .iter()
            .map(|v| {
                v.as_str()
                    .filter(|n| is_gateway_function(n))
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        "'functions' lists gateway tools by name (mcp__<server>__<tool>)."
                            .to_owned()
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    let auto_execute = top.bool_at("auto_execute_functions")?.unwrap_or(false);
    let max_rounds = top.int_in("max_function_rounds")?;
    if auto_execute && functions.is_empty() {
        return Err(
            "'auto_execute_functions' needs 'functions': the gateway tools the agent may call."
                .to_owned(),
        );
    }
    if !auto_execute && max_rounds.is_some() {
        return Err(
            "'max_function_rounds' applies only with 'auto_execute_functions': true.".to_owned(),
        );
    }
    let has_own_functions = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|t| t["type"] == "function"));
    if auto_execute && has_own_functions {
        return Err("With 'auto_execute_functions', function tools come only from 'functions' (gateway tools this server can run); your own function tools are client-driven: leave auto_execute_functions off.".to_owned());
    }
    let store = top.bool_at("store")?.unwrap_or(true);
    let wait = top.bool_at("wait")?.unwrap_or(true);
    if !store && !wait {
        return Err(
            "A run with 'store': false cannot be collected later: keep 'wait' true (the default)."
                .to_owned(),
        );
    }
    if auto_execute && (!store || !wait) {
        return Err("'auto_execute_functions' continues the run with previous_response_id: it needs 'store' and 'wait' true.".to_owned());
    }
    if store {
        // Background keeps the run server-side past our wait (it needs the default
        // `store: true`, so `store` itself is never sent).
        body.insert("background".into(), json!(true));
    } else {
        // Never `store: false` with `background: true`: the API refuses the pair.
        body.insert("store".into(), json!(false));
        body.insert("background".into(), json!(false));
    }
    Ok(CreateCall {
        body: FullRun(body),
        store,
        wait,
        expects_json,
        functions,
        auto_execute,
        max_rounds: max_rounds.unwrap_or(DEFAULT_FUNCTION_ROUNDS) as u32,
    })
}

/// A model id: `provider/model`, 1–128 of letters, digits and `. _ : / -`.
fn model_id<'a>(top: &Read<'_>, key: &str, v: &'a Value) -> Result<&'a str, String> {
    v.as_str()
        .filter(|m| is_model_id(m) && crate::perplexity::models::is_provider_model(m))
        .ok_or_else(|| {
            format!(
                "{} must be a provider/model id of at most {MAX_MODEL_CHARS} characters (letters, digits and . _ : / -), e.g. openai/gpt-5.5 (list them with: perplexity-agent models).",
                top.name(key)
            )
        })
}

/// 1–128 of letters, digits and `. _ : / -`: a model id's characters.
pub fn is_model_id(m: &str) -> bool {
    letters_digits_and(m, MAX_MODEL_CHARS, b"._:/-")
}

/// 1 to `max` letters, digits, `_` or `-` (function, tool and label names).
fn is_word(name: &str, max: usize) -> bool {
    letters_digits_and(name, max, b"_-")
}

/// 1 to `max` of ASCII letters, digits and the bytes of `also`.
fn letters_digits_and(s: &str, max: usize, also: &[u8]) -> bool {
    (1..=max).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || also.contains(&b))
}

/// A name on the API key's Perplexity account (a profile, a connector): 1 to `max` of
/// letters, digits and `. _ : -`.
pub fn is_account_name(name: &str, max: usize) -> bool {
    letters_digits_and(name, max, b"._:-")
}

/// A connector id as `responses_create` accepts it (and `PERPLEXITY_ALLOWED_CONNECTORS`
/// must name it: an id no call could send would be allowed for nothing).
pub fn is_connector_id(id: &str) -> bool {
    is_account_name(id, MAX_CONNECTOR_ID_CHARS)
}

/// [`is_account_name`] at `key`, required.
fn bounded_name<'a>(f: &Read<'a>, key: &str, max: usize) -> Result<&'a str, String> {
    let problem = format!("must be 1 to {max} letters, digits and . _ : -.");
    f.required(key, f.str_at(key, |n| is_account_name(n, max), &problem)?)
}

/// A string (one user turn) or a list of input items.
fn validate_input(input: &Value) -> Result<Value, String> {
    if let Some(text) = input.as_str() {
        if text.trim().is_empty() || text.chars().count() > MAX_TEXT_CHARS {
            return Err(format!(
                "'input' must be a non-empty string of at most {MAX_TEXT_CHARS} characters, or a list of input items."
            ));
        }
        return Ok(json!(text));
    }
    let items = input
        .as_array()
        .filter(|items| (1..=MAX_INPUT_ITEMS).contains(&items.len()))
        .ok_or(format!(
            "'input' must be a non-empty string or a list of 1 to {MAX_INPUT_ITEMS} input items."
        ))?;
    let mut image_data = 0;
    let items = items
        .iter()
        .enumerate()
        .map(|(i, item)| input_item(&format!("input[{i}]"), item, &mut image_data))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Value::Array(items))
}

fn item_type<'a>(path: &str, item: &'a Value, types: &[&str]) -> Result<&'a str, String> {
    item.get("type")
        .and_then(Value::as_str)
        .filter(|t| types.contains(t))
        .ok_or_else(|| format!("'{path}.type' must be one of: {}.", types.join(", ")))
}

fn input_item(path: &str, item: &Value, image_data: &mut usize) -> Result<Value, String> {
    if !item.is_object() {
        return Err(format!("'{path}' must be an object."));
    }
    match item_type(
        path,
        item,
        &["message", "function_call", "function_call_output"],
    )? {
        "message" => {
            let f = Read::of(path, item, &["type", "role", "content"])?;
            let role = f.required("role", f.choice_at("role", &ROLES)?)?;
            let content = f.required("content", f.get("content"))?;
            let content = match content.as_str() {
                Some(_) => json!(f.required("content", f.text_at("content", 1, MAX_TEXT_CHARS)?)?),
                None => {
                    let parts = f.required("content", f.list_at("content", 1, MAX_PARTS)?)?;
                    let parts = parts
                        .iter()
                        .enumerate()
                        .map(|(i, part)| {
                            content_part(&format!("{path}.content[{i}]"), part, image_data)
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    Value::Array(parts)
                }
            };
            Ok(json!({"type": "message", "role": role, "content": content}))
        }
        "function_call" => {
            let f = Read::of(
                path,
                item,
                &["type", "call_id", "name", "arguments", "thought_signature"],
            )?;
            let mut out = json!({
                "type": "function_call",
                "call_id": f.required("call_id", f.text_at("call_id", 1, MAX_CALL_ID_CHARS)?)?,
                "name": function_name(&f, "name")?,
                "arguments": f.required("arguments", f.text_at("arguments", 0, MAX_TEXT_CHARS)?)?,
            });
            out.put_some(
                "thought_signature",
                f.text_at("thought_signature", 1, MAX_TEXT_CHARS)?,
            );
            Ok(out)
        }
        _ => {
            let f = Read::of(
                path,
                item,
                &["type", "call_id", "output", "name", "thought_signature"],
            )?;
            let mut out = json!({
                "type": "function_call_output",
                "call_id": f.required("call_id", f.text_at("call_id", 1, MAX_CALL_ID_CHARS)?)?,
                "output": f.required("output", f.text_at("output", 0, MAX_TEXT_CHARS)?)?,
            });
            if f.get("name").is_some() {
                out["name"] = json!(function_name(&f, "name")?);
            }
            out.put_some(
                "thought_signature",
                f.text_at("thought_signature", 1, MAX_TEXT_CHARS)?,
            );
            Ok(out)
        }
    }
}

fn content_part(path: &str, part: &Value, image_data: &mut usize) -> Result<Value, String> {
    if !part.is_object() {
        return Err(format!("'{path}' must be an object."));
    }
    match item_type(path, part, &["input_text", "input_image"])? {
        "input_text" => {
            let f = Read::of(path, part, &["type", "text"])?;
            let text = f.required("text", f.text_at("text", 1, MAX_TEXT_CHARS)?)?;
            Ok(json!({"type": "input_text", "text": text}))
        }
        _ => {
            // No `detail`: the API's image parts have none, and strict mode answers an
            // unknown field with 400, so a request carrying it would fail whole.
            let f = Read::of(path, part, &["type", "image_url"])?;
            let url = f.required("image_url", f.get("image_url"))?;
            let url = image_url(&f.name("image_url"), url)?;
            if url.starts_with("data:") {
                *image_data += url.len();
                if *image_data > MAX_TOTAL_IMAGE_DATA_CHARS {
                    return Err(format!(
                        "The images of one request may hold at most {MAX_TOTAL_IMAGE_DATA_CHARS} characters of data URLs together; link large images by https URL instead."
                    ));
                }
            }
            Ok(json!({"type": "input_image", "image_url": url}))
        }
    }
}

/// An http(s) URL of at most 2,048 characters, or a base64 `data:image/…` URL of an
/// image type the API reads.
fn image_url<'a>(name: &str, v: &'a Value) -> Result<&'a str, String> {
    let url = v
        .as_str()
        .ok_or_else(|| format!("{name} must be a string."))?;
    if let Some(rest) = url.strip_prefix("data:image/") {
        let valid = rest.split_once(";base64,").is_some_and(|(kind, data)| {
            IMAGE_TYPES.contains(&kind)
                && !data.is_empty()
                && data.len() % 4 == 0
                && data
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
        });
        if !valid || url.len() > MAX_IMAGE_DATA_CHARS {
            return Err(format!(
                "{name}: a data URL must be data:image/(png|jpeg|gif|webp);base64,<data> of at most {MAX_IMAGE_DATA_CHARS} characters."
            ));
        }
        return Ok(url);
    }
    let parsed = url::Url::parse(url).ok();
    let web = parsed.is_some_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host().is_some() && u.username().is_empty()
    });
    if !web || url.chars().count() > MAX_IMAGE_URL_CHARS {
        return Err(format!(
            "{name} must be an http(s) URL of at most {MAX_IMAGE_URL_CHARS} characters (or a base64 data:image URL)."
        ));
    }
    Ok(url)
}

/// `[A-Za-z0-9_-]{1,max}` (a missing one is refused in the same words).
fn word_at<'a>(f: &Read<'a>, key: &str, max: usize) -> Result<&'a str, String> {
    let problem = format!("must be 1 to {max} letters, digits, _ or -.");
    let word = f.str_at(key, |n| is_word(n, max), &problem)?;
    word.ok_or_else(|| format!("{} {problem}", f.name(key)))
}

/// `[A-Za-z0-9_-]{1,128}`.
fn function_name<'a>(f: &Read<'a>, key: &str) -> Result<&'a str, String> {
    word_at(f, key, MAX_FUNCTION_NAME_CHARS)
}

/// A JSON Schema object, at most [`MAX_SCHEMA_CHARS`] serialized.
fn schema(f: &Read<'_>, key: &str) -> Result<Option<Value>, String> {
    let Some(v) = f.get(key) else {
        return Ok(None);
    };
    if !v.is_object() {
        return Err(format!("{} must be a JSON Schema object.", f.name(key)));
    }
    let size = serde_json::to_string(v)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    if size > MAX_SCHEMA_CHARS {
        return Err(format!(
            "{} must be at most {MAX_SCHEMA_CHARS} characters serialized.",
            f.name(key)
        ));
    }
    Ok(Some(v.clone()))
}

fn validate_format(v: &Value) -> Result<(Value, bool), String> {
    let f = Read::of("response_format", v, &["type", "json_schema"])?;
    let kind = f.required("type", f.choice_at("type", &FORMAT_TYPES)?)?;
    match (kind, f.get("json_schema")) {
        ("json_schema", None) => {
            Err("'response_format.json_schema' is required when the type is json_schema.".into())
        }
        ("json_schema", Some(js)) => {
            let js = Read::of(
                "response_format.json_schema",
                js,
                &["name", "schema", "description", "strict"],
            )?;
            let name = word_at(&js, "name", 64)?;
            let mut out =
                json!({"name": name, "schema": js.required("schema", schema(&js, "schema")?)?});
            out.put_some(
                "description",
                js.text_at("description", 0, MAX_DESCRIPTION_CHARS)?,
            );
            out.put_some("strict", js.bool_at("strict")?);
            Ok((json!({"type": "json_schema", "json_schema": out}), true))
        }
        // `choice` admits only json_schema.
        (kind, _) => Err(format!("'response_format.type' {kind} is not supported.")),
    }
}

fn validate_tool(path: &str, tool: &Value, functions: &mut Vec<String>) -> Result<Value, String> {
    if !tool.is_object() {
        return Err(format!("'{path}' must be an object."));
    }
    match item_type(path, tool, &TOOL_TYPES)? {
        "web_search" => {
            let f = Read::of(
                path,
                tool,
                &[
                    "type",
                    "filters",
                    "search_context_size",
                    "max_tokens",
                    "max_tokens_per_page",
                    "user_location",
                ],
            )?;
            let mut out = json!({"type": "web_search"});
            if let Some(filters) = f.get("filters") {
                let filters = validate_filters(&f.path_of("filters"), filters)?;
                if !filters.is_empty() {
                    out["filters"] = Value::Object(filters);
                }
            }
            let size = f.choice_at("search_context_size", &CONTEXT_SIZES)?;
            let mut budgets = false;
            for key in ["max_tokens", "max_tokens_per_page"] {
                if let Some(n) = f.int_at(key, 1, MAX_TOKENS)? {
                    out[key] = json!(n);
                    budgets = true;
                }
            }
            // The API's rule: a context size is a preset budget; explicit ones replace it.
            if let Some(size) = size {
                if budgets {
                    return Err(format!(
                        "{} cannot be combined with max_tokens or max_tokens_per_page: give a context size or explicit token budgets.",
                        f.name("search_context_size")
                    ));
                }
                out["search_context_size"] = json!(size);
            }
            if let Some(location) = f.get("user_location") {
                out["user_location"] = validate_location(&f.path_of("user_location"), location)?;
            }
            Ok(out)
        }
        "fetch_url" => {
            let f = Read::of(path, tool, &["type", "max_urls"])?;
            let mut out = json!({"type": "fetch_url"});
            out.put_some("max_urls", f.int_at("max_urls", 1, 10)?);
            Ok(out)
        }
        kind @ ("finance_search" | "people_search") => {
            Read::of(path, tool, &["type"])?;
            Ok(json!({ "type": kind }))
        }
        // Whether this server lets its callers use the connector is the operator's
        // call, checked after validation (`Tools::with_connectors_checked`).
        "connector" => {
            let f = Read::of(
                path,
                tool,
                &[
                    "type",
                    "id",
                    "server_label",
                    "allowed_tools",
                    "server_description",
                ],
            )?;
            let mut out = json!({
                "type": "connector",
                "id": bounded_name(&f, "id", MAX_CONNECTOR_ID_CHARS)?,
            });
            let problem = format!("must be 1 to {MAX_LABEL_CHARS} letters, digits, _ or -.");
            let label = f.str_at("server_label", |l| is_word(l, MAX_LABEL_CHARS), &problem)?;
            let label = f.required("server_label", label)?;
            out["server_label"] = json!(label);
            if let Some(tools) = f.list_at("allowed_tools", 1, MAX_CONNECTOR_TOOLS)? {
                let names = tools
                    .iter()
                    .map(|t| {
                        t.as_str()
                            .filter(|n| is_word(n, MAX_FUNCTION_NAME_CHARS))
                            .ok_or_else(|| {
                                format!(
                                    "{} lists tool names (1 to {MAX_FUNCTION_NAME_CHARS} letters, digits, _ or -).",
                                    f.name("allowed_tools")
                                )
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                out["allowed_tools"] = json!(names);
            }
            out.put_some(
                "server_description",
                f.text_at("server_description", 1, MAX_DESCRIPTION_CHARS)?,
            );
            Ok(out)
        }
        _ => {
            let f = Read::of(
                path,
                tool,
                &["type", "name", "description", "parameters", "strict"],
            )?;
            let name = function_name(&f, "name")?;
            if functions.iter().any(|n| n == name) {
                return Err(format!("Two function tools are named '{name}'."));
            }
            functions.push(name.to_owned());
            let mut out = json!({"type": "function", "name": name});
            out.put_some(
                "description",
                f.text_at("description", 0, MAX_DESCRIPTION_CHARS)?,
            );
            if let Some(p) = schema(&f, "parameters")? {
                out["parameters"] = p;
            }
            out["strict"] = json!(f.bool_at("strict")?.unwrap_or(true));
            Ok(out)
        }
    }
}

/// `web_search.filters`, as `perplexity_search` bounds them; absent keys stay absent.
fn validate_filters(path: &str, v: &Value) -> Result<Map<String, Value>, String> {
    // No search_language_filter: it is a Search API parameter, not a web_search filter
    // of the Agent API (the API would answer 400 "unknown field").
    let mut accepted = vec!["search_domain_filter", "search_recency_filter"];
    accepted.extend(DATE_FILTERS);
    let f = Read::of(path, v, &accepted)?;
    let mut out = Map::new();
    if let Some(domains) = f.list_at("search_domain_filter", 0, 20)? {
        let mut list = Vec::new();
        for d in domains {
            let d = d
                .as_str()
                .filter(|d| {
                    let bare = d.strip_prefix('-').unwrap_or(d);
                    !bare.is_empty()
                        && d.chars().count() <= 253
                        && !bare.contains(char::is_whitespace)
                })
                .ok_or_else(|| {
                    format!(
                        "Each entry of {} must be a domain name (at most 253 characters), optionally prefixed with '-'.",
                        f.name("search_domain_filter")
                    )
                })?;
            list.push(d);
        }
        let denied = list.iter().filter(|d| d.starts_with('-')).count();
        if denied != 0 && denied != list.len() {
            return Err(format!(
                "{} is an allowlist or a denylist ('-' prefix), not both.",
                f.name("search_domain_filter")
            ));
        }
        if !list.is_empty() {
            out.insert("search_domain_filter".into(), json!(list));
        }
    }
    out.put_some(
        "search_recency_filter",
        f.choice_at("search_recency_filter", &RECENCY_VALUES)?,
    );
    for key in DATE_FILTERS {
        let problem = "must be a real date written M/D/YYYY, e.g. 3/14/2026.";
        out.put_some(
            key,
            f.str_at(key, super::super::search::valid_date, problem)?,
        );
    }
    Ok(out)
}

fn validate_location(path: &str, v: &Value) -> Result<Value, String> {
    let f = Read::of(
        path,
        v,
        &["country", "city", "region", "latitude", "longitude"],
    )?;
    let mut out = Map::new();
    let iso = |c: &str| c.len() == 2 && c.bytes().all(|b| b.is_ascii_uppercase());
    let problem = "must be a two-letter uppercase ISO 3166 code, e.g. US.";
    out.put_some("country", f.str_at("country", iso, problem)?);
    for key in ["city", "region"] {
        out.put_some(key, f.text_at(key, 1, 128)?);
    }
    out.put_some("latitude", f.number_at("latitude", -90.0, 90.0)?);
    out.put_some("longitude", f.number_at("longitude", -180.0, 180.0)?);
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests;
