//! The Streamable HTTP transport, black-box: the real binary on 127.0.0.1, raw HTTP/1.1
//! requests (so hostile headers can be sent exactly), every JSON-RPC frame checked
//! against its era's schema.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

pub const TOKEN: &str = "e2e-http-token-0123456789abcdef0123456789";

pub struct Http {
    pub server: Server,
    pub client: Client,
}

/// Speaks HTTP to a running server (copyable into other threads).
#[derive(Clone, Copy)]
pub struct Client {
    pub port: u16,
}

impl std::ops::Deref for Http {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON ({}): {}", self.status, self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The JSON-RPC frames of an SSE body, in order.
    pub fn events(&self) -> Vec<Value> {
        self.text()
            .split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).unwrap())
            })
            .collect()
    }
}

pub fn http_env(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = vec![("PERPLEXITY_HTTP_AUTH_TOKEN".to_owned(), TOKEN.to_owned())];
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    with_metrics_port(&mut env);
    env
}

/// With metrics on, the metrics listener on a free port (tests run side by side) unless
/// `env` names one.
pub fn with_metrics_port(env: &mut Vec<(String, String)>) {
    let on = env
        .iter()
        .any(|(k, v)| k == "PERPLEXITY_METRICS" && v == "on");
    if on && !env.iter().any(|(k, _)| k == "PERPLEXITY_METRICS_BIND") {
        env.push(("PERPLEXITY_METRICS_BIND".into(), "127.0.0.1:0".into()));
    }
}

impl Http {
    /// The metrics listener (`PERPLEXITY_METRICS_BIND`), as the start-up line names it.
    pub fn metrics(&self) -> Client {
        // The server names its metrics listener after the line `start` waited for.
        let mut port = 0;
        wait_until("the metrics listener", Duration::from_secs(10), || {
            let err = self.server.stderr();
            let named = err
                .split("metrics on http://")
                .nth(1)
                .and_then(|rest| rest.split_once("/metrics"))
                .and_then(|(addr, _)| addr.rsplit(':').next()?.parse().ok());
            named.inspect(|p| port = *p).is_some()
        });
        Client { port }
    }

    pub fn start(env: &[(String, String)]) -> Http {
        Self::start_with_args(&["serve", "--http", "--bind", "127.0.0.1:0"], env)
    }

    pub fn start_with_args(args: &[&str], env: &[(String, String)]) -> Http {
        let server = Server::start_with_args(args, env);
        let mut port = 0;
        wait_until("the HTTP server to listen", Duration::from_secs(10), || {
            let err = server.stderr();
            // Only a whole line: stderr may be read while the address is half written.
            // The start-up summary follows it at once; tests read that too, so wait for
            // it whole as well.
            if let Some(rest) = err.split("MCP over HTTP on http://").nth(1)
                && let Some((addr, after)) = rest.split_once("/mcp\n")
                && after.contains('\n')
            {
                port = addr.rsplit(':').next().unwrap().parse().unwrap();
                return true;
            }
            false
        });
        Http {
            server,
            client: Client { port },
        }
    }
}

