//! The `fake-perplexity` binary: serves the fake on a loopback address, prints
//! `listening on http://IP:PORT` as its only stdout line, and runs until SIGINT/SIGTERM.
//! Diagnostics go to stderr.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use clap::Parser;
use serde_json::Value;

/// A scriptable fake of the Perplexity API, for tests and benchmarks.
#[derive(Parser, Debug)]
#[command(name = "fake-perplexity", version)]
struct Args {
    /// Port to listen on (0 = any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Loopback address to bind (non-loopback addresses are refused).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    /// Initial scenario: inline JSON, or @FILE to read it from a file.
    #[arg(long)]
    scenario: Option<String>,
}

fn load_scenario(arg: Option<&str>) -> Result<Value, String> {
    let Some(arg) = arg else {
        return Ok(Value::Null);
    };
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read scenario file {path}: {e}"))?,
        None => arg.to_owned(),
    };
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("scenario is not valid JSON: {e}"))?;
    fake_perplexity::validate_scenario(&v).map_err(|e| format!("invalid scenario: {e}"))?;
    Ok(v)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.bind.is_loopback() {
        eprintln!(
            "fake-perplexity: refusing to bind {}: only loopback addresses are allowed",
            args.bind
        );
        return ExitCode::from(2);
    }
    let scenario = match load_scenario(args.scenario.as_deref()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fake-perplexity: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fake-perplexity: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = rt.block_on(async move {
        let listener =
            match tokio::net::TcpListener::bind(SocketAddr::new(args.bind, args.port)).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!(
                        "fake-perplexity: cannot bind {}:{}: {e}",
                        args.bind, args.port
                    );
                    return ExitCode::FAILURE;
                }
            };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("fake-perplexity: no local address: {e}");
                return ExitCode::FAILURE;
            }
        };
        {
            let mut out = std::io::stdout().lock();
            if writeln!(out, "listening on http://{addr}")
                .and_then(|()| out.flush())
                .is_err()
            {
                eprintln!("fake-perplexity: cannot write to stdout");
            }
        }
        tokio::select! {
            res = fake_perplexity::serve(listener, scenario) => match res {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("fake-perplexity: server error: {e}");
                    ExitCode::FAILURE
                }
            },
            _ = shutdown_signal() => ExitCode::SUCCESS,
        }
    });
    rt.shutdown_timeout(std::time::Duration::from_millis(500));
    code
}
