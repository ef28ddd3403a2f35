//! The docs against the code they describe, read as files (no network): every
//! `PERPLEXITY_*` variable the code reads is in docs/configuration.md and every one the
//! page names is read; every metric the server registers is in docs/http.md's metrics
//! table and every one there is registered; the user docs (README.md, docs/*.md) carry no
//! tracker numbers, no "for now"/"so far" and no table cut in two by a blank line. One
//! check runs the binary: docs/cli.md's synopsis against every `--help` it prints (every
//! command and long flag, and back). A failure names the file, the line (where there is
//! one) and what differs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The user docs: README.md and docs/*.md.
fn user_docs() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    names.sort();
    names.insert(0, "README.md".to_owned());
    names
}

// ---- Rust source: string literals apart from code and comments --------------------

/// A Rust file split into its string literals' contents and the code around them (with
/// comments dropped and each literal left as `""`). Enough of Rust's lexer for that:
/// line and nested block comments, `"…"` with escapes, raw strings `r#"…"#`, byte
/// strings, and char literals (so `'"'` opens nothing); lifetimes pass through.
struct Lexed {
    literals: Vec<String>,
    code: String,
}

fn lex(src: &str) -> Lexed {
    let cs: Vec<char> = src.chars().collect();
    let (mut literals, mut code) = (Vec::new(), String::new());
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        let next = cs.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < cs.len() && cs[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < cs.len() {
                if cs[i] == '/' && cs.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if cs[i] == '*' && cs.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            let mut j = i + 1;
            let mut text = String::new();
            while j < cs.len() && cs[j] != '"' {
                if cs[j] == '\\' {
                    text.push(cs[j]);
                    j += 1;
                }
                if let Some(&ch) = cs.get(j) {
                    text.push(ch);
                }
                j += 1;
            }
            literals.push(text);
            code.push_str("\"\"");
            i = j + 1;
        } else if c == 'r'
            && (i == 0 || !ident(cs[i - 1]) || (cs[i - 1] == 'b' && (i < 2 || !ident(cs[i - 2]))))
            && matches!(next, Some('#' | '"'))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while cs.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if cs.get(j) != Some(&'"') {
                // `r#ident`, a raw identifier.
                code.push(c);
                i += 1;
                continue;
            }
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let start = j + 1;
            let mut end = start;
            while end < cs.len() && !cs[end..].starts_with(&close) {
                end += 1;
            }
            literals.push(cs[start..end.min(cs.len())].iter().collect());
            code.push_str("\"\"");
            i = end + close.len();
        } else if c == '\'' {
            // A char literal ('x', '\'', '\u{1F600}'), else a lifetime or label.
            let end = if next == Some('\\') {
                (i + 2..cs.len().min(i + 12)).find(|&k| cs[k] == '\'' && k > i + 2)
            } else {
                (cs.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            match end {
                Some(end) => {
                    code.push_str("' '");
                    i = end + 1;
                }
                None => {
                    code.push(c);
                    i += 1;
                }
            }
        } else {
            code.push(c);
            i += 1;
        }
    }
    Lexed { literals, code }
}

/// The `PERPLEXITY_*` names in `text`: whole words of capitals, digits and `_`. A name
/// ending in `_` is a prefix (`PERPLEXITY_GATEWAY_*`, the gateway's refusal of every
/// `PERPLEXITY_` variable), and one right after `{` a constant a format string inlines
/// (`{PERPLEXITY_BASE}`): neither is a variable.
fn perplexity_names(text: &str) -> Vec<String> {
    let word = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
    let mut found = Vec::new();
    for (at, _) in text.match_indices("PERPLEXITY_") {
        if text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| word(c) || c.is_ascii_lowercase() || c == '{')
        {
            continue;
        }
        let name: String = text[at..].chars().take_while(|&c| word(c)).collect();
        if !name.ends_with('_') {
            found.push(name);
        }
    }
    found
}