impl Client {
    /// One raw request on a fresh connection. `Host` defaults to 127.0.0.1:port unless
    /// `headers` carries one.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: 127.0.0.1:{}\r\n", self.port));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        stream.write_all(head.as_bytes()).unwrap();
        // A refused oversized body may close the socket early: that is fine.
        let _ = stream.write_all(body);
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        parse(&raw)
    }

    /// A POST of one JSON-RPC message with the token and the usual MCP headers.
    pub fn post(&self, message: &Value, headers: &[(&str, &str)]) -> Reply {
        self.post_as(TOKEN, message, headers)
    }

    /// [`Client::post`] with another caller's token.
    pub fn post_as(&self, token: &str, message: &Value, headers: &[(&str, &str)]) -> Reply {
        let auth = format!("Bearer {token}");
        let mut all = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        all.extend_from_slice(headers);
        self.send("POST", "/mcp", &all, message.to_string().as_bytes())
    }

    /// A modern request of raw body text, with the token and the method header.
    pub fn modern_raw(&self, method: &str, body: &[u8]) -> Reply {
        let auth = format!("Bearer {TOKEN}");
        let headers = [
            ("Authorization", auth.as_str()),
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", method),
        ];
        self.send("POST", "/mcp", &headers, body)
    }

    /// A modern request with the headers its body implies.
    pub fn modern(&self, message: &Value) -> Reply {
        let method = message["method"].as_str().unwrap().to_owned();
        let name = message["params"]["name"]
            .as_str()
            .or(message["params"]["uri"].as_str())
            .map(str::to_owned);
        let mut headers = vec![
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", method.as_str()),
        ];
        if let Some(name) = &name {
            headers.push(("Mcp-Name", name.as_str()));
        }
        self.post(message, &headers)
    }

    /// `initialize`, returning the session id.
    pub fn initialize(&self) -> String {
        self.initialize_as(TOKEN)
    }

    /// `initialize` as the holder of `token`.
    pub fn initialize_as(&self, token: &str) -> String {
        let r = self.post_as(
            token,
            &request(
                0,
                "initialize",
                json!({"protocolVersion": V_LEGACY, "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}),
            ),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.text());
        assert_frame(Era::Legacy, "initialize", &r.json());
        r.header("mcp-session-id").expect("a session id").to_owned()
    }
}

pub fn parse(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = data.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&data[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = end + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

fn tools_list(id: i64) -> Value {
    request(id, "tools/list", json!({}))
}

pub fn modern_tools_list(id: i64) -> Value {
    request(id, "tools/list", json!({"_meta": modern_meta()}))
}

#[test]
fn startup_needs_a_long_token_and_loopback_unless_told() {
    for (env, args, expected) in [
        (
            vec![],
            vec!["serve", "--http"],
            "PERPLEXITY_HTTP_AUTH_TOKEN: is required",
        ),
        (
            vec![(
                "PERPLEXITY_HTTP_AUTH_TOKEN".to_owned(),
                "short-token".to_owned(),
            )],
            vec!["serve", "--http"],
            "at least 32 characters",
        ),
        (
            http_env(&[]),
            vec!["serve", "--http", "--bind", "0.0.0.0:0"],
            "pass --allow-remote",
        ),
        (
            http_env(&[("PERPLEXITY_HTTP_WORKERS", "0")]),
            vec!["serve", "--http"],
            "PERPLEXITY_HTTP_WORKERS: must be a whole number from 1 to 256",
        ),
        // The Host check compares names: an entry with a port or a scheme would never
        // match, so it is refused at start rather than ignored.
        (
            http_env(&[("PERPLEXITY_HTTP_ALLOWED_HOSTS", "mcp.example.com:8443")]),
            vec!["serve", "--http"],
            "PERPLEXITY_HTTP_ALLOWED_HOSTS: \"mcp.example.com:8443\" has a port",
        ),
        (
            http_env(&[("PERPLEXITY_HTTP_ALLOWED_HOSTS", "https://mcp.example.com")]),
            vec!["serve", "--http"],
            "is a URL; list host names only",
        ),
    ] {
        let mut s = Server::start_with_args(&args, &env);
        let status = s.wait_exit(Duration::from_secs(10));
        assert_eq!(status.code(), Some(4), "{}", s.stderr());
        assert!(s.stderr().contains(expected), "{}", s.stderr());
        assert!(!s.stderr().contains("short-token"));
    }
    // Told: it listens, and warns that TLS belongs in a proxy. The token is never shown.
    let h = Http::start_with_args(
        &["serve", "--http", "--bind", "0.0.0.0:0", "--allow-remote"],
        &http_env(&[]),
    );
    let err = h.server.stderr();
    assert!(
        err.contains("reachable from other machines") && err.contains("reverse proxy"),
        "{err}"
    );
    assert!(!err.contains(TOKEN));
}

#[test]
fn every_mcp_request_needs_exactly_the_bearer_token() {
    let fake = FakePerplexity::start();
    let mut env = env_for(&fake);
    env.extend(http_env(&[]));
    let h = Http::start(&env);
    let body = modern_tools_list(1).to_string();
    let wrong = [
        vec![],
        vec![(
            "Authorization",
            "Bearer wrong-token-0123456789abcdef0123456789".to_owned(),
        )],
        vec![("Authorization", format!("Basic {TOKEN}"))],
        vec![("Authorization", TOKEN.to_owned())],
        vec![("Authorization", format!("Bearer {TOKEN}x"))],
        vec![(
            "Authorization",
            format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]),
        )],
        vec![("Authorization", format!("Bearer  {TOKEN}"))],
        vec![
            ("Authorization", format!("Bearer {TOKEN}")),
            ("Authorization", format!("Bearer {TOKEN}")),
        ],
    ];
    for headers in wrong {
        let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = h.send("POST", "/mcp", &refs, body.as_bytes());
        assert_eq!(r.status, 401, "{headers:?}");
        assert_eq!(
            r.header("www-authenticate"),
            Some("Bearer realm=\"perplexity-agent\"")
        );
        assert!(!r.text().contains(TOKEN));
    }
    // A refused call never reaches a tool, let alone the upstream.
    let call = modern_call(2, "perplexity_agent", json!({"query": "q"}));
    let r = h.send("POST", "/mcp", &[], call.to_string().as_bytes());
    assert_eq!(r.status, 401);
    assert!(fake.requests().is_empty());

    // The scheme is case-insensitive; the token is not.
    let auth = format!("bearer {TOKEN}");
    let r = h.send(
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", "tools/list"),
        ],
        body.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.text());

    // Liveness only, without a token; nothing else is open.
    let r = h.send("GET", "/healthz", &[], b"");
    assert_eq!((r.status, r.text().as_str()), (200, "ok\n"));
    assert_eq!(h.send("GET", "/", &[], b"").status, 404);
    assert_eq!(h.send("GET", "/mcp", &[], b"").status, 401);
}

