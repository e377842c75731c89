//! The job queue and the machines, read-only.

use axum::Json;
use axum::extract::{Path, State};
use kymo_core::db::{JobRow, MachineRow};
use kymo_core::protocol::ApiErrorBody;

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
