//! MCP tasks, 2026-07-28 generation (the `io.modelcontextprotocol/tasks` extension):
//! a research call that outlasts [`INLINE_WINDOW`] answers a task handle instead, and the
//! client polls `tasks/get` for the same `CallToolResult` the blocking call returns.
//!
//! - The call runs through the one call path (the same `Admitted` call as without a task:
//!   validation, rate limit, audit, output budget), detached from the request.
//! - A task is a store record written before its handle is sent, bound to the caller
//!   (its `Caller` key: the local user, the single token, a named client, a token subject):
//!   another caller's id is unknown, byte for byte as an id that never existed.
//!   Its id is 128 random bits and never the bare `response_id`: the id is a capability.
//! - A Perplexity run is durable remote state, so after a restart a `working` task is
//!   resumed from its run (collected through `perplexity_agent_result` or
//!   `responses_retrieve`); one that has no run to resume from (`deep_research` in its
//!   local stages, or a restart before the run existed) fails with a message, never stays
//!   `working`.
//! - With replicas (`PERPLEXITY_STATE_URL`) the records are shared (the state door): a task is
//!   read and finished through any replica. The replica running a task holds its lease
//!   and renews it; when a replica dies, its leases lapse and each of its tasks is adopted
//!   by exactly one other (the sweep), which collects the run as the task's caller. Ends
//!   are published, so a subscription on another replica hears of them at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::era::{Era, request_meta, shape_modern};
use super::protocol::{META_CLIENT_CAPABILITIES, RpcError, code};
use crate::call::{Caller, FrontEnd, Refusal, Slots, ToolOutput};
use crate::clock::now_ms;
use crate::drain::CREATE_ANSWER_GRACE;
use crate::guard::Charge;
use crate::identity::Identity;
use crate::perplexity::agent::CancelOutcome;
use crate::perplexity::wait::RunIdSink;
use crate::state::{StateError, TaskRecord, TaskUpdate};
use crate::text::PutSome;
use crate::tools::{Admitted, CallContext, Outcome, RunIds, Tools};

pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// How long a call may take and still be answered directly. A fast-preset answer is
/// usually ready within it, and a client that declared tasks has no tool-call timeout to
/// fear, so holding the request this long saves it a poll; anything longer is a task.
pub const INLINE_WINDOW: Duration = Duration::from_secs(5);
/// How long a task is kept: a day, long enough for any run (Perplexity's own limit is
/// far shorter) and for a client to come back after a restart.
const TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// A shorter ttl than this would expire before most research runs finish.
const MIN_TTL_MS: i64 = 60 * 1000;
/// Task-capable calls running at once in one process (each is a wait on one run).
pub const MAX_TASKS_IN_FLIGHT: usize = 1024;
/// Tasks per page of `tasks/list`.
const PAGE: usize = 50;
const MISSING_CAPABILITY: i64 = -32021;
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
const STATUS_WORKING: &str = "working";
/// How often a wait for a task's end reads the store anyway: a task that another process
/// sharing the store runs ends without a word here.
const FOREIGN_POLL: Duration = Duration::from_secs(5);

/// How a call asked to be a task: the era decides the shapes; a 2025-11-25 caller names
/// its ttl (bounded by ours) and gets the task at once, a 2026-07-28 one after the
/// inline window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskMode {
    pub era: Era,
    pub ttl_ms: i64,
    /// The caller hosts the MCP App: the result is kept with the App's view.
    pub apps: bool,
}

impl TaskMode {
    pub fn modern() -> Self {
        TaskMode {
            era: Era::Modern,
            ttl_ms: TTL_MS,
            apps: false,
        }
    }

    /// `task: {ttl}` of a 2025-11-25 `tools/call`, if present (a ttl we cannot keep is
    /// cut to ours; the Task says what we keep).
    pub fn legacy(params: &Map<String, Value>) -> Option<Self> {
        let task = params.get("task")?.as_object()?;
        let asked = task.get("ttl").and_then(Value::as_i64).filter(|t| *t > 0);
        Some(TaskMode {
            era: Era::Legacy,
            ttl_ms: asked.map_or(TTL_MS, |t| t.clamp(MIN_TTL_MS, TTL_MS)),
            apps: false,
        })
    }
}

/// The calls that may become tasks. Each task belongs to the caller that made it: every
/// method names the caller it acts for, and reads only that caller's records.
pub struct TaskDesk {
    front_end: FrontEnd,
    /// Tasks this process is running (or resuming).
    live: Mutex<HashMap<String, Live>>,
    /// A task-capable call takes one of these instead of a connection's call slot:
    /// tasks outlive their requests, so they are capped on their own.
    slots: Slots,
    /// Where 2025-11-25 `notifications/tasks/status` go, when the transport can carry
    /// an unsolicited notification (stdio); and the tasks created in that era here.
    /// Weak: it must not keep the writer alive after the connection's own senders end.
    status_sink: std::sync::OnceLock<tokio::sync::mpsc::WeakSender<Value>>,
    legacy: Mutex<std::collections::HashSet<String>>,
    /// Seals `tasks/list` cursors to this caller and process.
    cursors: super::cursor::Cursors,
    /// Told whenever a task settles here: a wait for a task's end wakes on it instead of
    /// polling the store.
    ended: tokio::sync::Notify,
}

