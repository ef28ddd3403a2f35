//! The README's and docs' command blocks, run: each marked block's commands against the
//! fake upstream (and a `serve --http` the test started), the output the doc shows
//! compared loosely with what the run printed. What belongs here: the docs' samples and
//! nothing else — behaviour is tested in the other modules; a sample that drifts fails
//! here, naming the file, the line and the difference.
//!
//! # The convention (in the Markdown)
//!
//! - `<!-- doc-test: run -->` on the line before a ```` ```sh ```` block: the block is run,
//!   in order with the file's other run blocks, by one `bash` per file (so `H=(…)` or
//!   `SID=…` set by one block is there for the next). If the next fenced block follows it
//!   with only blank lines between and has no info string (or `text`), that block is the
//!   output the command shows, compared with the run's stdout; either way every command
//!   of the block must exit 0, not only its last.
//!   `<!-- doc-test: run scenario={"duration_ms":6000} -->` sets the fake's scenario for
//!   that block (back to the default after it), for samples that only reproduce with a
//!   slow upstream.
//! - `<!-- doc-test: skip <reason> -->`: a command block with an output that is not run,
//!   and why. A ```` ```sh ```` block followed by an output block must carry one of the two
//!   markers, so a new sample cannot go unchecked by accident.
//!
//! What the harness provides, and how the commands are adapted:
//! - `perplexity-agent` on `PATH` is the binary under test; the environment holds
//!   nothing but `PATH`, a scratch `HOME` and store, `PERPLEXITY_API_KEY` (a test key),
//!   `PERPLEXITY_API_BASE` (the fake) and `PERPLEXITY_HTTP_AUTH_TOKEN` (the token of the
//!   test's `serve --http`), and high rate limits.
//! - Lines that start what the harness already runs are dropped: any line with
//!   `serve --http` (the test's server, on a port of its own), one that exports
//!   `PERPLEXITY_HTTP_AUTH_TOKEN`, and `cargo run -p fake-perplexity` or
//!   `perplexity-agent demo` (the harness's fake stands in for both).
//! - `127.0.0.1:8080` becomes the test server's address, `http://127.0.0.1:8787` the
//!   fake's, `pplx-…` the test key; a response id or session id a sample shows (and the run
//!   printed in its place) becomes the real one in later blocks. A block that would reach
//!   any other address is refused.
//!
//! How loosely outputs compare:
//! - Line by line (trailing blanks and `\r` ignored). A line that is only `…` stands for
//!   any number of lines; `…` inside a line for any text.
//! - A line (or the rest of it, after a prefix such as `data: `) that is JSON — `…` allowed
//!   as a value, an array element, an object member or inside a string — is compared as
//!   JSON: an object must have exactly the keys shown, unless it shows `…`; arrays the
//!   elements shown, in order; integers are compared, fractions are any number.
//! - Everywhere, `resp_…` ids, hex runs of 16 or more (nonces, session ids) and digit runs
//!   (timings, counts, dates, versions) match any such.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::Value;

use crate::common::*;
use crate::http::{Http, TOKEN};

#[test]
fn readme_samples_come_from_a_run() {
    check_doc("README.md");
}

#[test]
fn http_md_samples_come_from_a_run() {
    check_doc("docs/http.md");
}

/// Every other doc: marked blocks run, and no sample unmarked.
#[test]
fn the_other_docs_samples_are_marked_or_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "http.md")
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for name in names {
        check_doc(&format!("docs/{name}"));
    }
}

/// A block's timeout: far above any sample's run (the slowest waits a few seconds).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);
const DONE: &str = "__doc_test_done__ ";

// ---- the Markdown ----------------------------------------------------------------

struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    info: String,
    body: Vec<String>,
    /// The `doc-test:` marker on the line before the fence: its line and its text.
    marker: Option<(usize, String)>,
    /// The index of the block that shows this one's output.
    output: Option<usize>,
}

enum Directive {
    Run { scenario: Option<Value> },
    Skip,
}

