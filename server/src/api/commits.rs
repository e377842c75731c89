//! One commit with its runs and results, a page of results at a time: a run may hold a million
//! measurements, and an answer stays a size a client and the server can hold.

use axum::Json;
use axum::extract::{Path, State};
use kymo_core::db::{CommitMeasurementRow, CommitRow, CommitRunRow};
use kymo_core::model::CommitSha;
use kymo_core::protocol::ApiErrorBody;
use serde::{Deserialize, Serialize};

use super::ApiQuery;
use super::doc::RepoPath;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Most results one answer holds (and its default).
pub const MAX_RESULTS_PAGE: i64 = 1_000;

/// A commit with what was measured on it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CommitDetail {
    pub commit: CommitRow,
    pub runs: Vec<CommitRunRow>,
    /// The results from the `from`-th, by benchmark, metric and machine.
    pub results: Vec<CommitMeasurementRow>,
    /// How many results the commit has in all.
    pub results_total: i64,
    /// Where the next page of results starts (`?from=`), when there are more.
    pub next_from: Option<i64>,
}

/// Which results an answer holds.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ResultsPage {
    /// The first result to answer with, counted from 0 (default 0).
    pub from: Option<i64>,
    /// How many results at most (1 to 1000; default 1000).
    pub limit: Option<i64>,
}

impl ResultsPage {
    /// `(from, limit)`, checked.
    fn window(&self) -> AppResult<(i64, i64)> {
        let from = self.from.unwrap_or(0);
        let limit = self.limit.unwrap_or(MAX_RESULTS_PAGE);
        if from < 0 {
            return Err(AppError::BadRequest(format!(
                "from must be 0 or more, not {from}"
            )));
        }
        if !(1..=MAX_RESULTS_PAGE).contains(&limit) {
            return Err(AppError::BadRequest(format!(
                "limit must be between 1 and {MAX_RESULTS_PAGE}, not {limit}"
            )));
        }
        Ok((from, limit))
    }
}

/// Loads a commit and its results: all of them (the commit page, which orders them by their
/// change), or the window `(from, limit)` in name order (the API).
pub async fn load_commit(
    state: &AppState,
    repo: &str,
    sha: &str,
    window: Option<(i64, i64)>,
) -> AppResult<CommitDetail> {
    let repo = state.db.repository(repo).await?;
    let commit = state.db.commit(repo.id, sha).await?;
    let parent_id = match commit.parents.split(' ').next().map(CommitSha::parse) {
        Some(Ok(parent)) => state.db.commit_id(repo.id, &parent).await?,
        _ => None,
    };
    let runs = state.db.commit_runs(commit.id).await?;
    let (results, results_total, next_from) = match window {
        None => {
            let results = state.db.commit_measurements(commit.id, parent_id).await?;
            let total = i64::try_from(results.len()).unwrap_or(i64::MAX);
            (results, total, None)
        }
        Some((from, limit)) => {
            let results = (state.db)
                .commit_measurements_window(commit.id, parent_id, from, limit)
                .await?;
            let total = state.db.commit_measurement_count(commit.id).await?;
            let end = from.saturating_add(i64::try_from(results.len()).unwrap_or(i64::MAX));
            (results, total, (end < total).then_some(end))
        }
    };
    Ok(CommitDetail {
        commit,
        runs,
        results,
        results_total,
        next_from,
    })
}

#[utoipa::path(get, path = "/repos/{repo}/commits/{sha}", tag = "repos",
    params(RepoPath, ("sha" = String, Path, description = "A commit hash, or an unambiguous prefix of at least 4 digits"), ResultsPage),
    responses((status = 200, description = "The commit, its runs and a page of its results", body = CommitDetail),
        (status = 404, description = "No such repository or commit", body = ApiErrorBody),
        (status = 422, description = "Bad `from` or `limit`", body = ApiErrorBody)))]
pub async fn commit(
    State(state): State<AppState>,
    Path((repo, sha)): Path<(String, String)>,
    ApiQuery(page): ApiQuery<ResultsPage>,
) -> AppResult<Json<CommitDetail>> {
    let window = page.window()?;
    Ok(Json(load_commit(&state, &repo, &sha, Some(window)).await?))
}
