//! Fixtures that need the client's input (sampling, elicitation, roots), one definition
//! for both eras: in a legacy session the questions go out on the request's SSE stream
//! and wait for the client's POSTed answers (`Outbound::ask`); in the modern era, where
//! the server may not send requests, the answer is an `input_required` result (MRTR,
//! SEP-2322) and the call finishes when the client retries with `inputResponses`. A task
//! that needs input (the tasks extension, `tasks.rs`) asks the same questions through
//! `tasks/get` and takes the answers through `tasks/update`.

use std::time::Duration;

use perplexity_agent::mcp::era::request_meta;
use perplexity_agent::mcp::http::{AskError, Outbound};
use perplexity_agent::mcp::protocol::{META_CLIENT_CAPABILITIES, RpcError, code};
use serde_json::{Map, Value, json};

use crate::state::Sealer;

/// How long a legacy question waits for the client's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
const MISSING_CAPABILITY: i64 = -32021;

/// One question to the client, under a key its answer comes back with.
struct Ask {
    key: &'static str,
    method: &'static str,
    params: Value,
}

impl Ask {
    /// Its `inputRequests` entry.
    fn request(&self) -> (String, Value) {
        let request = json!({"method": self.method, "params": self.params});
        (self.key.to_owned(), request)
    }
}

pub struct Interaction {
    asks: Vec<Ask>,
    /// Answers so far travel in a sealed `requestState` (a retry without one starts over).
    sealed: bool,
    /// One question per round, earlier answers carried in the state; else all at once.
    one_per_round: bool,
    /// Ask only what this request's client capabilities allow, instead of refusing the
    /// call with -32021.
    within_capabilities: bool,
}

/// A modern round's outcome.
pub enum Round {
    Done(Map<String, Value>),
    /// The `input_required` result to send.
    Ask(Value),
}

/// The interaction behind a tool (or the MRTR prompt), if it has one.
pub fn interaction(name: &str, args: &Map<String, Value>) -> Option<Interaction> {
    let text_arg = |key: &str, default: &'static str| -> String {
        args.get(key)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    };
    let your_name = || {
        let fields = json!({"name": {"type": "string"}});
        elicit("What is your name?", fields, &["name"])
    };
    let greeting = || sample("Generate a greeting", 50);
    let interaction = match name {
        "test_sampling" => one(ask("response", sample(&text_arg("prompt", "Hello"), 100))),
        "test_missing_capability" => one(ask("response", sample("Say hello.", 20))),
        "test_elicitation" => {
            let fields = json!({
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            });
            let message = text_arg("message", "Please provide your information");
            one(ask(
                "response",
                elicit(&message, fields, &["username", "email"]),
            ))
        }
        "test_elicitation_sep1034_defaults" => {
            let fields = json!({
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
            });
            one(ask(
                "response",
                elicit("Please review these defaults", fields, &[]),
            ))
        }
        "test_elicitation_sep1330_enums" => {
            let titled = |pairs: [(&str, &str); 3]| -> Value {
                pairs
                    .iter()
                    .map(|(value, title)| json!({"const": value, "title": title}))
                    .collect()
            };
            let fields = json!({
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "oneOf": titled([("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")])},
                "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "items": {"anyOf": titled([("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")])}},
            });
            one(ask("response", elicit("Please choose", fields, &[])))
        }
        "test_streaming_elicitation" | "test_input_required_result_elicitation" => {
            one(ask("user_name", your_name()))
        }
        "test_input_required_result_sampling" => one(ask(
            "capital_question",
            sample("What is the capital of France?", 100),
        )),
        "test_input_required_result_list_roots" => one(ask("client_roots", roots())),
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            let fields = json!({"ok": {"type": "boolean"}});
            Interaction {
                sealed: true,
                ..one(ask("confirm", elicit("Please confirm", fields, &["ok"])))
            }
        }
        "test_input_required_result_multiple_inputs" => Interaction {
            sealed: true,
            ..all(vec![
                ask("user_name", your_name()),
                ask("greeting", greeting()),
                ask("client_roots", roots()),
            ])
        },
        "test_input_required_result_multi_round" => {
            let name = json!({"name": {"type": "string"}});
            let color = json!({"color": {"type": "string"}});
            Interaction {
                sealed: true,
                one_per_round: true,
                ..all(vec![
                    ask(
                        "step1",
                        elicit("Step 1: What is your name?", name, &["name"]),
                    ),
                    ask(
                        "step2",
                        elicit("Step 2: What is your favorite color?", color, &["color"]),
                    ),
                ])
            }
        }
        "test_input_required_result_capabilities" => Interaction {
            within_capabilities: true,
            ..all(vec![
                ask("user_name", your_name()),
                ask("greeting", greeting()),
                ask("client_roots", roots()),
            ])
        },
        // The tasks extension's (SEP-2663): as a task they park `input_required`; without
        // the extension they ask as any interactive tool does.
        "confirm_delete" => {
            let fields = json!({"confirm": {"type": "boolean", "description": "Delete it?"}});
            let message = format!("Delete {}?", text_arg("filename", "the file"));
            one(ask("confirm", elicit(&message, fields, &["confirm"])))
        }
        "multi_input" => {
            let confirm = json!({"confirm": {"type": "boolean"}});
            Interaction {
                // Answers may come one at a time: the state keeps the earlier ones.
                sealed: true,
                ..all(vec![
                    ask("name", your_name()),
                    ask("confirm", elicit("Shall I go on?", confirm, &["confirm"])),
                ])
            }
        }
        // MRTR first, then a task (tasks-mrtr-composition): the name is asked in a round
        // of its own before the task exists.
        "test_tool_with_task" => one(ask("user_name", your_name())),
        "test_input_required_result_prompt" => {
            let fields = json!({"context": {"type": "string"}});
            let question = elicit("What context should the prompt use?", fields, &["context"]);
            one(ask("context", question))
        }
        _ => return None,
    };
    Some(interaction)
}

