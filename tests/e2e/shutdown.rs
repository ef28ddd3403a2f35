//! What shutdown guarantees (SECURITY.md, "What shutdown guarantees"): at EOF or a
//! signal nothing acknowledged is dropped. Every reply to a request read is written whole
//! however slowly the client reads (only a client that stops reading is given up on),
//! a task's create still on the wire is waited for until its run is on record, and a call
//! cut short by a signal is answered saying so, with its run.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

/// `n` pipelined `tools/list` requests (every tool listed: ~26 KB a reply), then EOF.
fn pipelined_lists(child: &mut std::process::Child, n: usize) {
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = String::new();
    for id in 0..n {
        lines.push_str(&request(id as i64, "tools/list", json!({})).to_string());
        lines.push('\n');
    }
    stdin.write_all(lines.as_bytes()).unwrap();
    // Dropped: EOF with every request already sent.
}

fn stderr_of(child: &mut std::process::Child) -> String {
    let mut text = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut text);
    }
    text
}

/// Before: the writer got a fixed 5 s after EOF and was then abandoned mid-write, so a
/// client reading at an ordinary pace lost the last replies and got half a frame.
#[test]
fn at_eof_a_slow_reader_gets_every_reply_whole() {
    let fake = FakePerplexity::start();
    let mut child = spawn_piped(&[], &env_for(&fake));
    pipelined_lists(&mut child, 200);
    let mut stdout = child.stdout.take().unwrap();
    let started = Instant::now();
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    // About 0.5 MB/s: the 5 MB of replies take several seconds to read.
    loop {
        let n = stdout.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
        std::thread::sleep(Duration::from_millis(6));
    }
    let read_for = started.elapsed();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        bytes.ends_with(b"\n"),
        "the output ends mid-frame after {read_for:?}"
    );
    let replies: Vec<Value> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("every line a whole JSON frame"))
        .collect();
    assert_eq!(replies.len(), 200, "after reading for {read_for:?}");
    let mut ids: Vec<i64> = replies.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..200).collect::<Vec<_>>());
    assert!(replies.iter().all(|r| {
        r["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() > 10)
    }));
    assert!(
        read_for > Duration::from_secs(5),
        "the reader must be slower than the old 5 s limit to prove anything: {read_for:?}"
    );
}

