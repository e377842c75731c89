//! Limits on the request line. Bodies are capped per route (`DefaultBodyLimit`) and every
//! field by the validators of what it carries; this caps the path and query string, which no
//! extractor bounds, so that a filter or a sha of kilobytes is refused before any handler runs.
//! And the refusals of axum's own extractors (a body over its limit, a malformed path) are
//! given the API's JSON error body.

use axum::Json;
use axum::extract::Request;
use axum::http::{StatusCode, header};
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

/// Bodies from this size up count as large: an upload of some 20,000 measurements.
pub const LARGE_BODY_BYTES: u64 = 1024 * 1024;
/// Large bodies read and stored at once. A 60 MB upload takes a few times its size in memory
/// while it is parsed and stored; more of them would only share the one writer anyway.
pub const CONCURRENT_LARGE_BODIES: usize = 2;

/// Lets a request whose body is large (or of unknown length) in only while fewer than
/// [`CONCURRENT_LARGE_BODIES`] others are read and stored; it waits its turn otherwise (within
/// the request timeout). Small bodies are never held up.
pub async fn one_large_body_at_a_time(
    axum::extract::State(state): axum::extract::State<crate::AppState>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let large = match length {
        Some(bytes) => bytes >= LARGE_BODY_BYTES,
        None => headers.contains_key(header::TRANSFER_ENCODING),
    };
    if !large {
        return next.run(request).await;
    }
    let Ok(_permit) = state.large_bodies.clone().acquire_owned().await else {
        return next.run(request).await;
    };
    next.run(request).await
}

/// Longest plain-text refusal rewrapped as JSON; axum's are one line.
const MAX_REFUSAL_BYTES: usize = 4096;

/// Gives a plain-text client error of the API (axum's extractors answer a body over its limit
/// with `413` and a malformed path with `400` in plain text) the JSON body `{"error": ...}`
/// that every other API error has.
pub async fn json_refusals(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    if !response.status().is_client_error() || !plain {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, MAX_REFUSAL_BYTES).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let error = if text.is_empty() {
        parts
            .status
            .canonical_reason()
            .unwrap_or("refused")
            .to_owned()
    } else {
        text
    };
    let mut json = (parts.status, Json(ApiErrorBody { error })).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            json.headers_mut().insert(name, value.clone());
        }
    }
    json
}
