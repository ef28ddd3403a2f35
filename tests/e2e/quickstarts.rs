//! The README's quickstarts, each block run as written by one `bash -e` on a scratch home,
//! against the fake upstream: the MCP client set-up ends with `doctor` passing, the
//! command line answers, and the team server serves the client its block connects.
//!
//! The only adaptations are those a test needs to stay on loopback and side by side with
//! others: `pplx-…` is the test key, `PERPLEXITY_API_BASE` points at the fake (exported
//! before the block, as a reader without a key would), `127.0.0.1:8080` becomes a free
//! port (and `serve --http` binds it), and the fake's own start line is left out. The
//! agent the team block connects, Claude Code's `claude mcp add`, is stood in for by a
//! client of ours (`claude` on `PATH`) that takes the same arguments and does what the
//! agent would first: lists the tools over HTTP with the header it was given, and calls
//! one.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::common::*;
use crate::gateway::bin_dir;

/// The `sh` block under the README heading `heading`.
fn block_under(heading: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme
        .find(&format!("\n### {heading}\n"))
        .unwrap_or_else(|| panic!("no README section {heading:?}"));
    let rest = &readme[start..];
    let open = rest.find("```sh\n").expect("an sh block") + "```sh\n".len();
    let close = rest[open..].find("```").expect("a closed block");
    rest[open..open + close].to_owned()
}

/// A stand-in for Claude Code's `claude mcp add --transport http NAME URL --header H`:
/// connects to URL as an MCP client with H, lists the tools and calls one, and prints what
/// it got (a failure exits non-zero, failing the block).
const CLAUDE: &str = r#"#!/usr/bin/env python3
import json, sys, urllib.request
args = sys.argv[1:]
assert args[:2] == ["mcp", "add"], args
url = next(a for a in args if a.startswith("http://"))
header = args[args.index("--header") + 1]
name, _, value = header.partition(": ")
assert args[args.index("--transport") + 1] == "http", args
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
def call(i, method, params, mcp_name=None):
    body = {"jsonrpc": "2.0", "id": i, "method": method, "params": {**params, "_meta": meta}}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    heads = {name: value, "Content-Type": "application/json",
             "Accept": "application/json, text/event-stream",
             "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if mcp_name:
        heads["Mcp-Name"] = mcp_name
    for k, v in heads.items():
        req.add_header(k, v)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    text = opener.open(req, timeout=60).read().decode()
    frames = [json.loads(l[5:]) for l in text.splitlines() if l.startswith("data:")] or [json.loads(text)]
    return frames[-1]["result"]
tools = [t["name"] for t in call(1, "tools/list", {})["tools"]]
print("tools:", ",".join(tools))
result = call(2, "tools/call", {"name": "perplexity_agent", "arguments": {"query": "Does the team server answer?"}}, "perplexity_agent")
assert result.get("isError") is False, result
print("answer:", result["content"][0]["text"].replace("\n", " "))
"#;

/// Runs `block` as written (but for the adaptations above) in `home`: its stdout and
/// stderr, and whether it succeeded.
fn run_block(block: &str, home: &Scratch, fake: &FakePerplexity) -> (String, String, bool) {
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    // A block that starts `perplexity-agent demo` is run against it, on a port of its own;
    // the others against the test's fake.
    let upstream = if block.contains("perplexity-agent demo") {
        let demo = free_port();
        format!("http://127.0.0.1:{demo}")
    } else {
        fake.base_url()
    };
    let script: String = block
        .lines()
        .map(|l| {
            l.replace("pplx-…", KEY)
                .replace("pplx-test", KEY)
                .replace(
                    "perplexity-agent demo &",
                    &format!(
                        "perplexity-agent demo --port {} &",
                        upstream.rsplit(':').next().unwrap_or_default()
                    ),
                )
                .replace("http://127.0.0.1:8787", &upstream)
                .replace("127.0.0.1:8080", &address)
                .replace(
                    "serve --http &",
                    &format!("serve --http --bind {address} &"),
                )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let shims = home.path("shims");
    std::fs::create_dir_all(&shims).unwrap();
    let claude = shims.join("claude");
    std::fs::write(&claude, CLAUDE).unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}:{}",
        bin_dir(),
        shims.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-e", "-o", "pipefail", "-c"])
        // Whatever the block leaves running goes with it.
        .arg(format!(
            "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}\n"
        ))
        .env_clear()
        .env("PATH", path)
        .env("HOME", home.path(""))
        .env("PERPLEXITY_API_BASE", &upstream)
        .current_dir(home.path(""))
        .process_group(0)
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn the_mcp_client_quickstart_ends_with_doctor_passing() {
    let fake = FakePerplexity::start();
    let home = Scratch::new("quickstart-client");
    let (out, err, ok) = run_block(
        &block_under("An MCP client (Claude Desktop, Claude Code, Cursor, VS Code)"),
        &home,
        &fake,
    );
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    let entry = std::fs::read_to_string(home.path(".config/Claude/claude_desktop_config.json"))
        .unwrap_or_else(|e| panic!("no Claude Desktop entry ({e}): {err}"));
    assert!(
        entry.contains("perplexity-agent") && entry.contains(KEY),
        "{entry}"
    );
}

#[test]
fn the_command_line_quickstart_answers() {
    let fake = FakePerplexity::start();
    let home = Scratch::new("quickstart-cli");
    let (out, err, ok) = run_block(&block_under("The command line"), &home, &fake);
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out.matches("Fake answer.").count(), 2, "{out}");
    assert!(
        out.contains("https://example.org/"),
        "the search results: {out}"
    );
}

#[test]
fn the_team_quickstart_serves_the_client_it_connects() {
    let fake = FakePerplexity::start();
    let home = Scratch::new("quickstart-team");
    let (out, err, ok) = run_block(&block_under("A server for a team"), &home, &fake);
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("tools: ") && l.contains("perplexity_agent")),
        "the client listed the tools: {out}"
    );
    assert!(
        out.contains("answer: ") && out.contains("Fake answer."),
        "{out}"
    );
    // The research it ran is the named client's, in the usage the block ends with.
    assert!(out.contains("ci-bot"), "usage names the client: {out}");
}

#[test]
fn the_keyless_quickstart_answers_from_the_demo_it_starts() {
    let fake = FakePerplexity::start();
    let home = Scratch::new("quickstart-keyless");
    let (out, err, ok) = run_block(
        &block_under("Without a key, against the fake upstream"),
        &home,
        &fake,
    );
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("Fake answer."), "{out}");
    // Answered by the stand-in the block started, not by the test's fake.
    assert!(fake.requests().is_empty(), "{:?}", fake.requests());
    assert!(err.contains("PERPLEXITY_API_KEY=pplx-demo"), "{err}");
}
