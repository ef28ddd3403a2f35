//! The Perplexity API client. **This is the only code that holds the API key or talks to
//! the Perplexity host.** An auditor asking "where can my key go?" reads this folder and
//! nothing else:
//!
//! - `key.rs` reads `PERPLEXITY_API_KEY` at call time into a secret type;
//! - `client.rs` puts it into exactly one header (`Authorization`) of requests to the one
//!   configured base URL (`https://api.perplexity.ai`, or a loopback `http://` fake), with
//!   redirects refused, no ambient proxy, deadlines, retries and a body cap;
//! - `breaker.rs` stops calling a host that keeps failing, for a cool-down;
//! - `agent.rs` builds typed requests and reads responses tolerantly;
//! - `search.rs` does the same for the Search API;
//! - `models.rs` reads the model catalogue (`GET /v1/models`, sent without the key);
//! - `stream.rs` reads a run's server-sent events under the same cap and deadline;
//! - `wait.rs` learns when a run finishes (stream first, polling as the fallback).
//!
//! Nothing here writes to stdout, and no error text ever carries the key or a raw
//! transport error message (which could echo headers).

pub mod agent;
mod breaker;
pub mod client;
pub mod config;
pub mod error;
pub mod key;
pub mod meter;
pub mod models;
pub mod search;
pub mod stream;
pub mod trace;
pub mod wait;

pub use client::PerplexityClient;
pub use error::{ApiError, NetworkKind};
