//! A downstream process as an MCP transport, with every message it writes measured before
//! rmcp decodes it.
//!
//! rmcp's own child transport hands each stdout line straight to serde, where a 16 MiB
//! line of `[0,0,…]` becomes values many times its size before anything can refuse it.
//! Here a task reads the child's stdout first: a line over [`MAX_MESSAGE`] bytes, or over
//! [`MAX_VALUES`] elements, never reaches the decoder — the request it answered gets a
//! JSON-RPC error under its own id instead (so the call ends at once, saying why), and
//! the connection goes on. The child runs in its own process group, so closing the
//! connection ends whatever it started too: the group, not only the child, is waited for,
//! signalled and killed. Each group stays in a process-wide registry until it is seen gone,
//! and [`end_all_groups`] ends what is left of them when the process exits, whatever the
//! reason (tasks are not unwound at exit, so their own shut-downs may never finish).
//!
//! Touches: child processes.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::group::{self, Group};
use crate::dense::{MAX_VALUES, id_of, too_dense};

/// The largest message a downstream process may write: rmcp's own line cap, which a
/// 10,000-tool listing (of which the gateway offers 1 MiB) fits in. The element
/// count is what bounds the memory a message costs; this bounds the bytes held to count.
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// How much of an oversized line is kept to find the id it answers.
const ID_PREFIX: usize = 64 * 1024;
/// How long a child's group is given to exit after its stdin closes, and again after
/// SIGTERM.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// How often a group that has not exited yet is looked at again.
const POLL: Duration = Duration::from_millis(10);

/// The child and the transport over its pipes.
pub struct Guarded {
    child: Child,
    /// The child's process group (its own pid: `process_group(0)` at spawn), kept because
    /// tokio forgets the pid once the child is reaped, while what it started may live on.
    group: Option<Group>,
    transport: AsyncRwTransport<RoleClient, DuplexStream, ChildStdin>,
}

impl Guarded {
    /// Starts measuring `child`'s output; its stdin and stdout must be piped. `child` must
    /// lead its own process group.
    pub fn new(mut child: Child) -> std::io::Result<Self> {
        let group = child.id().and_then(group::of);
        if let Some(group) = group {
            register(group);
        }
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            if let Some(group) = group {
                group::kill(group);
            }
            return Err(std::io::Error::other("the child's stdio is not piped"));
        };
        // Lines pass whole, so a buffer of any size keeps them intact; a small one keeps
        // a child that writes faster than we read waiting on its pipe, not our memory.
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        tokio::spawn(measure(stdout, ours));
        // Our cap decides first; rmcp's stays as a backstop.
        let transport = AsyncRwTransport::new(theirs, stdin).with_max_line_length(MAX_MESSAGE + 1);
        Ok(Guarded {
            child,
            group,
            transport,
        })
    }

    /// Stdin closed first (a well-behaved server exits on EOF), then SIGTERM to the group,
    /// then SIGKILL. Each step waits for the whole group: a child that exits while
    /// something it started ignores EOF and SIGTERM does not end the shut-down.
    async fn shut_down(&mut self) -> std::io::Result<()> {
        let _ = self.transport.close().await;
        if self.gone_within(EXIT_GRACE).await {
            return Ok(());
        }
        self.signal(group::terminate);
        if self.gone_within(EXIT_GRACE).await {
            return Ok(());
        }
        self.signal(group::kill);
        let killed = self.child.kill().await;
        // What SIGKILL ended is usually gone at once; a group that is not (a process in
        // uninterruptible sleep) stays registered, for the exit to end.
        self.gone_within(EXIT_GRACE).await;
        killed
    }

    /// Whether the child and every process of its group are gone within `grace`; a group
    /// seen gone leaves the registry.
    async fn gone_within(&mut self, grace: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + grace;
        // An error is a child that can no longer be waited for: its group still is.
        if tokio::time::timeout_at(deadline, self.child.wait())
            .await
            .is_err()
        {
            return false;
        }
        let Some(group) = self.group else {
            return true;
        };
        // The child is reaped, so collecting the rest of its group takes nothing from tokio.
        let gone = group_gone_by(group, true, deadline).await;
        if gone {
            // Never signalled again: once gone, its number may be reused.
            self.group = None;
        }
        gone
    }

    fn signal(&self, send: fn(Group)) {
        if let Some(group) = self.group {
            send(group);
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // A connection dropped without `close` still takes its processes with it: the
        // group, even when the child itself has exited and only what it started is left.
        let Some(group) = self.group else {
            return;
        };
        let child_done = !matches!(self.child.try_wait(), Ok(None));
        if group::gone(group, child_done) {
            unregister(group);
            return;
        }
        group::kill(group);
        // Confirmed gone later, without holding up the thread that dropped us; without a
        // runtime, the group stays registered for the exit to end.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            // Only a child reaped before the drop may be collected here: a live one is
            // tokio's to reap once its kill-on-drop has run.
            let deadline = tokio::time::Instant::now() + EXIT_GRACE;
            runtime.spawn(group_gone_by(group, child_done, deadline));
        }
    }
}

