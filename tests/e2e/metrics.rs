//! `GET /metrics`, black-box: off unless asked; its own listener, where a loopback peer
//! may scrape without the metrics token, while on `/mcp`'s listener (where a reverse
//! proxy's clients arrive from loopback too) only the token does; the Host rule of `/mcp`
//! in front of both; the exposition accepted by
//! Debian's `promtool check metrics` and scraped by a real Prometheus server started here
//! on loopback; counters that move with the calls; no secret or query in any label.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::common::*;
use crate::http::{Http, TOKEN, http_env};

const METRICS_TOKEN: &str = "metrics-token-0123456789abcdef0123456789";

/// Whether Debian's Prometheus tools are here (CI installs them).
fn have(tool: &str, test: &str) -> bool {
    installed_or_skip(tool, test, "apt-get install prometheus")
}

fn scrape(h: &Http, token: Option<&str>) -> crate::http::Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    h.send("GET", "/metrics", &headers, b"")
}

fn server(fake: &FakePerplexity, extra: &[(&str, &str)]) -> Http {
    let mut env = env_for(fake);
    env.extend(http_env(extra));
    Http::start(&env)
}

#[test]
fn metrics_are_off_unless_asked_and_a_token_without_them_is_refused() {
    let fake = FakePerplexity::start();
    let h = server(&fake, &[]);
    assert_eq!(scrape(&h, None).status, 404);
    let mut env = env_for(&fake);
    env.extend(http_env(&[("PERPLEXITY_METRICS_TOKEN", METRICS_TOKEN)]));
    let (_, err, code) = run_cli(&["serve", "--http", "--bind", "127.0.0.1:0"], &env);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("PERPLEXITY_METRICS=on"), "{err}");
    assert!(!err.contains(METRICS_TOKEN));
}

#[test]
fn a_scrape_needs_its_token_moves_with_the_calls_and_passes_promtool() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "cost": 0.03}));
    let h = server(
        &fake,
        &[
            ("PERPLEXITY_METRICS", "on"),
            ("PERPLEXITY_METRICS_TOKEN", METRICS_TOKEN),
        ],
    );
    // The caller's token is not the metrics token, nor is nothing, nor a foreign Host;
    // on either listener.
    assert_eq!(scrape(&h, None).status, 401);
    assert_eq!(scrape(&h, Some(TOKEN)).status, 401);
    let own = h.metrics().send("GET", "/metrics", &[], b"");
    assert_eq!(own.status, 401, "{}", own.text());
    let rebound = h.send(
        "GET",
        "/metrics",
        &[
            ("Host", "evil.example"),
            ("Authorization", &format!("Bearer {METRICS_TOKEN}")),
        ],
        b"",
    );
    assert_eq!(rebound.status, 403);

    let query = "a question nobody should see in a label";
    let ok = h.modern(&modern_call(1, "perplexity_agent", json!({"query": query})));
    assert_eq!(ok.status, 200);
    let bad = h.modern(&modern_call(
        2,
        "perplexity_agent",
        json!({"query": query, "nope": 1}),
    ));
    assert_eq!(bad.status, 200);
    let reply = scrape(&h, Some(METRICS_TOKEN));
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(
        reply
            .header("content-type")
            .unwrap_or_default()
            .starts_with("text/plain")
    );
    let text = reply.text();
    for line in [
        r#"perplexity_agent_calls_total{tool="perplexity_agent",front_end="mcp-http",outcome="ok"} 1"#,
        r#"perplexity_agent_calls_total{tool="perplexity_agent",front_end="mcp-http",outcome="refused"} 1"#,
        r#"perplexity_agent_refusals_total{reason="validation"} 1"#,
        r#"perplexity_agent_spend_microdollars_total{caller="default",tool="perplexity_agent"} 30000"#,
        r#"perplexity_agent_caller_calls_total{caller="default",outcome="ok"} 1"#,
        r#"perplexity_agent_caller_calls_total{caller="default",outcome="refused"} 1"#,
        r#"perplexity_agent_upstream_circuit_open 0"#,
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in:\n{text}");
    }
    assert!(
        text.contains(
            r#"perplexity_agent_upstream_requests_total{endpoint="create",status="2xx"}"#
        ),
        "{text}"
    );
    assert!(
        text.contains("perplexity_agent_call_duration_seconds_bucket{tool=\"perplexity_agent\""),
        "{text}"
    );
    assert!(
        text.contains(r#"perplexity_agent_build_info{version=""#),
        "{text}"
    );
    for secret in [KEY, TOKEN, METRICS_TOKEN, query] {
        assert!(!text.contains(secret), "{secret} in the exposition");
    }
    // A run handed back unfinished is pending until its cost is learned.
    assert!(
        text.lines().any(|l| l == "perplexity_agent_runs_pending 0"),
        "{text}"
    );
    fake.set_scenario(json!({"duration_ms": 60000}));
    let handed = h.modern(&modern_call(
        3,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    ));
    assert_eq!(handed.status, 200);
    let later = scrape(&h, Some(METRICS_TOKEN)).text();
    assert!(
        later
            .lines()
            .any(|l| l == "perplexity_agent_runs_pending 1"),
        "{later}"
    );
    promtool_accepts(&text);
}

