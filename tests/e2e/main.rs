//! Black-box tests: the real binary, driven over stdio and as a CLI, against the fake
//! upstream on a loopback port. One test binary keeps link times down.

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
