//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) on the fixture: the
//! task table, the wire shapes (`CreateTaskResult`, the detailed task of `tasks/get`),
//! and `tasks/get`, `tasks/update`, `tasks/cancel`. Only for 2026-07-28 requests that
//! declare the extension; the 2025-11-25 tasks are not offered.
//!
//! In memory (a restart forgets every task: this is a test fixture), bounded to
//! [`MAX_TASKS`] live tasks, each kept [`TTL`] from its creation. A task's id is 128
//! random bits: whoever knows it may poll, answer or cancel the task (there is one
//! bearer token, so one principal: nothing else to bind it to).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use perplexity_agent::mcp::protocol::{RpcError, code, error_frame};
use perplexity_agent::mcp::tasks::{declared, not_declared};
use serde_json::{Map, Value, json};
use tokio::task::AbortHandle;

use crate::interactive::{self, Interaction};
use crate::task_tools::Work;
use crate::tools;

/// Live tasks at once; one more is refused (expired ones are dropped first).
pub const MAX_TASKS: usize = 1024;
/// How long a task is kept after its creation, whatever its status.
const TTL: Duration = Duration::from_secs(600);
/// The polling hint of a task not yet terminal: the suite polls every 200 ms anyway.
const POLL_INTERVAL_MS: u64 = 200;

pub struct Tasks {
    table: Mutex<HashMap<String, Task>>,
}

struct Task {
    state: State,
    created: SystemTime,
    updated: SystemTime,
    /// The work a `working` task runs, aborted when it is cancelled or dropped.
    runner: Option<AbortHandle>,
}

enum State {
    Working,
    InputRequired(Box<Waiting>),
    /// The tool's result (a tool error too).
    Completed(Value),
    /// The JSON-RPC error object a protocol error left.
    Failed(Value),
    Cancelled,
}

/// A task waiting for the client: its questions and the answers so far.
struct Waiting {
    tool: String,
    args: Map<String, Value>,
    interaction: Interaction,
    answers: Map<String, Value>,
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::Working => "working",
            State::InputRequired(_) => "input_required",
            State::Completed(_) => "completed",
            State::Failed(_) => "failed",
            State::Cancelled => "cancelled",
        }
    }

    fn is_terminal(&self) -> bool {
        matches!(
            self,
            State::Completed(_) | State::Failed(_) | State::Cancelled
        )
    }
}

impl Task {
    fn new(state: State) -> Self {
        let now = SystemTime::now();
        Task {
            state,
            created: now,
            updated: now,
            runner: None,
        }
    }

    fn set(&mut self, state: State) {
        self.state = state;
        self.updated = SystemTime::now();
        // A terminal task runs nothing; aborting a runner that just ended is harmless.
        if self.state.is_terminal()
            && let Some(runner) = self.runner.take()
        {
            runner.abort();
        }
    }

    fn expired(&self, now: SystemTime) -> bool {
        now.duration_since(self.created).is_ok_and(|age| age >= TTL)
    }
}

impl Tasks {
    pub fn new() -> Self {
        Tasks {
            table: Mutex::new(HashMap::new()),
        }
    }

    /// A `working` task that runs `work` to its end; its `CreateTaskResult`. The task is
    /// in the table before the result exists, so a `tasks/get` right after resolves.
    pub fn spawn(self: &Arc<Self>, work: Work) -> Result<Value, RpcError> {
        let id = new_id()?;
        let mut table = self.lock();
        make_room(&mut table)?;
        let mut task = Task::new(State::Working);
        let created = task_json(&id, &task, false);
        let (tasks, settled) = (Arc::clone(self), id.clone());
        // Spawned under the lock: the runner settles only once the task is in the table.
        let runner = tokio::spawn(async move {
            let outcome = work.await;
            tasks.settle(&settled, outcome);
        });
        task.runner = Some(runner.abort_handle());
        table.insert(id, task);
        Ok(created)
    }

