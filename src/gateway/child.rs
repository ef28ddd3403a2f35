//! A downstream process as an MCP transport, with every message it writes measured before
//! rmcp decodes it.
//!
//! rmcp's own child transport hands each stdout line straight to serde, where a 16 MiB
//! line of `[0,0,…]` becomes ~640 MiB of values before anything can refuse it. Here a
//! task reads the child's stdout first: a line over [`MAX_MESSAGE`] bytes, or over
//! [`MAX_VALUES`] elements, never reaches the decoder — the request it answered gets a
//! JSON-RPC error under its own id instead (so the call ends at once, saying why), and
//! the connection goes on. The child runs in its own process group, so closing the
//! connection ends whatever it started too.
//!
//! Touches: child processes.

use std::future::Future;

use rmcp::RoleClient;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::dense::{MAX_VALUES, id_of, too_dense};

/// The largest message a downstream process may write: rmcp's own line cap, which a
/// 10,000-tool listing (11.8 MB, of which the gateway offers 1 MiB) fits in. The element
/// count is what bounds the memory a message costs; this bounds the bytes held to count.
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// How much of an oversized line is kept to find the id it answers.
const ID_PREFIX: usize = 64 * 1024;
/// How long a child is given to exit after its stdin closes, and again after SIGTERM.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// The child and the transport over its pipes.
pub struct Guarded {
    child: Child,
    transport: AsyncRwTransport<RoleClient, DuplexStream, ChildStdin>,
}

impl Guarded {
    /// Starts measuring `child`'s output; its stdin and stdout must be piped.
    pub fn new(mut child: Child) -> std::io::Result<Self> {
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the child's stdio is not piped"));
        };
        // Lines pass whole, so a buffer of any size keeps them intact; a small one keeps
        // a child that writes faster than we read waiting on its pipe, not our memory.
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        tokio::spawn(measure(stdout, ours));
        // Our cap decides first; rmcp's stays as a backstop.
        let transport = AsyncRwTransport::new(theirs, stdin).with_max_line_length(MAX_MESSAGE + 1);
        Ok(Guarded { child, transport })
    }

    /// Stdin closed first (a well-behaved server exits on EOF), then SIGTERM to the group,
    /// then SIGKILL.
    async fn shut_down(&mut self) -> std::io::Result<()> {
        let _ = self.transport.close().await;
        if self.exited_within(EXIT_GRACE).await {
            return Ok(());
        }
        self.signal_group(libc::SIGTERM);
        if self.exited_within(EXIT_GRACE).await {
            return Ok(());
        }
        self.signal_group(libc::SIGKILL);
        self.child.kill().await
    }

    async fn exited_within(&mut self, grace: std::time::Duration) -> bool {
        matches!(
            tokio::time::timeout(grace, self.child.wait()).await,
            Ok(Ok(_))
        )
    }

    fn signal_group(&self, signal: libc::c_int) {
        if let Some(pid) = self
            .child
            .id()
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
        {
            // SAFETY: killpg only sends a signal; the group is the child's own
            // (`process_group(0)` at spawn), so nothing of ours is signalled.
            unsafe {
                libc::killpg(pid, signal);
            }
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // A connection dropped without `close` still takes its processes with it.
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal_group(libc::SIGKILL);
        }
    }
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
        let read = match read_line(&mut reader, &mut line).await {
            Ok(read) => read,
            Err(_) => return,
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
