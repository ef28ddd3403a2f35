//! `perplexity-agent install <client>`: writes this server's entry into an MCP client's
//! config file, so nobody hand-edits JSON or guesses the binary's absolute path. The
//! entry is merged into what is there (other servers and keys untouched), the old file
//! is backed up first, and the new one replaces it atomically. A file we cannot parse
//! is refused, never overwritten. With `--url` the entry points the client at a running
//! `serve --http` instead of starting the server. Claude Code's `--print` is its own
//! `claude mcp add` command, with secrets as shell variables rather than values.
//!
//! Touches: the client's config file and its backup; reads HOME / USERPROFILE,
//! XDG_CONFIG_HOME, APPDATA and, with `--with-key-from-env`, PERPLEXITY_API_KEY, with
//! `--token-env VAR`, VAR. A key or token is written only when one of those asks for it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde_json::{Map, Value, json};
use url::Url;

use super::clients::{Client, Platform};
use super::output::{self, CliError, Ended, Exit};
use crate::net::is_loopback_host as is_loopback;
use crate::text::PutSome;

pub const DEFAULT_NAME: &str = "perplexity-agent";
pub const WAIT_VARIABLE: &str = "PERPLEXITY_AGENT_WAIT_SECONDS";
const KEY_VARIABLE: &str = "PERPLEXITY_API_KEY";

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The MCP client to set up.
    #[arg(value_enum)]
    pub client: Client,
    /// Print the entry on stdout instead of writing it.
    #[arg(long)]
    pub print: bool,
    /// Also write $PERPLEXITY_API_KEY into the entry (in plain text in the client's file).
    #[arg(long)]
    pub with_key_from_env: bool,
    /// Connect the client to a running `serve --http` at this URL (http or https, its
    /// /mcp endpoint) instead of having it start the server.
    #[arg(long, value_name = "URL", value_parser = server_url,
          conflicts_with_all = ["with_key_from_env", "launcher"])]
    pub url: Option<Url>,
    /// With --url: the environment variable holding the server's token, written into the
    /// entry's Authorization header (in plain text in the client's file).
    #[arg(long, value_name = "VAR", requires = "url", value_parser = variable_name)]
    pub token_env: Option<String>,
    /// The server's name in the client's config (1-64 letters, digits, '-' or '_').
    #[arg(long, value_name = "NAME", default_value = DEFAULT_NAME, value_parser = server_name)]
    pub name: String,
    /// How the client starts the server: this binary's path, `npx` or `uvx` (auto: the
    /// way this run was started).
    #[arg(long, value_enum, default_value_t = Launcher::Auto)]
    pub launcher: Launcher,
}

/// How a client's entry starts the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Launcher {
    /// `npx`/`uvx` when this run came from their caches, else this binary.
    Auto,
    /// This binary's absolute path.
    Binary,
    /// `npx -y perplexity-agent@<this version>`.
    Npx,
    /// `uvx perplexity-agent@<this version>`.
    Uvx,
}

/// The package on npm and PyPI, which the launchers fetch.
const PACKAGE: &str = "perplexity-agent";

/// What an entry runs: a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryCommand {
    pub program: String,
    pub args: Vec<String>,
}

impl EntryCommand {
    fn shown(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The launcher this binary was started through, from where it lies: `npx` unpacks a
/// package into npm's `_npx/<hash>/` cache, `uvx` into uv's `archive-v<N>/<id>/`. Both
/// are caches the launchers may prune or replace, so an entry naming the path there
/// would break later; the launcher itself is what the user has. Anything else (cargo,
/// pip or `uv tool install`, npm -g, an archive) is a stable path of its own.
pub fn detect(exe: &Path) -> Launcher {
    let parts: Vec<&str> = exe
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .collect();
    if parts.contains(&"_npx") {
        Launcher::Npx
    } else if parts.iter().any(|p| {
        p.strip_prefix("archive-v")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }) {
        Launcher::Uvx
    } else {
        Launcher::Binary
    }
}

pub fn server_name(raw: &str) -> Result<String, String> {
    let valid = (1..=64).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(raw.to_owned())
    } else {
        Err("use 1-64 letters, digits, '-' or '_'".to_owned())
    }
}

/// `--url`: an http(s) URL with a host and no credentials (a token goes in a header,
/// where `--token-env` puts it, not in a URL that is logged and shown).
pub fn server_url(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw.trim()).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(
            "use an http or https URL: the server's /mcp endpoint, e.g. https://mcp.example.org/mcp"
                .to_owned(),
        );
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL names no host".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "put no credentials in the URL; give the token with --token-env VAR instead".to_owned(),
        );
    }
    Ok(url)
}

/// `--token-env`: an environment variable's name. The Perplexity key is refused: it is
/// not a token `serve --http` accepts, and it would leak into another client's file.
pub fn variable_name(raw: &str) -> Result<String, String> {
    let valid = (1..=128).contains(&raw.len())
        && !raw.starts_with(|c: char| c.is_ascii_digit())
        && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return Err("use a variable's name: letters, digits and '_'".to_owned());
    }
    if raw == KEY_VARIABLE {
        return Err(format!(
            "{KEY_VARIABLE} is the Perplexity key, not a token of serve --http: name the variable that holds the server's token"
        ));
    }
    Ok(raw.to_owned())
}