#[test]
fn without_a_token_loopback_peers_may_scrape_the_metrics_listener_only() {
    let fake = FakePerplexity::start();
    let h = server(
        &fake,
        &[
            ("PERPLEXITY_METRICS", "on"),
            ("PERPLEXITY_HTTP_ALLOWED_HOSTS", "mcp.example.com"),
        ],
    );
    let metrics = h.metrics();
    let err = h.server.stderr();
    assert!(err.contains("metrics on http://127.0.0.1:"), "{err}");
    assert_ne!(metrics.port, h.port);
    let reply = metrics.send("GET", "/metrics", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.text().contains("perplexity_agent_build_info"));
    // What a reverse proxy on this host forwards to /mcp's listener: a loopback peer,
    // the public name. Nothing of the exposition, with or without the name.
    for host in ["mcp.example.com", &format!("127.0.0.1:{}", h.port)] {
        let proxied = h.send("GET", "/metrics", &[("Host", host)], b"");
        assert_eq!(proxied.status, 404, "{host}: {}", proxied.text());
        assert!(!proxied.text().contains("perplexity_agent_"), "{host}");
    }
    // The metrics listener serves nothing else.
    assert_eq!(metrics.send("GET", "/healthz", &[], b"").status, 404);
    assert_eq!(metrics.post(&json!({}), &[]).status, 404);
}

#[test]
fn a_metrics_listener_that_cannot_listen_stops_the_start() {
    let fake = FakePerplexity::start();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bind = taken.local_addr().unwrap().to_string();
    let mut env = env_for(&fake);
    env.extend(http_env(&[
        ("PERPLEXITY_METRICS", "on"),
        ("PERPLEXITY_METRICS_BIND", &bind),
    ]));
    let (_, err, code) = run_cli(&["serve", "--http", "--bind", "127.0.0.1:0"], &env);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("PERPLEXITY_METRICS_BIND"), "{err}");
}

/// The caller label values of the exposition's series.
fn callers(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split("caller=\"").nth(1)?.split('"').next())
        .map(str::to_owned)
        .collect()
}

/// The exposition, through the metrics listener (a loopback peer needs no token).
fn scraped(h: &Http) -> String {
    let reply = h.metrics().send("GET", "/metrics", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.text()
}

/// Every `line` is one of the exposition's, exactly.
fn has_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.lines().any(|l| l == *line), "no {line} in:\n{text}");
    }
}

