//! Limits on the request line. Bodies are capped per route (`DefaultBodyLimit`) and every
//! field by the validators of what it carries; this caps the path and query string, which no
//! extractor bounds, so that a filter or a sha of kilobytes is refused before any handler runs.

use axum::Json;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kymo_core::protocol::ApiErrorBody;

/// Longest path plus query string accepted: far above any benchmark key (at most 200 bytes of
/// name and 32 parameters) even when percent-encoded, far below what would cost anything.
pub const MAX_URI_BYTES: usize = 16 * 1024;

/// Answers `414 URI Too Long` with a JSON error body to a request whose URI is too long.
pub async fn refuse_long_uris(request: Request, next: Next) -> Response {
    let length = request
        .uri()
        .path_and_query()
        .map_or(0, |pq| pq.as_str().len());
    if length > MAX_URI_BYTES {
        let body = ApiErrorBody {
            error: format!(
                "the request URI is {length} bytes; at most {MAX_URI_BYTES} are accepted"
            ),
        };
        return (StatusCode::URI_TOO_LONG, Json(body)).into_response();
    }
    next.run(request).await
}
