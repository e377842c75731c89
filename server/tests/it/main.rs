//! kymo-server's integration tests: the real binary, a real SQLite file in a temp dir, real
//! git repositories made with git2, and HTTP over loopback.

mod access;
mod alerts;
mod api;
mod at_rest;
mod backfill;
mod cache;
mod cli_listing;
mod commit_status;
mod continuous;
mod day_one;
mod delivery_loop;
mod disk_full;
mod eco;
mod failures;
mod faults;
mod floods;
mod git_faults;
mod git_http;
mod grants;
mod hostile;
mod lease;
mod listener;
mod metrics;
mod noise;
mod openapi;
mod out_of_order;
mod private_remotes;
mod pull_requests;
mod reads;
mod slow_clients;
mod spine;
mod support;
mod try_runs;
mod verdicts;
mod webhooks;
