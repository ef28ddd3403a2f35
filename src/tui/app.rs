//! The workspace's state and how keys and results change it. No I/O here: keys come in,
//! commands to run come out, and results arrive as [`Update`]s, so every behaviour can be
//! tested without a terminal.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::command::{self, Command, TaskKind};

/// The longest line the input takes (a question, or a command with its argument).
pub const MAX_INPUT_CHARS: usize = 4_096;
/// Entries kept in the chat pane (older ones are in /history).
const MAX_ENTRIES: usize = 500;
/// Lines one log entry keeps (the newest): a chatty `PERPLEXITY_LOG` fills one entry,
/// not the chat.
const MAX_LOG_LINES: usize = 20;
/// Characters kept of one log line.
const MAX_LOG_LINE_CHARS: usize = 400;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Chat,
    Tabs,
    Page,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    You,
    Answer,
    Note,
    Error,
    Alert,
    /// `/help`: rows of `what\tdoes`, drawn as a table.
    Help,
    /// The process's own log lines, written while the workspace was on screen.
    Log,
}

/// One block of the chat pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub text: String,
    /// Prompt-injection labels found in untrusted text of this entry, shown beside it.
    pub flags: Vec<String>,
    /// The sources this entry numbers, as (number, URL): `/open N` opens one.
    pub sources: Vec<(u64, String)>,
}

impl Entry {
    pub fn new(kind: Kind, text: impl Into<String>) -> Self {
        Entry {
            kind,
            text: text.into(),
            flags: Vec::new(),
            sources: Vec::new(),
        }
    }

    pub fn flagged(mut self, flags: Vec<String>) -> Self {
        self.flags = flags;
        self
    }

    pub fn citing(mut self, sources: Vec<(u64, String)>) -> Self {
        self.sources = sources;
        self
    }
}

/// A page open in the current space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageTab {
    pub url: String,
    pub title: String,
    /// `None` for a tab remembered from an earlier session (its text is not stored).
    pub text: Option<String>,
    pub flags: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    pub id: u32,
    pub kind: TaskKind,
    pub target: String,
    pub every_secs: u64,
}

/// What finished work tells the workspace.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    Entry(Entry),
    TabOpened(PageTab),
    /// The space's tabs as the store remembers them (after a switch or at start);
    /// `announce` when the user asked for the switch.
    Space {
        name: String,
        tabs: Vec<PageTab>,
        announce: bool,
    },
    TabClosed(String),
    /// A call started, numbered by the worker, at `at`.
    Started {
        call: u64,
        at: Instant,
    },
    /// Call `call` ended.
    Finished(u64),
    /// One line the process logged (tracing's, on stderr) while the workspace was drawn.
    Log(String),
    TaskStarted(TaskInfo),
    TaskEnded {
        id: u32,
        why: String,
    },
    Tokens(u32),
    /// What this user's calls cost today (the ledger), in millionths.
    Spent(i64),
    /// What the running work is doing (counts only, never page content).
    Progress(String),
}

pub struct App {
    pub input: String,
    pub entries: Vec<Entry>,
    pub tabs: Vec<PageTab>,
    pub current: Option<usize>,
    pub focus: Pane,
    /// Lines scrolled up from the bottom of the chat.
    pub chat_scroll: usize,
    pub page_scroll: usize,
    pub space: String,
    pub tokens: u32,
    /// Today's spend, once the ledger has been read.
    pub spent_today: Option<i64>,
    /// The calls running now, with when each started.
    pub running: Vec<(u64, Instant)>,
    pub tasks: Vec<TaskInfo>,
    /// The latest progress line of running work.
    pub progress: Option<String>,
    pub quit: bool,
    /// Text the front end should copy to the clipboard (Ctrl-Y), then clear.
    pub copy: Option<String>,
    /// The tabs of spaces switched away from in this session, by name: the store keeps
    /// only URLs and titles, so switching back restores these (text, order, selection).
    away: HashMap<String, (Vec<PageTab>, Option<usize>)>,
}

