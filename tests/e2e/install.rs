//! `install` and `doctor` as a user runs them: the real binary against a scratch HOME and
//! XDG_CONFIG_HOME (never the real ones), client files read back as JSON and as bytes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::*;
use crate::gateway::SEALING_KEY;

/// A user's machine in a scratch directory: HOME, XDG_CONFIG_HOME and the store in it.
pub(crate) struct Machine {
    pub(crate) dir: Scratch,
    pub(crate) vars: Vec<(String, String)>,
}

impl Machine {
    pub(crate) fn new(name: &str) -> Machine {
        let dir = Scratch::new(name);
        let vars = vec![
            ("HOME".into(), dir.path("home").display().to_string()),
            (
                "XDG_CONFIG_HOME".into(),
                dir.path("config").display().to_string(),
            ),
            (
                "PERPLEXITY_STORE_PATH".into(),
                dir.path("data/store.sqlite").display().to_string(),
            ),
            ("PERPLEXITY_API_KEY".into(), KEY.into()),
        ];
        std::fs::create_dir_all(dir.path("home")).unwrap();
        Machine { dir, vars }
    }

    pub(crate) fn with(mut self, k: &str, v: &str) -> Machine {
        self.vars.retain(|(name, _)| name != k);
        self.vars.push((k.into(), v.into()));
        self
    }

    pub(crate) fn without(mut self, k: &str) -> Machine {
        self.vars.retain(|(name, _)| name != k);
        self
    }

    pub(crate) fn run(&self, args: &[&str]) -> (String, String, i32) {
        run_cli(args, &self.vars)
    }

    pub(crate) fn install(&self, args: &[&str]) -> (String, String, i32) {
        let mut all = vec!["install"];
        all.extend_from_slice(args);
        self.run(&all)
    }

    /// doctor's checks, each flattened to `STATUS Name: detail — fix` (see [`checks`]).
    pub(crate) fn doctor(&self) -> (Vec<String>, String, i32) {
        self.doctor_with(&[])
    }

    pub(crate) fn doctor_with(&self, extra: &[&str]) -> (Vec<String>, String, i32) {
        let mut args = vec!["doctor"];
        args.extend_from_slice(extra);
        let (stdout, stderr, code) = self.run(&args);
        (checks(&stdout), stderr, code)
    }

    pub(crate) fn home(&self, rel: &str) -> PathBuf {
        self.dir.path("home").join(rel)
    }

    pub(crate) fn config(&self, rel: &str) -> PathBuf {
        self.dir.path("config").join(rel)
    }
}

/// doctor's output read back: a headline per check (`✓`, `⚠` or `✗` and its name), its
/// detail on indented lines, what to do on an indented line starting `→`, and a summary
/// line last. Each check comes back as one line, `OK|WARN|FAIL Name: detail — fix`, the
/// wrapped lines joined with spaces, so assertions read whole sentences. Panics on
/// anything else, so a stray line fails the test.
pub(crate) fn checks(stdout: &str) -> Vec<String> {
    struct Parsed {
        status: &'static str,
        name: String,
        detail: Vec<String>,
        fix: Vec<String>,
    }
    let mut parsed: Vec<Parsed> = Vec::new();
    let mut lines = stdout.lines().peekable();
    let mut summary = None;
    while let Some(line) = lines.next() {
        let status = match line.chars().next() {
            Some('\u{2713}') => Some("OK"),
            Some('\u{26a0}') => Some("WARN"),
            Some('\u{2717}') => Some("FAIL"),
            _ => None,
        };
        if let Some(status) = status {
            let name = line.split_once(' ').map_or("", |(_, n)| n).to_owned();
            assert!(!name.is_empty(), "a headline without a name: {line:?}");
            parsed.push(Parsed {
                status,
                name,
                detail: Vec::new(),
                fix: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("  \u{2192} ") {
            let check = parsed.last_mut().expect("a fix before any check");
            check.fix.push(rest.to_owned());
        } else if let Some(rest) = line.strip_prefix("    ") {
            let check = parsed.last_mut().expect("a line before any check");
            assert!(!check.fix.is_empty(), "over-indented detail: {line:?}");
            check.fix.push(rest.to_owned());
        } else if let Some(rest) = line.strip_prefix("  ") {
            let check = parsed.last_mut().expect("a detail before any check");
            assert!(check.fix.is_empty(), "detail after the fix: {line:?}");
            check.detail.push(rest.to_owned());
        } else if line.is_empty() && lines.peek().is_some() {
            summary = lines.next().map(str::to_owned);
            assert!(lines.next().is_none(), "lines after the summary:\n{stdout}");
        } else {
            panic!("not doctor output: {line:?}\n{stdout}");
        }
    }
    let summary = summary.unwrap_or_else(|| panic!("no summary line:\n{stdout}"));
    let count = |s: &str| parsed.iter().filter(|c| c.status == s).count();
    let (ok, warn, fail) = (count("OK"), count("WARN"), count("FAIL"));
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let expected = format!(
        "{}: {} ok, {}, {} failed",
        plural(parsed.len(), "check", "checks"),
        ok,
        plural(warn, "warning", "warnings"),
        fail
    );
    assert_eq!(summary, expected, "{stdout}");
    parsed
        .into_iter()
        .map(|c| {
            let mut line = format!("{} {}: {}", c.status, c.name, c.detail.join(" "));
            if !c.fix.is_empty() {
                line.push_str(&format!(" \u{2014} {}", c.fix.join(" ")));
            }
            line
        })
        .collect()
}

/// The absolute, canonical path `install` must write.
pub(crate) fn binary() -> String {
    std::fs::canonicalize(BIN).unwrap().display().to_string()
}

pub(crate) fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub(crate) fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Files next to `path` whose names start with its name plus `.bak-`.
pub(crate) fn backups(path: &Path) -> Vec<PathBuf> {
    let prefix = format!("{}.bak-", path.file_name().unwrap().to_str().unwrap());
    let mut found: Vec<PathBuf> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(&prefix)
        })
        .collect();
    found.sort();
    found
}

pub(crate) fn has_line(lines: &[String], prefix: &str) -> bool {
    lines.iter().any(|l| l.starts_with(prefix))
}

/// doctor's line that starts with `prefix` (all of them shown if none does).
pub(crate) fn line_starting<'a>(lines: &'a [String], prefix: &str) -> &'a String {
    lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("{prefix}: {lines:#?}"))
}

