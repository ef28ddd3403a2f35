//! `perplexity-agent demo`: serves the stand-in for the Perplexity API (`crate::demo`) on
//! loopback, so anyone can try every command, the TUI and an MCP client without a key,
//! whichever channel they installed from. It needs no configuration and no key, makes no
//! outbound connection, and runs until Ctrl-C or SIGTERM.
//!
//! Touches: one loopback listener, stdout (the address line), stderr (how to use it).

use std::net::{Ipv4Addr, SocketAddr};

use clap::Args;
use serde_json::Value;

use super::output::{CliError, Ended, Exit};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Port on 127.0.0.1 to answer on (0 = any free port).
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// How the stand-in behaves: a JSON scenario, or @FILE (fields in the fake's README).
    #[arg(long, value_name = "JSON")]
    pub scenario: Option<String>,
}

/// The key the instructions suggest: any key is accepted, and this one says what it is.
const DEMO_KEY: &str = "pplx-demo";

pub fn run(args: &DemoArgs) -> Ended {
    let scenario = scenario(args.scenario.as_deref())?;
    let upstream = crate::demo::Upstream::new(&scenario)
        .map_err(|e| CliError::usage(format!("--scenario: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|_| CliError::failed("could not start the async runtime"))?;
    runtime.block_on(async move {
        let wanted = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
        let listener = tokio::net::TcpListener::bind(wanted).await.map_err(|e| {
            CliError::failed(format!(
                "cannot listen on {wanted}: {e}; pick another with --port (0 = any free port)"
            ))
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| CliError::failed(format!("no local address: {e}")))?;
        super::output::lines(&format!("listening on http://{addr}"));
        super::output::note_lines(&format!(
            "A stand-in for the Perplexity API answers on http://{addr}: made-up answers, no key, \
             no network, no cost. In another shell:\n\n  \
             export PERPLEXITY_API_BASE=http://{addr} PERPLEXITY_API_KEY={DEMO_KEY}\n  \
             perplexity-agent ask \"Does this work?\"\n\n\
             The same two variables in an MCP client's entry try the server there. Ctrl-C stops it."
        ));
        let stop = tokio_util::sync::CancellationToken::new();
        crate::signals::watch(stop.clone());
        tokio::select! {
            served = upstream.serve(listener) => match served {
                Ok(()) => Ok(Exit::Success),
                Err(e) => Err(CliError::failed(format!("the stand-in stopped: {e}"))),
            },
            () = stop.cancelled() => Ok(Exit::Success),
        }
    })
}

/// `--scenario`: inline JSON or `@FILE`, checked before anything listens.
fn scenario(arg: Option<&str>) -> Result<Value, CliError> {
    let Some(arg) = arg else {
        return Ok(Value::Null);
    };
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(format!("--scenario: cannot read {path}: {e}")))?,
        None => arg.to_owned(),
    };
    serde_json::from_str(&text).map_err(|e| CliError::usage(format!("--scenario is not JSON: {e}")))
}