#[test]
fn host_and_origin_are_checked_before_the_token() {
    let h = Http::start(&http_env(&[
        // An IPv6 entry is compared in its one spelling, as the Host header's is.
        (
            "PERPLEXITY_HTTP_ALLOWED_HOSTS",
            "mcp.example.com, [fd00:0:0:0::7]",
        ),
        ("PERPLEXITY_HTTP_ALLOWED_ORIGINS", "https://app.example.com"),
    ]));
    let m = modern_tools_list(1);
    let modern = [
        ("MCP-Protocol-Version", V_MODERN),
        ("Mcp-Method", "tools/list"),
    ];
    for (header, value, status) in [
        ("Host", "evil.example", 403),
        ("Host", "localhost.evil.example:80", 403),
        ("Host", "localhost:9999", 200),
        ("Host", "[::1]", 200),
        ("Host", "MCP.example.com", 200),
        ("Host", "mcp.example.com:8443", 200),
        ("Host", "[fd00::7]:8080", 200),
        ("Host", "[fd00::8]", 403),
        ("Origin", "http://evil.example", 403),
        ("Origin", "null", 403),
        ("Origin", "https://app.example.com:444", 403),
        ("Origin", "http://localhost:6274", 200),
        ("Origin", "https://app.example.com", 200),
    ] {
        let mut headers = modern.to_vec();
        headers.push((header, value));
        let r = h.post(&m, &headers);
        assert_eq!(r.status, status, "{header}: {value}: {}", r.text());
    }
    // Rebinding is refused even without a token: 403, not 401.
    let r = h.send("POST", "/mcp", &[("Host", "evil.example")], b"{}");
    assert_eq!(r.status, 403);
}

