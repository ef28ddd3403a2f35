//! The human command line: argument parsing, and the `ask` / `result` / `cancel`
//! commands. They call the same operations as the MCP tools (`tools::research`), so
//! behaviour cannot drift; only the rendering differs: progress on stderr, a clean
//! answer on stdout (so `> answer.md` works), spotlighting off unless asked.
//!
//! Touches: stdout/stderr, and the network only through `tools::`/`perplexity::`.

mod clients;
pub mod demo;
mod doctor;
mod gateway;
pub mod healthcheck;
mod install;
pub mod output;
mod team;
mod usage;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::call::{CallFacts, FrontEnd, Refusal, ToolOutput};
use crate::config::{Config, DEFAULT_CLI_TIMEOUT_SECONDS, HttpConfig, MAX_WAIT_SECONDS};
use crate::guard::Guard;
use crate::perplexity::PerplexityClient;
use crate::perplexity::client::{RETRY_WAITS, RetryWait};
use crate::text::{PutSome, py_strip};
use crate::tools::{CallContext, Done, Outcome, RunIds, Tools};
pub use output::{CliError, Ended, Exit};
use output::{CliProgress, Style};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(
    name = "perplexity-agent",
    version,
    about = "Perplexity's research APIs for AI agents and people: an MCP server (stdio or HTTP), a command line, a terminal workspace and a gateway to other MCP servers.",
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
    /// List your MCP tasks: research that clients left running on this machine's store.
    Tasks(TasksArgs),
    /// List Perplexity's model catalogue: the valid provider/model names (no key needed).
    Models(ModelsArgs),
    /// Downstream MCP servers whose tools this server offers (the gateway).
    #[command(subcommand)]
    Gateway(gateway::GatewayCommand),
    /// What the research cost: the spend ledger, by caller, tool, day or model.
    Usage(usage::UsageArgs),
    /// Named clients of `serve --http`: each with its own token, tools and rate.
    #[command(subcommand)]
    Clients(team::ClientsCommand),
    /// Add this server to an MCP client's config file (merged, backed up).
    Install(install::InstallArgs),
    /// Check the set-up: key, store, gateway secrets, client entries, both protocol eras.
    Doctor(doctor::DoctorArgs),
    /// The terminal research workspace: answers with sources beside the pages you open.
    Tui,
    /// Exit 0 if the `serve --http` on this machine answers /healthz (for containers).
    Healthcheck(healthcheck::HealthcheckArgs),
    /// Try it without a key: a stand-in for the Perplexity API on 127.0.0.1 (made-up answers).
    Demo(demo::DemoArgs),
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
    /// The question (several words are joined with spaces); `-` or none reads it from
    /// standard input when that is not a terminal.
    #[arg(value_name = "QUESTION")]
    pub question: Vec<String>,
    /// Research depth: fast, low, medium (default), high, xhigh, wide-research…
    #[arg(long)]
    pub preset: Option<String>,
    /// A model instead of a preset, in provider/model form (`perplexity-agent models`
    /// lists them), e.g. openai/gpt-5.5: one quick grounded answer, always waited for.
    #[arg(long, value_name = "PROVIDER/MODEL", conflicts_with_all = ["preset", "no_wait"])]
    pub model: Option<String>,
    /// Only sources published within: hour, day, week, month or year.
    #[arg(long)]
    pub recency: Option<String>,
    /// Comma-separated domains to allow, or (each prefixed with '-') to exclude.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub domains: Option<String>,
    /// Seconds to wait for the answer (default 300, at most 1800); the run keeps going
    /// after that.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub timeout: Option<i64>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Wrap the answer in the untrusted-content delimiter (as MCP clients get it).
    #[arg(long)]
    pub spotlight: bool,
    /// Start the run, print its id and exit (exit code 3).
    #[arg(long, conflicts_with = "timeout")]
    pub no_wait: bool,
    /// Run anew even if the research cache holds a recent answer to the same question.
    #[arg(long)]
    pub fresh: bool,
}

