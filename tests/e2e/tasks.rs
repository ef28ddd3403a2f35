//! MCP tasks as a 2026-07-28 client that declares the extension sees them: a long call
//! becomes a handle, `tasks/get` gives the blocking call's result, cancel stops the run,
//! a restarted server still resolves the task, and another caller cannot see it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;
use crate::http::{Client, Http, TOKEN, http_env};

const EXT: &str = "io.modelcontextprotocol/tasks";

pub fn meta_with_tasks() -> Value {
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"extensions": {EXT: {}}});
    meta
}

pub fn task_call(id: i64, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": meta_with_tasks()}),
    )
}

pub fn tasks_request(id: i64, method: &str, task_id: &str) -> Value {
    request(
        id,
        method,
        json!({"taskId": task_id, "_meta": meta_with_tasks()}),
    )
}

/// Polls `tasks/get` until the task leaves `working`.
pub fn poll(s: &mut Server, task_id: &str, first_id: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut id = first_id;
    loop {
        let got = s.request(&tasks_request(id, "tasks/get", task_id));
        let result = got["result"].clone();
        assert_tasks_valid("GetTaskResult", &result);
        if result["status"] != "working" {
            return result;
        }
        assert!(result["pollIntervalMs"].as_i64().is_some_and(|ms| ms > 0));
        assert!(Instant::now() < deadline, "still working: {result}");
        std::thread::sleep(Duration::from_millis(300));
        id += 1;
    }
}

fn without_ids(text: &str) -> String {
    text.split_whitespace()
        // Run ids and spotlight nonces differ per call; nothing else may.
        .map(|w| {
            if w.contains("resp_") || w.contains("untrusted-web-content-") {
                "<id>"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_long_call_becomes_a_task_whose_result_is_the_blocking_calls() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 7000, "answer": "Tasks work."}));
    let dir = Scratch::new("tasks-long");
    let mut s = Server::start(&env_with_store(&fake, &dir));
    let discover = s.request(&request(
        1,
        "server/discover",
        json!({"_meta": modern_meta()}),
    ));
    assert_eq!(
        discover["result"]["capabilities"]["extensions"][EXT],
        json!({})
    );

    let started = Instant::now();
    let created = s.request(&task_call(2, "perplexity_agent", json!({"query": "q"})));
    let task = created["result"].clone();
    assert_tasks_valid("CreateTaskResult", &task);
    assert_eq!(task["resultType"], "task");
    assert_eq!(task["status"], "working");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(7),
        "{waited:?}"
    );
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    assert!(
        task_id.starts_with("task_") && task_id.len() == 37,
        "{task_id}"
    );
    assert!(
        !fake.runs().iter().any(|r| task_id.contains(&r.id)),
        "never the run id"
    );

    let done = poll(&mut s, &task_id, 3);
    assert_eq!(done["status"], "completed", "{done}");
    let inline = &done["result"];
    assert_valid(Era::Modern, "CallToolResult", inline);

    // The same question without the extension: the blocking call, for comparison.
    let blocking = s.request(&modern_call(100, "perplexity_agent", json!({"query": "q"})));
    let (text, is_error) = tool_text(&blocking);
    assert!(!is_error);
    assert_eq!(inline["isError"], false);
    assert_eq!(
        without_ids(inline["content"][0]["text"].as_str().unwrap()),
        without_ids(&text)
    );
    assert!(text.contains("Tasks work."));
}

#[test]
fn a_quick_call_is_answered_directly_and_task_methods_need_the_extension() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "answer": "Quick."}));
    let dir = Scratch::new("tasks-quick");
    let mut s = Server::start(&env_with_store(&fake, &dir));
    let r = s.request(&task_call(1, "perplexity_agent", json!({"query": "q"})));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(tool_text(&r).0.contains("Quick."));

    // A caller that did not declare the extension: -32021, naming what is required.
    let plain = request(
        2,
        "tasks/get",
        json!({"taskId": "task_x", "_meta": modern_meta()}),
    );
    let e = s.request(&plain);
    assert_eq!(e["error"]["code"], -32021, "{e}");
    assert_eq!(
        e["error"]["data"]["requiredCapabilities"]["extensions"][EXT],
        json!({})
    );
    // Unknown ids and updates: -32602.
    for (id, method) in [(3, "tasks/get"), (4, "tasks/cancel"), (5, "tasks/update")] {
        let e = s.request(&tasks_request(
            id,
            method,
            "task_0123456789abcdef0123456789abcdef",
        ));
        assert_eq!(e["error"]["code"], -32602, "{method}: {e}");
    }
    // The 2025-11-25 methods answer an unknown id the same way; the extension has no
    // tasks/result or tasks/list.
    let legacy = s.request(&request(6, "tasks/get", json!({"taskId": "task_x"})));
    assert_eq!(legacy["error"]["code"], -32602, "{legacy}");
    let modern_list = s.request(&request(
        7,
        "tasks/list",
        json!({"_meta": meta_with_tasks()}),
    ));
    assert_eq!(modern_list["error"]["code"], -32601, "{modern_list}");
}

