//! kymo-server's integration tests: the real binary, a real SQLite file in a temp dir, real
//! git repositories made with git2, and HTTP over loopback.

mod api;
mod cli_listing;
mod eco;
mod failures;
mod lease;
mod metrics;
mod openapi;
mod spine;
mod support;
mod verdicts;
