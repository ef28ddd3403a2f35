//! `perplexity-agent gateway add|remove|list|enable|disable|test`: the operator's only
//! way to define downstream MCP servers (an MCP caller never can). Definitions pass the
//! policy and have their secrets sealed before anything is written; `list` and `test`
//! show secrets as `***`.
//!
//! Touches: the store; `test` starts (or connects to) the named server.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use secrecy::SecretString;
use serde_json::json;

use super::output::{self, CliError, Ended, Exit};
use crate::config::Config;
use crate::gateway::definition::{self, NewServer, NewTransport, ServerDef, TransportDef};
use crate::gateway::{Gateway, GatewayError, status_json};
use crate::state::local::{Saved, Store};

#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Define a downstream server (stdio with --command, or HTTP with --url).
    Add(Box<AddArgs>),
    /// Forget a downstream server.
    Remove {
        /// The server's name (as given to gateway add).
        slug: String,
    },
    /// Show the defined servers (secrets as ***).
    List {
        /// Print one JSON document instead of one server a line.
        #[arg(long)]
        json: bool,
    },
    /// Offer this server's tools again.
    Enable {
        /// The server's name (as given to gateway add).
        slug: String,
    },
    /// Stop offering this server's tools (the definition is kept).
    Disable {
        /// The server's name (as given to gateway add).
        slug: String,
    },
    /// Connect now: status, latency, the tools offered and what the policy dropped.
    Test {
        /// The server's name (as given to gateway add, or in the config file).
        slug: String,
        /// Print one JSON document (with a stable error_kind) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The server's name: 1-32 lowercase letters, digits and '-'; its tools become mcp__<slug>__<tool>.
    pub slug: String,
    /// stdio: a bare program name from PERPLEXITY_GATEWAY_ALLOWED_COMMANDS.
    #[arg(long, conflicts_with = "url")]
    pub command: Option<String>,
    /// stdio: one argument (repeat for more); passed as a list, never through a shell.
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// stdio: NAME=VALUE for the child's environment (stored in the clear).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// stdio: NAME=VALUE stored encrypted (needs PERPLEXITY_SECRET_KEY). VALUE may be
    /// `@env:VAR` to read it from this command's environment instead of the command line.
    #[arg(long = "secret-env", value_name = "NAME=VALUE")]
    pub secret_env: Vec<String>,
    /// stdio: the working directory (inside PERPLEXITY_GATEWAY_ALLOWED_ROOTS).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// HTTP: the Streamable HTTP endpoint (https unless --allow-insecure-http).
    #[arg(long)]
    pub url: Option<String>,
    /// HTTP: "Name: value", always stored encrypted (needs PERPLEXITY_SECRET_KEY); the
    /// value may be `@env:VAR`.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// HTTP: allow plain http for this server.
    #[arg(long, requires = "url")]
    pub allow_insecure_http: bool,
    /// HTTP: allow the host to resolve to private addresses (an intranet server).
    #[arg(long, requires = "url")]
    pub allow_private: bool,
    /// HTTP: extra trusted CA certificates (PEM) for this server.
    #[arg(long, requires = "url")]
    pub ca_bundle: Option<PathBuf>,
    /// Offer only these tools (repeat).
    #[arg(long = "allow-tool", value_name = "TOOL")]
    pub allow_tools: Vec<String>,
    /// Never offer these tools (repeat).
    #[arg(long = "deny-tool", value_name = "TOOL")]
    pub deny_tools: Vec<String>,
    /// Overwrite the server of this name if one is defined already.
    #[arg(long)]
    pub replace: bool,
}

pub async fn run(command: GatewayCommand, config: &Config) -> Ended {
    let Some(store_config) = config.store.clone() else {
        return Err(CliError::config(
            crate::state::local::StoreError::NotConfigured.to_string(),
        ));
    };
    let store = Store::open(store_config).map_err(|e| CliError::config(e.to_string()))?;
    match command {
        GatewayCommand::Add(args) => add(*args, config, &store),
        GatewayCommand::Remove { slug } => match store.remove_gateway_server(&slug) {
            Ok(true) => done(&format!("Removed {slug}.")),
            Ok(false) => Err(CliError::usage(format!("No server named {slug}."))),
            Err(e) => Err(CliError::config(e.to_string())),
        },
        GatewayCommand::Enable { slug } => set_enabled(&store, &slug, true, config),
        GatewayCommand::Disable { slug } => set_enabled(&store, &slug, false, config),
        GatewayCommand::List { json } => list(&store, json, config),
        GatewayCommand::Test { slug, json } => test(&store, &slug, json, config).await,
    }
}

