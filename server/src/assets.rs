//! Static files compiled into the binary: kymo's stylesheet and, when `npm ci` has installed
//! it before the build, htmx from the npm registry.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::state::AppState;

const STYLESHEET: &str = include_str!("../../static/kymo.css");
const HTMX: &str = include_str!(concat!(env!("OUT_DIR"), "/htmx.min.js"));

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/static/kymo.css", get(stylesheet))
        .route("/static/vendor/htmx.min.js", get(htmx))
}

async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        STYLESHEET,
    )
}

async fn htmx() -> axum::response::Response {
    if HTMX.is_empty() {
        // Built without `npm ci`: pages still work, only less interactively.
        return axum::http::StatusCode::NOT_FOUND.into_response();
    }
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        HTMX,
    )
        .into_response()
}