/// Before: the writer said it was idle once it had handed its last chunk to stdout, not
/// once that chunk was written; a reader that paused for more than a second after EOF
/// found the process gone and its last replies cut. Requests sent one by one make each
/// reply its own batch, so the batch that meets the full pipe is a single chunk.
#[test]
fn at_eof_a_reader_that_pauses_still_gets_every_reply() {
    let fake = FakePerplexity::start();
    let mut child = spawn_piped(&[], &env_for(&fake));
    let mut stdin = child.stdin.take().unwrap();
    for id in 0..40 {
        let line = format!("{}\n", request(id, "tools/list", json!({})));
        stdin.write_all(line.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    let mut stdout = child.stdout.take().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let mut bytes = Vec::new();
    stdout.read_to_end(&mut bytes).unwrap();
    assert!(child.wait().unwrap().success());
    let replies = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert!(bytes.ends_with(b"\n"), "the output ends mid-frame");
    assert_eq!(replies, 40);
}

/// The drain is bounded for a client that takes nothing at all (15 s without a byte).
#[test]
fn at_eof_a_client_that_stops_reading_is_given_up_on() {
    let fake = FakePerplexity::start();
    let mut child = spawn_piped(&[], &env_for(&fake));
    pipelined_lists(&mut child, 200);
    // stdout is held open and never read.
    let _stdout = child.stdout.take().unwrap();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(40);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still waiting for a stuck reader"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let waited = started.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(waited >= Duration::from_secs(14), "{waited:?}");
    let stderr = stderr_of(&mut child);
    assert!(stderr.contains("the client stopped reading"), "{stderr}");
}

/// Before: EOF right after a task's handle exited at once, with the create on the wire:
/// the run was created upstream, and the next server marked the task failed ("restarted
/// before this call had started a Perplexity run") — a paid run nobody could collect.
#[test]
fn eof_during_a_tasks_create_waits_for_the_run_and_the_next_server_collects_it() {
    let fake =
        FakePerplexity::start_with(json!({"duration_ms": 1500, "answer": "Kept across exit."}));
    fake.push_fault(json!({"route": "create", "kind": "slow", "delay_ms": 3000}));
    let dir = Scratch::new("shutdown-create");
    let audit = dir.path("audit.jsonl");
    let mut env = env_with_store(&fake, &dir);
    env.push((
        "PERPLEXITY_AUDIT_LOG_PATH".into(),
        audit.display().to_string(),
    ));
    let mut first = Server::start(&env);
    let created = first.request(&request(
        1,
        "tools/call",
        json!({"name": "perplexity_agent", "arguments": {"query": "q"}, "task": {"ttl": 600000}}),
    ));
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    assert!(fake.runs().is_empty(), "the create is still on the wire");
    let started = Instant::now();
    first.close_stdin();
    let status = first.wait_exit(Duration::from_secs(20));
    assert!(status.success());
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "exited before Perplexity answered the create: {:?}",
        started.elapsed()
    );
    let runs = fake.runs();
    assert_eq!(runs.len(), 1, "one create, one run");
    let (listed, stderr, code) = run_cli(&["tasks", "--json"], &env);
    assert_eq!(code, 0, "{stderr}");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let task = listed["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["task_id"] == task_id.as_str()))
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(task["status"], "working", "{task}");
    assert_eq!(
        task["response_id"],
        runs[0].id.as_str(),
        "the run is on record"
    );
    // The call's audit record is closed: abandoned by the exit, with its task and run.
    let records = audit_records(&audit);
    let opened = opening(&records, "perplexity_agent");
    assert!(
        records.iter().any(|r| r["event"] == "tool_abandoned"
            && r["call_id"] == opened["call_id"]
            && r["task_id"] == task_id.as_str()
            && r["response_id"] == runs[0].id.as_str()),
        "{records:#?}"
    );

    // The next server resumes it from the run: the answer, not a failure.
    let mut second = Server::start(&env);
    let result = second.request(&request(2, "tasks/result", json!({"taskId": task_id})));
    let (text, is_error) = tool_text(&result);
    assert!(!is_error, "{result}");
    assert!(text.contains("Kept across exit."), "{text}");
    assert_eq!(agent_creates(&fake).len(), 1, "never a second create");
}

/// A deep_research task cannot be rebuilt from a run: at exit it ends, saying why, rather
/// than stay `working` with nobody working on it.
#[test]
fn eof_ends_a_deep_research_task_saying_why() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 20000}));
    let dir = Scratch::new("shutdown-deep");
    let env = env_with_store(&fake, &dir);
    let mut s = Server::start(&env);
    let created = s.request(&request(
        1,
        "tools/call",
        json!({"name": "deep_research", "arguments": {"question": "Why is the sky blue?"}, "task": {}}),
    ));
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    wait_until("a run to exist", Duration::from_secs(10), || {
        !fake.runs().is_empty()
    });
    s.close_stdin();
    assert!(s.wait_exit(Duration::from_secs(20)).success());
    let (listed, _, _) = run_cli(&["tasks", "--json"], &env);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let task = &listed["tasks"][0];
    assert_eq!(task["task_id"], task_id.as_str());
    assert_eq!(task["status"], "failed", "{task}");
    assert!(
        task["status_message"].as_str().is_some_and(
            |m| m.starts_with("The server stopped while this research was in progress")
        ),
        "{task}"
    );
    let stderr = s.stderr();
    assert!(
        stderr.contains(&fake.runs()[0].id),
        "its runs are named: {stderr}"
    );
}

/// A signal ends the waits at once; each call cut short is still answered (as over HTTP),
/// naming the run it leaves going upstream, and the run is never cancelled.
#[test]
fn sigterm_answers_each_cut_call_with_its_run() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let mut s = Server::start(&env_for(&fake));
    s.send(&call(1, "perplexity_agent", json!({"query": "q"})));
    wait_until("the run to exist", Duration::from_secs(5), || {
        !fake.runs().is_empty()
    });
    let started = Instant::now();
    signal(s.pid(), "TERM");
    let (reply, _) = s.recv_response(&json!(1));
    let (text, is_error) = tool_text(&reply);
    assert!(is_error);
    let run = &fake.runs()[0].id;
    assert_eq!(text, shutdown_reply(run), "the same words as over HTTP");
    assert!(s.wait_exit(Duration::from_secs(5)).success());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(!fake.requests().iter().any(|r| r.path.ends_with("/cancel")));
}

/// What a call cut short by a signal is answered, on stdio and over HTTP alike.
pub fn shutdown_reply(run: &str) -> String {
    format!(
        "The server is shutting down, so it stopped waiting. Research run {run} may still be running: collect it later with perplexity_agent_result."
    )
}