fn parse_blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks: Vec<Block> = Vec::new();
    // For each block, the line after its closing fence (0-based).
    let mut ends = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            let indent = lines[i].len() - trimmed.len();
            let marker = lines[..i]
                .iter()
                .enumerate()
                .rev()
                .find(|(_, l)| !l.trim().is_empty())
                .and_then(|(n, l)| {
                    let l = l.trim();
                    let inner = l.strip_prefix("<!-- doc-test:")?.strip_suffix("-->")?;
                    Some((n + 1, inner.trim().to_owned()))
                });
            let mut body = Vec::new();
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim() != "```" {
                let l = lines[j];
                let cut = l.len() - l.trim_start().len();
                body.push(l[cut.min(indent)..].to_owned());
                j += 1;
            }
            blocks.push(Block {
                line: i + 1,
                info: info.trim().to_owned(),
                body,
                marker,
                output: None,
            });
            ends.push(j + 1);
            i = j + 1;
        } else {
            i += 1;
        }
    }
    for n in 0..blocks.len().saturating_sub(1) {
        let next = &blocks[n + 1];
        let between_blank = lines[ends[n].min(lines.len())..next.line - 1]
            .iter()
            .all(|l| l.trim().is_empty());
        if between_blank && (next.info.is_empty() || next.info == "text") {
            blocks[n].output = Some(n + 1);
        }
    }
    blocks
}

fn parse_directive(text: &str) -> Result<Directive, String> {
    if text == "run" {
        return Ok(Directive::Run { scenario: None });
    }
    if let Some(rest) = text.strip_prefix("run ") {
        let json = rest
            .trim()
            .strip_prefix("scenario=")
            .ok_or_else(|| format!("`run` takes only `scenario=<json>`, not `{rest}`"))?;
        let scenario: Value =
            serde_json::from_str(json).map_err(|e| format!("scenario is not JSON: {e}"))?;
        fake_perplexity::validate_scenario(&scenario)?;
        return Ok(Directive::Run {
            scenario: Some(scenario),
        });
    }
    if let Some(reason) = text.strip_prefix("skip") {
        if reason.trim().is_empty() {
            return Err("`skip` needs a reason".into());
        }
        return Ok(Directive::Skip);
    }
    Err(format!("unknown doc-test marker `{text}` (run or skip)"))
}

fn is_shell(info: &str) -> bool {
    matches!(info, "sh" | "bash" | "shell")
}

// ---- one doc ---------------------------------------------------------------------