/// The HTTP entry for `client`: where the server is, and the token when one is given.
pub fn http_entry(client: Client, url: &Url, token: Option<&str>) -> Map<String, Value> {
    let mut entry = Map::new();
    if client.typed() {
        entry.insert("type".to_owned(), json!("http"));
    }
    entry.insert("url".to_owned(), json!(url.as_str()));
    if let Some(token) = token {
        entry.insert(
            "headers".to_owned(),
            json!({ "Authorization": format!("Bearer {token}") }),
        );
    }
    entry
}

/// Whether a client's entry runs this program: by the command's file name, or a
/// launcher (`npx`, `uvx`, `uv tool run`) given our package.
pub fn runs_us(entry: &Value) -> bool {
    let Some(name) = entry["command"]
        .as_str()
        .and_then(|c| Path::new(c).file_stem())
        .and_then(|n| n.to_str())
    else {
        return false;
    };
    if name == PACKAGE {
        return true;
    }
    let ours = |arg: &Value| {
        arg.as_str().is_some_and(|a| {
            a == PACKAGE
                || a.strip_prefix(PACKAGE)
                    .is_some_and(|rest| rest.starts_with('@') || rest.starts_with("=="))
        })
    };
    matches!(name, "npx" | "uvx" | "uv")
        && entry["args"]
            .as_array()
            .is_some_and(|args| args.iter().any(ours))
}

/// The entry for `client`: the command, the wait budget (and the key).
pub fn entry(client: Client, command: &EntryCommand, key: Option<&str>) -> Map<String, Value> {
    let mut env = Map::new();
    env.insert(
        WAIT_VARIABLE.to_owned(),
        json!(client.wait_seconds().to_string()),
    );
    env.put_some(KEY_VARIABLE, key);
    let mut entry = Map::new();
    if client.typed() {
        entry.insert("type".to_owned(), json!("stdio"));
    }
    entry.insert("command".to_owned(), json!(command.program));
    entry.insert("args".to_owned(), json!(command.args));
    entry.insert("env".to_owned(), Value::Object(env));
    entry
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Updated,
    Unchanged,
}

/// The file's new content with our entry merged in. Everything else is kept as it was:
/// other servers, other top-level keys, and fields or variables the user added to our
/// own entry (only `type`, `command`, `args` and our variables are set).
pub fn merge(
    existing: Option<&str>,
    container: &str,
    name: &str,
    ours: &Map<String, Value>,
) -> Result<(Value, Change), String> {
    let mut doc = match existing.map(str::trim) {
        None | Some("") => Value::Object(Map::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            format!("is not valid JSON ({e}); comments and trailing commas are not supported")
        })?,
    };
    let root = doc
        .as_object_mut()
        .ok_or("does not hold a JSON object at the top level")?;
    let servers = root
        .entry(container)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| format!("has a \"{container}\" that is not an object"))?;
    let change = match servers.get(name) {
        None => {
            servers.insert(name.to_owned(), Value::Object(ours.clone()));
            Change::Added
        }
        Some(old) => {
            let updated = updated_entry(old, name, ours)?;
            if &updated == old {
                Change::Unchanged
            } else {
                servers.insert(name.to_owned(), updated);
                Change::Updated
            }
        }
    };
    Ok((doc, change))
}

/// An existing entry with ours laid over it. One of the other transport (a stdio entry
/// where we write an HTTP one, or the reverse) is someone else's, or ours made another
/// way: refused rather than turned into a hybrid.
fn updated_entry(old: &Value, name: &str, ours: &Map<String, Value>) -> Result<Value, String> {
    let http = ours.contains_key("url");
    let not_ours = || {
        format!(
            "already has a server named \"{name}\" that is not {} server; choose another --name",
            if http { "an HTTP" } else { "a stdio" }
        )
    };
    let old = old.as_object().ok_or_else(not_ours)?;
    let old_http = old.contains_key("url") || old.get("type").is_some_and(|t| t != "stdio");
    if old_http != http || (http && old.contains_key("command")) {
        return Err(not_ours());
    }
    let mut updated = old.clone();
    for (key, value) in ours {
        let value = match (key.as_str(), value, old.get(key)) {
            ("env" | "headers", Value::Object(new), Some(Value::Object(kept))) => {
                let mut env = kept.clone();
                env.extend(new.clone());
                Value::Object(env)
            }
            _ => value.clone(),
        };
        updated.insert(key.clone(), value);
    }
    Ok(Value::Object(updated))
}