#[test]
fn oversized_bodies_and_saturation_are_refused_and_the_server_goes_on() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 1500}));
    let mut env = env_for(&fake);
    env.extend(http_env(&[("PERPLEXITY_HTTP_MAX_IN_FLIGHT", "1")]));
    let h = Http::start(&env);
    let big = vec![b' '; 9 * 1024 * 1024];
    let auth = format!("Bearer {TOKEN}");
    let r = h.send("POST", "/mcp", &[("Authorization", &auth)], &big);
    assert_eq!(r.status, 413);
    // Below the cap (8 MiB) a large body is read and answered: a 3 MiB query is refused
    // by validation, not by the transport.
    let large = modern_call(9, "perplexity_agent", json!({"query": "q".repeat(3 << 20)}));
    let r = h.modern(&large);
    assert_eq!(r.status, 200, "{}", r.text());
    let (text, is_error) = tool_text(&r.json());
    assert!(
        is_error && text.contains("at most 16384 characters"),
        "{text}"
    );

    // One slot: a waiting call holds it, so the next request gets 503 at once.
    let client = h.client;
    let waiting = std::thread::spawn(move || {
        client.modern(&modern_call(1, "perplexity_agent", json!({"query": "q"})))
    });
    wait_until("the call to be in flight", Duration::from_secs(5), || {
        !fake.requests().is_empty()
    });
    let started = Instant::now();
    let r = h.modern(&modern_tools_list(2));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(started.elapsed() < Duration::from_secs(1));
    let done = waiting.join().unwrap();
    assert_eq!(done.status, 200);
    let (text, is_error) = tool_text(&done.json());
    assert!(!is_error, "{text}");
    assert_eq!(
        h.modern(&modern_tools_list(3)).status,
        200,
        "the slot is free again"
    );
}

#[test]
fn legacy_sessions_begin_with_initialize_and_end_with_delete() {
    let h = Http::start(&http_env(&[]));
    let r = h.post(&tools_list(1), &[]);
    assert_eq!(r.status, 400, "no session");
    assert_eq!(r.json()["error"]["code"], -32600);
    assert_eq!(r.json()["id"], 1);

    let session = h.initialize();
    assert_eq!(session.len(), 32);
    let with = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", V_LEGACY),
    ];
    let r = h.post(&tools_list(2), &with);
    assert_eq!(r.status, 200);
    assert_frame(Era::Legacy, "tools/list", &r.json());
    assert!(
        r.json()["result"].get("resultType").is_none(),
        "legacy results are not shaped"
    );
    let r = h.post(&request(3, "ping", json!({})), &with);
    assert_eq!(r.json()["result"], json!({}));
    let r = h.post(
        &request(4, "logging/setLevel", json!({"level": "debug"})),
        &with,
    );
    assert_eq!(r.json()["result"], json!({}));
    let r = h.post(&request(5, "nope/nope", json!({})), &with);
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_i64()),
        (200, Some(-32601))
    );
    let r = h.post(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &with,
    );
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
    let r = h.post(
        &tools_list(6),
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "1999-01-01"),
        ],
    );
    assert_eq!(r.status, 400);

    let unknown = [("Mcp-Session-Id", "0123456789abcdef0123456789abcdef")];
    assert_eq!(h.post(&tools_list(7), &unknown).status, 404);
    let auth = format!("Bearer {TOKEN}");
    assert_eq!(
        h.send("GET", "/mcp", &[("Authorization", &auth)], b"")
            .status,
        405
    );
    assert_eq!(
        h.send("DELETE", "/mcp", &[("Authorization", &auth)], b"")
            .status,
        405
    );
    let end = h.send(
        "DELETE",
        "/mcp",
        &[("Authorization", &auth), ("Mcp-Session-Id", &session)],
        b"",
    );
    assert_eq!(end.status, 204);
    assert_eq!(
        h.post(&tools_list(8), &with).status,
        404,
        "an ended session is gone"
    );
}