fn check_doc(rel: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let blocks = parse_blocks(&text);
    let mut failures = Vec::new();
    let mut runs = Vec::new();
    for (n, b) in blocks.iter().enumerate() {
        match &b.marker {
            Some((line, marker)) => match parse_directive(marker) {
                Err(e) => failures.push(format!("{rel}:{line}: {e}")),
                Ok(_) if !is_shell(&b.info) => failures.push(format!(
                    "{rel}:{line}: a doc-test marker before a ```{} block (only sh blocks run)",
                    b.info
                )),
                Ok(Directive::Skip) => {}
                Ok(Directive::Run { scenario }) => runs.push((n, scenario)),
            },
            None if is_shell(&b.info) && b.output.is_some() => failures.push(format!(
                "{rel}:{}: this command block shows its output (the block at line {}) but \
                     is not marked: put `<!-- doc-test: run -->` or `<!-- doc-test: skip \
                     <reason> -->` on the line before it",
                b.line,
                blocks[b.output.unwrap()].line
            )),
            None => {}
        }
    }
    if !runs.is_empty() && failures.is_empty() {
        let mut session = Session::start(rel);
        for (n, scenario) in runs {
            if let Err(e) = session.run_block(rel, &blocks, n, scenario) {
                failures.push(e);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} doc sample(s) in {rel} do not match a run:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

struct Session {
    // Field order is drop order: the shell (and whatever it started) first.
    shell: Shell,
    http: Http,
    fake: FakePerplexity,
    /// Ids a sample shows → the ones the run printed in their place.
    learned: Vec<(String, String)>,
    _scratch: Scratch,
}

impl Session {
    fn start(rel: &str) -> Session {
        let fake = FakePerplexity::start();
        let scratch = Scratch::new(&format!("docs-{}", rel.replace(['/', '.'], "-")));
        let bin = scratch.path("bin");
        let home = scratch.path("home");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::os::unix::fs::symlink(BIN, bin.join("perplexity-agent")).unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let env: Vec<(String, String)> = [
            ("PATH", path.as_str()),
            ("HOME", &home.display().to_string()),
            ("PERPLEXITY_API_KEY", KEY),
            ("PERPLEXITY_API_BASE", &fake.base_url()),
            ("PERPLEXITY_HTTP_AUTH_TOKEN", TOKEN),
            (
                "PERPLEXITY_STORE_PATH",
                &scratch.path("store.sqlite").display().to_string(),
            ),
            // Not what the docs show; only so that no sample meets the rate limit.
            ("PERPLEXITY_RATE_BURST", "100000"),
            ("PERPLEXITY_RATE_PER_MINUTE", "1000000"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for tool in ["bash", "curl", "jq"] {
            let found = std::env::split_paths(&path).any(|d| d.join(tool).is_file());
            assert!(
                found,
                "the doc samples are run with bash, curl and jq: {tool} is not on PATH"
            );
        }
        let http = Http::start(&env);
        let shell = Shell::start(&env, scratch.0.clone());
        Session {
            shell,
            http,
            fake,
            learned: Vec::new(),
            _scratch: scratch,
        }
    }

    /// The block's commands as the harness runs them (see the module docs).
    fn script(&self, body: &[String]) -> Result<String, String> {
        let server = format!("127.0.0.1:{}", self.http.port);
        let mut out = String::new();
        for line in body {
            let t = line.trim_start();
            if line.contains("serve --http")
                || t.starts_with("export PERPLEXITY_HTTP_AUTH_TOKEN=")
                || t.starts_with("cargo run -p fake-perplexity")
                || t.starts_with("perplexity-agent demo")
            {
                continue;
            }
            let mut l = line
                .replace("127.0.0.1:8080", &server)
                .replace("http://127.0.0.1:8787", &self.fake.base_url())
                .replace("pplx-…", KEY)
                .replace("pplx-demo", KEY);
            for (from, to) in &self.learned {
                l = l.replace(from, to);
            }
            out.push_str(&l);
            out.push('\n');
        }
        for (at, _) in out.match_indices("://") {
            let rest = &out[at + 3..];
            if !rest.starts_with("127.0.0.1:") {
                return Err(format!(
                    "the block would reach `{:.40}`: only loopback addresses are run",
                    rest
                ));
            }
        }
        Ok(out)
    }

    fn run_block(
        &mut self,
        rel: &str,
        blocks: &[Block],
        n: usize,
        scenario: Option<Value>,
    ) -> Result<(), String> {
        let block = &blocks[n];
        let at = format!("{rel}:{}", block.line);
        let script = self.script(&block.body).map_err(|e| format!("{at}: {e}"))?;
        if let Some(s) = &scenario {
            self.fake.set_scenario(s.clone());
        }
        let ran = self.shell.run(&script);
        if scenario.is_some() {
            self.fake.set_scenario(Value::Null);
        }
        let (stdout, stderr, code) = ran.map_err(|e| format!("{at}: {e}"))?;
        let stdout = stdout.replace('\r', "");
        let context = || {
            format!(
                "  the commands run:\n{}\n  their stdout:\n{}\n  their stderr:\n{}",
                indent(&script),
                indent(&clip(&stdout)),
                indent(&clip(&stderr))
            )
        };
        if stdout.contains(KEY) || stderr.contains(KEY) {
            return Err(format!("{at}: the key was printed\n{}", context()));
        }
        if code != 0 {
            return Err(format!(
                "{at}: a command of the block exited with {code}, not 0\n{}",
                context()
            ));
        }
        let Some(o) = block.output else {
            return Ok(());
        };
        let sample = &blocks[o];
        let real: Vec<&str> = stdout.lines().collect();
        let shown: Vec<&str> = sample.body.iter().map(String::as_str).collect();
        self.learn(&sample.body.join("\n"), &stdout);
        match_lines(&shown, &real).map_err(|(i, why)| {
            format!(
                "{rel}:{}: the output shown (block at line {}) for the command block at \
                 line {} differs from the run: {why}\n{}",
                sample.line + 1 + i,
                sample.line,
                block.line,
                context()
            )
        })
    }

    /// Pairs the ids a sample shows with those the run printed, in order of appearance.
    fn learn(&mut self, sample: &str, real: &str) {
        for kind in [Token::Response, Token::Hex32] {
            let (shown, got) = (tokens(sample, kind), tokens(real, kind));
            if shown.len() == got.len() {
                for (s, r) in shown.into_iter().zip(got) {
                    if s != r && !self.learned.iter().any(|(k, _)| *k == s) {
                        self.learned.push((s, r));
                    }
                }
            }
        }
    }
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn clip(s: &str) -> String {
    if s.chars().count() <= 3000 {
        return s.to_owned();
    }
    format!("{}…", s.chars().take(3000).collect::<String>())
}

// ---- the shell -------------------------------------------------------------------

/// One `bash` for a doc, in a process group of its own (killed whole at the end), fed
/// one `. block-N.sh` per block: the block's stdin is /dev/null, its stdout and stderr
/// go to files, and the status of its first command that failed (an `ERR` trap; else
/// the block's own) comes back on bash's stdout.
struct Shell {
    child: Child,
    stdin: Option<ChildStdin>,
    done: Receiver<String>,
    dir: PathBuf,
    n: usize,
}

impl Shell {
    fn start(env: &[(String, String)], dir: PathBuf) -> Shell {
        let mut child = Command::new("bash")
            .args(["--noprofile", "--norc"])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(&dir)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bash");
        let stdout = child.stdout.take().unwrap();
        let (tx, done) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut shell = Shell {
            stdin: child.stdin.take(),
            child,
            done,
            dir,
            n: 0,
        };
        shell.send("set -o pipefail\n");
        shell
    }

    fn send(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("bash's stdin");
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Runs `script`: (stdout, stderr, exit status).
    fn run(&mut self, script: &str) -> Result<(String, String, i32), String> {
        self.n += 1;
        let file = |what: &str| self.dir.join(format!("{what}-{}", self.n));
        let (src, out, err) = (file("block.sh"), file("stdout"), file("stderr"));
        std::fs::write(&src, script).unwrap();
        self.send(&format!(
            "__doc_failed=; trap '__doc_failed=${{__doc_failed:-$?}}' ERR; \
             {{ . '{}'; }} </dev/null >'{}' 2>'{}'; __doc_status=$?; trap - ERR; \
             printf '\\n{DONE}%s\\n' \"${{__doc_failed:-$__doc_status}}\"\n",
            src.display(),
            out.display(),
            err.display()
        ));
        let code = loop {
            match self.done.recv_timeout(BLOCK_TIMEOUT) {
                Ok(line) => {
                    if let Some(code) = line.strip_prefix(DONE) {
                        break code.trim().parse().unwrap_or(-1);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.kill();
                    return Err(format!("the block did not finish within {BLOCK_TIMEOUT:?}"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("bash ended while running the block".into());
                }
            }
        };
        let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
        Ok((read(&out), read(&err), code))
    }

    /// Kills bash's process group: bash and anything a block left behind.
    fn kill(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        self.stdin.take();
        self.kill();
        let _ = self.child.wait();
    }
}

// ---- loose comparison ------------------------------------------------------------

/// `sample` against `real`, line by line; on a mismatch, the sample's line (0-based)
/// that got furthest and why.
fn match_lines(sample: &[&str], real: &[&str]) -> Result<(), (usize, String)> {
    fn trim<'a>(v: &[&'a str]) -> Vec<&'a str> {
        let mut v: Vec<&str> = v.iter().map(|l| l.trim_end()).collect();
        while v.last().is_some_and(|l| l.is_empty()) {
            v.pop();
        }
        v
    }
    let (sample, real) = (trim(sample), trim(real));
    let mut best: Option<(usize, String)> = None;
    if go(&sample, 0, &real, 0, &mut best) {
        return Ok(());
    }
    Err(best.unwrap_or((0, "no match".into())))
}

fn record(best: &mut Option<(usize, String)>, at: usize, why: String) {
    if best.as_ref().is_none_or(|(b, _)| at > *b) {
        *best = Some((at, why));
    }
}

fn go(s: &[&str], si: usize, r: &[&str], ri: usize, best: &mut Option<(usize, String)>) -> bool {
    if si == s.len() {
        if ri == r.len() {
            return true;
        }
        record(
            best,
            si.saturating_sub(1),
            format!(
                "the run printed more than the sample shows, from `{:.200}` on (end the \
                 sample with a `…` line if that is meant)",
                r[ri]
            ),
        );
        return false;
    }
    if s[si].trim() == "…" {
        return (ri..=r.len()).any(|k| go(s, si + 1, r, k, best));
    }
    if ri == r.len() {
        record(
            best,
            si,
            format!(
                "the sample shows `{:.200}`, the run printed nothing more",
                s[si]
            ),
        );
        return false;
    }
    match match_line(s[si], r[ri]) {
        Ok(()) => go(s, si + 1, r, ri + 1, best),
        Err(why) => {
            record(
                best,
                si,
                format!("{why}\n  sample: {:.300}\n  run:    {:.300}", s[si], r[ri]),
            );
            false
        }
    }
}

fn match_line(sample: &str, real: &str) -> Result<(), String> {
    if let Some(at) = sample.find(['{', '[']) {
        let (prefix, rest) = sample.split_at(at);
        if let Some(pat) = parse_pattern(rest) {
            let Some(real_rest) = real.strip_prefix(prefix) else {
                return Err(format!("the run's line does not start with `{prefix}`"));
            };
            let value: Value = serde_json::from_str(real_rest)
                .map_err(|e| format!("the sample shows JSON, the run's line is not ({e})"))?;
            return match_json(&pat, &value, "$");
        }
    }
    if wildcard(sample, real) {
        Ok(())
    } else {
        Err("the lines differ".into())
    }
}

/// `sample` (with `…` for any text) against `real`, both normalized.
fn wildcard(sample: &str, real: &str) -> bool {
    let real = normalize(real);
    let pieces: Vec<String> = normalize(sample).split('…').map(str::to_owned).collect();
    if pieces.len() == 1 {
        return pieces[0] == real;
    }
    let (first, last) = (&pieces[0], &pieces[pieces.len() - 1]);
    if !real.starts_with(first.as_str()) || real.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &real[first.len()..];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece.as_str()) {
            Some(p) => rest = &rest[p + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last.as_str())
}

/// What varies from run to run, made equal: `resp_` ids, hex runs of 16 or more, digits.
fn normalize(s: &str) -> String {
    let cs: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < cs.len() {
        if let Some(n) = response_id_at(&cs, i) {
            out.push_str("resp_<id>");
            i += n;
            continue;
        }
        let run = hex_run_at(&cs, i);
        if run >= 16 {
            out.push_str("<hex>");
        } else if run == 0 {
            out.push(cs[i]);
        } else {
            // Digits are hex digits: a digit run never crosses a hex run's end.
            let mut digits = false;
            for &c in &cs[i..i + run] {
                if !c.is_ascii_digit() {
                    out.push(c);
                } else if !digits {
                    out.push('0');
                }
                digits = c.is_ascii_digit();
            }
        }
        i += run.max(1);
    }
    out
}

/// The length of the `resp_<20 or more alphanumerics>` id at `i`, if one starts there.
fn response_id_at(cs: &[char], i: usize) -> Option<usize> {
    if !cs[i..].starts_with(&['r', 'e', 's', 'p', '_']) {
        return None;
    }
    let n = cs[i + 5..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric())
        .count();
    (n >= 20).then_some(5 + n)
}

/// The length of the run of lowercase hex digits at `i`.
fn hex_run_at(cs: &[char], i: usize) -> usize {
    cs[i..]
        .iter()
        .take_while(|c| c.is_ascii_digit() || ('a'..='f').contains(*c))
        .count()
}

#[derive(Clone, Copy)]
enum Token {
    Response,
    Hex32,
}

/// The distinct tokens of `kind` in `s`, in order of first appearance.
fn tokens(s: &str, kind: Token) -> Vec<String> {
    let cs: Vec<char> = s.chars().collect();
    let mut found: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let (n, step) = match kind {
            Token::Response => response_id_at(&cs, i).map_or((0, 1), |n| (n, n)),
            Token::Hex32 => {
                let run = hex_run_at(&cs, i);
                (if run == 32 { run } else { 0 }, run.max(1))
            }
        };
        if n > 0 {
            let t: String = cs[i..i + n].iter().collect();
            if !found.contains(&t) {
                found.push(t);
            }
        }
        i += step;
    }
    found
}

/// A sample's JSON: JSON with `…` for any value, any further elements or members, or
/// any text inside a string.
#[derive(Debug)]
enum Pat {
    Any,
    Null,
    Bool(bool),
    /// An integer, compared; a fraction, any number.
    Num(Option<i128>),
    Str(String),
    Arr(Vec<Option<Pat>>),
    Obj(Vec<(String, Pat)>, bool),
}

fn parse_pattern(s: &str) -> Option<Pat> {
    let mut p = PatParser {
        cs: s.chars().collect(),
        i: 0,
    };
    let v = p.value()?;
    p.ws();
    (p.i == p.cs.len()).then_some(v)
}

struct PatParser {
    cs: Vec<char>,
    i: usize,
}

impl PatParser {
    fn ws(&mut self) {
        while self.cs.get(self.i).is_some_and(|c| c.is_whitespace()) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.ws();
        self.cs.get(self.i).copied()
    }

    fn eat(&mut self, c: char) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    fn value(&mut self) -> Option<Pat> {
        match self.peek()? {
            '{' => self.object(),
            '[' => self.array(),
            '"' => self.string().map(Pat::Str),
            '…' => {
                self.i += 1;
                Some(Pat::Any)
            }
            't' => self.word("true", Pat::Bool(true)),
            'f' => self.word("false", Pat::Bool(false)),
            'n' => self.word("null", Pat::Null),
            c if c == '-' || c.is_ascii_digit() => {
                let start = self.i;
                while self
                    .cs
                    .get(self.i)
                    .is_some_and(|c| c.is_ascii_digit() || "+-.eE".contains(*c))
                {
                    self.i += 1;
                }
                let text: String = self.cs[start..self.i].iter().collect();
                text.parse::<f64>().ok()?;
                Some(Pat::Num(text.parse::<i128>().ok()))
            }
            _ => None,
        }
    }

    fn word(&mut self, word: &str, pat: Pat) -> Option<Pat> {
        let w: Vec<char> = word.chars().collect();
        self.cs[self.i..].starts_with(&w).then(|| {
            self.i += w.len();
            pat
        })
    }

    fn object(&mut self) -> Option<Pat> {
        self.eat('{')?;
        let (mut members, mut open) = (Vec::new(), false);
        if self.eat('}').is_some() {
            return Some(Pat::Obj(members, open));
        }
        loop {
            if self.peek()? == '…' {
                self.i += 1;
                open = true;
            } else {
                let key = self.string()?;
                self.eat(':')?;
                members.push((key, self.value()?));
            }
            match self.peek()? {
                ',' => self.i += 1,
                '}' => {
                    self.i += 1;
                    return Some(Pat::Obj(members, open));
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self) -> Option<Pat> {
        self.eat('[')?;
        let mut items = Vec::new();
        if self.eat(']').is_some() {
            return Some(Pat::Arr(items));
        }
        loop {
            if self.peek()? == '…' {
                self.i += 1;
                items.push(None);
            } else {
                items.push(Some(self.value()?));
            }
            match self.peek()? {
                ',' => self.i += 1,
                ']' => {
                    self.i += 1;
                    return Some(Pat::Arr(items));
                }
                _ => return None,
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        self.eat('"')?;
        let mut out = String::new();
        loop {
            let c = *self.cs.get(self.i)?;
            self.i += 1;
            match c {
                '"' => return Some(out),
                '\\' => {
                    let e = *self.cs.get(self.i)?;
                    self.i += 1;
                    out.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'u' => {
                            let hex: String = self.cs.get(self.i..self.i + 4)?.iter().collect();
                            self.i += 4;
                            char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?
                        }
                        other => other,
                    });
                }
                c => out.push(c),
            }
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn match_json(pat: &Pat, v: &Value, at: &str) -> Result<(), String> {
    let differ = |what: &str| {
        Err(format!(
            "{at}: the sample shows {what}, the run has {v:.200}"
        ))
    };
    match pat {
        Pat::Any => Ok(()),
        Pat::Null if v.is_null() => Ok(()),
        Pat::Bool(b) if v.as_bool() == Some(*b) => Ok(()),
        Pat::Num(None) if v.is_number() => Ok(()),
        Pat::Num(Some(n)) if v.as_i64().map(i128::from) == Some(*n) => Ok(()),
        Pat::Num(Some(n)) if v.as_u64().map(i128::from) == Some(*n) => Ok(()),
        Pat::Str(s) => match v.as_str() {
            Some(r) if wildcard(s, r) => Ok(()),
            Some(r) => Err(format!(
                "{at}: the strings differ\n  sample: {s:?}\n  run:    {:?}",
                clip(r)
            )),
            None => differ("a string"),
        },
        Pat::Arr(items) => {
            let Some(vals) = v.as_array() else {
                return differ("an array");
            };
            let mut best = None;
            if match_items(items, vals, 0, at, &mut best) {
                Ok(())
            } else {
                Err(best.map_or_else(|| format!("{at}: the arrays differ"), |(_, e)| e))
            }
        }
        Pat::Obj(members, open) => {
            let Some(obj) = v.as_object() else {
                return differ("an object");
            };
            for (key, p) in members {
                match obj.get(key) {
                    Some(val) => match_json(p, val, &format!("{at}.{key}"))?,
                    None => {
                        return Err(format!(
                            "{at}: the sample shows `{key}`, the run has no such key (it has: {})",
                            obj.keys().cloned().collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
            }
            if !open && let Some(extra) = obj.keys().find(|k| !members.iter().any(|(m, _)| m == *k))
            {
                return Err(format!(
                    "{at}: the run has `{extra}` ({:.120}), the sample does not show it (add it, \
                     or `…` for members left out)",
                    obj[extra]
                ));
            }
            Ok(())
        }
        Pat::Null => differ("null"),
        Pat::Bool(b) => differ(&b.to_string()),
        Pat::Num(_) => Err(format!(
            "{at}: the sample shows another number than the run's {v} ({})",
            kind(v)
        )),
    }
}

/// Array elements against items (`None` = `…`, any number of elements); the error of
/// the item that got furthest.
fn match_items(
    items: &[Option<Pat>],
    vals: &[Value],
    vi: usize,
    at: &str,
    best: &mut Option<(usize, String)>,
) -> bool {
    let Some((first, rest)) = items.split_first() else {
        if vi < vals.len() {
            record(
                best,
                usize::MAX - 1,
                format!(
                    "{at}: the run has {} element(s) more than the sample shows, from {:.120} \
                     (add them, or `…`)",
                    vals.len() - vi,
                    vals[vi]
                ),
            );
        }
        return vi == vals.len();
    };
    let depth = vi * 2 + 1;
    match first {
        None => (vi..=vals.len()).any(|k| match_items(rest, vals, k, at, best)),
        Some(p) => {
            let Some(v) = vals.get(vi) else {
                // The weakest explanation: an element that differs says more.
                record(
                    best,
                    0,
                    format!(
                        "{at}: the sample shows more elements than the run's {}",
                        vals.len()
                    ),
                );
                return false;
            };
            match match_json(p, v, &format!("{at}[{vi}]")) {
                Ok(()) => match_items(rest, vals, vi + 1, at, best),
                Err(e) => {
                    record(best, depth, e);
                    false
                }
            }
        }
    }
}

#[test]
fn the_loose_comparison_can_fail() {
    let ok = |s: &str, r: &str| match_lines(&[s], &[r]).is_ok();
    assert!(ok(r#"{"a":1,"b":{…}}"#, r#"{"a":1,"b":{"c":2}}"#));
    assert!(!ok(r#"{"a":1}"#, r#"{"a":1,"tasks":{}}"#));
    assert!(ok(r#"{"a":1,…}"#, r#"{"a":1,"tasks":{}}"#));
    assert!(!ok(r#"{"a":[{"n":"x"},…]}"#, r#"{"a":[{"n":"y"}]}"#));
    assert!(ok(
        r#"{"a":[{"n":"x"},…,{"n":"z"}]}"#,
        r#"{"a":[{"n":"x"},{"n":"y"},{"n":"z"}]}"#
    ));
    assert!(!ok(
        r#"{"a":[{"n":"x"}]}"#,
        r#"{"a":[{"n":"x"},{"n":"y"}]}"#
    ));
    assert!(ok(
        r#"{"p":0.5,"t":"after 3s; ab…"}"#,
        r#"{"p":2.1,"t":"after 12s; abc"}"#
    ));
    assert!(!ok(r#"{"code":-32020}"#, r#"{"code":-32600}"#));
    assert!(ok(
        "Run resp_gqau7uQQHoMGpGJN2dCC9EUx is <untrusted-web-content-f86fcd3799834768>",
        "Run resp_SpC0kOEImvKzDeHdp8z7kcRp is <untrusted-web-content-0d68b151c5f81d7c>"
    ));
    assert!(ok("data: {\"x\":…}", "data: {\"x\":[1]}"));
    assert!(!ok("data: {\"x\":…}", "data: nope"));
    assert!(match_lines(&["a", "…", "c"], &["a", "b", "b", "c"]).is_ok());
    assert_eq!(match_lines(&["a", "c"], &["a", "b"]).unwrap_err().0, 1);
    assert!(match_lines(&["a"], &["a", "b"]).is_err());
    // A tool the run does not list: the element that differs is named.
    let why = match_lines(
        &[r#"{"t":[{"n":"a"},…,{"n":"z"}]}"#],
        &[r#"{"t":[{"n":"a"},{"n":"b"}]}"#],
    )
    .unwrap_err()
    .1;
    assert!(why.contains("$.t[1].n") && why.contains("\"z\""), "{why}");
    assert_eq!(
        tokens(
            "x resp_gqau7uQQHoMGpGJN2dCC9EUx y resp_gqau7uQQHoMGpGJN2dCC9EUx",
            Token::Response
        ),
        vec!["resp_gqau7uQQHoMGpGJN2dCC9EUx"]
    );
    assert_eq!(
        tokens(
            "id: afabad1984185450637ed9bcd869c394 f86fcd3799834768",
            Token::Hex32
        ),
        vec!["afabad1984185450637ed9bcd869c394"]
    );
}
