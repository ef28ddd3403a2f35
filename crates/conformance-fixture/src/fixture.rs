//! The fixture's [`Handler`]: what the suite's scenarios call, answered for the era the
//! transport decided. The transport has already done auth, Host/Origin, sessions, header
//! and `_meta` validation, and refuses the methods 2026-07-28 removed; this file only
//! answers, shaping modern results like the product does, and decides which calls become
//! tasks (the tasks extension, `tasks.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use perplexity_agent::mcp::era::{Era, request_meta, shape_modern};
use perplexity_agent::mcp::http::{Handled, Handler, Incoming, Outbound, header_params_of};
use perplexity_agent::mcp::protocol::{
    LOG_LEVELS, META_LOG_LEVEL, META_SERVER_INFO, RpcError, SUPPORTED_VERSIONS, code, error_frame,
    negotiated_version, result_frame,
};
use perplexity_agent::mcp::tasks::{EXTENSION, declared};
use serde_json::{Map, Value, json};

use crate::interactive::{self, Interaction, Round};
use crate::state::{Sealer, binding};
use crate::task_tools::{self, Support};
use crate::tasks::Tasks;
use crate::{catalog, tools};

const INSTRUCTIONS: &str = "Test fixture for the MCP conformance suite, served on perplexity-agent's HTTP transport. Not a product.";
/// The one interactive prompt.
const PROMPT: &str = "test_input_required_result_prompt";
/// Legacy sessions whose log level we remember (a session minting loop cannot grow it).
const MAX_LOG_SESSIONS: usize = 4096;

pub struct Fixture {
    sealer: Sealer,
    tasks: Arc<Tasks>,
    /// `logging/setLevel` per legacy session, as an index into `LOG_LEVELS`.
    log_levels: Mutex<HashMap<String, usize>>,
}

/// A method's answer: a result (shaped later) or an error, now or from a task.
enum Answer {
    Now(Result<Value, RpcError>),
    /// `None`: the client cancelled, so no reply.
    Later(BoxFuture<'static, Option<Result<Value, RpcError>>>),
}

impl Handler for Fixture {
    /// Streamed: anything that sends notifications or legacy questions before its result.
    fn streams(&self, request: &Incoming) -> bool {
        let name = request.params.get("name").and_then(Value::as_str);
        let legacy = request.era == Era::Legacy;
        match (request.method.as_str(), name) {
            ("tools/call", Some("test_tool_with_progress")) => progress_token(request).is_some(),
            ("tools/call", Some("test_tool_with_logging" | "test_logging_tool")) => true,
            ("tools/call", Some("test_streaming_elicitation")) => true,
            // Legacy questions travel on the call's own stream.
            ("tools/call", Some(name)) => legacy && is_interactive_tool(name),
            ("prompts/get", Some(PROMPT)) => legacy,
            _ => false,
        }
    }

    fn header_params(&self, tool: &str) -> Vec<(String, String)> {
        header_params_of(&crate::tools::input_schema(tool))
    }

    fn handle(self: Arc<Self>, request: Incoming, out: Outbound) -> Handled {
        let (id, era, method) = (request.id.clone(), request.era, request.method.clone());
        let frame = move |answer: Result<Value, RpcError>| match answer {
            Ok(result) => result_frame(&id, shape(era, &method, result)),
            Err(e) => error_frame(&id, &e),
        };
        match self.answer(&request, out) {
            Answer::Now(answer) => Handled::Now(Some(frame(answer))),
            Answer::Later(work) => Handled::Later(Box::pin(async move { work.await.map(frame) })),
        }
    }
}

impl Fixture {
    pub fn new() -> Result<Self, getrandom::Error> {
        Ok(Fixture {
            sealer: Sealer::new()?,
            tasks: Arc::new(Tasks::new()),
            log_levels: Mutex::new(HashMap::new()),
        })
    }

    fn answer(&self, request: &Incoming, out: Outbound) -> Answer {
        let params = &request.params;
        let result = match request.method.as_str() {
            "initialize" => Ok(initialize(params)),
            "server/discover" => Ok(json!({
                "supportedVersions": SUPPORTED_VERSIONS,
                "capabilities": capabilities(Era::Modern),
                "instructions": INSTRUCTIONS,
            })),
            // Only legacy sessions get here: the transport answers these 404 when modern.
            "ping" => Ok(json!({})),
            "logging/setLevel" => self.set_level(request),
            "resources/subscribe" | "resources/unsubscribe" => catalog::subscribe(params),
            "tools/list" => Ok(tools::list()),
            "tools/call" => return self.call_tool(request, out),
            "resources/list" => Ok(catalog::resources()),
            "resources/templates/list" => Ok(catalog::templates()),
            "resources/read" => catalog::read(params),
            "prompts/list" => Ok(catalog::prompts()),
            "prompts/get" => return self.get_prompt(request, out),
            "completion/complete" => catalog::complete(params),
            // The extension's, 2026-07-28 only; `tasks/result` and `tasks/list` (2025-11-25
            // tasks, gone from the extension) fall through to -32601.
            "tasks/get" | "tasks/update" | "tasks/cancel" if request.era == Era::Modern => {
                self.tasks.answer(&request.method, params)
            }
            method => Err(RpcError::method_not_found(method)),
        };
        Answer::Now(result)
    }