#[test]
fn modern_requests_must_repeat_their_body_in_headers() {
    let h = Http::start(&http_env(&[]));
    let r = h.modern(&modern_tools_list(1));
    assert_eq!(r.status, 200);
    let frame = r.json();
    assert_frame(Era::Modern, "tools/list", &frame);
    assert_eq!(frame["result"]["resultType"], "complete");
    assert!(
        r.header("mcp-session-id").is_none(),
        "stateless: no session minted"
    );

    let list = modern_tools_list(2);
    // (headers, body, expected status, expected error code or 0 for a result)
    type Case<'a> = (Vec<(&'a str, &'a str)>, Value, u16, i64);
    let cases: Vec<Case> = vec![
        (
            vec![
                ("Mcp-Method", "tools/list"),
                ("MCP-Protocol-Version", V_MODERN),
            ],
            list.clone(),
            200,
            0,
        ),
        (
            vec![("Mcp-Method", "tools/list")],
            list.clone(),
            400,
            -32020,
        ),
        (
            vec![
                ("Mcp-Method", "TOOLS/LIST"),
                ("MCP-Protocol-Version", V_MODERN),
            ],
            list.clone(),
            400,
            -32020,
        ),
        (
            vec![("MCP-Protocol-Version", V_MODERN)],
            list.clone(),
            400,
            -32020,
        ),
        (
            vec![
                ("Mcp-Method", "tools/list"),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            list.clone(),
            400,
            -32020,
        ),
        (
            vec![
                ("Mcp-Method", "tools/list"),
                ("MCP-Protocol-Version", V_MODERN),
            ],
            request(3, "tools/list", json!({})),
            400,
            -32602,
        ),
        (
            vec![
                ("Mcp-Method", "tools/list"),
                ("MCP-Protocol-Version", "v999.0.0"),
            ],
            request(
                4,
                "tools/list",
                json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "v999.0.0", "io.modelcontextprotocol/clientCapabilities": {}}}),
            ),
            400,
            -32022,
        ),
        (
            vec![("Mcp-Method", "ping"), ("MCP-Protocol-Version", V_MODERN)],
            request(5, "ping", json!({"_meta": modern_meta()})),
            404,
            -32601,
        ),
        (
            vec![
                ("Mcp-Method", "tools/call"),
                ("MCP-Protocol-Version", V_MODERN),
                ("Mcp-Name", "other"),
            ],
            modern_call(6, "server_metrics", json!({})),
            400,
            -32020,
        ),
        (
            vec![
                ("Mcp-Method", "tools/call"),
                ("MCP-Protocol-Version", V_MODERN),
                ("Mcp-Name", "  server_metrics  "),
            ],
            modern_call(7, "server_metrics", json!({})),
            200,
            0,
        ),
        (
            vec![
                ("Mcp-Method", "tools/call"),
                ("MCP-Protocol-Version", V_MODERN),
                ("Mcp-Name", "=?base64?c2VydmVyX21ldHJpY3M=?="),
            ],
            modern_call(8, "server_metrics", json!({})),
            200,
            0,
        ),
    ];
    for (headers, body, status, code) in cases {
        let r = h.post(&body, &headers);
        assert_eq!(r.status, status, "{headers:?} {body}: {}", r.text());
        let frame = r.json();
        assert_eq!(frame["id"], body["id"], "errors echo the id");
        if code != 0 {
            assert_eq!(frame["error"]["code"], code, "{headers:?}: {frame}");
            assert!(frame.get("result").is_none());
        } else {
            assert_frame(Era::Modern, body["method"].as_str().unwrap(), &frame);
        }
    }
    let r = h.post(
        &request(9, "tools/list", json!({})),
        &[
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", "tools/list"),
        ],
    );
    assert_eq!(
        r.json()["error"]["data"]["missing"],
        json!([
            "io.modelcontextprotocol/protocolVersion",
            "io.modelcontextprotocol/clientCapabilities"
        ])
    );
    // The bare dual-era probe is answered, shaped.
    let r = h.post(
        &request("server-discover-probe-1", "server/discover", json!({})),
        &[],
    );
    assert_eq!(r.status, 200);
    assert_frame(Era::Modern, "server/discover", &r.json());
    // Unparsable and invalid bodies.
    let auth = format!("Bearer {TOKEN}");
    let r = h.send("POST", "/mcp", &[("Authorization", &auth)], b"{not json");
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_i64()),
        (400, Some(-32700))
    );
    let r = h.send("POST", "/mcp", &[("Authorization", &auth)], b"[1]");
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
}