#[derive(Debug, Args)]
pub struct TasksArgs {
    /// The tasks of `serve --http` callers instead of those created over stdio by this
    /// user: the single PERPLEXITY_HTTP_AUTH_TOKEN's, or with --client / --subject one
    /// named client's or OAuth subject's.
    #[arg(long)]
    pub http: bool,
    /// With PERPLEXITY_HTTP_CLIENTS_FILE: the tasks of this named client.
    #[arg(
        long,
        requires = "http",
        conflicts_with = "subject",
        value_name = "NAME"
    )]
    pub client: Option<String>,
    /// With OAuth: the tasks of this token subject (`sub`) at PERPLEXITY_OAUTH_ISSUER.
    #[arg(long, requires = "http", value_name = "SUB")]
    pub subject: Option<String>,
    /// Print one JSON document instead of one task a line.
    #[arg(long)]
    pub json: bool,
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
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub wait: i64,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Wrap the answer in the untrusted-content delimiter (as MCP clients get it).
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
    /// Seconds to wait for the report (default 300, at most 1800).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub timeout: Option<i64>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Run anew even if the research cache holds a recent report on the same question.
    #[arg(long)]
    pub fresh: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to search for (several words are joined with spaces); `-` reads it from
    /// standard input.
    #[arg(value_name = "QUERY", required = true)]
    pub query: Vec<String>,
    /// How many results (1-20; with --type people, up to 50).
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
    /// What to find: web pages (default) or people.
    #[arg(long = "type", value_name = "TYPE")]
    pub search_type: Option<String>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Search anew even if the research cache holds recent results for the same query.
    #[arg(long)]
    pub fresh: bool,
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
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The command line, parsed; a mistake ends the process with clap's message (exit 2).
/// An unknown command's tip names only the closest commands: clap's own lists every
/// command its similarity threshold lets through, the best last (`serch` got `serve`,
/// `fetch` and `research` before `search`).
pub fn parse() -> Cli {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(mut error) => {
            if error.kind() == ErrorKind::InvalidSubcommand
                && let (Some(ContextValue::String(typed)), Some(ContextValue::Strings(tips))) = (
                    error.get(ContextKind::InvalidSubcommand),
                    error.get(ContextKind::SuggestedSubcommand),
                )
            {
                let closest = closest(typed, tips);
                error.insert(
                    ContextKind::SuggestedSubcommand,
                    ContextValue::Strings(closest),
                );
            }
            error.exit()
        }
    }
}

/// Of clap's candidates, those fewest edits away from `typed` (optimal string alignment:
/// a swap of neighbours is one edit, as typos are).
fn closest(typed: &str, candidates: &[String]) -> Vec<String> {
    let scored: Vec<(usize, &String)> = candidates
        .iter()
        .map(|c| (strsim::osa_distance(typed, c), c))
        .collect();
    let best = scored.iter().map(|(d, _)| *d).min().unwrap_or(0);
    scored
        .into_iter()
        .filter(|(d, _)| *d == best)
        .map(|(_, c)| c.clone())
        .collect()
}

