//! The human command line: argument parsing, and the `ask` / `result` / `cancel`
//! commands. They call the same operations as the MCP tools (`tools::research`), so
//! behaviour cannot drift; only the rendering differs: progress on stderr, a clean
//! answer on stdout (so `> answer.md` works), spotlighting off unless asked.
//!
//! Touches: stdout/stderr, and the network only through `tools::`/`perplexity::`.

mod doctor;
mod gateway;
mod install;
mod output;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::call::ToolOutput;
use crate::call::{CallFacts, FrontEnd};
use crate::config::{Config, DEFAULT_CLI_TIMEOUT_SECONDS, HttpConfig, MAX_WAIT_SECONDS};
use crate::guard::Guard;
use crate::perplexity::PerplexityClient;
use crate::text::py_strip;
use crate::tools::research::{self, ResearchRequest, check_run_id};
use crate::tools::{RunIds, Tools};
use output::{CliProgress, Exit, Style};
use serde_json::{Map, Value, json};

#[derive(Debug, Parser)]
#[command(
    name = "perplexity-agent",
    version,
    about = "Perplexity's research APIs for AI agents and people: an MCP server (stdio) and a command line.",
    long_about = "Perplexity's research APIs for AI agents and people.\n\nWith no command, runs the MCP server on stdio (what MCP clients launch). \
                  The API key is read from PERPLEXITY_API_KEY."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the MCP server on stdio (the default when no command is given).
    Serve(ServeArgs),
    /// Research a question and print the cited answer.
    Ask(AskArgs),
    /// Check on, or wait for, a run started earlier.
    Result(ResultArgs),
    /// Ask Perplexity to stop a run.
    Cancel(CancelArgs),
    /// Read web pages through the SSRF-guarded fetcher and print their text.
    Fetch(FetchArgs),
    /// Search the web: ranked results (title, URL, snippet), no written answer.
    Search(SearchArgs),
    /// Deep research: a report whose every claim is checked against the sources.
    Research(ResearchArgs),
    /// List Perplexity's model catalogue: the valid provider/model names (no key needed).
    Models(ModelsArgs),
    /// Downstream MCP servers whose tools this server offers (the gateway).
    #[command(subcommand)]
    Gateway(gateway::GatewayCommand),
    /// Add this server to an MCP client's config file (merged, backed up).
    Install(install::InstallArgs),
    /// Check the set-up: key, store, gateway secrets, client entries, both protocol eras.
    Doctor(doctor::DoctorArgs),
    /// The terminal research workspace: answers with sources beside the pages you open.
    Tui,
}

#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// Tools to offer: a comma list of names and groups (overrides PERPLEXITY_TOOLS).
    #[arg(long, value_name = "LIST")]
    pub tools: Option<String>,
    /// Serve MCP over Streamable HTTP at /mcp instead of stdio (needs PERPLEXITY_HTTP_AUTH_TOKEN).
    #[arg(long)]
    pub http: bool,
    /// Address and port to listen on with --http.
    #[arg(
        long,
        value_name = "ADDR:PORT",
        default_value = "127.0.0.1:8080",
        requires = "http"
    )]
    pub bind: String,
    /// Allow a --bind address other machines can reach (TLS belongs in a reverse proxy).
    #[arg(long, requires = "http")]
    pub allow_remote: bool,
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question (several words are joined with spaces).
    #[arg(value_name = "QUESTION")]
    pub question: Vec<String>,
    /// Research depth: fast, low, medium (default), high, xhigh, wide-research…
    #[arg(long)]
    pub preset: Option<String>,
    /// Only sources published within: hour, day, week, month or year.
    #[arg(long)]
    pub recency: Option<String>,
    /// Comma-separated domains to allow, or (each prefixed with '-') to exclude.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub domains: Option<String>,
    /// Seconds to wait for the answer (at most 1800); the run keeps going after that.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub timeout: Option<i64>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Wrap the answer in the untrusted-content delimiter (as MCP clients get it).
    #[arg(long)]
    pub spotlight: bool,
    /// Start the run, print its id and exit (exit code 3).
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Debug, Args)]
pub struct ModelsArgs {
    /// Print one JSON document instead of one id a line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ResultArgs {
    /// The id printed by `ask`.
    pub response_id: String,
    /// Seconds to wait for the run to finish (0 = check once; at most 1800).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait: u64,
    #[arg(long)]
    pub json: bool,
    #[arg(long)]
    pub spotlight: bool,
}

