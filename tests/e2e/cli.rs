//! The command line as a subprocess: answer on stdout, progress on stderr, exit codes.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

fn run(args: &[&str], env: &[(String, String)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run perplexity-agent")
}

fn out(o: &Output) -> (String, String, i32) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code().unwrap_or(-1),
    )
}

#[test]
fn ask_prints_a_clean_answer_and_progress_on_stderr() {
    let fake = FakePerplexity::start_with(
        json!({"duration_ms": 2500, "answer": "The answer.", "sources": [{"title": "T", "url": "https://t.example"}]}),
    );
    let (stdout, stderr, code) = out(&run(
        &[
            "ask",
            "what",
            "is",
            "it?",
            "--preset",
            "fast",
            "--recency",
            " day ",
            "--domains",
            "-a.org, -b.org,,",
        ],
        &env_for(&fake),
    ));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "The answer.\n\nSources:\n[1] T \u{2014} https://t.example\n"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("[perplexity-agent] status ")),
        "{stderr}"
    );
    let create = fake.requests()[0].body_json.clone().unwrap();
    assert_eq!(create["input"], "what is it?");
    assert_eq!(create["preset"], "fast");
    assert_eq!(
        create["tools"][0]["filters"],
        json!({"search_recency_filter": "day", "search_domain_filter": ["-a.org", "-b.org"]})
    );
}

#[test]
fn ask_json_and_spotlight() {
    let fake = FakePerplexity::start_with(
        json!({"duration_ms": 100, "answer": "A.", "sources": [{"title": "T", "url": "https://t.example"}]}),
    );
    let (stdout, _, code) = out(&run(&["ask", "q", "--json"], &env_for(&fake)));
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(stdout.trim()).expect("one JSON document");
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["answer"], "A.");
    assert_eq!(
        doc["sources"],
        json!([{"number": 1, "title": "T", "url": "https://t.example"}])
    );
    assert!(doc["response_id"].as_str().unwrap().starts_with("resp_"));

    let (stdout, _, _) = out(&run(&["ask", "q", "--spotlight"], &env_for(&fake)));
    assert!(unwrap_spotlight(stdout.trim_end_matches('\n')).starts_with("A."));
}

#[test]
fn ask_exit_codes() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 30000}));
    let env = env_for(&fake);

    let (stdout, stderr, code) = out(&run(&["ask", "q", "--no-wait"], &env));
    assert_eq!(code, 3);
    let id = stdout.trim();
    assert!(id.starts_with("resp_"), "{stdout}");
    assert!(stderr.contains(&format!("perplexity-agent result {id}")));

    let (stdout, stderr, code) = out(&run(&["ask", "q", "--timeout", "1"], &env));
    assert_eq!(code, 3, "{stderr}");
    let id = stdout.trim();
    assert!(
        stderr.contains("still running") && stderr.contains(id),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("perplexity-agent cancel {id}")),
        "{stderr}"
    );

    let (_, stderr, code) = out(&run(&["result", id], &env));
    assert_eq!(code, 3, "{stderr}");
    let (stdout, _, code) = out(&run(&["cancel", id], &env));
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with(&format!("Cancellation requested for {id}.")),
        "{stdout}"
    );

    fake.set_scenario(
        json!({"duration_ms": 100, "final_status": "failed", "error_message": "nope"}),
    );
    let (_, stderr, code) = out(&run(&["ask", "q"], &env));
    assert_eq!(code, 1);
    assert!(stderr.contains("The research run failed: nope"));

    for (args, message) in [
        (
            vec!["ask"],
            "The query is required and must be a non-empty string.",
        ),
        (
            vec!["ask", "   "],
            "The query is required and must be a non-empty string.",
        ),
        (
            vec!["ask", "q", "--preset", " "],
            "--preset must be a non-empty string.",
        ),
        (vec!["ask", "q", "--timeout", "0"], "--timeout"),
        (vec!["ask", "q", "--timeout", "-5"], "--timeout"),
        (vec!["ask", "q", "--recency", "decade"], "--recency"),
        (vec!["result", "../etc"], "Malformed response_id"),
        (vec!["ask", "q", "--bogus"], "--bogus"),
    ] {
        let (_, stderr, code) = out(&run(&args, &env));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    let many = (0..21)
        .map(|i| format!("d{i}.org"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(out(&run(&["ask", "q", "--domains", &many], &env)).2, 2);

    let no_key = vec![("PERPLEXITY_API_BASE".to_owned(), fake.base_url())];
    let (_, stderr, code) = out(&run(&["ask", "q"], &no_key));
    assert_eq!(code, 4);
    assert!(stderr.contains("PERPLEXITY_API_KEY is not set"), "{stderr}");
    let bad_base = vec![(
        "PERPLEXITY_API_BASE".to_owned(),
        "http://example.com".to_owned(),
    )];
    assert_eq!(out(&run(&["ask", "q"], &bad_base)).2, 4);

    fake.push_fault(json!({"route": "create", "status": 401, "json": {"error": {"message": "Invalid API key"}}}));
    assert_eq!(out(&run(&["ask", "q"], &env)).2, 4);
    assert!(fake.requests().iter().all(|r| {
        r.headers
            .get("authorization")
            .is_some_and(|a| a != "Bearer ")
    }));
}

#[test]
fn result_waits_for_a_finished_answer() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 1500, "answer": "Later."}));
    let env = env_for(&fake);
    let (stdout, _, code) = out(&run(&["ask", "q", "--no-wait"], &env));
    assert_eq!(code, 3);
    let (stdout, stderr, code) = out(&run(&["result", stdout.trim(), "--wait", "10"], &env));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("Later."));
}

