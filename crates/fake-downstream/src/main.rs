//! `fake-downstream`: a scriptable, deliberately hostile MCP server (stdio or Streamable
//! HTTP) for testing perplexity-agent's gateway. The protocol is written by hand with
//! serde_json so the server can also misbehave on purpose. See README.md for the
//! contract the gateway's tests rely on.

mod http;
mod protocol;
mod stdio;
mod tools;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::process::ExitCode;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};

use crate::http::HttpOpts;
use crate::protocol::{Config, Server};

const USAGE: &str = "\
usage: fake-downstream [OPTIONS] [IGNORED-ARGS...] [-- IGNORED-ARGS...]

Transport (default: MCP over stdio, newline-delimited JSON):
  --http                     Streamable HTTP on POST /mcp instead of stdio
  --port P                   HTTP port (default 0 = any free port)
  --bind ADDR                HTTP bind address, loopback only (default 127.0.0.1)
  --redirect-to URL          every POST /mcp answers 307 with Location: URL
  --require-header 'N: V'    POST /mcp without exactly that header gets 401

Behaviour:
  --name NAME                serverInfo.name (default fake-downstream)
  --hostile-metadata         also list tools with hostile metadata
  --invalid-frames           write invalid frames before every reply
  --crash-after N            exit(1) while handling the N-th tools/call
  --exit-after-init          exit(0) right after answering initialize
  --slow-init MS             delay the initialize answer by MS milliseconds
  --many-tools N             also list N filler tools, each with a 1 KB description
  --stderr-noise             write 1 MiB to stderr at start
  --ignore-eof               stdio: keep running for a minute after stdin's EOF, and
                             ignore SIGTERM
  --grandchild               start a process of our own (in our process group) that
                             ignores EOF and SIGTERM for a minute; `pid` reports it too
  --as-grandchild            be that process (what --grandchild starts)
  -h, --help                 print this help

Arguments not starting with '-' (and everything after '--') are ignored.
";

/// How long `--ignore-eof` and `--grandchild` outlive what should have ended them: far
/// longer than a client's grace, short enough that a failed test leaves nothing for long.
pub const LINGER: Duration = Duration::from_secs(60);

struct Args {
    cfg: Config,
    stderr_noise: bool,
    grandchild: bool,
    as_grandchild: bool,
    http: Option<HttpOpts>,
}

fn parse_u64(flag: &str, v: &str) -> Result<u64, String> {
    v.parse()
        .map_err(|_| format!("{flag} needs a non-negative integer, got {v:?}"))
}

fn parse_args(argv: impl IntoIterator<Item = String>) -> Result<Option<Args>, String> {
    let mut cfg = Config {
        name: "fake-downstream".to_owned(),
        hostile_metadata: false,
        invalid_frames: false,
        crash_after: None,
        exit_after_init: false,
        slow_init: None,
        many_tools: 0,
        ignore_eof: false,
        grandchild: None,
    };
    let mut stderr_noise = false;
    let mut grandchild = false;
    let mut as_grandchild = false;
    let mut http = false;
    let mut port: Option<u16> = None;
    let mut bind: Option<IpAddr> = None;
    let mut redirect_to: Option<HeaderValue> = None;
    let mut require_header: Option<(HeaderName, HeaderValue)> = None;

    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            break;
        }
        if !arg.starts_with('-') {
            continue; // ignored positional argument
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let takes_value = matches!(
            flag.as_str(),
            "--port"
                | "--bind"
                | "--redirect-to"
                | "--require-header"
                | "--name"
                | "--crash-after"
                | "--slow-init"
                | "--many-tools"
        );
        let value = if takes_value {
            match inline {
                Some(v) => v,
                None => it.next().ok_or_else(|| format!("{flag} needs a value"))?,
            }
        } else {
            if inline.is_some() {
                return Err(format!("{flag} takes no value"));
            }
            String::new()
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--http" => http = true,
            "--hostile-metadata" => cfg.hostile_metadata = true,
            "--invalid-frames" => cfg.invalid_frames = true,
            "--exit-after-init" => cfg.exit_after_init = true,
            "--stderr-noise" => stderr_noise = true,
            "--ignore-eof" => cfg.ignore_eof = true,
            "--grandchild" => grandchild = true,
            "--as-grandchild" => as_grandchild = true,
            "--name" => cfg.name = value,
            "--many-tools" => {
                cfg.many_tools = value
                    .parse()
                    .map_err(|_| format!("--many-tools needs a count, got {value:?}"))?;
            }
            "--crash-after" => {
                let n = parse_u64(&flag, &value)?;
                if n == 0 {
                    return Err("--crash-after needs N >= 1".to_owned());
                }
                cfg.crash_after = Some(n);
            }
            "--slow-init" => {
                cfg.slow_init = Some(Duration::from_millis(parse_u64(&flag, &value)?));
            }
            "--port" => {
                port = Some(
                    value
                        .parse()
                        .map_err(|_| format!("--port needs a port number, got {value:?}"))?,
                );
            }
            "--bind" => {
                let ip: IpAddr = if value == "localhost" {
                    IpAddr::V4(Ipv4Addr::LOCALHOST)
                } else {
                    value
                        .parse()
                        .map_err(|_| format!("--bind needs an IP address, got {value:?}"))?
                };
                if !ip.is_loopback() {
                    return Err(format!(
                        "refusing to bind {ip}: only loopback addresses are allowed"
                    ));
                }
                bind = Some(ip);
            }
            "--redirect-to" => {
                redirect_to = Some(
                    HeaderValue::from_str(&value)
                        .map_err(|_| format!("--redirect-to: invalid URL {value:?}"))?,
                );
            }
            "--require-header" => {
                let (name, v) = value.split_once(':').ok_or_else(|| {
                    format!("--require-header needs 'Name: value', got {value:?}")
                })?;
                let name = HeaderName::from_bytes(name.trim().as_bytes())
                    .map_err(|_| format!("--require-header: invalid header name {name:?}"))?;
                let v = HeaderValue::from_str(v.trim())
                    .map_err(|_| format!("--require-header: invalid header value {v:?}"))?;
                require_header = Some((name, v));
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }

    let http = if http {
        Some(HttpOpts {
            bind: bind.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            port: port.unwrap_or(0),
            redirect_to,
            require_header,
        })
    } else {
        if port.is_some() || bind.is_some() || redirect_to.is_some() || require_header.is_some() {
            return Err(
                "--port, --bind, --redirect-to and --require-header need --http".to_owned(),
            );
        }
        None
    };
    if http.is_some() && cfg.ignore_eof {
        return Err("--ignore-eof is for stdio, not --http".to_owned());
    }
    Ok(Some(Args {
        cfg,
        stderr_noise,
        grandchild,
        as_grandchild,
        http,
    }))
}

/// SIGTERM ignored from now on, by this process and those it starts.
fn ignore_sigterm() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
}

