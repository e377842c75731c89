//! kymo-server: the HTTP service.
//!
//! It owns the JSON API, the job queue's HTTP face, ingest of uploaded results and the
//! dashboard pages. SQL lives in kymo-core's `db` module; process execution lives in the worker.

pub mod chart;