#[test]
fn help_and_version() {
    let (stdout, _, code) = out(&run(&["--help"], &[]));
    assert_eq!(code, 0);
    for word in ["serve", "ask", "result", "cancel"] {
        assert!(stdout.contains(word), "{stdout}");
    }
    let (stdout, _, code) = out(&run(&["--version"], &[]));
    assert_eq!(code, 0);
    assert!(stdout.contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn ask_is_bound_and_worded_like_the_mcp_tool() {
    // The same validation as perplexity_agent: a query over 16,384 characters is refused
    // with the tool's message, in the CLI's words, before anything is sent.
    let fake = FakePerplexity::start();
    let env = env_for(&fake);
    let long = "q".repeat(20_000);
    let (_, stderr, code) = out(&run(&["ask", &long], &env));
    assert_eq!(code, 2, "{stderr}");
    let mut s = Server::start(&env);
    let (mcp, is_error) =
        tool_text(&s.request(&call(1, "perplexity_agent", json!({"query": long}))));
    assert!(is_error);
    assert_eq!(mcp, "'query' must be at most 16384 characters.");
    assert!(
        stderr.contains("The query must be at most 16384 characters."),
        "{stderr}"
    );
    let mixed = ["ask", "q", "--domains", "a.org,-b.org"];
    let (_, stderr, code) = out(&run(&mixed, &env));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--domains"), "{stderr}");
    assert!(fake.requests().is_empty(), "refusals send nothing");
}

/// Ctrl-C during `ask`: the run keeps billing upstream, so its id is on stderr
/// from the moment it exists, and the interruption prints how to collect or stop it.
#[test]
fn ctrl_c_during_ask_names_the_run_and_exits_130() {
    use std::io::{BufRead, BufReader, Read};
    let fake = FakePerplexity::start_with(json!({"duration_ms": 20000}));
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["ask", "a slow question"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env_for(&fake) {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    // The id is announced before the answer could be: the run exists, the wait goes on.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.contains("research run") && Instant::now() < deadline {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
    }
    let id = fake
        .runs()
        .first()
        .map(|r| r.id.clone())
        .expect("a run was created");
    assert!(
        seen.contains(&format!("research run {id} started")),
        "{seen}"
    );
    let started = Instant::now();
    signal(child.id(), "INT");
    let status = child.wait().unwrap();
    stderr.read_to_string(&mut seen).unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "prompt exit");
    assert_eq!(status.code(), Some(130), "{seen}");
    assert_eq!(stdout.trim(), id);
    assert!(
        seen.contains(&format!(
            "Collect it with: perplexity-agent result {id} --wait 300"
        )),
        "{seen}"
    );
    assert!(seen.contains(&format!("Stop it with:    perplexity-agent cancel {id}")));
    assert!(!seen.contains(KEY));
    // Interrupting the wait never cancels the paid run.
    assert!(!fake.requests().iter().any(|r| r.path.ends_with("/cancel")));
}

/// An id Perplexity does not know is said to be unknown, without an invitation to keep
/// collecting it.
#[test]
fn result_of_an_unknown_id_says_there_is_no_such_run() {
    let fake = FakePerplexity::start();
    let (stdout, stderr, code) = run_cli(&["result", "resp_doesnotexist"], &env_for(&fake));
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(
        stderr.trim(),
        "perplexity-agent: No research run resp_doesnotexist exists for this API key (a wrong id, another account's run, a run created with store: false, or one that has expired): there is nothing to collect."
    );
}

/// Each front end names its own fix: a shell user exports the key, and a
/// missing key is exit 4 whichever command met it.
#[test]
fn a_missing_key_is_the_shells_fix_and_exit_4_for_every_command() {
    let fake = FakePerplexity::start();
    let env = vec![("PERPLEXITY_API_BASE".to_owned(), fake.base_url())];
    for args in [
        &["search", "q"][..],
        &["research", "q"][..],
        &["ask", "q"][..],
    ] {
        let (stdout, stderr, code) = run_cli(args, &env);
        assert_eq!(code, 4, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}");
        assert!(
            stderr.contains("PERPLEXITY_API_KEY is not set. Export it in your shell"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("MCP client"), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("every search failed"),
            "{args:?}: {stderr}"
        );
    }
}

/// Messages name the CLI's words, not the MCP tool's parameters.
#[test]
fn cli_messages_use_the_cli_words() {
    let fake = FakePerplexity::start();
    let env = env_for(&fake);
    let (_, stderr, code) = run_cli(&["result", "../etc/passwd"], &env);
    assert_eq!(code, 2);
    assert_eq!(
        stderr.trim(),
        "perplexity-agent: Malformed response_id. Expected the id that `perplexity-agent ask` printed."
    );
    let many: Vec<String> = (0..11)
        .map(|i| format!("https://example.com/{i}"))
        .collect();
    let mut args = vec!["fetch"];
    args.extend(many.iter().map(String::as_str));
    let (_, stderr, code) = run_cli(&args, &env);
    assert_eq!(code, 2);
    assert_eq!(
        stderr.trim(),
        "perplexity-agent: The list of URLs accepts at most 10 entries."
    );
    let (_, stderr, code) = run_cli(&["search", "--max-results", "99", "q"], &env);
    assert_eq!(code, 2);
    assert!(stderr.contains("--max-results must be"), "{stderr}");
    // Every argument the message names is named by lookup, wherever it stands.
    let (_, stderr, code) = run_cli(&["ask", "--model", "sonar-pro", "q"], &env);
    assert_eq!(code, 2);
    assert_eq!(
        stderr.trim(),
        "perplexity-agent: --model must be a provider/model id such as openai/gpt-5.5 or perplexity/sonar (list them with: perplexity-agent models); for a preset such as fast use --preset."
    );
    let (_, stderr, code) = run_cli(&["search", "--domains", "a.org,-b.com", "q"], &env);
    assert_eq!(code, 2);
    assert_eq!(
        stderr.trim(),
        "perplexity-agent: --domains is an allowlist or a denylist (every entry prefixed with '-'), not both."
    );
    let (_, stderr, code) = run_cli(&["research", "--subquestions", "9", "q"], &env);
    assert_eq!(code, 2);
    assert_eq!(
        stderr.trim(),
        "perplexity-agent: --subquestions must be an integer from 1 to 8."
    );
    assert!(fake.requests().is_empty(), "refusals send nothing");
}

/// `models` names `provider/model` ids, and `ask --model` takes one (the model tool,
/// `perplexity_ask`, upstream); a preset this version does not know is sent — presets
/// are an open string — after a warning that names the known ones.
#[test]
fn ask_takes_a_model_and_warns_of_an_unknown_preset() {
    let fake = FakePerplexity::start();
    let env = env_for(&fake);
    let (stdout, stderr, code) = run_cli(&["ask", "--model", "openai/gpt-5.5", "q"], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.trim().is_empty());
    let create = fake.requests()[0].body_json.clone().unwrap();
    assert_eq!(create["model"], "openai/gpt-5.5", "{create}");
    assert!(create.get("preset").is_none(), "{create}");

    let (_, stderr, code) = run_cli(
        &["ask", "--model", "openai/gpt-5.5", "--no-wait", "q"],
        &env,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--no-wait"), "{stderr}");

    fake.clear_requests();
    let (_, stderr, code) = run_cli(&["ask", "--preset", "ultra", "q"], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("warning: 'ultra' is not a preset this version knows (fast, low, medium, high, xhigh, wide-research)"),
        "{stderr}"
    );
    let create = fake.requests()[0].body_json.clone().unwrap();
    assert_eq!(create["preset"], "ultra", "{create}");
    let (_, stderr, code) = run_cli(&["ask", "--preset", "high", "q"], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

/// Not a web address is a usage error (2), before anything is fetched; a page that
/// fails is exit 1 even when another page worked.
#[test]
fn fetch_exit_codes_tell_typos_from_failed_pages() {
    let fake = FakePerplexity::start();
    let env = env_for(&fake);
    let (stdout, stderr, code) = run_cli(&["fetch", "notaurl"], &env);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(
        stderr.trim(),
        "perplexity-agent: 'notaurl' is not a web address: fetch takes http:// or https:// URLs (did you mean https://notaurl?)."
    );
    let web = crate::web::Web::start("127.0.0.2", 0, |_| {
        crate::web::html(
            "<html><head><title>T</title></head><body><p>Hello there.</p></body></html>",
        )
    });
    let mut env = env.clone();
    env.push((
        "PERPLEXITY_FETCH_ALLOW_PRIVATE".to_owned(),
        "127.0.0.2/32".to_owned(),
    ));
    let page = web.url("/p");
    let (stdout, stderr, code) = run_cli(&["fetch", &page, "http://169.254.169.254/"], &env);
    assert_eq!(code, 1, "one of two pages failed: {stderr}");
    assert!(stdout.starts_with("# T\n"), "{stdout}");
    // The lifted address check is said to a person in a sentence, not a log line.
    assert!(
        stderr.contains("perplexity-agent: warning: PERPLEXITY_FETCH_ALLOW_PRIVATE=127.0.0.2/32"),
        "{stderr}"
    );
    assert!(!stderr.contains(" WARN "), "{stderr}");
    let (_, _, code) = run_cli(&["fetch", &page], &env);
    assert_eq!(code, 0);
}

/// What a new user hit: nonsense suggestions for what is no web address at all, a TLS
/// error for a server that speaks plain http, a refused loopback page that did not say
/// how to allow it, `=all` for a setting written `true`, and a connection failure that
/// blamed "Perplexity or the network" for an address the user had set.
#[test]
fn fetch_and_connection_errors_say_what_to_do() {
    let fake = FakePerplexity::start();
    let env = env_for(&fake);
    for typed in ["ftp://x.org/", "http://", "not a url"] {
        let (_, stderr, code) = run_cli(&["fetch", typed], &env);
        assert_eq!(code, 2, "{typed}: {stderr}");
        assert!(
            !stderr.contains("did you mean") && !stderr.contains("https://ftp"),
            "{typed}: {stderr}"
        );
    }
    let (_, stderr, _) = run_cli(&["fetch", "example.org/a"], &env);
    assert!(
        stderr.contains("(did you mean https://example.org/a?)"),
        "{stderr}"
    );

    let web = crate::web::Web::start("127.0.0.1", 0, |_| crate::web::html("<p>plain</p>"));
    let page = web.url("/p");
    let (stdout, _, code) = run_cli(&["fetch", &page, "--json"], &env);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("PERPLEXITY_FETCH_ALLOW_PRIVATE"),
        "a refused loopback page says what would allow it: {stdout}"
    );
    let mut allowed = env.clone();
    allowed.push(("PERPLEXITY_FETCH_ALLOW_PRIVATE".into(), "true".into()));
    // A plain-http server on the port an https URL names: it answers the TLS hello with
    // an HTTP error page, as ordinary servers do.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tls = format!("https://127.0.0.1:{}/p", plain.local_addr().unwrap().port());
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut stream in plain.incoming().flatten() {
            let mut hello = [0u8; 1024];
            let _ = stream.read(&mut hello);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let (stdout, stderr, code) = run_cli(&["fetch", &tls, "--json"], &allowed);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("did not answer in TLS") && !stdout.contains("certificate"),
        "{stdout}"
    );
    assert!(
        stderr.contains("PERPLEXITY_FETCH_ALLOW_PRIVATE=true:") && !stderr.contains("=all"),
        "{stderr}"
    );

    let mut nowhere = env_for(&fake);
    nowhere.retain(|(k, _)| k != "PERPLEXITY_API_BASE");
    nowhere.push(("PERPLEXITY_API_BASE".into(), "http://127.0.0.1:1".into()));
    let (_, stderr, code) = run_cli(&["search", "x"], &nowhere);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("Nothing answered at http://127.0.0.1:1 (PERPLEXITY_API_BASE)"),
        "{stderr}"
    );
}

/// The same words for the same mistakes in every command, and a suggestion for a typo.
/// Before: `research --timeout 0` and `result --wait 99999` got clap's raw range errors
/// while `ask --timeout 0` was told the range; `search -` searched for a literal `-`;
/// `asc` and `--domain` got no hint; people search could not be chosen.
#[test]
fn commands_agree_on_ranges_stdin_and_suggestions() {
    let fake = FakePerplexity::start_with(json!({"answer": "ok"}));
    let env = env_for(&fake);
    for (args, said) in [
        (
            &["research", "x", "--timeout", "0"][..],
            "--timeout must be from 1 to 1800 seconds.",
        ),
        (
            &["ask", "x", "--timeout", "0"][..],
            "--timeout must be from 1 to 1800 seconds.",
        ),
        (
            &["result", "resp_x", "--wait", "99999"][..],
            "--wait must be from 0 to 1800 seconds.",
        ),
        (
            &["result", "resp_x", "--wait", "-1"][..],
            "--wait must be from 0 to 1800 seconds.",
        ),
    ] {
        let (_, stderr, code) = run_cli(args, &env);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            format!("perplexity-agent: {said}"),
            "{args:?}"
        );
    }
    assert!(
        fake.requests().is_empty(),
        "refused before anything is sent"
    );
    let (_, stderr, code) = run_cli(&["asc", "x"], &env);
    assert_eq!(code, 2);
    assert!(stderr.contains("'ask'"), "{stderr}");
    let (_, stderr, code) = run_cli(&["ask", "x", "--domain", "a.org"], &env);
    assert_eq!(code, 2);
    assert!(stderr.contains("--domains"), "{stderr}");

    let out = fed(&["search", "-"], &env, "from stdin\n");
    assert!(out.status.success(), "{out:?}");
    let bodies: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/search")
        .filter_map(|r| r.body_json)
        .collect();
    assert_eq!(bodies[0]["query"], "from stdin", "{bodies:?}");
    let (_, stderr, code) = run_cli(
        &["search", "x", "--type", "people", "--max-results", "30"],
        &env,
    );
    assert_eq!(code, 0, "{stderr}");
}

/// The question may come on stdin (`ask -`, or no words and a pipe); out-of-range and
/// contradictory flags are refused before anything is sent.
#[test]
fn ask_reads_stdin_and_refuses_bad_flags_before_sending() {
    let fake = FakePerplexity::start_with(json!({"answer": "Piped."}));
    let piped = |args: &[&str], input: &str| fed(args, &env_for(&fake), input);
    for args in [&["ask"][..], &["ask", "-"][..]] {
        let out = piped(args, "what is piped\n");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Piped."));
    }
    let inputs: Vec<Value> = agent_creates(&fake)
        .iter()
        .map(|b| b["input"].clone())
        .collect();
    assert_eq!(inputs, [json!("what is piped"), json!("what is piped")]);
    let sent = agent_creates(&fake).len();
    for (args, says) in [
        (
            &["ask", "--timeout", "5000", "q"][..],
            "--timeout must be from 1 to 1800 seconds.",
        ),
        (
            &["ask", "--timeout", "0", "q"][..],
            "--timeout must be from 1 to 1800 seconds.",
        ),
        (
            &["ask", "--no-wait", "--timeout", "5", "q"][..],
            "cannot be used with",
        ),
        (
            &["ask", "--domains", ",,,", "q"][..],
            "--domains names no domain",
        ),
        (
            &["search", "--domains", ",,,", "q"][..],
            "--domains names no domain",
        ),
        (
            &["research", "--timeout", "5000", "q"][..],
            "--timeout must be from 1 to 1800 seconds.",
        ),
        (
            &["result", "resp_x", "--wait", "5000"][..],
            "--wait must be from 0 to 1800 seconds.",
        ),
    ] {
        let (_, stderr, code) = run_cli(args, &env_for(&fake));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert_eq!(
        agent_creates(&fake).len(),
        sent,
        "nothing sent for refused flags"
    );
}

/// Retries used up read as a sentence with what to do (the MCP text stays the peer's).
#[test]
fn used_up_retries_say_what_to_do() {
    let fake = FakePerplexity::start();
    fake.push_fault(json!({"route": "search", "status": 429, "body": "", "times": 3}));
    let (stdout, stderr, code) = run_cli(&["search", "q"], &env_for(&fake));
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.is_empty());
    // The waits between attempts are said as they happen; the last line is the verdict.
    assert_eq!(
        stderr.trim().lines().last().unwrap_or_default(),
        "perplexity-agent: Perplexity returned HTTP 429 after 3 attempts. Perplexity is limiting this key's request rate: wait a minute and try again."
    );
}

/// A long Retry-After is said on stderr, not left as a silent spinner.
#[test]
fn a_long_retry_after_is_said_while_the_command_waits() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "answer": "After the wait."}));
    fake.push_fault(
        json!({"route": "create", "kind": "rate_limit", "retry_after_secs": 3, "times": 1}),
    );
    let (stdout, stderr, code) = run_cli(&["ask", "q"], &env_for(&fake));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("After the wait."));
    assert!(
        stderr.contains(
            "[perplexity-agent] Perplexity is limiting the request rate (HTTP 429); trying again in 3s (attempt 2 of 3)…"
        ),
        "{stderr}"
    );
}

