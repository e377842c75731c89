//! The JSON API under `/api/v1`.

mod alerts;
mod queue;
mod repos;
mod verdicts;
mod webhooks;
mod worker;

pub use alerts::{DeliveryLog, LOG_LIMIT, target_view};
pub use repos::load_commit;
pub use verdicts::{csv_response, load_regression};

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts};
use axum::http::request::Parts;
use axum::routing::{get, post};
use kymo_core::db::TokenScope;

use crate::error::AppError;
use crate::state::AppState;

/// Bodies that carry results (uploads, job completions) may be large; everything else is small.
const RESULTS_BODY_LIMIT: usize = 64 * 1024 * 1024;
const SMALL_BODY_LIMIT: usize = 256 * 1024;

/// The API router, to be nested under `/api/v1`.
pub fn router() -> Router<AppState> {
    let results = Router::new()
        .route("/repos/{repo}/results", post(repos::upload_results))
        .route("/worker/jobs/{id}/complete", post(worker::complete))
        .layer(DefaultBodyLimit::max(RESULTS_BODY_LIMIT));
    let hooks = Router::new()
        .route("/webhooks/{provider}", post(webhooks::receive_push))
        .layer(DefaultBodyLimit::max(webhooks::WEBHOOK_BODY_LIMIT));
    Router::new()
        .route("/repos", get(repos::list).post(repos::create))
        .route("/repos/{repo}", get(repos::show))
        .route("/repos/{repo}/runs", post(repos::enqueue_run))
        .route("/repos/{repo}/commits/{sha}", get(repos::commit))
        .route("/repos/{repo}/series", get(repos::series))
        .route("/repos/{repo}/regressions", get(verdicts::regressions))
        .route("/repos/{repo}/regressions/{id}", get(verdicts::regression))
        .route(
            "/repos/{repo}/regressions/{id}/bisection",
            get(verdicts::bisection),
        )
        .route(
            "/repos/{repo}/regressions/{id}/triage",
            post(verdicts::triage),
        )
        .route("/repos/{repo}/compare", get(verdicts::compare))
        .route(
            "/repos/{repo}/sensitivity",
            get(verdicts::sensitivity).put(verdicts::set_sensitivity),
        )
        .route(
            "/repos/{repo}/alerts",
            get(alerts::channels).post(alerts::add_channel),
        )
        .route(
            "/repos/{repo}/alerts/{id}",
            axum::routing::delete(alerts::remove_channel),
        )
        .route("/repos/{repo}/alerts/deliveries", get(alerts::deliveries))
        .route(
            "/repos/{repo}/commit-status",
            get(alerts::status_target)
                .put(alerts::set_status_target)
                .delete(alerts::remove_status_target),
        )
        .route("/jobs", get(queue::jobs))
        .route("/jobs/{id}", get(queue::job))
        .route("/jobs/{id}/cancel", post(queue::cancel))
        .route("/jobs/{id}/retry", post(queue::retry))
        .route("/webhooks/deliveries", get(webhooks::deliveries))
        .route("/machines", get(queue::machines))
        .route("/worker/claim", post(worker::claim))
        .route("/worker/jobs/{id}/heartbeat", post(worker::heartbeat))
        .layer(DefaultBodyLimit::max(SMALL_BODY_LIMIT))
        .merge(results)
        .merge(hooks)
}

/// A JSON body whose rejections are reported as [`AppError`]s (a JSON error body).
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(AppError))]
pub struct ApiJson<T>(pub T);

impl From<axum::extract::rejection::JsonRejection> for AppError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        use axum::extract::rejection::JsonRejection;
        match rejection {
            JsonRejection::BytesRejection(_) => {
                AppError::PayloadTooLarge("request body is too large or unreadable".into())
            }
            other => AppError::BadRequest(other.body_text()),
        }
    }
}

/// Proof that the request carries a live worker (or admin) token.
pub struct WorkerAuth;

impl FromRequestParts<AppState> for WorkerAuth {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        crate::auth::require_scope(parts, state, TokenScope::Worker).await?;
        Ok(WorkerAuth)
    }
}