/// A task this process runs: how to end its local wait, and — for a call it started —
/// the runs that call has created (`None` for a resumed one, whose run is known).
#[derive(Clone)]
struct Live {
    caller: Caller,
    cancel: CancellationToken,
    run_ids: Option<Arc<RunIds>>,
    tool: String,
}

/// How a task's call ended (`None` through the channel: the client cancelled it).
struct Ended {
    output: ToolOutput,
    panicked: bool,
}

/// What a task-capable call produced within the window.
pub enum Answered {
    /// Done (or not made durable): the ordinary result. `None`: abandoned.
    Now(Option<ToolOutput>),
    /// The `CreateTaskResult`, shaped.
    Task(Value),
}

impl TaskDesk {
    pub fn new(front_end: FrontEnd) -> Self {
        TaskDesk {
            front_end,
            live: Mutex::default(),
            slots: Slots::new(MAX_TASKS_IN_FLIGHT),
            status_sink: std::sync::OnceLock::new(),
            legacy: Mutex::default(),
            cursors: super::cursor::Cursors::default(),
            ended: tokio::sync::Notify::new(),
        }
    }

    /// Sends 2025-11-25 `notifications/tasks/status` to `frames` when tasks created in
    /// that era end (stdio: every message shares the one channel).
    pub fn notify_status_to(&self, frames: tokio::sync::mpsc::Sender<Value>) {
        let _ = self.status_sink.set(frames.downgrade());
    }

    /// The slots task-capable calls are accepted into.
    pub fn slots(&self) -> &Slots {
        &self.slots
    }

    /// Runs an admitted call detached from its request; answers it directly if it ends
    /// within [`INLINE_WINDOW`], else as a task. A task's work is its whole run: a tasks
    /// client has no call timeout to fear, so the task waits as long as the server may
    /// (and collects the run past that), and ends when the run does.
    pub async fn call(
        self: &Arc<Self>,
        tools: Arc<Tools>,
        tool: String,
        admitted: Admitted,
        mode: TaskMode,
        caller: &Caller,
    ) -> Answered {
        let cancel = CancellationToken::new();
        let run_id = Arc::new(FirstRunId::default());
        let run_ids = Arc::new(RunIds::forwarding(run_id.clone()));
        let ctx = CallContext {
            run_ids: run_ids.clone(),
            cancel: cancel.clone(),
            wait: Some(Duration::from_secs(crate::config::MAX_WAIT_SECONDS)),
            ..CallContext::default()
        };
        let task_tag = ctx.task_id.clone();
        let (tx, mut rx) = oneshot::channel();
        let (runner, front_end, name) = (tools.clone(), self.front_end, tool.clone());
        let owner = caller.clone();
        let first_run = run_id.clone();
        tokio::spawn(async move {
            let waits = admitted.waits();
            let done = runner.complete(admitted, &ctx).await;
            // Handed back unfinished (the run outlasted even the longest wait):
            // collected until it ends, unless the caller asked for the hand-back.
            let unfinished = done
                .as_ref()
                .filter(|done| waits && done.still_running())
                .and_then(|_| collector(&name).zip(first_run.get()));
            let ended = match unfinished {
                Some((collector, run)) => {
                    collect(&runner, (front_end, &owner), collector, &run, &ctx.cancel)
                        .await
                        .map(|output| Ended {
                            output,
                            panicked: false,
                        })
                }
                None => done.map(|done| Ended {
                    output: done.output,
                    panicked: done.panicked,
                }),
            };
            let _ = tx.send(ended);
        });
        if mode.era == Era::Modern {
            tokio::select! {
                done = &mut rx => return Answered::Now(done.ok().flatten().map(|d| d.output)),
                () = tokio::time::sleep(INLINE_WINDOW) => {}
            }
        }
        let now = now_ms();
        let record = TaskRecord {
            id: format!("task_{}", crate::random::secure_hex::<16>()),
            caller: caller.key().to_owned(),
            tool: tool.clone(),
            run_id: run_id.get(),
            status: STATUS_WORKING.to_owned(),
            status_message: None,
            result: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms: mode.ttl_ms,
        };
        if let Err(e) = tools.state().put_task(&record, caller).await {
            // No durable record, no task: the call is answered as if tasks were not
            // declared, rather than handing out a handle that may not resolve.
            tracing::warn!("cannot record a task, answering the call directly: {e}");
            return Answered::Now(rx.await.ok().flatten().map(|d| d.output));
        }
        let _ = task_tag.set(record.id.clone());
        // Marked before the run can settle: a run that ends at once is still announced.
        if mode.era == Era::Legacy
            && let Ok(mut legacy) = self.legacy.lock()
        {
            legacy.insert(record.id.clone());
        }
        let live = Live {
            caller: caller.clone(),
            cancel,
            run_ids: Some(run_ids),
            tool,
        };
        self.track(&tools, &record.id, live);
        run_id.bind(tools.clone(), self, &record, caller);
        let (desk, settler, id) = (self.clone(), tools.clone(), record.id.clone());
        let caller = caller.clone();
        tokio::spawn(async move {
            let update = match rx.await.ok().flatten() {
                // A contained panic is the server failing, not the tool: `failed`.
                Some(done) if done.panicked => Some(failure(&done.output.text)),
                Some(done) => Some(finished(&done.output, mode.apps)),
                // Only `tasks/cancel` ends a task's wait, and it settles the task itself
                // once Perplexity has heard of it.
                None => None,
            };
            if let Some(update) = update {
                desk.settle(&settler, &id, &caller, update).await;
            }
            desk.done_here(&settler, &id).await;
        });
        Answered::Task(match mode.era {
            Era::Modern => shape_modern("tools/call", task_json(&record, Era::Modern, false)),
            Era::Legacy => json!({"task": task_json(&record, Era::Legacy, false)}),
        })
    }

