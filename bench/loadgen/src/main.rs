//! `loadgen`: a small HTTP/1.1 load generator for `bench/http.sh` (no wrk/oha needed).
//!
//! Raw HTTP/1.1 over `TcpStream`, keep-alive, one request at a time per connection (no
//! pipelining); a response is read in full (`Content-Length` or chunked) before the next
//! request goes out. Two modes:
//!
//! - `throughput`: `--connections` connections send the same request in a loop for
//!   `--warmup` + `--duration` seconds; requests/s and latency percentiles cover only the
//!   requests that started after the warm-up and finished before the end.
//! - `burst`: `--connections` connections are opened first, then every one sends the
//!   request at once and waits for its answer. A line `SENT <n> <ms>` is printed on stdout
//!   when all requests are written, so a harness can sample the server while they wait.
//!
//! An optional per-connection setup request (e.g. a legacy `initialize`) can hand a
//! response header (e.g. `Mcp-Session-Id`) to every later request on that connection.
//! The result is one JSON object on the last stdout line.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Barrier, Semaphore};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Throughput,
    Burst,
}

#[derive(Parser, Clone)]
#[command(about = "HTTP/1.1 keep-alive load generator (bench/http.sh)")]
struct Args {
    /// Server address, host:port.
    #[arg(long)]
    addr: String,
    /// Request path.
    #[arg(long, default_value = "/mcp")]
    path: String,
    #[arg(long, value_enum, default_value_t = Mode::Throughput)]
    mode: Mode,
    /// Concurrent connections.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Measured seconds (throughput mode).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Warm-up seconds before the measurement (throughput mode).
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Runtime worker threads (1 = a current-thread runtime).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// A header on every measured request, `Name: value` (repeatable).
    #[arg(long = "header")]
    headers: Vec<String>,
    /// The JSON body of every measured request (POST).
    #[arg(long)]
    body: String,
    /// Per-connection setup request body (POST), sent once before the measured requests.
    #[arg(long)]
    setup_body: Option<String>,
    /// A header on the setup request (repeatable).
    #[arg(long = "setup-header")]
    setup_headers: Vec<String>,
    /// A response header of the setup request whose value every later request on that
    /// connection repeats under the same name (e.g. mcp-session-id).
    #[arg(long)]
    session_header: Option<String>,
    /// A body sent once after the setup (with the session header), e.g.
    /// notifications/initialized; any 2xx answer is accepted.
    #[arg(long)]
    after_setup_body: Option<String>,
    /// Every measured response body must contain this text (else it counts as bad).
    #[arg(long)]
    expect: Option<String>,
    /// Seconds a single response may take before the request counts as an error.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
    /// Connections opened at the same time while setting up.
    #[arg(long, default_value_t = 64)]
    connect_concurrency: usize,
}