#[test]
fn progress_streams_over_sse_then_the_result() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 1500}));
    let audit = std::env::temp_dir().join(format!("pa-http-audit-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&audit);
    let mut env = env_for(&fake);
    env.extend(http_env(&[(
        "PERPLEXITY_AUDIT_LOG_PATH",
        audit.to_str().unwrap(),
    )]));
    let h = Http::start(&env);
    let mut call = modern_call(1, "perplexity_agent", json!({"query": "q"}));
    call["params"]["_meta"]["progressToken"] = json!("tok-1");
    let r = h.modern(&call);
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let frames = r.events();
    let (last, progress) = frames.split_last().expect("frames");
    assert!(!progress.is_empty(), "at least one progress notification");
    let mut previous = f64::MIN;
    for p in progress {
        assert_frame(Era::Modern, "tools/call", p);
        assert_eq!(p["method"], "notifications/progress");
        assert_eq!(p["params"]["progressToken"], "tok-1");
        let value = p["params"]["progress"].as_f64().unwrap();
        assert!(value > previous);
        previous = value;
    }
    assert_frame(Era::Modern, "tools/call", last);
    assert_eq!(last["id"], 1);
    let (text, is_error) = tool_text(last);
    assert!(
        !is_error && text.contains("<untrusted-web-content-"),
        "{text}"
    );

    // Legacy, in a session, likewise.
    let session = h.initialize();
    let mut call = call_with_progress(2, "perplexity_agent", json!({"query": "q"}), json!(7));
    call["params"]["_meta"]["progressToken"] = json!(7);
    let r = h.post(&call, &[("Mcp-Session-Id", &session)]);
    let frames = r.events();
    assert!(frames.len() >= 2, "{frames:?}");
    assert_frame(Era::Legacy, "tools/call", frames.last().unwrap());

    // Through the same guard as stdio: audited, with this front end named.
    wait_until("the audit records", Duration::from_secs(5), || {
        std::fs::read_to_string(&audit).is_ok_and(|t| t.matches("\"tool_result\"").count() >= 2)
    });
    let log = std::fs::read_to_string(&audit).unwrap();
    for line in log.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        assert_eq!(record["front_end"], "mcp-http", "{record}");
    }
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn closing_a_modern_stream_ends_the_wait_but_never_the_run() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let mut env = env_for(&fake);
    env.extend(http_env(&[]));
    let h = Http::start(&env);
    let call = modern_call(1, "perplexity_agent", json!({"query": "q"}));
    let body = call.to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", h.port)).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nMCP-Protocol-Version: {V_MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: perplexity_agent\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    wait_until("the run to be created", Duration::from_secs(5), || {
        fake.requests().iter().any(|r| r.method == "POST")
    });
    drop(stream);
    wait_until("the wait to end", Duration::from_secs(5), || {
        h.server
            .stderr()
            .contains("stopped waiting for research run")
    });
    assert!(
        fake.requests().iter().all(|r| !r.path.ends_with("/cancel")),
        "the upstream run is never cancelled"
    );
}

#[test]
fn sigterm_drains_then_tells_waiting_callers_which_run_to_collect() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let mut env = env_for(&fake);
    env.extend(http_env(&[("PERPLEXITY_HTTP_DRAIN_SECONDS", "1")]));
    let mut h = Http::start(&env);
    let client = h.client;
    let waiting = std::thread::spawn(move || {
        client.modern(&modern_call(1, "perplexity_agent", json!({"query": "q"})))
    });
    wait_until("the run to be created", Duration::from_secs(5), || {
        fake.requests().iter().any(|r| r.method == "POST")
    });
    let started = Instant::now();
    signal(h.server.pid(), "TERM");
    let r = waiting.join().unwrap();
    let (text, is_error) = tool_text(&r.json());
    assert!(is_error);
    let run = fake.runs()[0].id.clone();
    assert_eq!(
        text,
        crate::shutdown::shutdown_reply(&run),
        "the same words as on stdio"
    );
    let status = h.server.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    // The operator sees the drain begin and end at the default log level.
    let err = h.server.stderr();
    assert!(
        err.contains("stop signal received: no new connections are taken, and calls in flight have 1s (PERPLEXITY_HTTP_DRAIN_SECONDS) to finish")
            && err.contains("drain period over after 1s: the waits still in flight end now"),
        "{err}"
    );
}

