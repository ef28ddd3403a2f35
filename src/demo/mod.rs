//! A stand-in for the Perplexity API on loopback: the Agent API (create, get, cancel,
//! SSE streaming and resume), `/search` and `/v1/models`, answering in the shapes of the
//! official SDK (`perplexityai`), scripted by a scenario, with fault injection and request
//! recording. `perplexity-agent demo` serves it so anyone can try every command without a
//! key, from any install channel; the `fake-perplexity` crate wraps it for the tests and
//! benchmarks. Its full behavioural contract is `crates/fake-perplexity/README.md`.
//!
//! Nothing here is reachable unless a person starts it: it binds loopback only, holds no
//! key and makes no outbound connection. It imports nothing else of ours.

mod clock;
mod faults;
mod json_answer;
mod run;
mod scenario;
mod server;
mod strict;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use scenario::Scenario;
use server::Shared;

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
    let upstream = Upstream::new(&initial_scenario)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    upstream.serve(listener).await
}

/// A fake upstream's state, shared by its server and whoever scripts it (the tests'
/// in-process harness); cloning shares it.
#[derive(Clone)]
pub struct Upstream {
    shared: Arc<Shared>,
}

impl Upstream {
    pub fn new(scenario: &Value) -> Result<Upstream, String> {
        Ok(Upstream {
            shared: Shared::new(Scenario::from_json(scenario)?),
        })
    }

    /// Answers on `listener` until it fails (or the future is dropped).
    pub async fn serve(&self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        server::run_server(listener, self.shared.clone()).await
    }

    /// Replaces the whole scenario.
    pub fn set_scenario(&self, scenario: &Value) -> Result<(), String> {
        self.shared.set_scenario(Scenario::from_json(scenario)?);
        Ok(())
    }

    /// Appends a fault (or, given an array, several).
    pub fn push_fault(&self, fault: &Value) -> Result<(), String> {
        self.shared.push_faults(faults::parse_faults(fault)?);
        Ok(())
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