    /// At exit (EOF, a signal): the tasks this process runs stay `working` — the next
    /// server resumes each from its run — once every run's id is known and stored: a
    /// create still on the wire is waited for ([`CREATE_ANSWER_GRACE`]); its store write
    /// is one of the tools' obligations, which the caller settles next. A task that
    /// cannot be resumed ends now, saying why, rather than claim work nobody does. Then
    /// every local wait ends, so each call's audit record is closed (as abandoned, with
    /// its task and run).
    pub async fn drain(&self, tools: &Arc<Tools>) {
        let live: Vec<(String, Live)> = self
            .live
            .lock()
            .map(|l| l.iter().map(|(id, t)| (id.clone(), t.clone())).collect())
            .unwrap_or_default();
        let creates = live
            .iter()
            .filter_map(|(_, task)| task.run_ids.clone())
            .filter(|ids| ids.awaiting_id())
            .map(|ids| async move { ids.id_known().await });
        let _ = tokio::time::timeout(CREATE_ANSWER_GRACE, futures_util::future::join_all(creates))
            .await;
        for (id, task) in live {
            let runs = task.run_ids.as_ref().map(|ids| ids.snapshot());
            let message = match (task.tool.as_str(), &runs, &task.run_ids) {
                ("deep_research", ..) => STOPPED_DEEP_RESEARCH,
                (_, Some(runs), Some(ids)) if runs.is_empty() && ids.awaiting_id() => {
                    STOPPED_MID_CREATE
                }
                (_, Some(runs), _) if runs.is_empty() => STOPPED_BEFORE_RUN,
                _ => continue,
            };
            if let Some(runs) = &runs {
                for run in runs {
                    tracing::warn!(
                        tool = %task.tool,
                        response_id = %run,
                        "task {id} ended by shutdown; research run {run} may still be running. Collect it with perplexity_agent_result or stop it with perplexity_agent_cancel"
                    );
                }
            }
            self.settle(tools, &id, &task.caller, failure(message))
                .await;
        }
        // A wait that ends is not a task that ends: its runner leaves the record as it is.
        let stopped: Vec<CancellationToken> = self
            .live
            .lock()
            .map(|l| l.values().map(|t| t.cancel.clone()).collect())
            .unwrap_or_default();
        for cancel in &stopped {
            cancel.cancel();
        }
        let ended = async {
            while !self.live.lock().map_or(true, |l| l.is_empty()) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), ended).await;
    }

    /// A `tasks/*` request of either era: its result (shaped for the era).
    pub async fn answer(
        self: &Arc<Self>,
        tools: &Arc<Tools>,
        era: Era,
        method: &str,
        params: &Map<String, Value>,
        who: &Identity,
    ) -> Result<Value, RpcError> {
        let caller = &who.caller;
        if method == "tasks/list" {
            return self.list(tools, params, who).await;
        }
        let id = task_id(params)?;
        let record = self.read_for(tools, id, who).await?;
        match (era, method) {
            (Era::Modern, "tasks/get") => {
                let record = self.resume_if_orphaned(tools, record, caller).await;
                Ok(shape_modern(method, task_json(&record, era, true)))
            }
            (Era::Modern, "tasks/cancel") => {
                self.cancel(tools, &record, caller).await;
                Ok(shape_modern(method, json!({})))
            }
            // `tasks/update` of the caller's task: acknowledged. These tasks never ask
            // for input, so input responses are ignored, as the extension has a server
            // ignore responses it did not request (an unknown id was refused above).
            (Era::Modern, _) => Ok(shape_modern(method, json!({}))),
            (Era::Legacy, "tasks/get") => {
                let record = self.resume_if_orphaned(tools, record, caller).await;
                Ok(task_json(&record, era, false))
            }
            (Era::Legacy, "tasks/cancel") => {
                let record = self.cancel(tools, &record, caller).await;
                Ok(task_json(&record, era, false))
            }
            (Era::Legacy, _) => self.payload(tools, record, caller).await,
        }
    }

    /// `tasks/result` (2025-11-25): blocks until the task is terminal, at most the
    /// server's longest wait, then gives the original call's result (or its error).
    async fn payload(
        self: &Arc<Self>,
        tools: &Arc<Tools>,
        record: TaskRecord,
        caller: &Caller,
    ) -> Result<Value, RpcError> {
        let deadline =
            tokio::time::Instant::now() + Duration::from_secs(crate::config::MAX_WAIT_SECONDS);
        let mut record = self.resume_if_orphaned(tools, record, caller).await;
        loop {
            // Armed before the read, so an end between the two still wakes the wait.
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if record.status != STATUS_WORKING {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(RpcError::new(
                    code::INTERNAL_ERROR,
                    "The task is still working; call tasks/result again.",
                ));
            }
            tokio::select! {
                () = &mut ended => {}
                () = tokio::time::sleep(FOREIGN_POLL) => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
            record = self.read(tools, &record.id, caller).await?;
        }
        match (record.status.as_str(), stored(&record)) {
            ("completed", Some(mut result)) => {
                result["_meta"] =
                    json!({"io.modelcontextprotocol/related-task": {"taskId": record.id}});
                Ok(result)
            }
            ("failed", Some(error)) => Err(RpcError::new(
                error["code"].as_i64().unwrap_or(code::INTERNAL_ERROR),
                error["message"].as_str().unwrap_or("The task failed."),
            )),
            _ => Err(RpcError::new(
                code::INTERNAL_ERROR,
                record
                    .status_message
                    .unwrap_or_else(|| "The task was cancelled.".to_owned()),
            )),
        }
    }

    /// `tasks/list` (2025-11-25): this caller's tasks, newest first, [`PAGE`] at a time;
    /// the cursor is opaque and sealed to this caller (`cursor.rs`), so a forged or
    /// replayed one is -32602 and paging always ends.
    async fn list(
        &self,
        tools: &Arc<Tools>,
        params: &Map<String, Value>,
        who: &Identity,
    ) -> Result<Value, RpcError> {
        let caller = &who.caller;
        let before = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(c) => Some(
                c.as_str()
                    .and_then(|c| self.cursors.open(caller.key(), c))
                    .ok_or_else(|| {
                        RpcError::new(
                            code::INVALID_PARAMS,
                            "Invalid cursor: pass a nextCursor this server returned, or none to start over.",
                        )
                    })?,
            ),
        };
        // One more than a page says whether there is a next one.
        let rows = tools
            .state()
            .tasks_page(caller.key(), before, PAGE + 1)
            .await
            .map_err(store_unavailable)?;
        // A task whose tool this caller may no longer call is left out (the page may be
        // short; the cursor still follows the rows read).
        let page: Vec<Value> = rows
            .iter()
            .take(PAGE)
            .filter(|(_, r)| who.refusal(&r.tool).is_none())
            .map(|(_, r)| task_json(r, Era::Legacy, false))
            .collect();
        let mut result = json!({ "tasks": page });
        if rows.len() > PAGE
            && let Some((last, _)) = rows.get(PAGE - 1)
        {
            result["nextCursor"] = json!(self.cursors.seal(caller.key(), *last));
        }
        Ok(result)
    }

    /// `subscriptions/listen`. The only notifications offered are the tasks extension's:
    /// with it declared, `notifications.taskIds` is acknowledged for those of the ids that
    /// are the caller's (others are left out, as unknown); each one's ending is sent as
    /// `notifications/tasks` with the detailed task, and the subscription ends gracefully
    /// when all have (at once, after the acknowledgement, when nothing is watched, so a
    /// stream never sits open for nothing). `None` if the caller went away first.
    pub async fn listen(
        self: &Arc<Self>,
        tools: &Arc<Tools>,
        id: &Value,
        params: &Map<String, Value>,
        frames: Option<tokio::sync::mpsc::Sender<Value>>,
        cancel: CancellationToken,
        who: &Identity,
    ) -> Result<Option<Value>, RpcError> {
        let caller = &who.caller;
        let declared = declared(params);
        let wanted = params
            .get("notifications")
            .filter(|_| declared)
            .and_then(|n| n.get("taskIds"))
            .map(crate::text::strings)
            .unwrap_or_default();
        if wanted.len() > MAX_TASKS_IN_FLIGHT {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!("A subscription may name at most {MAX_TASKS_IN_FLIGHT} tasks."),
            ));
        }
        let mut pending = Vec::new();
        for task in &wanted {
            if let Ok(record) = self.read_for(tools, task, who).await
                && !pending.contains(&record.id)
            {
                pending.push(record.id);
            }
        }
        let subscription = json!({ SUBSCRIPTION_ID: id });
        let send = |frame: Value| {
            let frames = frames.clone();
            async move {
                if let Some(frames) = frames {
                    let _ = frames.send(frame).await;
                }
            }
        };
        let honoured = if declared {
            json!({ "taskIds": pending })
        } else {
            json!({})
        };
        send(
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                    "params": {"notifications": honoured, "_meta": subscription}}),
        )
        .await;
        while !pending.is_empty() {
            // Armed before the reads, so an end between them and the wait still wakes it.
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let mut still = Vec::with_capacity(pending.len());
            for task in pending {
                let record = match self.read_for(tools, &task, who).await {
                    Ok(record) => self.resume_if_orphaned(tools, record, caller).await,
                    // Expired while watched: nothing more will be said about it.
                    Err(_) => continue,
                };
                if record.status == STATUS_WORKING {
                    still.push(task);
                    continue;
                }
                let mut params = task_json(&record, Era::Modern, true);
                params["_meta"] = subscription.clone();
                send(json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params}))
                    .await;
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            tokio::select! {
                () = &mut ended => {}
                () = tokio::time::sleep(FOREIGN_POLL) => {}
                () = cancel.cancelled() => return Ok(None),
            }
        }
        let mut result = shape_modern("subscriptions/listen", json!({}));
        result["_meta"][SUBSCRIPTION_ID] = id.clone();
        Ok(Some(result))
    }

    /// The caller's task, when the caller may call the tool it ran *now*: a task is that
    /// tool's result by another door, so a token without the tool's scope (or a named
    /// client whose list no longer has it) may not read, wait on or cancel it — as
    /// `perplexity_agent_result` and `resources/read` of the same run are refused.
    async fn read_for(
        &self,
        tools: &Arc<Tools>,
        id: &str,
        who: &Identity,
    ) -> Result<TaskRecord, RpcError> {
        let record = self.read(tools, id, &who.caller).await?;
        match who.refusal(&record.tool) {
            Some(refused) => Err(RpcError::new(code::INVALID_PARAMS, refused)),
            None => Ok(record),
        }
    }

    async fn read(
        &self,
        tools: &Arc<Tools>,
        id: &str,
        caller: &Caller,
    ) -> Result<TaskRecord, RpcError> {
        match tools.state().task(id, caller.key()).await {
            Ok(r) if !r.expired(now_ms()) => Ok(r),
            Ok(_) => Err(unknown("This task has expired.")),
            Err(StateError::NotFound) => Err(unknown(
                "Unknown task (wrong id, another caller's task, or expired).",
            )),
            Err(e) => Err(store_unavailable(e)),
        }
    }

    /// A `working` task nobody in this process is running was left by an earlier one.
    async fn resume_if_orphaned(
        self: &Arc<Self>,
        tools: &Arc<Tools>,
        record: TaskRecord,
        caller: &Caller,
    ) -> TaskRecord {
        if record.status != STATUS_WORKING || self.is_live(&record.id) {
            return record;
        }
        // Another replica holds it (it runs, or is about to adopt it).
        if tools.state().claim_task(&record.id).await.is_err() {
            return record;
        }
        self.adopt(tools, record, caller).await
    }

    /// Collects a `working` task this process now holds (resumed after a restart, or
    /// taken over from a replica that died); one no run can finish ends, saying why.
    async fn adopt(
        self: &Arc<Self>,
        tools: &Arc<Tools>,
        record: TaskRecord,
        caller: &Caller,
    ) -> TaskRecord {
        let resumable = collector(&record.tool).zip(record.run_id.clone());
        let Some((collector, run)) = resumable else {
            let message = if record.tool == "deep_research" {
                "The server restarted while this research was in progress; a deep_research report is put together by the server and cannot be rebuilt from Perplexity's side. Start it again."
            } else {
                "The server restarted before this call had started a Perplexity run. Call the tool again."
            };
            let id = record.id.clone();
            let ended = self.apply(tools, record, caller, failure(message)).await;
            release(tools, &id).await;
            return ended;
        };
        let cancel = CancellationToken::new();
        let live = Live {
            caller: caller.clone(),
            cancel: cancel.clone(),
            run_ids: None,
            tool: record.tool.clone(),
        };
        if !self.track(tools, &record.id, live) {
            return record;
        }
        let (desk, tools, id) = (self.clone(), tools.clone(), record.id.clone());
        let caller = caller.clone();
        tokio::spawn(async move {
            let at = (desk.front_end, &caller);
            if let Some(output) = collect(&tools, at, collector, &run, &cancel).await {
                // Adopted: who reads it is not known here, so the plain result.
                desk.settle(&tools, &id, &caller, finished(&output, false))
                    .await;
            }
            desk.done_here(&tools, &id).await;
        });
        record
    }

    /// With replicas: renews the leases of the tasks this replica runs (a lease lost
    /// while the backend was away, and taken by another replica, ends the local wait:
    /// one collector per task), adopts the tasks of replicas that died, and wakes the
    /// waits for a task's end whenever one ends anywhere. Without leases (one process),
    /// nothing: one process has nobody to share with.
    pub fn share(self: &Arc<Self>, tools: &Arc<Tools>) {
        let state = tools.state().clone();
        let Some(lease) = state.lease() else {
            return;
        };
        let woken = Arc::downgrade(self);
        state.on_task_end(move || {
            if let Some(desk) = woken.upgrade() {
                desk.ended.notify_waiters();
            }
        });
        let (desk, tools) = (Arc::downgrade(self), Arc::downgrade(tools));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(lease / 3);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let (Some(desk), Some(tools)) = (desk.upgrade(), tools.upgrade()) else {
                    return;
                };
                let ids: Vec<String> = desk
                    .live
                    .lock()
                    .map(|l| l.keys().cloned().collect())
                    .unwrap_or_default();
                if let Ok(kept) = state.renew_tasks(&ids).await {
                    for (id, kept) in ids.iter().zip(kept) {
                        if !kept && let Some(live) = desk.live_task(id) {
                            tracing::warn!(
                                "task {id} was taken over by another replica while this one could not renew its lease; stopping here"
                            );
                            live.cancel.cancel();
                        }
                    }
                }
                let Ok(orphans) = state.adopt_orphans().await else {
                    continue;
                };
                for (record, caller) in orphans {
                    tracing::info!(
                        "adopted task {} from a replica that stopped renewing it",
                        record.id
                    );
                    desk.adopt(&tools, record, &caller).await;
                }
            }
        });
    }

    /// The local wait ends first (so it cannot settle the task as the run's own end),
    /// then Perplexity is asked to stop the run — the one on record, or the one a create
    /// still on the wire here is about to name — and only then is the task `cancelled`:
    /// an acknowledged cancel means the cancel reached Perplexity, or the task says that
    /// it did not and names the run that may still be going.
    async fn cancel(&self, tools: &Arc<Tools>, record: &TaskRecord, caller: &Caller) -> TaskRecord {
        if record.status != STATUS_WORKING {
            return record.clone();
        }
        let live = self.live_task(&record.id);
        if let Some(live) = &live {
            live.cancel.cancel();
        }
        let mut run = record.run_id.clone();
        if run.is_none()
            && let Some(ids) = live.as_ref().and_then(|l| l.run_ids.clone())
        {
            let _ = tokio::time::timeout(CREATE_ANSWER_GRACE, ids.id_known()).await;
            run = ids.snapshot().into_iter().next();
        }
        let message = match (&run, &live) {
            (Some(run), _) => match stop_run(tools, (self.front_end, caller), run).await {
                Ok(text) => text,
                Err(why) => format!(
                    "Cancelled here, but Perplexity could not be asked to stop research run {run} ({why}): it may still be running. Stop it with perplexity_agent_cancel."
                ),
            },
            (None, Some(_)) => {
                "Cancelled at the client's request, before Perplexity had started a run.".to_owned()
            }
            // Another process runs it and has not named its run yet: that process stops
            // the run when Perplexity names it (it reads this cancellation then).
            (None, None) => "Cancelled at the client's request, before its Perplexity run was known; the server that started it stops the run as soon as Perplexity names it.".to_owned(),
        };
        let update = TaskUpdate {
            status: Some("cancelled".to_owned()),
            status_message: Some(message),
            ..TaskUpdate::default()
        };
        self.apply(tools, record.clone(), caller, update).await
    }

    /// Writes a terminal `update` unless the task is terminal already (it never changes
    /// again), counting the outcome once.
    async fn settle(
        &self,
        tools: &Arc<Tools>,
        id: &str,
        caller: &Caller,
        update: TaskUpdate,
    ) -> bool {
        // Ended already (a conflict) or not answered: nothing changed here.
        let changed = tools
            .state()
            .update_task(id, caller.key(), &update)
            .await
            .is_ok();
        if changed && let Some(status) = &update.status {
            tools.guard().counters().task_settled(status);
            self.ended.notify_waiters();
        }
        let legacy = self.legacy.lock().is_ok_and(|mut l| l.remove(id));
        if changed
            && legacy
            && let Some(frames) = self.status_sink.get().and_then(|w| w.upgrade())
            && let Ok(record) = self.read(tools, id, caller).await
        {
            // Best effort, as the spec makes it: a full outbox drops the notice, and
            // tasks/get still answers.
            let status = json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                                "params": task_json(&record, Era::Legacy, false)});
            let _ = frames.try_send(status);
        }
        changed
    }

    async fn apply(
        &self,
        tools: &Arc<Tools>,
        record: TaskRecord,
        caller: &Caller,
        update: TaskUpdate,
    ) -> TaskRecord {
        self.settle(tools, &record.id, caller, update).await;
        // What the store now holds: if the task ended meanwhile, its real end, not ours.
        self.read(tools, &record.id, caller).await.unwrap_or(record)
    }

    /// Marks the task as run by this process; false if it already is (so two requests
    /// that find the same orphan start one collector, not two).
    fn track(&self, tools: &Tools, id: &str, task: Live) -> bool {
        let Ok(mut live) = self.live.lock() else {
            return false;
        };
        if live.contains_key(id) {
            return false;
        }
        live.insert(id.to_owned(), task);
        tools.guard().counters().task_running(1);
        true
    }

    /// The local wait for a task ended: its lease goes first (another replica may adopt
    /// a task left `working` at once), then it is no longer live here.
    async fn done_here(&self, tools: &Arc<Tools>, id: &str) {
        release(tools, id).await;
        self.untrack(tools, id);
    }

    fn untrack(&self, tools: &Tools, id: &str) {
        if let Ok(mut live) = self.live.lock()
            && live.remove(id).is_some()
        {
            tools.guard().counters().task_running(-1);
        }
    }

    fn is_live(&self, id: &str) -> bool {
        self.live.lock().is_ok_and(|l| l.contains_key(id))
    }

    fn live_task(&self, id: &str) -> Option<Live> {
        self.live.lock().ok().and_then(|l| l.get(id).cloned())
    }
}

