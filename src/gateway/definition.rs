//! A downstream server as the operator defines it, and as it is stored: plain fields in
//! the clear, secret fields (header values; env values marked secret) only sealed.
//! [`prepare`] turns what the operator typed into a stored definition (policy checked,
//! secrets sealed); [`resolve`] turns a stored one back into what a launch needs
//! (policy checked again, secrets opened).

use std::path::PathBuf;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use url::Url;

use super::GatewayConfig;
use super::error::GatewayError;
use super::policy;
use super::secrets::{self, SecretError, SecretKey};

/// A stored definition (the JSON kept in the store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerDef {
    pub slug: String,
    pub enabled: bool,
    pub transport: TransportDef,
    /// Only these downstream tools are exposed (all when empty).
    #[serde(default)]
    pub allow_tools: Vec<String>,
    /// These downstream tools are never exposed.
    #[serde(default)]
    pub deny_tools: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum TransportDef {
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: Vec<Field>,
        #[serde(default)]
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        /// Header values are always secret.
        #[serde(default)]
        headers: Vec<Field>,
        #[serde(default)]
        allow_insecure_http: bool,
        /// Let the URL's host resolve to private addresses (an intranet server).
        #[serde(default)]
        allow_private: bool,
        /// Extra trusted root certificates (PEM) for this server only.
        #[serde(default)]
        ca_bundle: Option<PathBuf>,
    },
}

/// A named value: in the clear, or sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    pub name: String,
    #[serde(flatten)]
    pub value: Stored,
}

impl Field {
    fn new(name: &str, value: Stored) -> Field {
        Field {
            name: name.to_owned(),
            value,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stored {
    Plain(String),
    Sealed(String),
    /// A secret from the environment, for a config-file server: held in memory only,
    /// shown as `***`, never written.
    Memory(String),
}

/// What the operator typed (from the CLI or the config file): secrets in the clear, for
/// the moment it takes to seal them.
pub struct NewServer {
    pub slug: String,
    pub transport: NewTransport,
    pub allow_tools: Vec<String>,
    pub deny_tools: Vec<String>,
}

pub enum NewTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        secret_env: Vec<(String, SecretString)>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: Vec<(String, SecretString)>,
        allow_insecure_http: bool,
        allow_private: bool,
        ca_bundle: Option<PathBuf>,
    },
}

fn header_field(name: &str) -> String {
    format!("header:{}", name.to_ascii_lowercase())
}

fn env_field(name: &str) -> String {
    format!("env:{name}")
}

/// What to do with a new definition's secrets.
#[derive(Clone, Copy)]
pub enum Secrets<'a> {
    /// Seal them, for the store (no key: an error, nothing is written).
    Seal(Option<&'a SecretKey>),
    /// Keep them in memory only: definitions from the config file, whose secrets come
    /// from the environment (`@env:VAR`) and are never written anywhere.
    InMemory,
}

/// Checks a new definition against the policy and seals its secrets. A secret without
/// a key fails here, before anything is written.
pub fn prepare(
    new: NewServer,
    config: &GatewayConfig,
    secrets: Secrets<'_>,
) -> Result<ServerDef, String> {
    use secrecy::ExposeSecret;
    policy::check_slug(&new.slug)?;
    for name in new.allow_tools.iter().chain(&new.deny_tools) {
        if name.is_empty() || name.len() > 128 {
            return Err(format!("'{name}' is not a tool name"));
        }
    }
    let slug = new.slug.clone();
    let seal = |field: String, value: &SecretString| -> Result<Stored, String> {
        match secrets {
            Secrets::InMemory => Ok(Stored::Memory(value.expose_secret().to_owned())),
            Secrets::Seal(key) => {
                let key = key.ok_or_else(|| SecretError::MissingKey.to_string())?;
                Ok(Stored::Sealed(secrets::seal(key, value, &slug, &field)))
            }
        }
    };
    let transport = match new.transport {
        NewTransport::Stdio {
            command,
            args,
            env,
            secret_env,
            cwd,
        } => {
            policy::check_command(&command, &config.allowed_commands)?;
            policy::check_args(&command, &args)?;
            let mut fields = Vec::new();
            for (name, value) in &env {
                policy::check_env(name, value.chars().count())?;
                fields.push(Field::new(name, Stored::Plain(value.clone())));
            }
            for (name, value) in &secret_env {
                policy::check_env(name, value.expose_secret().chars().count())?;
                fields.push(Field::new(name, seal(env_field(name), value)?));
            }
            check_unique(fields.iter().map(|f| f.name.as_str()), "variable")?;
            let cwd = cwd
                .map(|dir| policy::resolve_cwd(&dir, &config.allowed_roots))
                .transpose()?;
            TransportDef::Stdio {
                command,
                args,
                env: fields,
                cwd,
            }
        }
        NewTransport::Http {
            url,
            headers,
            allow_insecure_http,
            allow_private,
            ca_bundle,
        } => {
            let parsed = policy::check_url(&url, allow_insecure_http)?;
            if !allow_private {
                policy::check_public_host(&parsed)?;
            }
            let mut fields = Vec::new();
            for (name, value) in &headers {
                policy::check_header(name, value.expose_secret().chars().count())?;
                fields.push(Field::new(name, seal(header_field(name), value)?));
            }
            check_unique(fields.iter().map(|f| f.name.as_str()), "header")?;
            if let Some(path) = &ca_bundle {
                std::fs::metadata(path).map_err(|e| {
                    format!(
                        "the CA bundle {} cannot be read ({})",
                        path.display(),
                        e.kind()
                    )
                })?;
            }
            TransportDef::Http {
                url,
                headers: fields,
                allow_insecure_http,
                allow_private,
                ca_bundle,
            }
        }
    };
    Ok(ServerDef {
        slug: new.slug,
        enabled: true,
        transport,
        allow_tools: new.allow_tools,
        deny_tools: new.deny_tools,
    })
}

fn check_unique<'a>(names: impl Iterator<Item = &'a str>, what: &str) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if !seen.insert(name.to_ascii_lowercase()) {
            return Err(format!("the {what} {name} is given twice"));
        }
    }
    Ok(())
}