#[test]
fn result_wait_hears_the_end_of_the_run_at_once() {
    let duration: u64 = 3000;
    let fake = FakePerplexity::start_with(json!({"duration_ms": duration, "answer": "Later."}));
    let env = env_for(&fake);
    let (stdout, _, code) = out(&run(&["ask", "q", "--no-wait"], &env));
    assert_eq!(code, 3);
    let (stdout, stderr, code) = out(&run(&["result", stdout.trim(), "--wait", "30"], &env));
    let answered = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("Later."));
    let created = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .map(|r| r.at_ms)
        .expect("a create");
    // The process's own exit is inside the margin too.
    let late = answered as i64 - (created + duration) as i64;
    assert!(late < 400, "the answer came {late} ms after the run ended");
}

#[test]
fn demo_serves_a_stand_in_every_command_can_use_without_a_key() {
    use std::io::BufRead;
    // Stopped however the test ends, so no server outlives a failed assertion.
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut demo = Stop(
        Command::new(BIN)
            .args([
                "demo",
                "--port",
                "0",
                "--scenario",
                r#"{"duration_ms": 100}"#,
            ])
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start demo"),
    );
    let mut line = String::new();
    std::io::BufReader::new(demo.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    let home = Scratch::new("demo");
    let env = vec![
        ("PERPLEXITY_API_BASE".to_owned(), base.clone()),
        ("PERPLEXITY_API_KEY".to_owned(), "pplx-demo".to_owned()),
        ("HOME".to_owned(), home.path("").display().to_string()),
    ];
    let (stdout, stderr, code) = out(&run(&["ask", "Does", "this", "work?"], &env));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("Fake answer."), "{stdout}");
    let (stdout, stderr, code) = out(&run(&["research", "Is it?"], &env));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("Fake answer."), "{stdout}");

    // The port it holds is refused to a second one with what to do; a bad scenario is a
    // usage error before anything listens.
    let port = base.rsplit(':').next().unwrap();
    let (_, stderr, code) = out(&run(&["demo", "--port", port], &[]));
    assert_eq!(code, 1);
    assert!(stderr.contains("--port"), "{stderr}");
    let (_, stderr, code) = out(&run(&["demo", "--scenario", "{\"nope\": 1}"], &[]));
    assert_eq!(code, 2);
    assert!(stderr.contains("nope"), "{stderr}");

    // SIGTERM ends it cleanly.
    unsafe { libc::kill(demo.0.id() as i32, libc::SIGTERM) };
    let status = demo.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut demo.0.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("PERPLEXITY_API_KEY=pplx-demo"), "{err}");
}