#[test]
fn the_lexer_keeps_literals_apart_from_comments_and_chars() {
    let l = lex(concat!(
        "// \"PERPLEXITY_IN_A_COMMENT\"\n",
        "/* a /* nested */ \"PERPLEXITY_IN_A_BLOCK\" */\n",
        "let q = '\"'; let e = '\\''; fn f<'a>(x: &'a str) {}\n",
        "env(\"PERPLEXITY_A\"); r#\"say \"PERPLEXITY_B\"\"#; b\"PERPLEXITY_C\\\"x\";\n",
        "format!(\"{}: PERPLEXITY_D is {x}, not {PERPLEXITY_E}\", \"PERPLEXITY_\");\n",
    ));
    let names: Vec<String> = l
        .literals
        .iter()
        .flat_map(|s| perplexity_names(s))
        .collect();
    assert_eq!(
        names,
        [
            "PERPLEXITY_A",
            "PERPLEXITY_B",
            "PERPLEXITY_C",
            "PERPLEXITY_D"
        ]
    );
    assert!(l.code.contains("fn f<'a>(x: &'a str)"), "{}", l.code);
    assert!(!l.code.contains("PERPLEXITY"), "{}", l.code);
}

// ---- Markdown tables ----------------------------------------------------------------

/// A table row: its 1-based line and its cells (`\|` kept inside a cell).
struct Row {
    line: usize,
    cells: Vec<String>,
}

/// The body rows of every table in `text` outside fenced code (header and separator
/// rows left out).
fn table_rows(text: &str) -> Vec<Row> {
    let lines: Vec<&str> = text.lines().collect();
    let mut rows = Vec::new();
    let mut fenced = false;
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !t.starts_with('|') || is_separator(t) {
            continue;
        }
        if lines.get(n + 1).is_some_and(|l| is_separator(l.trim())) {
            continue; // the header
        }
        rows.push(Row {
            line: n + 1,
            cells: split_cells(t),
        });
    }
    rows
}

fn is_separator(t: &str) -> bool {
    t.starts_with('|') && t.contains("---") && t.chars().all(|c| "|-: ".contains(c))
}

fn split_cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = vec![String::new()];
    let mut escaped = false;
    for c in inner.chars() {
        if c == '|' && !escaped {
            cells.push(String::new());
        } else {
            cells.last_mut().unwrap().push(c);
        }
        escaped = c == '\\';
    }
    cells.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// What `cell` shows in backticks.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

// ---- 1. environment variables ------------------------------------------------------

/// `PERPLEXITY_*` names in the code's string literals that are not settings, and why.
const NOT_SETTINGS: &[(&str, &str)] = &[(
    "PERPLEXITY_AGENT_TEST_PANIC",
    "a debug-build switch the tests use to make a tool handler panic \
     (panic containment); release builds do not read it",
)];

