//! Several `serve --http` replicas sharing one Redis (`PERPLEXITY_STATE_URL`), behind a
//! real HAProxy, black-box: Debian's `redis-server` and `haproxy` started here on loopback
//! ports and stopped by PID. What belongs here: whatever the replicas must agree on
//! (the rate limit), how a replica behaves when Redis goes away and comes back, and the
//! start-up errors of a backend that cannot be used.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;
use crate::http::{Client, Http, http_env};

fn have(program: &str, test: &str) -> bool {
    installed_or_skip(program, test, "apt-get install redis-server haproxy")
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A child process stopped (SIGKILL) and reaped when dropped.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Redis with nothing on disk, on `port`, optionally with a password.
fn redis(port: u16, password: Option<&str>) -> Stopped {
    let mut command = Command::new("redis-server");
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"]);
    if let Some(password) = password {
        command.args(["--requirepass", password]);
    }
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    wait_until("Redis to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Stopped(child)
}

/// HAProxy on `port`, round robin over `backends`, each checked on `/readyz`.
fn haproxy(dir: &Scratch, port: u16, backends: &[u16]) -> Stopped {
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, p)| format!("    server r{i} 127.0.0.1:{p} check inter 500ms fall 2 rise 1\n"))
        .collect();
    let config = format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 60s\n    timeout server 60s\n\
         frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\
         backend replicas\n    balance roundrobin\n    option httpchk\n    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1\n{servers}"
    );
    let file = dir.path("haproxy.cfg");
    std::fs::write(&file, config).unwrap();
    let child = Command::new("haproxy")
        .args(["-db", "-f"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy starts");
    wait_until("HAProxy to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Stopped(child)
}

fn replica(fake: &FakePerplexity, redis_port: u16, extra: &[(&str, &str)]) -> Http {
    let mut env = env_for(fake);
    let url = format!("redis://127.0.0.1:{redis_port}");
    let mut all = vec![
        ("PERPLEXITY_STATE_URL", url.as_str()),
        ("PERPLEXITY_RATE_PER_MINUTE", "1"),
        ("PERPLEXITY_RATE_BURST", "10"),
    ];
    all.extend_from_slice(extra);
    env.extend(http_env(&all));
    Http::start(&env)
}

fn ready(client: Client) -> u16 {
    client.send("GET", "/readyz", &[], b"").status
}

/// 30 calls at once through `client`: how many were admitted, how many rate-limited.
fn storm(client: Client, calls: usize) -> (usize, usize) {
    let handles: Vec<_> = (0..calls)
        .map(|i| {
            std::thread::spawn(move || {
                let reply = client.modern(&modern_call(
                    i as i64,
                    "perplexity_agent",
                    json!({"query": format!("question {i}")}),
                ));
                assert_eq!(reply.status, 200, "{}", reply.text());
                tool_text(&reply.json())
            })
        })
        .collect();
    let (mut ok, mut limited) = (0, 0);
    for handle in handles {
        let (text, is_error) = handle.join().unwrap();
        if !is_error {
            ok += 1;
        } else if text.starts_with("Rate limit exceeded") {
            limited += 1;
        } else {
            panic!("neither admitted nor rate-limited: {text}");
        }
    }
    (ok, limited)
}

#[test]
fn three_replicas_behind_haproxy_share_one_rate_limit() {
    if !have(
        "redis-server",
        "three_replicas_behind_haproxy_share_one_rate_limit",
    ) || !have(
        "haproxy",
        "three_replicas_behind_haproxy_share_one_rate_limit",
    ) {
        return;
    }
    let dir = Scratch::new("replicas");
    let redis_port = free_port();
    let _redis = redis(redis_port, None);
    let fake = FakePerplexity::start();
    let audit: Vec<_> = (0..3)
        .map(|i| dir.path(&format!("audit-{i}.jsonl")))
        .collect();
    let replicas: Vec<Http> = (0..3)
        .map(|i| {
            let (id, log) = (format!("r{i}"), audit[i].display().to_string());
            let extra = [
                ("PERPLEXITY_REPLICA_ID", id.as_str()),
                ("PERPLEXITY_AUDIT_LOG_PATH", log.as_str()),
            ];
            replica(&fake, redis_port, &extra)
        })
        .collect();
    for r in &replicas {
        wait_until("each replica to be ready", Duration::from_secs(10), || {
            ready(r.client) == 200
        });
    }
    let lb_port = free_port();
    let _lb = haproxy(
        &dir,
        lb_port,
        &replicas.iter().map(|r| r.port).collect::<Vec<_>>(),
    );
    let lb = Client { port: lb_port };
    wait_until(
        "HAProxy to see the replicas up",
        Duration::from_secs(10),
        || ready(lb) == 200,
    );
    // Burst 10, one token a minute: ten calls between all three replicas, not thirty.
    let (ok, limited) = storm(lb, 30);
    assert_eq!((ok, limited), (10, 20));
    let served = fake.runs().len();
    assert_eq!(served, 10, "{served} runs reached Perplexity");
    // Every replica took calls (the limit held across processes, not inside one), and
    // each record names its replica.
    drop(replicas);
    for (i, log) in audit.iter().enumerate() {
        let records = audit_records(log);
        let calls = records
            .iter()
            .filter(|r| r["tool"] == "perplexity_agent")
            .count();
        assert!(calls > 0, "replica r{i} got no call");
        assert!(
            records.iter().all(|r| r["replica"] == format!("r{i}")),
            "{records:#?}"
        );
    }
}

#[test]
fn a_replica_fails_closed_while_redis_is_away_and_recovers_by_itself() {
    if !have(
        "redis-server",
        "a_replica_fails_closed_while_redis_is_away_and_recovers_by_itself",
    ) {
        return;
    }
    let redis_port = free_port();
    let mut redis_server = Some(redis(redis_port, None));
    let fake = FakePerplexity::start();
    let h = replica(&fake, redis_port, &[("PERPLEXITY_RATE_PER_MINUTE", "6000")]);
    wait_until("the replica to be ready", Duration::from_secs(10), || {
        ready(h.client) == 200
    });
    let call = |id: i64| {
        tool_text(
            &h.modern(&modern_call(id, "perplexity_agent", json!({"query": "q"})))
                .json(),
        )
    };
    assert!(!call(1).1);

    drop(redis_server.take());
    // A billable call is refused at once (inside the operation deadline, not a hang),
    // and nothing reaches Perplexity.
    let before = fake.runs().len();
    let started = Instant::now();
    let (text, is_error) = call(2);
    assert!(is_error && text.contains("shared state backend"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(fake.runs().len(), before);
    // What needs no state still answers; readiness says the replica should get no calls.
    let list = h.modern(&crate::http::modern_tools_list(3));
    assert_eq!(list.status, 200);
    assert_eq!(h.send("GET", "/healthz", &[], b"").status, 200);
    wait_until("/readyz to say not ready", Duration::from_secs(5), || {
        ready(h.client) == 503
    });
    std::thread::sleep(Duration::from_secs(2));

    redis_server = Some(redis(redis_port, None));
    wait_until(
        "/readyz to say ready again",
        Duration::from_secs(15),
        || ready(h.client) == 200,
    );
    assert!(!call(4).1, "calls are admitted again without a restart");
    let err = h.server.stderr();
    assert!(
        err.contains("the state backend") && err.contains("answers again"),
        "{err}"
    );
    drop(redis_server);
}

#[test]
fn a_wrong_password_is_a_clear_start_up_error() {
    if !have("redis-server", "a_wrong_password_is_a_clear_start_up_error") {
        return;
    }
    let redis_port = free_port();
    let _redis = redis(redis_port, Some("right-password-0123"));
    let fake = FakePerplexity::start();
    let mut env = env_for(&fake);
    let url = format!("redis://:wrong-password-4567@127.0.0.1:{redis_port}");
    env.extend(http_env(&[("PERPLEXITY_STATE_URL", url.as_str())]));
    let started = Instant::now();
    let (_, err, code) = run_cli(&["serve", "--http", "--bind", "127.0.0.1:0"], &env);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("refused our credentials"), "{err}");
    assert!(!err.contains("wrong-password-4567"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // doctor says the same, as a failed check.
    let (out, _, code) = run_cli(&["doctor"], &env);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("Shared state") && l.contains("refused our credentials")),
        "{out}"
    );
    assert!(!out.contains("wrong-password-4567"), "{out}");
    // The right password, given apart from the URL, is accepted.
    let right = format!("redis://127.0.0.1:{redis_port}");
    let mut env = env_for(&fake);
    env.extend(http_env(&[
        ("PERPLEXITY_STATE_URL", right.as_str()),
        ("PERPLEXITY_STATE_PASSWORD", "right-password-0123"),
    ]));
    let h = Http::start(&env);
    wait_until("the replica to be ready", Duration::from_secs(10), || {
        ready(h.client) == 200
    });
}
