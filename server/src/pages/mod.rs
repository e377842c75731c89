//! The dashboard: server-rendered pages that work without JavaScript. When htmx asks
//! (`HX-Request`), a handler renders only the fragment the page swaps.

mod access;
mod alerts;
mod atom;
mod benchmark;
mod comparisons;
mod continuous;
mod embed;
mod findings;
pub(crate) mod format;
mod overlays;
mod summary;
mod too_noisy;
pub(crate) mod trend;
mod verdicts;
mod views;

use askama::Template;
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use crate::error::AppError;
use crate::state::AppState;

/// The page routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(views::home))
        .route("/queue", get(views::queue))
        .route(
            "/queue/jobs/{id}/cancel",
            axum::routing::post(continuous::cancel_job),
        )
        .route(
            "/queue/jobs/{id}/retry",
            axum::routing::post(continuous::retry_job),
        )
        .route("/deliveries", get(continuous::deliveries))
        .route("/login", get(access::login_page).post(access::login))
        .route("/logout", axum::routing::post(access::logout))
        .route("/machines", get(views::machines))
        .route("/repos/{repo}", get(views::repository))
        .route(
            "/repos/{repo}/backfill",
            axum::routing::post(continuous::backfill),
        )
        .route("/repos/{repo}/commits/{sha}", get(views::commit))
        .route(
            "/repos/{repo}/benchmarks/{*name}",
            get(benchmark::benchmark),
        )
        .route(
            "/repos/{repo}/comparisons/{id}",
            get(comparisons::comparison),
        )
        .route("/repos/{repo}/regressions", get(verdicts::regressions))
        .route("/repos/{repo}/regressions/{id}", get(verdicts::regression))
        .route(
            "/repos/{repo}/regressions/{id}/triage",
            axum::routing::post(verdicts::triage),
        )
        .route("/repos/{repo}/compare", get(summary::compare_form))
        .route("/repos/{repo}/compare/{spec}", get(verdicts::compare))
        .route("/repos/{repo}/alerts", get(alerts::alerts))
        .route(
            "/repos/{repo}/regressions.atom",
            get(atom::regressions_feed),
        )
        .route("/repos/{repo}/trend.svg", get(embed::trend_svg))
}

/// Whether htmx sent the request, so that a fragment is enough.
fn is_htmx(headers: &HeaderMap) -> bool {
    headers.contains_key("hx-request")
}

/// An error shown as an HTML page.
pub struct PageError(AppError);

impl From<AppError> for PageError {
    fn from(err: AppError) -> Self {
        PageError(err)
    }
}

impl From<kymo_core::db::DbError> for PageError {
    fn from(err: kymo_core::db::DbError) -> Self {
        PageError(err.into())
    }
}

impl From<askama::Error> for PageError {
    fn from(err: askama::Error) -> Self {
        PageError(AppError::Internal(err.into()))
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    status: String,
    message: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        if let AppError::Internal(err) = &self.0 {
            tracing::error!(error = ?err, "page failed");
        }
        let page = ErrorPage {
            status: status.to_string(),
            message: self.0.to_string(),
        };
        match page.render() {
            Ok(html) => (status, Html(html)).into_response(),
            Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response(),
        }
    }
}

type PageResult = Result<Html<String>, PageError>;

/// Renders a template into a page response.
fn render(template: &impl Template) -> PageResult {
    Ok(Html(template.render()?))
}

/// Which of a list's rows a page shows: `size` rows from `from`, so that a page's cost stays
/// bounded however long the list grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowWindow {
    /// Index of the first row shown.
    pub(crate) from: usize,
    /// Rows shown.
    pub(crate) shown: usize,
    /// Rows in the whole list.
    pub(crate) total: usize,
    /// Where the next page starts, when there is one.
    pub(crate) next: Option<usize>,
}

impl RowWindow {
    pub(crate) fn new(total: usize, from: Option<usize>, size: usize) -> Self {
        let from = from.unwrap_or(0).min(total);
        let shown = size.min(total - from);
        Self {
            from,
            shown,
            total,
            next: (from + shown < total).then_some(from + shown),
        }
    }

    /// The rows of `all` this window shows.
    pub(crate) fn of<T>(&self, all: impl IntoIterator<Item = T>) -> impl Iterator<Item = T> {
        all.into_iter().skip(self.from).take(self.shown)
    }
}

#[cfg(test)]
mod row_window_tests {
    use super::RowWindow;

    #[test]
    fn a_window_is_clamped_to_the_list_and_knows_where_the_next_starts() {
        let w = RowWindow::new(120, None, 50);
        assert_eq!((w.from, w.shown, w.next), (0, 50, Some(50)));
        let w = RowWindow::new(120, Some(100), 50);
        assert_eq!((w.from, w.shown, w.next), (100, 20, None));
        let w = RowWindow::new(120, Some(usize::MAX), 50);
        assert_eq!((w.from, w.shown, w.next), (120, 0, None));
        assert_eq!(RowWindow::new(0, None, 50).of(Vec::<u8>::new()).count(), 0);
        let rows: Vec<usize> = RowWindow::new(10, Some(8), 5).of(0..10).collect();
        assert_eq!(rows, [8, 9]);
    }
}
