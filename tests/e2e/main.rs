//! Black-box tests: the real binary, driven over stdio and as a CLI, against the fake
//! upstream on a loopback port. One test binary keeps link times down.

// Black-box tests run the real binary and its helpers as processes: the product's
// locality rules (clippy.toml) are for the product.
#![allow(clippy::disallowed_methods)]

/// The MCP App: offered only to clients that declare it, in both eras and transports.
mod app;
/// `perplexity_ask`: the fast-preset answer, its bounds and rendering.
mod ask;
mod cache;
/// Citations that resolve: markers checked against sources, one page listed once.
mod citations;
/// The command line as a person runs it: stdout, stderr, exit codes, the tool bounds.
mod cli;
/// The Perplexity client's rules seen through the tools: retries, deadlines, caps.
mod client;
/// The `clients` CLI: tokens printed once, hashes only in the file, its refusals.
mod clients;
/// The harness (not tests): the binary, the fake, schemas, helpers.
mod common;
/// Calls handled concurrently: ping during waits, cancellation, EOF, SIGTERM.
mod concurrency;
/// Perplexity's official contract as users see it.
mod contract;
/// `deep_research`: sub-questions, deduplicated sources, the claim validator.
mod deep;
/// The README's and docs' command blocks, run against the fake: their samples stay true.
mod docs;
/// `doctor`'s output, a key found in a client entry, and `doctor --online`.
mod doctor;
/// The docs against the code: variables, metrics, every command and flag, and the user docs' wording and tables.
mod drift;
/// One case per edge of stdio framing and of upstream faults.
mod edges;
/// Both protocol eras on one stdio process, every frame schema-checked.
mod eras;
/// The SSRF-guarded fetcher through `fetch_url` and `fetch`.
mod fetch;
/// The ordinary stdio framing rules: bad lines, notifications, EOF, dense lines.
mod framing;
/// The MCP client to downstream servers: policy, secrets, the tool surface.
mod gateway;
/// The shared path: rate limit, audit log, injection flags, panic containment.
mod guard;
/// Broad corpora of hostile tool calls and protocol messages.
mod hostile;
/// Streamable HTTP as clients use it: auth, sessions, both eras, SSE, drain.
mod http;
/// What a hostile HTTP client can cost: pre-auth limits, strict Host/Origin.
mod http_abuse;
/// `install` and `doctor` against a scratch HOME.
mod install;
/// The three lifecycle tools: bodies, waits, progress, reference texts.
mod lifecycle;
/// `GET /metrics`: its access rules, promtool and a real Prometheus.
mod metrics;
/// OAuth 2.1 access tokens from a real OpenID provider: refusals, scopes, key rotation.
mod oauth;
/// The binary in a pseudo-terminal, read back through a VT100 emulator (not tests).
mod pty;
/// The README's quickstarts, each block run as written, the team one serving the client it connects.
mod quickstarts;
/// Replicas sharing Redis behind HAProxy: one rate limit, outages, start-up errors.
mod replicas;
/// `responses_create` / `responses_retrieve` and function calls.
mod responses;
/// `perplexity_search`: bodies, structured results, budgets.
mod search;
/// The key and key-shaped strings never leave in any output.
mod secrets;
/// What shutdown guarantees: whole replies for slow readers, tasks' creates, cut calls.
mod shutdown;
/// What calls cost: the ledger, budgets, `usage`.
mod spend;
/// Resources, prompts and completions in both eras.
mod surfaces;
/// MCP tasks (2026-07-28 extension): handles, polling, cancel, restart, caller binding.
mod tasks;
/// One HTTP server for a team: named clients, their tools and rates, isolation.
mod team;
/// The terminal workspace in a pseudo-terminal.
mod tui;
/// A scriptable loopback web server for the fetcher tests (not tests).
mod web;