#[test]
fn cancelling_a_task_cancels_the_run() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let dir = Scratch::new("tasks-cancel");
    let mut s = Server::start(&env_with_store(&fake, &dir));
    let created = s.request(&task_call(1, "perplexity_ask", json!({"query": "q"})));
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    // An update of the caller's task is acknowledged (these tasks ask for no input, so
    // its responses are ignored) and changes nothing.
    let mut update = tasks_request(20, "tasks/update", &task_id);
    update["params"]["inputResponses"] = json!({"unasked": {"action": "accept"}});
    let acked = s.request(&update);
    assert_tasks_valid("UpdateTaskResult", &acked["result"]);
    assert_eq!(acked["result"]["resultType"], "complete", "{acked}");
    let still = s.request(&tasks_request(21, "tasks/get", &task_id));
    assert_eq!(still["result"]["status"], "working", "{still}");
    let r = s.request(&tasks_request(2, "tasks/cancel", &task_id));
    assert_tasks_valid("CancelTaskResult", &r["result"]);
    let got = s.request(&tasks_request(3, "tasks/get", &task_id));
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    wait_until("the upstream cancel", Duration::from_secs(10), || {
        fake.requests().iter().any(|r| r.path.ends_with("/cancel"))
    });
}

/// A task whose run identical calls still wait for (the research cache's one run for
/// them) is cancelled: the task ends cancelled and says why the run was not stopped; the
/// run goes on for the waiting call, which gets its answer — one run, no upstream cancel.
#[test]
fn cancelling_a_task_others_wait_on_leaves_the_run_to_them() {
    // Long enough that the call becomes a task rather than being answered directly.
    let fake = FakePerplexity::start_with(json!({"duration_ms": 8000}));
    let dir = Scratch::new("tasks-cancel-shared");
    let mut env = env_with_store(&fake, &dir);
    env.retain(|(k, _)| k != "PERPLEXITY_CACHE");
    env.push(("PERPLEXITY_CACHE".into(), "caller".into()));
    let mut s = Server::start(&env);
    let created = s.request(&task_call(1, "perplexity_ask", json!({"query": "q"})));
    let task_id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    wait_until("the task's run to start", Duration::from_secs(5), || {
        !fake.runs().is_empty()
    });
    s.send(&modern_call(2, "perplexity_ask", json!({"query": "q"})));
    std::thread::sleep(Duration::from_millis(300));
    s.send(&tasks_request(3, "tasks/cancel", &task_id));
    let (acked, mut others) = s.recv_response(&json!(3));
    assert_tasks_valid("CancelTaskResult", &acked["result"]);
    s.send(&tasks_request(4, "tasks/get", &task_id));
    let (cancelled, more) = s.recv_response(&json!(4));
    others.extend(more);
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert!(
        cancelled["result"]["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("goes on for the identical calls still waiting")),
        "{cancelled}"
    );
    let answer = match others.iter().position(|f| f["id"] == 2) {
        Some(i) => others.remove(i),
        None => s.recv_response(&json!(2)).0,
    };
    let (text, is_error) = tool_text(&answer);
    assert!(!is_error && text.contains("Fake answer."), "{text}");
    assert_eq!(agent_creates(&fake).len(), 1, "one run");
    assert!(
        !fake.requests().iter().any(|r| r.path.ends_with("/cancel")),
        "the run others waited for was stopped"
    );
}

#[test]
fn a_restarted_server_still_resolves_the_task() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 9000, "answer": "Survived."}));
    let dir = Scratch::new("tasks-restart");
    let env = env_with_store(&fake, &dir);
    let mut first = Server::start(&env);
    let created = first.request(&task_call(1, "perplexity_agent", json!({"query": "q"})));
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    // Killed, not stopped: nothing gets to tidy up.
    signal(first.pid(), "KILL");
    let _ = first.wait_exit(Duration::from_secs(5));

    let mut second = Server::start(&env);
    let done = poll(&mut second, &task_id, 2);
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Survived."),
        "{done}"
    );
    assert_eq!(fake.runs().len(), 1, "collected, not started again");
}

#[test]
fn a_local_research_task_cut_by_a_restart_fails_with_a_reason() {
    // deep_research searches locally first: a restart then cannot resume it.
    let fake = FakePerplexity::start();
    fake.push_fault(json!({"route": "search", "kind": "slow", "delay_ms": 8000, "times": 20}));
    let dir = Scratch::new("tasks-deep");
    let env = env_with_store(&fake, &dir);
    let mut first = Server::start(&env);
    let created = first.request(&task_call(1, "deep_research", json!({"question": "q"})));
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    signal(first.pid(), "KILL");
    let _ = first.wait_exit(Duration::from_secs(5));
    let mut second = Server::start(&env);
    let got = second.request(&tasks_request(2, "tasks/get", &task_id));
    let result = &got["result"];
    assert_tasks_valid("GetTaskResult", result);
    assert_eq!(result["status"], "failed", "{got}");
    assert!(
        result["statusMessage"]
            .as_str()
            .unwrap()
            .contains("restarted"),
        "{got}"
    );
    assert_eq!(result["error"]["code"], -32603);
}

