//! Several `serve --http` replicas sharing one Redis (`PERPLEXITY_STATE_URL`), behind a
//! real HAProxy, black-box: Debian's `redis-server` and `haproxy` started here on loopback
//! ports and stopped by PID. What belongs here: whatever the replicas must agree on
//! (the rate limit), how a replica behaves when Redis goes away and comes back, and the
//! start-up errors of a backend that cannot be used.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;
use crate::http::{Client, Http, TOKEN, http_env};
use crate::tasks::{post, task_call, tasks_request};

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

/// HAProxy on `port` running the shipped `deploy/haproxy.cfg` (round robin, `/readyz`
/// checks, sticky legacy sessions) over `backends` (one to eight).
fn haproxy(port: u16, backends: &[u16]) -> Stopped {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/haproxy.cfg");
    let mut command = Command::new("haproxy");
    command
        .args(["-db", "-f", config])
        .env("MCP_BIND", format!("127.0.0.1:{port}"));
    for (i, backend) in backends.iter().enumerate() {
        command.env(format!("REPLICA_{}", i + 1), format!("127.0.0.1:{backend}"));
    }
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy starts");
    wait_until("HAProxy to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Stopped(child)
}

/// HAProxy in front of three ready replicas, once it sees them up: it and its address.
fn behind_haproxy(replicas: &[Http]) -> (Stopped, Client) {
    for r in replicas {
        wait_until("each replica to be ready", Duration::from_secs(10), || {
            ready(r.client) == 200
        });
    }
    let port = free_port();
    let ports: Vec<u16> = replicas.iter().map(|r| r.port).collect();
    let lb = haproxy(port, &ports);
    let client = Client { port };
    wait_until(
        "HAProxy to see the replicas up",
        Duration::from_secs(10),
        || ready(client) == 200,
    );
    (lb, client)
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

/// `calls` calls at once through `client` as the holder of `token`: how many were
/// admitted, how many rate-limited.
fn storm(client: Client, token: &'static str, calls: usize) -> (usize, usize) {
    refused_in_storm(client, token, calls, "Rate limit exceeded", true)
}

/// [`storm`] with the refusals recognised by `refusal` (a text they start with), each call
/// waiting for its answer or not.
fn refused_in_storm(
    client: Client,
    token: &'static str,
    calls: usize,
    refusal: &'static str,
    wait: bool,
) -> (usize, usize) {
    let handles: Vec<_> = (0..calls)
        .map(|i| {
            std::thread::spawn(move || {
                let message = modern_call(
                    i as i64,
                    "perplexity_agent",
                    json!({"query": format!("question {i}"), "wait": wait}),
                );
                let headers = [
                    ("MCP-Protocol-Version", V_MODERN),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", "perplexity_agent"),
                ];
                let reply = client.post_as(token, &message, &headers);
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
        } else if text.starts_with(refusal) {
            limited += 1;
        } else {
            panic!("neither admitted nor rate-limited: {text}");
        }
    }
    (ok, limited)
}

/// The shipped config takes as many replicas as are named (`REPLICA_1`…): two serve
/// through it as well as three.
#[test]
fn the_shipped_haproxy_config_serves_two_replicas() {
    if !have("haproxy", "the_shipped_haproxy_config_serves_two_replicas") {
        return;
    }
    let fake = FakePerplexity::start();
    let mut env = env_for(&fake);
    env.extend(http_env(&[]));
    let replicas = [Http::start(&env), Http::start(&env)];
    for r in &replicas {
        wait_until("the replica to be ready", Duration::from_secs(10), || {
            ready(r.client) == 200
        });
    }
    let port = free_port();
    let ports: Vec<u16> = replicas.iter().map(|r| r.port).collect();
    let _lb = haproxy(port, &ports);
    let lb = Client { port };
    wait_until(
        "HAProxy to see a replica ready",
        Duration::from_secs(10),
        || ready(lb) == 200,
    );
    for id in 0..4 {
        let r = lb.modern(&crate::http::modern_tools_list(id));
        assert_eq!(r.status, 200, "{}", r.text());
    }
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
    let (_lb, lb) = behind_haproxy(&replicas);
    // A 2025-11-25 session is made on one replica and stays there (sticky on
    // Mcp-Session-Id): every request naming it is answered, whichever turn it is.
    let session = lb.initialize();
    for id in 1..=6 {
        let r = lb.post(
            &request(id, "tools/list", json!({})),
            &[
                ("Mcp-Session-Id", session.as_str()),
                ("MCP-Protocol-Version", V_LEGACY),
            ],
        );
        assert_eq!(r.status, 200, "request {id} of the session: {}", r.text());
    }
    // Burst 10, one token a minute: ten calls between all three replicas, not thirty.
    let (ok, limited) = storm(lb, TOKEN, 30);
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
    let h = replica(
        &fake,
        redis_port,
        // A charge that timed out while Redis was stopped is still applied when it runs
        // again (it errs on fewer calls): a bucket large enough for all of them.
        &[
            ("PERPLEXITY_RATE_PER_MINUTE", "60000"),
            ("PERPLEXITY_RATE_BURST", "100000"),
            ("PERPLEXITY_METRICS", "on"),
        ],
    );
    wait_until("the replica to be ready", Duration::from_secs(10), || {
        ready(h.client) == 200
    });
    // `/metrics` (the metrics listener, from loopback, no metrics token) says whether
    // the backend answers.
    let state_up = |h: &Http| {
        let text = h.metrics().send("GET", "/metrics", &[], b"").text();
        text.lines()
            .find_map(|l| l.strip_prefix("perplexity_agent_state_backend_up "))
            .map(str::to_owned)
    };
    assert_eq!(state_up(&h).as_deref(), Some("1"));
    let call = |id: i64| {
        tool_text(
            &h.modern(&modern_call(id, "perplexity_agent", json!({"query": "q"})))
                .json(),
        )
    };
    assert!(!call(1).1);
    // Load all along: four callers, one call after another, each answer timed.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|t| {
            let (client, stop) = (h.client, stop.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut id = 1000 * (t + 1);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let started = Instant::now();
                    let reply = client.modern(&modern_call(
                        id,
                        "perplexity_agent",
                        json!({"query": "load"}),
                    ));
                    seen.push((started.elapsed(), reply.status, tool_text(&reply.json())));
                    id += 1;
                }
                seen
            })
        })
        .collect();

    // Stopped (SIGSTOP): connections are accepted and never answered, the slow case.
    let redis_pid = redis_server.as_ref().map(|r| r.0.id()).unwrap();
    signal(redis_pid, "STOP");
    // A billable call is refused at once (inside the operation deadline, not a hang),
    // and from then on nothing reaches Perplexity (once the calls admitted before the
    // stop have made their runs).
    let started = Instant::now();
    let (text, is_error) = call(2);
    assert!(is_error && text.contains("shared state backend"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_millis(500));
    let before = fake.runs().len();
    // What needs no state still answers; readiness says the replica should get no calls.
    let list = h.modern(&crate::http::modern_tools_list(3));
    assert_eq!(list.status, 200);
    assert_eq!(h.send("GET", "/healthz", &[], b"").status, 200);
    wait_until("/readyz to say not ready", Duration::from_secs(5), || {
        ready(h.client) == 503
    });
    assert_eq!(state_up(&h).as_deref(), Some("0"));
    // Away for ten seconds in all, under the load.
    std::thread::sleep(Duration::from_secs(10).saturating_sub(started.elapsed()));
    assert_eq!(
        fake.runs().len(),
        before,
        "no run started while Redis was stopped"
    );
    signal(redis_pid, "CONT");
    wait_until(
        "/readyz to say ready after the stop",
        Duration::from_secs(15),
        || ready(h.client) == 200,
    );
    let (text, is_error) = call(3);
    assert!(!is_error, "admitted again once Redis answers: {text}");

    // Gone (killed) and started again, empty: the replica reconnects by itself.
    drop(redis_server.take());
    wait_until("/readyz to say not ready", Duration::from_secs(5), || {
        ready(h.client) == 503
    });
    redis_server = Some(redis(redis_port, None));
    wait_until(
        "/readyz to say ready again",
        Duration::from_secs(15),
        || ready(h.client) == 200,
    );
    assert!(!call(4).1, "calls are admitted again without a restart");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen: Vec<_> = load.into_iter().flat_map(|t| t.join().unwrap()).collect();
    // Every call was answered (admitted, or refused saying why) within the deadline's
    // reach — never a hang, never another error — and some were refused.
    let refused = seen
        .iter()
        .filter(|(_, _, (text, is_error))| *is_error && text.contains("shared state backend"))
        .count();
    for (took, status, (text, is_error)) in &seen {
        assert_eq!(*status, 200);
        assert!(!is_error || text.contains("shared state backend"), "{text}");
        assert!(*took < Duration::from_secs(3), "a call took {took:?}");
    }
    assert!(
        refused > 0 && refused < seen.len(),
        "{refused} of {}",
        seen.len()
    );
    assert_eq!(state_up(&h).as_deref(), Some("1"));
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
        crate::install::checks(&out)
            .iter()
            .any(|l| l.starts_with("FAIL Shared state:") && l.contains("refused our credentials")),
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

/// `tasks/get` through `client` until the task leaves `working`.
fn settled(client: &Client, task: &str) -> serde_json::Value {
    let mut last = json!(null);
    wait_until("the task to end", Duration::from_secs(60), || {
        last = post(client, TOKEN, &tasks_request(9, "tasks/get", task))["result"].clone();
        last["status"] != "working"
    });
    last
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn answer_of(task: &serde_json::Value) -> String {
    task["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_task_is_every_replicas_and_outlives_the_one_that_ran_it() {
    if !have(
        "redis-server",
        "a_task_is_every_replicas_and_outlives_the_one_that_ran_it",
    ) {
        return;
    }
    let dir = Scratch::new("replica-tasks");
    let redis_port = free_port();
    let _redis = redis(redis_port, None);
    let fake = FakePerplexity::start_with(json!({"duration_ms": 7000, "answer": "Shared."}));
    let audit: Vec<_> = (0..3)
        .map(|i| dir.path(&format!("audit-{i}.jsonl")))
        .collect();
    let mut replicas: Vec<Option<Http>> = (0..3)
        .map(|i| {
            let (id, log) = (format!("r{i}"), audit[i].display().to_string());
            let extra = [
                ("PERPLEXITY_REPLICA_ID", id.as_str()),
                ("PERPLEXITY_AUDIT_LOG_PATH", log.as_str()),
                ("PERPLEXITY_RATE_PER_MINUTE", "6000"),
                ("PERPLEXITY_STATE_LEASE_MS", "1500"),
            ];
            Some(replica(&fake, redis_port, &extra))
        })
        .collect();
    let client = |i: usize| replicas[i].as_ref().map(|r| r.client).unwrap();
    let (a, b, c) = (client(0), client(1), client(2));
    for r in [a, b, c] {
        wait_until("each replica to be ready", Duration::from_secs(10), || {
            ready(r) == 200
        });
    }

    // Made through A, heard of on C, polled to its end through B.
    let created = post(
        &a,
        TOKEN,
        &task_call(1, "perplexity_agent", json!({"query": "q"})),
    );
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let listen = {
        let task = task.clone();
        std::thread::spawn(move || {
            let listen = request(
                2,
                "subscriptions/listen",
                json!({"_meta": crate::tasks::meta_with_tasks(), "notifications": {"taskIds": [task]}}),
            );
            let r = c.send(
                "POST",
                "/mcp",
                &[
                    ("Authorization", &format!("Bearer {TOKEN}")),
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                    ("MCP-Protocol-Version", V_MODERN),
                    ("Mcp-Method", "subscriptions/listen"),
                ],
                listen.to_string().as_bytes(),
            );
            (r.events(), unix_ms())
        })
    };
    let done = settled(&b, &task);
    assert_eq!(done["status"], "completed", "{done}");
    assert!(answer_of(&done).contains("Shared."), "{done}");
    let (events, heard_at) = listen.join().unwrap();
    let ended = events
        .iter()
        .find(|e| e["method"] == "notifications/tasks")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert!(
        answer_of(&ended["params"]).contains("Shared."),
        "{events:?}"
    );
    // Told when it ended on A (published), not at C's next look at the store.
    let run = fake.runs()[0].clone();
    let (ended_ms, heard_ms) = (run.terminal_at_ms.unwrap(), heard_at);
    assert!(
        heard_ms.saturating_sub(ended_ms) < 2_000,
        "heard {} ms after the run ended",
        heard_ms.saturating_sub(ended_ms)
    );
    // Another caller sharing the same Redis finds nothing: not the task, not in a list.
    let other = "another-e2e-token-fedcba9876543210fedcba98";
    let d = replica(
        &fake,
        redis_port,
        &[
            ("PERPLEXITY_HTTP_AUTH_TOKEN", other),
            ("PERPLEXITY_RATE_PER_MINUTE", "6000"),
        ],
    );
    for (id, method) in [(3, "tasks/get"), (4, "tasks/cancel")] {
        let e = post(&d.client, other, &tasks_request(id, method, &task));
        assert_eq!(e["error"]["code"], -32602, "{method}: {e}");
    }
    let list = |client: Client, token: &str| {
        let session = client.initialize_as(token);
        let headers = [
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", V_LEGACY),
        ];
        client
            .post_as(token, &request(5, "tasks/list", json!({})), &headers)
            .json()
    };
    let theirs = list(d.client, other);
    assert!(theirs["result"]["tasks"].is_array(), "{theirs}");
    assert!(!theirs.to_string().contains(&task), "{theirs}");
    let mine = list(b, TOKEN);
    assert!(mine.to_string().contains(&task), "{mine}");
    drop(d);

    // A dies mid-run (kill -9): the task is adopted and finished by one of B and C.
    fake.set_scenario(json!({"duration_ms": 12000, "answer": "Adopted."}));
    let created = post(
        &a,
        TOKEN,
        &task_call(4, "perplexity_agent", json!({"query": "q2"})),
    );
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    wait_until("the second run to start", Duration::from_secs(10), || {
        fake.runs().len() == 2
    });
    let run = fake.runs()[1].id.clone();
    let dead = replicas[0].take().unwrap();
    signal(dead.server.pid(), "KILL");
    drop(dead);
    let done = settled(&b, &task);
    assert_eq!(done["status"], "completed", "{done}");
    assert!(answer_of(&done).contains("Adopted."), "{done}");
    let through_c = post(&c, TOKEN, &tasks_request(5, "tasks/get", &task));
    assert_eq!(through_c["result"], done, "the same task through C");
    // Collected once: one collector followed the run's event stream to its end (two
    // collectors: two streams).
    std::thread::sleep(Duration::from_secs(2));
    let streams = fake
        .requests()
        .iter()
        .filter(|r| {
            r.method == "GET" && r.path.ends_with(&run) && r.query.as_deref() == Some("stream=true")
        })
        .count();
    assert_eq!(streams, 1, "streams of the run followed by collectors");
    // And by one replica: its audit log has the collecting calls, the other's none.
    drop(replicas);
    let collectors: Vec<usize> = (1..3)
        .filter(|&i| {
            audit_records(&audit[i])
                .iter()
                .any(|r| r["tool"] == "perplexity_agent_result")
        })
        .collect();
    assert_eq!(
        collectors.len(),
        1,
        "replicas that collected: {collectors:?}"
    );
}

#[test]
fn a_retrieve_key_minted_on_one_replica_reads_on_another_for_its_caller_only() {
    if !have(
        "redis-server",
        "a_retrieve_key_minted_on_one_replica_reads_on_another_for_its_caller_only",
    ) {
        return;
    }
    let redis_port = free_port();
    let _redis = redis(redis_port, None);
    let answer: String = (0..400).map(|i| format!("word{i} ")).collect();
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "answer": answer}));
    let budget = [
        ("PERPLEXITY_MAX_OUTPUT_CHARS", "1000"),
        ("PERPLEXITY_RATE_PER_MINUTE", "6000"),
    ];
    let (a, c) = (
        replica(&fake, redis_port, &budget),
        replica(&fake, redis_port, &budget),
    );
    let (text, is_error) = tool_text(
        &a.modern(&modern_call(1, "perplexity_agent", json!({"query": "q"})))
            .json(),
    );
    assert!(!is_error, "{text}");
    let key = text
        .split("retrieve_key=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no retrieve_key in {text}"))
        .to_owned();
    let retrieve = |h: &Http, token: &str| {
        let message = modern_call(2, "retrieve", json!({"retrieve_key": key, "offset": 600}));
        let headers = [
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "retrieve"),
        ];
        tool_text(&h.client.post_as(token, &message, &headers).json())
    };
    let (chunk, is_error) = retrieve(&c, TOKEN);
    assert!(!is_error, "{chunk}");
    assert!(chunk.contains("[Characters 600 to"), "{chunk}");
    // Another caller sharing the backend: the key is unknown, as one never minted.
    let other = "another-e2e-token-fedcba9876543210fedcba98";
    let d = replica(
        &fake,
        redis_port,
        &[
            ("PERPLEXITY_HTTP_AUTH_TOKEN", other),
            ("PERPLEXITY_MAX_OUTPUT_CHARS", "1000"),
        ],
    );
    let (theirs, is_error) = retrieve(&d, other);
    assert!(
        is_error && theirs.starts_with("Unknown or expired retrieve_key"),
        "{theirs}"
    );
}