/// The tool that collects a run of `tool` after its call is gone; `None` for
/// `deep_research`, whose report is put together here and cannot be rebuilt from a run.
fn collector(tool: &str) -> Option<&'static str> {
    match tool {
        "deep_research" => None,
        "responses_create" => Some("responses_retrieve"),
        _ => Some("perplexity_agent_result"),
    }
}

/// Waits for a run through its collecting tool until it is terminal (or the task is
/// cancelled: `None`); the tool's output is what the original call would have returned.
async fn collect(
    tools: &Arc<Tools>,
    (front_end, caller): (FrontEnd, &Caller),
    collector: &str,
    run: &str,
    cancel: &CancellationToken,
) -> Option<ToolOutput> {
    let args = json!({"response_id": run, "wait_seconds": crate::config::MAX_WAIT_SECONDS});
    let args = args.as_object().cloned().unwrap_or_default();
    loop {
        let admitted = match tools
            .accept(Charge::of(front_end, caller), collector, &args, None)
            .await
        {
            Ok(admitted) => admitted,
            // A full bucket or a state backend that is down for now: the run goes on
            // upstream, so the task keeps waiting for it rather than ending in error.
            Err(Refusal::RateLimited { retry_after }) => {
                tokio::select! {
                    () = tokio::time::sleep(retry_after) => continue,
                    () = cancel.cancelled() => return None,
                }
            }
            Err(Refusal::Unavailable) => {
                tokio::select! {
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => continue,
                    () = cancel.cancelled() => return None,
                }
            }
            Err(refusal) => return Some(refusal.output()),
        };
        let ctx = CallContext {
            cancel: cancel.clone(),
            ..CallContext::default()
        };
        let done = tools.complete(admitted, &ctx).await?;
        if !done.still_running() {
            return Some(done.output);
        }
    }
}