/// Claude Desktop reads only stdio servers from its file; a remote server is a connector.
const DESKTOP_REMOTE: &str = "Claude Desktop does not take remote servers in its config file: add the URL as a connector (Settings → Connectors → Add custom connector). Connectors sign in with OAuth, so run serve --http with PERPLEXITY_OAUTH_ISSUER; with a token instead, run the server on this machine: perplexity-agent install claude-desktop (without --url).";

/// Runs the command; returns the process exit code.
pub fn run(args: InstallArgs) -> Ended {
    let ours = match &args.url {
        Some(url) => remote_entry(&args, url)?,
        None => local_entry(&args)?,
    };
    let env = |name: &str| std::env::var(name).ok();
    let path = args.client.config_path(Platform::current(), &env);
    if args.print {
        return print(&args, ours, path.ok());
    }
    let path = path.map_err(|e| CliError::config(&e))?;
    install(&args, &path, &ours)
}

/// The stdio entry: how the client starts this server (and the key, when asked).
fn local_entry(args: &InstallArgs) -> Result<Map<String, Value>, CliError> {
    let key = args
        .with_key_from_env
        .then(key_from_env)
        .transpose()
        .map_err(|e| CliError::config(&e))?;
    let command = command(args.launcher).map_err(|e| CliError::failed(&e))?;
    Ok(entry(args.client, &command, key.as_deref()))
}

/// The HTTP entry: where the running server is (and its token, when asked).
fn remote_entry(args: &InstallArgs, url: &Url) -> Result<Map<String, Value>, CliError> {
    if args.client == Client::ClaudeDesktop {
        return Err(CliError::usage(DESKTOP_REMOTE));
    }
    let token = args
        .token_env
        .as_deref()
        .map(token_from_env)
        .transpose()
        .map_err(|e| CliError::config(&e))?;
    // Plain http is safe on this machine only; elsewhere the token crosses the network
    // readable by anyone on the path.
    if url.scheme() == "http" && !is_loopback(url) {
        eprintln!(
            "perplexity-agent: warning: {url} is plain http to another machine: every request, and the token with it, crosses the network readable. Put TLS in front of serve --http and use https://."
        );
    }
    Ok(http_entry(args.client, url, token.as_deref()))
}

/// The token in `name`, trimmed (a stray newline from a file is not part of it). Its
/// value never appears in a message.
fn token_from_env(name: &str) -> Result<String, String> {
    let value = std::env::var(name).unwrap_or_default();
    let token = value.trim();
    if token.is_empty() {
        return Err(format!(
            "--token-env: {name} is not set (or is empty). Export the server's token in it first (the one `perplexity-agent clients add NAME` printed, or PERPLEXITY_HTTP_AUTH_TOKEN), or leave the flag out and add the header yourself."
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "--token-env: {name} holds characters that cannot go in an HTTP header (spaces, line breaks or non-ASCII); set it to the token alone"
        ));
    }
    Ok(token.to_owned())
}

fn key_from_env() -> Result<String, String> {
    crate::perplexity::key::from_env()
        .map(|k| secrecy::ExposeSecret::expose_secret(&k).to_owned())
        .ok_or_else(|| {
            format!(
                "--with-key-from-env: {KEY_VARIABLE} is not set. Export it first (export {KEY_VARIABLE}=pplx-…), or leave the flag out and give the client the key another way."
            )
        })
}

/// The command for `launcher`. A launcher entry is pinned to this version: the client
/// then starts what the user ran, not whatever the registry serves next (running
/// install again after an upgrade moves it on).
fn command(launcher: Launcher) -> Result<EntryCommand, String> {
    let exe = std::env::current_exe().and_then(fs::canonicalize).ok();
    let launcher = match launcher {
        Launcher::Auto => exe.as_deref().map_or(Launcher::Binary, detect),
        chosen => chosen,
    };
    let version = env!("CARGO_PKG_VERSION");
    let path = std::env::var_os("PATH");
    Ok(match launcher {
        Launcher::Npx => EntryCommand {
            program: on_path("npx", path.as_deref(), None),
            args: vec!["-y".to_owned(), format!("{PACKAGE}@{version}")],
        },
        // uv tells the programs it starts where it is (`UV`); uvx sits beside it.
        Launcher::Uvx => EntryCommand {
            program: on_path("uvx", path.as_deref(), std::env::var_os("UV").as_deref()),
            args: vec![format!("{PACKAGE}@{version}")],
        },
        Launcher::Auto | Launcher::Binary => EntryCommand {
            program: this_binary()?,
            args: Vec::new(),
        },
    })
}

/// `program`'s absolute path, for the same reason as this binary's (a client started
/// from the desktop may not have the shell's PATH): the first executable on `path`,
/// else beside `sibling_of`, else the bare name (with a note: the client must find it).
fn on_path(
    program: &str,
    path: Option<&std::ffi::OsStr>,
    sibling_of: Option<&std::ffi::OsStr>,
) -> String {
    let file = if cfg!(windows) {
        format!(
            "{program}{}",
            if program == "npx" { ".cmd" } else { ".exe" }
        )
    } else {
        program.to_owned()
    };
    let beside = sibling_of
        .map(Path::new)
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    let found = path
        .into_iter()
        .flat_map(std::env::split_paths)
        .chain(beside)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(&file))
        .find(|candidate| crate::files::is_executable(candidate))
        .and_then(|p| p.into_os_string().into_string().ok());
    found.unwrap_or_else(|| {
        eprintln!(
            "perplexity-agent: note: {program} is not on PATH here; the entry names it bare, so the client must find it on its own PATH."
        );
        program.to_owned()
    })
}

