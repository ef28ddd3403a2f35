//! The stdio transport: newline-delimited JSON on stdin/stdout. Requests run
//! concurrently in their own tasks; a single writer thread writes every reply as one
//! whole line (prefixed by the invalid frames with `--invalid-frames`) and flushes it.

use std::io::Write;
use std::sync::Arc;
use std::sync::mpsc;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::protocol::{Incoming, Server, classify};

/// What `--invalid-frames` writes before every reply.
pub const INVALID_FRAMES: &str = "this is not json\n[1,2,3]\n";

/// A reply to write (`None`: a marker, to learn that everything before it is written),
/// and an acknowledgement sent once it is written and flushed.
type OutMsg = (Option<Value>, Option<oneshot::Sender<()>>);

#[derive(Clone)]
struct Out(mpsc::Sender<OutMsg>);

impl Out {
    fn spawn(invalid_frames: bool) -> Out {
        let (tx, rx) = mpsc::channel::<OutMsg>();
        std::thread::spawn(move || {
            let stdout = std::io::stdout();
            let mut stdout = stdout.lock();
            for (msg, ack) in rx {
                let Some(msg) = msg else {
                    if let Some(ack) = ack {
                        let _ = ack.send(());
                    }
                    continue;
                };
                let mut buf = String::new();
                if invalid_frames {
                    buf.push_str(INVALID_FRAMES);
                }
                buf.push_str(&msg.to_string());
                buf.push('\n');
                if stdout
                    .write_all(buf.as_bytes())
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    // The client is gone.
                    std::process::exit(0);
                }
                if let Some(ack) = ack {
                    let _ = ack.send(());
                }
            }
        });
        Out(tx)
    }

    fn send(&self, msg: Value) {
        let _ = self.0.send((Some(msg), None));
    }

    /// Sends `msg` (if any) and waits until it and every earlier reply are written and
    /// flushed.
    async fn send_and_wait(&self, msg: Option<Value>) {
        let (tx, rx) = oneshot::channel();
        if self.0.send((msg, Some(tx))).is_ok() {
            let _ = rx.await;
        }
    }
}

/// Serves MCP on stdin/stdout. At end of input, waits for the requests still running
/// (their replies are written), then exits the process with status 0 (with
/// `--ignore-eof`, only after [`crate::LINGER`]).
pub async fn run(server: Arc<Server>) -> ! {
    let out = Out::spawn(server.cfg.invalid_frames);
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut buf = Vec::new();
    let mut tasks = JoinSet::new();
    loop {
        buf.clear();
        while tasks.try_join_next().is_some() {}
        match stdin.read_until(b'\n', &mut buf).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("fake-downstream: reading stdin: {e}");
                break;
            }
        }
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        match classify(line) {
            Incoming::Invalid(err) => out.send(err),
            Incoming::Response => {}
            Incoming::Notification { method, params } => {
                server.handle_notification("", &method, params.as_ref());
            }
            Incoming::Request { id, method, params } => {
                let ticket = server.begin("", &id, &method, params.as_ref());
                let (token, ordinal) = (ticket.token, ticket.ordinal);
                let (srv, out) = (Arc::clone(&server), out.clone());
                let task = tasks.spawn(async move {
                    let reply = srv.handle_request(ordinal, id, &method, params).await;
                    // Finish the accounting before the client can see the reply.
                    drop(ticket);
                    if reply.exit_after {
                        out.send_and_wait(Some(reply.msg)).await;
                        std::process::exit(0);
                    }
                    out.send(reply.msg);
                });
                server.set_abort(token, task);
            }
        }
    }
    // Cancelled tasks end as aborted; the others once their reply is queued.
    while tasks.join_next().await.is_some() {}
    out.send_and_wait(None).await;
    if server.cfg.ignore_eof {
        tokio::time::sleep(crate::LINGER).await;
    }
    std::process::exit(0)
}
