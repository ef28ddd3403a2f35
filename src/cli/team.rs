//! `perplexity-agent clients add|list|remove|rotate`: the named clients of `serve --http`
//! (`PERPLEXITY_HTTP_CLIENTS_FILE`). A token is printed once, alone on stdout, and only
//! its SHA-256 is written; `list` never shows a hash. A running server picks the change
//! up by itself (within a second, or at once on SIGHUP).
//!
//! Exit codes: 2 for what was asked (a bad or taken name, an unknown client, a bad tool
//! list); 4 for the file (none named, unreadable, broken, a link, not writable).
//!
//! Touches: the clients file only (no key, no store, no network).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::output::{self, CliError, Ended, Exit};
use crate::identity::clients::{ClientsFile, MAX_RATE, Token};
use crate::tools::ToolSelection;

const FILE_VARIABLE: &str = "PERPLEXITY_HTTP_CLIENTS_FILE";

#[derive(Debug, Subcommand)]
pub enum ClientsCommand {
    /// Add a client and print its new token (shown only this once).
    Add(AddArgs),
    /// Show the clients: name, tools, rate, created (never a token or its hash).
    List {
        /// Print one JSON document instead of one client a line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        file: FileArg,
    },
    /// Remove a client: its token stops working once the server reloads the file.
    Remove {
        /// The client's name (as given to clients add).
        name: String,
        #[command(flatten)]
        file: FileArg,
    },
    /// Give a client a new token (printed once); the old one stops working, the
    /// client's tasks and results stay its own.
    Rotate {
        /// The client's name (as given to clients add).
        name: String,
        #[command(flatten)]
        file: FileArg,
    },
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The client's name: 1-64 letters, digits, '.', '_' or '-' (in audit lines and tasks).
    pub name: String,
    /// The tools it may call, in the PERPLEXITY_TOOLS vocabulary (default: every tool
    /// the server offers).
    #[arg(long, value_name = "LIST")]
    pub tools: Option<String>,
    /// Its own rate limit, beside the server's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_RATE)))]
    pub rate_per_minute: Option<u32>,
    /// Calls it may make at once before the rate applies (default: the rate, at most 10).
    #[arg(long, value_name = "N", requires = "rate_per_minute", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_RATE)))]
    pub rate_burst: Option<u32>,
    /// Its own daily spending cap, in the API's currency (e.g. 5.00), beside the server's.
    #[arg(long, value_name = "AMOUNT", value_parser = amount)]
    pub budget_daily: Option<i64>,
    /// Its own monthly spending cap, in the API's currency.
    #[arg(long, value_name = "AMOUNT", value_parser = amount)]
    pub budget_monthly: Option<i64>,
    #[command(flatten)]
    pub file: FileArg,
}

fn amount(text: &str) -> Result<i64, String> {
    crate::spend::money::parse(text)
}