#[test]
fn another_caller_cannot_see_or_cancel_the_task() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let dir = Scratch::new("tasks-identity");
    let store = (
        "PERPLEXITY_STORE_PATH",
        dir.path("store.sqlite").display().to_string(),
    );
    let mut base = env_for(&fake);
    base.push((store.0.into(), store.1.clone()));
    let env_a = [base.clone(), http_env(&[])].concat();
    let a = Http::start(&env_a);
    let created = post(
        &a,
        TOKEN,
        &task_call(1, "perplexity_agent", json!({"query": "q"})),
    );
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let mine = post(&a, TOKEN, &tasks_request(2, "tasks/get", &task_id));
    assert_eq!(mine["result"]["status"], "working", "{mine}");

    // The same store, another token: the task does not exist for it.
    let other = "another-e2e-token-fedcba9876543210fedcba98";
    let mut env_b = base.clone();
    env_b.push(("PERPLEXITY_HTTP_AUTH_TOKEN".into(), other.into()));
    let b = Http::start(&env_b);
    for (id, method) in [(3, "tasks/get"), (4, "tasks/cancel")] {
        let e = post(&b, other, &tasks_request(id, method, &task_id));
        assert_eq!(e["error"]["code"], -32602, "{method}: {e}");
    }
    // Nor for the local user over stdio.
    let mut local = Server::start(&base);
    let e = local.request(&tasks_request(5, "tasks/get", &task_id));
    assert_eq!(e["error"]["code"], -32602, "{e}");
    // Still running for its owner, and never cancelled upstream by the others.
    let mine = post(&a, TOKEN, &tasks_request(6, "tasks/get", &task_id));
    assert_eq!(mine["result"]["status"], "working", "{mine}");
    assert!(!fake.requests().iter().any(|r| r.path.ends_with("/cancel")));
    // Task requests over HTTP name their task in Mcp-Name.
    let auth = format!("Bearer {TOKEN}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", V_MODERN),
        ("Mcp-Method", "tasks/get"),
        ("Mcp-Name", "task_other"),
    ];
    let r = a.send(
        "POST",
        "/mcp",
        &headers,
        tasks_request(7, "tasks/get", &task_id)
            .to_string()
            .as_bytes(),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32020);
}

/// A 2026-07-28 request over HTTP as `token`, with the headers the era asks for.
pub fn post(h: &Client, token: &str, message: &Value) -> Value {
    let auth = format!("Bearer {token}");
    let method = message["method"].as_str().unwrap().to_owned();
    let name = message["params"]["name"]
        .as_str()
        .or(message["params"]["taskId"].as_str())
        .unwrap_or_default()
        .to_owned();
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", V_MODERN),
        ("Mcp-Method", method.as_str()),
        ("Mcp-Name", name.as_str()),
    ];
    h.send("POST", "/mcp", &headers, message.to_string().as_bytes())
        .json()
}

fn legacy_task_call(id: i64, tool: &str, arguments: Value, ttl: i64) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "task": {"ttl": ttl}}),
    )
}

fn initialize_legacy(s: &mut Server) -> Value {
    let init = s.request(&request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"tasks": {}}, "clientInfo": {"name": "e2e", "version": "1"}}),
    ));
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    init
}

