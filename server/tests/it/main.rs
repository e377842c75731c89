//! kymo-server's integration tests: the real binary, a real SQLite file in a temp dir, real
//! git repositories made with git2, and HTTP over loopback.

mod api;
mod disk_full;
mod failures;
mod faults;
mod git_faults;
mod hostile;
mod lease;
mod out_of_order;
mod spine;
mod support;
mod verdicts;
