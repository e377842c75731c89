//! The job queue and the machines: listing, cancelling and retrying jobs.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kymo_core::db::{JobRow, MachineRow};

use crate::auth::Admin;
use crate::error::AppResult;
use crate::state::AppState;

pub async fn jobs(State(state): State<AppState>) -> AppResult<Json<Vec<JobRow>>> {
    Ok(Json(state.db.jobs(500).await?))
}

pub async fn job(State(state): State<AppState>, Path(id): Path<i64>) -> AppResult<Json<JobRow>> {
    Ok(Json(state.db.job(id).await?))
}

pub async fn machines(State(state): State<AppState>) -> AppResult<Json<Vec<MachineRow>>> {
    Ok(Json(state.db.machines().await?))
}

/// `POST /jobs/{id}/cancel`: a waiting or running job stops counting; its worker's lease is gone.
pub async fn cancel(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<i64>,
) -> AppResult<Json<JobRow>> {
    state.db.cancel_job(id, state.now()).await?;
    tracing::info!(job = id, "job cancelled");
    Ok(Json(state.db.job(id).await?))
}

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
