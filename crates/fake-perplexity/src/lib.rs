//! A scriptable, real-HTTP fake of the Perplexity API (Agent API create/get/cancel with
//! SSE streaming and resume, `/search`, `/v1/models`), speaking the shapes of the
//! official SDK (`perplexityai` 0.46.1) by default, with fault injection and request
//! recording, for `perplexity-agent`'s black-box tests and benchmarks. See README.md for
//! the full behavioural contract.
//!
//! This file holds the public API: [`FakePerplexity`] (an in-process server on its own
//! thread and runtime), the recorded types, and [`serve`] (used by the binary).

mod clock;
mod faults;
mod json_answer;
mod run;
mod scenario;
mod server;
mod strict;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::scenario::Scenario;
use crate::server::Shared;

/// One API request as the fake received it (control endpoints are not recorded).
#[derive(Debug, Clone, Serialize)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// The raw query string, without `?`.
    pub query: Option<String>,
    /// Lowercased header names; repeated headers joined with `", "`.
    pub headers: BTreeMap<String, String>,
    /// The body, as (lossy) UTF-8.
    pub body: String,
    /// The body parsed as JSON, when it is JSON.
    pub body_json: Option<Value>,
    /// Unix wall-clock milliseconds at which the request arrived.
    pub at_ms: u64,
}

/// One run, as listed by `GET /_control/runs`.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub id: String,
    /// The timeline's status now (`status_sequence` does not apply here).
    pub status: Value,
    pub created_at_ms: u64,
    /// Unix ms at which the terminal state took effect; `None` before.
    pub terminal_at_ms: Option<u64>,
    /// 0, or the round of the run named by the create's `previous_response_id` plus one
    /// (function calls are asked for in rounds below `function_call_rounds`).
    pub round: u64,
}

/// Checks a scenario without starting anything; the error says what is wrong.
pub fn validate_scenario(scenario: &Value) -> Result<(), String> {
    Scenario::from_json(scenario).map(|_| ())
}

/// Serves the fake on `listener` with `initial_scenario` until the listener fails (or
/// the future is dropped). An invalid scenario is an `InvalidInput` error.
pub async fn serve(
    listener: tokio::net::TcpListener,
    initial_scenario: Value,
) -> std::io::Result<()> {
    let scenario = Scenario::from_json(&initial_scenario)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    server::run_server(listener, Shared::new(scenario)).await
}

/// An in-process fake server on `127.0.0.1:<ephemeral>`, running on its own thread with
/// its own tokio runtime. Dropping it stops the server and joins the thread.
pub struct FakePerplexity {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakePerplexity {
    /// Starts the server with the default scenario; returns once it is listening.
    pub fn start() -> FakePerplexity {
        FakePerplexity::start_with(Value::Null)
    }

    /// Starts the server with `scenario`; panics if the scenario is invalid.
    pub fn start_with(scenario: Value) -> FakePerplexity {
        let scenario = Scenario::from_json(&scenario)
            .unwrap_or_else(|e| panic!("fake-perplexity: invalid scenario: {e}"));
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("fake-perplexity: cannot bind 127.0.0.1:0");
        std_listener
            .set_nonblocking(true)
            .expect("fake-perplexity: cannot make the listener non-blocking");
        let addr = std_listener
            .local_addr()
            .expect("fake-perplexity: no local address");
        let shared = Shared::new(scenario);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fake-perplexity-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake-perplexity: cannot build a tokio runtime");
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            eprintln!("fake-perplexity: listener error: {e}");
                            return;
                        }
                    };
                    tokio::select! {
                        res = server::run_server(listener, server_shared) => {
                            if let Err(e) = res {
                                eprintln!("fake-perplexity: server error: {e}");
                            }
                        }
                        _ = rx => {}
                    }
                });
                // Drops every connection task (live streams included).
                rt.shutdown_timeout(Duration::from_secs(1));
            })
            .expect("fake-perplexity: cannot spawn the server thread");
        FakePerplexity {
            addr,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replaces the whole scenario; panics if it is invalid.
    pub fn set_scenario(&self, scenario: Value) {
        let s = Scenario::from_json(&scenario)
            .unwrap_or_else(|e| panic!("fake-perplexity: invalid scenario: {e}"));
        self.shared.set_scenario(s);
    }

    /// Appends a fault (or, given an array, several); panics if one is invalid.
    pub fn push_fault(&self, fault: Value) {
        let f = faults::parse_faults(&fault)
            .unwrap_or_else(|e| panic!("fake-perplexity: invalid fault: {e}"));
        self.shared.push_faults(f);
    }

    /// The recorded API requests, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests()
    }

    pub fn clear_requests(&self) {
        self.shared.clear_requests();
    }

    /// Every run, in creation order.
    pub fn runs(&self) -> Vec<RunInfo> {
        self.shared.runs()
    }

    /// Scenario back to the defaults; faults, requests and runs emptied.
    pub fn reset(&self) {
        self.shared.reset();
    }
}

impl Drop for FakePerplexity {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
