//! perplexity-agent: Perplexity's research APIs for AI agents and people, safely.
//!
//! Where things live, floor by floor (each module's header says what it may touch;
//! [`layering`](self) checks who may import whom):
//! - ground: [`call`] (what front ends, guard and tools say about one call), [`drain`]
//!   (what shutdown owes: promised side effects, stuck peers), [`files`] (private files
//!   and directories, executables), [`random`]
//!   (CSPRNG values), [`clock`] (the wall clock, read in one place), [`net`] (egress helpers), [`signals`] (SIGTERM/SIGINT → a token),
//!   [`text`] (untrusted-text helpers), [`demo`] (a stand-in for the Perplexity API on
//!   loopback, for trying it without a key and for the tests).
//! - [`guard`]: controls every call passes through (rate limit, audit, spotlighting,
//!   budget); [`state`]: every piece of state behind one door, with its two engines (the
//!   local SQLite store, the replicas' Redis); [`cache`]: research answers served again
//!   instead of paid for again, kept through that door.
//! - egress: [`perplexity`] (the only code that holds the API key or talks to Perplexity),
//!   [`fetch`] (the SSRF-guarded page fetcher).
//! - [`tools`]: the tool catalogue, shared by every front end; [`gateway`]: the policed MCP
//!   client to downstream servers, whose tools are offered beside ours.
//! - [`config`]: environment, flags and file → each module's own config type.
//! - [`mcp`]: the MCP server (both eras; stdio and Streamable HTTP).
//! - [`app`]: the composition root, building every service once and assembling `serve`.
//! - the human front ends, which call it: [`cli`], [`tui`].
//!
//! stdout belongs to the MCP protocol writer in `serve` mode: `print!` is denied in the
//! whole crate except the CLI's output module.
//!
//! Unit tests sit at the bottom of the file they test (`#[cfg(test)] mod tests`), or, once
//! they outgrow it, in a `tests.rs` beside it declared the same way (`state/local/tests.rs`,
//! `tools/responses/request/tests.rs`); what a user sees is tested black-box in
//! `tests/e2e/`.

#![deny(clippy::print_stdout)]

pub mod app;
pub mod cache;
pub mod call;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod dense;
pub mod drain;
pub mod fetch;
pub mod files;
pub mod gateway;
pub mod guard;
pub mod identity;
mod layering;
pub mod mcp;
pub mod net;
pub mod perplexity;
pub mod random;
pub mod signals;
pub mod spend;
pub mod state;
pub mod telemetry;
pub mod text;
pub mod tools;
pub mod tui;
