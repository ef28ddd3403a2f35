//! Test harness: the real binary as a subprocess (stdio lines in → lines out), the fake
//! upstream on a loopback port, and the official MCP JSON schemas.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use fake_perplexity::FakePerplexity;

pub const BIN: &str = env!("CARGO_BIN_EXE_perplexity-agent");
pub const V_MODERN: &str = "2026-07-28";
pub const V_LEGACY: &str = "2025-11-25";
/// A recognisable key: tests scan every output for it.
pub const KEY: &str = "pplx-TESTKEY-7f3a9c1e5b2d4086";

/// A base environment: nothing inherited but PATH, a planted key, the fake upstream.
pub fn env_for(fake: &FakePerplexity) -> Vec<(String, String)> {
    vec![
        ("PERPLEXITY_API_KEY".into(), KEY.into()),
        ("PERPLEXITY_API_BASE".into(), fake.base_url()),
        // Rate limiting has its own tests (guard.rs); the others make many calls.
        ("PERPLEXITY_RATE_BURST".into(), "100000".into()),
        ("PERPLEXITY_RATE_PER_MINUTE".into(), "1000000".into()),
        // Every tool: the suites test them all; the default profile has its own tests.
        ("PERPLEXITY_TOOLS".into(), "all".into()),
        // The research cache has its own tests (cache.rs); the others ask one question
        // again and again and mean a new run each time.
        ("PERPLEXITY_CACHE".into(), "off".into()),
    ]
}

/// [`env_for`] with a store of its own in `dir`.
pub fn env_with_store(fake: &FakePerplexity, dir: &Scratch) -> Vec<(String, String)> {
    let mut env = env_for(fake);
    env.push((
        "PERPLEXITY_STORE_PATH".into(),
        dir.path("store.sqlite").display().to_string(),
    ));
    env
}

/// [`env_with_store`] serving the named clients of `clients`, written to
/// `dir/clients.toml` (returned, for a test that rewrites it).
pub fn env_with_clients(
    fake: &FakePerplexity,
    dir: &Scratch,
    clients: &str,
) -> (std::path::PathBuf, Vec<(String, String)>) {
    let file = dir.path("clients.toml");
    std::fs::write(&file, clients).unwrap();
    let mut env = env_with_store(fake, dir);
    env.push((
        "PERPLEXITY_HTTP_CLIENTS_FILE".into(),
        file.display().to_string(),
    ));
    (file, env)
}

pub struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    /// Every stdout line seen, for leak scans.
    pub seen: Vec<String>,
    /// Frames received while waiting for something else.
    pending: Vec<Value>,
    /// Era and method of each request sent, by id, so every reply is schema-checked.
    sent: HashMap<String, (Era, String)>,
}

impl Server {
    pub fn start(env: &[(String, String)]) -> Server {
        Self::start_with_args(&[], env)
    }

    pub fn start_with_args(args: &[&str], env: &[(String, String)]) -> Server {
        let mut child = spawn_piped(args, env);
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut err_pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            lines,
            stderr,
            stderr_reader: Some(stderr_reader),
            seen: Vec::new(),
            pending: Vec::new(),
            sent: HashMap::new(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, message: &Value) {
        if let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) {
            self.sent
                .insert(id.to_string(), (era_of(method, message), method.to_owned()));
        }
        let mut line = message.to_string();
        line.push('\n');
        self.send_raw(line.as_bytes());
    }

    /// The next stdout line as JSON (every stdout line must be one JSON object).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Value> {
        if !self.pending.is_empty() {
            return Some(self.pending.remove(0));
        }
        match self.lines.recv_timeout(timeout) {
            Ok(line) => {
                self.seen.push(line.clone());
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:.200}"));
                assert!(
                    value.is_object(),
                    "stdout frame is not an object: {line:.200}"
                );
                self.check_schema(&value);
                Some(value)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Every frame against the official schema of its era: replies by the request
    /// they answer, notifications against both (they are never shaped).
    fn check_schema(&self, frame: &Value) {
        if frame.get("method").is_some() {
            assert_frame(Era::Legacy, "", frame);
            assert_frame(Era::Modern, "", frame);
            return;
        }
        let id = &frame["id"];
        if !(id.is_string() || id.is_i64() || id.is_u64()) {
            // The MCP schemas type ids as string or integer; JSON-RPC echoes any id
            // (null for parse errors). Check the JSON-RPC rule for those.
            let obj = frame.as_object().unwrap();
            assert!(obj.contains_key("id"), "{frame}");
            assert!(
                obj.contains_key("result") ^ obj.contains_key("error"),
                "{frame}"
            );
            return;
        }
        match self.sent.get(&id.to_string()) {
            Some((era, method)) => assert_frame(*era, method, frame),
            None => assert_frame(Era::Legacy, "", frame),
        }
    }

    pub fn recv(&mut self) -> Value {
        self.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("no frame within 30s; stderr:\n{}", self.stderr()))
    }