/// A header left out is reported as missing, one that differs as a mismatch: a client
/// author fixes the two differently.
#[test]
fn a_missing_modern_header_is_called_missing() {
    let h = Http::start(&http_env(&[]));
    let call = modern_call(1, "server_metrics", json!({}));
    let message = |headers: &[(&str, &str)]| {
        let r = h.post(&call, headers);
        assert_eq!(r.status, 400);
        let frame = r.json();
        assert_eq!(frame["error"]["code"], -32020, "{frame}");
        frame["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let version = ("MCP-Protocol-Version", V_MODERN);
    assert_eq!(
        message(&[version, ("Mcp-Name", "server_metrics")]),
        "Header missing: Mcp-Method."
    );
    assert_eq!(
        message(&[
            version,
            ("Mcp-Method", "tools/list"),
            ("Mcp-Name", "server_metrics")
        ]),
        "Header mismatch: Mcp-Method."
    );
    assert_eq!(
        message(&[version, ("Mcp-Method", "tools/call")]),
        "Header missing: Mcp-Name."
    );
    assert_eq!(
        message(&[
            version,
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "retrieve")
        ]),
        "Header mismatch: Mcp-Name."
    );
}

/// `healthcheck` (the container's probe) against a real server, nothing, and a listener
/// that is not ours; it never knocks on another machine.
#[test]
fn healthcheck_says_whether_the_local_server_answers() {
    let h = Http::start(&http_env(&[]));
    let bind = format!("127.0.0.1:{}", h.port);
    let (out, err, code) = run_cli(&["healthcheck", "--bind", &bind], &[]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
    // A server on every interface is probed on loopback.
    let any = format!("0.0.0.0:{}", h.port);
    assert_eq!(run_cli(&["healthcheck", "--bind", &any], &[]).2, 0);

    // Something else on a port: not healthy, and said so.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_bind = other.local_addr().unwrap().to_string();
    let answering = std::thread::spawn(move || {
        if let Ok((mut s, _)) = other.accept() {
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 503 Busy\r\nContent-Length: 2\r\n\r\nno");
        }
    });
    let (_, err, code) = run_cli(
        &["healthcheck", "--bind", &other_bind, "--timeout", "2"],
        &[],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unhealthy") && err.contains("503"), "{err}");
    answering.join().unwrap();
    // Nothing listening (the port just freed).
    let (_, err, code) = run_cli(&["healthcheck", "--bind", &other_bind], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing answers"), "{err}");
    // Another machine's address is refused before any connection.
    let (_, err, code) = run_cli(&["healthcheck", "--bind", "192.0.2.1:80"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("loopback"), "{err}");
}

#[test]
fn a_traceparent_header_is_the_calls_trace() {
    let theirs = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let fake = FakePerplexity::start_with(json!({"duration_ms": 0}));
    let mut env = env_for(&fake);
    env.extend(http_env(&[]));
    let h = Http::start(&env);
    let headers = [
        ("MCP-Protocol-Version", V_MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "perplexity_agent"),
        ("traceparent", theirs),
    ];
    let r = h.post(
        &modern_call(1, "perplexity_agent", json!({"query": "q"})),
        &headers,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let create = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == "/v1/agent")
        .expect("a create");
    let sent = create
        .headers
        .get("traceparent")
        .cloned()
        .unwrap_or_default();
    assert!(
        sent.starts_with("00-0af7651916cd43dd8448eb211c80319c-")
            && !sent.contains("b7ad6b7169203331"),
        "{sent}"
    );
}

/// The start-up summary (`perplexity-agent: auth: …`), the line after the listening
/// line, once it is written whole (stderr may be read between the two).
pub fn start_up_summary(server: &Server) -> String {
    let mut line = String::new();
    wait_until("the start-up summary", Duration::from_secs(10), || {
        let err = server.stderr();
        match err
            .lines()
            .find(|l| l.starts_with("perplexity-agent: auth: "))
        {
            // Only a whole line: the one after it has begun, or the text ends with it.
            Some(found) if err.contains(&format!("{found}\n")) => {
                line = found.to_owned();
                true
            }
            _ => false,
        }
    });
    line
}

/// What an operator needs to know first, in one line after the listening line: the auth
/// mode, the budgets, the state backend, the hosts and metrics — never the token, its hash
/// or the metrics token.
#[test]
fn the_start_up_summary_names_the_single_token_mode_and_never_the_token() {
    const METRICS_TOKEN: &str = "e2e-metrics-token-0123456789abcdef012345";
    let h = Http::start(&http_env(&[
        ("PERPLEXITY_BUDGET_DAILY", "5"),
        ("PERPLEXITY_BUDGET_MONTHLY", "100.5"),
        (
            "PERPLEXITY_HTTP_ALLOWED_HOSTS",
            "mcp.example.com, Other.Example",
        ),
        ("PERPLEXITY_METRICS", "on"),
        ("PERPLEXITY_METRICS_TOKEN", METRICS_TOKEN),
    ]));
    assert_eq!(
        start_up_summary(&h.server),
        "perplexity-agent: auth: single token (PERPLEXITY_HTTP_AUTH_TOKEN); budgets: 5.00 a day, 100.50 a month; state: local; hosts: loopback, mcp.example.com, other.example; metrics: on"
    );
    let err = h.server.stderr();
    let digest: String = <sha2::Sha256 as sha2::Digest>::digest(TOKEN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    for secret in [TOKEN, METRICS_TOKEN, digest.as_str()] {
        assert!(!err.contains(secret), "a secret on stderr: {err}");
    }

    // The defaults: no budget, metrics off.
    let h = Http::start(&http_env(&[]));
    assert_eq!(
        start_up_summary(&h.server),
        "perplexity-agent: auth: single token (PERPLEXITY_HTTP_AUTH_TOKEN); budgets: none; state: local; hosts: loopback; metrics: off"
    );
}

/// With OAuth, the summary names the issuer and the audience the tokens must carry; a
/// password written into the issuer's URL is never shown.
#[test]
fn the_start_up_summary_names_the_oauth_issuer_and_audience() {
    let audience = "http://127.0.0.1:9/mcp";
    let env = |issuer: &str| -> Vec<(String, String)> {
        [
            ("PERPLEXITY_OAUTH_ISSUER", issuer),
            ("PERPLEXITY_OAUTH_AUDIENCE", audience),
            ("PERPLEXITY_BUDGET_MONTHLY", "40"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    };
    let h = Http::start(&env("https://id.example.com"));
    assert_eq!(
        start_up_summary(&h.server),
        "perplexity-agent: auth: OAuth (issuer https://id.example.com, audience http://127.0.0.1:9/mcp); budgets: 40.00 a month; state: local; hosts: loopback; metrics: off"
    );
    let h = Http::start(&env(
        "https://operator:issuer-secret-42@id.example.com/realm",
    ));
    let line = start_up_summary(&h.server);
    assert!(
        line.contains("auth: OAuth (issuer https://operator:***@id.example.com/realm, audience"),
        "{line}"
    );
    assert!(!h.server.stderr().contains("issuer-secret-42"));
}

/// With a shared Redis, the summary names where it is (host and port), never the
/// password in `PERPLEXITY_STATE_URL`.
#[test]
fn the_start_up_summary_names_the_shared_state_never_its_password() {
    let test = "the_start_up_summary_names_the_shared_state_never_its_password";
    if !installed_or_skip("redis-server", test, "apt-get install redis-server") {
        return;
    }
    const PASSWORD: &str = "state-password-0123456789";
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    /// Stopped and reaped however the test ends.
    struct Stopped(std::process::Child);
    impl Drop for Stopped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let redis = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--requirepass",
            PASSWORD,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let _redis = Stopped(redis);
    wait_until("Redis to listen", Duration::from_secs(10), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let fake = FakePerplexity::start();
    let mut env = env_for(&fake);
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{port}/0");
    env.extend(http_env(&[("PERPLEXITY_STATE_URL", url.as_str())]));
    let h = Http::start(&env);
    let line = start_up_summary(&h.server);
    assert!(
        line.contains(&format!("; state: shared (Redis at 127.0.0.1:{port});")),
        "{line}"
    );
    assert!(!h.server.stderr().contains(PASSWORD));
}