/// Asks Perplexity to stop `run` (through `perplexity_agent_cancel`, so it is audited
/// like any call): what the task's status message says, or why it could not be asked.
/// A run identical calls still wait on (the research cache's one run for them) is not
/// stopped: the task only leaves it, as any waiter's cancel does, and the run goes on
/// for them, billed once.
async fn stop_run(
    tools: &Arc<Tools>,
    (front_end, caller): (FrontEnd, &Caller),
    run: &str,
) -> Result<String, String> {
    if tools.cache().followed_run(run) {
        return Ok(format!(
            "Cancelled at the client's request; research run {run} goes on for the identical calls still waiting for it."
        ));
    }
    let args = json!({"response_id": run});
    let args = args.as_object().cloned().unwrap_or_default();
    let admitted = tools
        .accept(
            Charge::of(front_end, caller),
            "perplexity_agent_cancel",
            &args,
            None,
        )
        .await
        .map_err(|refusal| refusal.message())?;
    let done = tools
        .complete(admitted, &CallContext::default())
        .await
        .ok_or("the request was cut short")?;
    match done.outcome {
        Outcome::Cancel {
            result: Ok(CancelOutcome::Requested),
            ..
        } => Ok(
            "Cancelled at the client's request; Perplexity was asked to stop the run.".to_owned(),
        ),
        // Perplexity answers a finished run and an unknown one alike: claim neither.
        Outcome::Cancel { result: Ok(_), .. } => Ok(format!(
            "Cancelled at the client's request; Perplexity says research run {run} is not running (it may have finished already)."
        )),
        Outcome::Cancel { result: Err(e), .. } => Err(e.to_string()),
        _ => Err(done.output.text),
    }
}