fn done(message: &str) -> Ended {
    output::lines(message);
    Ok(Exit::Success)
}

/// `NAME=VALUE` (or `NAME: VALUE` for headers); `@env:VAR` reads VAR.
fn pair(raw: &str, separator: char, what: &str) -> Result<(String, String), String> {
    let (name, value) = raw
        .split_once(separator)
        .ok_or_else(|| format!("{what} must be written NAME{separator}VALUE"))?;
    let value = value.trim_start();
    let value = match value.strip_prefix("@env:") {
        Some(var) => {
            std::env::var(var).map_err(|_| format!("{var} (named by @env:{var}) is not set"))?
        }
        None => value.to_owned(),
    };
    Ok((name.trim().to_owned(), value))
}

fn add(args: AddArgs, config: &Config, store: &Store) -> Ended {
    // Checked first, before any @env: secret is read: a name defined already is kept
    // unless the operator says to overwrite it (a typo must not clobber a definition).
    // A second writer between this check and the save would still be overwritten.
    let defined = store
        .gateway_server(&args.slug)
        .map_err(|e| CliError::config(e.to_string()))?;
    if defined.is_some() && !args.replace {
        return Err(CliError::usage(format!(
            "{} is defined already; pass --replace to overwrite it (perplexity-agent gateway list shows it).",
            args.slug
        )));
    }
    let transport = match (args.command, args.url) {
        (Some(command), None) => {
            let env: Result<Vec<_>, _> = args.env.iter().map(|e| pair(e, '=', "--env")).collect();
            let secret_env: Result<Vec<_>, _> = args
                .secret_env
                .iter()
                .map(|e| pair(e, '=', "--secret-env").map(|(n, v)| (n, SecretString::from(v))))
                .collect();
            match (env, secret_env) {
                (Ok(env), Ok(secret_env)) => NewTransport::Stdio {
                    command,
                    args: args.args,
                    env,
                    secret_env,
                    cwd: args.cwd,
                },
                (Err(e), _) | (_, Err(e)) => return Err(CliError::usage(&e)),
            }
        }
        (None, Some(url)) => {
            if !args.args.is_empty()
                || !args.env.is_empty()
                || !args.secret_env.is_empty()
                || args.cwd.is_some()
            {
                return Err(CliError::usage(
                    "--arg, --env, --secret-env and --cwd are for stdio servers (--command).",
                ));
            }
            let headers: Result<Vec<_>, _> = args
                .headers
                .iter()
                .map(|h| pair(h, ':', "--header").map(|(n, v)| (n, SecretString::from(v))))
                .collect();
            match headers {
                Ok(headers) => NewTransport::Http {
                    url,
                    headers,
                    allow_insecure_http: args.allow_insecure_http,
                    allow_private: args.allow_private,
                    ca_bundle: args.ca_bundle,
                },
                Err(e) => return Err(CliError::usage(&e)),
            }
        }
        _ => {
            return Err(CliError::usage(
                "Give --command (a stdio server) or --url (an HTTP server).",
            ));
        }
    };
    let command = match &transport {
        NewTransport::Stdio { command, .. } => Some(command.clone()),
        NewTransport::Http { .. } => None,
    };
    let new = NewServer {
        slug: args.slug.clone(),
        transport,
        allow_tools: args.allow_tools,
        deny_tools: args.deny_tools,
    };
    let sealing = definition::Secrets::Seal(config.secret_key.as_ref());
    let def = definition::prepare(new, &config.gateway, sealing)
        .map_err(|e| CliError::usage(format!("{} refused: {e}.", args.slug)))?;
    if let Some(command) = command {
        // The lookup a launch does: a command that could not start now is refused now,
        // not at the first `gateway test`.
        definition::find_program(&command, &config.gateway.path)
            .map_err(|e| CliError::usage(format!("{} refused: {e}.", args.slug)))?;
        let stdio = stdio_count(store, &args.slug).map_err(|e| CliError::config(&e))?;
        if stdio >= config.gateway.max_stdio {
            return Err(CliError::usage(format!(
                "{} refused: {} stdio servers are defined already (PERPLEXITY_GATEWAY_MAX_STDIO).",
                args.slug, config.gateway.max_stdio
            )));
        }
    }
    let verb = match save(store, &def, config)? {
        Saved::Replaced => "Replaced",
        _ => "Added",
    };
    done(&format!(
        "{verb} {}. Check it with: perplexity-agent gateway test {}",
        def.slug, def.slug
    ))
}