    /// A task that waits `input_required` for the answers to `interaction`'s questions
    /// (all asked at once), then completes with `tool`'s result; its `CreateTaskResult`.
    pub fn park(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        interaction: Interaction,
    ) -> Result<Value, RpcError> {
        let id = new_id()?;
        let mut table = self.lock();
        make_room(&mut table)?;
        let waiting = Waiting {
            tool: tool.to_owned(),
            args: args.clone(),
            interaction,
            answers: Map::new(),
        };
        let task = Task::new(State::InputRequired(Box::new(waiting)));
        let created = task_json(&id, &task, false);
        table.insert(id, task);
        Ok(created)
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` of a 2026-07-28 request: -32021
    /// without the extension (before anything else: the gate does not depend on the
    /// task), -32602 for a task we do not hold.
    pub fn answer(&self, method: &str, params: &Map<String, Value>) -> Result<Value, RpcError> {
        if !declared(params) {
            return Err(not_declared());
        }
        let id = params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("'taskId' must be a string"))?;
        let mut table = self.lock();
        let now = SystemTime::now();
        let task = table
            .get_mut(id)
            .filter(|task| !task.expired(now))
            .ok_or_else(|| {
                RpcError::new(
                    code::INVALID_PARAMS,
                    "Unknown task (wrong id, or it expired).",
                )
            })?;
        match method {
            "tasks/get" => Ok(task_json(id, task, true)),
            "tasks/update" => update(task, params).map(|()| ack()),
            "tasks/cancel" => {
                // Idempotent: a terminal task stays as it ended, and the ack is the same.
                if !task.state.is_terminal() {
                    task.set(State::Cancelled);
                }
                Ok(ack())
            }
            _ => Err(RpcError::method_not_found(method)),
        }
    }

    /// The end of a task's work, unless the task ended otherwise first (cancelled).
    fn settle(&self, id: &str, outcome: Result<Value, RpcError>) {
        let mut table = self.lock();
        let Some(task) = table.get_mut(id) else {
            return;
        };
        if !matches!(task.state, State::Working) {
            return;
        }
        task.runner = None;
        task.set(match outcome {
            Ok(result) => State::Completed(result),
            Err(e) => State::Failed(error_frame(&Value::Null, &e)["error"].clone()),
        });
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Task>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `tasks/update`: each answer to a question still open is checked (all before any is
/// kept, so a bad one changes nothing), answers under other keys are ignored; the task
/// completes once every question has its answer. A task not waiting takes nothing.
fn update(task: &mut Task, params: &Map<String, Value>) -> Result<(), RpcError> {
    let responses = match params.get("inputResponses") {
        Some(Value::Object(responses)) => responses,
        _ => return Err(invalid("'inputResponses' must be an object")),
    };
    let State::InputRequired(waiting) = &mut task.state else {
        return Ok(());
    };
    let mut taken = Vec::new();
    for (key, response) in responses {
        if !waiting.answers.contains_key(key) && waiting.interaction.check(key, response)? {
            taken.push((key.clone(), response.clone()));
        }
    }
    if taken.is_empty() {
        return Ok(());
    }
    waiting.answers.extend(taken);
    if !waiting
        .interaction
        .open_requests(&waiting.answers)
        .is_empty()
    {
        task.updated = SystemTime::now();
        return Ok(());
    }
    let text = interactive::finish_text(&waiting.tool, &waiting.args, &waiting.answers);
    task.set(State::Completed(tools::text_result(&text)));
    Ok(())
}

/// The ack of `tasks/update` and `tasks/cancel`: nothing but `resultType` (added when the
/// result is shaped), so that no one reads a task's state from it.
fn ack() -> Value {
    json!({})
}

/// Drops expired tasks (and their work); refuses a new one when [`MAX_TASKS`] remain.
fn make_room(table: &mut HashMap<String, Task>) -> Result<(), RpcError> {
    let now = SystemTime::now();
    table.retain(|_, task| {
        let keep = !task.expired(now);
        if !keep && let Some(runner) = task.runner.take() {
            runner.abort();
        }
        keep
    });
    if table.len() >= MAX_TASKS {
        return Err(RpcError::new(
            code::INTERNAL_ERROR,
            format!(
                "The fixture already holds {MAX_TASKS} tasks, its limit: try again once some expire ({} s after their creation).",
                TTL.as_secs()
            ),
        ));
    }
    Ok(())
}

/// A task on the wire: flat, integer milliseconds. Not `detailed`, the `CreateTaskResult`
/// (`resultType: "task"`, no outcome); `detailed`, what `tasks/get` answers, with the
/// result, the error or the open questions inlined (its `resultType` is added later).
fn task_json(id: &str, task: &Task, detailed: bool) -> Value {
    let mut out = json!({
        "taskId": id,
        "status": task.state.name(),
        "createdAt": rfc3339(task.created),
        "lastUpdatedAt": rfc3339(task.updated),
        "ttlMs": TTL.as_millis() as u64,
    });
    if !task.state.is_terminal() {
        out["pollIntervalMs"] = json!(POLL_INTERVAL_MS);
    }
    if !detailed {
        out["resultType"] = json!("task");
        return out;
    }
    match &task.state {
        State::InputRequired(waiting) => {
            let open = waiting.interaction.open_requests(&waiting.answers);
            out["inputRequests"] = Value::Object(open);
        }
        State::Completed(result) => {
            // The original call's result as that call would have answered it.
            let mut result = result.clone();
            if let Value::Object(map) = &mut result {
                map.entry("resultType").or_insert_with(|| json!("complete"));
            }
            out["result"] = result;
        }
        State::Failed(error) => out["error"] = error.clone(),
        State::Working | State::Cancelled => {}
    }
    out
}

/// `task-` and 32 hex digits: 128 bits from the OS.
fn new_id() -> Result<String, RpcError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        RpcError::new(
            code::INTERNAL_ERROR,
            format!("No randomness for a task id: {e}"),
        )
    })?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("task-{hex}"))
}

fn invalid(message: &str) -> RpcError {
    RpcError::new(code::INVALID_PARAMS, format!("Invalid params: {message}."))
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC), without a date crate: days to a civil date by
/// Howard Hinnant's `civil_from_days`.
fn rfc3339(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use perplexity_agent::mcp::protocol::META_CLIENT_CAPABILITIES;
    use perplexity_agent::mcp::tasks::EXTENSION;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn with_tasks(mut v: Value) -> Map<String, Value> {
        v["_meta"] =
            json!({META_CLIENT_CAPABILITIES: {"elicitation": {}, "extensions": {EXTENSION: {}}}});
        params(v)
    }

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2024-02-29T12:34:56.789Z, a leap day.
        let at = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(rfc3339(at), "2024-02-29T12:34:56.789Z");
        let at = UNIX_EPOCH + Duration::from_secs(4_102_444_799);
        assert_eq!(rfc3339(at), "2099-12-31T23:59:59.000Z");
    }

    #[tokio::test]
    async fn a_task_runs_to_its_result_and_cancel_is_idempotent() {
        let tasks = Arc::new(Tasks::new());
        let created = tasks.spawn(crate::task_tools::finishing(tools::text_result("done")));
        let created = created.unwrap();
        assert_eq!(created["resultType"], "task");
        assert!(created.get("result").is_none() && created.get("requestState").is_none());
        let id = created["taskId"].as_str().unwrap().to_owned();
        assert_eq!(id.len(), "task-".len() + 32);
        let get = with_tasks(json!({"taskId": id}));
        assert_eq!(
            tasks.answer("tasks/get", &get).unwrap()["status"],
            "working"
        );
        tokio::time::sleep(Duration::from_millis(600)).await;
        let done = tasks.answer("tasks/get", &get).unwrap();
        assert_eq!(done["status"], "completed");
        assert_eq!(done["result"]["content"][0]["text"], "done");
        assert!(done.get("pollIntervalMs").is_none());
        assert_eq!(tasks.answer("tasks/cancel", &get).unwrap(), json!({}));
        assert_eq!(
            tasks.answer("tasks/get", &get).unwrap()["status"],
            "completed"
        );
    }

    #[tokio::test]
    async fn cancel_ends_the_work_and_errors_fail_the_task() {
        let tasks = Arc::new(Tasks::new());
        let slow = crate::task_tools::work("slow_compute", &params(json!({"seconds": 60})));
        let id = tasks.spawn(slow.unwrap()).unwrap()["taskId"].clone();
        let get = with_tasks(json!({ "taskId": id }));
        tasks.answer("tasks/cancel", &get).unwrap();
        assert_eq!(
            tasks.answer("tasks/get", &get).unwrap()["status"],
            "cancelled"
        );
        let failing = crate::task_tools::work("protocol_error_job", &Map::new()).unwrap();
        let id = tasks.spawn(failing).unwrap()["taskId"].clone();
        tokio::time::sleep(Duration::from_millis(600)).await;
        let failed = tasks
            .answer("tasks/get", &with_tasks(json!({ "taskId": id })))
            .unwrap();
        assert_eq!(failed["status"], "failed");
        assert_eq!(failed["error"]["code"], code::INTERNAL_ERROR);
        assert!(failed.get("result").is_none());
    }

    #[test]
    fn answers_may_come_one_at_a_time() {
        let tasks = Tasks::new();
        let interaction = interactive::interaction("multi_input", &Map::new()).unwrap();
        let created = tasks.park("multi_input", &Map::new(), interaction).unwrap();
        assert_eq!(created["status"], "input_required");
        assert!(created.get("inputRequests").is_none());
        let get = with_tasks(json!({"taskId": created["taskId"]}));
        let open = tasks.answer("tasks/get", &get).unwrap()["inputRequests"].clone();
        let keys: Vec<&String> = open.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "confirm"]);
        let answer = json!({"action": "accept", "content": {"name": "Ann", "confirm": true}});
        let update = |responses: Value| {
            let p = with_tasks(json!({"taskId": created["taskId"], "inputResponses": responses}));
            tasks.answer("tasks/update", &p)
        };
        assert_eq!(
            update(json!({"unknown-key": {"ignored": true}})).unwrap(),
            json!({})
        );
        assert!(
            update(json!({"name": 12345})).is_err(),
            "a malformed answer"
        );
        assert!(update(json!(null)).is_err());
        update(json!({ "name": answer })).unwrap();
        let after = tasks.answer("tasks/get", &get).unwrap();
        assert_eq!(after["status"], "input_required");
        let keys: Vec<&String> = after["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["confirm"]);
        update(json!({ "confirm": answer })).unwrap();
        let done = tasks.answer("tasks/get", &get).unwrap();
        assert_eq!(done["status"], "completed");
        assert!(done.get("inputRequests").is_none());
    }

    #[test]
    fn the_gate_comes_first_and_unknown_ids_are_invalid_params() {
        let tasks = Tasks::new();
        let bare = params(json!({"taskId": "x", "_meta": {META_CLIENT_CAPABILITIES: {}}}));
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            assert_eq!(tasks.answer(method, &bare).unwrap_err().code, -32021);
            let unknown = with_tasks(json!({"taskId": "x", "inputResponses": {}}));
            let e = tasks.answer(method, &unknown).unwrap_err();
            assert_eq!(e.code, code::INVALID_PARAMS);
        }
    }

    #[test]
    fn the_table_is_bounded() {
        let tasks = Tasks::new();
        let park = || {
            let interaction = interactive::interaction("confirm_delete", &Map::new()).unwrap();
            tasks.park("confirm_delete", &Map::new(), interaction)
        };
        for _ in 0..MAX_TASKS {
            park().unwrap();
        }
        assert_eq!(park().unwrap_err().code, code::INTERNAL_ERROR);
    }
}