/// Ctrl-C typed at a terminal during `ask`: the spinner is gone before the lines that
/// say how to collect the run, on every width. Before, the tty's `^C` echo wrapped after
/// the spinner's full-width line and only the echo's line was cleared, so the spinner
/// stayed on screen above the interruption.
#[test]
fn ctrl_c_at_a_terminal_clears_the_spinner_before_the_lines_to_collect_the_run() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 30000}));
    for cols in [80, 200] {
        let mut term =
            crate::pty::Pty::spawn_sized(&["ask", "a slow question"], &env_for(&fake), cols, 24);
        let trimmed = |term: &crate::pty::Pty| -> Vec<String> {
            term.rows()
                .iter()
                .map(|r| r.trim_end().to_owned())
                .collect()
        };
        let id = || fake.runs().last().map(|r| r.id.clone()).unwrap_or_default();
        wait_until("the spinner names the run", Duration::from_secs(10), || {
            let id = id();
            !id.is_empty() && term.rows()[0].contains(&id) && term.rows()[0].contains("status")
        });
        let id = id();
        term.typed("\x03");
        assert_eq!(
            term.exits_within(Duration::from_secs(5)).code(),
            Some(130),
            "{cols} columns"
        );
        // The last bytes written before the exit reach the emulator.
        std::thread::sleep(Duration::from_millis(300));
        let rows = trimmed(&term);
        let shown = rows.join("\n");
        assert_eq!(
            rows[0], id,
            "{cols} columns: the spinner's row now holds the id:\n{shown}"
        );
        assert!(
            !shown.contains("status") && !shown.contains('\u{b7}') && !shown.contains("^C"),
            "{cols} columns: the spinner is left on screen:\n{shown}"
        );
        assert!(
            shown.contains("Collect it with: perplexity-agent result"),
            "{shown}"
        );
    }
}

