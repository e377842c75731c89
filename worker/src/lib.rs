//! kymo-worker: the benchmark machine's side of kymo.
//!
//! It owns what happens on the machine that measures: detecting the hardware fingerprint and
//! environment, keeping git mirrors and work trees, reading a commit's `kymo.toml`, running
//! suites in their own process groups with timeouts and capped output, inside a boundary that
//! keeps the untrusted benchmark code away from kymo's data, and talking to the server over HTTP. It must not know about SQL or the dashboard.

pub mod build_env;
pub mod client;
pub mod config;
pub mod credentials;
pub mod exec;
pub mod fingerprint;
pub mod instructions;
pub mod mirror;
pub mod placement;
#[cfg(test)]
mod properties;
pub mod rustup;
pub mod sandbox;
pub mod suite;
pub mod toolchain;
pub mod worker;

pub use worker::{Tick, Worker, WorkerConfig};