struct Resp {
    status: u16,
    close: bool,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

fn err(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    async fn connect(addr: &str) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(16 * 1024),
        })
    }

    async fn fill(&mut self) -> io::Result<()> {
        self.buf.reserve(16 * 1024);
        if self.stream.read_buf(&mut self.buf).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed by the server",
            ));
        }
        Ok(())
    }

    async fn roundtrip(&mut self, request: &[u8], keep_headers: bool) -> io::Result<Resp> {
        self.stream.write_all(request).await?;
        self.read_response(keep_headers).await
    }

    async fn read_response(&mut self, keep_headers: bool) -> io::Result<Resp> {
        // Head.
        let (head_len, status, content_length, chunked, close, headers) = loop {
            let mut slots = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Response::new(&mut slots);
            match parsed.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = parsed.code.unwrap_or(0);
                    let mut content_length = None;
                    let mut chunked = false;
                    let mut close = parsed.version == Some(0);
                    let mut headers = Vec::new();
                    for h in parsed.headers.iter() {
                        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
                        if h.name.eq_ignore_ascii_case("content-length") {
                            content_length = Some(
                                value
                                    .parse::<usize>()
                                    .map_err(|_| err("bad Content-Length"))?,
                            );
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = value.to_ascii_lowercase().contains("chunked");
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            let v = value.to_ascii_lowercase();
                            if v.contains("close") {
                                close = true;
                            } else if v.contains("keep-alive") {
                                close = false;
                            }
                        }
                        if keep_headers {
                            headers.push((h.name.to_ascii_lowercase(), value.to_owned()));
                        }
                    }
                    break (n, status, content_length, chunked, close, headers);
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => return Err(err(format!("bad response head: {e}"))),
            }
            self.fill().await?;
        };
        // Body.
        let body = if chunked {
            let mut pos = head_len;
            let mut body = Vec::new();
            loop {
                let Some(eol) = find(&self.buf[pos..], b"\r\n") else {
                    self.fill().await?;
                    continue;
                };
                let line = std::str::from_utf8(&self.buf[pos..pos + eol])
                    .map_err(|_| err("bad chunk size"))?;
                let size_text = line.split(';').next().unwrap_or("").trim();
                let size =
                    usize::from_str_radix(size_text, 16).map_err(|_| err("bad chunk size"))?;
                if size == 0 {
                    // Trailers, up to an empty line.
                    let mut at = pos + eol + 2;
                    loop {
                        match find(&self.buf[at..], b"\r\n") {
                            Some(0) => {
                                at += 2;
                                break;
                            }
                            Some(n) => at += n + 2,
                            None => self.fill().await?,
                        }
                    }
                    pos = at;
                    break;
                }
                let start = pos + eol + 2;
                while self.buf.len() < start + size + 2 {
                    self.fill().await?;
                }
                body.extend_from_slice(&self.buf[start..start + size]);
                pos = start + size + 2;
            }
            self.buf.drain(..pos);
            body
        } else if let Some(len) = content_length {
            while self.buf.len() < head_len + len {
                self.fill().await?;
            }
            let body = self.buf[head_len..head_len + len].to_vec();
            self.buf.drain(..head_len + len);
            body
        } else if status == 204 || status == 304 || (100..200).contains(&status) {
            self.buf.drain(..head_len);
            Vec::new()
        } else {
            // Delimited by the end of the connection.
            loop {
                self.buf.reserve(16 * 1024);
                if self.stream.read_buf(&mut self.buf).await? == 0 {
                    break;
                }
            }
            let body = self.buf[head_len..].to_vec();
            self.buf.clear();
            return Ok(Resp {
                status,
                close: true,
                headers,
                body,
            });
        };
        Ok(Resp {
            status,
            close,
            headers,
            body,
        })
    }
}

fn request(args: &Args, headers: &[String], extra: &[(String, String)], body: &str) -> Vec<u8> {
    let mut r = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        args.path,
        args.addr,
        body.len()
    );
    for h in headers {
        r.push_str(h.trim());
        r.push_str("\r\n");
    }
    for (k, v) in extra {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r.into_bytes()
}

/// Connects, runs the optional setup, and returns the connection with the bytes of its
/// measured request.
async fn open(args: &Args) -> io::Result<(Conn, Vec<u8>)> {
    let mut conn = Conn::connect(&args.addr).await?;
    let mut extra = Vec::new();
    if let Some(setup) = &args.setup_body {
        let req = request(args, &args.setup_headers, &[], setup);
        let resp = conn.roundtrip(&req, true).await?;
        if !(200..300).contains(&resp.status) {
            return Err(err(format!(
                "setup answered {}: {}",
                resp.status,
                String::from_utf8_lossy(&resp.body)
            )));
        }
        if let Some(name) = &args.session_header {
            let lname = name.to_ascii_lowercase();
            let value = resp
                .headers
                .iter()
                .find(|(k, _)| *k == lname)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| err(format!("setup response has no {name} header")))?;
            extra.push((name.clone(), value));
        }
        if let Some(after) = &args.after_setup_body {
            let req = request(args, &args.setup_headers, &extra, after);
            let resp = conn.roundtrip(&req, false).await?;
            if !(200..300).contains(&resp.status) {
                return Err(err(format!("after-setup request answered {}", resp.status)));
            }
        }
    }
    let req = request(args, &args.headers, &extra, &args.body);
    Ok((conn, req))
}

async fn open_all(args: &Arc<Args>) -> io::Result<Vec<(Conn, Vec<u8>)>> {
    let gate = Arc::new(Semaphore::new(args.connect_concurrency.max(1)));
    let mut tasks = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        let args = args.clone();
        let gate = gate.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire().await;
            open(&args).await
        }));
    }
    let mut conns = Vec::with_capacity(tasks.len());
    for t in tasks {
        conns.push(t.await.map_err(|e| err(e.to_string()))??);
    }
    Ok(conns)
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    non_2xx: u64,
    bad_body: u64,
    errors: u64,
    reconnects: u64,
    first_error: Option<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latencies_us.extend(other.latencies_us);
        self.non_2xx += other.non_2xx;
        self.bad_body += other.bad_body;
        self.errors += other.errors;
        self.reconnects += other.reconnects;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// Records one answer; `true` when it counts as a success.
    fn check(&mut self, resp: &Resp, expect: Option<&[u8]>) -> bool {
        if !(200..300).contains(&resp.status) {
            self.non_2xx += 1;
            self.note(|| {
                format!(
                    "status {}: {}",
                    resp.status,
                    String::from_utf8_lossy(&resp.body[..resp.body.len().min(300)])
                )
            });
            return false;
        }
        if let Some(expect) = expect
            && find(&resp.body, expect).is_none()
        {
            self.bad_body += 1;
            self.note(|| {
                format!(
                    "unexpected body: {}",
                    String::from_utf8_lossy(&resp.body[..resp.body.len().min(300)])
                )
            });
            return false;
        }
        true
    }

    fn note(&mut self, msg: impl FnOnce() -> String) {
        if self.first_error.is_none() {
            self.first_error = Some(msg());
        }
    }
}