/// Writes the definition; a failure is reported here and becomes the exit code.
fn save(store: &Store, def: &ServerDef, config: &Config) -> Result<Saved, CliError> {
    let text = serde_json::to_string(def)
        .map_err(|_| CliError::failed("the definition could not be written"))?;
    match store.put_gateway_server(&def.slug, &text, config.gateway.max_servers) {
        Ok(Saved::TooMany) => Err(CliError::usage(format!(
            "{} refused: {} servers are defined already (PERPLEXITY_GATEWAY_MAX_SERVERS).",
            def.slug, config.gateway.max_servers
        ))),
        Ok(saved) => Ok(saved),
        Err(e) => Err(CliError::config(e.to_string())),
    }
}

/// Stdio servers defined, not counting `except` (which is being replaced).
fn stdio_count(store: &Store, except: &str) -> Result<usize, String> {
    Ok(crate::app::stored_servers(store)?
        .iter()
        .filter(|d| d.slug != except && matches!(d.transport, TransportDef::Stdio { .. }))
        .count())
}

fn set_enabled(store: &Store, slug: &str, enabled: bool, config: &Config) -> Ended {
    let text = store
        .gateway_server(slug)
        .map_err(|e| CliError::config(e.to_string()))?
        .ok_or_else(|| CliError::usage(format!("No server named {slug}.")))?;
    let Ok(mut def) = serde_json::from_str::<ServerDef>(&text) else {
        return Err(CliError::config(format!(
            "the stored definition of {slug} is damaged"
        )));
    };
    def.enabled = enabled;
    match save(store, &def, config) {
        Ok(_) if enabled => done(&format!("Enabled {slug}.")),
        Ok(_) => done(&format!("Disabled {slug}.")),
        Err(error) => Err(error),
    }
}

fn list(store: &Store, json: bool, config: &Config) -> Ended {
    let defs = crate::app::gateway_servers(config, store).map_err(|e| CliError::config(&e))?;
    let from_file = |slug: &str| config.file_servers.iter().any(|d| d.slug == slug);
    if json {
        output::document(&json!(
            defs.iter()
                .map(|d| {
                    let mut shown = definition::masked(d);
                    shown["source"] = json!(if from_file(&d.slug) {
                        "config file"
                    } else {
                        "store"
                    });
                    shown
                })
                .collect::<Vec<_>>()
        ));
        return Ok(Exit::Success);
    }
    if defs.is_empty() {
        return done(
            "No downstream servers. Add one with: perplexity-agent gateway add <name> --command <program> | --url <https://…>",
        );
    }
    let mut text = String::new();
    for def in &defs {
        let state = match (def.enabled, from_file(&def.slug)) {
            (true, false) => "enabled",
            (false, false) => "disabled",
            (true, true) => "enabled, config file",
            (false, true) => "disabled, config file",
        };
        let what = match &def.transport {
            TransportDef::Stdio {
                command, args, env, ..
            } => {
                let vars: Vec<String> = env
                    .iter()
                    .map(|f| shown_field(&f.name, &f.value, '='))
                    .collect();
                format!(
                    "stdio: {command} {}{}",
                    args.join(" "),
                    if vars.is_empty() {
                        String::new()
                    } else {
                        format!(" [env {}]", vars.join(", "))
                    }
                )
            }
            TransportDef::Http { url, headers, .. } => {
                let hs: Vec<String> = headers
                    .iter()
                    .map(|f| shown_field(&f.name, &f.value, ':'))
                    .collect();
                format!(
                    "http: {url}{}",
                    if hs.is_empty() {
                        String::new()
                    } else {
                        format!(" [headers {}]", hs.join(", "))
                    }
                )
            }
        };
        text.push_str(&format!("{} ({state}) {what}\n", def.slug));
    }
    done(&text)
}

