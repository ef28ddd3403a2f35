//! `notifications/progress` for one tool call, into whatever carries that call's frames
//! (the stdio writer, or the call's own SSE stream on HTTP).

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::protocol::notification;
use crate::perplexity::wait::ProgressSink;

/// Counts only, strictly increasing `progress`, never a `total`, never shaped.
pub struct ProgressNotifier {
    token: Value,
    outbox: mpsc::Sender<Value>,
    last: Mutex<Option<f64>>,
}

impl ProgressNotifier {
    pub fn sink(token: Value, outbox: mpsc::Sender<Value>) -> Arc<dyn ProgressSink> {
        Arc::new(ProgressNotifier {
            token,
            outbox,
            last: Mutex::new(None),
        })
    }
}

impl ProgressSink for ProgressNotifier {
    fn progress(&self, elapsed: f64, summary: &str) {
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let value = match *last {
            Some(prev) if elapsed <= prev => prev + 0.001,
            _ => elapsed,
        };
        *last = Some(value);
        let frame = notification(
            "notifications/progress",
            json!({"progressToken": self.token, "progress": value, "message": summary}),
        );
        // Best effort: a full outbox drops a progress update rather than stall the call.
        let _ = self.outbox.try_send(frame);
    }
}