fn finished(output: &ToolOutput, apps: bool) -> TaskUpdate {
    TaskUpdate {
        status: Some("completed".to_owned()),
        result: Some(output.to_json_for(apps).to_string()),
        ..TaskUpdate::default()
    }
}

/// A server-side failure: `failed`, with a JSON-RPC error as the extension asks.
fn failure(message: &str) -> TaskUpdate {
    let error = json!({"code": code::INTERNAL_ERROR, "message": message});
    TaskUpdate {
        status: Some("failed".to_owned()),
        status_message: Some(message.to_owned()),
        result: Some(error.to_string()),
        ..TaskUpdate::default()
    }
}

/// Why a task ended at exit, for tasks no run can finish.
const STOPPED_DEEP_RESEARCH: &str = "The server stopped while this research was in progress; a deep_research report is put together by the server and cannot be rebuilt from Perplexity's side. Start it again.";
const STOPPED_BEFORE_RUN: &str =
    "The server stopped before this call had started a Perplexity run. Call the tool again.";
const STOPPED_MID_CREATE: &str = "The server stopped before Perplexity answered the request that starts this run: a run may have started that cannot be collected. Check your Perplexity usage before calling the tool again.";

/// The task in its era's words (`ttlMs`/`pollIntervalMs` in the extension, `ttl`/
/// `pollInterval` in 2025-11-25); `detailed` (the extension's `tasks/get`) adds the final
/// result or error inline. Without `detailed`, a 2026-07-28 task is a `CreateTaskResult`.
fn task_json(record: &TaskRecord, era: Era, detailed: bool) -> Value {
    let (ttl, poll) = match era {
        Era::Modern => ("ttlMs", "pollIntervalMs"),
        Era::Legacy => ("ttl", "pollInterval"),
    };
    let mut task = json!({
        "taskId": record.id,
        "status": record.status,
        "createdAt": rfc3339(record.created_ms),
        "lastUpdatedAt": rfc3339(record.updated_ms),
        ttl: record.ttl_ms,
    });
    task.put_some("statusMessage", record.status_message.as_ref());
    if record.status == STATUS_WORKING {
        let age = now_ms().saturating_sub(record.created_ms);
        task[poll] = json!(poll_interval_ms(&record.tool, age));
    }
    if era == Era::Legacy {
        return task;
    }
    if !detailed {
        task["resultType"] = json!("task");
        return task;
    }
    match (record.status.as_str(), stored(record)) {
        ("completed", Some(result)) => task["result"] = shape_modern("tools/call", result),
        ("failed", Some(error)) => task["error"] = error,
        _ => {}
    }
    task
}

