//! The house's floors, checked: which of our modules each module may import. A module
//! imports only from floors below it (and `config` only the config types of the modules
//! it fills in), so no circle can form and a reviewer knows where a change may reach.
//! Adding an upward import fails this test; moving a floor is a change to this table.

#![cfg(test)]

use std::collections::BTreeSet;
use std::path::Path;

/// Each top-level module and what it may import. The front ends `cli` and `tui` sit
/// above them all and are not listed.
const FLOORS: &[(&str, &[&str])] = &[
    // The ground floor: imports nothing of ours.
    ("call", &[]),
    // The wall clock, read in one place.
    ("clock", &[]),
    ("dense", &[]),
    // The stand-in upstream `demo` serves: no key, no egress, nothing of ours but the
    // clock.
    ("demo", &["clock"]),
    ("drain", &[]),
    ("files", &[]),
    ("random", &[]),
    ("net", &[]),
    ("signals", &[]),
    // Prometheus metrics: the names, and a helper per event (off unless exported).
    ("telemetry", &[]),
    ("text", &[]),
    // Every piece of state behind one door: the local engine (SQLite), the shared one
    // (Redis).
    ("state", &["call", "clock", "files", "random", "telemetry"]),
    // The controls every call passes.
    (
        "guard",
        &["call", "files", "random", "state", "telemetry", "text"],
    ),
    // What calls cost: the ledger (in the local store) and the budgets.
    (
        "spend",
        &[
            "call",
            "clock",
            "perplexity",
            "random",
            "state",
            "telemetry",
        ],
    ),
    // Answers served again instead of paid for again (kept through the state door).
    ("cache", &["call", "clock", "state", "telemetry", "text"]),
    // Egress.
    ("fetch", &["net", "text"]),
    ("perplexity", &["net", "random", "telemetry", "text"]),
    // The tools, and the gateway that offers other servers' tools beside them.
    (
        "gateway",
        &[
            "call", "dense", "fetch", "files", "guard", "net", "random", "text",
        ],
    ),
    (
        "tools",
        &[
            "cache",
            "call",
            "drain",
            "fetch",
            "gateway",
            "guard",
            "perplexity",
            "random",
            "spend",
            "state",
            "telemetry",
            "text",
        ],
    ),
    // Who may call the HTTP server: named clients, OAuth token subjects.
    (
        "identity",
        &[
            "call", "clock", "files", "guard", "net", "random", "spend", "text", "tools",
        ],
    ),
    // Reads the environment and hands each module its own config type.
    (
        "config",
        &[
            "cache",
            "call",
            "fetch",
            "gateway",
            "guard",
            "identity",
            "net",
            "perplexity",
            "spend",
            "state",
            "tools",
        ],
    ),
    // Front ends.
    (
        "mcp",
        &[
            "call",
            "clock",
            "config",
            "dense",
            "drain",
            "guard",
            "identity",
            "perplexity",
            "random",
            "signals",
            "state",
            "telemetry",
            "text",
            "tools",
        ],
    ),
    // The composition root: it assembles every front end but the human ones (`cli`,
    // `tui`), which call it.
    (
        "app",
        &[
            "cache",
            "call",
            "config",
            "fetch",
            "gateway",
            "guard",
            "identity",
            "mcp",
            "perplexity",
            "spend",
            "state",
            "tools",
        ],
    ),
];

/// The `crate::…` paths a file's code (not its comments) names, as written after
/// `crate::` (e.g. `guard::redact::scrub_outbound`).
fn crate_paths(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            if !path.is_empty() {
                found.push(path);
            }
        }
    }
    found
}