impl App {
    pub fn new(space: &str, tokens: u32) -> Self {
        App {
            input: String::new(),
            entries: vec![Entry::new(
                Kind::Note,
                "Ask a question, /open a page, /search, /research — /help lists everything.",
            )],
            tabs: Vec::new(),
            current: None,
            focus: Pane::Chat,
            chat_scroll: 0,
            page_scroll: 0,
            space: space.to_owned(),
            tokens,
            spent_today: None,
            running: Vec::new(),
            tasks: Vec::new(),
            progress: None,
            quit: false,
            copy: None,
            away: HashMap::new(),
        }
    }

    /// How many calls are running.
    pub fn in_flight(&self) -> usize {
        self.running.len()
    }

    /// How long the longest-running call has run at `now` (`None` when idle).
    pub fn busy_for(&self, now: Instant) -> Option<Duration> {
        self.running
            .iter()
            .map(|(_, at)| now.saturating_duration_since(*at))
            .max()
    }

    pub fn current_tab(&self) -> Option<&PageTab> {
        self.current.and_then(|i| self.tabs.get(i))
    }

    /// The URL of source `number` in the latest entry that numbers one so.
    pub fn source(&self, number: u64) -> Option<&str> {
        self.entries.iter().rev().find_map(|entry| {
            entry
                .sources
                .iter()
                .find(|(n, _)| *n == number)
                .map(|(_, url)| url.as_str())
        })
    }

    pub fn push(&mut self, entry: Entry) {
        self.entries.push(entry);
        if self.entries.len() > MAX_ENTRIES {
            self.entries.remove(0);
        }
        self.chat_scroll = 0;
    }

