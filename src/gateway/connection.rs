//! One live connection to a downstream server, through rmcp's client (both MCP eras:
//! `server/discover` first, the legacy handshake as the fallback).
//!
//! - stdio: the resolved program (never a shell), arguments as a list, a cleared
//!   environment (the declared variables plus PATH — the gateway's fixed one — HOME and
//!   LANG), the checked working directory, its own process group (killed with the
//!   connection); stderr kept in a small ring buffer for status, never copied to our
//!   stdout.
//! - HTTP: a reqwest client of its own per server (its headers, cookies and pool are
//!   never shared, so one server's `Authorization` cannot reach another), no redirects,
//!   no ambient proxy, certificates verified (plus the server's own CA bundle), and the
//!   host's addresses checked against the fetcher's policy unless the operator allowed
//!   private addresses for this server.
//!
//! Touches: child processes and the network (downstream servers only).

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use secrecy::ExposeSecret;
use tokio::io::AsyncReadExt;

use super::definition::{Resolved, ResolvedTransport};
use crate::fetch::address::{AllowPrivate, check_addr};

/// Bytes of a child's stderr kept for status.
const STDERR_KEPT: usize = 8 * 1024;
/// Largest JSON answer or SSE event accepted from an HTTP downstream.
const MAX_HTTP_MESSAGE: usize = 4 * 1024 * 1024;

pub type Client = RunningService<RoleClient, ClientConfig>;

pub struct Live {
    pub client: Client,
    pub tools: Vec<Tool>,
    /// The tail of a stdio child's stderr.
    pub stderr: Arc<Mutex<VecDeque<u8>>>,
}

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("perplexity-agent-gateway", env!("CARGO_PKG_VERSION")),
    )
}

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// Connects (launching the child for stdio) and lists the tools, within `timeout`.
pub async fn connect(resolved: &Resolved, timeout: Duration) -> Result<Live, String> {
    tokio::time::timeout(timeout, connect_inner(resolved))
        .await
        .map_err(|_| format!("no answer within {}s", timeout.as_secs()))?
}

async fn connect_inner(resolved: &Resolved) -> Result<Live, String> {
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    let client = match &resolved.transport {
        ResolvedTransport::Stdio {
            program,
            args,
            env,
            cwd,
            path,
            ..
        } => {
            let mut command = tokio::process::Command::new(program);
            command.args(args).current_dir(cwd).env_clear();
            command.env("PATH", path);
            for name in ["HOME", "LANG"] {
                if let Some(value) = std::env::var_os(name) {
                    command.env(name, value);
                }
            }
            for (name, value) in env {
                command.env(name, value.expose_secret());
            }
            let (transport, child_stderr) = TokioChildProcess::builder(command)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start {} ({})", program.display(), e.kind()))?;
            if let Some(mut pipe) = child_stderr {
                let sink = stderr.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = pipe.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        if let Ok(mut kept) = sink.lock() {
                            kept.extend(&buf[..n]);
                            let excess = kept.len().saturating_sub(STDERR_KEPT);
                            kept.drain(..excess);
                        }
                    }
                });
            }
            client_info()
                .serve_with_lifecycle(transport, lifecycle())
                .await
                .map_err(|e| format!("the MCP handshake failed: {}", short(&e.to_string())))?
        }
        ResolvedTransport::Http {
            url,
            headers,
            allow_private,
            ca_bundle,
        } => {
            let pinned = check_host(url, *allow_private).await?;
            let http = http_client(headers, ca_bundle.as_deref(), pinned)?;
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .max_json_response_size(MAX_HTTP_MESSAGE)
                .max_sse_event_size(MAX_HTTP_MESSAGE)
                .max_error_response_size(64 * 1024);
            let transport = StreamableHttpClientTransport::with_client(http, config);
            client_info()
                .serve_with_lifecycle(transport, lifecycle())
                .await
                .map_err(|e| format!("the MCP handshake failed: {}", short(&e.to_string())))?
        }
    };
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("listing its tools failed: {}", short(&e.to_string())))?;
    Ok(Live {
        client,
        tools,
        stderr,
    })
}

/// Every address of the host must pass the fetcher's policy, unless this server may use
/// private ones (an intranet server is legitimate, but only when the operator says so).
/// Returns the host and the addresses checked, for the client to be pinned to (so a
/// second DNS answer cannot swap in a private address).
async fn check_host(
    url: &url::Url,
    allow_private: bool,
) -> Result<Option<(String, Vec<std::net::SocketAddr>)>, String> {
    if allow_private {
        return Ok(None);
    }
    let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<_> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("cannot resolve {host} ({})", e.kind()))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{host} has no address"));
    }
    for addr in &addrs {
        check_addr(addr.ip(), &AllowPrivate::None).map_err(|b| {
            format!("{host} resolves to a non-public address ({b}); pass --allow-private for this server if that is intended")
        })?;
    }
    Ok(Some((host.to_owned(), addrs)))
}

/// A client for this server alone: its headers as defaults, no redirects (rmcp must not
/// carry them to another origin), no ambient proxy, verified TLS.
fn http_client(
    headers: &[(String, secrecy::SecretString)],
    ca_bundle: Option<&std::path::Path>,
    pinned: Option<(String, Vec<std::net::SocketAddr>)>,
) -> Result<reqwest::Client, String> {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("'{name}' is not a header name"))?;
        let mut value = HeaderValue::from_str(value.expose_secret())
            .map_err(|_| format!("the value of {name} is not a valid header value"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    let mut builder = reqwest::Client::builder()
        .default_headers(map)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .pool_max_idle_per_host(4);
    if let Some((host, addrs)) = &pinned {
        builder = builder.resolve_to_addrs(host, addrs);
    }
    if let Some(path) = ca_bundle {
        let pem = std::fs::read(path).map_err(|e| {
            format!(
                "the CA bundle {} cannot be read ({})",
                path.display(),
                e.kind()
            )
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|_| format!("the CA bundle {} is not PEM certificates", path.display()))?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|_| "the HTTP client could not be set up (no certificate store?)".to_owned())
}

/// Error texts from downstream libraries, bounded.
pub fn short(text: &str) -> String {
    crate::text::cap_chars(text, 300)
}

/// Names of environment variables a definition may set, and the stderr tail, for status.
pub fn stderr_tail(live: &Live) -> String {
    live.stderr
        .lock()
        .map(|kept| {
            let bytes: Vec<u8> = kept.iter().copied().collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default()
}