    /// Frames until the response with `id`; the others (notifications, other replies)
    /// are returned alongside, in order.
    pub fn recv_response(&mut self, id: &Value) -> (Value, Vec<Value>) {
        let mut others = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self
                .recv_timeout(left)
                .unwrap_or_else(|| panic!("no response for id {id}; stderr:\n{}", self.stderr()));
            if frame.get("id") == Some(id) && frame.get("method").is_none() {
                return (frame, others);
            }
            others.push(frame);
        }
    }

    /// Sends a request and returns its response (notifications before it are dropped).
    pub fn request(&mut self, message: &Value) -> Value {
        self.send(message);
        self.recv_response(&message["id"]).0
    }

    /// Asserts that nothing arrives within `wait`.
    pub fn expect_silence(&mut self, wait: Duration) {
        if let Some(frame) = self.recv_timeout(wait) {
            panic!("expected no frame, got {frame}");
        }
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // The pipe closes with the process: collect all of stderr.
                if let Some(reader) = self.stderr_reader.take() {
                    let _ = reader.join();
                }
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "server did not exit within {timeout:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Drains whatever is left on stdout (after exit) into `seen`.
    pub fn drain(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(v) = self.recv_timeout(Duration::from_millis(200)) {
            out.push(v);
        }
        out
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The stdio era rules, as a client sees them.
fn era_of(method: &str, message: &Value) -> Era {
    let modern_meta = message["params"]["_meta"]
        .as_object()
        .is_some_and(|m| m.contains_key("io.modelcontextprotocol/protocolVersion"));
    match method {
        "initialize" => Era::Legacy,
        "server/discover" => Era::Modern,
        _ if modern_meta => Era::Modern,
        _ => Era::Legacy,
    }
}

pub fn request(id: impl Into<Value>, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
}

pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V_MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
    })
}

/// A `tools/call` request in the legacy era.
pub fn call(id: impl Into<Value>, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// A `tools/call` with a progress token (legacy era).
pub fn call_with_progress(
    id: impl Into<Value>,
    tool: &str,
    arguments: Value,
    token: Value,
) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": token}}),
    )
}

pub fn modern_call(id: impl Into<Value>, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": modern_meta()}),
    )
}

/// The single text block of a tool result, and its `isError`.
pub fn tool_text(response: &Value) -> (String, bool) {
    let result = &response["result"];
    let content = result["content"].as_array().expect("content array");
    assert_eq!(content.len(), 1, "exactly one content block: {response}");
    assert_eq!(content[0]["type"], "text");
    let is_error = result["isError"].as_bool().expect("isError present");
    (content[0]["text"].as_str().unwrap().to_owned(), is_error)
}

/// The body inside a spotlight wrapper, checking the wrapper on the way.
/// The content inside a result's spotlight wrapper (after the injection notice line, when
/// the result has one).
pub fn unwrap_spotlight(text: &str) -> String {
    let text = match text.split_once('\n') {
        Some((first, rest)) if first.starts_with("Possible prompt injection in ") => rest,
        _ => text,
    };
    // What the call cost follows the wrapper, on a line of its own.
    let text = match text.rsplit_once("\n\nCost: ") {
        Some((wrapped, cost)) if !cost.contains('\n') => wrapped,
        _ => text,
    };
    // So does the line naming citations that point at no source.
    let text = match text.rsplit_once("\n\nUnresolved citation") {
        Some((wrapped, note)) if !note.contains('\n') => wrapped,
        _ => text,
    };
    let first = text.lines().next().unwrap();
    let nonce = first
        .strip_prefix("<untrusted-web-content-")
        .and_then(|s| s.strip_suffix('>'))
        .unwrap_or_else(|| panic!("not spotlighted: {text:.300}"));
    assert_eq!(nonce.len(), 16);
    assert!(
        nonce
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    );
    let close = format!("\n</untrusted-web-content-{nonce}>");
    assert!(text.ends_with(&close), "closing tag, no trailing newline");
    let inner = &text[first.len() + 1..text.len() - close.len()];
    let mut parts = inner.splitn(4, '\n');
    let l1 = parts.next().unwrap();
    let l2 = parts.next().unwrap();
    assert!(
        l1.contains("retrieved from the public web by Perplexity"),
        "{l1}"
    );
    assert!(l2.contains("UNTRUSTED DATA"), "{l2}");
    assert_eq!(parts.next(), Some(""), "blank line after the preamble");
    parts.next().unwrap_or_default().to_owned()
}

pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---- schema validation ----------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    Legacy,
    Modern,
}

fn schema_doc(era: Era) -> &'static Value {
    static LEGACY: OnceLock<Value> = OnceLock::new();
    static MODERN: OnceLock<Value> = OnceLock::new();
    let (cell, text) = match era {
        Era::Legacy => (&LEGACY, include_str!("../mcp-schema/2025-11-25.json")),
        Era::Modern => (&MODERN, include_str!("../mcp-schema/2026-07-28.json")),
    };
    cell.get_or_init(|| serde_json::from_str(text).unwrap())
}

type ValidatorCache = Mutex<HashMap<(Era, String), Arc<jsonschema::Validator>>>;

fn validator(era: Era, def: &str) -> Arc<jsonschema::Validator> {
    static CACHE: OnceLock<ValidatorCache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap();
    cache
        .entry((era, def.to_owned()))
        .or_insert_with(|| {
            let mut doc = schema_doc(era).clone();
            assert!(
                doc["$defs"].get(def).is_some(),
                "no {def} in the {era:?} schema"
            );
            doc["$ref"] = json!(format!("#/$defs/{def}"));
            Arc::new(jsonschema::validator_for(&doc).expect("schema compiles"))
        })
        .clone()
}

pub fn assert_valid(era: Era, def: &str, instance: &Value) {
    let v = validator(era, def);
    let errors: Vec<String> = v.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{instance:.600} is not a valid {def} ({era:?}): {errors:?}"
    );
}

/// Validates `instance` against a definition of the tasks extension's schema.
pub fn assert_tasks_valid(def: &str, instance: &Value) {
    static DOC: OnceLock<Value> = OnceLock::new();
    let doc = DOC.get_or_init(|| {
        serde_json::from_str(include_str!("../mcp-schema/ext-tasks-draft.json")).unwrap()
    });
    let mut doc = doc.clone();
    assert!(
        doc["$defs"].get(def).is_some(),
        "no {def} in the tasks schema"
    );
    doc["$ref"] = json!(format!("#/$defs/{def}"));
    let v = jsonschema::validator_for(&doc).expect("schema compiles");
    let errors: Vec<String> = v.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{instance:.600} is not a valid {def}: {errors:?}"
    );
}

/// Checks one server frame against the official schema of its era. `method` is the
/// request it answers (for results). `id: null` error frames are checked against the
/// JSON-RPC rule instead (the MCP schemas type ids as string or integer).
pub fn assert_frame(era: Era, method: &str, frame: &Value) {
    assert_eq!(frame["jsonrpc"], "2.0");
    if let Some(error) = frame.get("error") {
        assert!(
            error["code"].is_i64() && error["message"].is_string(),
            "{frame}"
        );
        if error.get("data").is_some() {
            assert!(!error["data"].is_null(), "never data: null");
        }
        if frame["id"].is_null() {
            assert!(frame.as_object().unwrap().contains_key("id"));
            return;
        }
        assert_valid(era, "JSONRPCErrorResponse", frame);
        return;
    }
    if frame.get("method").is_some() {
        assert_valid(era, "JSONRPCNotification", frame);
        if frame["method"] == "notifications/progress" {
            assert_valid(era, "ProgressNotification", frame);
        }
        return;
    }
    assert_valid(era, "JSONRPCResultResponse", frame);
    // A call answered as a task, and the task methods: the extension's schema in
    // 2026-07-28, the core's in 2025-11-25.
    if method == "tools/call" && frame["result"]["resultType"] == "task" {
        return assert_tasks_valid("CreateTaskResult", &frame["result"]);
    }
    if method == "tools/call" && era == Era::Legacy && frame["result"].get("task").is_some() {
        return assert_valid(era, "CreateTaskResult", &frame["result"]);
    }
    let tasks_def = match method {
        "tasks/get" => Some("GetTaskResult"),
        "tasks/cancel" => Some("CancelTaskResult"),
        "tasks/list" => Some("ListTasksResult"),
        "tasks/result" => Some("GetTaskPayloadResult"),
        _ => None,
    };
    if let Some(def) = tasks_def {
        return match era {
            Era::Modern => assert_tasks_valid(def, &frame["result"]),
            Era::Legacy => assert_valid(era, def, &frame["result"]),
        };
    }
    let def = match (method, era) {
        ("initialize", _) => "InitializeResult",
        ("tools/list", _) => "ListToolsResult",
        ("tools/call", _) => "CallToolResult",
        ("server/discover", _) => "DiscoverResult",
        ("ping", _) | ("logging/setLevel", _) => "EmptyResult",
        ("resources/list", _) => "ListResourcesResult",
        ("resources/templates/list", _) => "ListResourceTemplatesResult",
        ("resources/read", _) => "ReadResourceResult",
        ("prompts/list", _) => "ListPromptsResult",
        ("prompts/get", _) => "GetPromptResult",
        ("completion/complete", _) => "CompleteResult",
        _ => return,
    };
    assert_valid(era, def, &frame["result"]);
}

