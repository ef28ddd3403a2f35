//! The stdio MCP server: one reader, concurrent tool calls, one writer.
//!
//! - stdout belongs to the protocol: only the writer task touches it, one compact JSON
//!   object per line, flushed per frame, so concurrent replies never interleave.
//! - The reader never waits for a tool call, so `ping`, `tools/list` and
//!   `notifications/cancelled` are handled while research runs are awaited.
//! - At EOF every request already read is answered (each bounded by its own deadline)
//!   and every reply written whole, however slowly the client reads; then tasks and
//!   promised side effects are settled ([`Dispatcher::finish`]) and the process exits 0.
//!   SIGTERM/SIGINT end local waits at once (never the upstream runs): each call cut
//!   short is answered saying so, with its run ids. Only a client that stops reading
//!   altogether ([`STUCK_PEER`]) is left without its replies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::dispatch::{Action, Dispatcher};
use super::framing::{Line, LineReader};
use super::protocol::{MAX_LINE_CHARS, RpcError, code, error_frame, outbound};
use super::run::Port;
use crate::call::{FrontEnd, Slots};
use crate::config::MAX_CALLS_IN_FLIGHT;
use crate::drain::{CREATE_ANSWER_GRACE, Progress, STUCK_PEER};

/// Frames waiting for the writer. Progress notifications are dropped rather than
/// block when it is full; replies wait.
const OUTBOX: usize = 1024;
/// The most the writer hands stdout at once: what a slow reader must take before the
/// writer counts it as progress.
const WRITE_CHUNK: usize = 64 * 1024;
/// Waits for a task's end one connection may hold open (`tasks/result`,
/// `subscriptions/listen`), as calls are capped: each is cheap while it waits (it wakes
/// on the task's end), but a thousand of them are a thousand open futures.
const MAX_WAITS: usize = 64;

type InFlight = Arc<Mutex<HashMap<String, (u64, CancellationToken)>>>;