/// Runs a CLI command: `Ok` with the exit code once its output is printed, or the error
/// `main` prints.
pub async fn run(command: Command, config: Config) -> Ended {
    // The clients file needs no key, store or service.
    let command = match command {
        Command::Clients(command) => return team::run(command),
        command => command,
    };
    let base = config.api.base.as_str().trim_end_matches('/');
    if base != crate::perplexity::config::PERPLEXITY_BASE {
        output::note_api_base(base);
    }
    if let Some(warning) = config.fetch.allow_private.warning() {
        // A server's log line; a person at a terminal gets a sentence.
        match command {
            Command::Serve(_) => tracing::warn!("{warning}"),
            // The workspace shows it in its chat: a line here would stay on the screen.
            Command::Tui => {}
            _ => output::warn(&warning),
        }
    }
    let services = crate::app::Services::build(&config).map_err(|e| CliError::config(&e))?;
    let guard = services.guard.clone();
    let tools = services.tools;
    let code = match command {
        Command::Ask(args) => ask(args, &tools, &guard).await,
        Command::Result(args) => result(args, &tools).await,
        Command::Cancel(args) => cancel(args, &tools).await,
        Command::Fetch(args) => fetch(args, &tools, &guard).await,
        Command::Search(args) => search(args, &tools, config.wait_seconds).await,
        Command::Research(args) => research_command(args, &tools).await,
        Command::Models(args) => models(args, tools.client(), &guard, config.wait_seconds).await,
        Command::Gateway(command) => gateway::run(command, &config).await,
        Command::Clients(command) => team::run(command),
        Command::Install(args) => install::run(args),
        Command::Healthcheck(args) => healthcheck::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Doctor(args) => doctor::run(args, &config).await,
        Command::Tasks(args) => tasks_command(args, &tools).await,
        Command::Usage(args) => usage::run(args, &tools).await,
        // Runs left going upstream are named as `ask` names them after Ctrl-C, once the
        // terminal is back: each id on stdout, how to collect it on stderr, exit 130.
        Command::Tui => match crate::tui::run(&config).await {
            Ok(left) if left.is_empty() => Ok(Exit::Success),
            Ok(left) => output::interrupted(&left, false),
            Err(e) => Err(CliError::config(&e)),
        },
        Command::Serve(args) => {
            let http = args
                .http
                .then(|| HttpConfig::from_env(&args.bind, args.allow_remote))
                .transpose()
                .map_err(|e| CliError::config(e.to_string()))?;
            // Someone who ran the bare command at a prompt sees a silent process; an MCP
            // client never has a terminal on stdin.
            if http.is_none() && std::io::stdin().is_terminal() {
                output::warn(
                    "this is the MCP server on stdin/stdout, waiting for JSON-RPC from an MCP client (Ctrl-D ends it). For a person: perplexity-agent ask \"…\", perplexity-agent tui, or perplexity-agent --help.",
                );
            }
            let services = crate::app::Services {
                guard: guard.clone(),
                tools,
            };
            // The server logs its own failure (a port in use) as it happens.
            match crate::app::serve(&config, services, http).await {
                0 => Ok(Exit::Success),
                4 => Ok(Exit::Config),
                _ => Ok(Exit::Failed),
            }
        }
    };
    guard.flush();
    code
}

/// When the configuration does not load: `install` does not need it and still runs;
/// `doctor` reports the problem as its failing check (its job is to say what is wrong);
/// everything else stops with the message (exit 4).
pub fn run_unconfigured(command: Command, problem: &str) -> Ended {
    match command {
        Command::Install(args) => install::run(args),
        Command::Healthcheck(args) => healthcheck::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Clients(command) => team::run(command),
        Command::Doctor(args) => doctor::unconfigured(problem, args.json),
        _ => Err(CliError::config(problem)),
    }
}

/// Validation failures are audited like any call (they cost no rate-limit token).
fn rejected(guard: &Guard, tool: &str, params: &Value, message: &str) -> Ended {
    let local = crate::call::Caller::local();
    guard.rejected(
        crate::guard::Charge::of(FrontEnd::Cli, &local),
        tool,
        params,
        &ToolOutput::error(message),
    );
    Err(CliError::usage(message))
}

fn progress_for(json: bool) -> CliProgress {
    CliProgress::new(std::io::stderr().is_terminal() && !json, json)
}

