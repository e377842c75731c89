//! kymo-server's integration tests: the real binary, a real SQLite file in a temp dir, real
//! git repositories made with git2, and HTTP over loopback.

mod api;
mod failures;
mod hostile;
mod lease;
mod spine;
mod support;
mod verdicts;