fn all(asks: Vec<Ask>) -> Interaction {
    Interaction {
        asks,
        sealed: false,
        one_per_round: false,
        within_capabilities: false,
    }
}

fn one(ask: Ask) -> Interaction {
    all(vec![ask])
}

impl Interaction {
    /// A modern round: what the retry brought (`inputResponses`, `requestState`) plus what
    /// the state carried; done when every question has an answer, else the questions still
    /// open. `binding` ties the state to this request.
    pub fn modern_round(
        &self,
        params: &Map<String, Value>,
        sealer: &Sealer,
        binding: &str,
    ) -> Result<Round, RpcError> {
        let asks: Vec<&Ask> = if self.within_capabilities {
            self.asks
                .iter()
                .filter(|ask| allowed(params, ask))
                .collect()
        } else {
            self.require_capabilities(params)?;
            self.asks.iter().collect()
        };
        let responses = match params.get("inputResponses") {
            None => Map::new(),
            Some(Value::Object(responses)) => responses.clone(),
            Some(_) => return Err(invalid("inputResponses must be an object")),
        };
        let (mut answers, trusted) = match (self.sealed, params.get("requestState")) {
            (false, _) => (Map::new(), true),
            (true, None) => (Map::new(), false),
            (true, Some(Value::String(state))) => (sealer.open(binding, state)?, true),
            (true, Some(_)) => return Err(invalid("requestState must be a string")),
        };
        // Answers to questions we did not ask are ignored (SEP-2322: unknown keys).
        for ask in &asks {
            if let Some(response) = responses.get(ask.key).filter(|_| trusted) {
                check_answer(ask, response)?;
                answers.insert(ask.key.to_owned(), response.clone());
            }
        }
        let open: Vec<&&Ask> = asks
            .iter()
            .filter(|ask| !answers.contains_key(ask.key))
            .collect();
        if open.is_empty() {
            return Ok(Round::Done(answers));
        }
        let take = if self.one_per_round { 1 } else { open.len() };
        let requests: Map<String, Value> =
            open.iter().take(take).map(|ask| ask.request()).collect();
        let mut result = json!({"resultType": "input_required", "inputRequests": requests});
        if self.sealed {
            result["requestState"] = json!(sealer.seal(binding, &answers));
        }
        Ok(Round::Ask(result))
    }

    /// -32021 unless the request's client capabilities allow every question
    /// (`requiredCapabilities` names what is missing, as an object).
    pub fn require_capabilities(&self, params: &Map<String, Value>) -> Result<(), RpcError> {
        let missing: Map<String, Value> = self
            .asks
            .iter()
            .filter(|ask| !allowed(params, ask))
            .map(|ask| (capability(ask.method).to_owned(), json!({})))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(RpcError::new(
            MISSING_CAPABILITY,
            "Missing required client capability: declare it in io.modelcontextprotocol/clientCapabilities.",
        )
        .with_data(json!({"requiredCapabilities": missing})))
    }

    /// The questions `answers` does not answer yet, as an `inputRequests` map (a task's).
    pub fn open_requests(&self, answers: &Map<String, Value>) -> Map<String, Value> {
        self.asks
            .iter()
            .filter(|ask| !answers.contains_key(ask.key))
            .map(Ask::request)
            .collect()
    }

    /// Checks an answer to the question under `key`: `Ok(false)` when there is no such
    /// question (the answer is ignored, as SEP-2322 asks of unknown keys).
    pub fn check(&self, key: &str, answer: &Value) -> Result<bool, RpcError> {
        match self.asks.iter().find(|ask| ask.key == key) {
            Some(ask) => check_answer(ask, answer).map(|()| true),
            None => Ok(false),
        }
    }

