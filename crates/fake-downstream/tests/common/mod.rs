//! Test helpers: a line-based stdio MCP client and a tiny raw HTTP/1.1 client, both
//! driving the built `fake-downstream` binary.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_fake-downstream");
pub const TIMEOUT: Duration = Duration::from_secs(20);

pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    cmd
}

/// Waits for `child` to exit, killing it (and panicking) after `timeout`.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("fake-downstream did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A stdio MCP client: one JSON message per line.
pub struct StdioClient {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// Responses read while waiting for another id, by serialized id.
    pending: HashMap<String, Value>,
    /// Every stdout line read so far, in order.
    pub transcript: Vec<String>,
}

impl StdioClient {
    pub fn spawn(args: &[&str]) -> Self {
        let mut cmd = command(args);
        cmd.stderr(Stdio::null());
        Self::spawn_cmd(cmd)
    }

    pub fn spawn_cmd(mut cmd: Command) -> Self {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn fake-downstream");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        StdioClient {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            next_id: 1,
            pending: HashMap::new(),
            transcript: Vec::new(),
        }
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, msg: &Value) {
        self.send_raw(&msg.to_string());
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next stdout line, or `None` at EOF / after `timeout`.
    pub fn line(&mut self, timeout: Duration) -> Option<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => {
                self.transcript.push(l.clone());
                Some(l)
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Sends a request with a fresh numeric id and returns the id.
    pub fn start(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.start_with_id(id.clone(), method, params);
        id
    }

    pub fn start_with_id(&mut self, id: Value, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// Reads until the response with `id` arrives (other responses are kept for later;
    /// non-JSON and non-response lines are skipped). Panics on EOF or timeout.
    pub fn wait(&mut self, id: &Value) -> Value {
        let key = id.to_string();
        if let Some(v) = self.pending.remove(&key) {
            return v;
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .line(left)
                .unwrap_or_else(|| panic!("no response for id {key}; got {:?}", self.transcript));
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let Some(got) = v.get("id") else { continue };
            if got == id {
                return v;
            }
            self.pending.insert(got.to_string(), v);
        }
    }

    /// True if a response with `id` has been read (and set aside) so far.
    pub fn seen(&self, id: &Value) -> bool {
        self.pending.contains_key(&id.to_string())
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start(method, params);
        self.wait(&id)
    }

    /// `initialize` + `notifications/initialized`; returns the initialize result.
    pub fn init(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r["result"].clone()
    }

    /// `tools/call`; returns the whole response.
    pub fn call(&mut self, name: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": args}))
    }

    /// `tools/call`; returns the text of the first content block (asserts success).
    pub fn call_text(&mut self, name: &str, args: Value) -> String {
        let r = self.call(name, args);
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text in {r}"))
            .to_owned()
    }

    pub fn stats(&mut self) -> Value {
        serde_json::from_str(&self.call_text("stats", json!({}))).unwrap()
    }

    pub fn wait_exit(&mut self) -> ExitStatus {
        wait_exit(&mut self.child, TIMEOUT)
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `fake-downstream --http` process.
pub struct HttpServer {
    pub child: Child,
    pub addr: SocketAddr,
}

impl HttpServer {
    pub fn spawn(extra: &[&str]) -> Self {
        let mut args = vec!["--http", "--port", "0"];
        args.extend_from_slice(extra);
        let mut child = command(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fake-downstream --http");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let addr = first
            .trim_end()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .parse()
            .unwrap();
        HttpServer { child, addr }
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> std::io::Result<HttpResponse> {
        http(self.addr, method, path, headers, body)
    }

    /// POSTs a JSON-RPC message to /mcp.
    pub fn post(&self, headers: &[(&str, &str)], msg: &Value) -> HttpResponse {
        let mut all = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        all.extend_from_slice(headers);
        self.request("POST", "/mcp", &all, Some(&msg.to_string()))
            .expect("POST /mcp")
    }

    /// `initialize`; returns the session id.
    pub fn init(&self, headers: &[(&str, &str)]) -> String {
        let r = self.post(
            headers,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let session = r.header("mcp-session-id").expect("session id").to_owned();
        let r = self.post(
            &[("mcp-session-id", &session)],
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert_eq!(r.status, 202);
        session
    }

    /// `tools/call` in `session`; returns the whole JSON-RPC response.
    pub fn call(&self, session: &str, id: u64, name: &str, args: Value) -> Value {
        let r = self.post(
            &[("mcp-session-id", session)],
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": name, "arguments": args}}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }

    pub fn stats(&self, session: &str) -> Value {
        let r = self.call(session, 999, "stats", json!({}));
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// Lowercased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }
}

/// One HTTP/1.1 request over a fresh connection (`Connection: close`).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> std::io::Result<HttpResponse> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!("content-length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    stream.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP response: {raw:?}")))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Ok(HttpResponse {
        status,
        headers,
        body: String::from_utf8(body).expect("UTF-8 body"),
    })
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&raw[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .expect("chunk size");
        if size == 0 {
            return out;
        }
        raw = &raw[eol + 2..];
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}