#[derive(Debug, Args)]
pub struct ResearchArgs {
    /// The research question (several words are joined with spaces).
    #[arg(value_name = "QUESTION", required = true)]
    pub question: Vec<String>,
    /// How many angles to search (1-8).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub subquestions: u32,
    /// Seconds to wait for the report (at most 1800).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_CLI_TIMEOUT_SECONDS)]
    pub timeout: u64,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to search for (several words are joined with spaces).
    #[arg(value_name = "QUERY", required = true)]
    pub query: Vec<String>,
    /// How many results (1-20; people search up to 50).
    #[arg(long, value_name = "N")]
    pub max_results: Option<u32>,
    /// Only results published within: hour, day, week, month or year.
    #[arg(long)]
    pub recency: Option<String>,
    /// Comma-separated domains to allow, or (each prefixed with '-') to exclude.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub domains: Option<String>,
    /// Which index: web (default), academic or sec (SEC filings).
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// The pages to read (http or https; at most 10).
    #[arg(value_name = "URL", required = true)]
    pub urls: Vec<String>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The id printed by `ask`.
    pub response_id: String,
    #[arg(long)]
    pub json: bool,
}

/// Runs a CLI command; returns the process exit code.
pub async fn run(command: Command, config: Config) -> i32 {
    if let Some(allowed) = config.fetch.allow_private.lifted() {
        tracing::warn!(
            "PERPLEXITY_FETCH_ALLOW_PRIVATE={allowed}: the page fetcher may reach these non-public addresses"
        );
    }
    let client = match PerplexityClient::new(&config.api) {
        Ok(c) => Arc::new(c),
        Err(e) => return output::fail(Exit::Config, &e),
    };
    let guard = match Guard::new(&config.guard, crate::perplexity::key::secrets_to_scrub) {
        Ok(g) => Arc::new(g),
        Err(e) => return output::fail(Exit::Config, &e),
    };
    let code = match command {
        Command::Ask(args) => ask(args, &client, &guard).await,
        Command::Result(args) => result(args, &client, &guard).await,
        Command::Cancel(args) => cancel(args, &client, &guard, config.wait_seconds).await,
        Command::Fetch(args) => fetch(args, &config, &guard).await,
        Command::Search(args) => search(args, &client, &guard, config.wait_seconds).await,
        Command::Research(args) => research_command(args, &client, &guard).await,
        Command::Models(args) => models(args, &client, &guard, config.wait_seconds).await,
        Command::Gateway(command) => gateway::run(command, &config).await,
        Command::Install(args) => install::run(args),
        Command::Doctor(args) => doctor::run(args, &config).await,
        Command::Tui => match crate::tui::run(&config).await {
            Ok(()) => Exit::Success as i32,
            Err(e) => output::fail(Exit::Config, &e),
        },
        Command::Serve(args) => {
            let http = match args
                .http
                .then(|| HttpConfig::from_env(&args.bind, args.allow_remote))
                .transpose()
            {
                Ok(http) => http,
                Err(e) => return output::fail(Exit::Config, &e.to_string()),
            };
            let mut tools = Tools::new(&config, client, guard.clone());
            let gateway = gateway::start(&config).await;
            if let Some(gateway) = &gateway {
                tools = tools.with_gateway(gateway.clone());
            }
            let dispatcher = Arc::new(crate::mcp::dispatch::Dispatcher::new(Arc::new(tools)));
            let code = match http {
                Some(http) => crate::mcp::http::serve(dispatcher, http, config.wait_seconds).await,
                None => crate::mcp::stdio::serve(dispatcher).await,
            };
            // Stop the downstream processes (they would also see their stdin close).
            if let Some(gateway) = gateway {
                gateway.shutdown().await;
            }
            code
        }
    };
    guard.flush();
    code
}

/// When the configuration does not load: `install` does not need it and still runs;
/// `doctor` reports the problem as its failing check (its job is to say what is wrong);
/// everything else stops with the message (exit 4).
pub fn run_unconfigured(command: Command, problem: &str) -> i32 {
    match command {
        Command::Install(args) => install::run(args),
        Command::Doctor(_) => {
            output::lines(&format!(
                "FAIL Configuration: {problem} — fix that variable or the config file, then run doctor again"
            ));
            Exit::Failed as i32
        }
        _ => output::fail(Exit::Config, problem),
    }
}

/// Validation failures are audited like any call (they cost no rate-limit token).
fn rejected(guard: &Guard, tool: &str, params: &Value, message: &str) -> i32 {
    guard.rejected(FrontEnd::Cli, tool, params, &ToolOutput::error(message));
    usage_error(message)
}

fn usage_error(message: &str) -> i32 {
    output::fail(Exit::Usage, message)
}

fn progress_for(json: bool) -> CliProgress {
    CliProgress::new(std::io::stderr().is_terminal() && !json)
}

