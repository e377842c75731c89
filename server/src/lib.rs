//! kymo-server: the HTTP service and the `kymo` command line.
//!
//! It owns the JSON API, the job queue's HTTP face, ingest of uploaded results, the dashboard
//! pages and the wiring of `kymo serve` (server plus embedded worker). SQL lives in kymo-core's
//! `db` module; checking out and running benchmarks lives in kymo-worker.

pub mod alerts;
pub mod analysis;
pub mod api;
pub mod auth;
pub mod backfill;

mod assets;
pub mod bisect;
pub mod cache;
pub mod chart;
pub mod cli;
pub mod compare;
pub mod confirm;
pub mod connections;
pub mod demo;
pub mod disturbed;
pub mod error;
pub mod export;
pub mod forge;
pub mod git;
pub mod headers;
pub mod interleaved;
pub mod limits;
pub mod local_servers;
pub mod low_priority;
pub mod metrics;
pub mod pages;
pub mod pulls;
pub mod push;
pub mod serve;
pub mod state;
pub mod telemetry;

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

pub use state::AppState;

/// The whole application; the seam tests drive with `oneshot` or a real listener.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics::metrics))
        .merge(api::router().layer(axum::middleware::from_fn_with_state(
            state.clone(),
            limits::one_large_body_at_a_time,
        )))
        .merge(pages::router())
        .merge(assets::router())
        // Inside the cache, so that a kept response is kept compressed.
        .route_layer(CompressionLayer::new().quality(CompressionLevel::Fastest))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            cache::cached,
        ))
        .route_layer(axum::middleware::from_fn(metrics::record_latency))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_reader,
        ))
        .layer(axum::middleware::from_fn(limits::refuse_long_uris))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(120),
        ))
        .layer(axum::middleware::from_fn(headers::security_headers))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

async fn healthz(axum::extract::State(state): axum::extract::State<AppState>) -> &'static str {
    match state.db.repositories().await {
        Ok(_) => "ok",
        Err(_) => "database unavailable",
    }
}
