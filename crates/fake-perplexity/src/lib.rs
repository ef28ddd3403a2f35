//! A scriptable, real-HTTP fake of the Perplexity API for `perplexity-agent`'s black-box
//! tests and benchmarks. The fake itself lives in the product (`perplexity_agent::demo`,
//! which `perplexity-agent demo` serves to people trying it without a key); this crate
//! adds the tests' in-process harness, [`FakePerplexity`], and the `fake-perplexity`
//! binary. See README.md for the full behavioural contract.

use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

pub use perplexity_agent::demo::{RecordedRequest, RunInfo, Upstream, serve, validate_scenario};

/// An in-process fake server on `127.0.0.1:<ephemeral>`, running on its own thread with
/// its own tokio runtime. Dropping it stops the server and joins the thread.
pub struct FakePerplexity {
    addr: SocketAddr,
    upstream: Upstream,
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
        let upstream = Upstream::new(&scenario)
            .unwrap_or_else(|e| panic!("fake-perplexity: invalid scenario: {e}"));
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("fake-perplexity: cannot bind 127.0.0.1:0");
        std_listener
            .set_nonblocking(true)
            .expect("fake-perplexity: cannot make the listener non-blocking");
        let addr = std_listener
            .local_addr()
            .expect("fake-perplexity: no local address");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = upstream.clone();
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
                        res = server.serve(listener) => {
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
            upstream,
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
        self.upstream
            .set_scenario(&scenario)
            .unwrap_or_else(|e| panic!("fake-perplexity: invalid scenario: {e}"));
    }

    /// Appends a fault (or, given an array, several); panics if one is invalid.
    pub fn push_fault(&self, fault: Value) {
        self.upstream
            .push_fault(&fault)
            .unwrap_or_else(|e| panic!("fake-perplexity: invalid fault: {e}"));
    }

    /// The recorded API requests, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.upstream.requests()
    }

    pub fn clear_requests(&self) {
        self.upstream.clear_requests();
    }

    /// Every run, in creation order.
    pub fn runs(&self) -> Vec<RunInfo> {
        self.upstream.runs()
    }

    /// Scenario back to the defaults; faults, requests and runs emptied.
    pub fn reset(&self) {
        self.upstream.reset();
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