    /// A key press; returns the command to run when a line was submitted.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Command> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') | KeyCode::Char('d') if ctrl => self.quit = true,
            KeyCode::Char('y') if ctrl => {
                self.copy = self.copy_target();
                let what = if self.copy.is_some() {
                    "Copied."
                } else {
                    "Nothing to copy."
                };
                self.push(Entry::new(Kind::Note, what));
            }
            KeyCode::Char('u') if ctrl => self.input.clear(),
            // A full input takes no more characters.
            KeyCode::Char(c) if !ctrl && self.input.chars().count() < MAX_INPUT_CHARS => {
                self.input.push(c);
            }
            KeyCode::Backspace => {
                self.input.pop();
            }
            KeyCode::Enter => return self.submit(),
            KeyCode::Tab => {
                self.focus = match self.focus {
                    Pane::Chat => Pane::Tabs,
                    Pane::Tabs => Pane::Page,
                    Pane::Page => Pane::Chat,
                };
            }
            KeyCode::BackTab => {
                self.focus = match self.focus {
                    Pane::Chat => Pane::Page,
                    Pane::Tabs => Pane::Chat,
                    Pane::Page => Pane::Tabs,
                };
            }
            KeyCode::Up => self.scroll(-1),
            KeyCode::Down => self.scroll(1),
            KeyCode::PageUp => self.scroll(-10),
            KeyCode::PageDown => self.scroll(10),
            KeyCode::Esc => self.focus = Pane::Chat,
            _ => {}
        }
        None
    }

    /// Pasted text goes into the input (one line: newlines become spaces).
    pub fn on_paste(&mut self, text: &str) {
        for c in text.chars() {
            if self.input.chars().count() >= MAX_INPUT_CHARS {
                break;
            }
            self.input
                .push(if c == '\n' || c == '\r' { ' ' } else { c });
        }
    }

    /// Up/Down act on the focused pane: the chat scrolls, the tab list selects, the page
    /// scrolls.
    fn scroll(&mut self, by: isize) {
        match self.focus {
            Pane::Chat => {
                // Up (negative) moves back in time: further from the bottom.
                self.chat_scroll = self.chat_scroll.saturating_add_signed(-by);
            }
            Pane::Tabs => {
                if self.tabs.is_empty() {
                    return;
                }
                let last = self.tabs.len() - 1;
                let now = self.current.unwrap_or(0);
                self.current = Some(now.saturating_add_signed(by).min(last));
                self.page_scroll = 0;
            }
            Pane::Page => {
                self.page_scroll = self.page_scroll.saturating_add_signed(by);
            }
        }
    }

    fn copy_target(&self) -> Option<String> {
        match self.focus {
            Pane::Tabs | Pane::Page => self.current_tab().map(|t| t.url.clone()),
            Pane::Chat => self
                .entries
                .iter()
                .rev()
                .find(|e| e.kind == Kind::Answer)
                .map(|e| e.text.clone()),
        }
    }

    fn submit(&mut self) -> Option<Command> {
        let line = std::mem::take(&mut self.input);
        match command::parse(&line) {
            Ok(Command::Help) => self.push(Entry::new(Kind::Help, command::help_text())),
            Ok(Command::Quit) => self.quit = true,
            Ok(Command::Tabs) => {
                let text = if self.tabs.is_empty() {
                    "No tabs in this space. /open <url> reads a page into one.".to_owned()
                } else {
                    self.tabs
                        .iter()
                        .enumerate()
                        .map(|(i, t)| format!("[{}] {} — {}", i + 1, t.title, t.url))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                self.push(Entry::new(Kind::Note, text));
            }
            Ok(cmd) => {
                if !matches!(
                    cmd,
                    Command::Space(None) | Command::History | Command::Untask(_)
                ) {
                    self.push(Entry::new(Kind::You, line.trim()));
                }
                return Some(cmd);
            }
            Err(message) => self.push(Entry::new(Kind::Error, message)),
        }
        None
    }

    pub fn apply(&mut self, update: Update) {
        match update {
            Update::Entry(entry) => self.push(entry),
            Update::TabOpened(tab) => {
                match self.tabs.iter().position(|t| t.url == tab.url) {
                    Some(i) => {
                        self.tabs[i] = tab;
                        self.current = Some(i);
                    }
                    None => {
                        self.tabs.push(tab);
                        self.current = Some(self.tabs.len() - 1);
                    }
                }
                self.page_scroll = 0;
            }
            Update::Space {
                name,
                tabs,
                announce,
            } => self.enter_space(name, tabs, announce),
            Update::TabClosed(url) => {
                self.tabs.retain(|t| t.url != url);
                self.current = match self.tabs.len() {
                    0 => None,
                    n => Some(self.current.unwrap_or(0).min(n - 1)),
                };
            }
            Update::Started { call, at } => self.running.push((call, at)),
            Update::Finished(call) => {
                self.running.retain(|(c, _)| *c != call);
                if self.running.is_empty() {
                    self.progress = None;
                }
            }
            Update::Log(line) => self.log(&line),
            Update::Progress(text) => self.progress = Some(text),
            Update::TaskStarted(task) => {
                self.push(Entry::new(Kind::Note, task_started(&task)));
                self.tasks.push(task);
            }
            Update::TaskEnded { id, why } => {
                self.tasks.retain(|t| t.id != id);
                self.push(Entry::new(Kind::Alert, format!("Task {id} stopped: {why}")));
            }
            Update::Tokens(n) => self.tokens = n,
            Update::Spent(n) => self.spent_today = Some(n),
        }
    }

    /// A log line joins the log entry at the bottom of the chat, or starts one: the
    /// newest [`MAX_LOG_LINES`] lines are kept, each as inert text (no colours, no
    /// escape sequences).
    fn log(&mut self, line: &str) {
        let line = crate::text::cap_chars(&inert_log_line(line), MAX_LOG_LINE_CHARS);
        if line.trim().is_empty() {
            return;
        }
        match self.entries.last_mut() {
            Some(last) if last.kind == Kind::Log => {
                let mut lines: Vec<&str> = last.text.lines().collect();
                lines.push(&line);
                let from = lines.len().saturating_sub(MAX_LOG_LINES);
                last.text = lines[from..].join("\n");
                self.chat_scroll = 0;
            }
            _ => self.push(Entry::new(Kind::Log, line)),
        }
    }

    /// Makes `name` the current space. This session's own tabs win over the store's
    /// (which has no page text): a space switched away from comes back as it was left,
    /// and the current one only gains remembered tabs it lacks.
    fn enter_space(&mut self, name: String, stored: Vec<PageTab>, announce: bool) {
        if name != self.space {
            let left = (std::mem::take(&mut self.tabs), self.current.take());
            let old = std::mem::replace(&mut self.space, name.clone());
            self.away.insert(old, left);
            match self.away.remove(&name) {
                Some((tabs, current)) => {
                    self.tabs = tabs;
                    self.current = current;
                }
                None => self.tabs = stored,
            }
        } else {
            for tab in stored {
                if !self.tabs.iter().any(|t| t.url == tab.url) {
                    self.tabs.push(tab);
                }
            }
        }
        if self.current.is_none_or(|i| i >= self.tabs.len()) {
            self.current = (!self.tabs.is_empty()).then_some(0);
        }
        self.page_scroll = 0;
        if announce {
            let text = format!("Space: {} ({}).", self.space, count(self.tabs.len(), "tab"));
            self.push(Entry::new(Kind::Note, text));
        }
    }
}