/// 2025-11-25: the core's experimental tasks — a `task` in the call gives a handle at
/// once; `tasks/result` blocks for the blocking call's result.
#[test]
fn a_legacy_client_asks_for_a_task_and_reads_the_result() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 3000, "answer": "Legacy tasks."}));
    let dir = Scratch::new("tasks-legacy");
    let mut s = Server::start(&env_with_store(&fake, &dir));
    let init = initialize_legacy(&mut s);
    assert_eq!(
        init["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    let list = s.request(&request(2, "tools/list", json!({})));
    let tools = list["result"]["tools"].as_array().unwrap();
    let support = |name: &str| {
        tools.iter().find(|t| t["name"] == name).unwrap()["execution"]["taskSupport"].clone()
    };
    assert_eq!(support("perplexity_agent"), "optional");
    assert_eq!(
        support("perplexity_search"),
        Value::Null,
        "quick tools never run as tasks"
    );

    let started = Instant::now();
    let created = s.request(&legacy_task_call(
        3,
        "perplexity_agent",
        json!({"query": "q"}),
        120_000,
    ));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the handle comes at once"
    );
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(task["ttl"], 120_000);
    let task_id = task["taskId"].as_str().unwrap().to_owned();

    let got = s.request(&request(4, "tasks/get", json!({"taskId": task_id})));
    assert_eq!(got["result"]["taskId"], task_id.as_str());
    let listed = s.request(&request(5, "tasks/list", json!({})));
    assert!(
        listed["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["taskId"] == task_id.as_str()),
        "{listed}"
    );
    let payload = s.request(&request(6, "tasks/result", json!({"taskId": task_id})));
    let result = &payload["result"];
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    let blocking = s.request(&call(7, "perplexity_agent", json!({"query": "q"})));
    assert_eq!(
        without_ids(result["content"][0]["text"].as_str().unwrap()),
        without_ids(&tool_text(&blocking).0)
    );
    let done = s.request(&request(8, "tasks/get", json!({"taskId": task_id})));
    assert_eq!(done["result"]["status"], "completed");

    // Cancel: the Task comes back cancelled.
    let created = s.request(&legacy_task_call(
        9,
        "perplexity_ask",
        json!({"query": "q"}),
        120_000,
    ));
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancelled = s.request(&request(10, "tasks/cancel", json!({"taskId": id})));
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let e = s.request(&request(11, "tasks/result", json!({"taskId": id})));
    assert!(e["error"]["code"].is_i64(), "{e}");
}

/// The reference peer's drop-in profile stays byte for byte: no task capability, no
/// execution marks, and a `task` in a call is ignored.
#[test]
fn the_lifecycle_profile_offers_no_tasks() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "answer": "Plain."}));
    let dir = Scratch::new("tasks-lifecycle");
    let mut env = env_with_store(&fake, &dir);
    env.push(("PERPLEXITY_TOOLS".into(), "lifecycle".into()));
    let mut s = Server::start(&env);
    let init = initialize_legacy(&mut s);
    assert!(
        init["result"]["capabilities"].get("tasks").is_none(),
        "{init}"
    );
    let list = s.request(&request(2, "tools/list", json!({})));
    assert!(!list.to_string().contains("taskSupport"));
    let r = s.request(&legacy_task_call(
        3,
        "perplexity_agent",
        json!({"query": "q"}),
        60_000,
    ));
    assert!(tool_text(&r).0.contains("Plain."), "{r}");
    let e = s.request(&request(4, "tasks/get", json!({"taskId": "task_x"})));
    assert_eq!(e["error"]["code"], -32601);
    // Nor in 2026-07-28: the peer's discover, and a declared extension changes nothing.
    let discover = s.request(&request(
        5,
        "server/discover",
        json!({"_meta": modern_meta()}),
    ));
    assert!(
        discover["result"]["capabilities"]
            .get("extensions")
            .is_none(),
        "{discover}"
    );
    let r = s.request(&task_call(6, "perplexity_agent", json!({"query": "q"})));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let e = s.request(&tasks_request(7, "tasks/get", "task_x"));
    assert_eq!(e["error"]["code"], -32601, "{e}");
}

/// `perplexity-agent tasks` shows a person the tasks their clients left running, from the
/// same records; an HTTP token's tasks are another caller's.
#[test]
fn the_tasks_command_lists_this_users_tasks() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let dir = Scratch::new("tasks-cli");
    let env = env_with_store(&fake, &dir);
    let mut s = Server::start(&env);
    initialize_legacy(&mut s);
    let created = s.request(&legacy_task_call(
        2,
        "perplexity_agent",
        json!({"query": "q"}),
        120_000,
    ));
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let run = fake
        .runs()
        .first()
        .map(|r| r.id.clone())
        .unwrap_or_default();
    wait_until("the run id recorded", Duration::from_secs(10), || {
        let (stdout, _, _) = run_cli(&["tasks"], &env);
        stdout.contains(&run)
    });
    let (stdout, stderr, code) = run_cli(&["tasks", "--json"], &env);
    assert_eq!(code, 0, "{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let task = &doc["tasks"][0];
    assert_eq!(task["task_id"], task_id.as_str());
    assert_eq!(task["status"], "working");
    assert_eq!(task["tool"], "perplexity_agent");
    assert_eq!(task["response_id"], run.as_str());
    let mut http = env.clone();
    http.push(("PERPLEXITY_HTTP_AUTH_TOKEN".into(), TOKEN.into()));
    let (stdout, _, code) = run_cli(&["tasks", "--http", "--json"], &http);
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap()["tasks"],
        json!([])
    );
}