/// Every frame a legacy/modern exchange produced must validate.
pub fn assert_all(era: Era, method: &str, frames: &[Value]) {
    for f in frames {
        assert_frame(era, method, f);
    }
}

/// A scratch directory under the system temp dir, removed on drop.
pub struct Scratch(pub std::path::PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("pa-e2e-{name}-{}-{nanos}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `structuredContent` of a tool result.
/// The names of a `tools/list` response's tools, in order.
pub fn tool_names(list: &Value) -> Vec<&str> {
    list["result"]["tools"]
        .as_array()
        .expect("a tools/list result")
        .iter()
        .map(|t| t["name"].as_str().expect("a tool name"))
        .collect()
}

pub fn structured(response: &Value) -> &Value {
    &response["result"]["structuredContent"]
}

/// The bodies of the Agent API creates the fake upstream received, oldest first.
pub fn agent_creates(fake: &FakePerplexity) -> Vec<Value> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/agent")
        .filter_map(|r| r.body_json)
        .collect()
}

/// Runs the binary as a CLI command with nothing inherited but PATH: (stdout, stderr,
/// exit code). The planted key never appears in either stream, whatever the command.
pub fn run_cli(args: &[&str], env: &[(String, String)]) -> (String, String, i32) {
    let o = binary(args, env)
        .stdin(Stdio::null())
        .output()
        .expect("run perplexity-agent");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(
        !stdout.contains(KEY) && !stderr.contains(KEY),
        "key printed: {stdout}{stderr}"
    );
    (stdout, stderr, o.status.code().unwrap_or(-1))
}

/// The binary with `args`, nothing inherited but PATH, and `env`.
pub fn binary(args: &[&str], env: &[(String, String)]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k, v)));
    cmd
}

/// [`binary`] started with stdin, stdout and stderr piped to the test.
pub fn spawn_piped(args: &[&str], env: &[(String, String)]) -> Child {
    binary(args, env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn perplexity-agent")
}

/// The binary fed `input` on stdin and then EOF, as `printf … | perplexity-agent` does;
/// its output once it has exited.
pub fn fed(args: &[&str], env: &[(String, String)], input: &str) -> std::process::Output {
    let mut child = spawn_piped(args, env);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Sends `signal` (`TERM`, `INT`, `KILL`) to the process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal} {pid}");
}

/// The audit log's records, in order (none when there is no log yet).
pub fn audit_records(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// The opening record (`tool_call`) of the first call of `tool`.
pub fn opening<'a>(records: &'a [Value], tool: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["event"] == "tool_call" && r["tool"] == tool)
        .unwrap_or_else(|| panic!("no opening record for {tool}: {records:#?}"))
}

/// Whether `program` runs here (`--version`); the tests that need it say why they did not
/// run. CI installs each such program (`.ci/run`), so there a missing one is a failure.
pub fn installed_or_skip(program: &str, test: &str, why: &str) -> bool {
    // HAProxy knows only `-v`.
    let flag = if program == "haproxy" {
        "-v"
    } else {
        "--version"
    };
    let present = Command::new(program)
        .arg(flag)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !present && std::env::var_os("CI").is_some() {
        panic!("{test}: {program} is not installed, and CI must run this test ({why})");
    }
    if !present {
        eprintln!("SKIP {test}: {program} is not installed ({why})");
    }
    present
}
