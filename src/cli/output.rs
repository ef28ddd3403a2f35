//! CLI rendering: answers on stdout, everything else on stderr, and the exit codes of
//! docs/cli.md (0 success, 1 failed/cancelled, 2 usage, 3 still running, 4 config/key).
//! The one module allowed to print to stdout: only CLI commands reach it, never `serve`.

#![allow(clippy::print_stdout)]

use std::io::Write;

/// A line on stdout. A reader that went away (`| head`) is not an error worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// A line on stderr, likewise never a panic.
macro_rules! note {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use serde_json::{Value, json};

use crate::call::ToolOutput;
use crate::guard::spotlight::spotlight;
use crate::perplexity::ApiError;
use crate::perplexity::agent::CancelOutcome;
use crate::perplexity::client::RetryWait;
use crate::perplexity::wait::{ProgressSink, RunIdSink, WaitError, WaitErrorKind};
use crate::text::inert_line;
use crate::tools::render;
use crate::tools::research::ResearchOutcome;

const PREFIX: &str = "[perplexity-agent]";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    Failed = 1,
    Usage = 2,
    StillRunning = 3,
    Config = 4,
    /// A budget refused the call before anything was sent to Perplexity.
    OverBudget = 5,
    /// The shell's code for a process ended by SIGINT (128 + 2).
    Interrupted = 130,
}

impl Exit {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// How a command ended: `Ok` once everything it has to say is printed (the exit code
/// tells a script how it went), `Err` with the one sentence `main` prints for it.
pub type Ended = Result<Exit, CliError>;

/// A command that could not do its job, and what to tell the person: printed once, by
/// `main`, as `perplexity-agent: …` on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    exit: Exit,
    message: String,
}

impl CliError {
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        CliError {
            exit,
            message: message.into(),
        }
    }

    /// The command line itself was wrong (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        CliError::new(Exit::Usage, message)
    }

    /// The work failed (exit 1).
    pub fn failed(message: impl Into<String>) -> Self {
        CliError::new(Exit::Failed, message)
    }

    /// The set-up is wrong: configuration, the key, the store (exit 4).
    pub fn config(message: impl Into<String>) -> Self {
        CliError::new(Exit::Config, message)
    }

    /// Prints it and gives the exit code: `main`'s one way to end a failed command.
    pub fn report(&self) -> i32 {
        note!("perplexity-agent: {}", self.message);
        self.exit.code()
    }
}

pub fn warn(message: &str) {
    note!("perplexity-agent: warning: {message}");
}

#[derive(Debug, Clone, Copy)]
pub struct Style {
    json: bool,
    spotlight: bool,
}

impl Style {
    pub fn new(json: bool, spotlight: bool) -> Self {
        Style { json, spotlight }
    }
}

/// Progress on stderr: a spinner on a terminal, plain `[perplexity-agent] …` lines
/// otherwise (logs, pipes, CI).
pub struct CliProgress {
    spinner: Option<ProgressBar>,
    quiet: Mutex<bool>,
    /// `--json`: an interruption is reported as JSON on stdout too.
    json: bool,
    /// Name each run as it is created (the commands that start runs; `result` was given
    /// its id).
    announce: bool,
}

impl CliProgress {
    pub fn new(terminal: bool, json: bool) -> Self {
        let spinner = terminal.then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_draw_target(ProgressDrawTarget::term_like_with_hz(
                Box::new(SpinnerLine),
                20,
            ));
            // The clock counts up on its own: Perplexity's progress comes only with polls.
            // A long message is cut to the line (`wide_msg`): a wrapped line would not be
            // counted as two by the narrower width `SpinnerLine` reports.
            if let Ok(style) =
                ProgressStyle::with_template("{spinner} {elapsed} {prefix}{wide_msg}")
            {
                bar.set_style(style);
            }
            bar.set_message("starting research…");
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        CliProgress {
            spinner,
            quiet: Mutex::new(false),
            json,
            announce: false,
        }
    }

    /// For commands that start runs: each is named the moment it exists.
    pub fn announcing(self) -> Self {
        CliProgress {
            announce: true,
            ..self
        }
    }

    pub fn json(&self) -> bool {
        self.json
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.spinner {
            bar.finish_and_clear();
        }
        if let Ok(mut quiet) = self.quiet.lock() {
            *quiet = true;
        }
    }
}