async fn throughput_worker(
    args: Arc<Args>,
    mut conn: Conn,
    mut req: Vec<u8>,
    warm_end: Instant,
    end: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let expect = args.expect.as_deref().map(str::as_bytes);
    let timeout = Duration::from_secs_f64(args.timeout);
    loop {
        let start = Instant::now();
        if start >= end {
            break;
        }
        let outcome = tokio::time::timeout(timeout, conn.roundtrip(&req, false)).await;
        let done = Instant::now();
        let reconnect = match outcome {
            Ok(Ok(resp)) => {
                if tally.check(&resp, expect) && start >= warm_end && done <= end {
                    tally
                        .latencies_us
                        .push(done.duration_since(start).as_micros() as u64);
                }
                resp.close
            }
            Ok(Err(e)) => {
                tally.errors += 1;
                tally.note(|| e.to_string());
                true
            }
            Err(_) => {
                tally.errors += 1;
                tally.note(|| "response timed out".to_owned());
                true
            }
        };
        if reconnect {
            if Instant::now() >= end {
                break;
            }
            tally.reconnects += 1;
            match open(&args).await {
                Ok((c, r)) => {
                    conn = c;
                    req = r;
                }
                Err(e) => {
                    tally.errors += 1;
                    tally.note(|| format!("reconnect: {e}"));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
    tally
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "null".to_owned()
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn latency_fields(tally: &mut Tally) -> String {
    tally.latencies_us.sort_unstable();
    let l = &tally.latencies_us;
    let mean = if l.is_empty() {
        f64::NAN
    } else {
        l.iter().sum::<u64>() as f64 / l.len() as f64 / 1000.0
    };
    format!(
        "\"ok\":{},\"non_2xx\":{},\"bad_body\":{},\"errors\":{},\"reconnects\":{},\"first_error\":{},\"lat_ms\":{{\"min\":{},\"p50\":{},\"p90\":{},\"p99\":{},\"max\":{},\"mean\":{}}}",
        l.len(),
        tally.non_2xx,
        tally.bad_body,
        tally.errors,
        tally.reconnects,
        tally
            .first_error
            .as_deref()
            .map_or("null".to_owned(), json_str),
        num(l.first().map_or(f64::NAN, |v| *v as f64 / 1000.0)),
        num(percentile(l, 0.50)),
        num(percentile(l, 0.90)),
        num(percentile(l, 0.99)),
        num(l.last().map_or(f64::NAN, |v| *v as f64 / 1000.0)),
        num(mean),
    )
}

async fn throughput(args: Arc<Args>) -> io::Result<String> {
    let conns = open_all(&args).await?;
    let t0 = Instant::now();
    let warm_end = t0 + Duration::from_secs_f64(args.warmup);
    let end = warm_end + Duration::from_secs_f64(args.duration);
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|(conn, req)| tokio::spawn(throughput_worker(args.clone(), conn, req, warm_end, end)))
        .collect();
    let mut tally = Tally::default();
    for t in tasks {
        tally.merge(t.await.map_err(|e| err(e.to_string()))?);
    }
    let rps = tally.latencies_us.len() as f64 / args.duration;
    Ok(format!(
        "{{\"mode\":\"throughput\",\"connections\":{},\"threads\":{},\"warmup_s\":{},\"duration_s\":{},\"rps\":{},{}}}",
        args.connections,
        args.threads,
        args.warmup,
        args.duration,
        num(rps),
        latency_fields(&mut tally)
    ))
}

async fn burst(args: Arc<Args>) -> io::Result<String> {
    let conns = open_all(&args).await?;
    let n = conns.len();
    let start = Arc::new(Barrier::new(n + 1));
    let sent = Arc::new(AtomicUsize::new(0));
    let all_sent = Arc::new(tokio::sync::Notify::new());
    let t0 = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|(mut conn, req)| {
            let (args, start, sent, all_sent) =
                (args.clone(), start.clone(), sent.clone(), all_sent.clone());
            tokio::spawn(async move {
                let mut tally = Tally::default();
                start.wait().await;
                let begun = Instant::now();
                if let Err(e) = conn.stream.write_all(&req).await {
                    tally.errors += 1;
                    tally.note(|| e.to_string());
                }
                if sent.fetch_add(1, Ordering::SeqCst) + 1 == n {
                    all_sent.notify_one();
                }
                if tally.errors > 0 {
                    return (tally, None);
                }
                let timeout = Duration::from_secs_f64(args.timeout);
                let outcome = tokio::time::timeout(timeout, conn.read_response(false)).await;
                let done = Instant::now();
                match outcome {
                    Ok(Ok(resp)) => {
                        if tally.check(&resp, args.expect.as_deref().map(str::as_bytes)) {
                            tally
                                .latencies_us
                                .push(done.duration_since(begun).as_micros() as u64);
                        }
                    }
                    Ok(Err(e)) => {
                        tally.errors += 1;
                        tally.note(|| e.to_string());
                    }
                    Err(_) => {
                        tally.errors += 1;
                        tally.note(|| "response timed out".to_owned());
                    }
                }
                (tally, Some(done))
            })
        })
        .collect();
    let go = Instant::now();
    start.wait().await;
    all_sent.notified().await;
    let sent_ms = go.elapsed().as_secs_f64() * 1000.0;
    println!("SENT {n} {sent_ms:.1}");
    let mut tally = Tally::default();
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    for t in tasks {
        let (part, done) = t.await.map_err(|e| err(e.to_string()))?;
        tally.merge(part);
        if let Some(done) = done {
            first = Some(first.map_or(done, |f| f.min(done)));
            last = Some(last.map_or(done, |l| l.max(done)));
        }
    }
    let rel =
        |t: Option<Instant>| t.map_or(f64::NAN, |t| t.duration_since(go).as_secs_f64() * 1000.0);
    Ok(format!(
        "{{\"mode\":\"burst\",\"connections\":{n},\"setup_ms\":{},\"all_sent_ms\":{},\"first_response_ms\":{},\"last_response_ms\":{},{}}}",
        num(go.duration_since(t0).as_secs_f64() * 1000.0),
        num(sent_ms),
        num(rel(first)),
        num(rel(last)),
        latency_fields(&mut tally)
    ))
}

fn main() {
    let args = Arc::new(Args::parse());
    let runtime = if args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("loadgen: cannot start the runtime: {e}");
            std::process::exit(2);
        }
    };
    let result = runtime.block_on(async {
        match args.mode {
            Mode::Throughput => throughput(args.clone()).await,
            Mode::Burst => burst(args.clone()).await,
        }
    });
    match result {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Serves `replies` (raw bytes, in pieces) on one connection, one per request read.
    async fn serve(replies: Vec<Vec<&'static [u8]>>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            for pieces in replies {
                let _ = socket.read(&mut buf).await.unwrap();
                for piece in pieces {
                    socket.write_all(piece).await.unwrap();
                    socket.flush().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
        addr
    }

    #[tokio::test]
    async fn content_length_chunked_and_keep_alive() {
        let addr = serve(vec![
            vec![
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nMcp-Session-Id: abc\r\n\r\nhel",
                b"lo",
            ],
            vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nfoo\r\n",
                b"4;ext=1\r\nbar!\r\n0\r\nX-Trailer: 1\r\n\r\n",
            ],
            vec![b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"],
            vec![b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno"],
        ])
        .await;
        let mut conn = Conn::connect(&addr).await.unwrap();
        let r = conn
            .roundtrip(b"GET / HTTP/1.1\r\n\r\n", true)
            .await
            .unwrap();
        assert_eq!(
            (r.status, r.body.as_slice(), r.close),
            (200, &b"hello"[..], false)
        );
        assert!(
            r.headers
                .contains(&("mcp-session-id".to_owned(), "abc".to_owned()))
        );
        let r = conn
            .roundtrip(b"GET / HTTP/1.1\r\n\r\n", false)
            .await
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"foobar!"[..]));
        let r = conn
            .roundtrip(b"GET / HTTP/1.1\r\n\r\n", false)
            .await
            .unwrap();
        assert_eq!((r.status, r.body.len()), (202, 0));
        let r = conn
            .roundtrip(b"GET / HTTP/1.1\r\n\r\n", false)
            .await
            .unwrap();
        assert_eq!(
            (r.status, r.body.as_slice(), r.close),
            (503, &b"no"[..], true)
        );
        assert!(conn.buf.is_empty());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).map(|x| x * 1000).collect();
        assert_eq!(percentile(&v, 0.50), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