    /// The legacy way: ask each question on the request's stream, in turn.
    pub async fn ask_legacy(&self, out: &Outbound) -> Result<Map<String, Value>, String> {
        let mut answers = Map::new();
        for ask in &self.asks {
            match out
                .ask(ask.method, ask.params.clone(), ANSWER_TIMEOUT)
                .await
            {
                Ok(answer) => {
                    answers.insert(ask.key.to_owned(), answer);
                }
                Err(e) => {
                    let why = match e {
                        AskError::Unsupported => "this call has no stream to ask on".to_owned(),
                        AskError::Refused(error) => format!("the client refused: {error}"),
                        AskError::TimedOut => "the client did not answer in time".to_owned(),
                        AskError::Gone => "the client went away".to_owned(),
                    };
                    return Err(format!("{} failed: {why}", ask.method));
                }
            }
        }
        Ok(answers)
    }
}

/// The finished call's text, from its arguments and the answers (tools), or the prompt's
/// messages.
pub fn finish_text(name: &str, args: &Map<String, Value>, answers: &Map<String, Value>) -> String {
    let said = |key: &str| answers.get(key).map(describe).unwrap_or_default();
    let field = |key: &str, field: &str| {
        answers
            .get(key)
            .and_then(|a| a["content"][field].as_str())
            .unwrap_or("(no answer)")
            .to_owned()
    };
    match name {
        "test_sampling" => format!("LLM response: {}", said("response")),
        "test_missing_capability" => format!("Sampling answered: {}", said("response")),
        "test_elicitation" => format!("User response: {}", said("response")),
        "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums" => {
            format!("Elicitation completed: {}", said("response"))
        }
        "test_streaming_elicitation" | "test_input_required_result_elicitation" => {
            format!("Hello, {}!", field("user_name", "name"))
        }
        "test_input_required_result_sampling" => {
            format!("The model said: {}", said("capital_question"))
        }
        "test_input_required_result_list_roots" => {
            format!("Client roots: {}", said("client_roots"))
        }
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            format!(
                "state-ok: the requestState verified; confirm = {}",
                said("confirm")
            )
        }
        "test_input_required_result_multi_round" => format!(
            "{}'s favorite color is {}.",
            field("step1", "name"),
            field("step2", "color")
        ),
        "test_input_required_result_prompt" => format!("Context: {}", field("context", "context")),
        "confirm_delete" => {
            let file = args
                .get("filename")
                .and_then(Value::as_str)
                .unwrap_or("the file");
            let agreed = answers
                .get("confirm")
                .is_some_and(|a| a["action"] == "accept" && a["content"]["confirm"] == json!(true));
            if agreed {
                format!("Deleted {file} (nothing was really deleted: a test fixture).")
            } else {
                format!("Kept {file}: the user did not confirm.")
            }
        }
        "test_tool_with_task" => format!("Hello, {}! (from a task)", field("user_name", "name")),
        _ => {
            let parts: Vec<String> = answers
                .iter()
                .map(|(key, answer)| format!("{key}: {}", describe(answer)))
                .collect();
            if parts.is_empty() {
                "Nothing could be asked: the client declared none of the capabilities needed."
                    .to_owned()
            } else {
                format!("Answers: {}", parts.join("; "))
            }
        }
    }
}

/// One answer in a line: an elicitation's action and content, a sampled text, roots.
fn describe(answer: &Value) -> String {
    if let Some(action) = answer["action"].as_str() {
        return format!(
            "action={action}, content={}",
            answer.get("content").unwrap_or(&json!({}))
        );
    }
    if let Some(text) = answer["content"]["text"].as_str() {
        return text.to_owned();
    }
    if let Some(roots) = answer["roots"].as_array() {
        let uris: Vec<&str> = roots.iter().filter_map(|r| r["uri"].as_str()).collect();
        return uris.join(", ");
    }
    answer.to_string()
}

/// Minimal shape checks, so a malformed answer is an error rather than a finished call.
fn check_answer(ask: &Ask, answer: &Value) -> Result<(), RpcError> {
    let ok = match ask.method {
        "elicitation/create" => answer["action"].is_string(),
        "sampling/createMessage" => answer["role"].is_string() && !answer["content"].is_null(),
        _ => answer["roots"].is_array(),
    };
    if ok {
        Ok(())
    } else {
        Err(invalid(&format!(
            "inputResponses.{} is not a valid {} result",
            ask.key, ask.method
        )))
    }
}

/// Whether the request's client capabilities allow asking this question.
fn allowed(params: &Map<String, Value>, ask: &Ask) -> bool {
    request_meta(params)
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(Value::as_object)
        .is_some_and(|caps| caps.contains_key(capability(ask.method)))
}

