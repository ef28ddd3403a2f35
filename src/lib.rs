//! perplexity-agent: Perplexity's research APIs for AI agents and people, safely.
//!
//! Where things live (each module's header says what it may touch):
//! - [`config`]: environment and flags → one typed config; every default.
//! - [`perplexity`]: the only code that holds the API key or talks to Perplexity.
//! - [`fetch`]: the SSRF-guarded page fetcher, the only other egress.
//! - [`tools`]: the tool catalogue, shared by every front end.
//! - [`store`]: the local SQLite store (snapshots; spaces, tabs, history).
//! - [`guard`]: controls every call passes through (rate limit, audit, spotlighting, budget).
//! - [`mcp`]: the MCP server (both eras; stdio and Streamable HTTP).
//! - [`cli`]: the human command line.
//!
//! stdout belongs to the MCP protocol writer in `serve` mode: `print!` is denied in the
//! whole crate except the CLI's output module.

#![deny(clippy::print_stdout)]

pub mod cli;
pub mod config;
pub mod fetch;
pub mod gateway;
pub mod guard;
pub mod mcp;
pub mod perplexity;
pub mod store;
pub mod text;
pub mod tools;
pub mod tui;