async fn ask(args: AskArgs, tools: &Tools, guard: &Guard) -> Ended {
    // The arguments an MCP client would send the tool, through the same entry point: one
    // set of bounds and messages (in the CLI's own names), one tool name in the audit
    // log, the same panic containment, whichever front end asked.
    let mut args = args;
    question_from_stdin(&mut args.question).map_err(CliError::usage)?;
    let tool = ask_tool(&args);
    let params = ask_arguments(&args);
    let refuse = |message: &str| rejected(guard, tool, &Value::Object(params.clone()), message);
    let timeout = match seconds("--timeout", args.timeout, 1) {
        Ok(t) => t,
        Err(message) => return refuse(&message),
    };
    if params
        .get("domains")
        .is_some_and(|d| d.as_array().is_some_and(Vec::is_empty))
    {
        return refuse(NO_DOMAIN);
    }
    warn_unknown_preset(args.preset.as_deref());
    let style = Style::new(args.json, args.spotlight);
    // `--no-wait` names the run in its answer a moment later: announcing it too said
    // "started" twice.
    let progress = match args.no_wait {
        true => progress_for(args.json),
        false => progress_for(args.json).announcing(),
    };
    call(
        tools,
        tool,
        &params,
        Some(timeout),
        Some(progress),
        |outcome, full| match outcome {
            Outcome::Research(outcome) => Some(output::outcome(&outcome, style, timeout, &full)),
            _ => None,
        },
    )
    .await
}

/// One CLI command as one tool call: accepted (validation, rate limit, audit), run with
/// the command's wait and progress (finished before anything is printed), and its typed
/// outcome handed to `render` (`None`: not the outcome this command renders); a refusal
/// or a contained failure becomes the command's error.
async fn call(
    tools: &Tools,
    tool: &str,
    args: &Map<String, Value>,
    wait: Option<u64>,
    progress: Option<CliProgress>,
    render: impl FnOnce(Outcome, ToolOutput) -> Option<Ended>,
) -> Ended {
    let progress = progress.map(Arc::new);
    let finish = || {
        if let Some(progress) = &progress {
            progress.finish();
        }
    };
    let local = crate::call::Caller::local();
    let admitted = tools
        .accept(
            crate::guard::Charge::of(FrontEnd::Cli, &local),
            tool,
            args,
            None,
        )
        .await
        .map_err(|refusal| {
            finish();
            match refusal {
                Refusal::Invalid(refused) => CliError::usage(refused.render(&CliNames)),
                refusal => CliError::failed(refusal.message()),
            }
        })?;
    // Ctrl-C or SIGTERM stops the wait, never the run upstream (the lines printed then
    // say how to collect or stop it).
    let interrupt = CancellationToken::new();
    crate::signals::watch(interrupt.clone());
    let run_ids = match &progress {
        Some(p) => RunIds::forwarding(p.clone()),
        None => RunIds::default(),
    };
    let ctx = CallContext {
        progress: progress
            .clone()
            .map(|p| p as Arc<dyn crate::perplexity::wait::ProgressSink>),
        run_ids: Arc::new(run_ids),
        cancel: interrupt,
        wait: wait.map(Duration::from_secs),
        task_id: Arc::default(),
    };
    // A long wait before a retry (a Retry-After) is said, not left a silent spinner.
    let told = progress.clone();
    let tell: Arc<dyn Fn(&RetryWait) + Send + Sync> =
        Arc::new(move |wait: &RetryWait| match &told {
            Some(progress) => progress.retrying(wait),
            None => output::retrying(wait),
        });
    let done = RETRY_WAITS
        .scope(tell, tools.complete(admitted, &ctx))
        .await;
    finish();
    let json = progress.as_ref().is_some_and(|p| p.json());
    match done {
        Some(Done {
            outcome: Outcome::Output,
            output,
            ..
        }) => Err(CliError::failed(output.text)),
        Some(Done {
            outcome: Outcome::OverBudget,
            output,
            ..
        }) => Err(CliError::new(output::Exit::OverBudget, output.text)),
        Some(Done {
            outcome: Outcome::Served,
            full,
            ..
        }) => {
            output::served(&full, json);
            Ok(output::Exit::Success)
        }
        Some(done) => {
            let text = done.full.text.clone();
            let ended = render(done.outcome, done.full).unwrap_or_else(|| Err(unexpected()));
            output::cost(&text);
            ended
        }
        None => output::interrupted(&ctx.run_ids.snapshot(), json),
    }
}

