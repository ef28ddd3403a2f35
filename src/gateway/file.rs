//! Downstream servers from the TOML config file (`[[gateway.servers]]`), beside those
//! `perplexity-agent gateway add` keeps in the store. The file holds no secrets: secret
//! values are `@env:VAR` references, resolved from the environment at start and kept in
//! memory only. The same policy applies as to `gateway add`.
//!
//! ```toml
//! [[gateway.servers]]
//! name = "db"
//! command = "my-db-mcp"
//! args = ["--read-only"]
//! env = { LOG_LEVEL = "info" }
//! secret_env = { DB_PASSWORD = "@env:DB_PASSWORD" }
//!
//! [[gateway.servers]]
//! name = "tickets"
//! url = "https://tickets.example.com/mcp"
//! headers = { Authorization = "@env:TICKETS_AUTH" }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde::Deserialize;

use super::GatewayConfig;
use super::definition::{self, NewServer, NewTransport, Secrets, ServerDef};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    gateway: Option<Section>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    #[serde(default)]
    servers: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    #[serde(default = "yes")]
    enabled: bool,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    secret_env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    allow_insecure_http: bool,
    #[serde(default)]
    allow_private: bool,
    ca_bundle: Option<PathBuf>,
    #[serde(default)]
    allow_tools: Vec<String>,
    #[serde(default)]
    deny_tools: Vec<String>,
}

fn yes() -> bool {
    true
}

/// The file's servers, policy-checked; `Ok(vec![])` when the file does not exist. Any
/// problem names the file and the server, and stops the start (a half-applied
/// configuration would be a surprise).
pub fn load(
    path: &Path,
    config: &GatewayConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServerDef>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: cannot be read ({})", path.display(), e.kind())),
    };
    let file: File =
        toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message()))?;
    let mut defs: Vec<ServerDef> = Vec::new();
    for entry in file.gateway.map(|g| g.servers).unwrap_or_default() {
        let name = entry.name.clone();
        let fail = |e: String| format!("{}: server {name}: {e}", path.display());
        if defs.iter().any(|d| d.slug == name) {
            return Err(fail("defined twice".to_owned()));
        }
        let enabled = entry.enabled;
        let new = to_new(entry, env).map_err(fail)?;
        let mut def = definition::prepare(new, config, Secrets::InMemory).map_err(fail)?;
        def.enabled = enabled;
        defs.push(def);
    }
    Ok(defs)
}

/// Secret values, each of which must come from the environment: plaintext secrets have
/// no place in a config file.
fn secrets(
    values: &BTreeMap<String, String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, SecretString)>, String> {
    values
        .iter()
        .map(|(name, value)| {
            let var = value.strip_prefix("@env:").ok_or_else(|| {
                format!(
                    "the value of {name} must be @env:VARIABLE (secrets are not written in the config file)"
                )
            })?;
            let secret = env(var)
                .map(SecretString::from)
                .ok_or_else(|| format!("{var} (named by @env:{var}) is not set"))?;
            Ok((name.clone(), secret))
        })
        .collect()
}

fn to_new(entry: Entry, env: &dyn Fn(&str) -> Option<String>) -> Result<NewServer, String> {
    let transport = match (entry.command, entry.url) {
        (Some(command), None) => {
            if !entry.headers.is_empty()
                || entry.allow_insecure_http
                || entry.allow_private
                || entry.ca_bundle.is_some()
            {
                return Err("headers, allow_insecure_http, allow_private and ca_bundle are for HTTP servers (url)".to_owned());
            }
            NewTransport::Stdio {
                command,
                args: entry.args,
                env: entry.env.into_iter().collect(),
                secret_env: secrets(&entry.secret_env, env)?,
                cwd: entry.cwd,
            }
        }
        (None, Some(url)) => {
            if !entry.args.is_empty()
                || !entry.env.is_empty()
                || !entry.secret_env.is_empty()
                || entry.cwd.is_some()
            {
                return Err(
                    "args, env, secret_env and cwd are for stdio servers (command)".to_owned(),
                );
            }
            NewTransport::Http {
                url,
                headers: secrets(&entry.headers, env)?,
                allow_insecure_http: entry.allow_insecure_http,
                allow_private: entry.allow_private,
                ca_bundle: entry.ca_bundle,
            }
        }
        _ => return Err("give command (a stdio server) or url (an HTTP server)".to_owned()),
    };
    Ok(NewServer {
        slug: entry.name,
        transport,
        allow_tools: entry.allow_tools,
        deny_tools: entry.deny_tools,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> GatewayConfig {
        GatewayConfig {
            enabled: true,
            allowed_commands: vec!["my-db-mcp".into()],
            allowed_roots: vec![],
            path: "/usr/bin".into(),
            max_servers: 5,
            max_stdio: 20,
            concurrency: 4,
            timeout: std::time::Duration::from_secs(30),
            idle: std::time::Duration::from_secs(900),
            max_description: 1024,
            max_tools: 200,
            max_list_bytes: 1 << 20,
            max_result_bytes: 65_536,
            data_dir: None,
            functions: vec![],
        }
    }

    fn write(text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "pa-gw-file-{}-{}.toml",
            std::process::id(),
            crate::random::secure_hex::<4>()
        ));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn servers_from_the_file_obey_the_policy_and_hold_no_secrets() {
        let env = |k: &str| (k == "DB_PASSWORD").then(|| "hunter2".to_owned());
        let path = write(
            r#"
[[gateway.servers]]
name = "db"
command = "my-db-mcp"
args = ["--read-only"]
secret_env = { DB_PASSWORD = "@env:DB_PASSWORD" }

[[gateway.servers]]
name = "tickets"
url = "https://tickets.example.com/mcp"
enabled = false
"#,
        );
        let defs = load(&path, &config(), &env).unwrap();
        assert_eq!(defs.len(), 2);
        assert!(!defs[1].enabled);
        let err = |text: &str| load(&write(text), &config(), &env).unwrap_err();
        assert!(
            err("[[gateway.servers]]\nname = \"x\"\ncommand = \"/bin/sh\"")
                .contains("server x: '/bin/sh' is a path")
        );
        assert!(err("[[gateway.servers]]\nname = \"x\"\nurl = \"https://a.example\"\nheaders = { Authorization = \"Bearer plain\" }").contains("must be @env:VARIABLE"));
        assert!(err("[[gateway.servers]]\nname = \"x\"\ncommand = \"my-db-mcp\"\nsecret_env = { T = \"@env:MISSING\" }").contains("MISSING (named by @env:MISSING) is not set"));
        assert!(
            err("[[gateway.servers]]\nname = \"x\"\ncommand = \"my-db-mcp\"\nshell = true")
                .contains("unknown field")
        );
        assert!(err("[[gateway.servers]]\nname = \"x\"\ncommand = \"my-db-mcp\"\n[[gateway.servers]]\nname = \"x\"\ncommand = \"my-db-mcp\"").contains("defined twice"));
        assert_eq!(
            load(Path::new("/nonexistent/config.toml"), &config(), &env).unwrap(),
            vec![]
        );
        let _ = std::fs::remove_file(path);
    }
}