    fn call_tool(&self, request: &Incoming, out: Outbound) -> Answer {
        let params = &request.params;
        let Some(name) = params
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| tools::exists(n))
        else {
            let shown = params.get("name").unwrap_or(&Value::Null);
            return Answer::Now(Err(RpcError::new(
                code::INVALID_PARAMS,
                format!("Unknown tool: {shown}"),
            )));
        };
        // Called without `arguments` is the same as `{}` (tools-call-simple-text does so).
        let args = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args.clone(),
            Some(_) => {
                return Answer::Now(Err(RpcError::new(
                    code::INVALID_PARAMS,
                    "'arguments' must be an object.",
                )));
            }
        };
        if let Some(result) = tools::immediate(name, &args) {
            return Answer::Now(Ok(result));
        }
        if let Some(answer) = self.task_tool(name, &args, request, out.clone()) {
            return answer;
        }
        match name {
            "test_tool_with_progress" => {
                let work = tools::with_progress(progress_token(request), out);
                return Answer::Later(Box::pin(async move { work.await.map(Ok) }));
            }
            "test_tool_with_logging" | "test_logging_tool" => {
                let work = tools::with_logging(self.log_threshold(request), out);
                return Answer::Later(Box::pin(async move { work.await.map(Ok) }));
            }
            _ => {}
        }
        let Some(interaction) = interactive::interaction(name, &args) else {
            return Answer::Now(Err(RpcError::new(
                code::INTERNAL_ERROR,
                format!("Tool {name} has no implementation."),
            )));
        };
        let (owned, finished) = (name.to_owned(), args.clone());
        self.interact(interaction, request, &args, out, move |answers| {
            Ok(match answers {
                Ok(answers) => {
                    tools::text_result(&interactive::finish_text(&owned, &finished, &answers))
                }
                // Legacy: the client could not answer; a tool error, as any tool failure.
                Err(why) => tools::tool_error(&why),
            })
        })
    }

    fn get_prompt(&self, request: &Incoming, out: Outbound) -> Answer {
        let params = &request.params;
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(interaction) =
            interactive::interaction(name, &Map::new()).filter(|_| name == PROMPT)
        else {
            return Answer::Now(catalog::prompt(name, params));
        };
        let args = params
            .get("arguments")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let (owned, finished) = (name.to_owned(), args.clone());
        self.interact(
            interaction,
            request,
            &args,
            out,
            move |answers| match answers {
                Ok(answers) => Ok(catalog::prompt_result(&interactive::finish_text(
                    &owned, &finished, &answers,
                ))),
                Err(why) => Err(RpcError::new(code::INTERNAL_ERROR, why)),
            },
        )
    }

    /// The tasks extension's tools. With the extension declared (2026-07-28 only) the
    /// call becomes a task: it runs its work, or waits `input_required` for its answers;
    /// `test_tool_with_task` first asks by MRTR and becomes a task on the retry. Without
    /// it, a tool that runs only as a task is -32021 and the others are ordinary calls
    /// (`None` for the interactive ones: the usual path asks their questions).
    fn task_tool(
        &self,
        name: &str,
        args: &Map<String, Value>,
        request: &Incoming,
        out: Outbound,
    ) -> Option<Answer> {
        let support = task_tools::support(name)?;
        let with_tasks = request.era == Era::Modern && declared(&request.params);
        if !with_tasks && support == Support::Required {
            return Some(Answer::Now(Err(task_tools::needs_tasks(name))));
        }
        if let Some(interaction) = interactive::interaction(name, args) {
            if name == "test_tool_with_task" {
                return Some(self.ask_then_task(interaction, name, args, request, out));
            }
            if !with_tasks {
                return None;
            }
            // The questions go out through tasks/get, so the same capabilities are needed.
            let parked = interaction
                .require_capabilities(&request.params)
                .and_then(|()| self.tasks.park(name, args, interaction));
            return Some(Answer::Now(parked));
        }
        let work = match task_tools::work(name, args) {
            Ok(work) => work,
            Err(e) => return Some(Answer::Now(Err(e))),
        };
        if with_tasks {
            return Some(Answer::Now(self.tasks.spawn(work)));
        }
        let cancel = out.cancel_token();
        Some(Answer::Later(Box::pin(async move {
            tokio::select! {
                outcome = work => Some(outcome),
                () = cancel.cancelled() => None,
            }
        })))
    }

    /// MRTR rounds until every answer is in; the last retry's answer is a task that
    /// finishes with the tool's result (so round 1 has no task, round 2 no requestState).
    fn ask_then_task(
        &self,
        interaction: Interaction,
        name: &str,
        args: &Map<String, Value>,
        request: &Incoming,
        out: Outbound,
    ) -> Answer {
        let (tasks, owned, finished) = (self.tasks.clone(), name.to_owned(), args.clone());
        let finish = move |answers: Result<Map<String, Value>, String>| match answers {
            Ok(answers) => {
                let text = interactive::finish_text(&owned, &finished, &answers);
                tasks.spawn(task_tools::finishing(tools::text_result(&text)))
            }
            Err(why) => Ok(tools::tool_error(&why)),
        };
        self.interact(interaction, request, args, out, finish)
    }

    /// Runs an interaction in the request's era, then `finish`es with the answers (or,
    /// in a legacy session, with why the client could not give them).
    fn interact(
        &self,
        interaction: Interaction,
        request: &Incoming,
        args: &Map<String, Value>,
        out: Outbound,
        finish: impl FnOnce(Result<Map<String, Value>, String>) -> Result<Value, RpcError>
        + Send
        + 'static,
    ) -> Answer {
        if request.era == Era::Modern {
            let name = request.params.get("name").and_then(Value::as_str);
            let bound = binding(
                &request.method,
                name.unwrap_or_default(),
                &Value::Object(args.clone()),
            );
            return Answer::Now(
                match interaction.modern_round(&request.params, &self.sealer, &bound) {
                    Ok(Round::Done(answers)) => finish(Ok(answers)),
                    Ok(Round::Ask(input_required)) => Ok(input_required),
                    Err(e) => Err(e),
                },
            );
        }
        Answer::Later(Box::pin(async move {
            let answers = interaction.ask_legacy(&out).await;
            if answers.is_err() && out.cancel_token().is_cancelled() {
                return None;
            }
            Some(finish(answers))
        }))
    }

    fn set_level(&self, request: &Incoming) -> Result<Value, RpcError> {
        let level = request.params.get("level").and_then(Value::as_str);
        let Some(index) = LOG_LEVELS.iter().position(|l| Some(*l) == level) else {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!("Invalid log level. Accepted: {}.", LOG_LEVELS.join(", ")),
            ));
        };
        if let Some(session) = &request.session {
            let mut levels = self.log_levels.lock().unwrap_or_else(|e| e.into_inner());
            if levels.len() >= MAX_LOG_SESSIONS && !levels.contains_key(session) {
                levels.clear();
            }
            levels.insert(session.clone(), index);
        }
        Ok(json!({}))
    }

    /// Modern: the request's own `logLevel`, or no logs at all. Legacy: the session's
    /// level, everything until one is set.
    fn log_threshold(&self, request: &Incoming) -> Option<usize> {
        match request.era {
            Era::Modern => request_meta(&request.params)
                .and_then(|m| m.get(META_LOG_LEVEL))
                .and_then(Value::as_str)
                .and_then(|level| LOG_LEVELS.iter().position(|l| *l == level)),
            Era::Legacy => {
                let levels = self.log_levels.lock().unwrap_or_else(|e| e.into_inner());
                let level = request.session.as_ref().and_then(|s| levels.get(s));
                Some(level.copied().unwrap_or(0))
            }
        }
    }
}