#[test]
fn install_creates_a_private_file_with_the_absolute_path() {
    let m = Machine::new("inst-new");
    let (stdout, stderr, code) = m.install(&["claude-desktop"]);
    assert_eq!(code, 0, "{stderr}");
    let file = m.config("Claude/claude_desktop_config.json");
    assert_eq!(
        read_json(&file),
        json!({"mcpServers": {"perplexity-agent": {
            "command": binary(), "args": [],
            "env": {"PERPLEXITY_AGENT_WAIT_SECONDS": "55"}}}})
    );
    assert!(Path::new(&binary()).is_absolute());
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&m.config("Claude")), 0o700);
    assert!(backups(&file).is_empty(), "nothing to back up");
    assert!(
        !std::fs::read_to_string(&file).unwrap().contains(KEY),
        "no key by default"
    );
    assert!(stdout.contains(&file.display().to_string()), "{stdout}");
    assert!(
        stdout.contains("PERPLEXITY_AGENT_WAIT_SECONDS=55"),
        "{stdout}"
    );
    assert!(stdout.contains("fixed 60 s"), "the why: {stdout}");
    assert!(stdout.contains("API key: not written"), "{stdout}");
    assert!(stdout.contains("Next: quit Claude Desktop"), "{stdout}");
}

#[test]
fn install_merges_backs_up_and_is_idempotent() {
    let m = Machine::new("inst-merge");
    let file = m.home(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let old = r#"{
    "theme": {"dark": true, "size": 1.50},
    "mcpServers": {
        "other": {"command": "npx", "args": ["-y", "other-mcp"], "env": {"TOKEN": "x"}}
    },
    "zzz": [1, 2, 3]
}
"#;
    std::fs::write(&file, old).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let before: Value = serde_json::from_str(old).unwrap();

    let (stdout, stderr, code) = m.install(&["cursor"]);
    assert_eq!(code, 0, "{stderr}");
    let after = read_json(&file);
    for key in ["theme", "zzz"] {
        assert_eq!(after[key], before[key], "{key} kept");
    }
    assert_eq!(after["mcpServers"]["other"], before["mcpServers"]["other"]);
    assert_eq!(
        after["theme"].to_string(),
        r#"{"dark":true,"size":1.50}"#,
        "numbers kept as written"
    );
    let keys: Vec<&String> = after.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["theme", "mcpServers", "zzz"], "key order kept");
    assert_eq!(
        after["mcpServers"]["perplexity-agent"],
        json!({"command": binary(), "args": [], "env": {"PERPLEXITY_AGENT_WAIT_SECONDS": "55"}})
    );
    assert_eq!(mode(&file), 0o640, "the file's permissions are kept");
    let made = backups(&file);
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(std::fs::read_to_string(&made[0]).unwrap(), old);
    assert_eq!(mode(&made[0]), 0o640);
    assert!(
        stdout.contains(&format!("Backup of the old file: {}", made[0].display())),
        "{stdout}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Again: nothing to do, nothing written, no second backup.
    let written = std::fs::read(&file).unwrap();
    let (stdout, stderr, code) = m.install(&["cursor"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nothing was written"), "{stdout}");
    assert_eq!(std::fs::read(&file).unwrap(), written);
    assert_eq!(backups(&file), made);

    // A changed entry is updated in place; what the user added to it is kept.
    let mut edited = read_json(&file);
    edited["mcpServers"]["perplexity-agent"]["env"]["PERPLEXITY_AGENT_WAIT_SECONDS"] = json!("10");
    edited["mcpServers"]["perplexity-agent"]["disabled"] = json!(false);
    edited["mcpServers"]["perplexity-agent"]["env"]["PERPLEXITY_API_KEY"] = json!("pplx-in-file");
    std::fs::write(&file, edited.to_string()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (stdout, stderr, code) = m.install(&["cursor"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("Updated the perplexity-agent entry"),
        "{stdout}"
    );
    let entry = &read_json(&file)["mcpServers"]["perplexity-agent"];
    assert_eq!(entry["env"]["PERPLEXITY_AGENT_WAIT_SECONDS"], "55");
    assert_eq!(entry["disabled"], false);
    assert_eq!(entry["env"]["PERPLEXITY_API_KEY"], "pplx-in-file");
    assert!(
        stdout.contains("the entry keeps the PERPLEXITY_API_KEY it already had")
            && !stdout.contains("pplx-in-file"),
        "{stdout}"
    );
    assert!(
        stderr.contains("is readable by other users; make it private: chmod 600"),
        "{stderr}"
    );
    assert_eq!(backups(&file).len(), 2);
}

#[test]
fn the_key_is_written_only_when_asked() {
    let m = Machine::new("inst-key");
    let file = m.home(".claude.json");
    let (_, stderr, code) = m.install(&["claude-code"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!std::fs::read_to_string(&file).unwrap().contains(KEY));
    assert!(!stderr.contains("plain text"), "{stderr}");

    let (stdout, stderr, code) = m.install(&["claude-code", "--with-key-from-env"]);
    assert_eq!(code, 0, "{stderr}");
    let entry = &read_json(&file)["mcpServers"]["perplexity-agent"];
    assert_eq!(entry["env"]["PERPLEXITY_API_KEY"], KEY);
    assert_eq!(entry["env"]["PERPLEXITY_AGENT_WAIT_SECONDS"], "300");
    assert!(
        stderr.contains(&format!(
            "warning: your API key now sits in plain text in {}",
            file.display()
        )),
        "{stderr}"
    );
    assert!(!stdout.contains("API key: not written"), "{stdout}");
    assert_eq!(mode(&file), 0o600);

    // Asked for, but not there: refused, nothing changed.
    let before = std::fs::read(&file).unwrap();
    let blank = Machine {
        dir: Scratch::new("unused"),
        vars: m.vars.clone(),
    }
    .with("PERPLEXITY_API_KEY", "  ");
    let (_, stderr, code) = blank.install(&["claude-code", "--with-key-from-env"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("PERPLEXITY_API_KEY is not set"), "{stderr}");
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

#[test]
fn print_writes_nothing() {
    let m = Machine::new("inst-print");
    let (stdout, stderr, code) = m.install(&["vscode", "--print", "--name", "pplx"]);
    assert_eq!(code, 0, "{stderr}");
    let snippet: Value = serde_json::from_str(&stdout).expect("only the JSON on stdout");
    assert_eq!(
        snippet,
        json!({"servers": {"pplx": {"type": "stdio", "command": binary(), "args": [],
               "env": {"PERPLEXITY_AGENT_WAIT_SECONDS": "300"}}}})
    );
    let file = m.config("Code/User/mcp.json");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(!file.exists() && !m.config("Code").exists());
    assert_eq!(
        std::fs::read_dir(m.home("")).unwrap().count(),
        0,
        "nothing written in HOME"
    );
}

#[test]
fn an_unparsable_file_is_refused_and_left_unchanged() {
    let m = Machine::new("inst-bad");
    let file = m.config("Code/User/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    for (text, why) in [
        ("{\"servers\": {}, // a comment\n}", "is not valid JSON"),
        ("{\"servers\": [1]}", "\"servers\" that is not an object"),
        ("[]", "top level"),
        (
            "{\"servers\": {\"perplexity-agent\": {\"type\": \"http\", \"url\": \"https://x.example/mcp\"}}}",
            "choose another --name",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let (_, stderr, code) = m.install(&["vscode"]);
        assert_eq!(code, 4, "{text}: {stderr}");
        assert!(stderr.contains(why), "{text}: {stderr}");
        assert!(stderr.contains("Nothing was changed"), "{stderr}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
        assert!(backups(&file).is_empty());
    }
}

#[test]
fn each_client_gets_its_path_shape_and_wait_budget() {
    let m = Machine::new("inst-clients");
    let cases = [
        (
            "claude-desktop",
            m.config("Claude/claude_desktop_config.json"),
            "mcpServers",
            false,
            "55",
        ),
        (
            "claude-code",
            m.home(".claude.json"),
            "mcpServers",
            true,
            "300",
        ),
        (
            "cursor",
            m.home(".cursor/mcp.json"),
            "mcpServers",
            false,
            "55",
        ),
        (
            "vscode",
            m.config("Code/User/mcp.json"),
            "servers",
            true,
            "300",
        ),
    ];
    for (client, file, container, typed, wait) in cases {
        let (stdout, stderr, code) = m.install(&[client, "--name", "pa_1"]);
        assert_eq!(code, 0, "{client}: {stderr}");
        let mut expected = json!({"command": binary(), "args": [],
                                  "env": {"PERPLEXITY_AGENT_WAIT_SECONDS": wait}});
        if typed {
            expected = json!({"type": "stdio", "command": binary(), "args": [],
                              "env": {"PERPLEXITY_AGENT_WAIT_SECONDS": wait}});
        }
        let doc = read_json(&file);
        assert_eq!(doc, json!({container: {"pa_1": expected}}), "{client}");
        // Same order as written, for people reading the file.
        let keys: Vec<&String> = doc[container]["pa_1"].as_object().unwrap().keys().collect();
        assert_eq!(keys.last().unwrap().as_str(), "env");
        assert!(
            stdout.contains(&format!("PERPLEXITY_AGENT_WAIT_SECONDS={wait}")),
            "{stdout}"
        );
    }
    // Without XDG_CONFIG_HOME, ~/.config.
    let plain = Machine::new("inst-xdg").without("XDG_CONFIG_HOME");
    let (_, stderr, code) = plain.install(&["vscode"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(plain.home(".config/Code/User/mcp.json").exists());
    // Usage errors.
    for args in [
        &["vscode", "--name", "bad name"][..],
        &["vscode", "--name", ""],
        &["emacs"],
        &[],
    ] {
        let (_, stderr, code) = m.install(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
    // No HOME: a clear error, exit 4.
    let homeless = Machine::new("inst-nohome").without("HOME");
    let (_, stderr, code) = homeless.install(&["cursor"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("HOME is not set"), "{stderr}");
}

#[test]
fn doctor_passes_with_a_key_a_store_and_an_installed_client() {
    let m = Machine::new("doc-ok");
    let (_, stderr, code) = m.install(&["claude-code"]);
    assert_eq!(code, 0, "{stderr}");
    let (lines, stderr, code) = m.doctor();
    assert_eq!(code, 0, "{lines:#?}\n{stderr}");
    for prefix in [
        "OK API key: PERPLEXITY_API_KEY is set",
        "OK Configuration: loaded; wait budget 55 s, tools: default (6 tools",
        "OK Store: ",
        "OK Store permissions: directory 700, file 600",
        "OK Gateway: no downstream servers defined",
        "OK Claude Code (perplexity-agent): runs ",
        "OK Protocol 2025-11-25: initialize, notifications/initialized, tools/list: answered",
        "OK Protocol 2026-07-28: server/discover, tools/list: answered",
    ] {
        assert!(has_line(&lines, prefix), "{prefix}\n{lines:#?}");
    }
    assert!(!has_line(&lines, "FAIL"), "{lines:#?}");

    // The same as one JSON document.
    let (stdout, _, code) = m.run(&["doctor", "--json"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&stdout).expect("one JSON document");
    let checks = doc["checks"].as_array().unwrap();
    assert_eq!(checks.len(), lines.len());
    for c in checks {
        assert!(["OK", "WARN", "FAIL"].contains(&c["status"].as_str().unwrap()));
        assert!(c["check"].is_string() && c["detail"].is_string());
        assert!(c["fix"].is_string() || c["fix"].is_null());
    }
    assert!(
        checks
            .iter()
            .any(|c| c["check"] == "Protocol 2026-07-28" && c["status"] == "OK")
    );
}

#[test]
fn doctor_fails_without_a_key() {
    let m = Machine::new("doc-nokey").without("PERPLEXITY_API_KEY");
    let (lines, _, code) = m.doctor();
    assert_eq!(code, 1, "{lines:#?}");
    assert!(
        has_line(
            &lines,
            "FAIL API key: PERPLEXITY_API_KEY is not set \u{2014} export PERPLEXITY_API_KEY="
        ),
        "{lines:#?}"
    );
    // Only the key failed: the rest still ran.
    assert!(has_line(&lines, "OK Protocol 2026-07-28"), "{lines:#?}");
    let odd = Machine::new("doc-oddkey").with("PERPLEXITY_API_KEY", "sk-0123456789abcdefghijkl");
    let (lines, _, code) = odd.doctor();
    assert_eq!(code, 0, "a WARN is not a failure: {lines:#?}");
    assert!(has_line(&lines, "WARN API key:"), "{lines:#?}");
    assert!(!lines.join("\n").contains("sk-0123456789"), "key shown");
}

#[test]
fn doctor_warns_about_a_store_others_can_read() {
    let m = Machine::new("doc-store");
    let (_, _, code) = m.doctor();
    assert_eq!(code, 0);
    let store = m.dir.path("data/store.sqlite");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (lines, _, code) = m.doctor();
    assert_eq!(code, 0, "{lines:#?}");
    let expected = format!(
        "WARN Store permissions: the file {} is mode 644: others may read it \u{2014} chmod 600 {}",
        store.display(),
        store.display()
    );
    assert!(has_line(&lines, &expected), "{expected}\n{lines:#?}");
}

#[test]
fn doctor_fails_a_gateway_server_whose_secrets_cannot_be_opened() {
    let m = Machine::new("doc-gw").with("PERPLEXITY_SECRET_KEY", SEALING_KEY);
    let (_, stderr, code) = m.run(&[
        "gateway",
        "add",
        "tickets",
        "--url",
        "https://tickets.example/mcp",
        "--header",
        "Authorization: Bearer s3cr3t-value",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let (lines, _, code) = m.doctor();
    assert_eq!(code, 0, "{lines:#?}");
    assert!(
        has_line(
            &lines,
            "OK Gateway tickets: http: https://tickets.example/mcp (store)"
        ),
        "{lines:#?}"
    );

    let wrong = Machine {
        dir: Scratch::new("unused"),
        vars: m.vars.clone(),
    }
    .with(
        "PERPLEXITY_SECRET_KEY",
        "HxwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgEAAAA=",
    );
    let (lines, stderr, code) = wrong.doctor();
    assert_eq!(code, 1, "{lines:#?}");
    let line = lines
        .iter()
        .find(|l| l.starts_with("FAIL Gateway tickets:"))
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(line.contains("cannot be decrypted"), "{line}");
    assert!(
        line.contains("set PERPLEXITY_SECRET_KEY to the key tickets was saved with"),
        "{line}"
    );
    assert!(!lines.join("\n").contains("s3cr3t") && !stderr.contains("s3cr3t"));
}

#[test]
fn doctor_checks_the_installed_clients_entries() {
    let m = Machine::new("doc-clients");
    // Cursor: a binary that is gone. Claude Code: a budget that suits Cursor, not it.
    let cursor = m.home(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::write(
        &cursor,
        json!({"mcpServers": {
            "old": {"command": "/nonexistent/bin/perplexity-agent", "env": {"PERPLEXITY_AGENT_WAIT_SECONDS": "55"}},
            "unrelated": {"command": "/nonexistent/other-server"}}})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        m.home(".claude.json"),
        json!({"mcpServers": {"perplexity-agent": {"type": "stdio", "command": binary(), "args": [],
               "env": {"PERPLEXITY_AGENT_WAIT_SECONDS": "55", "PERPLEXITY_API_KEY": "pplx-planted"}}}})
        .to_string(),
    )
    .unwrap();
    std::fs::set_permissions(
        m.home(".claude.json"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let (lines, _, code) = m.doctor();
    assert_eq!(code, 1, "{lines:#?}");
    let find = |prefix: &str| line_starting(&lines, prefix).clone();
    let line =
        find("FAIL Cursor (old): the command /nonexistent/bin/perplexity-agent does not exist");
    assert!(
        line.ends_with("\u{2014} reinstall with perplexity-agent install cursor --name old"),
        "{line}"
    );
    let line = find(
        "WARN Claude Code (perplexity-agent): the wait budget is 55 s; 300 s suits Claude Code",
    );
    assert!(
        line.ends_with("\u{2014} reinstall with perplexity-agent install claude-code"),
        "{line}"
    );
    let line = find("WARN Claude Code (perplexity-agent) key:");
    assert!(line.contains("mode 644"), "{line}");
    let chmod = format!("chmod 600 {}", m.home(".claude.json").display());
    assert!(line.ends_with(&chmod), "{line}");
    assert!(!lines.join("\n").contains("pplx-planted"), "key shown");
    assert!(!lines.iter().any(|l| l.contains("unrelated")), "{lines:#?}");
}

#[test]
fn a_broken_configuration_is_a_doctor_finding_and_does_not_block_install() {
    let m = Machine::new("broken-config").with("PERPLEXITY_RATE_BURST", "not a number");
    let (lines, _, code) = m.doctor();
    assert_eq!(code, 1);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("FAIL Configuration: PERPLEXITY_RATE_BURST")),
        "{lines:#?}"
    );
    // And doctor goes on, every other check made with that variable's default (before,
    // it stopped at the configuration line). The server it starts for the protocol
    // check cannot start with the broken variable, and says so.
    for check in ["API key", "Store", "Protocol 2025-11-25"] {
        assert!(
            lines.iter().any(|l| l
                .split_once(' ')
                .is_some_and(|(_, rest)| rest.starts_with(check))),
            "{check}: {lines:#?}"
        );
    }
    let (stdout, stderr, code) = m.install(&["cursor", "--print"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("mcpServers"), "{stdout}");
    // Every other command still stops with the problem.
    let (_, stderr, code) = m.run(&["search", "x"]);
    assert_eq!(code, 4);
    assert!(stderr.contains("PERPLEXITY_RATE_BURST"), "{stderr}");
}

/// A desktop-launched client never sees the shell's key: an entry without one is a
/// warning with the fix, and installing with the key clears it.
#[test]
fn doctor_warns_when_a_desktop_clients_entry_has_no_key() {
    let m = Machine::new("doc-gui-key");
    let (_, stderr, code) = m.install(&["claude-desktop"]);
    assert_eq!(code, 0, "{stderr}");
    let (lines, _, _) = m.doctor();
    let warning = line_starting(&lines, "WARN Claude Desktop (perplexity-agent) key:");
    assert!(
        warning.contains("sets no PERPLEXITY_API_KEY")
            && warning.contains("perplexity-agent install claude-desktop --with-key-from-env"),
        "{warning}"
    );
    // Claude Code is started from the shell: no such warning.
    let (_, stderr, code) = m.install(&["claude-code"]);
    assert_eq!(code, 0, "{stderr}");
    let (lines, _, _) = m.doctor();
    assert!(
        !has_line(&lines, "WARN Claude Code (perplexity-agent) key"),
        "{lines:#?}"
    );
    let (_, stderr, code) = m.install(&["claude-desktop", "--with-key-from-env"]);
    assert_eq!(code, 0, "{stderr}");
    let (lines, _, _) = m.doctor();
    assert!(
        !has_line(&lines, "WARN Claude Desktop (perplexity-agent) key"),
        "{lines:#?}"
    );
}

/// Run through `npx` or `uvx` (the binary in their caches), install writes the launcher,
/// pinned to this version and found on PATH, not the cache path that may vanish; doctor
/// then knows the entry as ours. `--launcher` chooses by hand.
#[test]
fn a_binary_run_from_a_launcher_cache_installs_the_launcher() {
    let m = Machine::new("inst-launcher");
    let version = env!("CARGO_PKG_VERSION");
    let tools = m.dir.path("tools");
    std::fs::create_dir_all(&tools).unwrap();
    for tool in ["npx", "uv", "uvx"] {
        let path = tools.join(tool);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let copy = |rel: &str| {
        let path = m.dir.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::copy(BIN, &path).unwrap();
        path
    };
    let npx_cached =
        copy("home/.npm/_npx/8f49/node_modules/@perplexity-agent/linux-x64/bin/perplexity-agent");
    let uvx_cached = copy("home/.cache/uv/archive-v0/eb2bTszEg5b/bin/perplexity-agent");
    let run = |exe: &Path, vars: &[(&str, String)], args: &[&str]| {
        let mut cmd = std::process::Command::new(exe);
        cmd.args(args)
            .env_clear()
            .stdin(std::process::Stdio::null());
        for (k, v) in &m.vars {
            cmd.env(k, v);
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
        (stdout, stderr)
    };
    let tools_path = ("PATH", tools.display().to_string());
    let entry = |stdout: &str| -> Value {
        serde_json::from_str::<Value>(stdout).unwrap()["mcpServers"]["perplexity-agent"].clone()
    };

    let (stdout, _) = run(
        &npx_cached,
        std::slice::from_ref(&tools_path),
        &["install", "claude-desktop", "--print"],
    );
    let npx = entry(&stdout);
    assert_eq!(npx["command"], tools.join("npx").display().to_string());
    assert_eq!(
        npx["args"],
        json!(["-y", format!("perplexity-agent@{version}")])
    );
    assert_eq!(npx["env"]["PERPLEXITY_AGENT_WAIT_SECONDS"], "55");

    // uvx: not on PATH, but beside the uv that started us (uv says where, in UV).
    let uv = ("UV", tools.join("uv").display().to_string());
    let (stdout, _) = run(
        &uvx_cached,
        &[("PATH", "/nonexistent".into()), uv],
        &["install", "claude-desktop", "--print"],
    );
    let uvx = entry(&stdout);
    assert_eq!(uvx["command"], tools.join("uvx").display().to_string());
    assert_eq!(uvx["args"], json!([format!("perplexity-agent@{version}")]));

    // Not on PATH anywhere: the bare name, and a note saying the client must find it.
    let (stdout, stderr) = run(
        &npx_cached,
        &[("PATH", "/nonexistent".into())],
        &["install", "cursor", "--print"],
    );
    assert_eq!(entry(&stdout)["command"], "npx");
    assert!(stderr.contains("npx is not on PATH here"), "{stderr}");

    // --launcher binary: the cached copy's own path, as asked.
    let (stdout, _) = run(
        &npx_cached,
        std::slice::from_ref(&tools_path),
        &[
            "install",
            "claude-desktop",
            "--print",
            "--launcher",
            "binary",
        ],
    );
    let own = std::fs::canonicalize(&npx_cached).unwrap();
    assert_eq!(entry(&stdout)["command"], own.display().to_string());
    assert_eq!(entry(&stdout)["args"], json!([]));
    // …and --launcher npx from an ordinary install.
    let (stdout, _) = run(
        Path::new(BIN),
        std::slice::from_ref(&tools_path),
        &["install", "claude-desktop", "--print", "--launcher", "npx"],
    );
    assert_eq!(entry(&stdout), npx);

    // Written for real, doctor recognises the launcher entry as ours and checks it.
    let (stdout, _) = run(
        &npx_cached,
        std::slice::from_ref(&tools_path),
        &["install", "claude-code"],
    );
    assert!(
        stdout.contains(&format!(
            "Command: {} -y perplexity-agent@{version}",
            tools.join("npx").display()
        )),
        "{stdout}"
    );
    let claude = read_json(&m.home(".claude.json"));
    assert_eq!(
        claude["mcpServers"]["perplexity-agent"]["args"],
        npx["args"]
    );
    let (lines, _, _) = m.doctor();
    let line = line_starting(&lines, "OK Claude Code (perplexity-agent)");
    assert!(
        line.contains(&tools.join("npx").display().to_string()),
        "{line}"
    );
}

/// A token for `--token-env`: tests scan every output for it.
const HTTP_TOKEN: &str = "http-token-3b8e1f6a9c2d4e7f0a1b2c3d4e5f6a7b";

/// `install <client> --url`: each client's HTTP entry, with the token only when asked
/// for (read from the named variable), and never printed.
#[test]
fn install_url_writes_each_clients_http_entry() {
    let m = Machine::new("inst-url").with("PA_TEAM_TOKEN", HTTP_TOKEN);
    let url = "https://mcp.example.org/mcp";
    let bearer = format!("Bearer {HTTP_TOKEN}");
    let cases = [
        (
            "cursor",
            m.home(".cursor/mcp.json"),
            "mcpServers",
            json!({"url": url, "headers": {"Authorization": bearer}}),
        ),
        (
            "vscode",
            m.config("Code/User/mcp.json"),
            "servers",
            json!({"type": "http", "url": url, "headers": {"Authorization": bearer}}),
        ),
        (
            "claude-code",
            m.home(".claude.json"),
            "mcpServers",
            json!({"type": "http", "url": url, "headers": {"Authorization": bearer}}),
        ),
    ];
    for (client, file, container, expected) in cases {
        // Without --token-env: no header, and the report says how to add one.
        let (stdout, stderr, code) = m.install(&[client, "--url", url, "--name", "team"]);
        assert_eq!(code, 0, "{client}: {stderr}");
        let mut bare = expected.clone();
        bare.as_object_mut().unwrap().remove("headers");
        assert_eq!(
            read_json(&file),
            json!({container: {"team": bare}}),
            "{client}"
        );
        assert!(stdout.contains("Token: not written"), "{client}: {stdout}");
        assert!(stdout.contains("--token-env"), "{client}: {stdout}");
        assert!(!stderr.contains("plain text"), "{client}: {stderr}");

        let (stdout, stderr, code) = m.install(&[
            client,
            "--url",
            url,
            "--name",
            "team",
            "--token-env",
            "PA_TEAM_TOKEN",
        ]);
        assert_eq!(code, 0, "{client}: {stderr}");
        assert_eq!(
            read_json(&file),
            json!({container: {"team": expected}}),
            "{client}"
        );
        assert_eq!(mode(&file), 0o600);
        assert!(
            !stdout.contains(HTTP_TOKEN) && !stderr.contains(HTTP_TOKEN),
            "token printed: {stdout}{stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "warning: the token from PA_TEAM_TOKEN now sits in plain text in {}",
                file.display()
            )),
            "{client}: {stderr}"
        );
        // Again without --token-env: the header already there is kept, not dropped.
        let (stdout, stderr, code) = m.install(&[client, "--url", url, "--name", "team"]);
        assert_eq!(code, 0, "{client}: {stderr}");
        assert_eq!(
            read_json(&file),
            json!({container: {"team": expected}}),
            "{client}"
        );
        assert!(stdout.contains("nothing was written"), "{client}: {stdout}");
    }
}

/// What `--url` refuses: another scheme, credentials in the URL, an unset or empty
/// token variable, a stdio entry of the same name, and Claude Desktop (remote servers
/// are connectors there, not entries in its file). Nothing is written for any of them.
#[test]
fn install_url_refuses_what_it_cannot_write() {
    let m = Machine::new("inst-url-bad").with("PA_EMPTY", " ");
    let file = m.home(".cursor/mcp.json");
    for (args, code, why) in [
        (
            &["cursor", "--url", "ftp://mcp.example.org/mcp"][..],
            2,
            "http or https",
        ),
        (&["cursor", "--url", "not a url"], 2, "not a URL"),
        (
            &["cursor", "--url", "https://user:pw@mcp.example.org/mcp"],
            2,
            "--token-env",
        ),
        (
            &[
                "cursor",
                "--url",
                "https://mcp.example.org/mcp",
                "--token-env",
                "PA_UNSET",
            ],
            4,
            "PA_UNSET is not set",
        ),
        (
            &[
                "cursor",
                "--url",
                "https://mcp.example.org/mcp",
                "--token-env",
                "PA_EMPTY",
            ],
            4,
            "PA_EMPTY is not set",
        ),
        (
            &[
                "cursor",
                "--url",
                "https://mcp.example.org/mcp",
                "--with-key-from-env",
            ],
            2,
            "cannot be used with",
        ),
        (&["cursor", "--token-env", "PA_EMPTY"], 2, "--url"),
        (
            &["claude-desktop", "--url", "https://mcp.example.org/mcp"],
            2,
            "Connectors",
        ),
    ] {
        let (_, stderr, got) = m.install(args);
        assert_eq!(got, code, "{args:?}: {stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
    assert!(!file.exists(), "nothing written");
    assert!(!m.config("Claude").exists(), "nothing written");

    // Our stdio entry is not turned into an HTTP one, nor the other way round.
    let (_, stderr, code) = m.install(&["cursor"]);
    assert_eq!(code, 0, "{stderr}");
    let before = std::fs::read(&file).unwrap();
    let (_, stderr, code) = m.install(&["cursor", "--url", "https://mcp.example.org/mcp"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("choose another --name"), "{stderr}");
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

/// Plain http is for this machine: to another host it works, with a warning that the
/// token crosses the network readable.
#[test]
fn install_url_warns_about_plain_http_to_another_host() {
    let m = Machine::new("inst-url-http");
    let (_, stderr, code) = m.install(&["cursor", "--url", "http://127.0.0.1:8080/mcp"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("plain http"), "{stderr}");
    let (_, stderr, code) = m.install(&[
        "cursor",
        "--url",
        "http://mcp.example.org:8080/mcp",
        "--name",
        "remote",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("warning: http://mcp.example.org:8080/mcp is plain http"),
        "{stderr}"
    );
    let doc = read_json(&m.home(".cursor/mcp.json"));
    assert_eq!(
        doc["mcpServers"]["remote"]["url"],
        "http://mcp.example.org:8080/mcp"
    );
}

/// Claude Code is set up with its own command: `--print` shows `claude mcp add …`, with
/// the key and the token as shell variables rather than their values, and the server's
/// name before `--env`/`--header` (both take several values, so a name after them would
/// be read as one more).
#[test]
fn print_for_claude_code_is_the_claude_mcp_add_command() {
    let m = Machine::new("inst-claude-print").with("PA_TEAM_TOKEN", HTTP_TOKEN);
    let (stdout, stderr, code) = m.install(&["claude-code", "--print"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout.trim_end(),
        format!(
            "claude mcp add --scope user --transport stdio perplexity-agent --env PERPLEXITY_AGENT_WAIT_SECONDS=300 -- {}",
            binary()
        )
    );
    let (stdout, stderr, code) = m.install(&["claude-code", "--print", "--with-key-from-env"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("--env \"PERPLEXITY_API_KEY=$PERPLEXITY_API_KEY\""),
        "{stdout}"
    );
    let (stdout, stderr, code) = m.install(&[
        "claude-code",
        "--print",
        "--url",
        "https://mcp.example.org/mcp",
        "--token-env",
        "PA_TEAM_TOKEN",
        "--name",
        "team",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout.trim_end(),
        "claude mcp add --scope user --transport http team https://mcp.example.org/mcp --header \"Authorization: Bearer $PA_TEAM_TOKEN\""
    );
    assert!(!stdout.contains(HTTP_TOKEN) && !stderr.contains(HTTP_TOKEN));
    assert!(
        std::fs::read_dir(m.home("")).unwrap().next().is_none(),
        "nothing written"
    );
    // The other clients still print their JSON.
    let (stdout, _, code) =
        m.install(&["cursor", "--print", "--url", "https://mcp.example.org/mcp"]);
    assert_eq!(code, 0);
    let snippet: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        snippet,
        json!({"mcpServers": {"perplexity-agent": {"url": "https://mcp.example.org/mcp"}}})
    );
}
