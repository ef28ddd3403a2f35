//! `perplexity-agent doctor`: checks what usually goes wrong in a set-up — the key, the
//! store, sealed gateway secrets, the MCP clients' entries — and runs this binary as a
//! server through both protocol eras' handshakes. Each check is a short headline (✓, ⚠
//! or ✗ and its name) with its detail and what to do on indented lines below, then one
//! summary line; exit 1 when anything failed.
//!
//! Touches: reads the environment, the store (opening it creates it, as first use
//! would) and the clients' config files; starts this binary as `serve` for a few
//! seconds. With `--online` only, two GET requests to the configured API base through
//! the Perplexity client (`online.rs`); otherwise no network. Never prints the API key
//! or any part of it, wherever it was found.

use std::path::Path;

mod online;
mod selftest;

use clap::Args;
use serde_json::{Value, json};

use super::clients::{CLIENTS, Client, Platform};
use super::install;
use super::output::{self, Ended, Exit};
use crate::config::{Config, wait_seconds_from};
use crate::gateway::definition::{self, ServerDef, TransportDef};
use crate::perplexity::config::PERPLEXITY_BASE;
use crate::state::local::Store;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print one JSON document instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Also ask the API: GET /v1/models at the configured base, then one request with
    /// the key (a lookup that bills nothing), so a wrong base or a refused key shows.
    #[arg(long)]
    pub online: bool,
    /// Variables that did not load (each a failing check; the others are checked with
    /// their defaults in place).
    #[arg(skip)]
    pub config_problems: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }

    fn symbol(self) -> char {
        match self {
            Status::Ok => '\u{2713}',
            Status::Warn => '\u{26a0}',
            Status::Fail => '\u{2717}',
        }
    }
}

/// Where the text lines wrap: a terminal's usual width, so no line runs on for hundreds
/// of columns. Only a word that cannot be broken (a long path) goes past it.
const WIDTH: usize = 80;

#[derive(Debug)]
struct Check {
    name: String,
    status: Status,
    detail: String,
    /// What to do next; empty when nothing is.
    fix: String,
}

impl Check {
    fn new(status: Status, name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status,
            detail: detail.into(),
            fix: String::new(),
        }
    }

    fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(Status::Ok, name, detail)
    }

    fn warn(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(Status::Warn, name, detail)
    }

    fn fail(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(Status::Fail, name, detail)
    }

    fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = fix.into();
        self
    }
}

/// Runs every check; returns the process exit code.
pub async fn run(args: DoctorArgs, config: &Config) -> Ended {
    let files = client_files();
    let shell_key = crate::perplexity::key::from_env();
    let mut checks = vec![api_key(
        shell_key.as_ref().map(secrecy::ExposeSecret::expose_secret),
        &entry_keys(&files),
    )];
    if args.config_problems.is_empty() {
        checks.push(configuration(config));
    }
    for problem in &args.config_problems {
        checks.push(
            Check::fail("Configuration", problem.clone())
                .fix("fix that variable or the config file, then run doctor again (the checks below used its default)"),
        );
    }
    if args.online {
        checks.extend(online::checks(config, shell_key.is_some()).await);
    }
    let store = store_checks(config, &mut checks);
    checks.extend(state_check(config).await);
    checks.extend(gateway_checks(config, store.as_ref()));
    checks.extend(client_checks(&files));
    checks.extend(selftest::self_test().await);
    finish(&checks, args.json)
}

/// When the configuration did not load at all: that is the one check, failed.
pub fn unconfigured(problem: &str, json: bool) -> Ended {
    let check = Check::fail("Configuration", problem)
        .fix("fix that variable or the config file, then run doctor again");
    finish(&[check], json)
}

fn finish(checks: &[Check], json: bool) -> Ended {
    render(checks, json);
    if checks.iter().any(|c| c.status == Status::Fail) {
        Ok(Exit::Failed)
    } else {
        Ok(Exit::Success)
    }
}

fn render(checks: &[Check], json: bool) {
    if json {
        let worst = checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
        let list: Vec<Value> = checks
            .iter()
            .map(|c| {
                json!({
                    "check": c.name,
                    "status": c.status.label(),
                    "detail": c.detail,
                    "fix": (!c.fix.is_empty()).then_some(&c.fix),
                })
            })
            .collect();
        output::document(&json!({"status": worst.label(), "checks": list}));
        return;
    }
    output::lines(&text(checks));
}