/// This binary's absolute path (GUI clients do not see the shell's PATH), canonical so
/// the entry names the real file rather than a relative or `..` path.
fn this_binary() -> Result<String, String> {
    let path = std::env::current_exe()
        .and_then(fs::canonicalize)
        .map_err(|e| {
            format!(
                "cannot tell where this binary is ({}); use --print and put its absolute path in the entry yourself",
                e.kind()
            )
        })?;
    if is_build_output(&path) {
        eprintln!(
            "perplexity-agent: note: {} is a build output; `cargo install --path .` and run install from the installed binary, so the entry survives `cargo clean`.",
            path.display()
        );
    }
    path.into_os_string().into_string().map_err(|_| {
        "this binary's path is not valid UTF-8 and cannot go into a JSON config; move it".to_owned()
    })
}

fn is_build_output(path: &Path) -> bool {
    let parts: Vec<_> = path.components().map(|c| c.as_os_str()).collect();
    parts
        .windows(2)
        .any(|w| w[0] == "target" && (w[1] == "debug" || w[1] == "release"))
}

/// `--print`: the snippet on stdout (so it can be piped), where it goes on stderr. For
/// Claude Code, its own command, which keeps its file's other state consistent.
fn print(args: &InstallArgs, ours: Map<String, Value>, path: Option<PathBuf>) -> Ended {
    let place = path.map_or_else(
        || "the client's config file".to_owned(),
        |p| p.display().to_string(),
    );
    if args.client == Client::ClaudeCode {
        output::lines(&claude_mcp_add(args, &ours));
        eprintln!(
            "perplexity-agent: nothing was written; run this command (Claude Code's own way to add a server to {place}), or run without --print."
        );
        return Ok(Exit::Success);
    }
    let snippet = json!({ args.client.container(): { args.name.as_str(): ours } });
    let text = serde_json::to_string_pretty(&snippet)
        .map_err(|_| CliError::failed("the entry could not be rendered"))?;
    output::lines(&text);
    eprintln!(
        "perplexity-agent: nothing was written; merge this into {place} (or run without --print)."
    );
    if args.with_key_from_env {
        eprintln!("perplexity-agent: warning: the output above contains your API key.");
    }
    if let Some(var) = &args.token_env {
        eprintln!("perplexity-agent: warning: the output above contains the token from {var}.");
    }
    Ok(Exit::Success)
}

/// `claude mcp add` for the entry, in user scope (where `install` writes). The server's
/// name comes before `--env` and `--header`, which take several values each and would
/// swallow a name after them. A key or token is a shell variable the shell expands when
/// the command runs, so the printed line holds no secret.
fn claude_mcp_add(args: &InstallArgs, ours: &Map<String, Value>) -> String {
    let mut parts: Vec<String> = ["claude", "mcp", "add", "--scope", "user", "--transport"]
        .map(str::to_owned)
        .to_vec();
    if let Some(url) = &args.url {
        parts.extend([
            "http".to_owned(),
            shell_word(&args.name),
            shell_word(url.as_str()),
        ]);
        if let Some(var) = &args.token_env {
            parts.push("--header".to_owned());
            parts.push(format!("\"Authorization: Bearer ${var}\""));
        }
        return parts.join(" ");
    }
    parts.extend(["stdio".to_owned(), shell_word(&args.name)]);
    for (name, value) in ours["env"].as_object().into_iter().flatten() {
        parts.push("--env".to_owned());
        if name == KEY_VARIABLE {
            parts.push(format!("\"{KEY_VARIABLE}=${KEY_VARIABLE}\""));
        } else {
            parts.push(shell_word(&format!(
                "{name}={}",
                value.as_str().unwrap_or_default()
            )));
        }
    }
    parts.push("--".to_owned());
    parts.push(shell_word(ours["command"].as_str().unwrap_or_default()));
    for arg in ours["args"].as_array().into_iter().flatten() {
        parts.push(shell_word(arg.as_str().unwrap_or_default()));
    }
    parts.join(" ")
}

/// `word` as one POSIX shell word: as it is when it holds nothing the shell treats
/// specially, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A config file as found: its exact bytes (for the backup) and its permissions.
struct Existing {
    text: String,
    permissions: fs::Permissions,
}