/// Calls counted by caller: each named client of the clients file under its own name, by
/// outcome; a token the file does not hold adds no caller, and a client a reload removed
/// gets no new increment (its series stays as it was until the restart).
#[test]
fn calls_are_counted_by_named_client_and_a_stranger_adds_no_caller() {
    use crate::tasks::post;
    use crate::team::{TOKEN_A, TOKEN_B, clients_file};
    let fake = FakePerplexity::start_with(json!({"answer": "ok", "cost": 0.01}));
    let dir = Scratch::new("metrics-clients");
    // alice has every tool; bot has `search` at one call a minute.
    let (file, mut env) = env_with_clients(&fake, &dir, &clients_file(TOKEN_A));
    env.push(("PERPLEXITY_METRICS".into(), "on".into()));
    crate::http::with_metrics_port(&mut env);
    let h = Http::start(&env);
    let call = |token: &str, id: i64, tool: &str, arguments: serde_json::Value| {
        post(&h, token, &modern_call(id, tool, arguments))
    };
    for id in 1..=2 {
        let ok = call(TOKEN_A, id, "perplexity_agent", json!({"query": "q"}));
        assert_eq!(ok["result"]["isError"], false, "{ok}");
    }
    let bad = call(
        TOKEN_A,
        3,
        "perplexity_agent",
        json!({"query": "q", "nope": 1}),
    );
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    fake.push_fault(json!({"route": "create", "status": 401, "json": {"error": {"message": "Invalid API key"}}}));
    let failed = call(TOKEN_A, 4, "perplexity_agent", json!({"query": "q"}));
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let searched = call(TOKEN_B, 5, "perplexity_search", json!({"query": "q"}));
    assert_eq!(searched["result"]["isError"], false, "{searched}");
    let limited = call(TOKEN_B, 6, "perplexity_search", json!({"query": "q"}));
    assert_eq!(limited["result"]["isError"], true, "{limited}");
    // A token the file does not hold never reaches a tool.
    let stranger = h.post_as(
        "pa_nobody-0123456789abcdef0123456789abcdef",
        &modern_call(7, "perplexity_search", json!({"query": "q"})),
        &[
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "perplexity_search"),
        ],
    );
    assert_eq!(stranger.status, 401);

    let text = scraped(&h);
    has_lines(
        &text,
        &[
            r#"perplexity_agent_caller_calls_total{caller="alice",outcome="ok"} 2"#,
            r#"perplexity_agent_caller_calls_total{caller="alice",outcome="refused"} 1"#,
            r#"perplexity_agent_caller_calls_total{caller="alice",outcome="error"} 1"#,
            r#"perplexity_agent_caller_calls_total{caller="bot",outcome="ok"} 1"#,
            r#"perplexity_agent_caller_calls_total{caller="bot",outcome="refused"} 1"#,
            // The per-tool counter keeps its labels.
            r#"perplexity_agent_calls_total{tool="perplexity_agent",front_end="mcp-http",outcome="ok"} 2"#,
        ],
    );
    assert_eq!(
        callers(&text),
        ["alice", "bot"].map(String::from).into(),
        "{text}"
    );

    // bot removed, as `clients remove bot` writes the file: a rename over it.
    let alice_only = clients_file(TOKEN_A);
    let second = alice_only.rfind("[[client]]").unwrap();
    let next = dir.path("clients.toml.new");
    std::fs::write(&next, &alice_only[..second]).unwrap();
    std::fs::rename(&next, &file).unwrap();
    wait_until("the reload", Duration::from_secs(10), || {
        h.server.stderr().contains("reloaded 1 clients")
    });
    let gone = h.post_as(
        TOKEN_B,
        &modern_call(8, "perplexity_search", json!({"query": "q"})),
        &[
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "perplexity_search"),
        ],
    );
    assert_eq!(gone.status, 401);
    let ok = call(TOKEN_A, 9, "perplexity_agent", json!({"query": "q"}));
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let later = scraped(&h);
    has_lines(
        &later,
        &[
            r#"perplexity_agent_caller_calls_total{caller="alice",outcome="ok"} 3"#,
            r#"perplexity_agent_caller_calls_total{caller="bot",outcome="ok"} 1"#,
            r#"perplexity_agent_caller_calls_total{caller="bot",outcome="refused"} 1"#,
        ],
    );
    assert_eq!(
        callers(&later),
        ["alice", "bot"].map(String::from).into(),
        "{later}"
    );
    promtool_accepts(&later);
}

/// `promtool check metrics` lints the exposition clean (when Debian's Prometheus tools
/// are here).
fn promtool_accepts(text: &str) {
    if !have("promtool", "metrics") {
        return;
    }
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(check.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    drop(check.stdin.take());
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Prometheus server, stopped (by PID) when dropped.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_real_prometheus_scrapes_the_server() {
    if !have("prometheus", "a_real_prometheus_scrapes_the_server") {
        return;
    }
    let fake = FakePerplexity::start();
    let h = server(
        &fake,
        &[
            ("PERPLEXITY_METRICS", "on"),
            ("PERPLEXITY_METRICS_TOKEN", METRICS_TOKEN),
        ],
    );
    let dir = Scratch::new("prometheus");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let token_file = dir.path("metrics-token");
    std::fs::write(&token_file, METRICS_TOKEN).unwrap();
    // docs/team.md's prometheus.yml, pointed at this test's server.
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: perplexity-agent\n    authorization:\n      credentials_file: {}\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
        token_file.display(),
        h.port
    );
    let config_file = dir.path("prometheus.yml");
    std::fs::write(&config_file, config).unwrap();
    let _prometheus = Prometheus(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts"),
    );
    let api = crate::http::Client { port };
    let mut last = String::new();
    wait_until(
        "Prometheus to scrape the target",
        Duration::from_secs(60),
        || {
            // Until Prometheus listens, a connection is refused: try again.
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                return false;
            }
            let reply = api.send("GET", "/api/v1/targets", &[], b"");
            last = reply.text();
            reply.status == 200
                && serde_json::from_slice::<serde_json::Value>(&reply.body)
                    .is_ok_and(|v| v["data"]["activeTargets"][0]["health"] == "up")
        },
    );
    assert!(last.contains("\"health\":\"up\""), "{last}");
}
