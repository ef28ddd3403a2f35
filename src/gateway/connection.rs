//! One live connection to a downstream server, through rmcp's client (both MCP eras:
//! `server/discover` first, the legacy handshake as the fallback).
//!
//! - stdio: the resolved program (never a shell), arguments as a list, a cleared
//!   environment (the declared variables plus PATH — the gateway's fixed one — HOME and
//!   LANG), the checked working directory, its own process group (ended with the
//!   connection and at every orderly exit; the child itself killed by the kernel if we
//!   are killed outright); every line it writes measured before rmcp decodes it
//!   (`child.rs`);
//!   stderr kept in a small ring buffer for status, never copied to our stdout.
//! - HTTP: a reqwest client of its own per server (its headers, cookies and pool are
//!   never shared, so one server's `Authorization` cannot reach another), no redirects,
//!   no ambient proxy, certificates verified (plus the server's own CA bundle), and the
//!   host's addresses checked against the fetcher's policy unless the operator allowed
//!   private addresses for this server; every reply measured before rmcp decodes it
//!   (`http.rs`).
//!
//! Touches: child processes and the network (downstream servers only).

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use secrecy::ExposeSecret;
use tokio::io::AsyncReadExt;

use super::definition::{Resolved, ResolvedTransport};
use super::error::{self, GatewayError};
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
pub async fn connect(resolved: &Resolved, timeout: Duration) -> Result<Live, GatewayError> {
    let secrets = secret_values(resolved);
    let connected = tokio::time::timeout(timeout, connect_inner(resolved))
        .await
        .unwrap_or(Err(GatewayError::Timeout {
            seconds: timeout.as_secs(),
        }));
    // A downstream's text may echo what we sent it (a header value, an env secret).
    connected.map_err(|e| e.scrubbed(&secrets))
}

/// The definition's secret values, to be kept out of error texts.
fn secret_values(resolved: &Resolved) -> Vec<String> {
    let values = match &resolved.transport {
        ResolvedTransport::Stdio { env, .. } => env,
        ResolvedTransport::Http { headers, .. } => headers,
    };
    values
        .iter()
        .map(|(_, v)| v.expose_secret().to_owned())
        .collect()
}

/// What rmcp's errors cannot tell: whether this definition sends credentials.
fn context(resolved: &Resolved) -> error::Context {
    error::Context {
        sent_credentials: matches!(&resolved.transport, ResolvedTransport::Http { headers, .. } if !headers.is_empty()),
    }
}

async fn connect_inner(resolved: &Resolved) -> Result<Live, GatewayError> {
    let cx = context(resolved);
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
            // Sanctioned: the one launcher, after the command policy (policy.rs) passed.
            #[allow(clippy::disallowed_methods)]
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
            // Killed if the connection is dropped without being closed; on Unix in its own
            // process group, so closing the connection ends what it started too.
            command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            #[cfg(unix)]
            command.process_group(0);
            #[cfg(target_os = "linux")]
            die_with_us(&mut command);
            let spawn_failed = |e: std::io::Error| GatewayError::Spawn {
                program: program.display().to_string(),
                reason: e.kind(),
            };
            let mut child = command.spawn().map_err(spawn_failed)?;
            let child_stderr = child.stderr.take();
            let transport = super::child::Guarded::new(child).map_err(spawn_failed)?;
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
                .map_err(|e| error::from_init(&e, cx))?
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
            let transport =
                StreamableHttpClientTransport::with_client(super::http::Measured(http), config);
            client_info()
                .serve_with_lifecycle(transport, lifecycle())
                .await
                .map_err(|e| error::from_init(&e, cx))?
        }
    };
    // Said as what it is: the handshake passed, the listing did not.
    let tools = client.list_all_tools().await.map_err(|e| match e {
        rmcp::ServiceError::TransportClosed => GatewayError::Handshake(
            "the server closed the connection before listing its tools".into(),
        ),
        e => match error::from_service(&e, cx) {
            GatewayError::Refused(m) => {
                GatewayError::Handshake(format!("the server refused to list its tools: {m}"))
            }
            other => other,
        },
    })?;
    Ok(Live {
        client,
        tools,
        stderr,
    })
}