/// Serves MCP on stdin/stdout until EOF or a termination signal. Returns the exit code.
pub async fn serve(dispatcher: Arc<Dispatcher>) -> i32 {
    let progress = Arc::new(Progress::default());
    let (outbox, frames) = mpsc::channel::<Value>(OUTBOX);
    let shutdown = CancellationToken::new();
    crate::signals::watch(shutdown.clone());
    let mut writer = tokio::spawn(write_frames(frames, progress.clone(), shutdown.clone()));
    dispatcher.tasks().notify_status_to(outbox.clone());
    announce_list_changes(&dispatcher, outbox.clone());

    let in_flight: InFlight = Arc::default();
    let slots = Slots::new(MAX_CALLS_IN_FLIGHT);
    let waits = Slots::new(MAX_WAITS);
    let mut calls = JoinSet::new();
    let mut next_seq = 0u64;
    let mut reader = LineReader::new(
        tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin()),
        MAX_LINE_CHARS,
    );

    loop {
        let line = tokio::select! {
            line = reader.next_line() => line,
            () = shutdown.cancelled() => break,
        };
        let action = match line {
            // A read error is the client going away: treat it as EOF.
            Ok(Line::Eof) | Err(_) => break,
            Ok(Line::TooLong) => Action::Reply(error_frame(
                &Value::Null,
                &RpcError::new(
                    code::INVALID_REQUEST,
                    format!("Line exceeds the {MAX_LINE_CHARS}-character limit."),
                ),
            )),
            Ok(Line::Complete(bytes)) => {
                let trimmed = bytes.trim_ascii();
                if trimmed.is_empty() {
                    continue;
                }
                answer_line(&dispatcher, trimmed)
            }
        };
        match action {
            Action::Nothing => {}
            Action::Reply(frame) => send(&outbox, frame).await,
            Action::Cancel(id) => {
                let key = id.to_string();
                if let Some((_, token)) = in_flight.lock().ok().and_then(|mut m| m.remove(&key)) {
                    token.cancel();
                }
            }
            Action::Task(job) => {
                // A blocking `tasks/result` holds one of the connection's waits.
                let held = match job.method.as_str() {
                    "tasks/result" => match waits.take() {
                        Ok(held) => Some(held),
                        Err(_) => {
                            send(&outbox, too_many_waits(&job.id)).await;
                            continue;
                        }
                    },
                    _ => None,
                };
                // Reads the store: off the read loop, like a call.
                let (dispatcher, outbox) = (dispatcher.clone(), outbox.clone());
                calls.spawn(async move {
                    let reply = dispatcher.task_reply(job).await;
                    drop(held);
                    send(&outbox, reply).await;
                });
            }
            Action::Listen(job) => {
                let Ok(held) = waits.take() else {
                    send(&outbox, too_many_waits(&job.id)).await;
                    continue;
                };
                // Long-lived: `notifications/cancelled` for its id ends it, as for a call.
                let token = shutdown.child_token();
                next_seq += 1;
                let (key, seq) = (job.id.to_string(), next_seq);
                if let Ok(mut map) = in_flight.lock() {
                    map.insert(key.clone(), (seq, token.clone()));
                }
                let (dispatcher, outbox, in_flight) =
                    (dispatcher.clone(), outbox.clone(), in_flight.clone());
                calls.spawn(async move {
                    let reply = dispatcher.listen(job, Some(outbox.clone()), token).await;
                    drop(held);
                    forget(&in_flight, &key, seq);
                    if let Some(frame) = reply {
                        send(&outbox, frame).await;
                    }
                });
            }
            Action::Call(job) => {
                // Accepted here, before the next line is read: refusals come back in
                // request order, even in a storm, and a refused call takes no slot.
                let admitted = match dispatcher
                    .accept_call(FrontEnd::McpStdio, &job, Some(&slots))
                    .await
                {
                    Ok(admitted) => admitted,
                    Err(refused) => {
                        send(&outbox, refused).await;
                        continue;
                    }
                };
                next_seq += 1;
                let (key, seq, cancel) = (job.id.to_string(), next_seq, shutdown.child_token());
                if let Ok(mut map) = in_flight.lock() {
                    map.insert(key.clone(), (seq, cancel.clone()));
                }
                let port = Port {
                    frames: Some(outbox.clone()),
                    cancel,
                    stopping: shutdown.clone(),
                };
                let (dispatcher, outbox, in_flight) =
                    (dispatcher.clone(), outbox.clone(), in_flight.clone());
                calls.spawn(async move {
                    let reply = dispatcher.run_call(job, admitted, port).await;
                    forget(&in_flight, &key, seq);
                    if let Some(frame) = reply {
                        send(&outbox, frame).await;
                    }
                });
            }
        }
        while calls.try_join_next().is_some() {}
    }

    // Each wait below also ends if the client stops reading: then no reply can reach it.
    // Fused: the second wait must not poll it again once the first saw it end (a
    // signal, or a closed stdout, can come after every call has been answered).
    let answered =
        futures_util::FutureExt::fuse(async { while calls.join_next().await.is_some() {} });
    tokio::pin!(answered);
    let mut all_answered = false;
    if !shutdown.is_cancelled() {
        // EOF: answer everything already read, unless a signal cuts it short.
        tokio::select! {
            () = &mut answered => all_answered = true,
            () = shutdown.cancelled() => {}
            () = progress.stuck(STUCK_PEER) => {}
        }
    }
    if shutdown.is_cancelled() && !all_answered {
        // Every local wait has ended; a call whose create is on the wire answers once
        // Perplexity names its run (at most CREATE_ANSWER_GRACE), naming it.
        tokio::select! {
            () = &mut answered => {}
            () = tokio::time::sleep(CREATE_ANSWER_GRACE + Duration::from_secs(1)) => {}
            () = progress.stuck(STUCK_PEER) => {}
        }
    }
    dispatcher.finish().await;
    // The writer ends once every frame is written: however long a slow reader takes.
    // (Should anything still hold a sender, a writer with nothing left to write for a
    // moment has written all there is.)
    drop(outbox);
    tokio::select! {
        _ = &mut writer => {}
        () = progress.done_for(Duration::from_secs(1)) => {}
        () = progress.stuck(STUCK_PEER) => {
            tracing::warn!(
                "the client stopped reading replies ({}s without taking a byte); exiting without the rest",
                STUCK_PEER.as_secs()
            );
        }
    }
    0
}

