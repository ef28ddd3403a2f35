//! One `serve --http` for a team, black-box: named clients of a clients file, each seeing
//! only its tools at its own rate, and every piece of one caller's state — tasks, runs,
//! snapshots, offloaded results, legacy sessions — indistinguishable, for another caller,
//! from an id that never existed. The file reloads on SIGHUP without losing a call.
//! The OAuth callers are in `oauth.rs`; the `clients` CLI in `clients.rs`.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest;

use crate::common::*;
use crate::http::Http;
use crate::tasks::{post, task_call, tasks_request};

pub const TOKEN_A: &str = "pa_team-token-a-0123456789abcdef0123456789abcdef";
pub const TOKEN_B: &str = "pa_team-token-b-0123456789abcdef0123456789abcdef";
const TOKEN_A2: &str = "pa_team-token-a2-fedcba9876543210fedcba9876543210";

fn sha(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A clients file: `alice` with every tool, `bot` with `search` at one call a minute.
pub fn clients_file(a_token: &str) -> String {
    format!(
        r#"# Written by the test, as `perplexity-agent clients` writes it.
[[client]]
name = "alice"
token_sha256 = "{}"
created = "2026-12-02T10:00:00Z"

[[client]]
name = "bot"
token_sha256 = "{}"
tools = "search"
rate_per_minute = 1
rate_burst = 1
created = "2026-12-02T10:00:01Z"
"#,
        sha(a_token),
        sha(TOKEN_B)
    )
}

struct Team {
    http: Http,
    fake: FakePerplexity,
    dir: Scratch,
    /// The server's environment (the CLI reads the same store and clients file).
    env: Vec<(String, String)>,
}

fn team(scenario: Value, extra: &[(&str, &str)]) -> Team {
    team_of(&clients_file(TOKEN_A), scenario, extra)
}

/// [`team`] with the clients file `clients`.
fn team_of(clients: &str, scenario: Value, extra: &[(&str, &str)]) -> Team {
    let fake = FakePerplexity::start_with(scenario);
    let dir = Scratch::new("team");
    let (_, mut env) = env_with_clients(&fake, &dir, clients);
    env.push((
        "PERPLEXITY_AUDIT_LOG_PATH".into(),
        dir.path("audit.jsonl").display().to_string(),
    ));
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let http = Http::start(&env);
    Team {
        http,
        fake,
        dir,
        env,
    }
}

fn call_as(t: &Team, token: &str, id: i64, tool: &str, arguments: Value) -> Value {
    post(&t.http, token, &modern_call(id, tool, arguments))
}

/// What a caller is told, with the one id it named replaced (spotlight nonces too).
fn answer_about(reply: &Value, id: &str) -> String {
    let text = match reply.get("result") {
        Some(result) => tool_text(reply).0 + &result["isError"].to_string(),
        None => reply["error"].to_string(),
    };
    text.replace(id, "<id>")
}

#[test]
fn a_client_sees_and_calls_only_its_tools_and_is_named_in_the_audit_log() {
    let t = team(json!({"answer": "Team answer."}), &[]);
    let list = |token| {
        post(
            &t.http,
            token,
            &request(1, "tools/list", json!({"_meta": modern_meta()})),
        )
    };
    let bot = list(TOKEN_B);
    assert_eq!(tool_names(&bot), ["perplexity_search", "retrieve"], "{bot}");
    let alice = list(TOKEN_A);
    assert!(tool_names(&alice).contains(&"perplexity_agent"), "{alice}");

    let refused = call_as(&t, TOKEN_B, 2, "perplexity_agent", json!({"query": "q"}));
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        message.contains("not among the tools of client bot (search)"),
        "{message}"
    );
    assert!(agent_creates(&t.fake).is_empty(), "no upstream request");

    let searched = call_as(&t, TOKEN_B, 3, "perplexity_search", json!({"query": "q"}));
    assert_eq!(searched["result"]["isError"], false, "{searched}");
    let answered = call_as(&t, TOKEN_A, 4, "perplexity_agent", json!({"query": "q"}));
    assert_eq!(answered["result"]["isError"], false, "{answered}");

    let path = t.dir.path("audit.jsonl");
    wait_until("the audit records", Duration::from_secs(5), || {
        audit_records(&path).len() >= 4
    });
    let records = audit_records(&path);
    assert_eq!(opening(&records, "perplexity_search")["caller"], "bot");
    assert_eq!(opening(&records, "perplexity_agent")["caller"], "alice");
    // The refused call never reached the guard, so it has no record of bot's.
    assert!(
        !records
            .iter()
            .any(|r| r["caller"] == "bot" && r["tool"] == "perplexity_agent")
    );
    // No token and no hash of one is ever written down.
    let log = std::fs::read_to_string(&path).unwrap();
    for secret in [
        TOKEN_A.to_owned(),
        TOKEN_B.to_owned(),
        sha(TOKEN_A),
        sha(TOKEN_B),
    ] {
        assert!(!log.contains(&secret));
        assert!(!t.http.server.stderr().contains(&secret));
    }
}