/// Whether `group` is gone by `deadline`, looked at every [`POLL`] (`reap` as for
/// [`group::gone`]); a group seen gone leaves the registry.
async fn group_gone_by(group: Group, reap: bool, deadline: tokio::time::Instant) -> bool {
    loop {
        if group::gone(group, reap) {
            unregister(group);
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Every child's process group not yet seen gone, and whether the process is exiting
/// (then a group registered late is killed at once: nothing would end it after).
struct Groups {
    live: Vec<Group>,
    exiting: bool,
}

static GROUPS: Mutex<Groups> = Mutex::new(Groups {
    live: Vec::new(),
    exiting: false,
});

/// The registry, whatever a panic elsewhere left it holding (a list of numbers cannot be
/// left half-changed).
fn groups() -> MutexGuard<'static, Groups> {
    GROUPS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn register(group: Group) {
    let mut groups = groups();
    if groups.exiting {
        group::kill(group);
    }
    groups.live.push(group);
}

fn unregister(group: Group) {
    groups().live.retain(|&g| g != group);
}

/// Ends every child's process group still alive, for a process about to exit: SIGTERM,
/// up to [`EXIT_GRACE`] for the groups to go, then SIGKILL to the rest. Synchronous (no
/// runtime needed, none is left to rely on at exit); with no child ever started it takes
/// one uncontended lock and nothing else. Children started while it runs, or after, are
/// killed as soon as they are registered.
pub fn end_all_groups() {
    let mut groups = groups();
    groups.exiting = true;
    if groups.live.is_empty() {
        return;
    }
    // Exiting, the children are collected here whoever else was to wait for them: a
    // zombie left for a task that will never run again would hold its group open.
    groups.live.retain(|&g| !group::gone(g, true));
    for &group in &groups.live {
        group::terminate(group);
    }
    let deadline = Instant::now() + EXIT_GRACE;
    while !groups.live.is_empty() && Instant::now() < deadline {
        std::thread::sleep(POLL);
        groups.live.retain(|&g| !group::gone(g, true));
    }
    for &group in &groups.live {
        group::kill(group);
    }
    groups.live.clear();
}

impl Transport<RoleClient> for Guarded {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}

/// Copies the child's lines to rmcp, each measured first; ends at the child's EOF or when
/// rmcp stops reading.
async fn measure(stdout: ChildStdout, mut out: DuplexStream) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let Ok(read) = read_line(&mut reader, &mut line).await else {
            return;
        };
        let forward = match read {
            Line::End => return,
            Line::Whole if too_dense(&line) => refusal(&line, &too_many_values()),
            Line::Whole => Some(std::mem::take(&mut line)),
            Line::TooLong => refusal(&line, &format!("more than {MAX_MESSAGE} bytes")),
        };
        if let Some(bytes) = forward {
            if out.write_all(&bytes).await.is_err() {
                return;
            }
            // The buffer is kept for the next line unless a big one grew it: memory a
            // large reply took is given back once it has passed.
            if bytes.capacity() <= ID_PREFIX {
                line = bytes;
            }
        }
    }
}

enum Line {
    /// A whole line (with its newline, unless the stream ended without one).
    Whole,
    /// Past [`MAX_MESSAGE`]: `line` holds its first [`ID_PREFIX`] bytes, the rest was
    /// read and dropped.
    TooLong,
    End,
}

/// One line, never holding more than [`MAX_MESSAGE`] bytes of it.
async fn read_line(
    reader: &mut BufReader<ChildStdout>,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => {
                    line.push(b'\n');
                    Line::Whole
                }
            });
        }
        let (take, ends) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        if !too_long && line.len() + take > MAX_MESSAGE {
            too_long = true;
            line.truncate(ID_PREFIX);
        }
        if too_long {
            let room = ID_PREFIX.saturating_sub(line.len());
            line.extend_from_slice(&available[..take.min(room)]);
        } else {
            line.extend_from_slice(&available[..take]);
        }
        reader.consume(take);
        if ends {
            return Ok(if too_long { Line::TooLong } else { Line::Whole });
        }
    }
}

/// What an over-dense reply held, in the words of its refusal.
pub(super) fn too_many_values() -> String {
    format!("more than {MAX_VALUES} JSON values")
}

/// The JSON-RPC error that answers request `id` in place of a reply that held `what` —
/// over either transport, in the same words.
pub(super) fn refusal_frame(id: Value, what: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32603,
        "message": format!("the server's reply held {what}, more than the gateway accepts from a downstream server; it was dropped unread")}})
}

/// The error that answers, in the message's place, the request it was the reply to;
/// `None` for a message that answers nothing (a notification: dropping it is enough).
fn refusal(line: &[u8], what: &str) -> Option<Vec<u8>> {
    let id = id_of(line);
    if id == Value::Null {
        tracing::warn!("a downstream server sent a message of {what}; dropped unread");
        return None;
    }
    let mut bytes = refusal_frame(id, what).to_string().into_bytes();
    bytes.push(b'\n');
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_answers_the_request_under_its_id() {
        let line = br#"{"jsonrpc":"2.0","id":7,"result":{"structuredContent":[0,0"#;
        let frame: Value = serde_json::from_slice(&refusal(line, "x").unwrap()).unwrap();
        assert_eq!(frame["id"], 7);
        assert!(
            frame["error"]["message"]
                .as_str()
                .unwrap()
                .contains("dropped unread")
        );
        assert!(refusal(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#, "x").is_none());
    }
}