/// How long a client should wait before its next poll. `deep_research` searches and then
/// reasons for minutes, so early polls only cost requests; other runs often end within the
/// first minute, so they are polled often then, and less once they have proved long.
fn poll_interval_ms(tool: &str, age_ms: i64) -> i64 {
    match (tool, age_ms) {
        ("deep_research", _) => 10_000,
        (_, age) if age < 60_000 => 2_000,
        _ => 5_000,
    }
}

/// The final result (completed) or JSON-RPC error (failed) a record keeps.
fn stored(record: &TaskRecord) -> Option<Value> {
    serde_json::from_str(record.result.as_deref()?).ok()
}

/// Whether a 2026-07-28 request declared the tasks extension.
pub fn declared(params: &Map<String, Value>) -> bool {
    request_meta(params)
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .is_some_and(|e| e.get(EXTENSION).is_some())
}

/// -32021 for a caller that did not declare the extension.
pub fn not_declared() -> RpcError {
    RpcError::new(
        MISSING_CAPABILITY,
        format!("Task methods need the {EXTENSION} extension declared in the request's client capabilities."),
    )
    .with_data(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}}))
}

fn task_id(params: &Map<String, Value>) -> Result<&str, RpcError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        // Ours are `task_` and 32 hex digits; anything else cannot be one of them.
        .filter(|id| id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .ok_or_else(|| unknown("'taskId' must be the id of a task this server created."))
}