/// A log line as text: colour sequences (`ESC [ … letter`) dropped, every other control
/// character made inert, and the timestamp the terminal would have had dropped (the
/// chat is already in order).
pub fn inert_log_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameters and intermediates up to the final byte (a letter, `@`…`~`).
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
            continue;
        }
        out.push(crate::text::inert_char(c));
    }
    let trimmed = out.trim();
    // tracing's `2026-01-02T03:04:05.678901Z  WARN message`.
    match trimmed.split_once(' ') {
        Some((stamp, rest))
            if stamp.ends_with('Z')
                && stamp.contains('T')
                && stamp.starts_with(|c: char| c.is_ascii_digit()) =>
        {
            rest.trim_start().to_owned()
        }
        _ => trimmed.to_owned(),
    }
}

/// `1 tab`, `2 tabs`, `no tabs`.
fn count(n: usize, what: &str) -> String {
    match n {
        0 => format!("no {what}s"),
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// The confirmation of a new monitor, with the id `/untask` needs.
fn task_started(task: &TaskInfo) -> String {
    let what = match task.kind {
        TaskKind::Search => format!("the search \"{}\"", task.target),
        TaskKind::Fetch => task.target.clone(),
    };
    format!(
        "Task {id} started: watching {what} every {every} s. /untask {id} stops it.",
        id = task.id,
        every = task.every_secs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(app: &mut App, text: &str) -> Option<Command> {
        for c in text.chars() {
            app.on_key(key(KeyCode::Char(c)));
        }
        app.on_key(key(KeyCode::Enter))
    }

    #[test]
    fn typing_submits_commands_and_shows_local_ones_at_once() {
        let mut app = App::new("default", 10);
        assert_eq!(
            typed(&mut app, "/search rust"),
            Some(Command::Search("rust".into()))
        );
        assert_eq!(app.entries.last().unwrap().kind, Kind::You);
        assert!(app.input.is_empty());
        assert_eq!(typed(&mut app, "/help"), None);
        assert!(
            app.entries
                .last()
                .unwrap()
                .text
                .contains("/task search|fetch")
        );
        assert_eq!(typed(&mut app, "/nope"), None);
        assert_eq!(app.entries.last().unwrap().kind, Kind::Error);
        assert_eq!(typed(&mut app, "/quit"), None);
        assert!(app.quit);
    }

    #[test]
    fn tabs_open_switch_close_and_copy() {
        let mut app = App::new("default", 10);
        let tab = |u: &str| PageTab {
            url: u.into(),
            title: u.into(),
            text: Some("t".into()),
            flags: vec![],
        };
        app.apply(Update::TabOpened(tab("https://a")));
        app.apply(Update::TabOpened(tab("https://b")));
        app.apply(Update::TabOpened(tab("https://a")));
        assert_eq!(
            (app.tabs.len(), app.current),
            (2, Some(0)),
            "deduplicated by URL"
        );
        app.on_key(key(KeyCode::Tab));
        assert_eq!(app.focus, Pane::Tabs);
        app.on_key(key(KeyCode::Down));
        assert_eq!(app.current, Some(1));
        app.on_key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::CONTROL));
        assert_eq!(app.copy.as_deref(), Some("https://b"));
        app.apply(Update::TabClosed("https://b".into()));
        assert_eq!(app.current, Some(0));
        app.apply(Update::TaskStarted(TaskInfo {
            id: 1,
            kind: TaskKind::Fetch,
            target: "x".into(),
            every_secs: 5,
        }));
        app.apply(Update::TaskEnded {
            id: 1,
            why: "gave up".into(),
        });
        assert!(app.tasks.is_empty());
        assert_eq!(app.entries.last().unwrap().kind, Kind::Alert);
    }

    #[test]
    fn each_space_keeps_its_tabs_and_a_switch_is_confirmed() {
        let mut app = App::new("default", 1);
        let tab = |u: &str, text: Option<&str>| PageTab {
            url: u.into(),
            title: u.into(),
            text: text.map(str::to_owned),
            flags: vec![],
        };
        let space = |name: &str, tabs: Vec<PageTab>, announce| Update::Space {
            name: name.into(),
            tabs,
            announce,
        };
        // At start, the remembered tabs (no text), silently.
        app.apply(space("default", vec![tab("https://a", None)], false));
        app.apply(Update::TabOpened(tab("https://b", Some("b text"))));
        let before = app.entries.len();
        app.apply(space("work", vec![], true));
        assert!(app.tabs.is_empty());
        assert_eq!(app.entries.last().unwrap().text, "Space: work (no tabs).");
        // Back: as left (order, text, selection), whatever the store lists.
        app.apply(space(
            "default",
            vec![tab("https://b", None), tab("https://a", None)],
            true,
        ));
        let urls: Vec<&str> = app.tabs.iter().map(|t| t.url.as_str()).collect();
        assert_eq!(urls, ["https://a", "https://b"]);
        assert_eq!(app.current, Some(1));
        assert_eq!(app.tabs[1].text.as_deref(), Some("b text"));
        assert_eq!(app.entries.last().unwrap().text, "Space: default (2 tabs).");
        assert_eq!(app.entries.len(), before + 2);
    }

    #[test]
    fn a_new_task_is_confirmed_with_its_id() {
        let mut app = App::new("s", 1);
        app.apply(Update::TaskStarted(TaskInfo {
            id: 4,
            kind: TaskKind::Search,
            target: "rust".into(),
            every_secs: 60,
        }));
        assert_eq!(
            app.entries.last().unwrap().text,
            "Task 4 started: watching the search \"rust\" every 60 s. /untask 4 stops it."
        );
    }

    #[test]
    fn running_calls_are_timed_from_the_oldest() {
        let mut app = App::new("s", 1);
        let t0 = Instant::now();
        assert_eq!(app.busy_for(t0), None);
        app.apply(Update::Started { call: 1, at: t0 });
        app.apply(Update::Started {
            call: 2,
            at: t0 + Duration::from_secs(5),
        });
        let now = t0 + Duration::from_secs(12);
        assert_eq!(app.busy_for(now), Some(Duration::from_secs(12)));
        app.apply(Update::Progress("queued".into()));
        app.apply(Update::Finished(1));
        assert_eq!(
            (app.in_flight(), app.busy_for(now)),
            (1, Some(Duration::from_secs(7)))
        );
        assert!(app.progress.is_some());
        app.apply(Update::Finished(2));
        assert_eq!(
            (app.in_flight(), app.busy_for(now), &app.progress),
            (0, None, &None)
        );
    }

    #[test]
    fn log_lines_gather_in_one_bounded_inert_entry() {
        let mut app = App::new("s", 1);
        app.apply(Update::Log(
            "\u{1b}[2m2026-01-02T03:04:05.678901Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m careful \u{1b}]52;c;eA==\u{7}".into(),
        ));
        let log = app.entries.last().unwrap();
        assert_eq!(log.kind, Kind::Log);
        assert_eq!(log.text, "WARN careful \u{fffd}]52;c;eA==\u{fffd}");
        for i in 0..30 {
            app.apply(Update::Log(format!("line {i}")));
        }
        let log = app.entries.last().unwrap();
        assert_eq!(log.text.lines().count(), MAX_LOG_LINES);
        assert!(log.text.ends_with("line 29"), "{}", log.text);
        // Something else in between: the next line starts a new entry.
        app.apply(Update::Entry(Entry::new(Kind::Note, "n")));
        app.apply(Update::Log("again".into()));
        assert_eq!(app.entries.last().unwrap().text, "again");
    }

    #[test]
    fn input_is_bounded_and_pastes_are_one_line() {
        let mut app = App::new("s", 1);
        app.on_paste("a\nb");
        assert_eq!(app.input, "a b");
        app.on_paste(&"x".repeat(10_000));
        assert_eq!(app.input.chars().count(), MAX_INPUT_CHARS);
    }
}