/// DER as PEM (rcgen's own PEM output is a feature we do not build).
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// A private CA and a certificate it signed for 127.0.0.1 and localhost, as PEM files
/// in `dir`: (CA, certificate, key).
fn private_ca(dir: &Scratch) -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let files = [
        ("ca.pem", pem("CERTIFICATE", ca.der())),
        ("redis.pem", pem("CERTIFICATE", leaf.der())),
        ("redis.key", pem("PRIVATE KEY", &key.serialize_der())),
    ];
    let paths: Vec<String> = files
        .iter()
        .map(|(name, text)| {
            let path = dir.path(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        })
        .collect();
    (paths[0].clone(), paths[1].clone(), paths[2].clone())
}

#[test]
fn rediss_with_a_private_ca_and_an_acl_user() {
    if !have("redis-server", "rediss_with_a_private_ca_and_an_acl_user") {
        return;
    }
    let dir = Scratch::new("replica-tls");
    let (ca, cert, key) = private_ca(&dir);
    let port = free_port();
    // TLS only, and only the ACL user `agent`: the default user is off.
    let child = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args([
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
        ])
        .args([
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--user", "default", "off"])
        .args([
            "--user",
            "agent",
            "on",
            ">acl-password-0123",
            "~*",
            "&*",
            "+@all",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let _redis = Stopped(child);
    wait_until("Redis to listen on TLS", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let fake = FakePerplexity::start();
    let url = format!("rediss://agent@127.0.0.1:{port}");
    let with = |extra: &[(&str, &str)]| {
        let mut env = env_for(&fake);
        let mut all = vec![("PERPLEXITY_STATE_URL", url.as_str())];
        all.extend_from_slice(extra);
        env.extend(http_env(&all));
        env
    };
    let good = [
        ("PERPLEXITY_STATE_PASSWORD", "acl-password-0123"),
        ("PERPLEXITY_STATE_CA_FILE", ca.as_str()),
    ];
    let h = Http::start(&with(&good));
    wait_until("the replica to be ready", Duration::from_secs(10), || {
        ready(h.client) == 200
    });
    let (text, is_error) = tool_text(
        &h.modern(&modern_call(1, "perplexity_agent", json!({"query": "q"})))
            .json(),
    );
    assert!(!is_error, "charged through TLS and answered: {text}");
    drop(h);
    let serve = ["serve", "--http", "--bind", "127.0.0.1:0"];
    // Without the private CA the certificate is not trusted: a start-up error.
    let (_, err, code) = run_cli(&serve, &with(&good[..1]));
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("PERPLEXITY_STATE_CA_FILE"), "{err}");
    // The ACL user with a wrong password: refused, and the password never echoed.
    let wrong = [
        ("PERPLEXITY_STATE_PASSWORD", "wrong-password-4567"),
        ("PERPLEXITY_STATE_CA_FILE", ca.as_str()),
    ];
    let (_, err, code) = run_cli(&serve, &with(&wrong));
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("refused our credentials"), "{err}");
    assert!(!err.contains("wrong-password-4567"), "{err}");
}

#[test]
fn a_response_kept_through_one_replica_is_read_through_another_without_asking_perplexity() {
    if !have(
        "redis-server",
        "a_response_kept_through_one_replica_is_read_through_another_without_asking_perplexity",
    ) {
        return;
    }
    let redis_port = free_port();
    let _redis = redis(redis_port, None);
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "answer": "Kept."}));
    let rate = [("PERPLEXITY_RATE_PER_MINUTE", "6000")];
    let (a, c) = (
        replica(&fake, redis_port, &rate),
        replica(&fake, redis_port, &rate),
    );
    let r = a
        .modern(&modern_call(1, "responses_create", json!({"input": "q"})))
        .json();
    assert_eq!(structured(&r)["snapshot"], "saved", "{r}");
    let id = structured(&r)["response_id"].as_str().unwrap().to_owned();
    let gets = || {
        fake.requests()
            .iter()
            .filter(|q| q.method == "GET" && q.path.ends_with(&id))
            .count()
    };
    let before = gets();
    let r = c
        .modern(&modern_call(
            2,
            "responses_retrieve",
            json!({"response_id": id}),
        ))
        .json();
    assert_eq!(structured(&r)["snapshot"], "local", "{r}");
    assert_eq!(structured(&r)["answer"], "Kept.", "{r}");
    assert_eq!(
        gets(),
        before,
        "read from the shared snapshot, not upstream"
    );
}