/// `ask -`, or `ask` with no words and a pipe on stdin: the question is read from
/// standard input (bounded: past the tool's own limit it is refused there, by length).
fn question_from_stdin(words: &mut Vec<String>) -> Result<(), String> {
    use std::io::Read;
    let dash = words.len() == 1 && words[0] == "-";
    let piped = words.is_empty() && !std::io::stdin().is_terminal();
    if !dash && !piped {
        return Ok(());
    }
    // Four bytes a character is the most UTF-8 needs: enough to see the limit passed.
    let limit = (crate::tools::research::MAX_QUERY_CHARS as u64 + 1) * 4;
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            format!(
                "Cannot read the question from standard input: {}.",
                e.kind()
            )
        })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| "The question on standard input is not UTF-8 text.".to_owned())?;
    *words = vec![text.trim().to_owned()];
    Ok(())
}

/// `--domains ,,,` names nothing: refusing beats silently searching everywhere.
const NO_DOMAIN: &str =
    "--domains names no domain: give a comma-separated list, e.g. --domains example.com,-spam.com.";

/// `ask` is `perplexity_agent` run from a terminal; `ask --model` is `perplexity_ask`,
/// the tool that takes a model.
fn ask_tool(args: &AskArgs) -> &'static str {
    match args.model {
        Some(_) => "perplexity_ask",
        None => "perplexity_agent",
    }
}

/// The `ask` flags as the tool's arguments (flags left out are left out).
fn ask_arguments(args: &AskArgs) -> Map<String, Value> {
    let mut arguments = Map::new();
    arguments.insert("query".into(), json!(args.question.join(" ")));
    arguments.put_some("preset", args.preset.as_ref());
    arguments.put_some("model", args.model.as_ref());
    arguments.put_some("recency", args.recency.as_deref().map(py_strip));
    if let Some(domains) = &args.domains {
        let list: Vec<&str> = domains
            .split(',')
            .map(py_strip)
            .filter(|d| !d.is_empty())
            .collect();
        arguments.insert("domains".into(), json!(list));
    }
    if args.model.is_none() {
        arguments.insert("wait".into(), json!(!args.no_wait));
    }
    if args.fresh {
        arguments.insert("fresh".into(), json!(true));
    }
    arguments
}

/// A preset name this version has never heard of is most likely a typo, but Perplexity
/// adds presets and takes any name (refusing it would lock out the next one): the person
/// is told before the request goes, and the run is sent as asked.
fn warn_unknown_preset(preset: Option<&str>) {
    use crate::perplexity::agent::{CURRENT_PRESETS, OLDER_PRESETS};
    let Some(preset) = preset.map(py_strip).filter(|p| !p.is_empty()) else {
        return;
    };
    if !CURRENT_PRESETS.contains(&preset) && !OLDER_PRESETS.contains(&preset) {
        output::warn(&format!(
            "'{}' is not a preset this version knows ({}); it is sent as given, since Perplexity adds presets.",
            crate::text::inert_line(preset),
            CURRENT_PRESETS.join(", ")
        ));
    }
}

/// Tool arguments in the names a person typed: `'preset'` is `--preset` here, the
/// positional words are "the query" (ask, search) and "the question" (research), and a
/// run id is the one `ask` printed. An argument missing here keeps its tool name.
struct CliNames;

impl crate::call::Names for CliNames {
    fn arg(&self, name: &str) -> Option<String> {
        let named = match name {
            "query" => "the query",
            "question" => "the question",
            "preset" => "--preset",
            "model" => "--model",
            "recency" => "--recency",
            "domains" => "--domains",
            "wait_seconds" => "--wait",
            "wait" => "--no-wait",
            "max_results" => "--max-results",
            "search_mode" => "--mode",
            "search_type" => "--type",
            "urls" => "the list of URLs",
            "max_urls" => "the number of URLs",
            "num_subquestions" => "--subquestions",
            _ => return None,
        };
        Some(named.to_owned())
    }

