//! Regressions, their triage, and comparisons, as JSON.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use kymo_core::db::{BisectionView, RegressionFilter, RegressionRow, SensitivityRule};
use serde::Deserialize;

use super::ApiJson;
use crate::auth::Admin;
use crate::compare::{Baseline, compare_commits, to_csv};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

pub async fn regressions(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    Query(filter): Query<RegressionFilter>,
) -> AppResult<Json<Vec<RegressionRow>>> {
    let repo = state.db.repository(&repo).await?;
    Ok(Json(state.db.regressions(repo.id, &filter).await?))
}

/// Loads a regression and checks it belongs to `repo`.
pub async fn load_regression(state: &AppState, repo: &str, id: i64) -> AppResult<RegressionRow> {
    let regression = state.db.regression(id).await?;
    if regression.repository != repo {
        return Err(AppError::NotFound(format!(
            "regression {id} not found in {repo:?}"
        )));
    }
    Ok(regression)
}

pub async fn regression(
    State(state): State<AppState>,
    Path((repo, id)): Path<(String, i64)>,
) -> AppResult<Json<RegressionRow>> {
    Ok(Json(load_regression(&state, &repo, id).await?))
}

/// `GET /repos/{repo}/regressions/{id}/bisection`: the search for its culprit, if one ran.
pub async fn bisection(
    State(state): State<AppState>,
    Path((repo, id)): Path<(String, i64)>,
) -> AppResult<Json<BisectionView>> {
    load_regression(&state, &repo, id).await?;
    state
        .db
        .bisection_of(id)
        .await?
        .map(Json)
        .ok_or_else(|| AppError::NotFound(format!("a bisection of regression {id}")))
}

/// A triage decision.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Triage {
    pub state: String,
    /// Who decided; the admin token's name when absent.
    #[serde(default)]
    pub by: String,
    #[serde(default)]
    pub note: String,
}

pub async fn triage(
    State(state): State<AppState>,
    admin: Admin,
    Path((repo, id)): Path<(String, i64)>,
    ApiJson(triage): ApiJson<Triage>,
) -> AppResult<Json<RegressionRow>> {
    load_regression(&state, &repo, id).await?;
    let by = match triage.by.trim() {
        "" => admin.name.as_str(),
        named => named,
    };
    state
        .db
        .triage(id, &triage.state, by, &triage.note, state.now())
        .await?;
    Ok(Json(state.db.regression(id).await?))
}

/// Parameters of `GET /repos/{repo}/compare`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareQuery {
    /// `parent` (default), a commit, branch or tag, or `merge-base:BRANCH`.
    pub base: Option<String>,
    pub head: String,
    /// `json` (default) or `csv`.
    pub format: Option<String>,
}

pub async fn compare(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    Query(query): Query<CompareQuery>,
) -> AppResult<Response> {
    let repo = state.db.repository(&repo).await?;
    let baseline = Baseline::parse(query.base.as_deref());
    let report = compare_commits(&state, &repo, &baseline, &query.head).await?;
    Ok(match query.format.as_deref() {
        Some("csv") => csv_response(&report),
        None | Some("json") => Json(report).into_response(),
        Some(other) => {
            return Err(AppError::BadRequest(format!(
                "format {other:?} is not json or csv"
            )));
        }
    })
}

/// A compare report as a CSV download.
pub fn csv_response(report: &crate::compare::CompareReport) -> Response {
    let name = format!(
        "attachment; filename=\"kymo-compare-{}-{}.csv\"",
        &report.base[..10.min(report.base.len())],
        &report.head[..10.min(report.head.len())]
    );
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (header::CONTENT_DISPOSITION, name),
        ],
        to_csv(report),
    )
        .into_response()
}

pub async fn sensitivity(
    State(state): State<AppState>,
    Path(repo): Path<String>,
) -> AppResult<Json<Vec<SensitivityRule>>> {
    let repo = state.db.repository(&repo).await?;
    Ok(Json(state.db.sensitivity_rules(repo.id).await?))
}

/// Stores a sensitivity rule (`benchmark` empty or absent for the whole repository) and
/// re-analyses the repository's history under it.
pub async fn set_sensitivity(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
    ApiJson(rule): ApiJson<SensitivityRule>,
) -> AppResult<Json<Vec<SensitivityRule>>> {
    let repo = state.db.repository(&repo).await?;
    state
        .db
        .set_sensitivity(repo.id, &rule, state.now())
        .await?;
    crate::analysis::analyse_repository(&state, repo.id).await?;
    Ok(Json(state.db.sensitivity_rules(repo.id).await?))
}
