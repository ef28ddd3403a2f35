//! Black-box tests: the real binary, driven over stdio and as a CLI, against the fake
//! upstream on a loopback port. One test binary keeps link times down.

// Black-box tests run the real binary and its helpers as processes: the product's
// locality rules (clippy.toml) are for the product.
#![allow(clippy::disallowed_methods)]

mod ask;
mod cli;
mod client;
mod common;
mod concurrency;
mod contract;
mod deep;
mod edges;
mod eras;
mod fetch;
mod framing;
mod gateway;
mod guard;
mod hostile;
mod http;
mod http_abuse;
mod install;
mod lifecycle;
mod responses;
mod search;
mod secrets;
mod surfaces;
mod tui;
mod web;
