//! Comparison runs over the API: `kymo try` queues one, and anyone may read them.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kymo_core::db::{
    ADAPTIVE_ROUNDS, COMPARISON_ROUNDS, ComparisonOrigin, ComparisonRow, NewComparison,
    RepositoryRow, checked_budget,
};
use kymo_core::model::CommitSha;
use kymo_core::protocol::{ApiErrorBody, TryQueued, TryRequest};

use super::ApiJson;
use super::doc::RepoPath;
use crate::auth::Admin;
use crate::error::{AppError, AppResult};
use crate::git;
use crate::interleaved::{ComparisonView, comparison_view};
use crate::state::AppState;

/// How many comparisons a repository's list shows.
const LISTED: i64 = 100;

#[utoipa::path(post, path = "/repos/{repo}/try", tag = "comparisons", security(("admin_token" = [])),
    params(RepoPath), request_body = TryRequest,
    responses(
        (status = 202, description = "The comparison and its job are queued", body = TryQueued),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 422, description = "Unknown commit, no merge base, bad rounds or budget, or malformed body", body = ApiErrorBody)))]
/// Fetches the remote, resolves the head and its base (the merge base with the tracked branch
/// unless one is given) and queues one job that measures them interleaved.
pub async fn try_run(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
    ApiJson(request): ApiJson<TryRequest>,
) -> AppResult<(StatusCode, Json<TryQueued>)> {
    let repo = state.db.repository(&repo).await?;
    let (rounds, budget_seconds) = match (request.rounds, request.budget_seconds) {
        (Some(rounds), None) => (rounds, None),
        (rounds, budget) => {
            let budget = match budget {
                Some(budget) => budget,
                None => state.db.comparison_budget(repo.id).await?,
            };
            (rounds.unwrap_or(ADAPTIVE_ROUNDS), Some(budget))
        }
    };
    if !COMPARISON_ROUNDS.contains(&rounds) {
        return Err(AppError::BadRequest(format!(
            "{rounds} rounds: use {} to {}",
            COMPARISON_ROUNDS.start(),
            COMPARISON_ROUNDS.end()
        )));
    }
    budget_seconds.map(checked_budget).transpose()?;
    let (head, head_id) = git::resolve_commit(&state, &repo, Some(&request.commit)).await?;
    let (base, base_id, baseline) = match request.base.as_deref() {
        Some(base) => {
            let (sha, id) = git::resolve_fetched(&state, &repo, base).await?;
            (sha, id, format!("base {}", label(base)))
        }
        None => {
            let (sha, id) = merge_base(&state, &repo, &head).await?;
            (sha, id, format!("merge-base of {}", repo.branch))
        }
    };
    let new = NewComparison {
        repository_id: repo.id,
        origin: ComparisonOrigin::Try,
        label: &label(&request.commit),
        base_id,
        head_id,
        baseline: &baseline,
        rounds,
        budget_seconds,
        head_ref: None,
    };
    let (comparison, job) = (state.db)
        .create_comparison(&new, state.leases, state.now())
        .await?;
    tracing::info!(comparison, job, head = %head, base = %base, "try run queued");
    Ok((
        StatusCode::ACCEPTED,
        Json(TryQueued {
            comparison,
            job,
            base,
            head,
            baseline,
        }),
    ))
}

/// The merge base of `head` with the tracked branch, recorded.
pub async fn merge_base(
    state: &AppState,
    repo: &RepositoryRow,
    head: &CommitSha,
) -> AppResult<(CommitSha, i64)> {
    let sha = git::merge_base(state, repo, head.as_str(), &repo.branch).await?;
    git::resolve_fetched(state, repo, &sha).await
}

/// What a comparison is called on pages: the ref as given, cut to a line's length.
fn label(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

#[utoipa::path(get, path = "/repos/{repo}/comparisons", tag = "comparisons", params(RepoPath),
    responses((status = 200, description = "The latest comparisons (try runs, pull requests), newest first", body = Vec<ComparisonRow>),
        (status = 404, description = "No such repository", body = ApiErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    Path(repo): Path<String>,
) -> AppResult<Json<Vec<ComparisonRow>>> {
    let repo = state.db.repository(&repo).await?;
    Ok(Json(state.db.comparisons(repo.id, LISTED).await?))
}

#[utoipa::path(get, path = "/repos/{repo}/comparisons/{id}", tag = "comparisons",
    params(RepoPath, ("id" = i64, Path, description = "Comparison id")),
    responses((status = 200, description = "The comparison, with its verdict once measured", body = ComparisonView),
        (status = 404, description = "No such repository or comparison", body = ApiErrorBody)))]
pub async fn show(
    State(state): State<AppState>,
    Path((repo, id)): Path<(String, i64)>,
) -> AppResult<Json<ComparisonView>> {
    let repo = state.db.repository(&repo).await?;
    let comparison = state.db.comparison(repo.id, id).await?;
    Ok(Json(comparison_view(&state, &repo, comparison).await?))
}