fn capability(method: &str) -> &'static str {
    match method {
        "sampling/createMessage" => "sampling",
        "roots/list" => "roots",
        _ => "elicitation",
    }
}

fn invalid(message: &str) -> RpcError {
    RpcError::new(code::INVALID_PARAMS, format!("Invalid params: {message}."))
}

fn ask(key: &'static str, (method, params): (&'static str, Value)) -> Ask {
    Ask {
        key,
        method,
        params,
    }
}

fn roots() -> (&'static str, Value) {
    ("roots/list", json!({}))
}

fn sample(text: &str, max_tokens: u32) -> (&'static str, Value) {
    let message = json!({"role": "user", "content": {"type": "text", "text": text}});
    (
        "sampling/createMessage",
        json!({"messages": [message], "maxTokens": max_tokens}),
    )
}

fn elicit(message: &str, properties: Value, required: &[&str]) -> (&'static str, Value) {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    (
        "elicitation/create",
        json!({"message": message, "requestedSchema": schema}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn caps(c: Value) -> Value {
        json!({META_CLIENT_CAPABILITIES: c})
    }

    #[test]
    fn undeclared_capability_is_refused_with_an_object() {
        let sealer = Sealer::new().unwrap();
        let tool = interaction("test_missing_capability", &Map::new()).unwrap();
        let p = params(json!({"_meta": caps(json!({}))}));
        let Err(e) = tool.modern_round(&p, &sealer, "b") else {
            panic!("must refuse")
        };
        assert_eq!(e.code, MISSING_CAPABILITY);
        assert_eq!(
            e.data.unwrap()["requiredCapabilities"],
            json!({"sampling": {}})
        );
    }

    #[test]
    fn rounds_carry_earlier_answers_in_the_state() {
        let sealer = Sealer::new().unwrap();
        let tool = interaction("test_input_required_result_multi_round", &Map::new()).unwrap();
        let all_caps = caps(json!({"elicitation": {}}));
        let round = |p: Value| tool.modern_round(&params(p), &sealer, "b");
        let Ok(Round::Ask(r1)) = round(json!({"_meta": all_caps})) else {
            panic!("round 1 asks")
        };
        assert!(
            r1["inputRequests"]["step1"].is_object() && r1["inputRequests"].get("step2").is_none()
        );
        let name = json!({"action": "accept", "content": {"name": "Alice"}});
        let Ok(Round::Ask(r2)) = round(
            json!({"_meta": all_caps, "inputResponses": {"step1": name}, "requestState": r1["requestState"]}),
        ) else {
            panic!("round 2 asks")
        };
        assert!(r2["inputRequests"]["step2"].is_object());
        assert_ne!(r1["requestState"], r2["requestState"]);
        let color = json!({"action": "accept", "content": {"color": "blue"}});
        let Ok(Round::Done(answers)) = round(
            json!({"_meta": all_caps, "inputResponses": {"step2": color}, "requestState": r2["requestState"]}),
        ) else {
            panic!("round 3 finishes")
        };
        let text = finish_text(
            "test_input_required_result_multi_round",
            &Map::new(),
            &answers,
        );
        assert_eq!(text, "Alice's favorite color is blue.");
    }

    #[test]
    fn malformed_answers_are_errors_and_unknown_keys_are_ignored() {
        let sealer = Sealer::new().unwrap();
        let tool = interaction("test_input_required_result_elicitation", &Map::new()).unwrap();
        let meta = caps(json!({"elicitation": {}}));
        let round = |p: Value| tool.modern_round(&params(p), &sealer, "b");
        assert!(round(json!({"_meta": meta, "inputResponses": {"user_name": 12345}})).is_err());
        assert!(round(json!({"_meta": meta, "inputResponses": null})).is_err());
        let Ok(Round::Ask(again)) =
            round(json!({"_meta": meta, "inputResponses": {"wrong_key": {}}}))
        else {
            panic!("re-asks")
        };
        assert_eq!(again["resultType"], "input_required");
        let name = json!({"action": "accept", "content": {"name": "Alice"}});
        let extra = json!({"_meta": meta, "inputResponses": {"user_name": name, "extra": 1}});
        assert!(matches!(round(extra), Ok(Round::Done(_))));
    }

    #[test]
    fn capability_filtering_asks_only_what_was_declared() {
        let sealer = Sealer::new().unwrap();
        let tool = interaction("test_input_required_result_capabilities", &Map::new()).unwrap();
        let p = params(json!({"_meta": caps(json!({"sampling": {}}))}));
        let Ok(Round::Ask(r)) = tool.modern_round(&p, &sealer, "b") else {
            panic!("asks")
        };
        let keys: Vec<&String> = r["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["greeting"]);
    }
}