    fn id_from(&self, tool: &str) -> Option<String> {
        (tool == "perplexity_agent")
            .then(|| "the id that `perplexity-agent ask` printed".to_owned())
    }
}

/// A tool that answered with an outcome its command does not render: a bug, said plainly.
fn unexpected() -> CliError {
    CliError::failed("internal error: the tool answered in an unexpected form")
}

/// A wait in seconds as a person gives it, from `least` to [`MAX_WAIT_SECONDS`] (the
/// default 300 when left out); every command says a bad one in the same words.
fn seconds(flag: &str, given: Option<i64>, least: u64) -> Result<u64, String> {
    let Some(given) = given else {
        return Ok(DEFAULT_CLI_TIMEOUT_SECONDS);
    };
    u64::try_from(given)
        .ok()
        .filter(|s| (least..=MAX_WAIT_SECONDS).contains(s))
        .ok_or_else(|| format!("{flag} must be from {least} to {MAX_WAIT_SECONDS} seconds."))
}

async fn result(args: ResultArgs, tools: &Tools) -> Ended {
    let wait = seconds("--wait", Some(args.wait), 0).map_err(CliError::usage)?;
    let mut params = Map::new();
    params.insert("response_id".into(), json!(args.response_id));
    params.insert("wait_seconds".into(), json!(wait));
    let progress = progress_for(args.json);
    // A person may wait as long as the API allows, not the MCP wait budget.
    let style = Style::new(args.json, args.spotlight);
    call(
        tools,
        "perplexity_agent_result",
        &params,
        Some(MAX_WAIT_SECONDS),
        Some(progress),
        |outcome, full| match outcome {
            Outcome::Research(outcome) => Some(output::outcome(&outcome, style, wait, &full)),
            _ => None,
        },
    )
    .await
}

async fn cancel(args: CancelArgs, tools: &Tools) -> Ended {
    let mut params = Map::new();
    params.insert("response_id".into(), json!(args.response_id));
    // Perplexity answers a finished run and one that never existed alike (400, or 404
    // once it is gone): what this machine saw tells them apart. Read before asking, as
    // the answer is rendered synchronously; it is one local read.
    let finished = finished_here(tools, &args.response_id).await;
    call(
        tools,
        "perplexity_agent_cancel",
        &params,
        None,
        None,
        |outcome, _| match outcome {
            Outcome::Cancel { id, result } => {
                Some(output::cancel(&id, result, finished, args.json))
            }
            _ => None,
        },
    )
    .await
}

/// Whether this machine saw run `id` end: the spend ledger gets a run's row when its
/// final state is learned, and a snapshot is kept only of a settled response. No store
/// (or one that cannot be read) knows nothing; one not yet created is not created here.
async fn finished_here(tools: &Tools, id: &str) -> bool {
    let exists = tools
        .store()
        .config()
        .is_some_and(|config| config.path.exists());
    if !exists {
        return false;
    }
    let run = id.to_owned();
    let in_ledger = tools
        .store()
        .with(move |s| {
            s.ledger_since(0)
                .map(|rows| rows.iter().any(|r| r.request == run))
        })
        .await;
    if matches!(in_ledger, Ok(true)) {
        return true;
    }
    matches!(tools.snapshots().of_response(id).await, Ok(Some(_)))
}