/// The checks as people read them, in the manner of `gh auth status`: a headline per
/// check, its detail indented below, what to do after an arrow, a summary last.
fn text(checks: &[Check]) -> String {
    let mut lines = Vec::new();
    for c in checks {
        lines.push(format!("{} {}", c.status.symbol(), c.name));
        lines.extend(wrap(&c.detail, "  ", "  "));
        if !c.fix.is_empty() {
            lines.extend(wrap(&c.fix, "  \u{2192} ", "    "));
        }
    }
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let warnings = count(Status::Warn);
    lines.push(String::new());
    lines.push(format!(
        "{} check{}: {} ok, {warnings} warning{}, {} failed",
        checks.len(),
        if checks.len() == 1 { "" } else { "s" },
        count(Status::Ok),
        if warnings == 1 { "" } else { "s" },
        count(Status::Fail),
    ));
    lines.join("\n")
}

/// `text` in lines of at most [`WIDTH`] columns, broken between words: `first` starts
/// the first line, `rest` the others.
fn wrap(text: &str, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_owned();
    let mut empty = true;
    for word in text.split_whitespace() {
        let width = line.chars().count() + 1 + word.chars().count();
        if !empty && width > WIDTH {
            lines.push(std::mem::replace(&mut line, rest.to_owned()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    if !empty {
        lines.push(line);
    }
    lines
}

/// A key written into a client's entry: whose entry, and where. The key itself is only
/// judged by its shape, never shown.
struct EntryKey {
    client: Client,
    name: String,
    path: std::path::PathBuf,
    key: String,
}

impl EntryKey {
    fn place(&self) -> String {
        format!(
            "{}'s entry {} in {}",
            self.client.title(),
            self.name,
            self.path.display()
        )
    }
}

/// The name the key's checks go by.
const KEY_CHECK: &str = "API key";

/// Present and plausible, in the shell or in a client's entry (which is where a client
/// started from the desktop gets it); judged by its shape only (`--online` sends it),
/// and never shown.
fn api_key(raw: Option<&str>, in_entries: &[EntryKey]) -> Check {
    let how = "export PERPLEXITY_API_KEY=pplx-… in your shell, or put it in the env of the client's entry (perplexity-agent install <client> --with-key-from-env)";
    let key = raw.map(str::trim).unwrap_or_default();
    if key.is_empty() {
        return match in_entries {
            [] => Check::fail(KEY_CHECK, "PERPLEXITY_API_KEY is not set").fix(how),
            found => entry_key(found),
        };
    }
    shell_key(key)
}

/// No key in the shell, but in these entries: the clients have one, so the set-up works;
/// the command line does not, which the fix says.
fn entry_key(found: &[EntryKey]) -> Check {
    let places: Vec<String> = found.iter().map(EntryKey::place).collect();
    let worst = found
        .iter()
        .map(|f| shell_key(&f.key).status)
        .max()
        .unwrap_or(Status::Ok);
    let verdict = match worst {
        Status::Ok => "shaped like a Perplexity key (not checked against the API)",
        Status::Warn => {
            "but one does not look like a Perplexity key (they start with pplx- and are a few dozen characters long)"
        }
        Status::Fail => "but one contains spaces or line breaks (a copy-and-paste slip?)",
    };
    let check = Check::new(
        worst,
        KEY_CHECK,
        format!(
            "PERPLEXITY_API_KEY is not set in this shell; found in {}, {verdict}",
            places.join("; ")
        ),
    );
    if worst == Status::Ok {
        check.fix("the client starts the server with that key; to use the command line (ask, search, doctor --online) too, export PERPLEXITY_API_KEY=pplx-… in your shell")
    } else {
        check.fix("copy the key again from https://www.perplexity.ai/account/api and install again with --with-key-from-env")
    }
}

/// The shell's key, by its shape.
fn shell_key(key: &str) -> Check {
    let key = key.trim();
    if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Check::fail(
            KEY_CHECK,
            "PERPLEXITY_API_KEY contains spaces or line breaks (a copy-and-paste slip?)",
        )
        .fix("copy the key again from https://www.perplexity.ai/account/api and set it without surrounding text");
    }
    if !key.starts_with("pplx-") || !(20..=256).contains(&key.len()) {
        return Check::warn(
            KEY_CHECK,
            "PERPLEXITY_API_KEY is set but does not look like a Perplexity key (they start with pplx- and are a few dozen characters long)",
        )
        .fix("check that it is the API key from https://www.perplexity.ai/account/api");
    }
    Check::ok(
        KEY_CHECK,
        "PERPLEXITY_API_KEY is set and shaped like a Perplexity key (not checked against the API)",
    )
}

/// The configuration loaded (or we would not be here); what it amounts to.
fn configuration(config: &Config) -> Check {
    let names = config.tools.names();
    let tools = if names.len() == crate::tools::catalogue::ToolSelection::all().names().len() {
        format!("all ({} tools)", names.len())
    } else if names == crate::tools::catalogue::DEFAULT {
        format!(
            "default ({} tools; PERPLEXITY_TOOLS=all offers every one)",
            names.len()
        )
    } else {
        names.join(",")
    };
    let mut detail = format!(
        "loaded; wait budget {} s, tools: {tools}",
        config.wait_seconds
    );
    if config.api.base.as_str().trim_end_matches('/') != PERPLEXITY_BASE {
        detail.push_str(&format!(", API base {} (not the default)", config.api.base));
    }
    if let Some(proxy) = &config.api.proxy {
        detail.push_str(&format!(
            ", proxy {}",
            crate::perplexity::config::redacted_proxy(proxy)
        ));
    }
    Check::ok("Configuration", detail)
}

/// The shared state backend, when one is set: it answers and takes our credentials.
async fn state_check(config: &Config) -> Option<Check> {
    const NAME: &str = "Shared state";
    let state = config.state.as_ref()?;
    // The shared engine alone: the store has its own checks.
    let shared = match crate::state::State::open(None, Some(state)) {
        Ok(shared) => shared,
        Err(problem) => return Some(Check::fail(NAME, problem)),
    };
    Some(match shared.connect(std::time::Duration::from_secs(2)).await {
        Ok(()) => Check::ok(
            NAME,
            format!("answers (keys under {})", state.prefix),
        ),
        Err(e) => Check::fail(NAME, e.to_string()).fix(
            "start Redis, or check PERPLEXITY_STATE_URL; until it answers, serve refuses to start and a running replica refuses billable calls",
        ),
    })
}

/// Opens the store (as first use would) and checks who may read it. Returns it for the
/// gateway checks.
fn store_checks(config: &Config, checks: &mut Vec<Check>) -> Option<Store> {
    let Some(store_config) = config.store.clone() else {
        checks.push(
            Check::warn(
                "Store",
                "no location is known (no PERPLEXITY_STORE_PATH, XDG_DATA_HOME or HOME)",
            )
            .fix("set PERPLEXITY_STORE_PATH; snapshots and gateway definitions need it"),
        );
        return None;
    };
    let path = store_config.path.clone();
    let existed = path.exists();
    let store = match Store::open(store_config) {
        Ok(store) => {
            let how = if existed {
                "opens"
            } else {
                "created; it opens"
            };
            checks.push(Check::ok("Store", format!("{} {how}", path.display())));
            Some(store)
        }
        Err(e) => {
            // The store's messages end with what to do: "…; set PERPLEXITY_STORE_PATH…".
            let text = e.to_string();
            let (detail, fix) = text
                .split_once("; ")
                .unwrap_or((&text, "check the path and its permissions"));
            checks.push(Check::fail("Store", detail).fix(fix));
            None
        }
    };
    if let Some(check) = store_permissions(&path) {
        checks.push(check);
    }
    store
}

/// The directory should be 0700 and the file 0600: snapshots are the user's research.
#[cfg(unix)]
fn store_permissions(path: &Path) -> Option<Check> {
    let mode = crate::files::mode;
    let mut loose = Vec::new();
    let mut fixes = Vec::new();
    let mut seen = Vec::new();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    for (p, want, what) in [(dir, 0o700, "directory"), (Some(path), 0o600, "file")] {
        let Some((p, m)) = p.and_then(|p| mode(p).map(|m| (p, m))) else {
            continue;
        };
        seen.push(format!("{what} {m:o}"));
        if m & 0o077 != 0 {
            loose.push(format!("the {what} {} is mode {m:o}", p.display()));
            fixes.push(format!("chmod {want:o} {}", p.display()));
        }
    }
    if seen.is_empty() {
        return None;
    }
    Some(if loose.is_empty() {
        Check::ok("Store permissions", seen.join(", "))
    } else {
        Check::warn(
            "Store permissions",
            format!("{}: others may read it", loose.join("; ")),
        )
        .fix(fixes.join(" && "))
    })
}

#[cfg(not(unix))]
fn store_permissions(_: &Path) -> Option<Check> {
    None
}

/// Every definition resolves as a launch would: policy re-checked, sealed secrets
/// opened with the configured key. Errors name the problem, never a secret value.
fn gateway_checks(config: &Config, store: Option<&Store>) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut defs: Vec<(&ServerDef, &str)> = config
        .file_servers
        .iter()
        .map(|d| (d, "config file"))
        .collect();
    let stored = match store.map(crate::app::stored_servers) {
        None => Vec::new(),
        Some(Ok(stored)) => stored,
        Some(Err(e)) => {
            checks.push(
                Check::fail("Gateway", format!("stored definitions cannot be read: {e}"))
                    .fix("fix the store (see the Store check)"),
            );
            Vec::new()
        }
    };
    for def in &stored {
        // The config file wins over a stored definition of the same name.
        if !config.file_servers.iter().any(|d| d.slug == def.slug) {
            defs.push((def, "store"));
        }
    }
    if defs.is_empty() && checks.is_empty() {
        checks.push(Check::ok("Gateway", "no downstream servers defined"));
    }
    for (def, source) in defs {
        checks.push(gateway_server(config, def, source));
    }
    checks
}

fn gateway_server(config: &Config, def: &ServerDef, source: &str) -> Check {
    let name = format!("Gateway {}", def.slug);
    let what = match &def.transport {
        TransportDef::Stdio { command, .. } => format!("stdio: {command}"),
        TransportDef::Http { url, .. } => format!("http: {url}"),
    };
    let state = match (def.enabled, config.gateway.enabled) {
        (_, false) => ", gateway off",
        (false, true) => ", disabled",
        (true, true) => "",
    };
    match definition::resolve(def, &config.gateway, config.secret_key.as_ref()) {
        Ok(_) => Check::ok(
            name,
            format!("{what} ({source}{state}); its definition and secrets resolve"),
        )
        .fix(format!(
            "perplexity-agent gateway test {} connects to it",
            def.slug
        )),
        Err(reason) => {
            let fix = if matches!(reason, crate::gateway::GatewayError::Secret(_)) {
                format!(
                    "set PERPLEXITY_SECRET_KEY to the key {} was saved with, or define it again (perplexity-agent gateway add {} --replace …)",
                    def.slug, def.slug
                )
            } else if source == "store" {
                format!(
                    "fix what the reason names: perplexity-agent gateway add {} --replace … replaces the definition, perplexity-agent gateway remove {} drops it",
                    def.slug, def.slug
                )
            } else {
                "fix it in the config file (PERPLEXITY_CONFIG_PATH)".to_owned()
            };
            Check::fail(name, format!("{what} ({source}{state}): {reason}")).fix(fix)
        }
    }
}

/// One client's config file as found: its document, or why it could not be parsed.
struct ClientFile {
    client: Client,
    path: std::path::PathBuf,
    doc: Result<Value, String>,
}

impl ClientFile {
    /// The entries that run a `perplexity-agent`.
    fn ours(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.doc
            .as_ref()
            .ok()
            .and_then(|doc| doc[self.client.container()].as_object())
            .into_iter()
            .flatten()
            .filter(|(_, e)| install::runs_us(e))
    }
}

/// The four clients' config files that exist and can be read.
fn client_files() -> Vec<ClientFile> {
    let env = |name: &str| std::env::var(name).ok();
    CLIENTS
        .into_iter()
        .filter_map(|client| {
            let path = client.config_path(Platform::current(), &env).ok()?;
            let text = std::fs::read_to_string(&path).ok()?;
            let doc = serde_json::from_str(&text).map_err(|e| e.to_string());
            Some(ClientFile { client, path, doc })
        })
        .collect()
}

/// The keys written into our entries' `env` blocks (non-empty strings only).
fn entry_keys(files: &[ClientFile]) -> Vec<EntryKey> {
    files
        .iter()
        .flat_map(|f| {
            f.ours().filter_map(|(name, entry)| {
                let key = entry["env"]["PERPLEXITY_API_KEY"].as_str()?;
                (!key.trim().is_empty()).then(|| EntryKey {
                    client: f.client,
                    name: name.clone(),
                    path: f.path.clone(),
                    key: key.to_owned(),
                })
            })
        })
        .collect()
}

/// Every client entry that runs a `perplexity-agent`, in the four clients' files.
fn client_checks(files: &[ClientFile]) -> Vec<Check> {
    let mut checks = Vec::new();
    for file in files {
        let (client, path) = (file.client, &file.path);
        if let Err(e) = &file.doc {
            checks.push(
                Check::warn(
                    client.title(),
                    format!("{} is not valid JSON ({e})", path.display()),
                )
                .fix(format!("fix it; {} cannot read it either", client.title())),
            );
            continue;
        }
        let servers = file.ours();
        for (name, entry) in servers {
            checks.push(client_entry(client, path, name, entry));
            checks.extend(key_exposure(client, path, name, entry));
            checks.extend(key_absent(client, path, name, entry));
        }
    }
    if checks.is_empty() {
        checks.push(
            Check::ok(
                "MCP clients",
                "no Claude Desktop, Claude Code, Cursor or VS Code entry runs perplexity-agent",
            )
            .fix("to use it from one: perplexity-agent install <claude-desktop|claude-code|cursor|vscode>"),
        );
    }
    checks
}

/// The entry's command exists and runs; its wait budget suits the client.
fn client_entry(client: Client, path: &Path, name: &str, entry: &Value) -> Check {
    let title = format!("{} ({name})", client.title());
    let mut reinstall = format!("perplexity-agent install {}", client.arg());
    if install::server_name(name).is_err() {
        reinstall.push_str(&format!(" (then remove the entry \"{name}\")"));
    } else if name != install::DEFAULT_NAME {
        reinstall.push_str(&format!(" --name {name}"));
    }
    let command = entry["command"].as_str().unwrap_or_default();
    let mut status = Status::Ok;
    let mut notes = Vec::new();
    if !Path::new(command).is_absolute() {
        status = Status::Warn;
        notes.push(format!(
            "the command {command} is not an absolute path: a client started outside your shell may not find it"
        ));
    } else if !crate::files::is_executable(Path::new(command)) {
        status = Status::Fail;
        notes.push(format!(
            "the command {command} does not exist or is not executable"
        ));
    }
    let recommended = client.wait_seconds();
    let configured = entry["env"][install::WAIT_VARIABLE].as_str();
    let budget = wait_seconds_from(configured);
    if budget != recommended {
        status = status.max(Status::Warn);
        notes.push(format!(
            "the wait budget is {budget} s; {recommended} s suits {} ({})",
            client.title(),
            client.wait_reason()
        ));
    }
    if notes.is_empty() {
        return Check::ok(
            title,
            format!(
                "runs {command}, wait budget {budget} s, in {}",
                path.display()
            ),
        );
    }
    Check::new(
        status,
        title,
        format!("{} (in {})", notes.join("; "), path.display()),
    )
    .fix(format!("reinstall with {reinstall}"))
}

/// An entry of a client started outside the shell, without the key: install writes none
/// on purpose, and the shell's `PERPLEXITY_API_KEY` never reaches such a client, so
/// every call would fail with "not set".
fn key_absent(client: Client, path: &Path, name: &str, entry: &Value) -> Option<Check> {
    let env = &entry["env"];
    // VS Code can also take it from an env file or an input prompt.
    let provided = env.get("PERPLEXITY_API_KEY").is_some() || entry.get("envFile").is_some();
    if provided || !client.launched_outside_the_shell() {
        return None;
    }
    let mut with_key = format!(
        "perplexity-agent install {} --with-key-from-env",
        client.arg()
    );
    if name != install::DEFAULT_NAME && install::server_name(name).is_ok() {
        with_key.push_str(&format!(" --name {name}"));
    }
    Some(
        Check::warn(format!("{} ({name}) key", client.title()),
            format!(
                "the entry in {} sets no PERPLEXITY_API_KEY, and {} is started outside your shell, so it will not see the key you exported",
                path.display(),
                client.title()
            ),
        )
        .fix(format!(
            "run {with_key} (it writes the key into that file, readable only by you), or add PERPLEXITY_API_KEY to the entry's env block yourself"
        )),
    )
}

/// A key written into a file others can read.
fn key_exposure(client: Client, path: &Path, name: &str, entry: &Value) -> Option<Check> {
    entry["env"].get("PERPLEXITY_API_KEY")?;
    let loose = std::fs::metadata(path)
        .ok()
        .and_then(|m| crate::files::loose_mode(&m.permissions()))?;
    Some(
        Check::warn(
            format!("{} ({name}) key", client.title()),
            format!(
                "{} holds the API key in plain text and is mode {loose:o}: other users can read it",
                path.display()
            ),
        )
        .fix(format!("chmod 600 {}", path.display())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_judged_by_shape_and_never_shown() {
        // Built at run time: a literal this shape would (rightly) trip the secret scan.
        let key = format!("pplx-{}", "Ab1".repeat(16));
        let key = key.as_str();
        let ok = api_key(Some(key), &[]);
        assert_eq!(ok.status, Status::Ok);
        for (raw, status) in [
            (None, Status::Fail),
            (Some("  "), Status::Fail),
            (Some("pplx-abc def-ghijklmnopqrstuvwxyz"), Status::Fail),
            (Some("sk-abcdefghijklmnopqrstuvwxyz0123"), Status::Warn),
            (Some("pplx-short"), Status::Warn),
        ] {
            let check = api_key(raw, &[]);
            assert_eq!(check.status, status, "{raw:?}");
            let shown = format!("{} {}", check.detail, check.fix);
            if let Some(raw) = raw.filter(|r| !r.trim().is_empty()) {
                assert!(!shown.contains(raw.trim()), "{shown}");
            }
        }
        assert!(!format!("{} {}", ok.detail, ok.fix).contains("abcdef"));
    }

    #[test]
    fn a_key_in_an_entry_is_placed_never_shown() {
        let key = format!("pplx-{}", "Zq7".repeat(16));
        let found = |key: &str| EntryKey {
            client: Client::ClaudeDesktop,
            name: "pa".to_owned(),
            path: "/cfg/claude_desktop_config.json".into(),
            key: key.to_owned(),
        };
        let check = api_key(None, &[found(&key)]);
        assert_eq!(check.status, Status::Ok);
        assert!(
            check
                .detail
                .contains("Claude Desktop's entry pa in /cfg/claude_desktop_config.json"),
            "{}",
            check.detail
        );
        assert!(!format!("{} {}", check.detail, check.fix).contains("Zq7"));
        assert_eq!(api_key(None, &[found("sk-odd")]).status, Status::Warn);
        assert_eq!(api_key(None, &[found("pplx-a b")]).status, Status::Fail);
        // The shell's key is judged first, as before.
        assert_eq!(api_key(Some("sk-odd"), &[found(&key)]).status, Status::Warn);
    }

    #[test]
    fn text_wraps_between_words_and_sums_up() {
        let long = format!("{} end", "word ".repeat(40));
        let lines = wrap(&long, "  ", "  ");
        assert!(lines.len() > 1);
        assert!(
            lines.iter().all(|l| l.chars().count() <= WIDTH),
            "{lines:#?}"
        );
        assert_eq!(lines.join(" ").split_whitespace().count(), 41);
        let path = format!("/{}", "p".repeat(100));
        assert_eq!(
            wrap(&format!("in {path}"), "  ", "  "),
            ["  in", &format!("  {path}")]
        );
        assert!(wrap("", "  ", "  ").is_empty());
        let checks = [
            Check::new(Status::Ok, "A", "fine"),
            Check::new(Status::Warn, "B", "hmm").fix("do this"),
        ];
        assert_eq!(
            text(&checks),
            "\u{2713} A\n  fine\n\u{26a0} B\n  hmm\n  \u{2192} do this\n\n2 checks: 1 ok, 1 warning, 0 failed"
        );
    }

    #[test]
    fn client_entries_are_judged() {
        let path = Path::new("/cfg/mcp.json");
        let missing = json!({"command": "/nonexistent/perplexity-agent",
                             "env": {"PERPLEXITY_AGENT_WAIT_SECONDS": "55"}});
        let c = client_entry(Client::Cursor, path, "pa", &missing);
        assert_eq!(c.status, Status::Fail);
        assert_eq!(
            c.fix,
            "reinstall with perplexity-agent install cursor --name pa"
        );
        let bare = json!({"command": "perplexity-agent"});
        let c = client_entry(Client::ClaudeCode, path, install::DEFAULT_NAME, &bare);
        assert_eq!(c.status, Status::Warn);
        assert!(c.detail.contains("not an absolute path"), "{}", c.detail);
        assert!(
            c.detail.contains("wait budget is 55 s; 300 s"),
            "{}",
            c.detail
        );
    }
}
