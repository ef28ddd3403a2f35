//! What a line typed in the workspace means. Pure: parsing never does anything.

use std::time::Duration;

/// Monitors run no more often than this (a monitor is a loop of billed calls).
pub const MIN_TASK_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Plain text: a question, with the open tabs as context.
    Ask(String),
    /// `/fresh <q>`: the same, run anew even when the research cache holds an answer.
    Fresh(String),
    /// `/ask <q>`: a question about the current tab.
    AskTab(String),
    /// `/search <q>`: the Search API's results only, as the CLI's `search`.
    Search(String),
    Open(String),
    Summary,
    Research(String),
    /// `/result <id>`: collect a research run (one left running when the workspace was
    /// quit, or started elsewhere), the id already checked.
    Result(String),
    /// `/space` lists spaces; `/space name` switches (creating it).
    Space(Option<String>),
    Tabs,
    Close,
    History,
    Task {
        kind: TaskKind,
        every: Duration,
        target: String,
    },
    Untask(u32),
    Help,
    Quit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    Search,
    Fetch,
}

/// `/help`: (what to type, what it does) rows, drawn as a table whose descriptions wrap
/// under their own column (see `view::help_lines`).
pub const HELP_ROWS: &[(&str, &str)] = &[
    ("/search <q>", "web search results (no answer)"),
    ("/open <url|N>", "a page, or source [N], in a tab"),
    ("/ask <q>", "ask about the current tab"),
    ("/summary", "summarise the open tabs"),
    ("/research <q>", "deep research; claims checked"),
    ("/result <id>", "collect a run left running"),
    ("/space [name]", "list spaces, or switch to one"),
    ("/tabs /close", "list tabs, close the current"),
    ("/history", "recent questions and answers"),
    (
        "/task search|fetch <seconds> <target>",
        "watch for changes (5 s or more)",
    ),
    ("/untask <id>", "stop a watch"),
    ("/help /quit", "this list; leave"),
    ("<question>", "ask, tabs as context; /fresh"),
    ("Tab Shift-Tab", "switch panes"),
    ("Up Down PgUp PgDn", "scroll, or pick a tab"),
    ("Ctrl-Y Ctrl-C", "copy the answer or URL; quit"),
];

/// The help as text: one row a line, its two columns apart by a tab.
pub fn help_text() -> String {
    HELP_ROWS
        .iter()
        .map(|(what, does)| format!("{what}\t{does}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses one submitted line; `Err` says what is wrong (shown, nothing run).
pub fn parse(line: &str) -> Result<Command, String> {
    let line = line.trim();
    if line.is_empty() {
        return Err("Type a question, or /help.".to_owned());
    }
    let Some(rest) = line.strip_prefix('/') else {
        return Ok(Command::Ask(line.to_owned()));
    };
    let (name, arg) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (rest, ""),
    };
    let need = |what: &str| -> Result<String, String> {
        if arg.is_empty() {
            Err(format!("/{name} needs {what}."))
        } else {
            Ok(arg.to_owned())
        }
    };
    let none = |c: Command| -> Result<Command, String> {
        if arg.is_empty() {
            Ok(c)
        } else {
            Err(format!("/{name} takes no argument."))
        }
    };
    match name {
        "search" => need("a query").map(Command::Search),
        "open" => need("a URL").map(Command::Open),
        "ask" => need("a question").map(Command::AskTab),
        "fresh" => need("a question").map(Command::Fresh),
        "research" => need("a question").map(Command::Research),
        "result" => need("a research run id, e.g. /result resp_abc123").and_then(|id| {
            // Checked here, so a mistyped id is said at once and nothing is sent.
            if crate::perplexity::agent::valid_run_id(&id) {
                Ok(Command::Result(id))
            } else {
                Err(format!(
                    "{} is not a research run id: ids are letters, digits, '_' and '-' (as printed when a run is left running).",
                    crate::text::inert_line(&crate::text::cap_chars(&id, 80))
                ))
            }
        }),
        "summary" => none(Command::Summary),
        "space" => Ok(Command::Space((!arg.is_empty()).then(|| arg.to_owned()))),
        "tabs" => none(Command::Tabs),
        "close" => none(Command::Close),
        "history" => none(Command::History),
        "help" => none(Command::Help),
        "quit" | "exit" => none(Command::Quit),
        "untask" => arg
            .parse()
            .map(Command::Untask)
            .map_err(|_| "/untask needs a task number, e.g. /untask 1.".to_owned()),
        "task" => task(arg),
        other => Err(format!("Unknown command /{other}. Type /help.")),
    }
}

fn task(arg: &str) -> Result<Command, String> {
    let usage = "Usage: /task search|fetch <seconds> <target> (at least 5 seconds).";
    let mut parts = arg.splitn(3, char::is_whitespace);
    let kind = match parts.next() {
        Some("search") => TaskKind::Search,
        Some("fetch") => TaskKind::Fetch,
        _ => return Err(usage.to_owned()),
    };
    let every = parts
        .next()
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .filter(|d| *d >= MIN_TASK_INTERVAL && *d <= Duration::from_secs(86_400))
        .ok_or(usage)?;
    let target = parts
        .next()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(usage)?;
    Ok(Command::Task {
        kind,
        every,
        target: target.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_commands() {
        assert_eq!(
            parse(" what is up? "),
            Ok(Command::Ask("what is up?".into()))
        );
        assert_eq!(
            parse("/search  rust tui "),
            Ok(Command::Search("rust tui".into()))
        );
        assert_eq!(
            parse("/open https://a.org"),
            Ok(Command::Open("https://a.org".into()))
        );
        assert_eq!(parse("/space"), Ok(Command::Space(None)));
        assert_eq!(
            parse("/space work"),
            Ok(Command::Space(Some("work".into())))
        );
        assert_eq!(parse("/untask 2"), Ok(Command::Untask(2)));
        assert_eq!(
            parse("/task fetch 30 https://a.org/x"),
            Ok(Command::Task {
                kind: TaskKind::Fetch,
                every: Duration::from_secs(30),
                target: "https://a.org/x".into()
            })
        );
        assert!(
            parse("/task fetch 4 https://a.org")
                .unwrap_err()
                .starts_with("Usage")
        );
        assert!(parse("/task watch 10 x").is_err());
        assert_eq!(parse("/search").unwrap_err(), "/search needs a query.");
        assert_eq!(parse("/tabs x").unwrap_err(), "/tabs takes no argument.");
        assert_eq!(
            parse("/bogus").unwrap_err(),
            "Unknown command /bogus. Type /help."
        );
        assert!(parse("   ").is_err());
        assert_eq!(parse("/quit"), Ok(Command::Quit));
        assert_eq!(
            parse("/result resp_a-1"),
            Ok(Command::Result("resp_a-1".into()))
        );
        assert!(parse("/result").unwrap_err().starts_with("/result needs"));
        for bad in ["../x", "a b", "resp\u{1b}[2J", &"r".repeat(129)] {
            let said = parse(&format!("/result {bad}")).unwrap_err();
            assert!(said.contains("is not a research run id"), "{said}");
            assert!(!said.contains('\u{1b}'), "{said:?}");
        }
    }
}
