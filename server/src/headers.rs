//! Security headers on every answer. Pages run only the scripts this server serves (htmx from
//! `/static`), may not be framed by another site, and leak no address to the sites they link
//! to; JSON, CSV and feeds load nothing at all. A response that sets its own policy keeps it:
//! the embeddable trend image, meant to be shown on other sites, stays embeddable.

use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

/// The policy of the dashboard's pages: its own scripts, styles and images (plus the inline
/// SVG charts' style attributes and the empty `data:` icon), no plugins, no `<base>`, forms
/// posted only here, never framed.
pub const PAGE_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
/// The policy of everything else (JSON, CSV, feeds, errors): nothing to load, never framed.
pub const DATA_POLICY: &str = "default-src 'none'; frame-ancestors 'none'";

/// Adds `Content-Security-Policy`, `X-Frame-Options`, `X-Content-Type-Options` and
/// `Referrer-Policy` where the handler set none.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers
        .entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    headers
        .entry(header::REFERRER_POLICY)
        .or_insert(HeaderValue::from_static("same-origin"));
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        let html = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/html"));
        let policy = if html { PAGE_POLICY } else { DATA_POLICY };
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(policy),
        );
        // For browsers older than `frame-ancestors`.
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    response
}