/// `ask --no-wait` names the run it started once (on stdout, said once on stderr), not
/// twice on stderr.
#[test]
fn ask_no_wait_says_started_once() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 30000}));
    let (stdout, stderr, code) = run_cli(&["ask", "q", "--no-wait"], &env_for(&fake));
    assert_eq!(code, 3, "{stderr}");
    let id = stdout.trim();
    assert!(id.starts_with("resp_"), "{stdout}");
    assert_eq!(
        stderr.to_lowercase().matches("started").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr,
        format!(
            "Started research run {id}.\nCollect it with: perplexity-agent result {id} --wait 300\nStop it with:    perplexity-agent cancel {id}\n"
        )
    );
}

/// A typo of a command is pointed at the command it is closest to, alone: clap's own tip
/// for `serch` listed `serve`, `fetch` and `research` before `search`.
#[test]
fn a_mistyped_command_is_pointed_at_the_closest_one() {
    for (typed, meant) in [
        ("serch", "search"),
        ("seach", "search"),
        ("reserch", "research"),
        ("researh", "research"),
        ("tsks", "tasks"),
        ("asc", "ask"),
        ("resul", "result"),
        ("results", "result"),
        ("cancle", "cancel"),
        ("modles", "models"),
    ] {
        let (stdout, stderr, code) = run_cli(&[typed, "x"], &[]);
        assert_eq!(code, 2, "{typed}: {stderr}");
        assert!(stdout.is_empty());
        let tips: Vec<&str> = stderr.lines().filter(|l| l.contains("tip:")).collect();
        assert_eq!(
            tips,
            [format!("  tip: a similar subcommand exists: '{meant}'")],
            "{typed}: {stderr}"
        );
        assert!(
            stderr.starts_with(&format!("error: unrecognized subcommand '{typed}'")),
            "{stderr}"
        );
    }
    // A subcommand's own subcommands get the same treatment.
    let (_, stderr, code) = run_cli(&["gateway", "lst"], &[]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("tip: a similar subcommand exists: 'list'"),
        "{stderr}"
    );
    // Nothing close: no tip at all, as before.
    let (_, stderr, code) = run_cli(&["zzzzqqq"], &[]);
    assert_eq!(code, 2);
    assert!(!stderr.contains("tip:"), "{stderr}");
}

