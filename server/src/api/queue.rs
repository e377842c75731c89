//! The job queue and the machines, read-only.

use axum::Json;
use axum::extract::{Path, State};
use kymo_core::db::{JobRow, MachineRow};

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