/// Every `PERPLEXITY_*` name in a string literal under src/ (where the code reads a
/// variable — `env("PERPLEXITY_TOOLS")` — or names one in a message), with where it
/// was first seen.
fn variables_in_the_code() -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    for path in rust_files(&root().join("src")) {
        let lexed = lex(&std::fs::read_to_string(&path).unwrap());
        let rel = path.strip_prefix(root()).unwrap().display().to_string();
        for name in lexed.literals.iter().flat_map(|l| perplexity_names(l)) {
            if !found.iter().any(|(n, _)| *n == name) {
                found.push((name, rel.clone()));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_variable_the_code_reads_is_in_configuration_md_and_back() {
    const DOC: &str = "docs/configuration.md";
    let text = read(DOC);
    let code = variables_in_the_code();
    assert!(
        code.len() > 50 && code.iter().any(|(n, _)| n == "PERPLEXITY_API_KEY"),
        "the scan of src/ found too few variables to be right: {code:?}"
    );
    for (name, why) in NOT_SETTINGS {
        assert!(
            code.iter().any(|(n, _)| n == name),
            "NOT_SETTINGS lists {name} ({why}), which src/ no longer names: drop it"
        );
    }
    // What the page documents: the names in its tables' first column.
    let documented: BTreeSet<String> = table_rows(&text)
        .iter()
        .flat_map(|r| perplexity_names(&r.cells[0]))
        .collect();
    let mut problems = Vec::new();
    for (name, at) in &code {
        if !documented.contains(name) && !NOT_SETTINGS.iter().any(|(n, _)| n == name) {
            problems.push(format!(
                "{name} (named in {at}) is not in the first column of any table in {DOC}, \
                 which says it lists every variable"
            ));
        }
    }
    // Every name the page mentions, in a table or around one.
    for (n, line) in text.lines().enumerate() {
        for name in perplexity_names(line) {
            if !code.iter().any(|(c, _)| *c == name) {
                problems.push(format!(
                    "{DOC}:{}: {name} is documented, but no string in src/ names it",
                    n + 1
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---- 2. metrics -------------------------------------------------------------------

const TELEMETRY: &str = "src/telemetry.rs";

/// The metric names src/telemetry.rs registers (its `perplexity_agent_…` literals).
fn metrics_in_the_code() -> BTreeSet<String> {
    lex(&read(TELEMETRY))
        .literals
        .into_iter()
        .filter(|l| {
            l.strip_prefix("perplexity_agent_").is_some_and(|rest| {
                !rest.is_empty()
                    && rest
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            })
        })
        .collect()
}

/// The refusal reasons `Refusal::as_str` gives, from its `Refusal::X => "x"` arms.
fn refusal_reasons_in_the_code() -> BTreeSet<String> {
    read(TELEMETRY)
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("Refusal::")?;
            let (_, value) = rest.split_once("=> \"")?;
            Some(value.split('"').next()?.to_owned())
        })
        .collect()
}

/// The body rows of the table in docs/http.md's "## Metrics for Prometheus".
fn metrics_table() -> Vec<Row> {
    let text = read("docs/http.md");
    let start = text
        .find("\n## Metrics for Prometheus\n")
        .expect("docs/http.md has a section \"## Metrics for Prometheus\"");
    // The lines before the heading's.
    let offset = text[..start].matches('\n').count() + 1;
    let section = &text[start + 1..];
    let end = section[1..].find("\n## ").map_or(section.len(), |e| e + 1);
    table_rows(&section[..end])
        .into_iter()
        .map(|r| Row {
            line: r.line + offset,
            cells: r.cells,
        })
        .filter(|r| r.cells.len() >= 3)
        .collect()
}

/// A histogram's series name as its metric's (`_bucket`, `_sum`, `_count` dropped).
fn base_name(series: &str) -> &str {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| series.strip_suffix(s))
        .unwrap_or(series)
}

#[test]
fn every_metric_the_server_exposes_is_in_http_md_and_back() {
    let code = metrics_in_the_code();
    assert!(
        code.len() >= 10 && code.contains("perplexity_agent_calls_total"),
        "the scan of {TELEMETRY} found too few metrics to be right: {code:?}"
    );
    // The scan reads one file: metrics registered anywhere else would go unseen.
    for path in rust_files(&root().join("src")) {
        let rel = path.strip_prefix(root()).unwrap().display().to_string();
        if rel == TELEMETRY {
            continue;
        }
        let code = lex(&std::fs::read_to_string(&path).unwrap()).code;
        for mac in [
            "counter!(",
            "gauge!(",
            "histogram!(",
            "describe_counter!(",
            "describe_gauge!(",
            "describe_histogram!(",
        ] {
            assert!(
                !code.contains(mac),
                "{rel} uses `{mac}`: metrics are registered in {TELEMETRY} only (this check reads that file)"
            );
        }
    }
    let rows = metrics_table();
    assert!(!rows.is_empty(), "no metrics table in docs/http.md");
    let mut documented = BTreeSet::new();
    let mut problems = Vec::new();
    for row in &rows {
        for name in code_spans(&row.cells[0]) {
            let name = base_name(&name).to_owned();
            if !code.contains(&name) {
                problems.push(format!(
                    "docs/http.md:{}: {name} is in the metrics table, but {TELEMETRY} registers no such metric",
                    row.line
                ));
            }
            documented.insert(name);
        }
    }
    for name in code.difference(&documented) {
        problems.push(format!(
            "{name} is registered in {TELEMETRY}, but not in docs/http.md's metrics table"
        ));
    }
    // The refusal reasons: the `reason` label's values, as listed beside it.
    let reasons = refusal_reasons_in_the_code();
    assert!(
        reasons.len() >= 3,
        "the scan of {TELEMETRY} found too few refusal reasons: {reasons:?}"
    );
    match rows
        .iter()
        .find(|r| code_spans(&r.cells[0]) == ["perplexity_agent_refusals_total"])
    {
        None => problems.push("docs/http.md has no row for perplexity_agent_refusals_total".into()),
        Some(row) => {
            let shown: BTreeSet<String> = code_spans(&row.cells[1])
                .into_iter()
                .filter(|s| s != "reason")
                .collect();
            if shown != reasons {
                problems.push(format!(
                    "docs/http.md:{}: the refusal reasons shown ({shown:?}) are not the ones \
                     Refusal::as_str gives ({reasons:?})",
                    row.line
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---- 3. the user docs' wording and tables -----------------------------------------

/// Where `text` refers to a tracker entry ("issue 34", "issues #3", "PR 12", "#52") or
/// says "for now"/"so far": (1-based line, what was found).
fn wording_problems(text: &str) -> Vec<(usize, String)> {
    // The text lower-cased with every run of whitespace as one space, and the line each
    // character came from, so a phrase broken across lines is found.
    let (mut flat, mut line_of) = (Vec::new(), Vec::new());
    let mut line = 1;
    for c in text.chars() {
        if c.is_whitespace() {
            if flat.last() != Some(&' ') {
                flat.push(' ');
                line_of.push(line);
            }
            if c == '\n' {
                line += 1;
            }
        } else {
            flat.extend(c.to_lowercase());
            line_of.resize(flat.len(), line);
        }
    }
    let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    let starts_word = |i: usize| i == 0 || !word(flat.get(i - 1));
    let mut found = Vec::new();
    let mut i = 0;
    while i < flat.len() {
        let rest = &flat[i..];
        let mut next = i + 1;
        // A phrase that says the text will soon be wrong.
        for phrase in ["for now", "so far"] {
            let p: Vec<char> = phrase.chars().collect();
            if starts_word(i) && rest.starts_with(&p) && !word(rest.get(p.len())) {
                found.push((line_of[i], format!("\"{phrase}\"")));
            }
        }
        // A tracker's word, then a number (optionally after `#`).
        for tracker in ["issue", "issues", "pr", "pull request", "ticket", "gh-"] {
            let t: Vec<char> = tracker.chars().collect();
            if !starts_word(i) || !rest.starts_with(&t) {
                continue;
            }
            let mut j = t.len();
            while matches!(rest.get(j), Some(' ' | '#')) {
                j += 1;
            }
            if rest.get(j).is_some_and(char::is_ascii_digit) && (j > t.len() || tracker == "gh-") {
                let shown: String = rest[..(j + 4).min(rest.len())].iter().collect();
                found.push((line_of[i], format!("a tracker reference \"{shown}…\"")));
                next = i + j;
            }
        }
        // `#52`: a number after `#` that starts a word (not `&#124;`, not `a#1`).
        if flat[i] == '#'
            && (i == 0 || !(word(flat.get(i - 1)) || flat[i - 1] == '&' || flat[i - 1] == '#'))
            && rest.get(1).is_some_and(char::is_ascii_digit)
        {
            let shown: String = rest[..4.min(rest.len())].iter().collect();
            found.push((line_of[i], format!("a tracker reference \"{shown}…\"")));
        }
        i = next;
    }
    found
}

#[test]
fn the_wording_check_finds_what_it_should() {
    let found = |t: &str| {
        wording_problems(t)
            .into_iter()
            .map(|(l, _)| l)
            .collect::<Vec<_>>()
    };
    assert_eq!(found("fine\nstays in each replica's store for\nnow."), [2]);
    assert_eq!(found("a\nb (BENCHMARKS.md, issue 34)."), [2]);
    assert_eq!(found("see #52, Issue #7 and PR 12"), [1, 1, 1]);
    assert_eq!(found("So far, so good"), [1]);
    assert!(
        found("for nowhere; so farther; `&#124;`; [x](#why-55); an issue with 3 rows; \n# 1")
            .is_empty()
    );
}

#[test]
fn user_docs_carry_no_tracker_numbers_and_no_for_now() {
    let mut problems = Vec::new();
    for rel in user_docs() {
        for (line, what) in wording_problems(&read(&rel)) {
            problems.push(format!(
                "{rel}:{line}: {what} — user docs say what is true now, without tracker \
                 numbers or \"for now\"/\"so far\""
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Table rows that follow a blank line without starting a table of their own: Markdown
/// ends a table at a blank line, so such a row is shown as a paragraph of pipes.
fn cut_tables(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut fenced = false;
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let after_blank = n > 0 && lines[n - 1].trim().is_empty();
        let starts_table = lines.get(n + 1).is_some_and(|l| is_separator(l.trim()));
        if !fenced && t.starts_with('|') && after_blank && !starts_table {
            found.push(n + 1);
        }
    }
    found
}

#[test]
fn user_docs_tables_are_not_cut_by_blank_lines() {
    assert_eq!(
        cut_tables("| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n"),
        [5]
    );
    assert!(cut_tables("| a |\n|---|\n| 1 |\n\n| b |\n|---|\n```\n\n| x\n```\n").is_empty());
    let mut problems = Vec::new();
    for rel in user_docs() {
        for line in cut_tables(&read(&rel)) {
            problems.push(format!(
                "{rel}:{line}: a table row after a blank line that starts no table (a \
                 blank line ends a table: this row is shown as text)"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---- 4. the command line against docs/cli.md ----------------------------------------

const CLI_DOC: &str = "docs/cli.md";

/// What one `--help` shows: the subcommands it lists under "Commands:" (clap's own
/// `help` left out) and the long flags its "Options:" section defines (`--help` and
/// `--version` left out). Both the short help (`-h`, one line per flag) and the long one
/// (description lines indented below each flag, "Possible values:" lists) are read: a
/// flag is a line indented at most six spaces whose text starts `--name` or `-x, --name`.
#[derive(Debug, Default, PartialEq)]
struct HelpText {
    commands: Vec<String>,
    flags: Vec<String>,
}

fn parse_help(text: &str) -> HelpText {
    let mut help = HelpText::default();
    let mut section = "";
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if indent == 0 {
            section = trimmed.strip_suffix(':').unwrap_or("");
            continue;
        }
        match section {
            "Commands" if indent <= 2 => {
                let name = trimmed.split_whitespace().next().unwrap_or_default();
                if name != "help" {
                    help.commands.push(name.to_owned());
                }
            }
            "Options" if indent <= 6 => {
                let def = match trimmed.strip_prefix('-') {
                    Some(rest) if !rest.starts_with('-') => rest
                        .split_once(", ")
                        .map_or("", |(_, long)| long)
                        .trim_start(),
                    _ => trimmed,
                };
                let Some(name) = def.strip_prefix("--") else {
                    continue;
                };
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !name.is_empty() && name != "help" && name != "version" {
                    help.flags.push(format!("--{name}"));
                }
            }
            _ => {}
        }
    }
    help
}

#[test]
fn the_help_parser_reads_both_forms() {
    let short = "About.\n\nUsage: x add [OPTIONS] <NAME>\n\nCommands:\n  add     Add one\n  \
                 list    Show them\n  help    Print this message\n\nArguments:\n  <NAME>  \
                 The name\n\nOptions:\n      --tools <LIST>  The tools (with --other too)\n  \
                 -j, --json          JSON\n  -h, --help          Print help\n  -V, --version  \
                 Print version\n";
    assert_eq!(
        parse_help(short),
        HelpText {
            commands: vec!["add".into(), "list".into()],
            flags: vec!["--tools".into(), "--json".into()],
        }
    );
    let long = "About.\n\nUsage: x install [OPTIONS] <CLIENT>\n\nArguments:\n  <CLIENT>\n          \
                The client\n          \n          [possible values: a, b]\n\nOptions:\n      \
                --print\n          Print it\n\n      --launcher <LAUNCHER>\n          How\n\n          \
                Possible values:\n          - auto:   `npx`\n          --not-a-flag wrapped\n\n  \
                -h, --help\n          Print help (see a summary with '-h')\n";
    assert_eq!(
        parse_help(long),
        HelpText {
            commands: vec![],
            flags: vec!["--print".into(), "--launcher".into()],
        }
    );
}

/// Every command the binary's `--help` lists, recursively from the top: its path (`[]` for
/// the top level, `["gateway", "add"]`) and what its own `--help` shows.
fn the_command_tree() -> Vec<(Vec<String>, HelpText)> {
    let mut tree = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let (stdout, stderr, code) = crate::common::run_cli(&args, &[]);
        assert_eq!(
            code,
            0,
            "`perplexity-agent {}` exited {code}: {stderr}",
            args.join(" ")
        );
        let help = parse_help(&stdout);
        for sub in help.commands.iter().rev() {
            let mut deeper = path.clone();
            deeper.push(sub.clone());
            todo.push(deeper);
        }
        tree.push((path, help));
    }
    tree
}

/// One command of docs/cli.md's synopsis (its first fenced block): a line that starts
/// `perplexity-agent` and the indented lines that continue it, each without its ` # …`
/// comment (a comment may name another command's flag).
struct SynopsisEntry {
    line: usize,
    text: String,
}

fn without_comment(line: &str) -> &str {
    line.find(" # ").map_or(line, |at| &line[..at])
}

fn synopsis(doc: &str) -> Vec<SynopsisEntry> {
    let mut entries: Vec<SynopsisEntry> = Vec::new();
    let mut lines = doc.lines().enumerate();
    lines
        .by_ref()
        .find(|(_, l)| l.trim_start().starts_with("```"))
        .unwrap_or_else(|| panic!("{CLI_DOC} has no code block (the synopsis)"));
    for (n, line) in lines {
        if line.trim_start().starts_with("```") {
            break;
        }
        if line.starts_with("perplexity-agent") {
            entries.push(SynopsisEntry {
                line: n + 1,
                text: without_comment(line).to_owned(),
            });
        } else if let Some(entry) = entries.last_mut().filter(|_| line.starts_with(' ')) {
            entry.text.push('\n');
            entry.text.push_str(without_comment(line));
        } else if !line.trim().is_empty() {
            panic!(
                "{CLI_DOC}:{}: a synopsis line that neither starts `perplexity-agent` nor \
                 continues (indented) the line before",
                n + 1
            );
        }
    }
    entries
}

/// The `--flags` in `text`: `--` then a letter, at the start of a word.
fn long_flags(text: &str) -> BTreeSet<String> {
    text.match_indices("--")
        .filter(|(at, _)| {
            text[..*at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '-'))
        })
        .filter_map(|(at, _)| {
            let name: String = text[at + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            name.starts_with(|c: char| c.is_ascii_lowercase())
                .then(|| format!("--{name}"))
        })
        .collect()
}

/// The command path a synopsis entry is for, read against the help tree: the words after
/// `perplexity-agent` while each is a subcommand of the one before. A plain word where
/// the command has subcommands but none of that name is an error.
fn entry_path(
    entry: &SynopsisEntry,
    tree: &[(Vec<String>, HelpText)],
) -> Result<Vec<String>, String> {
    let mut path: Vec<String> = Vec::new();
    for word in entry.text.split_whitespace().skip(1) {
        let commands = &tree.iter().find(|(p, _)| *p == path).unwrap().1.commands;
        if commands.is_empty() {
            break;
        }
        let plain = word.starts_with(|c: char| c.is_ascii_lowercase())
            && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !plain {
            break;
        }
        if !commands.iter().any(|c| c == word) {
            return Err(format!(
                "{CLI_DOC}:{}: the synopsis names `perplexity-agent {}`, but `perplexity-agent \
                 {}--help` lists no command `{word}` (it lists: {})",
                entry.line,
                path.iter()
                    .map(String::as_str)
                    .chain([word])
                    .collect::<Vec<_>>()
                    .join(" "),
                path.iter().map(|p| format!("{p} ")).collect::<String>(),
                commands.join(", ")
            ));
        }
        path.push(word.to_owned());
    }
    Ok(path)
}

/// docs/cli.md says it is every command and its flags: each command `--help` lists (at
/// every depth) has a line of its own in the synopsis, `perplexity-agent <path> …`, and
/// each long flag its `--help` defines is on that command's synopsis line(s) — so the
/// check is per command, not page-wide. The other way round, every command a synopsis
/// line names exists, and every `--flag` on it is one that command's `--help` defines.
#[test]
fn cli_md_has_every_command_and_flag_the_help_shows_and_back() {
    let tree = the_command_tree();
    let top = &tree[0].1;
    assert!(
        top.commands.len() >= 15 && top.commands.iter().any(|c| c == "ask"),
        "the parse of `perplexity-agent --help` found too few commands to be right: {:?}",
        top.commands
    );
    assert!(
        tree.iter()
            .any(|(p, h)| p.len() == 2 && !h.flags.is_empty()),
        "the help tree has no sub-subcommand with flags (`gateway add`): {:?}",
        tree.iter().map(|(p, _)| p.join(" ")).collect::<Vec<_>>()
    );
    let doc = read(CLI_DOC);
    let entries = synopsis(&doc);
    assert!(entries.len() >= 10, "{CLI_DOC}: too few synopsis lines");
    let mut problems = Vec::new();
    let mut documented: Vec<(Vec<String>, &SynopsisEntry)> = Vec::new();
    for entry in &entries {
        match entry_path(entry, &tree) {
            Ok(path) => documented.push((path, entry)),
            Err(e) => problems.push(e),
        }
    }
    for (path, help) in &tree {
        let shown = format!("perplexity-agent {}", path.join(" "));
        let shown = shown.trim_end();
        let own: Vec<&SynopsisEntry> = documented
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, e)| *e)
            .collect();
        if !documented.iter().any(|(p, _)| p.starts_with(path)) {
            problems.push(format!(
                "`{shown}` is in the help, but no line of {CLI_DOC}'s synopsis starts `{shown}`"
            ));
            continue;
        }
        if own.is_empty() && !help.flags.is_empty() {
            problems.push(format!(
                "`{shown}` has flags ({}), but no synopsis line of its own in {CLI_DOC}",
                help.flags.join(" ")
            ));
            continue;
        }
        let on_its_lines: BTreeSet<String> = own.iter().flat_map(|e| long_flags(&e.text)).collect();
        for flag in &help.flags {
            if !on_its_lines.contains(flag) {
                problems.push(format!(
                    "`{shown} --help` shows {flag}, but {CLI_DOC}'s synopsis line for \
                     `{shown}` (line {}) does not",
                    own[0].line
                ));
            }
        }
        for entry in &own {
            for flag in long_flags(&entry.text) {
                if !help.flags.contains(&flag) {
                    problems.push(format!(
                        "{CLI_DOC}:{}: the synopsis gives `{shown}` the flag {flag}, which \
                         `{shown} --help` does not show",
                        entry.line
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
