//! The real binary in a pseudo-terminal — the session's controlling terminal, so a typed
//! Ctrl-C is a SIGINT from the line discipline, echoed as `^C` — with its output read back
//! through a VT100 emulator: what the TUI's and the CLI's terminal tests drive.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::binary;

pub struct Pty {
    child: Child,
    pub writer: std::fs::File,
    screen: Arc<Mutex<vt100::Parser>>,
    /// Every byte the program wrote, as written.
    pub raw: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    pub fn spawn(args: &[&str], env: &[(String, String)]) -> Pty {
        Pty::spawn_sized(args, env, 80, 24)
    }

    pub fn spawn_sized(args: &[&str], env: &[(String, String)], cols: u16, rows: u16) -> Pty {
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes two fds into the locals; the size struct outlives the call.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(rc, 0, "openpty");
        // SAFETY: both fds were just returned by openpty and are owned here.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut cmd = binary(args, env);
        cmd.env("TERM", "xterm-256color")
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::setsid();
                libc::ioctl(0, libc::TIOCSCTTY as _, 0);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn in a pseudo-terminal");
        let writer = std::fs::File::from(master.try_clone().unwrap());
        let mut reader = std::fs::File::from(master);
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZero::new(rows).unwrap(),
            std::num::NonZero::new(cols).unwrap(),
            0,
        )));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (screen.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().process(&buf[..n]);
                r.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            child,
            writer,
            screen,
            raw,
        }
    }

    pub fn contents(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    /// The screen's rows, each as wide as the terminal.
    pub fn rows(&self) -> Vec<String> {
        let parser = self.screen.lock().unwrap();
        let screen = parser.screen();
        let cols = screen.size().1.get();
        screen
            .rows(0, cols)
            .map(|r| format!("{r:<width$}", width = usize::from(cols)))
            .collect()
    }

    /// The screen once it has not changed for a moment (a frame is not read half drawn).
    pub fn settled(&self) -> Vec<String> {
        let mut last = self.rows();
        loop {
            std::thread::sleep(Duration::from_millis(60));
            let now = self.rows();
            if now == last {
                return now;
            }
            last = now;
        }
    }

    /// The inside of the chat pane (left) and of the side panes (right), row by row, from
    /// a settled screen: the panes split at the chat pane's top-right corner.
    pub fn panes(&self) -> (Vec<String>, Vec<String>) {
        let rows = self.settled();
        let split = rows[0].chars().position(|c| c == '┐').unwrap_or(0);
        let cut = |r: &String, from: usize, to: usize| -> String {
            r.chars().skip(from).take(to.saturating_sub(from)).collect()
        };
        let width = rows[0].chars().count();
        let body = &rows[1..rows.len().saturating_sub(3)];
        (
            body.iter().map(|r| cut(r, 1, split)).collect(),
            body.iter().map(|r| cut(r, split + 2, width - 1)).collect(),
        )
    }

    pub fn wait_for(&self, what: &str, timeout: Duration) -> Duration {
        let started = Instant::now();
        while !self.contents().contains(what) {
            assert!(
                started.elapsed() < timeout,
                "{what:?} never appeared; screen:\n{}",
                self.contents()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        started.elapsed()
    }

    /// Waits for the workspace to exit, successfully, within `timeout`.
    pub fn quits_within(&mut self, timeout: Duration) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status}");
                return;
            }
            assert!(started.elapsed() < timeout, "did not quit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the workspace to exit within `timeout`, whatever its status.
    pub fn exits_within(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < timeout, "did not quit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What a shell does next, as if it printed its prompt and a command's output: text
    /// goes where the workspace left the cursor.
    pub fn shell_writes(&self, text: &str) {
        self.screen.lock().unwrap().process(text.as_bytes());
    }

    pub fn typed(&mut self, text: &str) {
        self.writer.write_all(text.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
