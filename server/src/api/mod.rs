//! The JSON API under `/api/v1`.

mod alerts;
mod commits;
mod comparisons;
mod doc;
mod pull_uploads;
mod queue;
mod repos;
mod series;
mod settings;
mod verdicts;
mod webhooks;
mod worker;

pub use alerts::{DeliveryLog, LOG_LIMIT, target_view};
pub use commits::load_commit;
pub use comparisons::merge_base;
pub(crate) use repos::uploading_machine;
pub use verdicts::{csv_response, load_regression};

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts};
use axum::http::request::Parts;
use kymo_core::db::{Credential, TokenScope};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::AppError;
use crate::state::AppState;

/// Bodies that carry results (uploads, job completions) may be large; everything else is small.
const RESULTS_BODY_LIMIT: usize = 64 * 1024 * 1024;
const SMALL_BODY_LIMIT: usize = 256 * 1024;

/// Where the API is mounted.
pub const PREFIX: &str = "/api/v1";

/// The API's routes and their OpenAPI document, from one source. To add a route, give its
/// handler a `#[utoipa::path(...)]` attribute and add one line here:
/// `.routes(routes!(module::handler))` (several handlers of one path in one `routes!`). A
/// plain `.route(...)` would be served but undocumented, and the OpenAPI test fails on it.
fn documented() -> OpenApiRouter<AppState> {
    let results = OpenApiRouter::new()
        .routes(routes!(repos::upload_results))
        .routes(routes!(pull_uploads::upload))
        .routes(routes!(worker::complete))
        .layer(DefaultBodyLimit::max(RESULTS_BODY_LIMIT));
    let hooks = OpenApiRouter::new()
        .routes(routes!(webhooks::receive_push))
        .layer(DefaultBodyLimit::max(webhooks::WEBHOOK_BODY_LIMIT));
    let api = OpenApiRouter::new()
        .routes(routes!(doc::openapi_json))
        .routes(routes!(repos::list, repos::create))
        .routes(routes!(repos::show))
        .routes(routes!(settings::settings, settings::update_settings))
        .routes(routes!(repos::enqueue_run))
        .routes(routes!(comparisons::try_run))
        .routes(routes!(comparisons::list))
        .routes(routes!(comparisons::show))
        .routes(routes!(settings::backfill))
        .routes(routes!(
            settings::get_suites,
            settings::put_suites,
            settings::delete_suites
        ))
        .routes(routes!(commits::commit))
        .routes(routes!(series::series))
        .routes(routes!(verdicts::regressions))
        .routes(routes!(verdicts::regression))
        .routes(routes!(verdicts::bisection))
        .routes(routes!(verdicts::confirmation))
        .routes(routes!(verdicts::triage))
        .routes(routes!(verdicts::compare))
        .routes(routes!(verdicts::sensitivity, verdicts::set_sensitivity))
        .routes(routes!(alerts::channels, alerts::add_channel))
        .routes(routes!(alerts::remove_channel))
        .routes(routes!(alerts::deliveries))
        .routes(routes!(
            alerts::status_target,
            alerts::set_status_target,
            alerts::remove_status_target
        ))
        .routes(routes!(queue::jobs))
        .routes(routes!(queue::job))
        .routes(routes!(queue::cancel))
        .routes(routes!(queue::retry))
        .routes(routes!(queue::machines))
        .routes(routes!(webhooks::deliveries))
        .routes(routes!(worker::claim))
        .routes(routes!(worker::heartbeat))
        .layer(DefaultBodyLimit::max(SMALL_BODY_LIMIT))
        .merge(results)
        .merge(hooks);
    OpenApiRouter::with_openapi(<doc::ApiDoc as utoipa::OpenApi>::openapi()).nest(PREFIX, api)
}

/// The API router, mounted at [`PREFIX`].
pub fn router() -> Router<AppState> {
    documented()
        .split_for_parts()
        .0
        .layer(axum::middleware::from_fn(crate::limits::json_refusals))
}

/// The API's OpenAPI document (what `GET /api/v1/openapi.json` serves).
pub fn openapi() -> utoipa::openapi::OpenApi {
    documented().into_openapi()
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

/// A query string whose rejections are reported as [`AppError`]s (422 with a JSON body).
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(AppError))]
pub struct ApiQuery<T>(pub T);

impl From<axum::extract::rejection::QueryRejection> for AppError {
    fn from(rejection: axum::extract::rejection::QueryRejection) -> Self {
        AppError::BadRequest(rejection.body_text())
    }
}

/// The live worker (or admin) token the request carries: its id holds the leases it claims,
/// its granted labels bound what it may claim.
pub struct WorkerAuth(pub Credential);

impl FromRequestParts<AppState> for WorkerAuth {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        crate::auth::require_token(parts, state, TokenScope::Worker)
            .await
            .map(WorkerAuth)
    }
}
