//! stderr while the workspace is drawn. Log lines (tracing writes each event to stderr,
//! whole) written to the terminal would land under the drawing, at the cursor, break
//! the frame and stay after the workspace leaves: so while it is up, stderr is a pipe
//! whose lines become [`Update::Log`]s, shown in the chat. [`restore`] gives the
//! terminal back its stderr, before anything is printed on the way out (and on panic,
//! so a panic's message is seen).
//!
//! On Windows stderr is left as it is (its handle is no file descriptor to replace), and a
//! log line may then show over the drawing until the next frame.
//!
//! Touches: file descriptor 2 of the process (duplicated, replaced, put back).

// Windows builds keep the line reader for its tests' sake only.
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::app::Update;

/// The terminal's stderr, kept aside while the pipe stands in for it (-1: not captured).
static SAVED: AtomicI32 = AtomicI32::new(-1);

/// How long the way out waits for the reader to take the last lines from the pipe (a
/// child process still holding its end would keep it open for ever).
const DRAIN: Duration = Duration::from_millis(300);

/// A running capture: its reader thread says when it has read everything.
pub struct Capture {
    done: tokio::sync::oneshot::Receiver<()>,
}

impl Capture {
    /// Puts a pipe in stderr's place and reads its lines into `tx`. `None` (stderr left
    /// as it is) when the descriptors cannot be set up.
    #[cfg(unix)]
    pub fn start(tx: UnboundedSender<Update>) -> Option<Capture> {
        use std::os::fd::{AsRawFd, RawFd};
        let (reader, writer) = std::io::pipe().ok()?;
        // SAFETY: fcntl with F_DUPFD_CLOEXEC only duplicates descriptor 2 (whether it
        // is open or not); it reads no memory of ours.
        let saved: RawFd = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
        if saved < 0 {
            return None;
        }
        // SAFETY: both descriptors are open (the pipe's end is owned by `writer`, alive
        // here); dup2 atomically makes 2 a copy of it.
        if unsafe { libc::dup2(writer.as_raw_fd(), 2) } < 0 {
            // SAFETY: `saved` was returned by fcntl above and is closed only here.
            unsafe { libc::close(saved) };
            return None;
        }
        // Descriptor 2 is now the pipe's only writing end: when it is put back, the
        // reader sees the end of the pipe.
        drop(writer);
        SAVED.store(saved, Ordering::SeqCst);
        let (said_done, done) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("tui-stderr".into())
            .spawn(move || {
                let mut reader = BufReader::new(reader);
                while let Some(line) = next_line(&mut reader) {
                    // The workspace may be gone: the line is dropped with it.
                    let _ = tx.send(Update::Log(line));
                }
                let _ = said_done.send(());
            });
        if spawned.is_err() {
            // Nobody would read the pipe: a writer would block once it filled.
            restore();
            return None;
        }
        Some(Capture { done })
    }

    /// Windows: stderr stays as it is.
    #[cfg(not(unix))]
    pub fn start(_tx: UnboundedSender<Update>) -> Option<Capture> {
        None
    }

    /// After [`restore`]: waits (briefly) until every line written is read.
    pub async fn finish(self) {
        let _ = tokio::time::timeout(DRAIN, self.done).await;
    }
}

/// The longest line kept whole; the rest of a longer one is read and dropped.
const MAX_LINE_BYTES: usize = 4096;

/// The next line written to the pipe (`None` at its end), at most [`MAX_LINE_BYTES`] of it
/// with `…` where it was cut, invalid UTF-8 replaced. The reader must go on whatever is
/// written: a line that stopped it would leave the pipe to fill and every later write to
/// stderr (a log line, from any thread) blocked; one unbounded line would hold all of it
/// in memory.
fn next_line(reader: &mut impl BufRead) -> Option<String> {
    let mut line = Vec::new();
    let read = reader
        .take(MAX_LINE_BYTES as u64)
        .read_until(b'\n', &mut line)
        .ok()?;
    if read == 0 {
        return None;
    }
    let whole = line.last() == Some(&b'\n');
    if whole {
        line.pop();
    } else if line.len() >= MAX_LINE_BYTES {
        skip_to_end_of_line(reader);
    }
    let mut text = String::from_utf8_lossy(&line).into_owned();
    if !whole && line.len() >= MAX_LINE_BYTES {
        text.push('\u{2026}');
    }
    Some(text)
}

fn skip_to_end_of_line(reader: &mut impl BufRead) {
    loop {
        let Ok(buf) = reader.fill_buf() else { return };
        if buf.is_empty() {
            return;
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return;
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

/// Gives stderr back to the terminal; does nothing when it is not captured (so it may be
/// called on every way out, and from the panic hook).
pub fn restore() {
    let saved = SAVED.swap(-1, Ordering::SeqCst);
    if saved < 0 {
        return;
    }
    // SAFETY: `saved` is the descriptor `Capture::start` kept, taken out of `SAVED` here
    // so it is put back and closed once; dup2 and close read no memory of ours.
    #[cfg(unix)]
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_and_any_bytes_keep_the_reader_going() {
        let mut input = b"one\n\xff\xfe bad\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES * 3));
        input.extend(b"\nlast");
        let mut reader = BufReader::new(input.as_slice());
        assert_eq!(next_line(&mut reader).as_deref(), Some("one"));
        assert_eq!(
            next_line(&mut reader).as_deref(),
            Some("\u{fffd}\u{fffd} bad")
        );
        let long = next_line(&mut reader).unwrap_or_default();
        assert_eq!(long.len(), MAX_LINE_BYTES + '\u{2026}'.len_utf8());
        assert_eq!(next_line(&mut reader).as_deref(), Some("last"));
        assert_eq!(next_line(&mut reader), None);
    }
}