/// The top-level modules a file's code names.
fn imports(source: &str) -> BTreeSet<String> {
    crate_paths(source)
        .iter()
        .filter_map(|path| path.split("::").next())
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_imports_only_from_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut wrong = Vec::new();
    for (module, allowed) in FLOORS {
        let mut paths = Vec::new();
        let single = src.join(format!("{module}.rs"));
        if single.exists() {
            paths.push(single);
        }
        files(&src.join(module), &mut paths);
        assert!(!paths.is_empty(), "no source for module {module}");
        for path in paths {
            let source = std::fs::read_to_string(&path).unwrap();
            for name in imports(&source) {
                if name != *module && !allowed.contains(&name.as_str()) {
                    wrong.push(format!(
                        "{} imports crate::{name}",
                        path.strip_prefix(&src).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports across floors:\n{}",
        wrong.join("\n")
    );
}

/// `config.rs` fills in each module's own config type and reaches nothing behind a
/// module's door: `crate::<module>::<item>` (or the module's `config`), never deeper.
#[test]
fn config_uses_only_what_modules_export() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config.rs");
    let source = std::fs::read_to_string(path).unwrap();
    let mut deep = Vec::new();
    for path in crate_paths(&source) {
        let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        // `crate::m::Type::method` is an item's own path, not a reach behind the door.
        let item_path = segments
            .get(1)
            .is_some_and(|s| *s == "config" || s.starts_with(|c: char| c.is_ascii_uppercase()));
        if segments.len() > 2 && !item_path {
            deep.push(path.clone());
        }
    }
    assert!(deep.is_empty(), "config.rs reaches into modules: {deep:?}");
}

/// Only `perplexity/` reads the API key from the environment; everyone else asks
/// `perplexity::key` (a scrub list for the writers, the key for doctor and install).
#[test]
fn only_the_perplexity_module_reads_the_key() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    files(&src, &mut paths);
    let readers: Vec<String> = paths
        .iter()
        .filter(|path| !path.starts_with(src.join("perplexity")) && !path.ends_with("layering.rs"))
        .filter(|path| {
            let source = std::fs::read_to_string(path).unwrap();
            source.lines().any(|line| {
                let code = line.split("//").next().unwrap_or_default();
                (code.contains("var(") || code.contains("var_os(")) && code.contains("API_KEY")
            })
        })
        .map(|path| path.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    assert!(
        readers.is_empty(),
        "read the key outside perplexity/: {readers:?}"
    );
}

#[test]
fn the_check_sees_imports_but_not_comments() {
    let source = "use crate::guard::Guard; // crate::tools\n/// crate::mcp\nlet x = crate::text::inert_line(y);";
    let found: Vec<String> = imports(source).into_iter().collect();
    assert_eq!(found, ["guard", "text"]);
}

/// A source file's module path: `src/cli/doctor.rs` → `cli::doctor`, `src/cli/mod.rs`
/// → `cli`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut path: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path
        .last()
        .is_some_and(|last| last == "mod" || last == "lib" || last == "main")
    {
        path.pop();
    }
    path
}

/// The modules of `all` a file names through `super::` (a chain of them, and braced
/// groups) or `crate::`: for each path, the longest prefix that is a module.
fn modules_named(
    source: &str,
    here: &[String],
    is_mod_file: bool,
    all: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let mut named = BTreeSet::new();
    let mut resolve = |base: Vec<String>, rest: &str| {
        for part in rest.split(',') {
            let mut path = base.clone();
            for segment in part.trim().split("::").map(str::trim) {
                let name: String = segment
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() {
                    break;
                }
                path.push(name);
            }
            while !path.is_empty() && !all.contains(&path) {
                path.pop();
            }
            if !path.is_empty() {
                named.insert(path);
            }
        }
    };
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or_default();
        for (at, _) in code.match_indices("crate::") {
            if code[..at].ends_with("::") {
                continue;
            }
            let rest = &code[at + "crate::".len()..];
            resolve(
                Vec::new(),
                rest.split(['{', ';', ' ', '(', ')', '<', '>'])
                    .next()
                    .unwrap_or_default(),
            );
        }
        let mut rest = code;
        while let Some(at) = rest.find("super::") {
            // The start of a path only (`super::super::x` is read once, from its first).
            if rest[..at].ends_with("::") {
                rest = &rest[at + "super::".len()..];
                continue;
            }
            let mut tail = &rest[at..];
            // From a file, `super` is its parent module; each further `super` one up.
            let mut up = here.to_vec();
            if !is_mod_file {
                up.pop();
            }
            let mut first = true;
            while let Some(after) = tail.strip_prefix("super::") {
                if !first {
                    up.pop();
                }
                first = false;
                tail = after;
            }
            let group = match tail.strip_prefix('{') {
                Some(inside) => inside.split('}').next().unwrap_or_default(),
                None => tail
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                    .next()
                    .unwrap_or_default(),
            };
            resolve(up, group);
            rest = &rest[at + "super::".len()..];
        }
    }
    named
}

/// Import circles between sibling modules of `src` (a module that names another which,
/// directly or not, names it back). A module naming its own ancestors or descendants is
/// the ordinary shape of a Rust tree and is not counted.
fn circles(src: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    files(src, &mut paths);
    let all: BTreeSet<Vec<String>> = paths.iter().map(|p| module_of(src, p)).collect();
    let related = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
    let mut edges: std::collections::BTreeMap<Vec<String>, BTreeSet<Vec<String>>> =
        std::collections::BTreeMap::new();
    for path in &paths {
        let here = module_of(src, path);
        let is_mod_file = path
            .file_stem()
            .is_some_and(|s| s == "mod" || s == "lib" || s == "main");
        let source = std::fs::read_to_string(path).unwrap();
        let named = modules_named(&source, &here, is_mod_file, &all)
            .into_iter()
            .filter(|to| !related(&here, to))
            .collect();
        edges.insert(here, named);
    }
    let mut found = Vec::new();
    for (from, tos) in &edges {
        for to in tos {
            // A path back from `to` to `from` closes a circle.
            let mut seen = BTreeSet::new();
            let mut stack = vec![to.clone()];
            while let Some(next) = stack.pop() {
                if &next == from {
                    found.push(format!("{} -> {}", from.join("::"), to.join("::")));
                    break;
                }
                if seen.insert(next.clone()) {
                    stack.extend(edges.get(&next).into_iter().flatten().cloned());
                }
            }
        }
    }
    found
}

#[test]
fn no_module_imports_a_sibling_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for src in [
        root.join("src"),
        root.join("crates/conformance-fixture/src"),
    ] {
        let found = circles(&src);
        assert!(
            found.is_empty(),
            "import circles in {}:\n{}",
            src.display(),
            found.join("\n")
        );
    }
}

#[test]
fn the_circle_check_follows_super_and_crate_paths() {
    let all: BTreeSet<Vec<String>> = [
        vec!["cli".to_owned()],
        vec!["cli".into(), "doctor".into()],
        vec!["cli".into(), "install".into()],
        vec!["tools".into()],
    ]
    .into_iter()
    .collect();
    let here = vec!["cli".to_owned(), "install".to_owned()];
    let named = modules_named(
        "use super::{doctor::is_executable, output};\nlet x = crate::tools::Tools::new();",
        &here,
        false,
        &all,
    );
    assert!(
        named.contains(&vec!["cli".to_owned(), "doctor".to_owned()]),
        "{named:?}"
    );
    assert!(named.contains(&vec!["tools".to_owned()]), "{named:?}");
}