/// `count` replicas sharing Redis and one clients file: `alice` (TOKEN_A) with only the
/// server's bucket, `bot` (TOKEN_B) with its own: 5 calls, then one a minute.
/// A 2026-07-28 `tools/call` of `tool` through `client` as the caller of `token`.
fn tool_call_as(
    client: Client,
    token: &str,
    id: i64,
    tool: &str,
    args: serde_json::Value,
) -> serde_json::Value {
    let headers = [
        ("MCP-Protocol-Version", V_MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    client
        .post_as(token, &modern_call(id, tool, args), &headers)
        .json()
}

fn team_replicas(dir: &Scratch, fake: &FakePerplexity, redis_port: u16, count: usize) -> Vec<Http> {
    team_replicas_with(dir, fake, redis_port, count, &[])
}

/// A third named client of [`team_replicas`], `carol`, with every tool.
const TOKEN_C: &str = "pa_team-token-c-0123456789abcdef0123456789abcdef";

/// [`team_replicas`] with `extra` variables (and `carol`, TOKEN_C, in the clients file).
fn team_replicas_with(
    dir: &Scratch,
    fake: &FakePerplexity,
    redis_port: u16,
    count: usize,
    extra: &[(&str, &str)],
) -> Vec<Http> {
    use crate::team::{TOKEN_A, TOKEN_B};
    let sha = |token: &str| -> String {
        use sha2::Digest;
        sha2::Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let file = dir.path("clients.toml");
    std::fs::write(
        &file,
        format!(
            "[[client]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\ncreated = \"2026-12-02T10:00:00Z\"\n\n\
             [[client]]\nname = \"bot\"\ntoken_sha256 = \"{}\"\nrate_per_minute = 1\nrate_burst = 5\ncreated = \"2026-12-02T10:00:01Z\"\n\n\
             [[client]]\nname = \"carol\"\ntoken_sha256 = \"{}\"\ncreated = \"2026-12-02T10:00:02Z\"\n",
            sha(TOKEN_A),
            sha(TOKEN_B),
            sha(TOKEN_C)
        ),
    )
    .unwrap();
    let clients = file.display().to_string();
    (0..count)
        .map(|_| {
            let mut env = env_for(fake);
            let url = format!("redis://127.0.0.1:{redis_port}");
            env.extend([
                ("PERPLEXITY_STATE_URL".to_owned(), url),
                ("PERPLEXITY_HTTP_CLIENTS_FILE".to_owned(), clients.clone()),
                ("PERPLEXITY_RATE_PER_MINUTE".to_owned(), "6000".to_owned()),
                ("PERPLEXITY_RATE_BURST".to_owned(), "100".to_owned()),
            ]);
            env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            Http::start(&env)
        })
        .collect()
}

#[test]
fn a_named_clients_own_limit_holds_across_replicas() {
    let test = "a_named_clients_own_limit_holds_across_replicas";
    if !have("redis-server", test) || !have("haproxy", test) {
        return;
    }
    let dir = Scratch::new("replica-clients");
    let redis_port = free_port();
    let _redis = redis(redis_port, None);
    let fake = FakePerplexity::start();
    let replicas = team_replicas(&dir, &fake, redis_port, 3);
    let (_lb, lb) = behind_haproxy(&replicas);
    use crate::team::{TOKEN_A, TOKEN_B};
    // Fifteen at once through the three replicas: the bot's own five, not fifteen.
    assert_eq!(storm(lb, TOKEN_B, 15), (5, 10));
    // Alice's calls are not charged to the bot's bucket.
    assert_eq!(storm(lb, TOKEN_A, 6), (6, 0));
}

#[test]
fn a_stopping_replica_hands_its_tasks_over_at_once() {
    if !have(
        "redis-server",
        "a_stopping_replica_hands_its_tasks_over_at_once",
    ) {
        return;
    }
    let redis_port = free_port();
    let _redis = redis(redis_port, None);
    let fake = FakePerplexity::start_with(json!({"duration_ms": 9000, "answer": "Handed over."}));
    // A lease of a minute: only its release at the stop lets B take the task this soon.
    let extra = [
        ("PERPLEXITY_RATE_PER_MINUTE", "6000"),
        ("PERPLEXITY_STATE_LEASE_MS", "60000"),
        ("PERPLEXITY_HTTP_DRAIN_SECONDS", "1"),
    ];
    let a = replica(&fake, redis_port, &extra);
    let b = replica(&fake, redis_port, &extra);
    let created = post(
        &a.client,
        TOKEN,
        &task_call(1, "perplexity_agent", json!({"query": "q"})),
    );
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    // Stopped while its run goes on: /readyz says not ready at once, then it exits.
    let stopped_at = Instant::now();
    signal(a.server.pid(), "TERM");
    wait_until("A to stop taking calls", Duration::from_secs(5), || {
        // Refused connections (the listener is closed) are not-ready too.
        let client = a.client;
        std::panic::catch_unwind(move || ready(client)).map_or(true, |status| status == 503)
    });
    let done = settled(&b.client, &task);
    assert_eq!(done["status"], "completed", "{done}");
    assert!(answer_of(&done).contains("Handed over."), "{done}");
    assert!(
        stopped_at.elapsed() < Duration::from_secs(30),
        "taken over after {:?}, not after the lease",
        stopped_at.elapsed()
    );
    drop(a);
}

#[test]
fn a_run_started_through_one_replica_is_its_callers_through_every_other() {
    if !have(
        "redis-server",
        "a_run_started_through_one_replica_is_its_callers_through_every_other",
    ) {
        return;
    }
    use crate::team::{TOKEN_A, TOKEN_B};
    let dir = Scratch::new("replica-owners");
    let redis_port = free_port();
    let _redis = redis(redis_port, None);
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "answer": "Alice's."}));
    let replicas = team_replicas(&dir, &fake, redis_port, 2);
    let (a, b) = (replicas[0].client, replicas[1].client);
    let call = tool_call_as;
    let made = call(a, TOKEN_A, 1, "responses_create", json!({"input": "q"}));
    let run = structured(&made)["response_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Alice reads her run through the other replica …
    let hers = call(
        b,
        TOKEN_A,
        2,
        "responses_retrieve",
        json!({"response_id": run}),
    );
    let (text, is_error) = tool_text(&hers);
    assert!(!is_error && text.contains("Alice's."), "{text}");
    // … the bot, on either replica, finds no such run (and Perplexity is not asked).
    let gets = || {
        fake.requests()
            .iter()
            .filter(|q| q.path.ends_with(&run))
            .count()
    };
    let before = gets();
    for (client, tool) in [(b, "responses_retrieve"), (a, "perplexity_agent_result")] {
        let theirs = call(client, TOKEN_B, 3, tool, json!({"response_id": run}));
        let (text, is_error) = tool_text(&theirs);
        assert!(is_error && !text.contains("Alice's."), "{tool}: {text}");
    }
    assert_eq!(gets(), before, "refused without asking Perplexity");
}

/// Three replicas, each with its own store, sharing one Redis and one daily budget.
fn budget_replicas(
    dir: &Scratch,
    fake: &FakePerplexity,
    redis_port: u16,
    budget: &str,
) -> Vec<Http> {
    (0..3)
        .map(|i| {
            let mut env = env_for(fake);
            let url = format!("redis://127.0.0.1:{redis_port}");
            let store = dir.path(&format!("store-{i}.sqlite")).display().to_string();
            env.extend(http_env(&[
                ("PERPLEXITY_STORE_PATH", store.as_str()),
                ("PERPLEXITY_STATE_URL", url.as_str()),
                ("PERPLEXITY_BUDGET_DAILY", budget),
            ]));
            Http::start(&env)
        })
        .collect()
}

/// A team for the budget tests: Redis, the fake answering `scenario`, and three ready
/// replicas with a daily budget of `budget` (none when empty). Dropped in this order.
struct BudgetTeam {
    replicas: Vec<Http>,
    fake: FakePerplexity,
    _redis: Stopped,
    _dir: Scratch,
}

fn budget_team(name: &str, scenario: serde_json::Value, budget: &str) -> BudgetTeam {
    let redis_port = free_port();
    let redis = redis(redis_port, None);
    let fake = FakePerplexity::start_with(scenario);
    let dir = Scratch::new(name);
    let replicas = budget_replicas(&dir, &fake, redis_port, budget);
    for r in &replicas {
        wait_until("each replica to be ready", Duration::from_secs(10), || {
            ready(r.client) == 200
        });
    }
    BudgetTeam {
        replicas,
        fake,
        _redis: redis,
        _dir: dir,
    }
}

#[test]
fn three_replicas_share_one_budget() {
    let test = "three_replicas_share_one_budget";
    if !have("redis-server", test) || !have("haproxy", test) {
        return;
    }
    // Each run holds its preset's estimate (medium: 0.04) until its cost is known, so
    // 0.40 has room for ten; the runs take long enough that none settles meanwhile.
    let team = budget_team("replica-budget", json!({"duration_ms": 20000}), "0.40");
    let (fake, replicas) = (&team.fake, &team.replicas);
    let (_lb, lb) = behind_haproxy(replicas);
    // Thirty at once through three replicas, each with a ledger of its own: the room is
    // the team's, so ten, not thirty.
    let (ok, refused) = refused_in_storm(lb, TOKEN, 30, "Refused before any request", false);
    assert_eq!((ok, refused), (10, 20));
    assert_eq!(agent_creates(fake).len(), 10, "ten runs reached Perplexity");
}

#[test]
fn a_replicas_spend_counts_on_every_other_and_a_run_collected_twice_counts_once() {
    let test = "a_replicas_spend_counts_on_every_other_and_a_run_collected_twice_counts_once";
    if !have("redis-server", test) {
        return;
    }
    let team = budget_team(
        "replica-spend",
        json!({"duration_ms": 100, "cost": 0.04}),
        "0.05",
    );
    let (fake, replicas) = (&team.fake, &team.replicas);
    let (a, b, c) = (&replicas[0], &replicas[1], &replicas[2]);
    let first = a
        .modern(&modern_call(1, "perplexity_agent", json!({"query": "q"})))
        .json();
    let (text, is_error) = tool_text(&first);
    assert!(!is_error, "{first}");
    assert!(
        text.lines()
            .last()
            .unwrap_or_default()
            .starts_with("Budget: 80% of this server's daily budget is spent (0.04 of 0.05 USD)"),
        "{text}"
    );
    let run = fake.runs()[0].id.clone();
    // B's own ledger is empty; the team's spend is not.
    let second = b
        .modern(&modern_call(2, "perplexity_agent", json!({"query": "q"})))
        .json();
    let (refusal, is_error) = tool_text(&second);
    assert!(is_error, "{second}");
    assert!(
        refusal.contains("This server's daily budget (0.05 USD) has no room")
            && refusal.contains("Spent today: 0.04 USD"),
        "{refusal}"
    );
    assert_eq!(
        agent_creates(fake).len(),
        1,
        "nothing was sent for the refused call"
    );
    // The run collected again through B (whose ledger has never seen it) and C: still
    // one run's cost for the team.
    for (n, r) in [b, c].into_iter().enumerate() {
        let got = r
            .modern(&modern_call(
                3 + n as i64,
                "perplexity_agent_result",
                json!({"response_id": run}),
            ))
            .json();
        assert_eq!(got["result"]["isError"], false, "{got}");
    }
    let metrics = c
        .modern(&modern_call(9, "server_metrics", json!({})))
        .json();
    let spend = &metrics["result"]["structuredContent"]["spend"];
    assert_eq!(spend["today"], 0.04, "{metrics}");
    assert_eq!(spend["callers"][0]["caller"], "default", "{metrics}");
    assert_eq!(spend["callers"][0]["today"], 0.04, "{metrics}");
}

#[test]
fn a_run_handed_back_on_one_replica_stops_holding_budget_once_another_collects_it() {
    let test = "a_run_handed_back_on_one_replica_stops_holding_budget_once_another_collects_it";
    if !have("redis-server", test) {
        return;
    }
    // Room for 0.10: a run's estimate (0.04) held twice plus one spent would not fit.
    let team = budget_team(
        "replica-hold",
        json!({"duration_ms": 300, "cost": 0.04}),
        "0.10",
    );
    let (fake, replicas) = (&team.fake, &team.replicas);
    let started = replicas[0]
        .modern(&modern_call(
            1,
            "perplexity_agent",
            json!({"query": "q", "wait": false}),
        ))
        .json();
    assert_eq!(started["result"]["isError"], false, "{started}");
    let run = fake.runs()[0].id.clone();
    let collected = replicas[1]
        .modern(&modern_call(
            2,
            "perplexity_agent_result",
            json!({"response_id": run, "wait_seconds": 10}),
        ))
        .json();
    assert_eq!(collected["result"]["isError"], false, "{collected}");
    // Spent 0.04, nothing held: the next 0.04 fits. Had the run kept its hold, it
    // would not.
    let next = replicas[2]
        .modern(&modern_call(3, "perplexity_agent", json!({"query": "q"})))
        .json();
    let (text, is_error) = tool_text(&next);
    assert!(!is_error, "{text}");
}

#[test]
fn without_a_budget_the_teams_spend_still_adds_up_in_every_replica() {
    let test = "without_a_budget_the_teams_spend_still_adds_up_in_every_replica";
    if !have("redis-server", test) {
        return;
    }
    let team = budget_team("replica-unbudgeted", serde_json::Value::Null, "");
    let replicas = &team.replicas;
    for (n, r) in replicas.iter().enumerate() {
        let got = r
            .modern(&modern_call(
                n as i64,
                "perplexity_search",
                json!({"query": "q"}),
            ))
            .json();
        assert_eq!(got["result"]["isError"], false, "{got}");
    }
    // Added in a batch a second, not per call: the team's three searches, read anywhere.
    let today = || {
        let metrics = replicas[0]
            .modern(&modern_call(9, "server_metrics", json!({})))
            .json();
        structured(&metrics)["spend"]["today"].as_f64()
    };
    wait_until(
        "the batches to reach Redis",
        Duration::from_secs(10),
        || today() == Some(0.015),
    );
}

/// The research cache is the team's: an answer kept through one replica is served
/// through another, with no second run.
#[test]
fn an_answer_kept_through_one_replica_is_served_through_another() {
    let test = "an_answer_kept_through_one_replica_is_served_through_another";
    if !have("redis-server", test) {
        return;
    }
    let port = free_port();
    let _redis = redis(port, None);
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "cost": 0.02}));
    let a = replica(&fake, port, &[("PERPLEXITY_CACHE", "caller")]);
    let b = replica(&fake, port, &[("PERPLEXITY_CACHE", "caller")]);
    for r in [&a, &b] {
        wait_until("the replica to be ready", Duration::from_secs(10), || {
            ready(r.client) == 200
        });
    }
    let ask = |h: &Http, id: i64| {
        let reply = h
            .modern(&modern_call(
                id,
                "perplexity_ask",
                json!({"query": "shared"}),
            ))
            .json();
        tool_text(&reply)
    };
    let (first, is_error) = ask(&a, 1);
    assert!(!is_error && first.ends_with("Cost: 0.02 USD"), "{first}");
    let (second, is_error) = ask(&b, 2);
    assert!(
        !is_error && second.contains("answered from this server's cache"),
        "{second}"
    );
    assert_eq!(agent_creates(&fake).len(), 1);
}

