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
    ("drain", &[]),
    ("random", &[]),
    ("net", &[]),
    ("signals", &[]),
    ("text", &[]),
    // Controls and stores.
    ("guard", &["call", "random"]),
    ("store", &["random"]),
    // Egress.
    ("fetch", &["net", "text"]),
    ("perplexity", &["net", "text"]),
    // The tools, and the gateway that offers other servers' tools beside them.
    (
        "gateway",
        &["call", "fetch", "guard", "net", "random", "text"],
    ),
    (
        "tools",
        &[
            "call",
            "drain",
            "fetch",
            "gateway",
            "guard",
            "perplexity",
            "random",
            "store",
            "text",
        ],
    ),
    // Reads the environment and hands each module its own config type.
    (
        "config",
        &["fetch", "gateway", "guard", "perplexity", "store", "tools"],
    ),
    // Front ends.
    (
        "mcp",
        &[
            "call",
            "config",
            "drain",
            "guard",
            "perplexity",
            "random",
            "signals",
            "store",
            "text",
            "tools",
        ],
    ),
    // The composition root: it assembles every front end but the human ones (`cli`,
    // `tui`), which call it.
    (
        "app",
        &[
            "call",
            "config",
            "fetch",
            "gateway",
            "guard",
            "mcp",
            "perplexity",
            "store",
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