/// A thousand tasks at once over one stdio connection: each handle comes back, the
/// metrics count them, and tasks are capped on their own (not by the 64 call slots).
#[test]
fn a_thousand_tasks_in_flight() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let dir = Scratch::new("tasks-thousand");
    let audit = dir.path("audit.jsonl");
    let mut env = env_with_store(&fake, &dir);
    env.push((
        "PERPLEXITY_AUDIT_LOG_PATH".into(),
        audit.display().to_string(),
    ));
    let mut s = Server::start(&env);
    initialize_legacy(&mut s);
    let started = Instant::now();
    for id in 0..1000 {
        s.send(&legacy_task_call(
            10 + id,
            "perplexity_agent",
            json!({"query": format!("q{id}")}),
            600_000,
        ));
    }
    let mut ids = std::collections::HashSet::new();
    for _ in 0..1000 {
        let frame = s.recv();
        let task_id = frame["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{frame}"));
        ids.insert(task_id.to_owned());
    }
    assert_eq!(ids.len(), 1000, "one distinct task each");
    let took = started.elapsed();
    let metrics = s.request(&call(2000, "server_metrics", json!({})));
    let tasks = &structured(&metrics)["tasks"];
    assert_eq!(tasks["in_flight"], 1000, "{tasks}");
    let page = s.request(&request(2001, "tasks/list", json!({})));
    assert_eq!(page["result"]["tasks"].as_array().unwrap().len(), 50);
    let cursor = page["result"]["nextCursor"].as_str().unwrap();
    let next = s.request(&request(2002, "tasks/list", json!({"cursor": cursor})));
    assert_eq!(
        next["result"]["tasks"].as_array().unwrap().len(),
        50,
        "{next}"
    );
    // Cancelled tasks are counted, and their closing audit records name the task.
    let some: Vec<String> = ids.iter().take(3).cloned().collect();
    for (i, id) in some.iter().enumerate() {
        let r = s.request(&request(
            3000 + i as i64,
            "tasks/cancel",
            json!({"taskId": id}),
        ));
        assert_eq!(r["result"]["status"], "cancelled");
    }
    wait_until(
        "the cancelled tasks counted",
        Duration::from_secs(10),
        || {
            let m = s.request(&call(4000, "server_metrics", json!({})));
            structured(&m)["tasks"]["cancelled"] == 3
        },
    );
    wait_until(
        "audit records with task ids",
        Duration::from_secs(10),
        || {
            let text = std::fs::read_to_string(&audit).unwrap_or_default();
            some.iter()
                .all(|id| text.contains(&format!("\"task_id\":\"{id}\"")))
        },
    );
    eprintln!("1000 task handles in {took:?}");
}

/// `subscriptions/listen` with `taskIds`: the caller's tasks are acknowledged (others left
/// out), each ending is pushed as `notifications/tasks` with the result inline, and the
/// subscription ends gracefully once all have ended.
#[test]
fn a_subscription_pushes_the_tasks_ending() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 7000, "answer": "Pushed."}));
    let dir = Scratch::new("tasks-listen");
    let mut s = Server::start(&env_with_store(&fake, &dir));
    let created = s.request(&task_call(1, "perplexity_agent", json!({"query": "q"})));
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let listen = request(
        "listen-1",
        "subscriptions/listen",
        json!({"_meta": meta_with_tasks(), "notifications": {"taskIds": [task_id, "task_0123456789abcdef0123456789abcdef"]}}),
    );
    s.send(&listen);
    let ack = s.recv();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([task_id]),
        "only the caller's"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    assert_valid(Era::Modern, "SubscriptionsAcknowledgedNotification", &ack);
    let pushed = s.recv();
    assert_tasks_valid("TaskStatusNotification", &pushed);
    assert_eq!(pushed["params"]["taskId"], task_id.as_str());
    assert_eq!(pushed["params"]["status"], "completed");
    assert!(
        pushed["params"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Pushed.")
    );
    assert_eq!(
        pushed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    let (end, _) = s.recv_response(&json!("listen-1"));
    assert_valid(Era::Modern, "SubscriptionsListenResult", &end["result"]);
    assert_eq!(
        end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );

    // Without the extension no task notification is honoured: the acknowledgement says
    // so, and the subscription ends at once rather than sit open for nothing.
    let plain = request(
        2,
        "subscriptions/listen",
        json!({"_meta": modern_meta(), "notifications": {"taskIds": [task_id], "toolsListChanged": true}}),
    );
    s.send(&plain);
    let ack = s.recv();
    assert_eq!(ack["params"]["notifications"], json!({}), "{ack}");
    let (end, _) = s.recv_response(&json!(2));
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
}

/// The same subscription over HTTP is one SSE stream: the acknowledgement, the pushed
/// task, then the graceful end.
#[test]
fn a_subscription_over_http_is_one_stream() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 7000, "answer": "Streamed."}));
    let dir = Scratch::new("tasks-listen-http");
    let mut env = env_with_store(&fake, &dir);
    env.extend(http_env(&[]));
    let h = Http::start(&env);
    let auth = format!("Bearer {TOKEN}");
    let post = |message: &Value, name: Option<&str>| {
        let method = message["method"].as_str().unwrap_or_default();
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", method),
        ];
        if let Some(name) = name {
            headers.push(("Mcp-Name", name));
        }
        h.send("POST", "/mcp", &headers, message.to_string().as_bytes())
    };
    let created = post(
        &task_call(1, "perplexity_agent", json!({"query": "q"})),
        Some("perplexity_agent"),
    )
    .json();
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let listen = request(
        2,
        "subscriptions/listen",
        json!({"_meta": meta_with_tasks(), "notifications": {"taskIds": [task_id]}}),
    );
    let r = post(&listen, None);
    assert_eq!(r.status, 200, "{}", r.text());
    let events = r.events();
    let methods: Vec<&str> = events
        .iter()
        .map(|e| e["method"].as_str().unwrap_or("(reply)"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/subscriptions/acknowledged",
            "notifications/tasks",
            "(reply)"
        ],
        "{events:?}"
    );
    assert!(
        events[1]["params"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Streamed.")
    );
    assert_eq!(events[2]["id"], 2);
}

