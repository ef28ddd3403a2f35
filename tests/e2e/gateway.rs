//! The gateway: definitions only through the operator's CLI, every stdio/HTTP policy
//! rejection, secrets sealed at rest and masked, and (with the hostile downstream) the
//! tool surface, limits and reconnects — all against the real binaries.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::*;

/// A base64 32-byte key (test-only, not a secret anywhere).
pub const SEALING_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

pub struct Env {
    pub dir: Scratch,
    pub vars: Vec<(String, String)>,
}

impl Env {
    pub fn new(name: &str) -> Env {
        let dir = Scratch::new(name);
        let vars = vec![
            (
                "PERPLEXITY_STORE_PATH".into(),
                dir.path("data/store.sqlite").display().to_string(),
            ),
            (
                "PERPLEXITY_GATEWAY_ALLOWED_COMMANDS".into(),
                "node,python3,fake-downstream,perplexity-agent".into(),
            ),
            ("PERPLEXITY_GATEWAY_PATH".into(), bin_dir()),
            (
                "PERPLEXITY_GATEWAY_ALLOWED_ROOTS".into(),
                dir.0.display().to_string(),
            ),
        ];
        Env { dir, vars }
    }

    pub fn with(mut self, k: &str, v: &str) -> Env {
        self.vars.retain(|(name, _)| name != k);
        self.vars.push((k.into(), v.into()));
        self
    }

    pub fn run(&self, args: &[&str]) -> (String, String, i32) {
        run_cli(args, &self.vars)
    }

    /// `gateway add SLUG --url URL` for a plain-HTTP downstream on this machine; it must be
    /// accepted.
    pub fn add_local_http(&self, slug: &str, url: &str) {
        let (_, stderr, code) = self.gateway(&[
            "add",
            slug,
            "--url",
            url,
            "--allow-insecure-http",
            "--allow-private",
        ]);
        assert_eq!(code, 0, "{stderr}");
    }

    pub fn gateway(&self, args: &[&str]) -> (String, String, i32) {
        let mut all = vec!["gateway"];
        all.extend_from_slice(args);
        self.run(&all)
    }

    pub fn list(&self) -> Value {
        let (stdout, stderr, code) = self.gateway(&["list", "--json"]);
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str(&stdout).unwrap()
    }
}

