//! Regressions, their triage, and comparisons, as JSON.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use kymo_core::db::{
    BisectionView, ConfirmationView, RegressionFilter, RegressionRow, SensitivityRule,
};
use kymo_core::protocol::ApiErrorBody;
use serde::Deserialize;

use super::doc::RepoPath;
use super::{ApiJson, ApiQuery};
use crate::auth::Admin;
use crate::compare::{Baseline, CompareReport, compare_commits, to_csv};
use crate::error::{AppError, AppResult};
use crate::export::{ExportFormat, csv_download};
use crate::state::AppState;

#[utoipa::path(get, path = "/repos/{repo}/regressions", tag = "verdicts",
    params(RepoPath, RegressionFilter),
    responses((status = 200, description = "Detected changes, newest first: the open ones unless `state` says otherwise", body = Vec<RegressionRow>), (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 422, description = "Bad filter", body = ApiErrorBody)))]
pub async fn regressions(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    ApiQuery(filter): ApiQuery<RegressionFilter>,
) -> AppResult<Json<Vec<RegressionRow>>> {
    let mut filter = filter.validated()?;
    // What needs looking at: closed and refuted findings are listed only when asked for.
    filter.state.get_or_insert_with(|| "open".to_owned());
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

#[utoipa::path(get, path = "/repos/{repo}/regressions/{id}", tag = "verdicts",
    params(RepoPath, ("id" = i64, Path, description = "Regression id")),
    responses((status = 200, description = "The regression with its evidence", body = RegressionRow), (status = 404, description = "No such repository or regression", body = ApiErrorBody)))]
pub async fn regression(
    State(state): State<AppState>,
    Path((repo, id)): Path<(String, i64)>,
) -> AppResult<Json<RegressionRow>> {
    Ok(Json(load_regression(&state, &repo, id).await?))
}

#[utoipa::path(get, path = "/repos/{repo}/regressions/{id}/bisection", tag = "verdicts",
    params(RepoPath, ("id" = i64, Path, description = "Regression id")),
    responses((status = 200, description = "The bisection of a regression whose range held unmeasured commits", body = BisectionView),
        (status = 404, description = "No such repository or regression, or no bisection", body = ApiErrorBody)))]
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

#[utoipa::path(get, path = "/repos/{repo}/regressions/{id}/confirmation", tag = "verdicts",
    params(RepoPath, ("id" = i64, Path, description = "Regression id")),
    responses((status = 200, description = "How the change was confirmed or refuted before it was announced: what was re-run and what it found", body = ConfirmationView),
        (status = 404, description = "No such repository or regression, or no confirmation", body = ApiErrorBody)))]
/// `GET /repos/{repo}/regressions/{id}/confirmation`: its re-measurement, if one was asked for.
pub async fn confirmation(
    State(state): State<AppState>,
    Path((repo, id)): Path<(String, i64)>,
) -> AppResult<Json<ConfirmationView>> {
    load_regression(&state, &repo, id).await?;
    state
        .db
        .confirmation_of(id)
        .await?
        .map(Json)
        .ok_or_else(|| AppError::NotFound(format!("a confirmation of regression {id}")))
}

/// A triage decision.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Triage {
    pub state: String,
    /// Who decided; the admin token's name when absent.
    #[serde(default)]
    pub by: String,
    #[serde(default)]
    pub note: String,
}

#[utoipa::path(post, path = "/repos/{repo}/regressions/{id}/triage", tag = "verdicts",
    params(RepoPath, ("id" = i64, Path, description = "Regression id")), request_body = Triage,
    responses((status = 200, description = "The regression in its new state", body = RegressionRow),
        (status = 404, description = "No such repository or regression", body = ApiErrorBody),
        (status = 422, description = "Unknown state or missing name", body = ApiErrorBody)))]
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
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CompareQuery {
    /// `parent` (default), a commit, branch or tag, or `merge-base:BRANCH`.
    pub base: Option<String>,
    /// The compared commit: a sha, branch or tag.
    pub head: String,
    /// `json` (default) or `csv`.
    pub format: Option<String>,
}

#[utoipa::path(get, path = "/repos/{repo}/compare", tag = "verdicts", params(RepoPath, CompareQuery),
    responses(
        (status = 200, description = "Every series measured on both commits, judged",
         content((CompareReport = "application/json"), (String = "text/csv"))),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 422, description = "Unknown commit or bad parameter", body = ApiErrorBody)))]
pub async fn compare(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    ApiQuery(query): ApiQuery<CompareQuery>,
) -> AppResult<Response> {
    let format = ExportFormat::parse(query.format.as_deref())?;
    let repo = state.db.repository(&repo).await?;
    let baseline = Baseline::parse(query.base.as_deref());
    let report = compare_commits(&state, &repo, &baseline, &query.head).await?;
    Ok(match format {
        ExportFormat::Csv => csv_response(&report),
        ExportFormat::Json => Json(report).into_response(),
    })
}

/// A compare report as a CSV download.
pub fn csv_response(report: &CompareReport) -> Response {
    let name = format!(
        "kymo-compare-{}-{}.csv",
        &report.base[..10.min(report.base.len())],
        &report.head[..10.min(report.head.len())]
    );
    csv_download(&name, to_csv(report))
}

#[utoipa::path(get, path = "/repos/{repo}/sensitivity", tag = "verdicts", params(RepoPath),
    responses((status = 200, description = "Stored sensitivity overrides", body = Vec<SensitivityRule>), (status = 404, description = "No such repository", body = ApiErrorBody)))]
pub async fn sensitivity(
    State(state): State<AppState>,
    Path(repo): Path<String>,
) -> AppResult<Json<Vec<SensitivityRule>>> {
    let repo = state.db.repository(&repo).await?;
    Ok(Json(state.db.sensitivity_rules(repo.id).await?))
}

/// Stores a sensitivity rule (`benchmark` empty or absent for the whole repository) and
/// re-analyses the repository's history under it.
#[utoipa::path(put, path = "/repos/{repo}/sensitivity", tag = "verdicts", params(RepoPath),
    request_body = SensitivityRule,
    responses((status = 200, description = "The rules after the change; history is re-analysed", body = Vec<SensitivityRule>),
        (status = 404, description = "No such repository", body = ApiErrorBody), (status = 422, description = "Invalid override", body = ApiErrorBody)))]
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
