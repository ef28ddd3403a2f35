//! A tiny blocking HTTP/1.1 client over `std::net::TcpStream` for the fake's tests
//! (no HTTP client crates): one request per connection, chunked decoding, truncated
//! bodies reported as incomplete, plus SSE parsing helpers.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const KEY: &str = "test-key";

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was complete (final chunk seen / Content-Length reached).
    pub complete: bool,
    /// Time from sending the request to the end of the response.
    pub elapsed: Duration,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    /// The SSE events of the body: `(type, data JSON)`; the type is the frame's
    /// `event:` line, or the data's `type` when the frame has none (the default).
    pub fn events(&self) -> Vec<(String, Value)> {
        parse_sse(&self.text())
    }

    /// The SSE frames of the body: `(event line if any, data JSON)`.
    pub fn frames(&self) -> Vec<(Option<String>, Value)> {
        parse_frames(&self.text())
    }
}

pub fn parse_sse(text: &str) -> Vec<(String, Value)> {
    parse_frames(text)
        .into_iter()
        .map(|(event, data)| {
            let ty = event.unwrap_or_else(|| data["type"].as_str().unwrap_or("").to_owned());
            (ty, data)
        })
        .collect()
}

/// Frames separated by a blank line, each made of an optional `event:` line and one
/// `data:` line holding JSON (anything else, `[DONE]` included, is a test failure).
pub fn parse_frames(text: &str) -> Vec<(Option<String>, Value)> {
    text.split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .map(|f| {
            let mut event = None;
            let mut data = String::new();
            for line in f.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = Some(e.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            let data =
                serde_json::from_str(&data).unwrap_or_else(|e| panic!("bad data {data:?}: {e}"));
            (event, data)
        })
        .collect()
}

fn request_bytes(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if body.is_some() || method == "POST" {
        head.push_str(&format!(
            "Content-Length: {}\r\n",
            body.map_or(0, <[u8]>::len)
        ));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if let Some(b) = body {
        out.extend_from_slice(b);
    }
    out
}

/// Sends one request and reads the whole response (until the server closes).
/// `Err` when the connection closed without a single byte of response.
pub fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Resp, String> {
    let start = Instant::now();
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    s.write_all(&request_bytes(addr, method, path, headers, body))
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return Err(format!("read timed out after {} bytes", raw.len()));
            }
            // Reset / aborted: keep what arrived.
            Err(_) => break,
        }
    }
    let elapsed = start.elapsed();
    if raw.is_empty() {
        return Err("connection closed without a response".to_owned());
    }
    parse_response(&raw, elapsed)
}

fn parse_response(raw: &[u8], elapsed: Duration) -> Result<Resp, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of head")?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let rest = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("no status line")?;
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let (body, complete) = if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(rest)
    } else if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        (rest[..len.min(rest.len())].to_vec(), rest.len() >= len)
    } else {
        (rest.to_vec(), true)
    };
    Ok(Resp {
        status,
        headers,
        body,
        complete,
        elapsed,
    })
}

/// Decodes a chunked body; `complete` is whether the final 0-size chunk was seen.
fn dechunk(mut rest: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    loop {
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
            return (out, false);
        };
        let size_str = String::from_utf8_lossy(&rest[..eol]).into_owned();
        let Ok(size) = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16)
        else {
            return (out, false);
        };
        rest = &rest[eol + 2..];
        if size == 0 {
            return (out, true);
        }
        if rest.len() < size {
            out.extend_from_slice(rest);
            return (out, false);
        }
        out.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or(&[]);
    }
}

/// An authenticated API call with an optional JSON body.
pub fn api(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let auth = format!("Bearer {KEY}");
    let body = body.map(|b| b.to_string().into_bytes());
    let mut headers = vec![("Authorization", auth.as_str())];
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    send(addr, method, path, &headers, body.as_deref())
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// Opens a request and returns the stream after reading until `needle` appears in the
/// raw bytes (for timing checks); returns the bytes read so far too.
pub fn send_until(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
    needle: &str,
) -> (TcpStream, Vec<u8>, Duration) {
    let start = Instant::now();
    let auth = format!("Bearer {KEY}");
    let body = body.map(|b| b.to_string().into_bytes());
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.write_all(&request_bytes(
        addr,
        method,
        path,
        &[("Authorization", &auth)],
        body.as_deref(),
    ))
    .expect("write");
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.windows(needle.len()).any(|w| w == needle.as_bytes()) {
        let n = s.read(&mut buf).expect("read");
        assert!(
            n > 0,
            "EOF before {needle:?}: {}",
            String::from_utf8_lossy(&raw)
        );
        raw.extend_from_slice(&buf[..n]);
    }
    (s, raw, start.elapsed())
}

/// Starts a streaming create on its own thread and returns it with the run's id, as
/// soon as the fake lists the run (the stream itself is still open).
pub fn stream_in_background(
    fake: &fake_perplexity::FakePerplexity,
) -> (std::thread::JoinHandle<Resp>, String) {
    create_in_background(fake, serde_json::json!({"input": "q", "stream": true}))
}

/// Sends a create with `body` on its own thread (for answers that stay open: a stream,
/// a foreground run) and returns it with the run's id, as soon as the fake lists it.
pub fn create_in_background(
    fake: &fake_perplexity::FakePerplexity,
    body: Value,
) -> (std::thread::JoinHandle<Resp>, String) {
    let addr = fake.addr();
    let request = std::thread::spawn(move || api(addr, "POST", "/v1/agent", Some(&body)));
    loop {
        if let Some(r) = fake.runs().first() {
            return (request, r.id.clone());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