/// `tasks`: the caller's tasks, newest first — the same records `tasks/get` reads, so a
/// person sees what clients left running and which run to collect or stop.
async fn tasks_command(args: TasksArgs, tools: &Tools) -> Ended {
    let caller = if args.http {
        let auth = HttpConfig::from_env("127.0.0.1:0", false)
            .map(|http| http.auth)
            .map_err(|e| CliError::config(e.to_string()))?;
        http_caller(&auth, &args)?.key().to_owned()
    } else {
        crate::call::Caller::local().key().to_owned()
    };
    let tasks = tools
        .store()
        .with(move |s| s.tasks_of(&caller, crate::state::local::MAX_TASKS as usize))
        .await
        .map_err(|e| CliError::config(e.to_string()))?;
    output::tasks(&tasks, args.json)
}

/// Whose tasks `tasks --http` lists: whoever the server would take a request from. The
/// operator names the client or subject; reading the clients file (or knowing the
/// issuer) is what running the server already takes, so this opens nothing new.
fn http_caller(
    auth: &crate::config::HttpAuth,
    args: &TasksArgs,
) -> Result<crate::call::Caller, CliError> {
    use crate::config::HttpAuth;
    let named = args.client.is_some() || args.subject.is_some();
    match (auth, args.client.as_deref(), args.subject.as_deref()) {
        (HttpAuth::Token(digest), None, None) => Ok(crate::call::Caller::single_token(digest)),
        (HttpAuth::Token(_), ..) => Err(CliError::config(
            "--client and --subject name callers of PERPLEXITY_HTTP_CLIENTS_FILE or OAuth; this server takes the single PERPLEXITY_HTTP_AUTH_TOKEN (drop them)".to_owned(),
        )),
        (HttpAuth::Clients(path), Some(name), _) => {
            let file = crate::identity::clients::ClientsFile::load(path)
                .map_err(CliError::config)?;
            file.clients
                .iter()
                .find(|c| c.name == name)
                .map(|c| crate::call::Caller::client(&c.name, &c.created))
                .ok_or_else(|| {
                    CliError::config(format!(
                        "no client named '{}' in {} (`perplexity-agent clients list` shows them)",
                        crate::text::inert_line(name),
                        path.display()
                    ))
                })
        }
        (HttpAuth::Clients(_), ..) => Err(CliError::config(
            "this server has named clients (PERPLEXITY_HTTP_CLIENTS_FILE): say whose tasks with --client NAME".to_owned(),
        )),
        (HttpAuth::OAuth(config), _, Some(subject)) => {
            Ok(crate::call::Caller::subject(&config.issuer, subject))
        }
        (HttpAuth::OAuth(_), ..) => Err(CliError::config(format!(
            "this server takes OAuth tokens: say whose tasks with --subject SUB (a token's `sub`){}",
            if named { ", not --client" } else { "" }
        ))),
    }
}

/// `models`: the catalogue, one `provider/model` id a line (the owner after a tab).
async fn models(
    args: ModelsArgs,
    client: &PerplexityClient,
    guard: &Arc<Guard>,
    wait: u64,
) -> Ended {
    let params = json!({});
    let local = crate::call::Caller::local();
    let pass = guard
        .admit(
            crate::guard::Charge::of(FrontEnd::Cli, &local),
            "models",
            &params,
            1,
        )
        .await
        .map_err(|refusal| CliError::failed(refusal.message()))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait);
    let listed = client.list_models(deadline).await;
    let rendered = match &listed {
        Ok(models) => ToolOutput::ok(format!("{} models", models.len())),
        Err(e) => ToolOutput::error(e.to_string()),
    };
    pass.finish(&rendered, &CallFacts::default(), false);
    output::models(listed, args.json)
}

