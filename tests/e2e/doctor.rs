//! `doctor` as a user reads it: short lines, a key found in a client's entry, and
//! `--online` against the fake upstream (a closed port, a refused key). The key never
//! appears in any output (`run_cli` scans every stream for it).

use serde_json::json;

use crate::common::*;
use crate::install::{Machine, checks, has_line, line_starting};

/// Following doctor's own advice (`install … --with-key-from-env`) and then running it
/// in a shell without the key passes: the key in the client's entry counts, and the
/// check says where it is (client and file), never what it is.
#[test]
fn a_key_in_a_client_entry_counts() {
    let m = Machine::new("doc-entry-key");
    let (_, stderr, code) = m.install(&["claude-desktop", "--with-key-from-env"]);
    assert_eq!(code, 0, "{stderr}");
    let shell = Machine {
        dir: Scratch::new("unused"),
        vars: m.vars.clone(),
    }
    .without("PERPLEXITY_API_KEY");
    let (lines, stderr, code) = shell.doctor();
    assert_eq!(code, 0, "{lines:#?}\n{stderr}");
    let line = line_starting(&lines, "OK API key:");
    let file = m.config("Claude/claude_desktop_config.json");
    assert!(
        line.contains("Claude Desktop") && line.contains(&file.display().to_string()),
        "{line}"
    );
    assert!(line.contains("not set in this shell"), "{line}");

    // A key in no entry and not in the shell still fails, as before.
    let bare = Machine::new("doc-entry-nokey").without("PERPLEXITY_API_KEY");
    let (_, stderr, code) = bare.install(&["claude-desktop"]);
    assert_eq!(code, 0, "{stderr}");
    let (lines, _, code) = bare.doctor();
    assert_eq!(code, 1, "{lines:#?}");
    assert!(has_line(&lines, "FAIL API key:"), "{lines:#?}");
}

/// A line per headline, details indented under it and wrapped near 80 columns, a
/// summary last (`checks` in install.rs parses and checks that shape).
#[test]
fn doctor_prints_short_lines_with_a_summary() {
    let m = Machine::new("doc-short");
    let (_, stderr, code) = m.install(&["claude-desktop"]);
    assert_eq!(code, 0, "{stderr}");
    let (stdout, _, code) = m.run(&["doctor"]);
    assert_eq!(code, 0, "{stdout}");
    let lines = checks(&stdout);
    assert!(lines.len() >= 8, "{lines:#?}");
    assert!(has_line(
        &lines,
        "WARN Claude Desktop (perplexity-agent) key:"
    ));
    for line in stdout.lines() {
        // Only a word that cannot be broken (a long path) may run past 80 columns.
        let width = line.chars().count();
        let breakable = line
            .trim_start()
            .trim_start_matches('\u{2192}')
            .trim()
            .contains(' ');
        assert!(width <= 80 || !breakable, "{width} columns: {line}");
    }
    let summary = stdout.lines().last().unwrap();
    assert!(summary.ends_with("1 warning, 0 failed"), "{summary}");
    // The JSON document is unchanged in shape: one object per check.
    let (json, _, code) = m.run(&["doctor", "--json"]);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["checks"].as_array().unwrap().len(), lines.len());
}

/// A base on a closed port: `--online` says so and exits 1 (offline, doctor cannot
/// tell, and sends nothing).
#[test]
fn online_reports_an_api_base_that_does_not_answer() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let base = format!("http://127.0.0.1:{closed}");
    let m = Machine::new("doc-online-closed").with("PERPLEXITY_API_BASE", &base);
    let (lines, _, code) = m.doctor();
    assert_eq!(code, 0, "offline, nothing is sent: {lines:#?}");
    let (lines, stderr, code) = m.doctor_with(&["--online"]);
    assert_eq!(code, 1, "{lines:#?}\n{stderr}");
    let line = line_starting(&lines, "FAIL Perplexity API:");
    assert!(line.contains(&base) && line.contains("connect"), "{line}");
    assert!(
        has_line(&lines, "WARN API key online: not tried"),
        "{lines:#?}"
    );
}

/// The fake answers: the catalogue, then a lookup of a run that does not exist, which
/// a good key gets 404 for and a refused one 401.
#[test]
fn online_checks_the_base_and_the_key() {
    let fake = FakePerplexity::start();
    let m = Machine::new("doc-online").with("PERPLEXITY_API_BASE", &fake.base_url());
    let (lines, _, code) = m.doctor();
    assert_eq!(code, 0, "{lines:#?}");
    assert!(
        fake.requests().is_empty(),
        "doctor without --online sent something"
    );

    let (lines, stderr, code) = m.doctor_with(&["--online"]);
    assert_eq!(code, 0, "{lines:#?}\n{stderr}");
    let line = line_starting(&lines, "OK Perplexity API:");
    assert!(
        line.contains(&fake.base_url()) && line.contains("8 models"),
        "{line}"
    );
    let line = line_starting(&lines, "OK API key online:");
    assert!(line.contains("accepted"), "{line}");
    let requests = fake.requests();
    let seen: Vec<(String, String)> = requests
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], ("GET".to_owned(), "/v1/models".to_owned()));
    assert_eq!(seen[1].0, "GET");
    assert!(seen[1].1.starts_with("/v1/agent/"), "{seen:?}");
    assert!(
        requests.iter().all(|r| r.method == "GET"),
        "nothing billable is sent"
    );

    fake.set_scenario(json!({"expected_key": "pplx-another-key-0123456789"}));
    let (lines, stderr, code) = m.doctor_with(&["--online"]);
    assert_eq!(code, 1, "{lines:#?}\n{stderr}");
    assert!(has_line(&lines, "OK Perplexity API:"), "{lines:#?}");
    let line = line_starting(&lines, "FAIL API key online:");
    assert!(line.contains("the key was refused"), "{line}");
    assert!(line.contains("401"), "{line}");

    // The same in the JSON document.
    let (json, _, code) = m.run(&["doctor", "--online", "--json"]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"] == "API key online" && c["status"] == "FAIL"),
        "{doc}"
    );
}