/// `redis-cli` against the Redis on `port`: its stdout.
fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The research cache fails open: a kept answer Redis can no longer read or write (its
/// key overwritten with a plain string, so every cache operation on it is `WRONGTYPE`) is
/// a miss — the call goes upstream and is answered — never a refusal. And the backend
/// answered: the replica stays ready and says no outage.
#[test]
fn an_answer_redis_cannot_read_is_a_miss_not_a_refusal() {
    let test = "an_answer_redis_cannot_read_is_a_miss_not_a_refusal";
    if !have("redis-server", test) || !have("redis-cli", test) {
        return;
    }
    let port = free_port();
    let _redis = redis(port, None);
    let fake = FakePerplexity::start_with(json!({"duration_ms": 50, "cost": 0.02}));
    let a = replica(&fake, port, &[("PERPLEXITY_CACHE", "caller")]);
    wait_until("the replica to be ready", Duration::from_secs(10), || {
        ready(a.client) == 200
    });
    let ask = |id: i64| {
        let reply = a
            .modern(&modern_call(id, "perplexity_ask", json!({"query": "kept"})))
            .json();
        tool_text(&reply)
    };
    let (first, is_error) = ask(1);
    assert!(!is_error && first.ends_with("Cost: 0.02 USD"), "{first}");
    let (hit, _) = ask(2);
    assert!(hit.contains("answered from this server's cache"), "{hit}");
    let kept = redis_cli(port, &["--scan", "--pattern", "*cache:v1:*"]);
    let keys: Vec<&str> = kept.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(keys.len(), 1, "one answer kept: {kept}");
    assert_eq!(
        redis_cli(port, &["SET", keys[0], "not a hash"]).trim(),
        "OK"
    );

    // Neither read nor kept again: each call goes upstream, and is answered.
    for id in [3, 4] {
        let (text, is_error) = ask(id);
        assert!(
            !is_error
                && text.ends_with("Cost: 0.02 USD")
                && !text.contains("from this server's cache"),
            "{text}"
        );
    }
    assert_eq!(agent_creates(&fake).len(), 3);
    let log = a.server.stderr();
    assert!(
        log.contains("the research cache could not be read")
            && log.contains("could not be kept in the research cache"),
        "{log}"
    );
    assert_eq!(
        redis_cli(port, &["TYPE", keys[0]]).trim(),
        "string",
        "still unreadable"
    );
    assert!(!log.contains("billable calls are refused"), "{log}");
    assert_eq!(ready(a.client), 200);
}

/// A `wait: false` call handed a run another caller has in flight (under the team's cache)
/// may name that run through every replica, as its starter can: the hand-over is kept in
/// Redis beside the run's owner. A caller outside the flight still finds no such run.
#[test]
fn a_run_handed_over_in_flight_is_its_callers_through_every_replica() {
    let test = "a_run_handed_over_in_flight_is_its_callers_through_every_replica";
    if !have("redis-server", test) {
        return;
    }
    use crate::team::{TOKEN_A, TOKEN_B};
    let dir = Scratch::new("replica-handed");
    let redis_port = free_port();
    let _redis = redis(redis_port, None);
    let fake = FakePerplexity::start_with(json!({"duration_ms": 3000, "answer": "Shared."}));
    let replicas = team_replicas_with(&dir, &fake, redis_port, 2, &[("PERPLEXITY_CACHE", "team")]);
    let (a, b) = (replicas[0].client, replicas[1].client);
    let call = tool_call_as;
    let question = json!({"query": "the team's question"});
    let asked = question.clone();
    let alice =
        std::thread::spawn(move || tool_text(&call(a, TOKEN_A, 1, "perplexity_agent", asked)));
    wait_until("Alice's run to start", Duration::from_secs(5), || {
        !fake.runs().is_empty()
    });
    let run = fake.runs()[0].id.clone();
    let mut no_wait = question;
    no_wait["wait"] = json!(false);
    let (handed, is_error) = tool_text(&call(a, TOKEN_B, 2, "perplexity_agent", no_wait));
    assert!(!is_error && handed.contains(&run), "{handed}");
    assert_eq!(agent_creates(&fake).len(), 1);
    // Through the other replica: the bot's to collect, never Carol's.
    let theirs = |token: &str, id: i64| {
        let reply = call(
            b,
            token,
            id,
            "perplexity_agent_result",
            json!({"response_id": run, "wait_seconds": 10}),
        );
        tool_text(&reply)
    };
    let (text, is_error) = theirs(TOKEN_B, 3);
    assert!(!is_error && text.contains("Shared."), "{text}");
    let (text, is_error) = theirs(TOKEN_C, 4);
    assert!(
        is_error && text.starts_with(&format!("No research run {run} exists")),
        "{text}"
    );
    let (answer, is_error) = alice.join().unwrap();
    assert!(!is_error && answer.contains("Shared."), "{answer}");
    assert_eq!(agent_creates(&fake).len(), 1);
}
