//! The job queue and the machines: listing, cancelling and retrying jobs.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kymo_core::db::{JobRow, MachineRow};
use kymo_core::protocol::ApiErrorBody;

use crate::auth::Admin;
use crate::error::AppResult;
use crate::state::AppState;

#[utoipa::path(get, path = "/jobs", tag = "queue",
    responses((status = 200, description = "The newest 500 jobs", body = Vec<JobRow>)))]
pub async fn jobs(State(state): State<AppState>) -> AppResult<Json<Vec<JobRow>>> {
    Ok(Json(state.db.jobs(500).await?))
}

#[utoipa::path(get, path = "/jobs/{id}", tag = "queue", params(("id" = i64, Path, description = "Job id")),
    responses((status = 200, description = "The job", body = JobRow), (status = 404, description = "No such job", body = ApiErrorBody)))]
pub async fn job(State(state): State<AppState>, Path(id): Path<i64>) -> AppResult<Json<JobRow>> {
    Ok(Json(state.db.job(id).await?))
}

#[utoipa::path(get, path = "/machines", tag = "queue",
    responses((status = 200, description = "Registered machines", body = Vec<MachineRow>)))]
pub async fn machines(State(state): State<AppState>) -> AppResult<Json<Vec<MachineRow>>> {
    Ok(Json(state.db.machines().await?))
}

#[utoipa::path(post, path = "/jobs/{id}/cancel", tag = "queue", security(("admin_token" = [])),
    params(("id" = i64, Path, description = "Job id")),
    responses((status = 200, description = "The cancelled job", body = JobRow),
        (status = 401, description = "No admin token", body = ApiErrorBody),
        (status = 404, description = "No such job", body = ApiErrorBody),
        (status = 409, description = "The job has finished already", body = ApiErrorBody)))]
/// `POST /jobs/{id}/cancel`: a waiting or running job stops counting; its worker's lease is gone.
pub async fn cancel(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<i64>,
) -> AppResult<Json<JobRow>> {
    state.db.cancel_job(id, state.now()).await?;
    crate::analysis::after_cancelled_job(&state, id).await;
    tracing::info!(job = id, "job cancelled");
    Ok(Json(state.db.job(id).await?))
}

#[utoipa::path(post, path = "/jobs/{id}/retry", tag = "queue", security(("admin_token" = [])),
    params(("id" = i64, Path, description = "Job id")),
    responses((status = 201, description = "The new job for the same commit and machine", body = JobRow),
        (status = 401, description = "No admin token", body = ApiErrorBody),
        (status = 404, description = "No such job", body = ApiErrorBody),
        (status = 409, description = "The job is still waiting or running", body = ApiErrorBody)))]
/// `POST /jobs/{id}/retry`: queues a finished job's commit again on the same machine.
pub async fn retry(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<i64>,
) -> AppResult<(StatusCode, Json<JobRow>)> {
    let new = state.db.retry_job(id, state.leases, state.now()).await?;
    tracing::info!(job = id, new, "job retried");
    Ok((StatusCode::CREATED, Json(state.db.job(new).await?)))
}
