//! `perplexity-agent`: argument parsing → one of the front ends. Nothing else.

use perplexity_agent::cli::{Command, Ended, ServeArgs, parse, run, run_unconfigured};
use perplexity_agent::config::Config;

fn main() {
    let cli = parse();
    let command = cli.command.unwrap_or(Command::Serve(ServeArgs::default()));
    // A container probe every few seconds: no configuration, no runtime, no log set-up.
    if let Command::Healthcheck(args) = &command {
        exit(perplexity_agent::cli::healthcheck::run(args));
    }
    // The stand-in upstream needs no configuration, key or store: nothing may stop it.
    if let Command::Demo(args) = &command {
        exit(perplexity_agent::cli::demo::run(args));
    }
    init_diagnostics();
    let tools_flag = match &command {
        Command::Serve(args) => args.tools.as_deref(),
        _ => None,
    };
    let (command, config) = match Config::from_env(tools_flag) {
        Ok(config) => (command, config),
        // doctor's job is to say what is wrong: every variable that does not load is one
        // of its findings, and the rest is checked with defaults in their place.
        Err(e) => match command {
            Command::Doctor(mut args) => {
                let (config, problems) = Config::skipping_broken(|name| std::env::var(name).ok());
                args.config_problems = problems.iter().map(ToString::to_string).collect();
                match config {
                    Some(config) => (Command::Doctor(args), config),
                    None => exit(run_unconfigured(Command::Doctor(args), &e.to_string())),
                }
            }
            command => exit(run_unconfigured(command, &e.to_string())),
        },
    };
    // stdio serves one client whose calls wait on the network: one worker does, and a
    // thread fewer makes every cold start cheaper. HTTP serves many callers.
    let workers = match &command {
        Command::Serve(args) if !args.http => 1,
        Command::Serve(_) => {
            match perplexity_agent::config::http_workers(|v| std::env::var(v).ok()) {
                Ok(workers) => workers,
                Err(e) => exit(Err(perplexity_agent::cli::CliError::config(e.to_string()))),
            }
        }
        _ => 2,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => exit(Err(perplexity_agent::cli::CliError::failed(
            "could not start the async runtime",
        ))),
    };
    // Exit without dropping the runtime: a blocking stdin read cannot be interrupted,
    // and dropping the runtime would wait for it.
    exit(runtime.block_on(run(command, config)));
}

/// The one place a command's end is printed: its error, if it has one, on stderr. Every
/// exit passes here, so it is where the gateway's downstream processes are ended: exiting
/// runs no task's destructor, and what a child started would outlive us.
fn exit(ended: Ended) -> ! {
    let code = match ended {
        Ok(exit) => exit.code(),
        Err(error) => error.report(),
    };
    perplexity_agent::gateway::end_all_groups();
    std::process::exit(code)
}

/// One log event, scrubbed of credentials as a whole when the formatter is done with it
/// (tracing writes an event in pieces; a key split across two would pass a per-write
/// scrub).
struct ScrubbedStderr(Vec<u8>);

impl std::io::Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ScrubbedStderr {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let scrubbed = perplexity_agent::guard::redact::scrub_outbound(
            &text,
            perplexity_agent::perplexity::key::secrets_to_scrub(),
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), scrubbed.as_bytes());
    }
}

/// Diagnostics go to stderr only (stdout belongs to the protocol). `PERPLEXITY_LOG`
/// sets the filter (default `warn,rmcp=off`: rmcp, the gateway's MCP client, logs a
/// failed connection again at ERROR as its internal error chain, in Rust type names, on
/// every retry, while the gateway already says what failed and what to do in one line —
/// rate-limited when serving; `PERPLEXITY_LOG=warn,rmcp=debug` brings rmcp's back).
/// Panics print where, never what: a payload could carry secrets.
fn init_diagnostics() {
    let default = "warn,rmcp=off";
    let filter = tracing_subscriber::EnvFilter::try_from_env("PERPLEXITY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| ScrubbedStderr(Vec::new()))
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
