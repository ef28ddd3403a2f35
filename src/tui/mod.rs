//! `perplexity-agent tui`: the terminal research workspace. One loop draws after every
//! key, paste, resize or finished piece of work; the work itself runs on background tasks
//! ([`work`]), so typing never waits for the network.
//!
//! - [`app`]: the state and how keys and results change it (no I/O).
//! - [`command`]: what a typed line means.
//! - [`view`]: drawing (tested on ratatui's test backend).
//! - [`work`]: running commands through the tools, guard and store.
//!
//! Touches: the terminal (raw mode, the alternate screen — both restored on exit and on
//! panic); the network only through `crate::tools`.

pub mod app;
pub mod command;
pub mod view;
pub mod work;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, EventStream};
use crossterm::{execute, terminal};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use crate::config::Config;
use app::{App, Update};

const DEFAULT_SPACE: &str = "default";
/// The status line's token count is refreshed this often while idle.
const TICK: Duration = Duration::from_secs(1);

/// Puts the terminal back however the workspace ends (return, error or panic).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        crossterm::event::DisableBracketedPaste,
        terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

pub async fn run(config: &Config) -> Result<(), String> {
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
    execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        crossterm::event::EnableBracketedPaste
    )
    .map_err(|e| format!("the terminal refused the alternate screen ({e})"))?;
    let mut screen = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .map_err(|e| format!("the terminal cannot be drawn on ({e})"))?;

    let (tx, mut updates) = tokio::sync::mpsc::unbounded_channel::<Update>();
    let mut worker = work::Worker::new(tools, store, tx, DEFAULT_SPACE);
    let mut app = App::new(DEFAULT_SPACE, worker.tokens());
    // The first frame goes out before anything slow (the store, the network) starts.
    draw(&mut screen, &app)?;
    worker.switch_space(DEFAULT_SPACE, false);
    worker.refresh_spend();

    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
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
        }
        if let Some(text) = app.copy.take() {
            copy_to_clipboard(&text);
        }
        draw(&mut screen, &app)?;
    }
    let left_running = worker.finish().await;
    guard.flush();
    drop(screen);
    restore_terminal();
    // Back on the ordinary screen: the runs still going upstream, as the CLI names them.
    for id in left_running {
        crate::cli::output::left_running(&id);
    }
    Ok(())
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