/// Dispatches one line; a panic becomes -32603 for that request, never a dead loop.
fn answer_line(dispatcher: &Dispatcher, line: &[u8]) -> Action {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        dispatcher.handle_line(line)
    })) {
        Ok(action) => action,
        Err(_) => {
            let message: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
            let method = message["method"].as_str().unwrap_or("?");
            tracing::error!(
                method,
                kind = "panic",
                "request handler failed unexpectedly"
            );
            match message.get("id") {
                Some(id) => Action::Reply(error_frame(
                    id,
                    &RpcError::new(code::INTERNAL_ERROR, "Internal server error."),
                )),
                None => Action::Nothing,
            }
        }
    }
}

/// The refusal of a wait past [`MAX_WAITS`] (a server error of JSON-RPC's own range: the
/// request is valid, this connection is full).
fn too_many_waits(id: &Value) -> Value {
    error_frame(
        id,
        &RpcError::new(
            code::SERVER_BUSY,
            format!(
                "This connection already has {MAX_WAITS} waits for tasks open (tasks/result, subscriptions/listen): end one, or wait for a task to end, first."
            ),
        ),
    )
}

/// The request `key` (as sequence `seq`) is no longer in flight: a later request that
/// reused its id keeps its own entry.
fn forget(in_flight: &InFlight, key: &str, seq: u64) {
    if let Ok(mut map) = in_flight.lock()
        && map.get(key).is_some_and(|(s, _)| *s == seq)
    {
        map.remove(key);
    }
}

/// With downstream servers, the tool list changes when one reconnects with other tools:
/// tell the client, which then lists again.
fn announce_list_changes(dispatcher: &Dispatcher, outbox: mpsc::Sender<Value>) {
    let Some(mut changes) = dispatcher.tools().gateway().map(|g| g.watch()) else {
        return;
    };
    dispatcher.announce_list_changes();
    // Weak: the writer ends when the connection's own senders do, not when the gateway's
    // watch does.
    let outbox = outbox.downgrade();
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let frame =
                serde_json::json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            let Some(outbox) = outbox.upgrade() else {
                return;
            };
            if outbox.send(frame).await.is_err() {
                return;
            }
        }
    });
}

async fn send(outbox: &mpsc::Sender<Value>, frame: Value) {
    // Fails only when the writer is gone, i.e. the process is ending anyway.
    let _ = outbox.send(frame).await;
}

/// The only code that writes to stdout. Frames waiting together are written in one go
/// (bounded), so a storm of replies does not make a `ping` wait behind thousands of
/// separate writes; each goes out in chunks, every chunk the reader takes counting as
/// `progress` (a slow reader is waited for, a stuck one is not). A client that closed
/// its end cancels `gone`.
async fn write_frames(
    mut frames: mpsc::Receiver<Value>,
    progress: Arc<Progress>,
    gone: CancellationToken,
) {
    const BATCH_BYTES: usize = 1 << 20;
    let mut stdout = tokio::io::stdout();
    let mut buffer = String::new();
    let push = |buffer: &mut String, frame: Value| {
        buffer.push_str(&outbound(&frame.to_string()));
        buffer.push('\n');
    };
    while let Some(frame) = frames.recv().await {
        progress.writing();
        buffer.clear();
        push(&mut buffer, frame);
        while buffer.len() < BATCH_BYTES {
            let Ok(next) = frames.try_recv() else { break };
            push(&mut buffer, next);
        }
        let mut written = true;
        for chunk in buffer.as_bytes().chunks(WRITE_CHUNK) {
            // tokio hands each chunk to a blocking write and returns; the next call (or
            // the flush) waits for it: so a returning call means the previous chunk is out.
            if stdout.write_all(chunk).await.is_err() {
                written = false;
                break;
            }
            progress.stamp();
        }
        if !written || stdout.flush().await.is_err() {
            // EPIPE: the client is gone. Nobody can be answered any more, so it ends like
            // a signal (waits end, tasks and promises are settled); frames are dropped.
            progress.idle();
            gone.cancel();
            while frames.recv().await.is_some() {}
            return;
        }
        // Idle only now: the last chunk is still being written until the flush returns,
        // and an exit that counted it as written cut a paused reader's last replies short
        // (and gave up on a stuck one after 1 s instead of STUCK_PEER).
        progress.idle();
    }
}
