//! `perplexity-agent tui`: the terminal research workspace. One loop draws after every
//! key, paste, resize or finished piece of work; the work itself runs on background tasks
//! ([`work`]), so typing never waits for the network.
//!
//! - [`app`]: the state and how keys and results change it (no I/O).
//! - [`command`]: what a typed line means.
//! - [`view`]: drawing (tested on ratatui's test backend).
//! - [`work`]: running commands through the tools, guard and store.
//!
//! Touches: the terminal (raw mode, the alternate screen — both restored once, on exit
//! and on panic, before anything is printed); stderr, which is read into the chat while
//! the workspace is drawn ([`stderr`]); the network only through `crate::tools`.

pub mod app;
pub mod command;
mod stderr;
pub mod view;
pub mod work;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossterm::event::{Event, EventStream};
use crossterm::{execute, terminal};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::config::Config;
use app::{App, Entry, Kind, Update};

const DEFAULT_SPACE: &str = "default";
/// The status line's token count is refreshed this often while idle.
const TICK: Duration = Duration::from_secs(1);

/// Whether the alternate screen is up. Leaving it twice is not harmless: each leave
/// puts the cursor back where the workspace started, so a second one after the way-out
/// lines were printed let the shell's prompt overwrite them.
static ON_SCREEN: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back however the workspace ends (return, error or panic).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Gives stderr back and leaves the alternate screen, once: every later call only makes
/// sure raw mode is off.
fn restore_terminal() {
    stderr::restore();
    let _ = terminal::disable_raw_mode();
    if ON_SCREEN.swap(false, Ordering::SeqCst) {
        let _ = execute!(
            std::io::stdout(),
            crossterm::event::DisableBracketedPaste,
            terminal::LeaveAlternateScreen,
            crossterm::cursor::Show
        );
    }
}

/// Runs the workspace. On the way out, back on the ordinary screen, prints the log lines
/// it had no time to show, and returns the runs it left going upstream (the CLI names
/// them as `ask` does after Ctrl-C: each id on stdout, exit 130).
pub async fn run(config: &Config) -> Result<Vec<String>, String> {
    let (tx, mut updates) = tokio::sync::mpsc::unbounded_channel::<Update>();
    // Before anything can log: from here until the terminal is restored, whatever is
    // written to stderr (tracing's lines) is shown in the chat, not drawn over.
    let capture = stderr::Capture::start(tx.clone());
    let ended = workspace(config, tx, &mut updates).await;
    restore_terminal();
    if let Some(capture) = capture {
        capture.finish().await;
    }
    let mut err = std::io::stderr();
    while let Ok(update) = updates.try_recv() {
        if let Update::Log(line) = update {
            let _ = writeln!(err, "{line}");
        }
    }
    ended
}

/// The workspace itself, until it is quit; returns the runs it left going upstream.
async fn workspace(
    config: &Config,
    tx: UnboundedSender<Update>,
    updates: &mut UnboundedReceiver<Update>,
) -> Result<Vec<String>, String> {
    let services = crate::app::Services::build(config)?;
    let guard = services.guard;
    let tools = Arc::new(services.tools);
    // One store handle: the tools' own.
    let store = tools.store().clone();

    terminal::enable_raw_mode().map_err(|e| format!("this needs an interactive terminal ({e})"))?;
    let _restore = Restore;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
    ON_SCREEN.store(true, Ordering::SeqCst);
    execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        crossterm::event::EnableBracketedPaste
    )
    .map_err(|e| format!("the terminal refused the alternate screen ({e})"))?;
    let mut screen = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .map_err(|e| format!("the terminal cannot be drawn on ({e})"))?;

    let mut worker = work::Worker::new(tools, store, tx, DEFAULT_SPACE);
    let mut app = App::new(DEFAULT_SPACE, worker.tokens());
    // A person at a terminal gets the set-up warning a server logs, where they look.
    if let Some(warning) = config.fetch.allow_private.warning() {
        app.push(Entry::new(Kind::Alert, warning));
    }
    // The first frame goes out before anything slow (the store, the network) starts.
    draw(&mut screen, &app)?;
    worker.switch_space(DEFAULT_SPACE, false);
    worker.refresh_spend();

    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    // The spinner turns only while something runs; a missed step is skipped, not
    // caught up in a burst of frames.
    let mut spin = tokio::time::interval(view::SPIN_STEP);
    spin.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !app.quit {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(Event::Key(key))) => {
                    if let Some(command) = app.on_key(key) {
                        worker.run(command, &app);
                    }
                }
                Some(Ok(Event::Paste(text))) => app.on_paste(&text),
                Some(Ok(_)) => {}
                // The terminal went away: nothing left to draw on.
                Some(Err(_)) | None => break,
            },
            Some(update) = updates.recv() => {
                app.apply(update);
                // Take whatever else is ready: one frame for a burst of results.
                while let Ok(more) = updates.try_recv() {
                    app.apply(more);
                }
            }
            _ = tick.tick() => app.tokens = worker.tokens(),
            _ = spin.tick(), if app.in_flight() > 0 => {}
        }
        if let Some(text) = app.copy.take() {
            copy_to_clipboard(&text);
        }
        draw(&mut screen, &app)?;
    }
    let left_running = worker.finish().await;
    guard.flush();
    drop(screen);
    Ok(left_running)
}

fn draw(screen: &mut Terminal<CrosstermBackend<std::io::Stdout>>, app: &App) -> Result<(), String> {
    screen
        .draw(|frame| view::draw(frame, app))
        .map(|_| ())
        .map_err(|e| format!("drawing failed ({e})"))
}

/// OSC 52: the terminal puts the text on the system clipboard (works over SSH too).
fn copy_to_clipboard(text: &str) {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
    let mut out = std::io::stdout();
    let _ = write!(out, "\x1b]52;c;{encoded}\x07");
    let _ = out.flush();
}
