//! `conformance-fixture`: the MCP conformance suite's fixture tools, resources and prompts,
//! served through perplexity-agent's own HTTP transport (`serve_with`: the same auth,
//! Host/Origin, body cap, session, era and header layers as `serve --http`). Whatever the
//! suite proves against it, it proves about our transport; the product binary never
//! contains any of this.
//!
//!     PERPLEXITY_HTTP_AUTH_TOKEN=<32+ chars> conformance-fixture [--bind 127.0.0.1:0]

mod catalog;
mod fixture;
mod interactive;
mod state;
mod task_tools;
mod tasks;
mod tools;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use perplexity_agent::config::HttpConfig;

/// The longest a fixture call takes: a legacy question waits this long for the client.
const LONGEST: Duration = Duration::from_secs(60);

const USAGE: &str =
    "usage: PERPLEXITY_HTTP_AUTH_TOKEN=<token> conformance-fixture [--bind ADDR:PORT]
  Serves the MCP conformance suite's fixtures on http://ADDR:PORT/mcp (loopback only;
  default 127.0.0.1:0, the OS picks the port and stderr names it).";

fn main() -> ExitCode {
    let mut bind = "127.0.0.1:0".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bind" => match args.next() {
                Some(value) => bind = value,
                None => return usage_error("--bind needs a value"),
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage_error(&format!("unknown argument {other:?}")),
        }
    }
    let config = match HttpConfig::from_env(&bind, false) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("conformance-fixture: {e}");
            return ExitCode::from(2);
        }
    };
    let fixture = match fixture::Fixture::new() {
        Ok(fixture) => Arc::new(fixture),
        Err(e) => {
            eprintln!("conformance-fixture: no randomness for the requestState key: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("conformance-fixture: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(perplexity_agent::mcp::http::serve_with(
        fixture, config, LONGEST,
    ));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn usage_error(problem: &str) -> ExitCode {
    eprintln!("conformance-fixture: {problem}\n{USAGE}");
    ExitCode::from(2)
}