fn install(args: &InstallArgs, path: &Path, ours: &Map<String, Value>) -> Ended {
    let client = args.client;
    let path = real_file(path).map_err(|e| CliError::config(&e))?;
    let old = read_existing(&path).map_err(|e| CliError::config(&e))?;
    let text = old.as_ref().map(|o| o.text.as_str());
    let (doc, change) = merge(text, client.container(), &args.name, ours).map_err(|why| {
        CliError::config(format!(
            "{} {why}. Nothing was changed: fix the file (or move it aside), or add the entry yourself (perplexity-agent install {} --print shows it).",
            path.display(),
            client.arg()
        ))
    })?;
    // A secret the entry already had, which this run neither wrote nor removed.
    let entry = &doc[client.container()][&args.name];
    let kept_key = match args.url {
        None => !args.with_key_from_env && entry["env"].get(KEY_VARIABLE).is_some(),
        Some(_) => args.token_env.is_none() && entry["headers"].get("Authorization").is_some(),
    };
    if change == Change::Unchanged {
        output::lines(&format!(
            "{} already has this {} entry in {}; nothing was written.",
            client.title(),
            args.name,
            path.display()
        ));
        warn_about_key(args, &path, old.as_ref(), kept_key);
        return Ok(Exit::Success);
    }
    let backup = match serde_json::to_string_pretty(&doc) {
        Ok(text) => write(&path, old.as_ref(), &format!("{text}\n")),
        Err(_) => Err("the new content could not be rendered".to_owned()),
    }
    .map_err(|e| CliError::failed(format!("{e}. The config file was not changed.")))?;
    output::lines(&report(
        args,
        &path,
        ours,
        change,
        backup.as_deref(),
        kept_key,
    ));
    warn_about_key(args, &path, old.as_ref(), kept_key);
    Ok(Exit::Success)
}

fn report(
    args: &InstallArgs,
    path: &Path,
    ours: &Map<String, Value>,
    change: Change,
    backup: Option<&Path>,
    kept_key: bool,
) -> String {
    let client = args.client;
    let what = match change {
        Change::Added => "Added",
        _ => "Updated",
    };
    let mut lines = vec![format!(
        "{what} the {} entry for {} in {}.",
        args.name,
        client.title(),
        path.display()
    )];
    if let Some(backup) = backup {
        lines.push(format!("Backup of the old file: {}", backup.display()));
    }
    if let Some(url) = &args.url {
        lines.extend(remote_report(args, url, kept_key));
        lines.push(format!("Next: {}.", client.next_step()));
        return lines.join("\n");
    }
    lines.push(format!("Command: {}", shown(ours)));
    lines.push(format!(
        "Wait budget: {WAIT_VARIABLE}={}, because {}. A run that takes longer hands back a response_id to collect.",
        client.wait_seconds(),
        client.wait_reason()
    ));
    if kept_key {
        lines.push(format!(
            "API key: the entry keeps the {KEY_VARIABLE} it already had (in plain text)."
        ));
    } else if !args.with_key_from_env {
        lines.push(format!(
            "API key: not written. The server reads {KEY_VARIABLE} from the environment {} starts it with: started from your shell, it passes yours on; started from the desktop, usually not. Then add it to the entry's env, or run again with --with-key-from-env.",
            client.title()
        ));
    }
    lines.push(format!(
        "Next: {}, then check with: perplexity-agent doctor",
        client.next_step()
    ));
    lines.join("\n")
}

/// What an HTTP entry holds and what it still needs.
fn remote_report(args: &InstallArgs, url: &Url, kept_token: bool) -> Vec<String> {
    let client = args.client;
    let mut lines = vec![format!(
        "URL: {url} (Streamable HTTP: the client connects to a running perplexity-agent serve --http)"
    )];
    lines.push(match (&args.token_env, kept_token) {
        (Some(var), _) => format!(
            "Token: written from {var} into the entry's Authorization header (in plain text)."
        ),
        (None, true) => {
            "Token: the entry keeps the Authorization header it already had (in plain text)."
                .to_owned()
        }
        (None, false) => format!(
            "Token: not written. serve --http answers 401 without one (unless it signs callers in with OAuth, which {} then offers): run again with --token-env VAR, VAR holding the token (the one perplexity-agent clients add printed, or PERPLEXITY_HTTP_AUTH_TOKEN), or add \"headers\": {{\"Authorization\": \"Bearer …\"}} to the entry yourself.",
            client.title()
        ),
    });
    lines.push(format!(
        "Wait budget: the server's ({WAIT_VARIABLE} where serve --http runs); {} s suits {}, because {}.",
        client.wait_seconds(),
        client.title(),
        client.wait_reason()
    ));
    lines
}

/// The entry's command line, as the report shows it.
fn shown(ours: &Map<String, Value>) -> String {
    let program = ours["command"].as_str().unwrap_or_default().to_owned();
    let args = ours["args"].as_array().into_iter().flatten();
    EntryCommand {
        program,
        args: args.filter_map(|a| a.as_str().map(str::to_owned)).collect(),
    }
    .shown()
}