/// Starts this program again as `--as-grandchild`, in our process group, its stdio
/// closed; its pid.
fn start_grandchild() -> Result<u32, String> {
    let exe = std::env::current_exe().map_err(|e| format!("--grandchild: {e}"))?;
    std::process::Command::new(exe)
        .arg("--as-grandchild")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|child| child.id())
        .map_err(|e| format!("--grandchild: {e}"))
}

/// Writes exactly 1 MiB of text lines to stderr (blocking until the client drains it).
fn stderr_noise() {
    let mut line = String::with_capacity(1024);
    let mut stderr = std::io::stderr().lock();
    for i in 0..1024 {
        line.clear();
        line.push_str(&format!("fake-downstream stderr noise line {i:04} "));
        while line.len() < 1023 {
            line.push('.');
        }
        line.push('\n');
        if stderr.write_all(line.as_bytes()).is_err() {
            return;
        }
    }
    let _ = stderr.flush();
}

fn main() -> ExitCode {
    let mut args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("fake-downstream: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.as_grandchild {
        ignore_sigterm();
        std::thread::sleep(LINGER);
        return ExitCode::SUCCESS;
    }
    if args.cfg.ignore_eof {
        ignore_sigterm();
    }
    if args.grandchild {
        match start_grandchild() {
            Ok(pid) => args.cfg.grandchild = Some(pid),
            Err(e) => {
                eprintln!("fake-downstream: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if args.stderr_noise {
        stderr_noise();
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fake-downstream: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let server = Server::new(args.cfg);
    match args.http {
        None => rt.block_on(stdio::run(server)),
        Some(opts) => match rt.block_on(http::run(server, opts)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fake-downstream: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Args>, String> {
        parse_args(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_flags() {
        let a = parse(&[
            "--hostile-metadata",
            "$(id)",
            "--crash-after=3",
            "--slow-init",
            "50",
            "--name",
            "x",
            "--",
            "--bogus",
        ])
        .unwrap()
        .unwrap();
        assert!(a.cfg.hostile_metadata);
        assert_eq!(a.cfg.crash_after, Some(3));
        assert_eq!(a.cfg.slow_init, Some(Duration::from_millis(50)));
        assert_eq!(a.cfg.name, "x");
        assert!(a.http.is_none());

        let a = parse(&["--http", "--require-header", "Authorization: Bearer a b"])
            .unwrap()
            .unwrap();
        let (n, v) = a.http.unwrap().require_header.unwrap();
        assert_eq!(n.as_str(), "authorization");
        assert_eq!(v, "Bearer a b");
    }

    #[test]
    fn rejects_bad_flags() {
        assert!(parse(&["--bogus"]).is_err());
        assert!(parse(&["--port", "1"]).is_err());
        assert!(parse(&["--http", "--bind", "0.0.0.0"]).is_err());
        assert!(parse(&["--crash-after", "0"]).is_err());
        assert!(parse(&["--crash-after"]).is_err());
        assert!(parse(&["--http=1"]).is_err());
        assert!(parse(&["--http", "--ignore-eof"]).is_err());
        assert!(matches!(parse(&["--help"]), Ok(None)));
    }
}