#[derive(Debug, Args)]
pub struct FileArg {
    /// The clients file (default: PERPLEXITY_HTTP_CLIENTS_FILE).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

impl FileArg {
    fn path(&self) -> Result<PathBuf, CliError> {
        if let Some(path) = &self.file {
            return Ok(path.clone());
        }
        match std::env::var(FILE_VARIABLE) {
            Ok(path) if !path.trim().is_empty() => Ok(PathBuf::from(path.trim())),
            _ => Err(CliError::config(format!(
                "which clients file? Set {FILE_VARIABLE} (as `serve --http` reads it) or pass --file PATH"
            ))),
        }
    }
}

pub fn run(command: ClientsCommand) -> Ended {
    match command {
        ClientsCommand::Add(args) => {
            let (token, _) = edit(&args.file, |file| {
                file.add(
                    &args.name,
                    args.tools.as_deref(),
                    args.rate_per_minute,
                    args.rate_burst,
                    crate::call::Budget {
                        daily: args.budget_daily,
                        monthly: args.budget_monthly,
                    },
                )
            })?;
            let exit = shown_once(&token, &format!("Added client {}", args.name));
            if let Some(tools) = &args.tools {
                warn_of_tools_not_offered(&args.name, tools);
            }
            Ok(exit)
        }
        ClientsCommand::Rotate { name, file: arg } => {
            let (token, _) = edit(&arg, |file| file.rotate(&name))?;
            Ok(shown_once(
                &token,
                &format!("New token for {name}; the old one stops working"),
            ))
        }
        ClientsCommand::Remove { name, file: arg } => {
            let ((), path) = edit(&arg, |file| file.remove(&name))?;
            output::lines(&format!(
                "Removed {name}: its token stops working once the server reloads {} (within a second).",
                path.display()
            ));
            Ok(Exit::Success)
        }
        ClientsCommand::List { json, file: arg } => {
            let path = arg.path()?;
            list(&load(&path)?, json, &path)
        }
    }
}

/// The file as it is, or none yet: only a file that exists and does not load is an
/// error (and nothing is written over it).
fn load(path: &std::path::Path) -> Result<ClientsFile, CliError> {
    ClientsFile::load_or_empty(path).map_err(CliError::config)
}

/// The file at `arg` changed by `change` and saved; with the path, for the message.
fn edit<T>(
    arg: &FileArg,
    change: impl FnOnce(&mut ClientsFile) -> Result<T, String>,
) -> Result<(T, PathBuf), CliError> {
    let path = arg.path()?;
    // Held from the read to the rename, so concurrent edits queue rather than lose one.
    let _held = ClientsFile::lock_for_edit(&path).map_err(CliError::config)?;
    let mut file = load(&path)?;
    let changed = change(&mut file).map_err(CliError::usage)?;
    file.save(&path).map_err(CliError::config)?;
    Ok((changed, path))
}

/// The token alone on stdout (so `TOKEN=$(perplexity-agent clients add bot)` works), and
/// on stderr what it is for. Only after the file is written: a token printed for a
/// failed write would open nothing.
fn shown_once(token: &Token, what: &str) -> Exit {
    output::lines(token.expose());
    let _ = writeln!(
        std::io::stderr(),
        "perplexity-agent: {what}. The token above is shown only this once (the file keeps only its SHA-256): the client sends it as `Authorization: Bearer <token>` to serve --http."
    );
    Exit::Success
}

/// On stderr, the entries of a new client's `--tools` that the server does not offer, as
/// `PERPLEXITY_TOOLS` here says: the running server's own setting cannot be known from
/// here, and `clients add` most often runs where the server is started. A client's list
/// only narrows the server's tools, so the client could never call them; it is added all
/// the same (exit code unchanged), since the server's tools may be about to change.
fn warn_of_tools_not_offered(name: &str, tools: &str) {
    const VARIABLE: &str = "PERPLEXITY_TOOLS";
    // Unset or blank is the server's default, as `serve` reads it.
    let setting = std::env::var(VARIABLE)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "default".to_owned());
    let shown = crate::text::inert_line(setting.trim());
    let server = match ToolSelection::parse(&setting) {
        Ok(server) => server,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "perplexity-agent: warning: {VARIABLE}={shown} here is not a tool list ({}), so the tools of client {name} were not checked against it.",
                crate::text::inert_line(&e)
            );
            return;
        }
    };
    let missing = crate::identity::clients::not_offered(tools, |tool| server.contains(tool));
    if !missing.is_empty() {
        let _ = writeln!(
            std::io::stderr(),
            "perplexity-agent: warning: client {name} names tools a server with {VARIABLE}={shown} does not offer: {}. A client's list only narrows the server's tools, so {name} cannot call them until the server offers them.",
            missing.join(", ")
        );
    }
}

/// A client's own caps as `clients list` says them: only those that are set, in the
/// start-up summary's words (`5.00 a day`), or `the server's` without any, as its rate
/// column says it (every line keeps the same columns, for `cut -f`).
fn budget_said(budget: crate::call::Budget) -> String {
    use crate::spend::money::format;
    match (budget.daily, budget.monthly) {
        (None, None) => "the server's".to_owned(),
        (Some(day), None) => format!("{} a day", format(day)),
        (None, Some(month)) => format!("{} a month", format(month)),
        (Some(day), Some(month)) => format!("{} a day, {} a month", format(day), format(month)),
    }
}

fn list(file: &ClientsFile, json: bool, path: &std::path::Path) -> Ended {
    if json {
        output::document(&json!(
            file.clients
                .iter()
                .map(|c| json!({
                    "name": c.name,
                    "tools": c.tools,
                    "rate_per_minute": c.rate_per_minute,
                    "rate_burst": c.rate_burst,
                    "budget_daily": c.budget.daily.map(crate::spend::money::as_f64),
                    "budget_monthly": c.budget.monthly.map(crate::spend::money::as_f64),
                    "created": c.created,
                }))
                .collect::<Vec<_>>()
        ));
        return Ok(Exit::Success);
    }
    if file.clients.is_empty() {
        output::lines(&format!(
            "No clients in {}. Add one with: perplexity-agent clients add <name> [--tools LIST] [--rate-per-minute N]",
            path.display()
        ));
        return Ok(Exit::Success);
    }
    let mut text = String::new();
    for c in &file.clients {
        let tools = c.tools.as_deref().unwrap_or("all offered");
        let rate = match c.rate() {
            Some((per_minute, burst)) => format!("{per_minute}/min, burst {burst}"),
            None => "the server's".to_owned(),
        };
        let budget = budget_said(c.budget);
        text.push_str(&format!(
            "{}\ttools: {tools}\trate: {rate}\tbudget: {budget}\tcreated: {}\n",
            c.name, c.created
        ));
    }
    output::lines(&text);
    Ok(Exit::Success)
}
