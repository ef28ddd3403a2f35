//! Reading a run's server-sent events, under the same byte cap as any other response
//! (cumulative over the whole stream) and an idle timeout.

use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use reqwest::Response;
use serde_json::Value;
use sse_stream::{Sse, SseStream};

use super::error::{ApiError, network_kind};
use super::key::Scrubber;

/// One event of a run's stream: `{"type": …, "sequence_number": n, …}`.
#[derive(Debug, Clone)]
pub struct AgentEvent {
    pub kind: String,
    pub sequence: Option<u64>,
    pub data: Value,
}

#[derive(Debug)]
pub enum StreamItem {
    Event(AgentEvent),
    /// The server closed the stream (or sent `[DONE]`).
    End,
    /// The connection failed or went quiet; the run may well be alive. Resume or poll.
    Broken,
    /// The cumulative cap was passed: fatal for the call, never retried.
    TooLarge(u64),
}

#[derive(Debug)]
enum ChunkError {
    Network(ApiError),
    TooLarge(u64),
}

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChunkError::Network(e) => write!(f, "{e}"),
            ChunkError::TooLarge(limit) => write!(f, "stream exceeded {limit} bytes"),
        }
    }
}

impl std::error::Error for ChunkError {}

type Events = Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>;

pub struct EventStream {
    events: Events,
    cap: u64,
    scrubber: Scrubber,
}

impl EventStream {
    pub(crate) fn new(response: Response, cap: u64, scrubber: Scrubber) -> Self {
        struct State {
            response: Response,
            read: u64,
            cap: u64,
            done: bool,
        }
        let bytes = futures_util::stream::unfold(
            State {
                response,
                read: 0,
                cap,
                done: false,
            },
            |mut state| async move {
                if state.done {
                    return None;
                }
                match state.response.chunk().await {
                    Ok(Some(chunk)) => {
                        state.read += chunk.len() as u64;
                        if state.read > state.cap {
                            state.done = true;
                            let cap = state.cap;
                            return Some((Err(ChunkError::TooLarge(cap)), state));
                        }
                        Some((Ok(chunk), state))
                    }
                    Ok(None) => None,
                    Err(e) => {
                        state.done = true;
                        Some((Err(ChunkError::Network(network_kind(e))), state))
                    }
                }
            },
        );
        EventStream {
            events: Box::pin(SseStream::from_bytes_stream(bytes)),
            cap,
            scrubber,
        }
    }

    /// The next event, skipping comments and malformed chunks. Cancel-safe.
    pub async fn next(&mut self) -> StreamItem {
        loop {
            let sse = match self.events.next().await {
                None => return StreamItem::End,
                Some(Ok(sse)) => sse,
                Some(Err(sse_stream::Error::Body(e))) => {
                    return match e.downcast_ref::<ChunkError>() {
                        Some(ChunkError::TooLarge(_)) => StreamItem::TooLarge(self.cap),
                        _ => StreamItem::Broken,
                    };
                }
                // A malformed line: ignore it, keep reading (the cap still bounds us).
                Some(Err(_)) => continue,
            };
            let Some(data) = sse.data.map(|d| self.scrubber.text(d)) else {
                continue;
            };
            if data.trim() == "[DONE]" {
                return StreamItem::End;
            }
            let Ok(mut value @ Value::Object(_)) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            self.scrubber.value(&mut value);
            let kind = value
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or(sse.event)
                .unwrap_or_default();
            let sequence = value.get("sequence_number").and_then(Value::as_u64);
            return StreamItem::Event(AgentEvent {
                kind,
                sequence,
                data: value,
            });
        }
    }
}
