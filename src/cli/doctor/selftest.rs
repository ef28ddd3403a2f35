//! doctor's protocol self-test: this very binary started as `serve` and taken through
//! both eras' handshakes, as an MCP client would (a client speaks one era per
//! connection, so each era gets its own process).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Check;
use crate::mcp::protocol::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, MODERN_VERSION};

/// How long each handshake may take, start-up included.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const LEGACY_VERSION: &str = "2025-11-25";

/// Both eras against this very binary, each in its own `serve` process (a client
/// speaks one era per connection).
pub(super) async fn self_test() -> Vec<Check> {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            return vec![
                Check::fail(
                    "Protocol",
                    format!("cannot find this binary to start it ({})", e.kind()),
                )
                .fix("run doctor from the installed binary's absolute path"),
            ];
        }
    };
    let run = tokio::task::spawn_blocking(move || vec![legacy(&exe), modern(&exe)]).await;
    run.unwrap_or_else(|_| {
        vec![Check::fail(
            "Protocol",
            "the self-test stopped unexpectedly",
        )]
    })
}

fn legacy(exe: &Path) -> Check {
    let name = format!("Protocol {LEGACY_VERSION}");
    let outcome = Session::start(exe).and_then(|mut s| {
        let init = s.ask(
            1,
            "initialize",
            json!({"protocolVersion": LEGACY_VERSION, "capabilities": {},
                   "clientInfo": {"name": "doctor", "version": "1"}}),
        )?;
        if init["protocolVersion"] != LEGACY_VERSION {
            return Err(format!(
                "initialize negotiated {} instead of {LEGACY_VERSION}",
                init["protocolVersion"]
            ));
        }
        s.notify("notifications/initialized")?;
        tool_count(&s.ask(2, "tools/list", json!({}))?)
    });
    handshake_check(
        name,
        outcome,
        "initialize, notifications/initialized, tools/list",
    )
}

fn modern(exe: &Path) -> Check {
    let name = format!("Protocol {MODERN_VERSION}");
    let meta = json!({
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_CAPABILITIES: {},
        "io.modelcontextprotocol/clientInfo": {"name": "doctor", "version": "1"},
    });
    let outcome = Session::start(exe).and_then(|mut s| {
        let discovered = s.ask(1, "server/discover", json!({"_meta": meta}))?;
        let supported = discovered["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v == MODERN_VERSION));
        if !supported {
            return Err(format!(
                "server/discover does not list {MODERN_VERSION} among the supported versions"
            ));
        }
        tool_count(&s.ask(2, "tools/list", json!({"_meta": meta}))?)
    });
    handshake_check(name, outcome, "server/discover, tools/list")
}

fn tool_count(result: &Value) -> Result<usize, String> {
    match result["tools"].as_array() {
        Some(tools) if !tools.is_empty() => Ok(tools.len()),
        _ => Err("tools/list returned no tools".to_owned()),
    }
}

fn handshake_check(name: String, outcome: Result<usize, String>, steps: &str) -> Check {
    match outcome {
        Ok(tools) => Check::ok(
            name,
            format!("{steps}: answered, {tools} tools offered"),
        ),
        Err(e) => Check::fail(name, e).fix(
            "run `PERPLEXITY_LOG=debug perplexity-agent serve` to see why; reinstall the binary if it is damaged",
        ),
    }
}

/// This binary as `serve` on stdio, with our environment. The gateway is off for the
/// test: downstream servers are checked above, and connecting to them could outlast
/// the deadline.
struct Session {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    deadline: Instant,
}

impl Session {
    fn start(exe: &Path) -> Result<Session, String> {
        // Sanctioned: doctor's self-check runs this very binary's stdio server.
        #[allow(clippy::disallowed_methods)]
        let mut child = std::process::Command::new(exe)
            .arg("serve")
            .env("PERPLEXITY_GATEWAY", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{} could not be started ({})", exe.display(), e.kind()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the server's pipes could not be opened".to_owned());
        };
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // The last line the server wrote on stderr: the reason, if it stops.
        let last = Arc::new(Mutex::new(String::new()));
        let sink = last.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !line.trim().is_empty()
                    && let Ok(mut last) = sink.lock()
                {
                    *last = line;
                }
            }
        });
        Ok(Session {
            child,
            stdin,
            lines,
            stderr: last,
            deadline: Instant::now() + HANDSHAKE_TIMEOUT,
        })
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        writeln!(self.stdin, "{message}")
            .and_then(|()| self.stdin.flush())
            .map_err(|_| self.gone("accepting a request"))
    }

    fn notify(&mut self, method: &str) -> Result<(), String> {
        self.send(&json!({"jsonrpc": "2.0", "method": method}))
    }

    /// Sends a request; the `result` of its answer (notifications in between skipped).
    fn ask(&mut self, id: u64, method: &str, params: Value) -> Result<Value, String> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "no answer to {method} within {} s",
                        HANDSHAKE_TIMEOUT.as_secs()
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.gone(&format!("answering {method}")));
                }
            };
            let frame: Value = serde_json::from_str(&line).map_err(|_| {
                format!("the server wrote a line that is not JSON before answering {method}")
            })?;
            if frame.get("method").is_some() || frame["id"] != json!(id) {
                continue;
            }
            if let Some(error) = frame.get("error") {
                return Err(format!(
                    "{method} was answered with an error: {}",
                    error["message"].as_str().unwrap_or("(no message)")
                ));
            }
            return frame
                .get("result")
                .cloned()
                .ok_or_else(|| format!("the answer to {method} has no result"));
        }
    }

    /// The server went away: how, with its last words.
    fn gone(&mut self, doing: &str) -> String {
        // Let it finish exiting (and its stderr reader catch up) before reporting.
        std::thread::sleep(Duration::from_millis(100));
        let code = match self.child.try_wait() {
            Ok(Some(status)) => format!(" ({status})"),
            _ => String::new(),
        };
        let said = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        let said = if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        };
        format!("the server exited instead of {doing}{code}{said}")
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::doctor::Status;

    #[cfg(unix)]
    #[test]
    fn a_server_that_exits_fails_the_handshake_with_a_reason() {
        for check in [
            legacy(Path::new("/bin/true")),
            modern(Path::new("/bin/true")),
        ] {
            assert_eq!(check.status, Status::Fail);
            assert!(
                check.detail.starts_with("the server exited"),
                "{}",
                check.detail
            );
        }
        let missing = legacy(Path::new("/nonexistent/perplexity-agent"));
        assert!(
            missing.detail.contains("could not be started"),
            "{}",
            missing.detail
        );
    }
}
