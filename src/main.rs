//! `perplexity-agent`: argument parsing → one of the front ends. Nothing else.

use clap::Parser;
use perplexity_agent::cli::{Cli, Command, ServeArgs, run, run_unconfigured};
use perplexity_agent::config::Config;

fn main() {
    let cli = Cli::parse();
    init_diagnostics();
    let command = cli.command.unwrap_or(Command::Serve(ServeArgs::default()));
    let tools_flag = match &command {
        Command::Serve(args) => args.tools.as_deref(),
        _ => None,
    };
    let config = match Config::from_env(tools_flag) {
        Ok(config) => config,
        Err(e) => std::process::exit(run_unconfigured(command, &e.to_string())),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => {
            eprintln!("perplexity-agent: could not start the async runtime");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(run(command, config));
    // Exit without dropping the runtime: a blocking stdin read cannot be interrupted,
    // and dropping the runtime would wait for it.
    std::process::exit(code);
}

/// Diagnostics go to stderr only (stdout belongs to the protocol). `PERPLEXITY_LOG`
/// sets the filter (default `warn`). Panics print where, never what: a payload could
/// carry secrets.
fn init_diagnostics() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PERPLEXITY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    std::panic::set_hook(Box::new(|info| {
        let place = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_else(|| "unknown location".to_owned());
        eprintln!("perplexity-agent: internal error (panic) at {place}");
    }));
}