fn warn_about_key(args: &InstallArgs, path: &Path, old: Option<&Existing>, kept_key: bool) {
    let keep = "Keep that file private (readable only by you), out of version control and out of anything you share.";
    if args.with_key_from_env {
        eprintln!(
            "perplexity-agent: warning: your API key now sits in plain text in {}. {keep}",
            path.display()
        );
    }
    if let Some(var) = &args.token_env {
        eprintln!(
            "perplexity-agent: warning: the token from {var} now sits in plain text in {}. {keep}",
            path.display()
        );
    }
    if (args.with_key_from_env || args.token_env.is_some() || kept_key)
        && old.is_some_and(|o| crate::files::loose_mode(&o.permissions).is_some())
    {
        eprintln!(
            "perplexity-agent: warning: {} is readable by other users; make it private: chmod 600 {}",
            path.display(),
            path.display()
        );
    }
}

/// A symlinked config (dotfile managers do that) is updated where it points, so the
/// link survives.
fn real_file(path: &Path) -> Result<PathBuf, String> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => fs::canonicalize(path).map_err(|e| {
            format!(
                "{} is a symbolic link that cannot be followed ({}); fix or remove the link",
                path.display(),
                e.kind()
            )
        }),
        _ => Ok(path.to_owned()),
    }
}

fn read_existing(path: &Path) -> Result<Option<Existing>, String> {
    let cannot = |e: std::io::Error| format!("{} cannot be read ({})", path.display(), e.kind());
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(cannot(e)),
    };
    let permissions = fs::metadata(path).map_err(cannot)?.permissions();
    let text = String::from_utf8(bytes).map_err(|_| {
        format!(
            "{} is not UTF-8 text, so not JSON a client reads; nothing was changed",
            path.display()
        )
    })?;
    Ok(Some(Existing { text, permissions }))
}

/// Backs up the old file, then replaces it atomically (a temporary file in the same
/// directory, renamed over it) with its permissions; a new file is created 0600, with
/// its directories 0700. Returns the backup's path.
fn write(path: &Path, old: Option<&Existing>, text: &str) -> Result<Option<PathBuf>, String> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| format!("{} has no parent directory", path.display()))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{} has no usable file name", path.display()))?;
    if old.is_none() {
        create_dirs(dir)?;
    }
    let permissions = old.map(|o| &o.permissions);
    let backup = old.map(|old| backup(dir, name, old)).transpose()?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = dir.join(format!(".{name}.tmp-{}-{nanos}", std::process::id()));
    let replaced = write_new(&temp, text.as_bytes(), permissions)
        .and_then(|()| fs::rename(&temp, path))
        .map_err(|e| format!("{} could not be written ({})", path.display(), e.kind()));
    if replaced.is_err() {
        let _ = fs::remove_file(&temp);
    }
    replaced?;
    sync_dir(dir);
    Ok(backup)
}

/// `<file>.bak-<unix seconds>` (with `-2`, `-3`… if that exists): a copy of the old
/// bytes with the old permissions. Never overwrites anything.
fn backup(dir: &Path, name: &str, old: &Existing) -> Result<PathBuf, String> {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for n in 1..=100 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let path = dir.join(format!("{name}.bak-{seconds}{suffix}"));
        match write_new(&path, old.text.as_bytes(), Some(&old.permissions)) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                let _ = fs::remove_file(&path);
                return Err(format!(
                    "the backup {} could not be written ({})",
                    path.display(),
                    e.kind()
                ));
            }
        }
    }
    Err(format!(
        "no free backup name next to {}; remove old {name}.bak-* files",
        dir.display()
    ))
}

/// A file that did not exist, with `permissions` (or 0600), flushed to disk. The mode
/// is set at creation, so the content is never readable by others even for a moment.
fn write_new(
    path: &Path,
    bytes: &[u8],
    permissions: Option<&fs::Permissions>,
) -> std::io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(permissions.map_or(0o600, |p| p.mode() & 0o600));
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    #[cfg(unix)]
    if permissions.is_none() {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    }
    if let Some(permissions) = permissions {
        fs::set_permissions(path, permissions.clone())?;
    }
    Ok(())
}

fn create_dirs(dir: &Path) -> Result<(), String> {
    crate::files::private_dir(dir)
        .map_err(|e| format!("{} could not be created ({})", dir.display(), e.kind()))
}

