//! What `tools/list` shows, byte for byte, for each selection whose list differs: the
//! full catalogue, the `default` profile and the reference peer's drop-in (`lifecycle`),
//! at the default wait budget and at another (two schemas quote it). The fixtures under
//! `golden/` are what clients are shown; a change to one is a change to every client's
//! list, made on purpose: `GOLDEN_WRITE=1 cargo test --lib tools::golden` rewrites them.

use super::{ToolSelection, registry};

/// (fixture, selection, wait budget), and the fixture's text.
const CASES: [(&str, &str, u64, &str); 4] = [
    ("all.json", "all", 55, include_str!("golden/all.json")),
    (
        "default.json",
        "default",
        55,
        include_str!("golden/default.json"),
    ),
    (
        "lifecycle.json",
        "lifecycle",
        55,
        include_str!("golden/lifecycle.json"),
    ),
    (
        "all_wait_1800.json",
        "all",
        1800,
        include_str!("golden/all_wait_1800.json"),
    ),
];

/// The `tools` array `Tools::new` builds for `selection` (`Tools::list` without a
/// gateway), pretty-printed: pretty output is a function of the compact bytes' value, and
/// with `preserve_order` and `arbitrary_precision` equal values print equal bytes.
fn listed(selection: &str, wait: u64) -> String {
    let selection = ToolSelection::parse(selection).expect("a catalogue selection");
    let profile = super::Profile::of(&selection);
    let tools: Vec<serde_json::Value> =
        registry::definitions_of(wait, profile, |n| selection.contains(n))
            .into_iter()
            .map(|(_, tool)| serde_json::to_value(tool).expect("a tool serializes"))
            .collect();
    let mut text = serde_json::to_string_pretty(&tools).expect("a list serializes");
    text.push('\n');
    text
}

#[test]
fn tools_list_is_what_it_was() {
    let write = std::env::var_os("GOLDEN_WRITE").is_some();
    for (file, selection, wait, expected) in CASES {
        let now = listed(selection, wait);
        if write {
            let path = format!("{}/src/tools/golden/{file}", env!("CARGO_MANIFEST_DIR"));
            std::fs::write(&path, &now).expect("the fixture is writable");
            continue;
        }
        let first_change = now
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "its length".to_owned(), |i| format!("line {}", i + 1));
        assert!(
            now == expected,
            "tools/list of {selection} (wait {wait}) changed from {file} at {first_change}"
        );
    }
}