/// The child is sent SIGKILL when we die, even by `kill -9`, which runs none of our code.
/// PDEATHSIG fires when the spawning thread ends, not only the process: ours are the
/// runtime's threads (its `block_on` caller and its workers), which live as long as it does.
/// It reaches the direct child alone (and a set-uid program clears it); what the child
/// started is ended with its process group on every orderly exit (`end_all_groups`).
#[cfg(target_os = "linux")]
fn die_with_us(command: &mut tokio::process::Command) {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the hook runs between fork and exec, and calls only async-signal-safe
    // functions (prctl, getppid, _exit); it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            // Best effort: where prctl is refused, the group is still ended at every
            // orderly exit.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            // We died before the guard was set: nothing would ever end this child.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Every address of the host must pass the fetcher's policy, unless this server may use
/// private ones (an intranet server is legitimate, but only when the operator says so).
/// Returns the host and the addresses checked, for the client to be pinned to (so a
/// second DNS answer cannot swap in a private address).
async fn check_host(
    url: &url::Url,
    allow_private: bool,
) -> Result<Option<(String, Vec<std::net::SocketAddr>)>, GatewayError> {
    if allow_private {
        return Ok(None);
    }
    let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<_> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| {
            GatewayError::Transport(format!(
                "cannot resolve {host} ({}): check the URL's host name and this machine's DNS",
                e.kind()
            ))
        })?
        .collect();
    if addrs.is_empty() {
        return Err(GatewayError::Transport(format!("{host} has no address")));
    }
    for addr in &addrs {
        check_addr(addr.ip(), &AllowPrivate::None).map_err(|b| {
            GatewayError::Policy(format!("{host} resolves to a non-public address ({b}); pass --allow-private for this server if that is intended"))
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
) -> Result<reqwest::Client, GatewayError> {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| GatewayError::Policy(format!("'{name}' is not a header name")))?;
        let mut value = HeaderValue::from_str(value.expose_secret()).map_err(|_| {
            GatewayError::Policy(format!("the value of {name} is not a valid header value"))
        })?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    // The shared policy; it adds what this client lacked (no transport retries, no
    // Referer) to what it had (no redirects, no ambient proxy).
    let mut builder = crate::net::client_builder()
        .default_headers(map)
        .pool_max_idle_per_host(4);
    if let Some((host, addrs)) = &pinned {
        builder = builder.resolve_to_addrs(host, addrs);
    }
    if let Some(path) = ca_bundle {
        let pem = std::fs::read(path).map_err(|e| {
            GatewayError::Policy(format!(
                "the CA bundle {} cannot be read ({})",
                path.display(),
                e.kind()
            ))
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|_| {
            GatewayError::Policy(format!(
                "the CA bundle {} is not PEM certificates",
                path.display()
            ))
        })?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|_| {
        GatewayError::Transport(
            "the HTTP client could not be set up (no certificate store?)".to_owned(),
        )
    })
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

#[cfg(test)]
mod tests {
    //! TLS to an HTTP downstream: a self-signed certificate is refused, and accepted once
    //! the server's CA bundle is configured. The server is a minimal MCP-over-HTTPS
    //! responder on a loopback port (just enough for the handshake and `tools/list`).

    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;

    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    use serde_json::{Value, json};

    use super::*;

    fn answer(request: &Value) -> Option<Value> {
        let id = request.get("id")?.clone();
        let result = match request["method"].as_str() {
            Some("initialize") => json!({"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}}, "serverInfo": {"name": "tls-test", "version": "1"}}),
            Some("tools/list") => {
                json!({"tools": [{"name": "over_tls", "inputSchema": {"type": "object"}}]})
            }
            _ => {
                return Some(
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}),
                );
            }
        };
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    fn serve_one(tcp: std::net::TcpStream, config: Arc<rustls::ServerConfig>) {
        let Ok(conn) = rustls::ServerConnection::new(config) else {
            return;
        };
        let mut stream = BufReader::new(rustls::StreamOwned::new(conn, tcp));
        loop {
            let mut line = String::new();
            if stream.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let method = line.split(' ').next().unwrap_or_default().to_owned();
            let mut length = 0;
            loop {
                let mut header = String::new();
                if stream.read_line(&mut header).unwrap_or(0) == 0 {
                    return;
                }
                if header == "\r\n" {
                    break;
                }
                if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if stream.read_exact(&mut body).is_err() {
                return;
            }
            let reply = match method.as_str() {
                "POST" => match serde_json::from_slice::<Value>(&body)
                    .ok()
                    .as_ref()
                    .and_then(answer)
                {
                    Some(v) => {
                        let text = v.to_string();
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
                            text.len()
                        )
                    }
                    None => "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned(),
                },
                "DELETE" => "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_owned(),
                _ => "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_owned(),
            };
            let inner = stream.get_mut();
            if inner
                .write_all(reply.as_bytes())
                .and_then(|()| inner.flush())
                .is_err()
            {
                return;
            }
        }
    }

    #[tokio::test]
    async fn a_self_signed_server_is_refused_unless_its_ca_bundle_is_configured() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let pem = {
            use base64::Engine;
            let b64 = base64::engine::general_purpose::STANDARD.encode(cert.cert.der());
            let lines: Vec<&str> = b64
                .as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                lines.join("\n")
            )
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
        let config = Arc::new(
            rustls::ServerConfig::builder()
                .with_no_client_auth()
                .with_single_cert(vec![CertificateDer::from(cert.cert.der().to_vec())], key)
                .unwrap(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let config = config.clone();
                std::thread::spawn(move || serve_one(tcp, config));
            }
        });
        let bundle = std::env::temp_dir().join(format!("pa-ca-{}.pem", std::process::id()));
        std::fs::write(&bundle, pem).unwrap();
        let resolved = |ca_bundle: Option<std::path::PathBuf>| Resolved {
            slug: "tls".into(),
            transport: ResolvedTransport::Http {
                url: url::Url::parse(&format!("https://localhost:{port}/mcp")).unwrap(),
                headers: vec![],
                allow_private: true,
                ca_bundle,
            },
        };
        let refused = connect(&resolved(None), Duration::from_secs(10)).await;
        assert!(
            matches!(refused, Err(GatewayError::Tls(_))),
            "an untrusted certificate: {:?}",
            refused.err()
        );
        let live = connect(&resolved(Some(bundle.clone())), Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("with its CA bundle: {e}"));
        assert_eq!(live.tools[0].name, "over_tls");
        let _ = live.client.cancel().await;
        let _ = std::fs::remove_file(bundle);
    }
}