/// Makes the rename durable; best effort (not every filesystem allows it).
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    fn binary(path: &str) -> EntryCommand {
        EntryCommand {
            program: path.to_owned(),
            args: Vec::new(),
        }
    }

    #[test]
    fn config_paths_per_platform() {
        let linux = env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")]);
        let path = |c: Client, os: Platform, e: &dyn Fn(&str) -> Option<String>| {
            c.config_path(os, &|n: &str| e(n)).unwrap()
        };
        assert_eq!(
            path(Client::ClaudeDesktop, Platform::Unix, &linux),
            Path::new("/x/Claude/claude_desktop_config.json")
        );
        assert_eq!(
            path(Client::Vscode, Platform::Unix, &linux),
            Path::new("/x/Code/User/mcp.json")
        );
        assert_eq!(
            path(Client::ClaudeCode, Platform::Unix, &linux),
            Path::new("/h/.claude.json")
        );
        assert_eq!(
            path(Client::Cursor, Platform::Unix, &linux),
            Path::new("/h/.cursor/mcp.json")
        );
        // A relative XDG_CONFIG_HOME is ignored, as the spec says.
        let relative = env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "cfg")]);
        assert_eq!(
            path(Client::Vscode, Platform::Unix, &relative),
            Path::new("/h/.config/Code/User/mcp.json")
        );
        let mac = env(&[("HOME", "/Users/u"), ("XDG_CONFIG_HOME", "/x")]);
        assert_eq!(
            path(Client::ClaudeDesktop, Platform::MacOs, &mac),
            Path::new("/Users/u/Library/Application Support/Claude/claude_desktop_config.json")
        );
        assert_eq!(
            path(Client::Vscode, Platform::MacOs, &mac),
            Path::new("/Users/u/Library/Application Support/Code/User/mcp.json")
        );
        let windows = env(&[("USERPROFILE", "/p"), ("APPDATA", "/p/AppData/Roaming")]);
        assert_eq!(
            path(Client::ClaudeDesktop, Platform::Windows, &windows),
            Path::new("/p/AppData/Roaming/Claude/claude_desktop_config.json")
        );
        assert_eq!(
            path(Client::Cursor, Platform::Windows, &windows),
            Path::new("/p/.cursor/mcp.json")
        );
        let err = Client::Cursor
            .config_path(Platform::Unix, &env(&[("HOME", " ")]))
            .unwrap_err();
        assert!(err.contains("HOME is not set"), "{err}");
    }

    #[test]
    fn names_are_checked() {
        assert!(server_name("perplexity_agent-2").is_ok());
        assert!(server_name(&"a".repeat(64)).is_ok());
        for bad in ["", "a b", "a.b", "ä", &"a".repeat(65)] {
            assert!(server_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn merge_keeps_everything_else_and_is_idempotent() {
        let ours = entry(Client::ClaudeCode, &binary("/bin/perplexity-agent"), None);
        let old =
            r#"{"theme": "dark", "mcpServers": {"other": {"command": "x", "n": 1.50}}, "z": [1]}"#;
        let (doc, change) = merge(Some(old), "mcpServers", "pa", &ours).unwrap();
        assert_eq!(change, Change::Added);
        assert_eq!(doc["theme"], "dark");
        assert_eq!(
            doc["mcpServers"]["other"].to_string(),
            r#"{"command":"x","n":1.50}"#
        );
        assert_eq!(doc["mcpServers"]["pa"]["type"], "stdio");
        assert_eq!(doc["mcpServers"]["pa"]["env"][WAIT_VARIABLE], "300");
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["theme", "mcpServers", "z"]);
        let text = doc.to_string();
        assert!(text.contains("1.50"), "numbers kept as written: {text}");
        let (again, change) = merge(Some(&text), "mcpServers", "pa", &ours).unwrap();
        assert_eq!((change, &again), (Change::Unchanged, &doc));
    }

    #[test]
    fn merge_updates_our_entry_and_keeps_what_the_user_added() {
        let ours = entry(Client::Cursor, &binary("/new/perplexity-agent"), None);
        let old = r#"{"mcpServers": {"pa": {"command": "/old/perplexity-agent", "disabled": false,
                      "env": {"PERPLEXITY_API_KEY": "k", "PERPLEXITY_AGENT_WAIT_SECONDS": "10"}}}}"#;
        let (doc, change) = merge(Some(old), "mcpServers", "pa", &ours).unwrap();
        assert_eq!(change, Change::Updated);
        assert_eq!(
            doc["mcpServers"]["pa"],
            json!({"command": "/new/perplexity-agent", "disabled": false,
                   "env": {"PERPLEXITY_API_KEY": "k", "PERPLEXITY_AGENT_WAIT_SECONDS": "55"}, "args": []})
        );
    }

    #[test]
    fn merge_refuses_what_it_cannot_keep() {
        let ours = entry(Client::Vscode, &binary("/bin/perplexity-agent"), None);
        for (old, why) in [
            ("{\"servers\": {}, // note\n}", "not valid JSON"),
            ("[1]", "top level"),
            ("{\"servers\": []}", "\"servers\" that is not an object"),
            (
                "{\"servers\": {\"pa\": {\"type\": \"http\", \"url\": \"https://x\"}}}",
                "choose another --name",
            ),
            ("{\"servers\": {\"pa\": 3}}", "choose another --name"),
        ] {
            let err = merge(Some(old), "servers", "pa", &ours).unwrap_err();
            assert!(err.contains(why), "{old}: {err}");
        }
        let (doc, _) = merge(Some("  \n"), "servers", "pa", &ours).unwrap();
        assert_eq!(doc["servers"]["pa"]["command"], "/bin/perplexity-agent");
    }

    #[test]
    fn http_entries_have_each_clients_shape_and_merge_apart_from_stdio_ones() {
        let url = server_url("https://mcp.example.org/mcp").unwrap();
        assert_eq!(
            Value::Object(http_entry(Client::Cursor, &url, Some("t0k"))),
            json!({"url": "https://mcp.example.org/mcp", "headers": {"Authorization": "Bearer t0k"}})
        );
        assert_eq!(
            Value::Object(http_entry(Client::Vscode, &url, None)),
            json!({"type": "http", "url": "https://mcp.example.org/mcp"})
        );
        // An HTTP entry of ours is updated in place, its other headers kept.
        let ours = http_entry(Client::Vscode, &url, Some("new"));
        let old = r#"{"servers": {"pa": {"type": "http", "url": "https://old/mcp",
                      "headers": {"X-Team": "a", "Authorization": "Bearer old"}}}}"#;
        let (doc, change) = merge(Some(old), "servers", "pa", &ours).unwrap();
        assert_eq!(change, Change::Updated);
        assert_eq!(
            doc["servers"]["pa"],
            json!({"type": "http", "url": "https://mcp.example.org/mcp",
                   "headers": {"X-Team": "a", "Authorization": "Bearer new"}})
        );
        let stdio = r#"{"servers": {"pa": {"type": "stdio", "command": "/bin/perplexity-agent"}}}"#;
        let err = merge(Some(stdio), "servers", "pa", &ours).unwrap_err();
        assert!(err.contains("not an HTTP server"), "{err}");
    }

    #[test]
    fn urls_and_variable_names_are_checked() {
        for good in [
            "https://a.example/mcp",
            "http://127.0.0.1:8080/mcp",
            " http://[::1]/mcp ",
        ] {
            assert!(server_url(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("ftp://a.example/mcp", "http or https"),
            ("a.example/mcp", "not a URL"),
            ("https://u:p@a.example/mcp", "--token-env"),
            ("https://u@a.example/mcp", "--token-env"),
        ] {
            let err = server_url(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let loopback = |u: &str| is_loopback(&server_url(u).unwrap());
        assert!(loopback("http://localhost:1/mcp") && loopback("http://127.0.0.2/mcp"));
        assert!(loopback("http://[::1]/mcp") && !loopback("http://10.0.0.1/mcp"));
        assert!(variable_name("PA_TOKEN_2").is_ok());
        for bad in ["", "2X", "A-B", "A B", KEY_VARIABLE] {
            assert!(variable_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shell_words_survive_the_shell() {
        assert_eq!(
            shell_word("/usr/bin/perplexity-agent"),
            "/usr/bin/perplexity-agent"
        );
        assert_eq!(
            shell_word("perplexity-agent@0.1.0"),
            "perplexity-agent@0.1.0"
        );
        assert_eq!(shell_word("/Users/a b/bin"), "'/Users/a b/bin'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word("$HOME"), "'$HOME'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn entries_are_recognised_by_file_name() {
        assert!(runs_us(&json!({"command": "/a/b/perplexity-agent"})));
        assert!(runs_us(&json!({"command": "perplexity-agent"})));
        assert!(!runs_us(&json!({"command": "/a/perplexity-agent-mcp"})));
        assert!(!runs_us(&json!({"url": "https://x"})));
        assert!(runs_us(
            &json!({"command": "/usr/bin/npx", "args": ["-y", "perplexity-agent@0.1.0"]})
        ));
        assert!(runs_us(
            &json!({"command": "C:/n/npx.cmd", "args": ["-y", "perplexity-agent"]})
        ));
        assert!(runs_us(
            &json!({"command": "uvx", "args": ["perplexity-agent==0.1.0"]})
        ));
        assert!(!runs_us(
            &json!({"command": "npx", "args": ["-y", "perplexity-agent-mcp"]})
        ));
        assert!(!runs_us(
            &json!({"command": "npx", "args": "perplexity-agent"})
        ));
        assert!(is_build_output(Path::new(
            "/w/target/debug/perplexity-agent"
        )));
        assert!(!is_build_output(Path::new("/usr/bin/perplexity-agent")));
    }

    #[test]
    fn launchers_are_told_by_their_caches() {
        let npx =
            "/home/u/.npm/_npx/8f49/node_modules/@perplexity-agent/linux-x64/bin/perplexity-agent";
        assert_eq!(detect(Path::new(npx)), Launcher::Npx);
        let uvx = "/home/u/.cache/uv/archive-v0/eb2bTszEg5b/bin/perplexity-agent";
        assert_eq!(detect(Path::new(uvx)), Launcher::Uvx);
        for stable in [
            "/home/u/.cargo/bin/perplexity-agent",
            "/home/u/.local/share/uv/tools/perplexity-agent/bin/perplexity-agent",
            "/usr/lib/node_modules/perplexity-agent/node_modules/@perplexity-agent/linux-x64/bin/perplexity-agent",
            "/srv/archive-vx/perplexity-agent",
        ] {
            assert_eq!(detect(Path::new(stable)), Launcher::Binary, "{stable}");
        }
    }
}