fn is_interactive_tool(name: &str) -> bool {
    tools::exists(name) && interactive::interaction(name, &Map::new()).is_some()
}

/// A string or integer `_meta.progressToken` (nothing else opts in).
fn progress_token(request: &Incoming) -> Option<Value> {
    request_meta(&request.params)
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned()
}

/// Legacy negotiation, as the product: echo a handshake version we serve, else 2025-11-25.
fn initialize(params: &Map<String, Value>) -> Value {
    json!({
        "protocolVersion": negotiated_version(params),
        "capabilities": capabilities(Era::Legacy),
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    })
}

/// Legacy sessions may subscribe to resources; the modern era has no `resources/subscribe`
/// (and advertising `subscribe` there would promise a `subscriptions/listen` stream, which
/// the transport does not offer). The tasks extension is the modern era's only (as
/// `extensions`, never the 2025-11-25 `tasks` capability, which the fixture lacks).
fn capabilities(era: Era) -> Value {
    let mut capabilities = json!({"tools": {}, "prompts": {}, "completions": {}, "logging": {}});
    match era {
        Era::Legacy => capabilities["resources"] = json!({"subscribe": true}),
        Era::Modern => {
            capabilities["resources"] = json!({});
            capabilities["extensions"] = json!({ EXTENSION: {} });
        }
    }
    capabilities
}

fn server_info() -> Value {
    json!({"name": "perplexity-agent-conformance-fixture", "title": "perplexity-agent conformance fixture", "version": env!("CARGO_PKG_VERSION")})
}

/// Modern results get the product's shaping (resultType, caching hints), naming the fixture.
fn shape(era: Era, method: &str, result: Value) -> Value {
    if era == Era::Legacy {
        return result;
    }
    let mut shaped = shape_modern(method, result);
    if let Value::Object(map) = &mut shaped {
        map.insert(
            "_meta".to_owned(),
            json!({ META_SERVER_INFO: server_info() }),
        );
    }
    shaped
}
