//! kymo-core: everything the server and the worker both need.
//!
//! It owns the domain types (commit shas, machine fingerprints, benchmark results), the wire
//! protocol between worker and server, the result-format parsers and all SQL (the `db` module).
//! It must not know about HTTP frameworks, templates or process execution: those are the edges.

pub mod clock;
pub mod credentials;
pub mod db;
pub mod failure_cause;
pub mod format;
pub mod interleaved;
pub mod model;
pub mod protocol;
pub mod pull_request;
pub mod pull_upload;
pub mod results;
pub mod samples;
pub mod series_summary;
pub mod stats;
pub mod units;
pub mod webhook;