fn shown_field(name: &str, value: &definition::Stored, sep: char) -> String {
    match value {
        definition::Stored::Plain(v) => format!("{name}{sep}{v}"),
        definition::Stored::Sealed(_) | definition::Stored::Memory(_) => format!("{name}{sep}***"),
    }
}

async fn test(store: &Store, slug: &str, json: bool, config: &Config) -> Ended {
    let defs = crate::app::gateway_servers(config, store).map_err(|e| CliError::config(&e))?;
    let Some(mut def) = defs.into_iter().find(|d| d.slug == slug) else {
        return Err(CliError::usage(format!("No server named {slug}.")));
    };
    def.enabled = true;
    let gateway = Gateway::new(
        config.gateway.clone(),
        config.secret_key.clone(),
        vec![def.clone()],
    );
    let status = gateway.test(slug).await.unwrap_or_default();
    gateway.shutdown().await;
    if json {
        output::document(&status_json(slug, &status));
    } else {
        let mut text = match &status.last_error {
            None => format!(
                "{slug}: OK ({} ms), {} tool(s) offered",
                status.latency_ms.unwrap_or_default(),
                status.exposed.len()
            ),
            Some(e) => match fix_for(&def, config, e.root()) {
                Some(fix) => format!("{slug}: FAILED: {fix}"),
                None => format!("{slug}: FAILED: {e}"),
            },
        };
        for tool in &status.exposed {
            text.push_str(&format!("\n  {}", tool.name));
        }
        for r in &status.rejected {
            text.push_str(&format!("\n  dropped {}: {}", r.name, r.reason));
        }
        output::lines(&text);
    }
    if status.last_error.is_some() {
        Ok(Exit::Failed)
    } else {
        Ok(Exit::Success)
    }
}

/// For failures whose fix is a command: that command, for this server, in one line (the
/// error's own text says it in general terms, for tool results and logs).
fn fix_for(def: &ServerDef, config: &Config, e: &GatewayError) -> Option<String> {
    let GatewayError::Unauthorized {
        status,
        sent_credentials,
    } = e
    else {
        return None;
    };
    let TransportDef::Http {
        url,
        allow_insecure_http,
        allow_private,
        ca_bundle,
        ..
    } = &def.transport
    else {
        return None;
    };
    let slug = &def.slug;
    let what = if *sent_credentials {
        "it refused the credential in this server's headers"
    } else {
        "it wants a credential"
    };
    if config.file_servers.iter().any(|d| d.slug == def.slug) {
        return Some(format!(
            "the server answered {status} — {what}; in the config file, give the server {slug} headers = {{ Authorization = \"@env:VAR\" }} (VAR holding e.g. \"Bearer <token>\")"
        ));
    }
    // `--replace` replaces the whole definition: restate what it had. Header values are
    // sealed and are not restated (nor shown): a new one is asked for.
    let mut line = format!(
        "perplexity-agent gateway add {slug} --replace --url {}",
        shell_word(url)
    );
    for (flag, on) in [
        ("--allow-insecure-http", *allow_insecure_http),
        ("--allow-private", *allow_private),
    ] {
        if on {
            line.push_str(&format!(" {flag}"));
        }
    }
    if let Some(pem) = ca_bundle {
        line.push_str(&format!(
            " --ca-bundle {}",
            shell_word(&pem.display().to_string())
        ));
    }
    for (flag, tools) in [
        ("--allow-tool", &def.allow_tools),
        ("--deny-tool", &def.deny_tools),
    ] {
        for tool in tools {
            line.push_str(&format!(" {flag} {}", shell_word(tool)));
        }
    }
    line.push_str(" --header \"Authorization: @env:VAR\"");
    Some(format!(
        "the server answered {status} — {what}; run {line} (VAR holding e.g. \"Bearer <token>\"; stored encrypted)"
    ))
}

/// A word as a POSIX shell reads it back: bare when it is plainly safe, else quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}