async fn ask(args: AskArgs, client: &PerplexityClient, guard: &Arc<Guard>) -> i32 {
    // The arguments an MCP client would send `perplexity_agent`, validated by the same
    // code: one set of bounds, one set of messages (in the CLI's own names), and one tool
    // name in the audit log whichever front end asked.
    let params = ask_arguments(&args);
    let request = match ResearchRequest::from_args(&params) {
        Ok(r) => r,
        Err(message) => return rejected(guard, ASK_TOOL, &params.into(), &cli_names(&message)),
    };
    let params = Value::Object(params);
    let timeout = match args.timeout {
        None => DEFAULT_CLI_TIMEOUT_SECONDS,
        Some(t) if t <= 0 => {
            return rejected(
                guard,
                ASK_TOOL,
                &params,
                "--timeout must be a positive number of seconds.",
            );
        }
        Some(t) => (t as u64).min(MAX_WAIT_SECONDS),
    };
    let pass = match guard.admit(FrontEnd::Cli, ASK_TOOL, &params, 1) {
        Ok(pass) => pass,
        Err(refusal) => return output::fail(Exit::Failed, &refusal.text),
    };
    let progress = progress_for(args.json);
    let ids = RunIds::default();
    let outcome = research::research(
        client,
        &request,
        Duration::from_secs(timeout),
        Some(&progress),
        &ids,
    )
    .await;
    progress.finish();
    pass.finish(&research::render_outcome(&outcome), &outcome.facts(), false);
    output::outcome(&outcome, Style::new(args.json, args.spotlight), timeout)
}

/// `ask` is `perplexity_agent` run from a terminal.
const ASK_TOOL: &str = "perplexity_agent";

/// The `ask` flags as `perplexity_agent` arguments (flags left out are left out).
fn ask_arguments(args: &AskArgs) -> Map<String, Value> {
    let mut arguments = Map::new();
    arguments.insert("query".into(), json!(args.question.join(" ")));
    if let Some(preset) = &args.preset {
        arguments.insert("preset".into(), json!(preset));
    }
    if let Some(recency) = &args.recency {
        arguments.insert("recency".into(), json!(py_strip(recency)));
    }
    if let Some(domains) = &args.domains {
        let list: Vec<&str> = domains
            .split(',')
            .map(py_strip)
            .filter(|d| !d.is_empty())
            .collect();
        arguments.insert("domains".into(), json!(list));
    }
    arguments.insert("wait".into(), json!(!args.no_wait));
    arguments
}