/// 2025-11-25 over stdio: when a task ends, the client is told with
/// `notifications/tasks/status` (the transport carries unsolicited notifications).
#[test]
fn a_legacy_task_ending_is_announced_on_stdio() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 1500, "answer": "Announced."}));
    let dir = Scratch::new("tasks-status");
    let mut s = Server::start(&env_with_store(&fake, &dir));
    initialize_legacy(&mut s);
    let created = s.request(&legacy_task_call(
        2,
        "perplexity_agent",
        json!({"query": "q"}),
        120_000,
    ));
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let status = s.recv();
    assert_eq!(status["method"], "notifications/tasks/status", "{status}");
    assert_valid(Era::Legacy, "TaskStatusNotification", &status);
    assert_eq!(status["params"]["taskId"], task_id.as_str());
    assert_eq!(status["params"]["status"], "completed");
    // And EOF still ends the process promptly (the announcer holds no writer open).
    let started = Instant::now();
    s.close_stdin();
    let exit = s.wait_exit(Duration::from_secs(10));
    assert!(exit.success(), "{exit:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// `tasks/cancel` from a one-shot process (what `printf … | perplexity-agent` is), while
/// another process holds the same store and runs the task. Before: the client got `{}` and
/// the task read `cancelled` while the cancel POST, spawned after the answer, died with
/// the process — the run went on and was billed. The fake is reached by name, so the
/// cancel waits for a lookup as it would for the real API.
#[test]
fn a_cancel_from_a_one_shot_process_has_reached_perplexity_when_it_is_answered() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 30000}));
    let dir = Scratch::new("tasks-oneshot-cancel");
    let mut env = env_with_store(&fake, &dir);
    for (k, v) in env.iter_mut() {
        if k == "PERPLEXITY_API_BASE" {
            *v = format!("http://localhost:{}", fake.addr().port());
        }
    }
    let mut holder = Server::start(&env);
    for round in 0..3 {
        let created = holder.request(&legacy_task_call(
            100 + round,
            "perplexity_agent",
            json!({"query": "q"}),
            600_000,
        ));
        let task_id = created["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{created}"))
            .to_owned();
        // This task's own run: from round 1 on, an earlier round's `resp_` is listed too,
        // and a wait that matched it let the cancel race ahead of this run being named.
        wait_until("the run on record", Duration::from_secs(10), || {
            let (out, _, _) = run_cli(&["tasks", "--json"], &env);
            serde_json::from_str::<Value>(&out).is_ok_and(|list| {
                list["tasks"].as_array().is_some_and(|tasks| {
                    tasks.iter().any(|t| {
                        t["task_id"] == task_id.as_str()
                            && t["response_id"]
                                .as_str()
                                .is_some_and(|r| r.starts_with("resp_"))
                    })
                })
            })
        });
        let cancels_before = cancel_posts(&fake);
        let line = tasks_request(1, "tasks/cancel", &task_id).to_string() + "\n";
        let (reply, stderr) = one_shot(&env, &line);
        let reply: Value =
            serde_json::from_str(reply.trim()).unwrap_or_else(|_| panic!("{reply}{stderr}"));
        assert_tasks_valid("CancelTaskResult", &reply["result"]);
        // The one-shot process is gone: what it promised has happened.
        assert_eq!(
            cancel_posts(&fake),
            cancels_before + 1,
            "round {round}: the cancel POST reached Perplexity before the answer"
        );
        let got = holder.request(&tasks_request(200 + round, "tasks/get", &task_id));
        assert_eq!(got["result"]["status"], "cancelled", "{got}");
        assert!(
            got["result"]["statusMessage"]
                .as_str()
                .is_some_and(|m| m.contains("Perplexity was asked to stop the run")),
            "{got}"
        );
    }
}