/// Columns left free at the end of the spinner's line.
const ECHO_ROOM: u16 = 2;

/// Where the spinner draws: stderr, said to be [`ECHO_ROOM`] columns narrower than the
/// terminal. indicatif pads its line to the width it is given, and at the full width the
/// `^C` a terminal echoes for Ctrl-C wrapped onto a line of its own: clearing "the
/// spinner's line" then cleared the echo's, and the spinner stayed on screen above the
/// lines that say how to collect the run. With room to spare the echo stays on the
/// spinner's line, and is cleared with it.
#[derive(Debug)]
struct SpinnerLine;

impl SpinnerLine {
    fn escape(&self, n: usize, code: char) -> std::io::Result<()> {
        match n {
            0 => Ok(()),
            n => self.write_str(&format!("\x1b[{n}{code}")),
        }
    }
}

impl TermLike for SpinnerLine {
    fn width(&self) -> u16 {
        crossterm::terminal::size()
            .map_or(80, |(cols, _)| cols)
            .saturating_sub(ECHO_ROOM)
            .max(1)
    }

    fn height(&self) -> u16 {
        crossterm::terminal::size().map_or(24, |(_, rows)| rows)
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.escape(n, 'A')
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.escape(n, 'B')
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.escape(n, 'C')
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.escape(n, 'D')
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_str(&format!("{s}\n"))
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        std::io::stderr().write_all(s.as_bytes())
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.write_str("\r\x1b[2K")
    }

