//! The MCP server adapter: both protocol eras, decided per request, over stdio and
//! Streamable HTTP. rmcp supplies the protocol model (tool definitions, serverInfo); the
//! framing, the per-request era rules and the concurrent serve loop are ours, because
//! rmcp's loop (3.11) lets a modern first request fix a stdio connection's lifecycle and
//! refuses the bare `server/discover` probe, drops unparsable and oversized lines without
//! a reply, runs requests without a cap, and at EOF cancels calls still running after 5 s
//! (ARCHITECTURE.md, "Decisions"). A message goes `dispatch` (what it asks) → `run` (an
//! accepted call, for both transports) → the transport's writer.
//!
//! Touches: stdin/stdout (stdio.rs only), the tool catalogue. No network of its own.

pub mod app;
mod cursor;
pub(crate) mod decode;
pub mod dispatch;
pub mod era;
pub mod framing;
pub mod http;
pub mod method;
mod progress;
pub mod prompts;
pub mod protocol;
pub mod resources;
pub mod run;
pub mod stdio;
pub mod tasks;