/// Cancelled from another process while this one's create is still on the wire: nobody
/// knows the run yet, so the task says so, and the process that created it stops the run
/// as soon as Perplexity names it.
#[test]
fn a_task_cancelled_before_its_run_is_known_has_its_run_stopped_once_named() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 30000}));
    fake.push_fault(json!({"route": "create", "kind": "slow", "delay_ms": 2500}));
    let dir = Scratch::new("tasks-cancel-mid-create");
    let env = env_with_store(&fake, &dir);
    let mut holder = Server::start(&env);
    let created = holder.request(&legacy_task_call(
        1,
        "perplexity_agent",
        json!({"query": "q"}),
        600_000,
    ));
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let line = request(1, "tasks/cancel", json!({"taskId": task_id})).to_string() + "\n";
    let (reply, stderr) = one_shot(&env, &line);
    let reply: Value =
        serde_json::from_str(reply.trim()).unwrap_or_else(|_| panic!("{reply}{stderr}"));
    assert_eq!(reply["result"]["status"], "cancelled", "{reply}");
    assert!(
        reply["result"]["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("before its Perplexity run was known")),
        "{reply}"
    );
    assert_eq!(cancel_posts(&fake), 0, "no run to stop yet");
    wait_until("the named run stopped", Duration::from_secs(15), || {
        cancel_posts(&fake) == 1
    });
    let run = &fake.runs()[0];
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.path == format!("/v1/agent/{}/cancel", run.id)),
        "the cancel names the run"
    );
    // The holder's wait ended too: its task stays cancelled.
    let got = holder.request(&request(3, "tasks/get", json!({"taskId": task_id})));
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
}

/// A task's work is its whole run. Before: the task ran the blocking call with the wait
/// budget, so a run longer than it ended `completed` with the "still running … collect it
/// with perplexity_agent_result" hand-back (and a budget under the 5 s inline window gave
/// a caller that declared tasks that text inline). Both eras, a 3 s budget, an 8 s run.
#[test]
fn a_task_whose_run_outlasts_the_wait_budget_ends_with_the_answer() {
    let fake =
        FakePerplexity::start_with(json!({"duration_ms": 8000, "answer": "The whole answer."}));
    let dir = Scratch::new("tasks-outlast");
    let mut env = env_with_store(&fake, &dir);
    env.push(("PERPLEXITY_AGENT_WAIT_SECONDS".into(), "3".into()));
    let mut s = Server::start(&env);

    let created = s.request(&task_call(1, "perplexity_agent", json!({"query": "q"})));
    assert_eq!(
        created["result"]["resultType"], "task",
        "never the hand-back inline: {created}"
    );
    let modern_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let legacy = s.request(&legacy_task_call(
        2,
        "perplexity_agent",
        json!({"query": "q"}),
        600_000,
    ));
    let legacy_id = legacy["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();

    let done = poll(&mut s, &modern_id, 10);
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("The whole answer."), "{text}");
    assert!(!text.contains("still running"), "{text}");

    let payload = s.request(&request(3, "tasks/result", json!({"taskId": legacy_id})));
    let (text, is_error) = tool_text(&payload);
    assert!(!is_error, "{payload}");
    assert!(text.contains("The whole answer."), "{text}");
    assert_eq!(
        fake.runs().len(),
        2,
        "one run each, collected, never started again"
    );
}

/// POSTs of `/v1/agent/{id}/cancel` the fake has received.
fn cancel_posts(fake: &FakePerplexity) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/cancel"))
        .count()
}

/// A one-shot server (`printf … | perplexity-agent`): (stdout, stderr) once it exited.
fn one_shot(env: &[(String, String)], input: &str) -> (String, String) {
    let out = fed(&[], env, input);
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// SIGTERM over HTTP while a task's create is on the wire: the caller still gets its task
/// handle, the process exits only once Perplexity has named the run and the run is on
/// record, and the next server finishes the task (one run, never a second create).
#[test]
fn sigterm_over_http_keeps_a_task_whose_create_is_on_the_wire() {
    let fake =
        FakePerplexity::start_with(json!({"duration_ms": 2000, "answer": "Survived the drain."}));
    fake.push_fault(json!({"route": "create", "kind": "slow", "delay_ms": 7000}));
    let dir = Scratch::new("tasks-http-sigterm");
    let env = [
        env_with_store(&fake, &dir),
        http_env(&[("PERPLEXITY_HTTP_DRAIN_SECONDS", "1")]),
    ]
    .concat();
    let mut first = Http::start(&env);
    let client = first.client;
    let waiting = std::thread::spawn(move || {
        post(
            &client,
            TOKEN,
            &task_call(1, "perplexity_agent", json!({"query": "q"})),
        )
    });
    wait_until("the create on the wire", Duration::from_secs(5), || {
        !agent_creates(&fake).is_empty()
    });
    let started = Instant::now();
    signal(first.server.pid(), "TERM");
    let created = waiting.join().unwrap();
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let status = first.server.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0));
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "exited before Perplexity named the run: {:?}",
        started.elapsed()
    );
    let runs = fake.runs();
    assert_eq!(runs.len(), 1);
    let (listed, stderr, code) = run_cli(&["tasks", "--http", "--json"], &env);
    assert_eq!(code, 0, "{stderr}");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let task = &listed["tasks"][0];
    assert_eq!(task["task_id"], task_id.as_str(), "{listed}");
    assert_eq!(task["response_id"], runs[0].id.as_str(), "{listed}");

    let second = Http::start(&env);
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = loop {
        let got = post(&second, TOKEN, &tasks_request(2, "tasks/get", &task_id));
        if got["result"]["status"] != "working" {
            break got;
        }
        assert!(Instant::now() < deadline, "{got}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert!(
        done["result"]["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Survived the drain.")),
        "{done}"
    );
    assert_eq!(agent_creates(&fake).len(), 1, "never a second create");
}