#[test]
fn a_clients_own_rate_applies_and_no_one_elses() {
    let t = team(json!({"answer": "ok"}), &[]);
    let first = call_as(&t, TOKEN_B, 1, "perplexity_search", json!({"query": "q"}));
    assert_eq!(first["result"]["isError"], false, "{first}");
    let second = call_as(&t, TOKEN_B, 2, "perplexity_search", json!({"query": "q"}));
    let (text, is_error) = tool_text(&second);
    assert!(
        is_error && text.starts_with("Rate limit exceeded"),
        "{second}"
    );
    for id in 3..6 {
        let other = call_as(&t, TOKEN_A, id, "perplexity_search", json!({"query": "q"}));
        assert_eq!(
            other["result"]["isError"], false,
            "alice is not bot: {other}"
        );
    }
}

/// One caller minting legacy sessions in a loop pushes out only its own (its oldest
/// first), never another caller's; and `initialize` takes a token of the caller's rate.
#[test]
fn a_caller_flooding_initialize_evicts_only_its_own_sessions() {
    let file = format!(
        "{}\n[[client]]\nname = \"bob\"\ntoken_sha256 = \"{}\"\ncreated = \"2026-12-02T10:00:02Z\"\n",
        clients_file(TOKEN_A),
        sha(TOKEN_A2)
    );
    let t = team_of(&file, json!({"answer": "ok"}), &[]);
    let alice = t.http.initialize_as(TOKEN_A);
    let bobs_first = t.http.initialize_as(TOKEN_A2);
    for _ in 0..300 {
        t.http.initialize_as(TOKEN_A2);
    }
    let ping = |token: &str, session: &str| {
        t.http
            .post_as(
                token,
                &request(1, "ping", json!({})),
                &[("Mcp-Session-Id", session)],
            )
            .status
    };
    assert_eq!(ping(TOKEN_A, &alice), 200, "alice keeps her session");
    assert_eq!(ping(TOKEN_A2, &bobs_first), 404, "bob's own oldest went");
    // bot's rate (one a minute) covers initialize: the second is 429 with Retry-After.
    t.http.initialize_as(TOKEN_B);
    let r = t.http.post_as(
        TOKEN_B,
        &request(
            0,
            "initialize",
            json!({"protocolVersion": V_LEGACY, "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}),
        ),
        &[],
    );
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(
        r.header("retry-after")
            .is_some_and(|s| s.parse::<u64>().is_ok())
    );
    assert!(r.header("mcp-session-id").is_none());
    assert_eq!(ping(TOKEN_A, &alice), 200);
}

#[test]
fn one_callers_runs_tasks_results_and_sessions_are_anothers_unknown_ids() {
    let t = team(
        json!({"duration_ms": 4000, "answer": "A long answer. ".repeat(300)}),
        &[
            ("PERPLEXITY_MAX_OUTPUT_CHARS", "1000"),
            ("PERPLEXITY_TOOLS", "all"),
        ],
    );
    // Two named clients with every tool: alice, and bob in place of the limited bot.
    let file = t.dir.path("clients.toml");
    let with_bob = clients_file(TOKEN_A).replace(
        "tools = \"search\"\nrate_per_minute = 1\nrate_burst = 1\n",
        "",
    );
    std::fs::write(&file, with_bob).unwrap();
    signal(t.http.server.pid(), "HUP");
    wait_until("the reload", Duration::from_secs(10), || {
        t.http.server.stderr().contains("reloaded 2 clients")
    });
    let b = TOKEN_B;

    // A run alice started, handed back at once.
    let started = call_as(
        &t,
        TOKEN_A,
        1,
        "perplexity_agent",
        json!({"query": "q", "wait": false}),
    );
    let (text, _) = tool_text(&started);
    let run = text
        .split_whitespace()
        .find(|w| w.starts_with("resp_"))
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    let never = "resp_00000000000000000000000000000000";
    let upstream_before = t.fake.requests().len();
    for tool in [
        "perplexity_agent_result",
        "perplexity_agent_cancel",
        "responses_retrieve",
    ] {
        let theirs = call_as(&t, b, 2, tool, json!({"response_id": run}));
        let random = call_as(&t, b, 3, tool, json!({"response_id": never}));
        assert_eq!(
            answer_about(&theirs, &run),
            answer_about(&random, never),
            "{tool}: alice's run must read as one that never existed"
        );
        assert!(
            answer_about(&theirs, &run).contains("true"),
            "{tool}: an error: {theirs}"
        );
    }
    // A continuation of alice's run is refused the same way, not sent upstream.
    let continued = call_as(
        &t,
        b,
        4,
        "responses_create",
        json!({"input": "and?", "preset": "fast", "previous_response_id": run}),
    );
    let random = call_as(
        &t,
        b,
        5,
        "responses_create",
        json!({"input": "and?", "preset": "fast", "previous_response_id": never}),
    );
    assert_eq!(answer_about(&continued, &run), answer_about(&random, never));
    // The run resource too.
    let read = |id: &str| {
        post(
            &t.http,
            b,
            &request(
                6,
                "resources/read",
                json!({"uri": format!("perplexity://runs/{id}"), "_meta": modern_meta()}),
            ),
        )
    };
    assert_eq!(
        answer_about(&read(&run), &run),
        answer_about(&read(never), never)
    );
    assert_eq!(
        t.fake.requests().len(),
        upstream_before,
        "another caller's ids never reach Perplexity"
    );
    // Alice collects her own run (after restart-proof binding, from memory here).
    let mine = call_as(
        &t,
        TOKEN_A,
        7,
        "perplexity_agent_result",
        json!({"response_id": run, "wait_seconds": 30}),
    );
    let (text, is_error) = tool_text(&mine);
    assert!(!is_error && text.contains("A long answer."), "{mine}");

    // Her cut result's retrieve key.
    let key = text
        .split("retrieve_key=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("a cut result: {text}"))
        .to_owned();
    let random_key = "0123456789abcdef01234567";
    let theirs = call_as(
        &t,
        b,
        8,
        "retrieve",
        json!({"retrieve_key": key, "offset": 100}),
    );
    let random = call_as(
        &t,
        b,
        9,
        "retrieve",
        json!({"retrieve_key": random_key, "offset": 100}),
    );
    assert_eq!(
        answer_about(&theirs, &key),
        answer_about(&random, random_key)
    );
    let own = call_as(
        &t,
        TOKEN_A,
        10,
        "retrieve",
        json!({"retrieve_key": key, "offset": 100}),
    );
    assert_eq!(own["result"]["isError"], false, "{own}");

    // Her task (a run long enough to become one).
    t.fake.set_scenario(json!({"duration_ms": 30000}));
    let created = post(
        &t.http,
        TOKEN_A,
        &task_call(11, "perplexity_agent", json!({"query": "slow"})),
    );
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let random_task = "task_00000000000000000000000000000000";
    for method in ["tasks/get", "tasks/cancel"] {
        let theirs = post(&t.http, b, &tasks_request(12, method, &task));
        let random = post(&t.http, b, &tasks_request(12, method, random_task));
        assert_eq!(
            answer_about(&theirs, &task),
            answer_about(&random, random_task),
            "{method}"
        );
    }
    let mine = post(&t.http, TOKEN_A, &tasks_request(13, "tasks/get", &task));
    assert_eq!(
        mine["result"]["status"], "working",
        "not cancelled by bob: {mine}"
    );
    // The operator's `tasks --http` names whose tasks it lists.
    let listed = |client: &str| {
        let (out, stderr, code) =
            run_cli(&["tasks", "--http", "--client", client, "--json"], &t.env);
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<Value>(&out).unwrap()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(listed("alice"), std::slice::from_ref(&task));
    assert!(listed("bot").is_empty(), "bob's list holds none of alice's");
    let (_, stderr, code) = run_cli(&["tasks", "--http"], &t.env);
    assert!(code != 0 && stderr.contains("--client NAME"), "{stderr}");
    let (_, stderr, code) = run_cli(&["tasks", "--http", "--client", "nobody"], &t.env);
    assert!(
        code != 0 && stderr.contains("no client named 'nobody'"),
        "{stderr}"
    );

    // Her legacy session.
    let session = t.http.initialize_as(TOKEN_A);
    let as_bob = |sid: &str| {
        t.http.post_as(
            b,
            &request(14, "tools/list", json!({})),
            &[("Mcp-Session-Id", sid)],
        )
    };
    let theirs = as_bob(&session);
    let random = as_bob("00000000000000000000000000000000");
    assert_eq!(theirs.status, 404);
    assert_eq!(
        (theirs.status, theirs.text()),
        (random.status, random.text())
    );
    let mine = t.http.post_as(
        TOKEN_A,
        &request(15, "tools/list", json!({})),
        &[("Mcp-Session-Id", &session)],
    );
    assert_eq!(mine.status, 200, "still hers: {}", mine.text());
}

#[test]
fn a_rotated_token_and_a_reload_mid_call_lose_no_call() {
    let t = team(
        json!({"duration_ms": 3000, "answer": "Finished across the reload."}),
        &[],
    );
    let port = t.http.client;
    let in_flight = std::thread::spawn(move || {
        post(
            &port,
            TOKEN_A,
            &modern_call(1, "perplexity_agent", json!({"query": "q"})),
        )
    });
    wait_until("the run to start", Duration::from_secs(10), || {
        !agent_creates(&t.fake).is_empty()
    });
    // `clients rotate alice`, as a file change the server notices on SIGHUP.
    std::fs::write(t.dir.path("clients.toml"), clients_file(TOKEN_A2)).unwrap();
    signal(t.http.server.pid(), "HUP");
    wait_until("the reload", Duration::from_secs(10), || {
        t.http.server.stderr().contains("reloaded 2 clients")
    });
    let list = |token| {
        post(
            &t.http,
            token,
            &request(2, "tools/list", json!({"_meta": modern_meta()})),
        )
    };
    assert!(
        list(TOKEN_A2)["result"]["tools"].is_array(),
        "the new token works at once"
    );
    let old = t.http.post_as(
        TOKEN_A,
        &request(3, "tools/list", json!({"_meta": modern_meta()})),
        &[
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", "tools/list"),
        ],
    );
    assert_eq!(old.status, 401, "the old token is dead at once");
    let answered = in_flight.join().unwrap();
    let (text, is_error) = tool_text(&answered);
    assert!(
        !is_error && text.contains("Finished across the reload."),
        "{answered}"
    );
}

#[test]
fn a_broken_clients_file_keeps_the_old_clients() {
    let t = team(json!({"answer": "ok"}), &[]);
    std::fs::write(
        t.dir.path("clients.toml"),
        "[[client]]\nname = \"alice\"\nthis is not toml",
    )
    .unwrap();
    signal(t.http.server.pid(), "HUP");
    // Not the file's name alone: the start-up summary names it too.
    wait_until("the refusal to reload", Duration::from_secs(10), || {
        t.http
            .server
            .stderr()
            .contains("the clients file was not reloaded")
    });
    let list = post(
        &t.http,
        TOKEN_A,
        &request(1, "tools/list", json!({"_meta": modern_meta()})),
    );
    assert!(
        list["result"]["tools"].is_array(),
        "alice still gets in: {list}"
    );
    let stderr = t.http.server.stderr();
    assert!(!stderr.contains(&sha(TOKEN_A)), "no hash in the log");
}

#[test]
fn two_ways_to_authenticate_are_refused_at_start() {
    let dir = Scratch::new("team-conflict");
    let file = dir.path("clients.toml");
    std::fs::write(&file, clients_file(TOKEN_A)).unwrap();
    let env = [
        (
            "PERPLEXITY_HTTP_CLIENTS_FILE".to_owned(),
            file.display().to_string(),
        ),
        (
            "PERPLEXITY_HTTP_AUTH_TOKEN".to_owned(),
            "e2e-http-token-0123456789abcdef0123456789".to_owned(),
        ),
    ];
    let (_, stderr, code) = run_cli(&["serve", "--http", "--bind", "127.0.0.1:0"], &env);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("PERPLEXITY_HTTP_AUTH_TOKEN")
            && stderr.contains("conflicts with PERPLEXITY_HTTP_CLIENTS_FILE"),
        "{stderr}"
    );
}

/// The start-up summary names the clients file and how many clients it has (never a token
/// or a hash); a client whose list names tools the server does not offer is warned of,
/// since a client's list only narrows the server's tools.
#[test]
fn the_start_up_summary_names_the_clients_and_warns_of_tools_the_server_lacks() {
    let clients = clients_file(TOKEN_A).replace(
        "tools = \"search\"",
        "tools = \"search,deep_research,finance\"",
    );
    let t = team_of(
        &clients,
        json!({"answer": "ok"}),
        &[("PERPLEXITY_TOOLS", "default")],
    );
    let file = t.dir.path("clients.toml");
    assert_eq!(
        crate::http::start_up_summary(&t.http.server),
        format!(
            "perplexity-agent: auth: named clients (2, from {}); budgets: none; state: local; hosts: loopback; metrics: off",
            file.display()
        )
    );
    let warning = "perplexity-agent: warning: client bot names tools this server does not offer: deep_research, finance. A client's list only narrows the server's tools, so bot cannot call them until PERPLEXITY_TOOLS (or serve --tools) offers them.\n";
    wait_until("the warning about bot", Duration::from_secs(10), || {
        t.http.server.stderr().contains(warning)
    });
    let stderr = t.http.server.stderr();
    assert!(
        !stderr.contains("client alice"),
        "alice has every tool: {stderr}"
    );
    for secret in [TOKEN_A, TOKEN_B, &sha(TOKEN_A), &sha(TOKEN_B)] {
        assert!(!stderr.contains(secret), "a secret on stderr: {stderr}");
    }
}

/// A reload of the clients file and a stop (SIGTERM, the drain's start and end) are in
/// the log at the default level: no `PERPLEXITY_LOG` here.
#[test]
fn a_reload_and_a_stop_are_logged_at_the_default_level() {
    let fake = FakePerplexity::start();
    let dir = Scratch::new("team-default-log");
    let (file, mut env) = env_with_clients(&fake, &dir, &clients_file(TOKEN_A));
    env.push(("PERPLEXITY_HTTP_DRAIN_SECONDS".into(), "5".into()));
    assert!(env.iter().all(|(k, _)| k != "PERPLEXITY_LOG"));
    let mut http = Http::start(&env);
    std::fs::write(&file, clients_file(TOKEN_A2)).unwrap();
    signal(http.server.pid(), "HUP");
    let reloaded = format!("reloaded 2 clients from {}", file.display());
    wait_until("the reload in the log", Duration::from_secs(10), || {
        http.server.stderr().contains(&reloaded)
    });
    signal(http.server.pid(), "TERM");
    let status = http.server.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    let stderr = http.server.stderr();
    assert!(
        stderr.contains("stop signal received: no new connections are taken, and calls in flight have 5s (PERPLEXITY_HTTP_DRAIN_SECONDS) to finish"),
        "{stderr}"
    );
    assert!(
        stderr.contains("drained in ") && stderr.contains("s: every connection has closed"),
        "{stderr}"
    );
    for secret in [TOKEN_A, TOKEN_A2, &sha(TOKEN_A), &sha(TOKEN_A2)] {
        assert!(!stderr.contains(secret), "a secret on stderr: {stderr}");
    }
}

/// `clients add --tools` names the tools of its list that the server, as
/// `PERPLEXITY_TOOLS` here says, does not offer; the client is added all the same.
#[test]
fn clients_add_warns_of_tools_the_server_does_not_offer() {
    let dir = Scratch::new("team-add-tools");
    let file = dir.path("clients.toml").display().to_string();
    let add = |name: &str, tools: &str, env: &[(String, String)]| {
        run_cli(
            &["clients", "add", name, "--tools", tools, "--file", &file],
            env,
        )
    };
    // The default tools: deep_research is not among them.
    let (out, err, code) = add("researcher", "search,deep_research", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("pa_"), "the token all the same: {out}");
    assert!(
        err.contains("perplexity-agent: warning: client researcher names tools a server with PERPLEXITY_TOOLS=default does not offer: deep_research. A client's list only narrows the server's tools, so researcher cannot call them until the server offers them.\n"),
        "{err}"
    );
    let (_, err, code) = add("searcher", "search,fetch", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let research = [("PERPLEXITY_TOOLS".to_owned(), "default,research".to_owned())];
    let (_, err, code) = add("deep", "deep_research", &research);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let (list, _, _) = run_cli(&["clients", "list", "--file", &file], &[]);
    assert_eq!(list.lines().count(), 3, "{list}");
}

/// A reload of the clients file warns, in the start-up warning's words and at the default
/// level, of each client whose list names tools the server does not offer: once per
/// reload, naming the client and those tools, and no other client.
#[test]
fn a_reload_warns_of_tools_the_server_lacks() {
    let t = team(json!({"answer": "ok"}), &[("PERPLEXITY_TOOLS", "default")]);
    assert!(t.env.iter().all(|(k, _)| k != "PERPLEXITY_LOG"));
    let file = t.dir.path("clients.toml");
    let with_carol = format!(
        "{}\n[[client]]\nname = \"carol\"\ntoken_sha256 = \"{}\"\ntools = \"search,deep_research,finance\"\ncreated = \"2026-12-02T10:00:02Z\"\n",
        clients_file(TOKEN_A),
        sha(TOKEN_A2)
    );
    // As `clients add` writes it: a rename over the file, seen by the server's poll.
    let next = t.dir.path("clients.toml.new");
    std::fs::write(&next, with_carol).unwrap();
    std::fs::rename(&next, &file).unwrap();
    let warning = "client carol names tools this server does not offer: deep_research, finance. A client's list only narrows the server's tools, so carol cannot call them until PERPLEXITY_TOOLS (or serve --tools) offers them.";
    wait_until("the warning about carol", Duration::from_secs(10), || {
        t.http.server.stderr().contains(warning)
    });
    let stderr = t.http.server.stderr();
    assert!(
        stderr.contains(&format!("reloaded 3 clients from {}", file.display())),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("client carol names tools").count(),
        1,
        "{stderr}"
    );
    assert!(
        !stderr.contains("client alice names") && !stderr.contains("client bot names"),
        "{stderr}"
    );
    // The reload's line and its warning, in that order.
    let reloaded = stderr.find("reloaded 3 clients").unwrap_or(usize::MAX);
    assert!(reloaded < stderr.find(warning).unwrap_or(0), "{stderr}");
}