async fn fetch(args: FetchArgs, tools: &Tools, guard: &Guard) -> Ended {
    // Something that is not a web address at all is a typing mistake (exit 2), not a
    // page that failed to load (exit 1).
    for arg in &args.urls {
        let web = url::Url::parse(arg).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
        if !web {
            // A suggestion only when it is one (never `https://ftp://x.org/`).
            let suggestion = crate::fetch::https_guess(arg)
                .map(|guess| format!(" (did you mean {}?)", crate::text::inert_line(&guess)))
                .unwrap_or_default();
            let message = format!(
                "'{}' is not a web address: fetch takes http:// or https:// URLs{suggestion}.",
                crate::text::inert_line(arg),
            );
            let params = json!({ "urls": args.urls });
            return rejected(guard, "fetch_url", &params, &message);
        }
    }
    let mut params = Map::new();
    params.insert("urls".into(), json!(args.urls));
    params.insert("max_urls".into(), json!(args.urls.len()));
    call(
        tools,
        "fetch_url",
        &params,
        None,
        None,
        |outcome, full| match outcome {
            Outcome::Fetch(fetched) => Some(output::fetched(&fetched, &full, args.json)),
            _ => None,
        },
    )
    .await
}

async fn search(args: SearchArgs, tools: &Tools, wait: u64) -> Ended {
    // `search -` reads the query from standard input, as `ask -` does.
    let mut query = args.query.clone();
    question_from_stdin(&mut query).map_err(CliError::usage)?;
    let mut params = Map::new();
    params.insert("query".into(), json!(query.join(" ")));
    params.put_some("max_results", args.max_results);
    params.put_some("recency", args.recency.as_ref());
    params.put_some("search_mode", args.mode.as_ref());
    params.put_some("search_type", args.search_type.as_ref());
    if let Some(d) = &args.domains {
        let list: Vec<&str> = d
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .collect();
        if list.is_empty() {
            return Err(CliError::usage(NO_DOMAIN));
        }
        params.insert("domains".into(), json!(list));
    }
    // A person at a terminal waits longer than an MCP client's tool-call limit.
    let wait = wait.max(DEFAULT_CLI_TIMEOUT_SECONDS);
    call(
        tools,
        "perplexity_search",
        &params,
        Some(wait),
        None,
        |outcome, full| match outcome {
            Outcome::Search(outcome) => Some(output::searched(&outcome, &full, args.json)),
            _ => None,
        },
    )
    .await
}

async fn research_command(args: ResearchArgs, tools: &Tools) -> Ended {
    let mut params = Map::new();
    params.insert("question".into(), json!(args.question.join(" ")));
    params.insert("num_subquestions".into(), json!(args.subquestions));
    let wait = seconds("--timeout", args.timeout, 1).map_err(CliError::usage)?;
    let progress = progress_for(args.json).announcing();
    call(
        tools,
        "deep_research",
        &params,
        Some(wait),
        Some(progress),
        |outcome, full| match outcome {
            Outcome::Report { report, stop } => Some(output::report(
                &full,
                report.as_deref(),
                stop.as_ref(),
                args.json,
            )),
            _ => None,
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    //! The CLI's own decisions that no subprocess test reaches cheaply; what a user sees
    //! is in tests/e2e (the binary as a subprocess).
    use super::*;
    use crate::call::Caller;
    use crate::config::HttpAuth;

    fn args(client: Option<&str>, subject: Option<&str>) -> TasksArgs {
        TasksArgs {
            http: true,
            json: false,
            client: client.map(str::to_owned),
            subject: subject.map(str::to_owned),
        }
    }

    #[test]
    fn tasks_http_lists_the_caller_the_server_would_see() {
        let oauth = HttpAuth::OAuth(crate::identity::OAuthConfig {
            issuer: "https://id.example".to_owned(),
            audience: "https://mcp.example/mcp".to_owned(),
            jwks_url: None,
            subject_rate: None,
        });
        let who = http_caller(&oauth, &args(None, Some("alice"))).ok();
        assert_eq!(who, Some(Caller::subject("https://id.example", "alice")));
        assert!(http_caller(&oauth, &args(None, None)).is_err());
        let token = HttpAuth::Token([7; 32]);
        assert_eq!(
            http_caller(&token, &args(None, None)).ok(),
            Some(Caller::single_token(&[7; 32]))
        );
        assert!(http_caller(&token, &args(Some("alice"), None)).is_err());
    }
}