/// `cancel` of a run this machine saw finish says so and how to read it, whether
/// Perplexity answers 400 (not running) or 404 (no longer has it); an id nobody here
/// knows keeps the message that it may never have existed.
#[test]
fn cancel_of_a_run_known_to_have_finished_says_so() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "answer": "Done."}));
    let dir = Scratch::new("cancel-finished");
    let env = env_with_store(&fake, &dir);
    let (stdout, stderr, code) = run_cli(&["ask", "q", "--json"], &env);
    assert_eq!(code, 0, "{stderr}");
    let doc: Value = serde_json::from_str(stdout.trim()).unwrap();
    let id = doc["response_id"].as_str().unwrap().to_owned();
    let (stdout, stderr, code) = run_cli(&["cancel", &id], &env);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "Research run {id} has already finished: there is nothing to cancel. Read it with: perplexity-agent result {id}\n"
        )
    );
    let (stdout, _, code) = run_cli(&["cancel", &id, "--json"], &env);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(doc["status"], "already_finished", "{doc}");

    // A run the ledger recorded but Perplexity no longer has (404).
    let db = rusqlite::Connection::open(dir.path("store.sqlite")).unwrap();
    db.execute(
        "INSERT INTO ledger (request, at_ms, caller, caller_name, front_end, tool, model,
             total_micros, currency, estimated)
         VALUES ('resp_gone0000000000000000000', ?1, 'local', 'local', 'cli',
             'perplexity_agent', NULL, 10000, 'USD', 0)",
        rusqlite::params![
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64
        ],
    )
    .unwrap();
    let (stdout, stderr, code) = run_cli(&["cancel", "resp_gone0000000000000000000"], &env);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "Research run resp_gone0000000000000000000 has already finished: there is nothing to cancel. Perplexity no longer has it (it expired, or was made with another API key), so `perplexity-agent result` cannot read it either.\n"
    );

    // Unknown here and upstream: the message stays the one for an id that may not exist.
    let (stdout, stderr, code) = run_cli(&["cancel", "resp_doesnotexist"], &env);
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("No research run resp_doesnotexist exists"),
        "{stderr}"
    );
    fake.set_scenario(json!({"cancel_unknown_status": 400}));
    let (stdout, _, code) = run_cli(&["cancel", "resp_doesnotexist"], &env);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("whether the run already finished or the id never existed"),
        "{stdout}"
    );
}