/// Gives up this replica's lease on a task (its local wait ended); one not given up
/// lapses by itself.
async fn release(tools: &Tools, id: &str) {
    if let Err(e) = tools.state().release_task(id).await {
        tracing::debug!("a task's lease was not released ({e}); it lapses by itself");
    }
}

fn store_unavailable(e: StateError) -> RpcError {
    RpcError::new(
        code::INTERNAL_ERROR,
        format!("The task store is unavailable: {e}"),
    )
}

fn unknown(message: &str) -> RpcError {
    RpcError::new(code::INVALID_PARAMS, message)
}

/// Keeps the first run id a call names, and once the call is a task, writes it to the
/// task's record (the resume after a restart needs it).
#[derive(Default)]
struct FirstRunId {
    state: Mutex<(Option<String>, Option<Binding>)>,
}

struct Binding {
    tools: Arc<Tools>,
    desk: std::sync::Weak<TaskDesk>,
    task: String,
    caller: Caller,
}

impl FirstRunId {
    fn get(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.0.clone())
    }

    /// From now on a new id goes to `record`; one that came after the record was made
    /// (between reading it and binding) is written now.
    fn bind(&self, tools: Arc<Tools>, desk: &Arc<TaskDesk>, record: &TaskRecord, caller: &Caller) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let binding = Binding {
            tools,
            desk: Arc::downgrade(desk),
            task: record.id.clone(),
            caller: caller.clone(),
        };
        if let Some(id) = state
            .0
            .clone()
            .filter(|id| record.run_id.as_ref() != Some(id))
        {
            binding.write(&id);
        }
        state.1 = Some(binding);
    }
}

impl RunIdSink for FirstRunId {
    fn run_id(&self, id: &str) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.0.is_some() {
            return;
        }
        state.0 = Some(id.to_owned());
        if let Some(binding) = &state.1 {
            binding.write(id);
        }
    }
}

impl Binding {
    /// Stores the run id — an obligation: the next server resumes the task from it — and
    /// if the task was cancelled meanwhile by a process that could not know the run
    /// (another server sharing the store), stops the run now that it has a name.
    fn write(&self, run_id: &str) {
        let (tools, desk) = (self.tools.clone(), self.desk.clone());
        let (task, caller, run) = (self.task.clone(), self.caller.clone(), run_id.to_owned());
        let obligations = tools.obligations().clone();
        obligations.spawn(async move {
            let status = tools.state().record_task_run(&task, caller.key(), &run).await;
            let Ok(status) = status else { return };
            let Some(desk) = desk.upgrade() else { return };
            // A cancel made here ends the local wait first and stops the run itself.
            let local = desk.live_task(&task);
            if status != "cancelled" || local.as_ref().is_some_and(|l| l.cancel.is_cancelled()) {
                return;
            }
            if let Some(live) = local {
                live.cancel.cancel();
            }
            if let Err(why) = stop_run(&tools, (desk.front_end, &caller), &run).await {
                tracing::warn!(
                    response_id = %run,
                    "task {task} was cancelled, but Perplexity could not be asked to stop research run {run} ({why}); stop it with perplexity_agent_cancel"
                );
            }
        });
    }
}

fn rfc3339(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// The poll hint's schedule; the wire shapes are tested black-box in `tests/e2e/tasks.rs`.
#[cfg(test)]
mod tests {
    use super::poll_interval_ms;

    #[test]
    fn deep_research_is_polled_rarely_and_other_runs_less_once_they_prove_long() {
        assert_eq!(poll_interval_ms("deep_research", 0), 10_000);
        assert_eq!(poll_interval_ms("perplexity_ask", 1_000), 2_000);
        assert_eq!(poll_interval_ms("perplexity_agent", 61_000), 5_000);
    }
}