/// The directory holding this build's binaries (ours, and the test downstream).
pub fn bin_dir() -> String {
    std::path::Path::new(BIN)
        .parent()
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn stdio_definitions_obey_the_command_policy() {
    let env = Env::new("gw-policy");
    let cwd = env.dir.path("srv");
    std::fs::create_dir_all(&cwd).unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--command".into(), "/bin/sh".into()], "is a path"),
        (
            vec!["--command".into(), "sh".into()],
            "not in PERPLEXITY_GATEWAY_ALLOWED_COMMANDS",
        ),
        (vec!["--command".into(), "node;id".into()], "contains ';'"),
        (vec!["--command".into(), "node$(id)".into()], "contains '$'"),
        (vec!["--command".into(), "node|cat".into()], "contains '|'"),
        (vec!["--command".into(), "../bin/tool".into()], "is a path"),
        (
            vec![
                "--command".into(),
                "node".into(),
                "--arg".into(),
                "-e".into(),
                "--arg".into(),
                "require('child_process')".into(),
            ],
            "run code given inline",
        ),
        (
            vec![
                "--command".into(),
                "python3".into(),
                "--arg".into(),
                "-m".into(),
                "--arg".into(),
                "http.server".into(),
            ],
            "run code given inline",
        ),
        (
            vec![
                "--command".into(),
                "node".into(),
                "--cwd".into(),
                format!("{}/../../../etc", cwd.display()),
            ],
            "outside PERPLEXITY_GATEWAY_ALLOWED_ROOTS",
        ),
        (
            vec![
                "--command".into(),
                "node".into(),
                "--env".into(),
                "LD_PRELOAD=/tmp/x.so".into(),
            ],
            "cannot be set",
        ),
        (
            vec![
                "--command".into(),
                "node".into(),
                "--secret-env".into(),
                "TOKEN=abc".into(),
            ],
            "PERPLEXITY_SECRET_KEY is not set",
        ),
        (
            vec!["--url".into(), "http://example.test/mcp".into()],
            "--allow-insecure-http",
        ),
        (
            vec![
                "--url".into(),
                "https://example.test/mcp".into(),
                "--header".into(),
                "Authorization: Bearer s3cr3t-value".into(),
            ],
            "PERPLEXITY_SECRET_KEY is not set",
        ),
        (
            vec!["--url".into(), "https://u:p@example.test/mcp".into()],
            "credentials in the URL",
        ),
    ];
    for (extra, why) in cases {
        let mut args = vec!["add", "srv"];
        args.extend(extra.iter().map(String::as_str));
        let (stdout, stderr, code) = env.gateway(&args);
        assert_eq!(code, 2, "{extra:?}: {stdout}{stderr}");
        assert!(stderr.contains(why), "{extra:?}: {stderr}");
    }
    assert_eq!(env.list(), json!([]), "nothing was written");
    // The allowed form, with an argument full of metacharacters kept as data.
    let (_, stderr, code) = env.gateway(&[
        "add",
        "srv",
        "--command",
        "fake-downstream",
        "--arg",
        "$(id)",
        "--cwd",
        &cwd.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(env.list()[0]["transport"]["args"], json!(["$(id)"]));
    // A malformed key refuses to start at all.
    let bad = Env::new("gw-badkey").with("PERPLEXITY_SECRET_KEY", "AAECAwQFBgcICQoLDA0ODw==");
    let (_, stderr, code) = bad.gateway(&["list"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("PERPLEXITY_SECRET_KEY must be 32 random bytes"),
        "{stderr}"
    );
}

#[test]
fn secrets_are_sealed_at_rest_masked_and_bound_to_their_server() {
    let env = Env::new("gw-secrets").with("PERPLEXITY_SECRET_KEY", SEALING_KEY);
    let (_, stderr, code) = env.gateway(&[
        "add",
        "tickets",
        "--url",
        "https://tickets.example/mcp",
        "--header",
        "Authorization: Bearer s3cr3t-value",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let (_, stderr, code) = env.gateway(&["add", "other", "--url", "https://other.example/mcp"]);
    assert_eq!(code, 0, "{stderr}");
    let db = env.dir.path("data/store.sqlite");
    let raw = [
        std::fs::read(&db).unwrap(),
        std::fs::read(db.with_extension("sqlite-wal")).unwrap_or_default(),
    ]
    .concat();
    assert!(
        !String::from_utf8_lossy(&raw).contains("s3cr3t-value"),
        "plaintext on disk"
    );
    let listed = env.list();
    assert_eq!(
        listed[1]["transport"]["headers"][0],
        json!({"name": "Authorization", "sealed": "***"})
    );
    let (stdout, _, _) = env.gateway(&["list"]);
    assert!(
        stdout.contains("Authorization:***") && !stdout.contains("s3cr3t"),
        "{stdout}"
    );

    // A wrong key: the server is unavailable with a clear reason, nothing is sent.
    let wrong = Env {
        dir: Scratch::new("unused"),
        vars: env.vars.clone(),
    }
    .with(
        "PERPLEXITY_SECRET_KEY",
        "HxwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgEAAAA=",
    );
    let (stdout, _, code) = wrong.gateway(&["test", "tickets"]);
    assert_eq!(code, 1);
    assert!(stdout.contains("cannot be decrypted"), "{stdout}");
    let (stdout, _, code) = env.clone_without_key().gateway(&["test", "tickets"]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("PERPLEXITY_SECRET_KEY is not set"),
        "{stdout}"
    );
}

impl Env {
    fn clone_without_key(&self) -> Env {
        let mut vars = self.vars.clone();
        vars.retain(|(k, _)| k != "PERPLEXITY_SECRET_KEY");
        Env {
            dir: Scratch::new("nokey"),
            vars,
        }
    }
}

#[test]
fn the_number_of_servers_is_capped() {
    let env = Env::new("gw-cap").with("PERPLEXITY_GATEWAY_MAX_SERVERS", "2");
    for slug in ["a", "b"] {
        let (_, stderr, code) = env.gateway(&["add", slug, "--url", "https://x.example/mcp"]);
        assert_eq!(code, 0, "{stderr}");
    }
    let (_, stderr, code) = env.gateway(&["add", "c", "--url", "https://x.example/mcp"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("PERPLEXITY_GATEWAY_MAX_SERVERS"),
        "{stderr}"
    );
    // Replacing an existing one is not a new server.
    let (_, stderr, code) =
        env.gateway(&["add", "b", "--replace", "--url", "https://y.example/mcp"]);
    assert_eq!(code, 0, "{stderr}");
    let (_, _, code) = env.gateway(&["disable", "a"]);
    assert_eq!(code, 0);
    assert_eq!(env.list()[0]["enabled"], false);
    let (_, _, code) = env.gateway(&["remove", "a"]);
    assert_eq!(code, 0);
    assert_eq!(env.list().as_array().unwrap().len(), 1);
}

/// The test downstream server's binary (built by `cargo test --workspace`).
fn downstream_bin() -> String {
    let path = format!("{}/fake-downstream", bin_dir());
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} is missing: run `cargo build -p fake-downstream` (cargo test --workspace builds it)"
    );
    path
}

/// A served perplexity-agent with `env`'s store and gateway settings, and a key.
fn serve(env: &Env) -> Server {
    downstream_bin();
    let mut vars = env.vars.clone();
    vars.push(("PERPLEXITY_API_KEY".into(), KEY.into()));
    vars.push(("PERPLEXITY_API_BASE".into(), "http://127.0.0.1:9".into()));
    vars.push(("PERPLEXITY_RATE_BURST".into(), "100000".into()));
    vars.push(("PERPLEXITY_RATE_PER_MINUTE".into(), "1000000".into()));
    let mut s = Server::start(&vars);
    s.request(&request(0, "initialize", json!({"protocolVersion": V_LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})));
    s
}

fn listed(s: &mut Server, id: i64) -> Vec<String> {
    let r = s.request(&request(id, "tools/list", json!({})));
    tool_names(&r).into_iter().map(str::to_owned).collect()
}

/// Whether the process `pid` has exited (gone, or a zombie waiting to be reaped).
fn gone(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |st| st.contains(") Z "))
}

fn stats(s: &mut Server, id: i64) -> Value {
    let (text, is_error) = tool_text(&s.request(&call(id, "mcp__fd__stats", json!({}))));
    assert!(!is_error, "{text}");
    serde_json::from_str(&unwrap_tool_spotlight(&text)).unwrap()
}

/// The body of a downstream result (inside its spotlight wrapper).
fn unwrap_tool_spotlight(text: &str) -> String {
    let start = text.find("<untrusted-web-content-").expect("spotlighted");
    let body = &text[start..];
    let open_end = body.find('>').unwrap();
    let inner = &body[open_end + 1..body.rfind("\n</untrusted-web-content-").unwrap()];
    assert!(inner.contains("returned by a tool of a downstream MCP server"));
    inner.split_once("\n\n").unwrap().1.to_owned()
}

#[test]
fn a_stdio_downstream_is_offered_namespaced_policed_and_isolated() {
    let env = Env::new("gw-stdio").with("PERPLEXITY_SECRET_KEY", SEALING_KEY);
    let (_, stderr, code) = env.gateway(&[
        "add",
        "fd",
        "--command",
        "fake-downstream",
        "--arg",
        "--hostile-metadata",
        "--arg",
        "$(id)",
        "--env",
        "PLAIN=visible",
        "--secret-env",
        "TOKEN=sealed-token-value",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let (stdout, stderr, code) = env.gateway(&["test", "fd"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for dropped in [
        "read__file",
        "bad name!",
        "a_tool_name_that_is_far_too_long",
        "huge_schema",
    ] {
        assert!(
            stdout.contains(&format!("dropped {dropped}")),
            "{dropped}: {stdout}"
        );
    }

    let mut s = serve(&env);
    let names = listed(&mut s, 1);
    assert!(names.contains(&"perplexity_agent".to_owned()));
    for exposed in [
        "mcp__fd__echo",
        "mcp__fd__long_description",
        "mcp__fd__sneaky",
        "mcp__fd__remote_ref",
    ] {
        assert!(names.contains(&exposed.to_owned()), "{exposed}: {names:?}");
    }
    assert!(
        !names.iter().any(|n| n.contains("read__file")
            || n.contains("huge_schema")
            || n.contains("bad name"))
    );
    let r = s.request(&request(2, "tools/list", json!({})));
    let tools = r["result"]["tools"].as_array().unwrap();
    let describe = |name: &str| {
        tools.iter().find(|t| t["name"] == name).unwrap()["description"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let long = describe("mcp__fd__long_description");
    assert!(long.starts_with("[from downstream MCP server 'fd'] ") && long.ends_with('…'));
    assert!(long.chars().count() <= 1024 + 40);
    assert!(
        describe("mcp__fd__sneaky").contains("flagged: "),
        "flagged description"
    );

    let (text, is_error) = tool_text(&s.request(&call(3, "mcp__fd__echo", json!({"text": "hi"}))));
    assert!(!is_error, "{text}");
    assert_eq!(unwrap_tool_spotlight(&text), "hi");
    // Arguments were a list: `$(id)` arrived as five characters.
    let (text, _) = tool_text(&s.request(&call(4, "mcp__fd__argv", json!({}))));
    let argv: Vec<String> = serde_json::from_str(&unwrap_tool_spotlight(&text)).unwrap();
    assert_eq!(&argv[1..], ["--hostile-metadata", "$(id)"]);
    // A cleared environment: what was declared, PATH, and nothing of ours.
    let (text, _) = tool_text(&s.request(&call(5, "mcp__fd__env", json!({}))));
    let child_env: serde_json::Map<String, Value> =
        serde_json::from_str(&unwrap_tool_spotlight(&text)).unwrap();
    let mut keys: Vec<&str> = child_env.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["PATH", "PLAIN", "TOKEN"],
        "HOME and LANG are unset in the test"
    );
    assert_eq!(child_env["TOKEN"], "sealed-token-value");
    assert_eq!(child_env["PATH"], bin_dir());

    // Arguments are checked against the downstream schema before it sees them.
    let calls_before = stats(&mut s, 6)["calls"].as_i64().unwrap();
    let (text, is_error) = tool_text(&s.request(&call(7, "mcp__fd__echo", json!({"text": 5}))));
    assert!(
        is_error && text.starts_with("Invalid arguments for mcp__fd__echo"),
        "{text}"
    );
    assert_eq!(
        stats(&mut s, 8)["calls"].as_i64().unwrap(),
        calls_before + 1,
        "only the stats call"
    );
    // Dropped tools cannot be called by name either.
    let r = s.request(&call(9, "mcp__fd__read__file", json!({})));
    assert_eq!(r["error"]["code"], -32602);

    // Results: capped with a marker, injection flagged.
    let (text, _) = tool_text(&s.request(&call(10, "mcp__fd__big", json!({"bytes": 200_000}))));
    assert!(
        text.contains("[truncated: 134464 bytes omitted]"),
        "{:.200}",
        &text[text.len() - 200..]
    );
    let (text, _) = tool_text(&s.request(&call(11, "mcp__fd__inject", json!({}))));
    assert!(
        text.starts_with("Possible prompt injection in this result"),
        "{text}"
    );
    let (text, is_error) = tool_text(&s.request(&call(12, "mcp__fd__fail", json!({}))));
    assert!(is_error && text.contains("downstream failure"));
    assert!(!s.stderr().contains("sealed-token-value"));
}

#[test]
fn crashes_timeouts_and_the_concurrency_cap() {
    let env = Env::new("gw-limits").with("PERPLEXITY_GATEWAY_TIMEOUT_SECONDS", "2");
    let (_, stderr, code) = env.gateway(&["add", "fd", "--command", "fake-downstream"]);
    assert_eq!(code, 0, "{stderr}");
    let mut s = serve(&env);
    let pid = |s: &mut Server, id: i64| {
        let (text, _) = tool_text(&s.request(&call(id, "mcp__fd__pid", json!({}))));
        unwrap_tool_spotlight(&text)
    };
    let first = pid(&mut s, 1);
    // A crash mid-call is a tool error; the next call reconnects (a new process).
    let (text, is_error) = tool_text(&s.request(&call(2, "mcp__fd__crash", json!({}))));
    assert!(
        is_error && text.contains("the next call reconnects"),
        "{text}"
    );
    let second = pid(&mut s, 3);
    assert_ne!(first, second, "a new process");
    assert!(
        !std::path::Path::new(&format!("/proc/{first}")).exists()
            || std::fs::read_to_string(format!("/proc/{first}/stat"))
                .map_or(true, |st| st.contains(" Z "))
    );

    // A call that outlasts the timeout is cancelled downstream.
    let started = std::time::Instant::now();
    let (text, is_error) = tool_text(&s.request(&call(4, "mcp__fd__slow", json!({"ms": 20_000}))));
    assert!(
        is_error && text.contains("did not answer within 2s"),
        "{text}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
    wait_until(
        "the downstream saw the cancellation",
        std::time::Duration::from_secs(5),
        || !stats(&mut s, 5)["cancelled"].as_array().unwrap().is_empty(),
    );

    // Six calls at once: at most four reach the server together.
    for i in 0..6 {
        s.send(&call(100 + i, "mcp__fd__slow", json!({"ms": 600})));
    }
    // Replies come in completion order.
    let mut answered = std::collections::HashSet::new();
    while answered.len() < 6 {
        let r = s.recv();
        let id = r["id"].as_i64().unwrap_or_default();
        if (100..106).contains(&id) {
            assert!(!tool_text(&r).1, "{r}");
            answered.insert(id);
        }
    }
    assert_eq!(stats(&mut s, 200)["max_in_flight"], 4);

    // No process is left behind when the server ends.
    let last = pid(&mut s, 201);
    s.close_stdin();
    s.wait_exit(std::time::Duration::from_secs(10));
    wait_until(
        "the downstream process to exit",
        std::time::Duration::from_secs(5),
        || gone(&last),
    );
}

/// Six calls to a hanging tool, four slots, a 2 s timeout: the four with a slot are sent
/// (and cancelled downstream at their deadline); the two that waited for one are never
/// sent. Before: slots freed at the deadline by the four timing out went to the waiting
/// two, which reached the downstream with no time left while their callers were told
/// the call was cancelled.
#[test]
fn a_call_that_waited_out_its_time_for_a_slot_is_never_sent() {
    let env = Env::new("gw-slot-deadline").with("PERPLEXITY_GATEWAY_TIMEOUT_SECONDS", "2");
    let (_, stderr, code) = env.gateway(&["add", "fd", "--command", "fake-downstream"]);
    assert_eq!(code, 0, "{stderr}");
    let mut s = serve(&env);
    let before = stats(&mut s, 1)["calls"].as_i64().unwrap();
    for i in 0..6 {
        s.send(&call(10 + i, "mcp__fd__slow", json!({"ms": 20_000})));
    }
    let mut texts = Vec::new();
    while texts.len() < 6 {
        let r = s.recv();
        if (10..16).contains(&r["id"].as_i64().unwrap_or_default()) {
            let (text, is_error) = tool_text(&r);
            assert!(is_error, "{text}");
            texts.push(text);
        }
    }
    let timed_out = texts
        .iter()
        .filter(|t| t.contains("did not answer within 2s; the call was cancelled"))
        .count();
    let not_sent = texts
        .iter()
        .filter(|t| t.contains("is busy") && t.contains("the call was not sent"))
        .count();
    assert_eq!((timed_out, not_sent), (4, 2), "{texts:#?}");
    // Anything sent late would have arrived by now.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = stats(&mut s, 50)["calls"].as_i64().unwrap();
    assert_eq!(
        after,
        before + 4 + 1,
        "the downstream received the four calls with a slot and this stats call, nothing else"
    );
}

/// With a downstream server defined, EOF still ends the server at once (before: 5–10 s,
/// which at a terminal looked like an ignored Ctrl-D), its child included.
#[test]
fn eof_with_a_gateway_server_exits_promptly() {
    let env = Env::new("gw-eof");
    let (_, stderr, code) = env.gateway(&["add", "fd", "--command", "fake-downstream"]);
    assert_eq!(code, 0, "{stderr}");
    let mut s = serve(&env);
    let (pid, _) = tool_text(&s.request(&call(1, "mcp__fd__pid", json!({}))));
    let pid = unwrap_tool_spotlight(&pid);
    let started = std::time::Instant::now();
    s.close_stdin();
    assert!(s.wait_exit(std::time::Duration::from_secs(10)).success());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    wait_until(
        "the downstream process to exit",
        std::time::Duration::from_secs(3),
        || gone(&pid),
    );
}

/// The pids the `pid` tool of server `fd` reports: the server's, then (with
/// `--grandchild`) the process it started in its group.
fn downstream_pids(s: &mut Server, id: i64) -> Vec<String> {
    let (text, is_error) = tool_text(&s.request(&call(id, "mcp__fd__pid", json!({}))));
    assert!(!is_error, "{text}");
    unwrap_tool_spotlight(&text)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Kills what a failed test left running (those processes ignore EOF and SIGTERM, and
/// would linger for a minute).
struct KillLeft(Vec<String>);

impl Drop for KillLeft {
    fn drop(&mut self) {
        for pid in self.0.iter().filter(|pid| !gone(pid)) {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
}

/// A served perplexity-agent whose one downstream server, `fd`, ignores EOF and SIGTERM
/// and, with `grandchild`, has started a process of its own that does too; their pids.
fn serve_a_stubborn_downstream(name: &str, grandchild: bool) -> (Env, Server, KillLeft) {
    let env = Env::new(name);
    let mut args = vec![
        "add",
        "fd",
        "--command",
        "fake-downstream",
        "--arg",
        "--ignore-eof",
    ];
    if grandchild {
        args.extend(["--arg", "--grandchild"]);
    }
    let (_, stderr, code) = env.gateway(&args);
    assert_eq!(code, 0, "{stderr}");
    let mut s = serve(&env);
    let pids = downstream_pids(&mut s, 1);
    assert_eq!(pids.len(), if grandchild { 2 } else { 1 }, "{pids:?}");
    assert!(pids.iter().all(|pid| !gone(pid)));
    (env, s, KillLeft(pids))
}

/// The grace a downstream group gets before SIGKILL, plus the margin of a slow machine.
const GROUP_ENDED: std::time::Duration = std::time::Duration::from_secs(6);

/// A downstream server that ignores EOF and SIGTERM, and the process it started, end
/// with us at EOF: the exit ends each child's whole process group (grace, then SIGKILL).
#[test]
fn eof_ends_a_downstream_that_ignores_it_and_what_it_started() {
    ends_with_us("gw-eof-group", |s| {
        s.close_stdin();
        assert!(s.wait_exit(std::time::Duration::from_secs(20)).success());
    });
}

/// The same when we are stopped by SIGTERM.
#[test]
fn sigterm_ends_a_downstream_that_ignores_it_and_what_it_started() {
    ends_with_us("gw-term-group", |s| {
        signal(s.pid(), "TERM");
        s.wait_exit(std::time::Duration::from_secs(20));
    });
}

/// A stubborn downstream and its grandchild are gone within the group's grace of `stop`.
fn ends_with_us(name: &str, stop: impl FnOnce(&mut Server)) {
    let (_env, mut s, left) = serve_a_stubborn_downstream(name, true);
    let started = std::time::Instant::now();
    stop(&mut s);
    wait_until(
        "the downstream server and its grandchild to be gone",
        GROUP_ENDED.saturating_sub(started.elapsed()),
        || left.0.iter().all(|pid| gone(pid)),
    );
}

/// `kill -9` runs none of our code: the downstream server (ignoring the EOF and SIGTERM
/// that would otherwise end it) is killed by the kernel as we die.
#[test]
fn kill_9_takes_the_downstream_server_with_us() {
    let (_env, mut s, left) = serve_a_stubborn_downstream("gw-kill9", false);
    signal(s.pid(), "KILL");
    s.wait_exit(std::time::Duration::from_secs(10));
    wait_until(
        "the downstream server to be gone",
        std::time::Duration::from_secs(2),
        || left.0.iter().all(|pid| gone(pid)),
    );
}

/// A server stopped for idleness exits at EOF, but the process it started ignores EOF and
/// SIGTERM: the server's whole process group is ended all the same (grace, SIGTERM,
/// grace, SIGKILL), while we go on serving.
#[test]
fn an_idle_stop_ends_what_the_server_started() {
    let env = Env::new("gw-idle-group").with("PERPLEXITY_GATEWAY_IDLE_SECONDS", "5");
    let (_, stderr, code) = env.gateway(&[
        "add",
        "fd",
        "--command",
        "fake-downstream",
        "--arg",
        "--grandchild",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let mut s = serve(&env);
    let pids = downstream_pids(&mut s, 1);
    assert_eq!(pids.len(), 2, "{pids:?}");
    let left = KillLeft(pids);
    wait_until(
        "the idle server to be stopped",
        std::time::Duration::from_secs(20),
        || gone(&left.0[0]),
    );
    wait_until(
        "the process it started to be ended",
        std::time::Duration::from_secs(10),
        || gone(&left.0[1]),
    );
    s.request(&request(2, "ping", json!({})));
}

/// A downstream HTTP server that is down is one clean line on stderr, not rmcp's own
/// error chain (`ERROR worker quit with fatal: Transport channel closed, when
/// Client(reqwest::Error {… hyper_util …`) on every attempt.
#[test]
fn a_downstream_that_is_down_is_said_in_one_clean_line() {
    let env = Env::new("gw-down");
    env.add_local_http("down", "http://127.0.0.1:1/mcp");
    let mut s = serve(&env);
    s.request(&request(1, "tools/list", json!({})));
    s.close_stdin();
    s.wait_exit(std::time::Duration::from_secs(10));
    let stderr = s.stderr();
    assert!(
        stderr.contains("downstream MCP server unavailable"),
        "{stderr}"
    );
    for noise in ["worker quit", "reqwest::Error", "hyper_util", "ERROR"] {
        assert!(!stderr.contains(noise), "{noise}: {stderr}");
    }
}

/// One downstream cannot inflate the tool list: at most 200 tools (and 1 MiB) of it,
/// the rest left out and said so in the log and in `gateway test`. Before: 10,000 tools
/// with 1 KB descriptions made an 11.8 MB `tools/list`, past our own message cap.
#[test]
fn a_downstream_with_thousands_of_tools_gets_its_share_of_the_list() {
    let env = Env::new("gw-many");
    let (_, stderr, code) = env.gateway(&[
        "add",
        "many",
        "--command",
        "fake-downstream",
        "--arg",
        "--many-tools",
        "--arg",
        "10000",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let mut s = serve(&env);
    let list = s.request(&request(1, "tools/list", json!({})));
    let names = tool_names(&list);
    let theirs = names
        .iter()
        .filter(|n| n.starts_with("mcp__many__"))
        .count();
    assert_eq!(theirs, 200, "the server's share");
    let bytes = list.to_string().len();
    assert!(bytes < 1_500_000, "{bytes} bytes");
    s.close_stdin();
    s.wait_exit(std::time::Duration::from_secs(10));
    assert!(
        s.stderr().contains("tools are not offered")
            && s.stderr().contains("PERPLEXITY_GATEWAY_MAX_TOOLS"),
        "{}",
        s.stderr()
    );
    let (stdout, _, _) = env.gateway(&["test", "many"]);
    assert!(
        stdout.contains("more tools: the server lists more than 200 tools"),
        "{stdout:.2000}"
    );
}

/// Structured content a text block already carries is said once (before, its JSON twice).
#[test]
fn structured_content_already_in_the_text_is_said_once() {
    let env = Env::new("gw-structured");
    let (_, stderr, code) = env.gateway(&["add", "fd", "--command", "fake-downstream"]);
    assert_eq!(code, 0, "{stderr}");
    let mut s = serve(&env);
    let (text, is_error) = tool_text(&s.request(&call(1, "mcp__fd__structured", json!({}))));
    assert!(!is_error, "{text}");
    assert_eq!(unwrap_tool_spotlight(&text), "{\"n\":1}");
}

#[test]
fn the_global_switch_and_a_missing_program() {
    let env = Env::new("gw-switch");
    let (_, stderr, code) = env.gateway(&["add", "fd", "--command", "fake-downstream"]);
    assert_eq!(code, 0, "{stderr}");
    let off = Env {
        dir: Scratch::new("unused2"),
        vars: env.vars.clone(),
    }
    .with("PERPLEXITY_GATEWAY", "off");
    let mut s = serve(&off);
    assert!(!listed(&mut s, 1).iter().any(|n| n.starts_with("mcp__")));
    let r = s.request(&call(2, "mcp__fd__echo", json!({"text": "x"})));
    assert_eq!(r["error"]["code"], -32602);
    // An allowlisted program that was on the gateway's PATH when added, and is gone
    // since: the launch looks it up again.
    let dir = env.dir.path("gone");
    std::fs::create_dir_all(&dir).unwrap();
    let gone = Env {
        dir: Scratch::new("unused3"),
        vars: env.vars.clone(),
    }
    .with("PERPLEXITY_GATEWAY_PATH", &dir.display().to_string())
    .with("PERPLEXITY_GATEWAY_ALLOWED_COMMANDS", "gone-server");
    #[cfg(unix)]
    std::os::unix::fs::symlink(downstream_bin(), dir.join("gone-server")).unwrap();
    let (_, stderr, code) = gone.gateway(&["add", "nd", "--command", "gone-server"]);
    assert_eq!(code, 0, "{stderr}");
    std::fs::remove_file(dir.join("gone-server")).unwrap();
    let (stdout, _, code) = gone.gateway(&["test", "nd"]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("'gone-server' was not found on PERPLEXITY_GATEWAY_PATH"),
        "{stdout}"
    );
}

/// A fake-downstream HTTP server on a loopback port.
struct HttpDownstream {
    child: std::process::Child,
    url: String,
}

impl HttpDownstream {
    fn start(args: &[&str]) -> HttpDownstream {
        use std::io::BufRead;
        let mut child = Command::new(downstream_bin())
            .arg("--http")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_owned();
        HttpDownstream { child, url: base }
    }

    fn headers(&self) -> Vec<Value> {
        let addr = self.url.strip_prefix("http://").unwrap();
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        use std::io::{Read, Write};
        write!(
            stream,
            "GET /_headers HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str(body).unwrap_or_else(|_| {
            // chunked: take the JSON between the first '[' and the last ']'
            serde_json::from_str(&body[body.find('[').unwrap()..=body.rfind(']').unwrap()]).unwrap()
        })
    }
}

impl Drop for HttpDownstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP downstream answer past the 4 MiB cap is a clear tool error naming the cap, and
/// the connection is made again for the next call. Before: "the MCP handshake failed"
/// (a handshake that had passed long before).
#[test]
fn an_http_answer_past_the_cap_is_named_as_too_large() {
    let d = HttpDownstream::start(&[]);
    let env = Env::new("gw-http-big");
    let url = format!("{}/mcp", d.url);
    env.add_local_http("big", &url);
    let mut s = serve(&env);
    let (text, is_error) =
        tool_text(&s.request(&call(1, "mcp__big__big", json!({"bytes": 5 * 1024 * 1024}))));
    assert!(is_error, "{text:.300}");
    assert!(
        text.contains("larger than 4 MiB") && !text.contains("handshake"),
        "{text:.300}"
    );
    let (text, is_error) = tool_text(&s.request(&call(2, "mcp__big__echo", json!({"text": "ok"}))));
    assert!(!is_error && text.contains("ok"), "{text:.300}");
}

/// A downstream result is measured before it is decoded: 1,000,000 zeros in
/// `structuredContent` (2 MB of text, ~80 MB as values) are refused under the call's own
/// id with the reason, the connection goes on, and a result under the element cap passes
/// whole. Before: rmcp decoded every line it read, and the gateway's memory took the hit.
#[test]
fn a_dense_downstream_result_is_refused_before_it_is_decoded() {
    let env = Env::new("gw-dense");
    let (_, stderr, code) = env.gateway(&["add", "dense", "--command", "fake-downstream"]);
    assert_eq!(code, 0, "{stderr}");
    let mut s = serve(&env);
    let reply = s.request(&call(
        1,
        "mcp__dense__dense",
        json!({"elements": 1_000_000}),
    ));
    assert!(reply["result"]["content"].is_array(), "{reply:.500}");
    let (text, is_error) = tool_text(&reply);
    assert!(is_error, "{text:.300}");
    assert!(
        text.contains("more than 100000 JSON values") && text.contains("dropped unread"),
        "{text:.300}"
    );
    let reply = s.request(&call(2, "mcp__dense__dense", json!({"elements": 50_000})));
    let (text, is_error) = tool_text(&reply);
    assert!(!is_error, "{text:.300}");
    assert!(text.contains("50000 zeros"), "{text:.300}");
    let (text, is_error) =
        tool_text(&s.request(&call(3, "mcp__dense__echo", json!({"text": "ok"}))));
    assert!(!is_error && text.contains("ok"), "{text:.300}");
    s.close_stdin();
    s.wait_exit(std::time::Duration::from_secs(10));
}

/// The same over HTTP: a JSON reply of 1,000,000 zeros (2 MB, under the 4 MiB byte cap)
/// is refused under the call's id before rmcp decodes it; the connection goes on.
#[test]
fn a_dense_http_reply_is_refused_before_it_is_decoded() {
    let d = HttpDownstream::start(&[]);
    let env = Env::new("gw-http-dense");
    let url = format!("{}/mcp", d.url);
    env.add_local_http("dense", &url);
    let mut s = serve(&env);
    let reply = s.request(&call(
        1,
        "mcp__dense__dense",
        json!({"elements": 1_000_000}),
    ));
    assert!(reply["result"]["content"].is_array(), "{reply:.500}");
    let (text, is_error) = tool_text(&reply);
    assert!(is_error, "{text:.300}");
    assert!(
        text.contains("more than 100000 JSON values") && text.contains("dropped unread"),
        "{text:.300}"
    );
    let (text, is_error) =
        tool_text(&s.request(&call(2, "mcp__dense__dense", json!({"elements": 50_000}))));
    assert!(!is_error && text.contains("50000 zeros"), "{text:.300}");
}

#[test]
fn http_downstreams_keep_their_headers_apart_and_follow_no_redirects() {
    let a = HttpDownstream::start(&["--require-header", "Authorization: Bearer a-secret"]);
    let b = HttpDownstream::start(&[]);
    let env = Env::new("gw-http").with("PERPLEXITY_SECRET_KEY", SEALING_KEY);
    for (slug, url, header) in [
        ("a", &a.url, Some("Authorization: Bearer a-secret")),
        ("b", &b.url, None),
    ] {
        let mut args = vec![
            "add",
            slug,
            "--url",
            url.as_str(),
            "--allow-insecure-http",
            "--allow-private",
        ];
        let url_mcp = format!("{url}/mcp");
        args[3] = &url_mcp;
        if let Some(h) = header {
            args.extend(["--header", h]);
        }
        let (_, stderr, code) = env.gateway(&args);
        assert_eq!(code, 0, "{stderr}");
    }
    let mut s = serve(&env);
    for (i, name) in ["mcp__a__echo", "mcp__b__echo"].iter().enumerate() {
        let (text, is_error) =
            tool_text(&s.request(&call(i as i64 + 1, name, json!({"text": "x"}))));
        assert!(!is_error, "{name}: {text}");
    }
    let seen_by_b = b.headers();
    assert!(!seen_by_b.is_empty());
    assert!(
        seen_by_b.iter().all(|h| h.get("authorization").is_none()),
        "{seen_by_b:?}"
    );
    assert!(
        a.headers()
            .iter()
            .all(|h| h["authorization"] == "Bearer a-secret")
    );

    // A server that redirects elsewhere: not followed, B sees nothing more.
    let before = b.headers().len();
    let c = HttpDownstream::start(&["--redirect-to", &format!("{}/mcp", b.url)]);
    env.add_local_http("c", &format!("{}/mcp", c.url));
    let (stdout, _, code) = env.gateway(&["test", "c"]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(b.headers().len(), before, "the redirect was not followed");
    // Without --allow-private a loopback address is refused when it is added, with the
    // fix (before, `add` took it and only `test` said so); nothing is sent.
    let (_, stderr, code) = env.gateway(&[
        "add",
        "d",
        "--url",
        &format!("{}/mcp", b.url),
        "--allow-insecure-http",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("127.0.0.1 is") && stderr.contains("pass --allow-private"),
        "{stderr}"
    );
    let (stdout, _, _) = env.gateway(&["list"]);
    assert!(!stdout.contains("\nd "), "not saved: {stdout}");
    let (_, stderr, code) = env.gateway(&[
        "add",
        "e",
        "--url",
        "http://localhost:9/mcp",
        "--allow-insecure-http",
    ]);
    assert_eq!(code, 2, "localhost too: {stderr}");
    assert_eq!(b.headers().len(), before);
}

#[test]
fn our_own_binary_is_a_downstream_server() {
    let env = Env::new("gw-self");
    let (_, stderr, code) = env.gateway(&[
        "add",
        "self",
        "--command",
        "perplexity-agent",
        "--arg",
        "serve",
        "--arg",
        "--tools",
        "--arg",
        "admin",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let mut s = serve(&env);
    let names = listed(&mut s, 1);
    assert!(
        names.contains(&"mcp__self__server_metrics".to_owned()),
        "{names:?}"
    );
    let (text, is_error) = tool_text(&s.request(&call(2, "mcp__self__server_metrics", json!({}))));
    assert!(!is_error, "{text}");
    assert!(text.contains("uptime"), "{text}");
}

/// A server with the fake upstream, a `fd` downstream, and `functions` allowed.
fn chaining(name: &str, functions: &str, fake: &FakePerplexity) -> (Env, Server) {
    chaining_in(Env::new(name), functions, fake)
}

fn chaining_in(env: Env, functions: &str, fake: &FakePerplexity) -> (Env, Server) {
    let env = env.with("PERPLEXITY_GATEWAY_FUNCTIONS", functions);
    let (_, stderr, code) = env.gateway(&["add", "fd", "--command", "fake-downstream"]);
    assert_eq!(code, 0, "{stderr}");
    let mut vars = env.vars.clone();
    vars.extend(env_for(fake));
    let mut s = Server::start(&vars);
    s.request(&request(0, "initialize", json!({"protocolVersion": V_LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})));
    (env, s)
}

#[test]
fn the_agent_calls_registered_gateway_tools_as_functions() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 30,
        "answer": "Done.",
        "function_calls": [
            {"name": "mcp__fd__echo", "arguments": {"text": "from the model"}},
            {"name": "rm_rf", "arguments": {}},
            {"name": "mcp__fd__echo", "arguments": "not json"},
            {"name": "mcp__fd__fail", "arguments": {}},
        ],
    }));
    let (_env, mut s) = chaining("gw-chain", "mcp__fd__echo,mcp__fd__fail", &fake);
    let r = s.request(&call(1, "responses_create", json!({
        "input": "q", "functions": ["mcp__fd__echo", "mcp__fd__fail"], "auto_execute_functions": true,
    })));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    assert!(text.starts_with("Ran 4 function call(s) over 1 round(s): mcp__fd__echo, rm_rf (failed), mcp__fd__echo (failed), mcp__fd__fail (failed)."), "{text}");
    assert_eq!(structured(&r)["answer"], "Done.");
    assert_eq!(structured(&r)["functions_run"].as_array().unwrap().len(), 4);

    let creates = agent_creates(&fake);
    assert_eq!(creates.len(), 2);
    let offered = creates[0]["tools"].as_array().unwrap();
    assert_eq!(offered[0]["name"], "mcp__fd__echo");
    assert_eq!(offered[0]["parameters"]["required"], json!(["text"]));
    let first_id = creates.len(); // sanity
    assert_eq!(first_id, 2);
    let second = &creates[1];
    assert!(
        second["previous_response_id"]
            .as_str()
            .unwrap()
            .starts_with("resp_")
    );
    assert_eq!(
        second["tools"], creates[0]["tools"],
        "the same tools each round"
    );
    let outputs = second["input"].as_array().unwrap();
    assert_eq!(outputs.len(), 4);
    assert!(
        outputs[0]["output"]
            .as_str()
            .unwrap()
            .contains("from the model")
    );
    let error_kind = |i: usize| {
        serde_json::from_str::<Value>(outputs[i]["output"].as_str().unwrap()).unwrap()["error"]
            .clone()
    };
    assert_eq!(error_kind(1), "unknown_function");
    assert_eq!(error_kind(2), "invalid_arguments");
    assert_eq!(error_kind(3), "tool_error");
}

/// A function the agent calls is a call like any other: when its handler panics, the
/// panic is contained (the agent gets a tool error, the chain goes on) and the audit log
/// has its opening and closing records. Before, the chain ran functions on a path of its
/// own, without the containment or the rejection audit every other call has.
#[test]
fn a_function_that_panics_inside_a_chain_is_contained_and_audited() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 20,
        "answer": "Carried on.",
        "function_calls": [{"name": "mcp__fd__echo", "arguments": {"text": "boom"}}],
    }));
    let env = Env::new("gw-chain-panic");
    let audit = env.dir.path("audit.jsonl");
    let env = env
        .with("PERPLEXITY_AGENT_TEST_PANIC", "mcp__fd__echo")
        .with("PERPLEXITY_AUDIT_LOG_PATH", &audit.display().to_string());
    let (_env, mut s) = chaining_in(env, "mcp__fd__echo", &fake);
    let r = s.request(&call(
        1,
        "responses_create",
        json!({
            "input": "q", "functions": ["mcp__fd__echo"], "auto_execute_functions": true,
        }),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    assert!(
        text.starts_with("Ran 1 function call(s) over 1 round(s): mcp__fd__echo (failed)."),
        "{text}"
    );
    assert_eq!(structured(&r)["answer"], "Carried on.");
    let outputs = agent_creates(&fake)[1]["input"].clone();
    let sent: Value = serde_json::from_str(outputs[0]["output"].as_str().unwrap()).unwrap();
    assert_eq!(sent["error"], "tool_error", "{sent}");
    assert!(
        sent["message"].as_str().unwrap().contains("unexpectedly"),
        "the contained failure, not a payload: {sent}"
    );
    let records = audit_records(&audit);
    let opened = opening(&records, "mcp__fd__echo");
    assert!(
        records.iter().any(|r| r["event"] == "tool_result"
            && r["call_id"] == opened["call_id"]
            && r["is_error"] == true),
        "{records:#?}"
    );
    s.request(&request(2, "ping", json!({})));
}

#[test]
fn function_chaining_is_bounded_and_refuses_unregistered_functions() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 20,
        "function_calls": [{"name": "mcp__fd__echo", "arguments": {"text": "again"}}],
        "function_call_rounds": 100,
    }));
    let (_env, mut s) = chaining("gw-rounds", "mcp__fd__echo", &fake);
    // Not registered as a function by the operator: refused before anything is sent.
    let (text, is_error) = tool_text(&s.request(&call(
        1,
        "responses_create",
        json!({
            "input": "q", "functions": ["mcp__fd__env"], "auto_execute_functions": true,
        }),
    )));
    assert!(
        is_error && text.contains("PERPLEXITY_GATEWAY_FUNCTIONS"),
        "{text}"
    );
    assert!(fake.requests().is_empty());
    let (text, is_error) = tool_text(&s.request(&call(2, "responses_create", json!({
        "input": "q", "functions": ["mcp__fd__echo"], "auto_execute_functions": true, "max_function_rounds": 2,
    }))));
    assert!(is_error && text.contains("after 2 round(s)"), "{text}");
    let creates = agent_creates(&fake);
    assert_eq!(creates.len(), 3, "the first request and two continuations");
    assert!(
        text.contains("responses_retrieve(response_id=\"resp_"),
        "names the last response: {text}"
    );
}

#[test]
fn a_server_that_comes_up_later_is_announced_to_legacy_clients() {
    let env = Env::new("gw-late");
    let path = env.dir.path("bin");
    std::fs::create_dir_all(&path).unwrap();
    let env = env
        .with("PERPLEXITY_GATEWAY_PATH", &path.display().to_string())
        .with("PERPLEXITY_GATEWAY_ALLOWED_COMMANDS", "late-server");
    // Defined while its program is installed, then gone when the server starts: each
    // launch looks the program up again.
    #[cfg(unix)]
    std::os::unix::fs::symlink(downstream_bin(), path.join("late-server")).unwrap();
    let (_, stderr, code) = env.gateway(&["add", "late", "--command", "late-server"]);
    assert_eq!(code, 0, "{stderr}");
    std::fs::remove_file(path.join("late-server")).unwrap();
    let mut s = serve(&env);
    let r = s.request(&request(1, "initialize", json!({"protocolVersion": V_LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})));
    assert_eq!(r["result"]["capabilities"]["tools"]["listChanged"], true);
    assert!(!listed(&mut s, 2).iter().any(|n| n.starts_with("mcp__")));
    #[cfg(unix)]
    std::os::unix::fs::symlink(downstream_bin(), path.join("late-server")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let frame = s.recv_timeout(std::time::Duration::from_secs(1));
        if frame
            .as_ref()
            .is_some_and(|f| f["method"] == "notifications/tools/list_changed")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no list_changed notification"
        );
    }
    assert!(listed(&mut s, 3).contains(&"mcp__late__echo".to_owned()));
}

/// Processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|st| !st.contains(") Z "));
            alive && String::from_utf8_lossy(&cmd).contains(marker)
        })
        .collect()
}

#[test]
fn a_thousand_calls_over_five_servers_with_crashes_are_all_answered() {
    let env = Env::new("gw-storm");
    let marker = format!("storm-{}", std::process::id());
    for i in 0..5 {
        let slug = format!("s{i}");
        let mut args = vec![
            "add",
            &slug,
            "--command",
            "fake-downstream",
            "--arg",
            &marker,
        ];
        if i == 0 {
            // One server crashes on every 100th call it gets.
            args.extend(["--arg", "--crash-after", "--arg", "100"]);
        }
        let (_, stderr, code) = env.gateway(&args);
        assert_eq!(code, 0, "{stderr}");
    }
    let mut s = serve(&env);
    assert_eq!(processes_with(&marker).len(), 5);
    let (mut ok, mut errors) = (0, 0);
    for i in 0..1000i64 {
        let tool = format!("mcp__s{}__echo", i % 5);
        let r = s.request(&call(i + 1, &tool, json!({"text": format!("n{i}")})));
        let (text, is_error) = tool_text(&r);
        if is_error {
            assert!(
                text.starts_with("Downstream server 's0'"),
                "a clear error: {text}"
            );
            errors += 1;
        } else {
            assert_eq!(unwrap_tool_spotlight(&text), format!("n{i}"));
            ok += 1;
        }
    }
    assert_eq!(ok + errors, 1000, "every call answered");
    assert!(
        (1..=3).contains(&errors),
        "one crash per 100 calls of s0: {errors}"
    );
    assert!(processes_with(&marker).len() <= 5, "no process piles up");
    s.close_stdin();
    s.wait_exit(std::time::Duration::from_secs(10));
    wait_until(
        "every downstream process to be gone",
        std::time::Duration::from_secs(10),
        || processes_with(&marker).is_empty(),
    );
}

/// A free loopback port (the listener is closed before the port is used).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn server_everything_over_stdio_and_http() {
    let (Ok(js), Ok(node_dir)) = (
        std::env::var("PA_EVERYTHING_JS"),
        std::env::var("PA_NODE_DIR"),
    ) else {
        eprintln!(
            "skipped: run tests/gateway/everything.sh (it installs server-everything and sets PA_EVERYTHING_JS)"
        );
        return;
    };
    let env = Env::new("gw-everything")
        .with("PERPLEXITY_GATEWAY_PATH", &node_dir)
        .with("PERPLEXITY_GATEWAY_ALLOWED_COMMANDS", "node");
    let (_, stderr, code) = env.gateway(&[
        "add",
        "ev",
        "--command",
        "node",
        "--arg",
        &js,
        "--arg",
        "stdio",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let (stdout, stderr, code) = env.gateway(&["test", "ev"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // Its HTTP transport, on a port of our choosing.
    let port = free_port();
    let mut http = Command::new(format!("{node_dir}/node"))
        .arg(&js)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "server-everything over HTTP",
        std::time::Duration::from_secs(20),
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    env.add_local_http("evh", &url);

    let mut s = serve(&env);
    let names = listed(&mut s, 1);
    for name in ["mcp__ev__echo", "mcp__ev__get-sum", "mcp__evh__echo"] {
        assert!(names.contains(&name.to_owned()), "{name}: {names:?}");
    }
    for (i, tool) in ["mcp__ev__echo", "mcp__evh__echo"].iter().enumerate() {
        let (text, is_error) =
            tool_text(&s.request(&call(10 + i as i64, tool, json!({"message": "hi"}))));
        assert!(!is_error, "{tool}: {text}");
        assert_eq!(unwrap_tool_spotlight(&text), "Echo: hi");
    }
    let (text, is_error) =
        tool_text(&s.request(&call(20, "mcp__ev__get-sum", json!({"a": 2, "b": 3}))));
    assert!(
        !is_error && unwrap_tool_spotlight(&text).contains('5'),
        "{text}"
    );
    // Its schema is enforced here: a wrong type never reaches it.
    let (text, is_error) = tool_text(&s.request(&call(21, "mcp__ev__echo", json!({"message": 5}))));
    assert!(is_error && text.starts_with("Invalid arguments"), "{text}");
    let _ = http.kill();
    let _ = http.wait();
}

#[test]
fn hostile_framing_slow_starts_noise_and_idle_servers() {
    let env = Env::new("gw-hostile")
        .with("PERPLEXITY_GATEWAY_TIMEOUT_SECONDS", "3")
        .with("PERPLEXITY_GATEWAY_IDLE_SECONDS", "5");
    for (slug, flags) in [
        ("frames", vec!["--invalid-frames"]),
        ("noisy", vec!["--stderr-noise"]),
        ("sleepy", vec!["--slow-init", "60000"]),
    ] {
        let mut args = vec!["add", slug, "--command", "fake-downstream"];
        for f in &flags {
            args.extend(["--arg", f]);
        }
        let (_, stderr, code) = env.gateway(&args);
        assert_eq!(code, 0, "{stderr}");
    }
    let started = std::time::Instant::now();
    let mut s = serve(&env);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "a slow server does not hold the start"
    );
    let names = listed(&mut s, 1);
    assert!(
        names.contains(&"mcp__noisy__echo".to_owned()),
        "1 MiB of stderr is drained: {names:?}"
    );
    // Junk on stdout during the handshake, and a handshake that never ends: neither is
    // offered, and the others are unaffected.
    let unfit = ["mcp__frames__", "mcp__sleepy__"];
    assert!(
        !names.iter().any(|n| unfit.iter().any(|p| n.starts_with(p))),
        "{names:?}"
    );
    let (text, is_error) =
        tool_text(&s.request(&call(2, "mcp__noisy__echo", json!({"text": "ok"}))));
    assert!(!is_error && unwrap_tool_spotlight(&text) == "ok", "{text}");
    let (stdout, _, code) = env.gateway(&["test", "frames"]);
    assert_eq!(code, 1);
    assert!(stdout.contains("the MCP handshake failed"), "{stdout}");
    let (stdout, _, code) = env.gateway(&["test", "sleepy"]);
    assert_eq!(code, 1);
    assert!(stdout.contains("no answer within 3s"), "{stdout}");
    // Idle for longer than PERPLEXITY_GATEWAY_IDLE_SECONDS: the child is stopped, and
    // the next call starts it again.
    let (text, _) = tool_text(&s.request(&call(3, "mcp__noisy__pid", json!({}))));
    let first = unwrap_tool_spotlight(&text);
    wait_until(
        "the idle child to be stopped",
        std::time::Duration::from_secs(15),
        || {
            std::fs::read_to_string(format!("/proc/{first}/stat"))
                .map_or(true, |st| st.contains(") Z "))
        },
    );
    let (text, is_error) = tool_text(&s.request(&call(4, "mcp__noisy__pid", json!({}))));
    assert!(!is_error);
    assert_ne!(unwrap_tool_spotlight(&text), first);
}

#[test]
fn servers_from_the_config_file_take_their_secrets_from_the_environment() {
    let env = Env::new("gw-file");
    let file = env.dir.path("config.toml");
    std::fs::write(
        &file,
        "[[gateway.servers]]\nname = \"cfg\"\ncommand = \"fake-downstream\"\nsecret_env = { TOKEN = \"@env:CFG_TOKEN\" }\n",
    )
    .unwrap();
    let env = env
        .with("PERPLEXITY_CONFIG_PATH", &file.display().to_string())
        .with("CFG_TOKEN", "from-the-environment");
    let listed = env.list();
    assert_eq!(listed[0]["source"], "config file");
    assert_eq!(
        listed[0]["transport"]["env"][0]["memory"], "***",
        "shown masked"
    );
    let (stdout, _, _) = env.gateway(&["list"]);
    assert!(
        stdout.contains("TOKEN=***") && !stdout.contains("from-the-environment"),
        "{stdout}"
    );
    let mut s = serve(&env);
    let (text, is_error) = tool_text(&s.request(&call(1, "mcp__cfg__env", json!({}))));
    assert!(!is_error, "{text}");
    assert!(unwrap_tool_spotlight(&text).contains("\"TOKEN\":\"from-the-environment\""));
    // A plaintext secret in the file refuses to start, naming the file and server.
    std::fs::write(&file, "[[gateway.servers]]\nname = \"cfg\"\ncommand = \"fake-downstream\"\nsecret_env = { TOKEN = \"plain\" }\n").unwrap();
    let (_, stderr, code) = env.gateway(&["list"]);
    assert_eq!(code, 4);
    assert!(
        stderr.contains("server cfg: the value of TOKEN must be @env:VARIABLE"),
        "{stderr}"
    );
}

/// A loopback HTTP endpoint that answers every request 401 with a `WWW-Authenticate`
/// challenge (what real servers send), until the test process ends.
fn unauthorized_endpoint() -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(tcp);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let _ = reader.get_mut().write_all(
                    b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"test\"\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                );
            });
        }
    });
    url
}

/// What no CLI output may show: Rust internals and rmcp's own log lines.
fn assert_plain(stdout: &str, stderr: &str) {
    for internal in [
        "rmcp::",
        "WorkerTransport",
        "Transport [",
        "ERROR",
        "reqwest::",
    ] {
        assert!(
            !stdout.contains(internal) && !stderr.contains(internal),
            "{internal}: {stdout}{stderr}"
        );
    }
}

#[test]
fn gateway_test_of_a_server_answering_401_says_which_header_to_add() {
    let env = Env::new("gw-401").with("PERPLEXITY_SECRET_KEY", SEALING_KEY);
    // A challenge (WWW-Authenticate) and no header defined: "add one", as a command.
    let url = unauthorized_endpoint();
    env.add_local_http("locked", &url);
    let fix = format!(
        "perplexity-agent gateway add locked --replace --url {url} --allow-insecure-http --allow-private --header \"Authorization: @env:VAR\""
    );
    // rmcp's ERROR line races our exit: a few runs, so a leak would show.
    for _ in 0..3 {
        let (stdout, stderr, code) = env.gateway(&["test", "locked"]);
        assert_eq!(code, 1, "{stdout}{stderr}");
        assert_plain(&stdout, &stderr);
        assert_eq!(stderr, "", "nothing but the answer");
        assert_eq!(stdout.trim_end().lines().count(), 1, "one line: {stdout}");
        assert!(
            stdout.starts_with("locked: FAILED: the server answered 401 — it wants a credential")
                && stdout.contains(&fix),
            "{stdout}"
        );
    }
    let (stdout, stderr, _) = env.gateway(&["test", "locked", "--json"]);
    assert_plain(&stdout, &stderr);
    let status: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(status["error_kind"], "unauthorized", "{status}");

    // No challenge, and a header that is wrong: its value is never shown.
    let guarded = HttpDownstream::start(&["--require-header", "Authorization: Bearer right-token"]);
    let (_, stderr, code) = env.gateway(&[
        "add",
        "wrong",
        "--url",
        &format!("{}/mcp", guarded.url),
        "--allow-insecure-http",
        "--allow-private",
        "--header",
        "Authorization: Bearer wrong-token-value",
    ]);
    assert_eq!(code, 0, "{stderr}");
    for _ in 0..3 {
        let (stdout, stderr, code) = env.gateway(&["test", "wrong"]);
        assert_eq!(code, 1, "{stdout}{stderr}");
        assert_plain(&stdout, &stderr);
        assert_eq!(stderr, "", "nothing but the answer");
        assert!(
            stdout.contains("answered 401 — it refused the credential in this server's headers")
                && stdout.contains("--header \"Authorization: @env:VAR\""),
            "{stdout}"
        );
        assert!(!stdout.contains("wrong-token-value"), "{stdout}");
    }
}

#[test]
fn gateway_add_of_a_defined_name_needs_replace() {
    let env = Env::new("gw-replace");
    let (stdout, stderr, code) = env.gateway(&["add", "srv", "--url", "https://first.example/mcp"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("Added srv."), "{stdout}");
    let (stdout, stderr, code) =
        env.gateway(&["add", "srv", "--url", "https://second.example/mcp"]);
    assert_eq!(code, 2, "a usage error: {stdout}{stderr}");
    assert!(
        stderr.contains("srv is defined already; pass --replace to overwrite it"),
        "{stderr}"
    );
    assert_eq!(
        env.list()[0]["transport"]["url"],
        "https://first.example/mcp",
        "the first definition is unchanged"
    );
    let (stdout, stderr, code) = env.gateway(&[
        "add",
        "srv",
        "--replace",
        "--url",
        "https://second.example/mcp",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("Replaced srv."), "{stdout}");
    let listed = env.list();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["transport"]["url"], "https://second.example/mcp");
    // --replace on a new name simply adds it.
    let (stdout, _, code) =
        env.gateway(&["add", "new", "--replace", "--url", "https://n.example/mcp"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("Added new."), "{stdout}");
}

#[test]
fn gateway_add_refuses_a_command_not_on_the_gateway_path() {
    let env = Env::new("gw-notonpath");
    let dir = env.dir.path("bin");
    std::fs::create_dir_all(&dir).unwrap();
    // Allowlisted, but in none of the gateway's directories; and one that is there but
    // not executable (the launch would refuse it too).
    std::fs::write(dir.join("not-executable"), "#!/bin/sh\n").unwrap();
    let env = env
        .with("PERPLEXITY_GATEWAY_PATH", &dir.display().to_string())
        .with(
            "PERPLEXITY_GATEWAY_ALLOWED_COMMANDS",
            "fake-downstream,not-executable",
        );
    for command in ["fake-downstream", "not-executable"] {
        let (stdout, stderr, code) = env.gateway(&["add", "srv", "--command", command]);
        assert_eq!(code, 2, "a usage error: {stdout}{stderr}");
        assert!(
            stderr.contains(&format!(
                "srv refused: '{command}' was not found on PERPLEXITY_GATEWAY_PATH ({})",
                dir.display()
            )) && stderr.contains("set PERPLEXITY_GATEWAY_PATH to include the directory"),
            "{stderr}"
        );
    }
    assert_eq!(env.list(), json!([]), "nothing was written");
    // On the path: accepted.
    let env = env.with(
        "PERPLEXITY_GATEWAY_PATH",
        &format!("{}:{}", dir.display(), bin_dir()),
    );
    let (_, stderr, code) = env.gateway(&["add", "srv", "--command", "fake-downstream"]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn gateway_enable_and_disable_say_what_they_did() {
    let env = Env::new("gw-switch-words");
    let (_, stderr, code) = env.gateway(&["add", "srv", "--url", "https://x.example/mcp"]);
    assert_eq!(code, 0, "{stderr}");
    let (stdout, stderr, code) = env.gateway(&["disable", "srv"]);
    assert_eq!((code, stdout.trim_end()), (0, "Disabled srv."), "{stderr}");
    assert_eq!(env.list()[0]["enabled"], false);
    let (stdout, stderr, code) = env.gateway(&["enable", "srv"]);
    assert_eq!((code, stdout.trim_end()), (0, "Enabled srv."), "{stderr}");
    assert_eq!(env.list()[0]["enabled"], true);
    // `gateway test --help` describes what it takes.
    let (stdout, _, code) = env.gateway(&["test", "--help"]);
    assert_eq!(code, 0);
    for arg in ["<SLUG>", "--json"] {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(arg))
            .unwrap_or_else(|| panic!("{arg}: {stdout}"));
        assert!(
            line.trim().len() > arg.len() + 2,
            "{arg} has no description: {stdout}"
        );
    }
}

/// No passthrough: an HTTP caller's token authenticates it to us and goes no further —
/// the downstream sees only the operator's configured headers — and a client limited to
/// `search` is offered none of the downstream tools.
#[test]
fn a_callers_token_never_reaches_a_downstream_server() {
    use crate::team::{TOKEN_A, TOKEN_B, clients_file};
    let b = HttpDownstream::start(&[]);
    let env = Env::new("gw-no-passthrough").with("PERPLEXITY_SECRET_KEY", SEALING_KEY);
    env.add_local_http("b", &format!("{}/mcp", b.url));
    let file = env.dir.path("clients.toml");
    std::fs::write(&file, clients_file(TOKEN_A)).unwrap();
    let mut vars = env.vars.clone();
    vars.push((
        "PERPLEXITY_HTTP_CLIENTS_FILE".into(),
        file.display().to_string(),
    ));
    let h = crate::http::Http::start(&vars);
    wait_until(
        "the downstream's tools",
        std::time::Duration::from_secs(20),
        || {
            let list = crate::tasks::post(
                &h,
                TOKEN_A,
                &request(1, "tools/list", json!({"_meta": modern_meta()})),
            );
            tool_names(&list).contains(&"mcp__b__echo")
        },
    );
    let called = crate::tasks::post(
        &h,
        TOKEN_A,
        &modern_call(2, "mcp__b__echo", json!({"text": "x"})),
    );
    assert_eq!(called["result"]["isError"], false, "{called}");
    let seen = b.headers();
    assert!(!seen.is_empty());
    for headers in &seen {
        assert!(headers.get("authorization").is_none(), "{headers}");
        assert!(!headers.to_string().contains(TOKEN_A), "{headers}");
    }
    let bot = crate::tasks::post(
        &h,
        TOKEN_B,
        &request(3, "tools/list", json!({"_meta": modern_meta()})),
    );
    assert!(
        !tool_names(&bot).iter().any(|n| n.starts_with("mcp__")),
        "{bot}"
    );
    let refused = crate::tasks::post(
        &h,
        TOKEN_B,
        &modern_call(4, "mcp__b__echo", json!({"text": "x"})),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}
