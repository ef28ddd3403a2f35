//! The JSON-lines audit log: one object per line, keys sorted, redacted in one place
//! (`redact.rs`), written by its own thread so that a slow or full disk never blocks or
//! fails a tool call. The file is created 0600, opened append-only and never through a
//! symlink (a planted link cannot redirect the log). Never stdout.

use std::io::Write;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::redact::redact;

/// A record larger than this is replaced by a stub carrying its size and hash.
pub const MAX_RECORD_BYTES: usize = 100_000;
/// Records waiting for the writer; past this they are dropped (and that is reported)
/// rather than block a call.
const QUEUE: usize = 65_536;

enum Message {
    /// Redaction and serialization happen on the writer thread, off the caller's path.
    Record {
        event: String,
        ts: String,
        fields: Map<String, Value>,
    },
    Flush(SyncSender<()>),
}

/// Where the secret values to scrub come from: the guard sits below the module that holds
/// the key, so the composition root hands it this function.
pub type Secrets = fn() -> &'static [String];

pub struct AuditLog {
    tx: Sender<Message>,
    /// Records queued and not yet written: the queue is bounded by this count rather
    /// than by a preallocated buffer (which would cost megabytes of memory up front).
    pending: Arc<AtomicUsize>,
    dropped_reported: Mutex<bool>,
}

impl AuditLog {
    /// Opens `destination`: a file path, or `-` for stderr. `secrets` gives the values
    /// to scrub from every record, asked again per record (the key may change).
    pub fn open(destination: &str, secrets: Secrets) -> Result<AuditLog, String> {
        let mut sink: Box<dyn Write + Send> = if destination == "-" {
            Box::new(std::io::stderr())
        } else {
            let path = std::path::Path::new(destination);
            // Created 0600 and never written through a symbolic link (`files` says how).
            if crate::files::is_link(path) {
                return Err(format!(
                    "cannot open the audit log {destination}: it is a symbolic link"
                ));
            }
            let file = crate::files::open_private_append(path)
                .map_err(|e| format!("cannot open the audit log {destination}: {}", e.kind()))?;
            let loose = file
                .metadata()
                .ok()
                .and_then(|m| crate::files::loose_mode(&m.permissions()));
            if let Some(mode) = loose {
                tracing::warn!(
                    "the audit log {destination} is readable by other users (mode {mode:o}); chmod 600 it"
                );
            }
            Box::new(file)
        };
        let (tx, rx) = mpsc::channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let written = pending.clone();
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_loop(rx, &mut *sink, &written, secrets))
            .map_err(|_| "cannot start the audit log writer".to_owned())?;
        Ok(AuditLog {
            tx,
            pending,
            dropped_reported: Mutex::new(false),
        })
    }

    /// Queues one record; the writer thread redacts, serializes and writes it.
    pub fn record(&self, event: &str, fields: Map<String, Value>) {
        let message = Message::Record {
            event: event.to_owned(),
            ts: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            fields,
        };
        let queued =
            self.pending.fetch_add(1, Ordering::Relaxed) < QUEUE && self.tx.send(message).is_ok();
        if !queued {
            self.pending.fetch_sub(1, Ordering::Relaxed);
        }
        if !queued
            && let Ok(mut reported) = self.dropped_reported.lock()
            && !*reported
        {
            *reported = true;
            tracing::error!("the audit log is not keeping up; records are being dropped");
        }
    }

    /// Waits (bounded) until every record so far is written.
    pub fn flush(&self, timeout: Duration) {
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        if self.tx.send(Message::Flush(done_tx)).is_ok() {
            let _ = done_rx.recv_timeout(timeout);
        }
    }
}

fn write_loop(
    rx: Receiver<Message>,
    sink: &mut dyn Write,
    pending: &AtomicUsize,
    secrets: Secrets,
) {
    let mut failed = false;
    for message in rx {
        match message {
            Message::Record { event, ts, fields } => {
                pending.fetch_sub(1, Ordering::Relaxed);
                let mut line = render(&event, &ts, fields, secrets());
                line.push('\n');
                let result = sink.write_all(line.as_bytes()).and_then(|()| sink.flush());
                if let Err(e) = result
                    && !failed
                {
                    failed = true;
                    // Reported once: a full disk must not flood stderr or stop calls.
                    let _ = writeln!(
                        std::io::stderr(),
                        "perplexity-agent: writing the audit log failed ({}); records may be lost",
                        e.kind()
                    );
                }
            }
            Message::Flush(done) => {
                let _ = sink.flush();
                let _ = done.send(());
            }
        }
    }
}

/// One record as a line: redacted, `event` and `ts` set last (no caller-supplied field
/// can overwrite them), keys sorted, and a stub when it is too large.
fn render(event: &str, ts: &str, fields: Map<String, Value>, secrets: &[String]) -> String {
    let mut record = match redact(&Value::Object(fields), secrets) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    record.insert("event".into(), json!(event));
    record.insert("ts".into(), json!(ts));
    let line = sorted(&Value::Object(record)).to_string();
    if line.len() <= MAX_RECORD_BYTES {
        return line;
    }
    sorted(&json!({
        "_truncated": true,
        "original_size": line.len(),
        "sha256": sha256_hex(line.as_bytes()),
        "event": event,
        "ts": ts,
    }))
    .to_string()
}

/// A copy with every object's keys in sorted order.
pub fn sorted(value: &Value) -> Value {
    crate::text::sorted_json(value, &str::to_owned)
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorting_and_hashing() {
        let v = json!({"b": 1, "a": {"d": 2, "c": [ {"z": 1, "y": 2} ]}});
        assert_eq!(
            sorted(&v).to_string(),
            r#"{"a":{"c":[{"y":2,"z":1}],"d":2},"b":1}"#
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