/// `tasks/list` pages end, and a cursor is opaque and sealed to its caller. Before: the
/// cursor was a decimal offset parsed as `usize` and cast to `i64`, so
/// `18446744073709551615` listed the first page again and `9223372036854775808` led to
/// a `nextCursor` that never ran out.
#[test]
fn task_list_cursors_are_sealed_and_paging_always_ends() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let dir = Scratch::new("tasks-cursors");
    let env = env_with_store(&fake, &dir);
    let mut s = Server::start(&env);
    initialize_legacy(&mut s);
    let mut created = Vec::new();
    for id in 0..51 {
        let r = s.request(&legacy_task_call(
            100 + id,
            "perplexity_agent",
            json!({"query": "q"}),
            600_000,
        ));
        created.push(r["result"]["task"]["taskId"].as_str().unwrap().to_owned());
    }
    let first = s.request(&request(2, "tasks/list", json!({})));
    let tasks = first["result"]["tasks"].as_array().unwrap().clone();
    assert_eq!(tasks.len(), 50, "{first}");
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    assert!(
        cursor.parse::<u64>().is_err() && !cursor.contains("50"),
        "an opaque cursor, not a count: {cursor}"
    );
    let second = s.request(&request(3, "tasks/list", json!({"cursor": cursor})));
    let rest = second["result"]["tasks"].as_array().unwrap();
    assert_eq!(rest.len(), 1, "{second}");
    assert!(
        second["result"].get("nextCursor").is_none(),
        "the end: {second}"
    );
    let mut listed: Vec<String> = tasks
        .iter()
        .chain(rest)
        .map(|t| t["taskId"].as_str().unwrap().to_owned())
        .collect();
    listed.sort();
    created.sort();
    assert_eq!(listed, created, "every task exactly once");

    // Forged, altered and oversized cursors are -32602, never a page.
    let mut altered = cursor.clone().into_bytes();
    altered[10] = if altered[10] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    for (id, forged) in [
        (10, json!("18446744073709551615")),
        (11, json!("9223372036854775808")),
        (12, json!("49")),
        (13, json!(altered)),
        (14, json!("x".repeat(100_000))),
        (15, json!(5)),
    ] {
        let e = s.request(&request(id, "tasks/list", json!({"cursor": forged})));
        assert_eq!(e["error"]["code"], -32602, "{forged}: {e}");
    }
    // Another process (a server started again) does not honour this one's cursors.
    let mut other = Server::start(&env);
    initialize_legacy(&mut other);
    let e = other.request(&request(20, "tasks/list", json!({"cursor": cursor})));
    assert_eq!(e["error"]["code"], -32602, "{e}");
}

/// Waits for tasks' ends are capped per stdio connection, as calls are. Before: 1,000
/// idle `subscriptions/listen` (or blocked `tasks/result`) on one connection were all
/// taken, each polling the store. Each wait still ends when its task does, promptly.
#[test]
fn waits_for_tasks_are_capped_per_connection_and_end_with_their_task() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let dir = Scratch::new("tasks-waits-cap");
    let mut s = Server::start(&env_with_store(&fake, &dir));
    initialize_legacy(&mut s);
    let task = s.request(&legacy_task_call(
        1,
        "perplexity_agent",
        json!({"query": "q"}),
        600_000,
    ));
    let task_id = task["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    for id in 0..64 {
        let (method, params) = if id % 2 == 0 {
            (
                "subscriptions/listen",
                json!({"notifications": {"taskIds": [task_id]}, "_meta": meta_with_tasks()}),
            )
        } else {
            ("tasks/result", json!({"taskId": task_id}))
        };
        s.send(&request(1000 + id, method, params));
    }
    s.send(&request(
        2000,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [task_id]}, "_meta": meta_with_tasks()}),
    ));
    s.send(&request(2001, "tasks/result", json!({"taskId": task_id})));
    for id in [2000, 2001] {
        let (refused, _) = s.recv_response(&json!(id));
        assert_eq!(refused["error"]["code"], -32000, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("64 waits"),
            "{refused}"
        );
    }
    // Quick requests are not waits: answered while all 64 wait.
    let got = s.request(&request(3000, "tasks/get", json!({"taskId": task_id})));
    assert_eq!(got["result"]["status"], "working", "{got}");
    // The task ends (cancelled here): every wait ends with it, at once.
    let started = Instant::now();
    s.send(&request(3001, "tasks/cancel", json!({"taskId": task_id})));
    let mut answered = std::collections::HashSet::new();
    while answered.len() < 64 {
        let frame = s.recv();
        if let Some(id) = frame["id"].as_i64().filter(|id| (1000..1064).contains(id)) {
            answered.insert(id);
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the waits woke on the task's end: {:?}",
        started.elapsed()
    );
}