/// A definition ready to launch or connect: policy re-checked, secrets opened.
pub struct Resolved {
    pub slug: String,
    pub transport: ResolvedTransport,
}

pub enum ResolvedTransport {
    Stdio {
        program: PathBuf,
        command: String,
        args: Vec<String>,
        env: Vec<(String, SecretString)>,
        cwd: PathBuf,
        /// The gateway's fixed PATH, which the child gets too.
        path: String,
    },
    Http {
        url: Url,
        headers: Vec<(String, SecretString)>,
        allow_private: bool,
        ca_bundle: Option<PathBuf>,
    },
}

pub fn resolve(
    def: &ServerDef,
    config: &GatewayConfig,
    key: Option<&SecretKey>,
) -> Result<Resolved, GatewayError> {
    use GatewayError::Policy;
    policy::check_slug(&def.slug).map_err(Policy)?;
    let open = |field: String, value: &Stored| -> Result<SecretString, GatewayError> {
        match value {
            Stored::Plain(v) | Stored::Memory(v) => Ok(SecretString::from(v.clone())),
            Stored::Sealed(sealed) => {
                let key = key.ok_or(GatewayError::Secret(SecretError::MissingKey))?;
                secrets::open(key, sealed, &def.slug, &field).map_err(GatewayError::Secret)
            }
        }
    };
    let transport = match &def.transport {
        TransportDef::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            policy::check_command(command, &config.allowed_commands).map_err(Policy)?;
            policy::check_args(command, args).map_err(Policy)?;
            let program = find_program(command, &config.path)?;
            let mut opened = Vec::new();
            for field in env {
                policy::check_env(&field.name, 0).map_err(Policy)?;
                opened.push((
                    field.name.clone(),
                    open(env_field(&field.name), &field.value)?,
                ));
            }
            let cwd = match cwd {
                Some(dir) => policy::resolve_cwd(dir, &config.allowed_roots).map_err(Policy)?,
                None => config.server_dir(&def.slug).map_err(Policy)?,
            };
            ResolvedTransport::Stdio {
                program,
                command: command.clone(),
                args: args.clone(),
                env: opened,
                cwd,
                path: config.path.clone(),
            }
        }
        TransportDef::Http {
            url,
            headers,
            allow_insecure_http,
            allow_private,
            ca_bundle,
        } => {
            let url = policy::check_url(url, *allow_insecure_http).map_err(Policy)?;
            let mut opened = Vec::new();
            for field in headers {
                policy::check_header(&field.name, 0).map_err(Policy)?;
                opened.push((
                    field.name.clone(),
                    open(header_field(&field.name), &field.value)?,
                ));
            }
            ResolvedTransport::Http {
                url,
                headers: opened,
                allow_private: *allow_private,
                ca_bundle: ca_bundle.clone(),
            }
        }
    };
    Ok(Resolved {
        slug: def.slug.clone(),
        transport,
    })
}

/// Looks the bare name up on the operator's fixed PATH (never the caller's): the one
/// rule, used at launch and by `gateway add` (which refuses what could not launch).
pub fn find_program(command: &str, path: &str) -> Result<PathBuf, GatewayError> {
    for dir in path.split(':').filter(|d| d.starts_with('/')) {
        let candidate = std::path::Path::new(dir).join(command);
        if crate::files::is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(GatewayError::NotOnPath {
        command: command.to_owned(),
        path: path.to_owned(),
    })
}

/// The definition as `gateway list` shows it: secrets as `***`.
pub fn masked(def: &ServerDef) -> serde_json::Value {
    let mut value = serde_json::to_value(def).unwrap_or_default();
    let fields = match def.transport {
        TransportDef::Stdio { .. } => "env",
        TransportDef::Http { .. } => "headers",
    };
    if let Some(list) = value["transport"][fields].as_array_mut() {
        for field in list {
            for secret in ["sealed", "memory"] {
                if field.get(secret).is_some() {
                    field[secret] = serde_json::json!("***");
                }
            }
        }
    }
    value
}