    fn flush(&self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl ProgressSink for CliProgress {
    fn progress(&self, _elapsed: f64, summary: &str) {
        if self.quiet.lock().map(|q| *q).unwrap_or(true) {
            return;
        }
        match &self.spinner {
            // The spinner's clock shows the time; the summary's own stops between polls.
            Some(bar) => bar.set_message(without_elapsed(summary)),
            None => note!("{PREFIX} {summary}"),
        }
    }
}

impl CliProgress {
    /// A wait before a retry: on the spinner, or as a line when there is none.
    pub fn retrying(&self, wait: &RetryWait) {
        if self.quiet.lock().map(|q| *q).unwrap_or(true) {
            return;
        }
        match &self.spinner {
            Some(bar) => bar.set_message(retry_text(wait)),
            None => retrying(wait),
        }
    }
}

/// A wait before a retry, as a line on stderr.
/// What a call cost (the last `Cost: …` line of its tool result), on stderr: the answer
/// on stdout stays the answer. A hit of the research cache is told to a person as a flag.
pub fn cost(full_text: &str) {
    if let (_, Some(said)) = ToolOutput::split_cost(full_text) {
        let said = said.replace("fresh: true", "--fresh");
        note!("{PREFIX} cost: {said}");
    }
}

/// An answer the research cache served without its typed form (a search, a report): its
/// text (or, with `--json`, its structured result) as the tool gave it, and the cost line.
pub fn served(output: &ToolOutput, json: bool) {
    match (&output.structured, json) {
        (Some(structured), true) => document(structured),
        _ => lines(ToolOutput::split_cost(&output.text).0),
    }
    cost(&output.text);
}

pub fn retrying(wait: &RetryWait) {
    note!("{PREFIX} {}", retry_text(wait));
}

fn retry_text(wait: &RetryWait) -> String {
    let why = match wait.status {
        Some(429) => "Perplexity is limiting the request rate (HTTP 429)".to_owned(),
        Some(code) => format!("Perplexity answered HTTP {code}"),
        None => "the connection to Perplexity failed".to_owned(),
    };
    format!(
        "{why}; trying again in {}s (attempt {} of {})…",
        wait.pause.as_secs_f64().ceil() as u64,
        wait.next_attempt,
        wait.attempts
    )
}

/// The run's id is shown from the moment it exists: a person who interrupts, or whose
/// terminal dies, can still collect or stop the run that keeps billing.
impl RunIdSink for CliProgress {
    fn run_id(&self, id: &str) {
        if !self.announce || self.quiet.lock().map(|q| *q).unwrap_or(true) {
            return;
        }
        match &self.spinner {
            Some(bar) => bar.set_prefix(format!("{id} · ")),
            None => note!("{PREFIX} research run {id} started"),
        }
    }
}

/// `status x after 12s; …` → `status x; …`.
fn without_elapsed(summary: &str) -> String {
    match summary.split_once(" after ") {
        Some((head, tail)) => match tail.split_once("s;") {
            Some((secs, rest)) if secs.bytes().all(|b| b.is_ascii_digit()) => {
                format!("{head};{rest}")
            }
            _ => summary.to_owned(),
        },
        None => summary.to_owned(),
    }
}

/// After SIGINT or SIGTERM (exit 130). The runs the call started keep going upstream,
/// and billing, so each is named with how to collect or stop it: the lines of a wait
/// that ran out.
pub fn interrupted(ids: &[String], json: bool) -> Ended {
    if ids.is_empty() {
        note!("perplexity-agent: interrupted.");
    }
    for id in ids {
        if json {
            say!(
                "{}",
                json!({"response_id": id, "status": "interrupted", "still_running": true})
            );
        } else {
            say!("{id}");
            left_running(id);
        }
    }
    Ok(Exit::Interrupted)
}

/// On stderr, for a person whose wait was cut short (Ctrl-C, leaving the workspace): the
/// run goes on, and how to collect or stop it.
pub fn left_running(id: &str) {
    note!(
        "Interrupted; research run {id} may still be running on Perplexity's side and will finish whether or not anyone collects it."
    );
    collect_lines(id);
}

/// `tasks`: one task a line (id, status, tool, run, created), or one JSON document.
pub fn tasks(tasks: &[crate::state::local::TaskRecord], json: bool) -> Ended {
    if json {
        let list: Vec<Value> = tasks
            .iter()
            .map(|t| {
                json!({"task_id": t.id, "status": t.status, "tool": t.tool, "response_id": t.run_id,
                       "status_message": t.status_message, "created_ms": t.created_ms,
                       "updated_ms": t.updated_ms, "ttl_ms": t.ttl_ms})
            })
            .collect();
        say!("{}", json!({ "tasks": list }));
        return Ok(Exit::Success);
    }
    if tasks.is_empty() {
        note!(
            "perplexity-agent: no tasks (MCP clients that use tasks create them; see docs/research-runs.md)."
        );
    }
    for t in tasks {
        let created =
            std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(t.created_ms).unwrap_or(0));
        say!(
            "{}\t{}\t{}\t{}\t{}",
            t.id,
            t.status,
            t.tool,
            t.run_id.as_deref().unwrap_or("-"),
            humantime::format_rfc3339_seconds(created)
        );
    }
    Ok(Exit::Success)
}

/// How to come back to a run that goes on without us.
fn collect_lines(id: &str) {
    note!("Collect it with: perplexity-agent result {id} --wait 300");
    note!("Stop it with:    perplexity-agent cancel {id}");
}

/// Prints an outcome and returns the exit code. `waited` is the wait in seconds; `said`
/// is the tool's own result, whose `cost` (and a hit's `cache`), `citations` and
/// `unresolved` a JSON document carries.
pub fn outcome(outcome: &ResearchOutcome, style: Style, waited: u64, said: &ToolOutput) -> Ended {
    match outcome {
        ResearchOutcome::Finished { id, run } => {
            let status = run.status().unwrap_or("unknown");
            match status {
                "completed" | "incomplete" => {
                    let body = render::answer_body(run, render::Listing::ByPage);
                    let body = if style.spotlight {
                        spotlight(&body)
                    } else {
                        body
                    };
                    if style.json {
                        let mut doc = json!({
                            "response_id": id,
                            "status": status,
                            "answer": render::answer_text(run).unwrap_or_default(),
                            "sources": render::sources(run),
                        });
                        if style.spotlight {
                            doc["answer"] = Value::String(spotlight(
                                doc["answer"].as_str().unwrap_or_default(),
                            ));
                        }
                        let shown = said.structured.as_ref().or(said.view.as_ref());
                        for key in ["cost", "cache", "citations", "unresolved"] {
                            if let Some(v) = shown.and_then(|s| s.get(key)) {
                                doc[key] = v.clone();
                            }
                        }
                        say!("{doc}");
                    } else {
                        if status == "incomplete" {
                            note!("{}", render::INCOMPLETE_NOTE);
                        }
                        say!("{body}");
                        if let Some(unresolved) = render::resolved(run).note() {
                            note!("{unresolved}");
                        }
                    }
                    Ok(Exit::Success)
                }
                _ => {
                    let message = if status == "failed" {
                        render::failed_text(run)
                    } else {
                        render::CANCELLED_TEXT.to_owned()
                    };
                    let message = render::with_id(message, id);
                    if style.json {
                        say!(
                            "{}",
                            json!({"response_id": id, "status": status, "error": message})
                        );
                    } else {
                        note!("{message}");
                    }
                    Ok(Exit::Failed)
                }
            }
        }
        ResearchOutcome::Running { id, progress } => {
            let progress_text = outcome.progress_text().unwrap_or_default();
            if style.json {
                let status = progress
                    .as_ref()
                    .and_then(|(p, _)| p.status.clone())
                    .unwrap_or_else(|| "submitted".to_owned());
                say!(
                    "{}",
                    json!({"response_id": id, "status": status, "still_running": true, "progress": progress_text})
                );
            } else {
                say!("{id}");
                if progress.is_none() {
                    note!("Started research run {id}.");
                } else {
                    note!(
                        "Waited {waited}s; research run {id} is still running on Perplexity's side and will finish whether or not anyone collects it ({progress_text})."
                    );
                }
                collect_lines(id);
            }
            Ok(Exit::StillRunning)
        }
        ResearchOutcome::Failed(error) => {
            let message = error_text(error);
            let exit = if render::is_key_error(error) {
                Exit::Config
            } else {
                Exit::Failed
            };
            if !style.json {
                return Err(CliError::new(exit, message));
            }
            say!(
                "{}",
                json!({"response_id": error.run_id, "status": "error", "error": message})
            );
            Ok(exit)
        }
    }
}

/// The API base when it is not Perplexity's (`PERPLEXITY_API_BASE`): a failure to reach
/// it is then about that address, and the message names it.
static OTHER_API_BASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Set once at start when `PERPLEXITY_API_BASE` points somewhere else than Perplexity.
pub fn note_api_base(base: &str) {
    let _ = OTHER_API_BASE.set(base.to_owned());
}

/// An API error phrased for a shell user: the key's fix is the shell's, not an MCP
/// client's configuration.
fn api_error_text(error: &ApiError) -> String {
    match error {
        ApiError::MissingKey => {
            "PERPLEXITY_API_KEY is not set. Export it in your shell (export PERPLEXITY_API_KEY=…) and try again."
                .to_owned()
        }
        // Retries used up: say what to do, not only what happened.
        ApiError::AttemptsExhausted { last, attempts } => {
            let elsewhere = OTHER_API_BASE.get().filter(|_| matches!(**last, ApiError::Network(_)));
            let advice = match (last.http_status(), elsewhere) {
                (Some(429), _) => "Perplexity is limiting this key's request rate: wait a minute and try again.".to_owned(),
                (_, Some(base)) => format!(
                    "Nothing answered at {base} (PERPLEXITY_API_BASE): check that it is up, or unset PERPLEXITY_API_BASE to use Perplexity."
                ),
                _ => "Perplexity or the network is having trouble: try again shortly.".to_owned(),
            };
            let last = api_error_text(last);
            format!("{} after {attempts} attempts. {advice}", last.trim_end_matches('.'))
        }
        e => e.to_string(),
    }
}

/// A wait error phrased for a shell user (commands instead of tool names).
fn error_text(error: &WaitError) -> String {
    let text = match &error.kind {
        WaitErrorKind::Api(api) => api_error_text(api),
        kind => kind.to_string(),
    };
    render::with_run_hint(error, text, |id| {
        format!(
            "collect it with `perplexity-agent result {id}` or stop it with `perplexity-agent cancel {id}`."
        )
    })
}

/// `cancel`'s answer. `finished`: this machine saw the run end, so Perplexity's "not
/// running" (or "no such run", once it has dropped it) is said as that, not as an id
/// that may never have existed.
pub fn cancel(
    id: &str,
    outcome: Result<CancelOutcome, ApiError>,
    finished: bool,
    json: bool,
) -> Ended {
    let ended = match &outcome {
        Ok(CancelOutcome::NotRunning) if finished => Some(format!(
            "Read it with: perplexity-agent result {id}"
        )),
        Ok(CancelOutcome::NoSuchRun) if finished => Some(
            "Perplexity no longer has it (it expired, or was made with another API key), so `perplexity-agent result` cannot read it either."
                .to_owned(),
        ),
        _ => None,
    };
    if let Some(then) = ended {
        let text =
            format!("Research run {id} has already finished: there is nothing to cancel. {then}");
        if json {
            say!(
                "{}",
                json!({"response_id": id, "status": "already_finished", "message": text})
            );
        } else {
            say!("{text}");
        }
        return Ok(Exit::Success);
    }
    let rendered = crate::tools::research::render_cancel(id, outcome.clone());
    let text = match &outcome {
        Err(ApiError::MissingKey) => error_text(&WaitError::api(ApiError::MissingKey, None)),
        _ => rendered
            .text
            .replace("perplexity_agent_result", "`perplexity-agent result`"),
    };
    let exit = match &outcome {
        Ok(CancelOutcome::NoSuchRun) => Exit::Failed,
        Ok(_) => Exit::Success,
        Err(e) if e.is_key_problem() => Exit::Config,
        Err(_) => Exit::Failed,
    };
    if json {
        let status = match &outcome {
            Ok(CancelOutcome::Requested) => "cancellation_requested",
            Ok(CancelOutcome::NotRunning) => "not_running",
            Ok(CancelOutcome::NoSuchRun) => "not_found",
            Err(_) => "error",
        };
        say!(
            "{}",
            json!({"response_id": id, "status": status, "message": text})
        );
    } else if rendered.is_error {
        return Err(CliError::new(exit, text));
    } else {
        say!("{text}");
    }
    Ok(exit)
}

/// `models`: ids on stdout (`id<TAB>owner`), or one JSON document; exit 1 on failure.
pub fn models(
    listed: Result<Vec<crate::perplexity::models::ModelInfo>, ApiError>,
    json: bool,
) -> Ended {
    match listed {
        Ok(models) if json => {
            say!("{}", json!({ "models": models }));
            Ok(Exit::Success)
        }
        Ok(models) => {
            for m in &models {
                match &m.owned_by {
                    Some(owner) => say!("{}\t{}", inert_line(&m.id), inert_line(owner)),
                    None => say!("{}", inert_line(&m.id)),
                }
            }
            Ok(Exit::Success)
        }
        Err(e) => {
            let message = format!("could not read the model catalogue: {e}");
            if !json {
                return Err(CliError::failed(message));
            }
            say!("{}", json!({"status": "error", "error": message}));
            Ok(Exit::Failed)
        }
    }
}

/// `fetch`: pages on stdout (title, URL, text), failures and injection flags on stderr;
/// exit 0 when at least one page was read.
pub fn fetched(
    fetched: &[crate::tools::fetch::Fetched],
    rendered: &crate::call::ToolOutput,
    json: bool,
) -> Ended {
    if json {
        let mut doc = rendered.structured.clone().unwrap_or_default();
        if let Some(results) = doc.get_mut("results").and_then(Value::as_array_mut) {
            for error in results.iter_mut().filter_map(|r| r.get_mut("error")) {
                // The person at the command line is the operator the fetcher's words name.
                let worded = error["message"]
                    .as_str()
                    .and_then(crate::fetch::for_the_operator);
                if let Some(worded) = worded {
                    error["message"] = Value::String(worded);
                }
            }
        }
        say!("{doc}");
    } else {
        for f in fetched {
            match &f.outcome {
                Ok(page) => {
                    say!(
                        "# {}\n{}\n",
                        page.title.as_deref().unwrap_or("(no title)"),
                        page.final_url
                    );
                    say!("{}\n", page.text);
                    if page.truncated {
                        note!("perplexity-agent: {} was cut at the size cap", f.url);
                    }
                    if !f.flags.is_empty() {
                        note!(
                            "perplexity-agent: warning: possible prompt injection in {}: {}",
                            f.url,
                            f.flags.join(", ")
                        );
                    }
                }
                Err(e) => {
                    let message = crate::fetch::for_the_operator(&e.message)
                        .unwrap_or_else(|| e.message.clone());
                    note!("perplexity-agent: {}: not fetched: {message}", f.url);
                }
            }
        }
    }
    // Every page the command was given, or a failure a script can see.
    if fetched.iter().all(|f| f.outcome.is_ok()) {
        Ok(Exit::Success)
    } else {
        Ok(Exit::Failed)
    }
}

/// `search`: numbered results on stdout (plain, for people), errors and injection flags
/// on stderr.
pub fn searched(
    outcome: &Result<crate::perplexity::search::SearchResults, ApiError>,
    rendered: &crate::call::ToolOutput,
    json: bool,
) -> Ended {
    let results = match outcome {
        Ok(results) => results,
        Err(e) if e.is_key_problem() => return Err(CliError::config(api_error_text(e))),
        Err(e) => return Err(CliError::failed(api_error_text(e))),
    };
    if json {
        say!("{}", rendered.structured.clone().unwrap_or_default());
    } else {
        for (i, hit) in results.hits.iter().enumerate() {
            let title = if hit.title.is_empty() {
                "(no title)"
            } else {
                &hit.title
            };
            say!("[{}] {title}\n    {}", i + 1, hit.url);
            if let Some(date) = &hit.date {
                say!("    {date}");
            }
            if !hit.snippet.is_empty() {
                say!("    {}", hit.snippet.replace('\n', " "));
            }
        }
        if results.hits.is_empty() {
            note!("perplexity-agent: no results");
        }
    }
    if let Some(flags) = rendered
        .structured
        .as_ref()
        .and_then(|s| s["security_flags"].as_array())
        .filter(|f| !f.is_empty())
    {
        let names: Vec<&str> = flags.iter().filter_map(serde_json::Value::as_str).collect();
        note!(
            "perplexity-agent: warning: possible prompt injection in these results: {}",
            names.join(", ")
        );
    }
    Ok(Exit::Success)
}

/// `research`: the report for people (answer, findings, claims with their confidence,
/// sources, the validation verdict) on stdout; `--json` prints the structured result.
pub fn report(
    rendered: &crate::call::ToolOutput,
    report: Option<&crate::tools::report::DeepReport>,
    stop: Option<&crate::tools::deep_research::Stop>,
    json: bool,
) -> Ended {
    use crate::tools::deep_research::Stop;
    match stop {
        Some(Stop::Searches(e)) if e.is_key_problem() => {
            return Err(CliError::config(api_error_text(e)));
        }
        Some(Stop::Searches(e)) => return Err(CliError::failed(api_error_text(e))),
        Some(Stop::StillRunning(id)) => {
            say!("{id}");
            note!("The report is still being written (run {id}).");
            collect_lines(id);
            return Ok(Exit::StillRunning);
        }
        Some(Stop::Failed(e)) => {
            let code = if render::is_key_error(e) {
                Exit::Config
            } else {
                Exit::Failed
            };
            return Err(CliError::new(code, error_text(e)));
        }
        None => {}
    }
    let (Some(report), Some(structured)) = (report, rendered.structured.as_ref()) else {
        return Err(CliError::failed(&rendered.text));
    };
    if json {
        // Each claim carries why it was downgraded (null when it was not).
        say!("{structured}");
        return Ok(Exit::Success);
    }
    // The model's sections in its words, unwrapped; each weak claim says why beside it.
    let mut claims = "\nClaims:\n".to_owned();
    for (i, c) in report.claims.iter().enumerate() {
        let line = format!(
            "{}. {} [{}] {}",
            i + 1,
            c.text,
            c.confidence,
            c.urls.join(" ")
        );
        claims.push_str(line.trim_end());
        claims.push('\n');
        if let Some(why) = report.why_weak(i) {
            claims.push_str(&format!("   Why {}: {why}\n", c.confidence));
        }
    }
    say!(
        "{}",
        format!("{}{claims}{}", report.summary(), report.sources_section()).trim_end()
    );
    if report.validation.passed() {
        note!("perplexity-agent: every claim cites a retrieved source");
    } else {
        for problem in &report.validation.flagged {
            note!("perplexity-agent: warning: {problem}");
        }
    }
    Ok(Exit::Success)
}

/// Lines for stdout (the gateway commands' reports).
pub fn lines(text: &str) {
    say!("{}", text.trim_end());
}

/// Lines for a person on stderr: what to do next.
pub fn note_lines(text: &str) {
    note!("{}", text.trim_end());
}

/// One JSON document on stdout.
pub fn document(value: &Value) {
    say!("{value}");
}