/// A validation message in the names a person typed: `'preset'` is `--preset` here.
fn cli_names(message: &str) -> String {
    let named = message
        .replace("'query'", "the question")
        .replace("'preset'", "--preset")
        .replace("'recency'", "--recency")
        .replace("'domains'", "--domains")
        .replace("'wait'", "--no-wait");
    let mut chars = named.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

async fn result(args: ResultArgs, client: &PerplexityClient, guard: &Arc<Guard>) -> i32 {
    let params = json!({"response_id": args.response_id, "wait": args.wait});
    let id = match check_run_id(&args.response_id) {
        Ok(id) => id,
        Err(message) => return rejected(guard, "result", &params, &message),
    };
    let pass = match guard.admit(FrontEnd::Cli, "result", &params, 1) {
        Ok(pass) => pass,
        Err(refusal) => return output::fail(Exit::Failed, &refusal.text),
    };
    let wait = args.wait.min(MAX_WAIT_SECONDS);
    let progress = progress_for(args.json);
    let sink = (wait > 0).then_some(&progress as &dyn crate::perplexity::wait::ProgressSink);
    let outcome = research::collect(client, &id, wait, MAX_WAIT_SECONDS, sink).await;
    progress.finish();
    pass.finish(&research::render_outcome(&outcome), &outcome.facts(), false);
    output::outcome(&outcome, Style::new(args.json, args.spotlight), wait)
}

async fn cancel(args: CancelArgs, client: &PerplexityClient, guard: &Arc<Guard>, wait: u64) -> i32 {
    let params = json!({"response_id": args.response_id});
    let id = match check_run_id(&args.response_id) {
        Ok(id) => id,
        Err(message) => return rejected(guard, "cancel", &params, &message),
    };
    let pass = match guard.admit(FrontEnd::Cli, "cancel", &params, 1) {
        Ok(pass) => pass,
        Err(refusal) => return output::fail(Exit::Failed, &refusal.text),
    };
    let outcome = research::cancel(client, &id, wait).await;
    let facts = CallFacts {
        run_id: Some(id.clone()),
        ..CallFacts::default()
    };
    pass.finish(
        &research::render_cancel(&id, outcome.clone()),
        &facts,
        false,
    );
    output::cancel(&id, outcome, args.json)
}

/// `models`: the catalogue, one `provider/model` id a line (the owner after a tab).
async fn models(args: ModelsArgs, client: &PerplexityClient, guard: &Arc<Guard>, wait: u64) -> i32 {
    let params = json!({});
    let pass = match guard.admit(FrontEnd::Cli, "models", &params, 1) {
        Ok(pass) => pass,
        Err(refusal) => return output::fail(Exit::Failed, &refusal.text),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait);
    let listed = client.list_models(deadline).await;
    let rendered = match &listed {
        Ok(models) => ToolOutput::ok(format!("{} models", models.len())),
        Err(e) => ToolOutput::error(e.to_string()),
    };
    pass.finish(&rendered, &CallFacts::default(), false);
    output::models(listed, args.json)
}

async fn fetch(args: FetchArgs, config: &Config, guard: &Arc<Guard>) -> i32 {
    use crate::tools::fetch as tool;
    let params = json!({"urls": args.urls, "max_urls": args.urls.len()});
    let call = match params.as_object().map(tool::validate) {
        Some(Ok(call)) => call,
        Some(Err(message)) => return rejected(guard, "fetch", &params, &message),
        None => return usage_error("no URL given"),
    };
    let pass = match guard.admit(FrontEnd::Cli, "fetch", &params, call.urls.len() as u32) {
        Ok(pass) => pass,
        Err(refusal) => return output::fail(Exit::Failed, &refusal.text),
    };
    let fetcher =
        crate::fetch::Fetcher::new(config.fetch.clone(), Arc::new(crate::fetch::SystemResolver));
    let fetched = tool::run(&fetcher, &call).await;
    let rendered = tool::render(&fetched);
    let facts = CallFacts {
        security_flags: tool::flags(&fetched),
        fetch_allow_private: config.fetch.allow_private.lifted(),
        ..CallFacts::default()
    };
    pass.finish(&rendered, &facts, false);
    output::fetched(&fetched, &rendered, args.json)
}

async fn search(args: SearchArgs, client: &PerplexityClient, guard: &Arc<Guard>, wait: u64) -> i32 {
    use crate::tools::search as tool;
    let mut params = json!({"query": args.query.join(" ")});
    if let Some(n) = args.max_results {
        params["max_results"] = json!(n);
    }
    if let Some(r) = &args.recency {
        params["recency"] = json!(r);
    }
    if let Some(m) = &args.mode {
        params["search_mode"] = json!(m);
    }
    if let Some(d) = &args.domains {
        params["domains"] = json!(
            d.split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .collect::<Vec<_>>()
        );
    }
    let query = match params.as_object().map(tool::validate) {
        Some(Ok(query)) => query,
        Some(Err(message)) => return rejected(guard, "search", &params, &message),
        None => return usage_error("no query given"),
    };
    let pass = match guard.admit(FrontEnd::Cli, "search", &params, 1) {
        Ok(pass) => pass,
        Err(refusal) => return output::fail(Exit::Failed, &refusal.text),
    };
    // A person at a terminal waits longer than an MCP client's tool-call limit.
    let outcome = tool::run(client, &query, wait.max(DEFAULT_CLI_TIMEOUT_SECONDS)).await;
    let (rendered, flags) = tool::render(&outcome);
    let facts = CallFacts {
        security_flags: flags,
        ..CallFacts::default()
    };
    pass.finish(&rendered, &facts, false);
    output::searched(&outcome, &rendered, args.json)
}

async fn research_command(
    args: ResearchArgs,
    client: &PerplexityClient,
    guard: &Arc<Guard>,
) -> i32 {
    use crate::tools::deep_research as tool;
    let params =
        json!({"question": args.question.join(" "), "num_subquestions": args.subquestions});
    let call = match params.as_object().map(tool::validate) {
        Some(Ok(call)) => call,
        Some(Err(message)) => return rejected(guard, "research", &params, &message),
        None => return usage_error("no question given"),
    };
    let pass = match guard.admit(FrontEnd::Cli, "research", &params, call.cost()) {
        Ok(pass) => pass,
        Err(refusal) => return output::fail(Exit::Failed, &refusal.text),
    };
    let progress = Arc::new(progress_for(args.json));
    let ctx = crate::tools::CallContext {
        progress: Some(progress.clone()),
        ..crate::tools::CallContext::default()
    };
    let budget = Duration::from_secs(args.timeout.clamp(1, MAX_WAIT_SECONDS));
    let (rendered, flags, id) = tool::run(client, &call, budget, &ctx).await;
    progress.finish();
    let facts = CallFacts {
        run_id: id,
        security_flags: flags,
        ..CallFacts::default()
    };
    pass.finish(&rendered, &facts, false);
    output::report(&rendered, args.json)
}
