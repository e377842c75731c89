//! Timing a page through the router, for the benches (included with `#[path]`).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use kymo_core::clock::ManualClock;
use kymo_core::db::{Db, LeaseSettings};
use kymo_server::{AppState, app};
use tower::ServiceExt;

/// The application over `db`, with a fixed clock and `dir` for data.
pub fn router(db: Db, dir: &Path) -> Router {
    app(state(db, dir))
}

/// The application's state over `db`, with a fixed clock and `dir` for data.
pub fn state(db: Db, dir: &Path) -> AppState {
    AppState::new(
        db,
        Arc::new(ManualClock::at(0)),
        LeaseSettings::default(),
        dir.to_owned(),
        "http://127.0.0.1:8080".into(),
    )
}

/// The median of `values`.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Renders `path` `renders` times; returns the median time in ms and the page's size in bytes.
/// The requests carry an `Authorization` header, as an API client's do (any other cookie than
/// a live session's is served from the cache), so the response cache steps aside and every
/// render does the whole work.
pub async fn time_page(router: &Router, path: &str, renders: usize) -> (f64, usize) {
    time_requests(
        router,
        path,
        renders,
        Some(("authorization", "Bearer kymo-bench")),
    )
    .await
}

/// Like [`time_page`] for anonymous readers: after the first, every request is served from
/// the response cache while the database does not change.
pub async fn time_cached_page(router: &Router, path: &str, renders: usize) -> (f64, usize) {
    time_requests(router, path, renders, None).await
}

async fn time_requests(
    router: &Router,
    path: &str,
    renders: usize,
    header: Option<(&str, &str)>,
) -> (f64, usize) {
    let mut times = Vec::with_capacity(renders);
    let mut size = 0;
    for _ in 0..renders {
        let started = Instant::now();
        let mut request = Request::get(path);
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        let response = (router.clone())
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        size = response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .len();
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    (median(times), size)
}
