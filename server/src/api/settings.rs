//! A tracked repository's settings: the suites kept on the server for commits without a
//! `kymo.toml`, its git credential, whether its suites may use the network, and the backfill
//! of its history.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kymo_core::credentials::redact_secrets;
use kymo_core::db::{PullSettings, RepositoryRow, checked_budget};
use kymo_core::protocol::{
    ApiErrorBody, BackfillQueued, BackfillRequest, RepositorySettingsView, RepositoryUpdate,
    StoredSuites,
};

use super::ApiJson;
use super::doc::RepoPath;
use crate::auth::Admin;
use crate::backfill::Backfill;
use crate::error::{AppError, AppResult};
use crate::git;
use crate::state::AppState;

/// Checks a `kymo.toml` as a worker would read a commit's own; the parser's message is the
/// error.
pub(crate) fn validate_suites_toml(toml: &str) -> AppResult<()> {
    kymo_worker::config::parse_kymo_toml_bytes(toml.as_bytes())
        .map(|_| ())
        .map_err(|e| AppError::BadRequest(format!("suites: {e}")))
}

#[utoipa::path(put, path = "/repos/{repo}/suites", tag = "repos", params(RepoPath),
    request_body = StoredSuites,
    responses(
        (status = 200, description = "Kept: commits without a kymo.toml run these suites", body = StoredSuites),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 422, description = "Not a valid kymo.toml; nothing changed", body = ApiErrorBody)))]
pub async fn put_suites(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
    ApiJson(suites): ApiJson<StoredSuites>,
) -> AppResult<Json<StoredSuites>> {
    let repo = state.db.repository(&repo).await?;
    validate_suites_toml(&suites.toml)?;
    state
        .db
        .set_stored_suites(repo.id, Some(&suites.toml))
        .await?;
    Ok(Json(suites))
}

#[utoipa::path(get, path = "/repos/{repo}/suites", tag = "repos", params(RepoPath),
    responses(
        (status = 200, description = "The kymo.toml kept on the server", body = StoredSuites),
        (status = 404, description = "No such repository, or no suites kept", body = ApiErrorBody)))]
pub async fn get_suites(
    State(state): State<AppState>,
    Path(repo): Path<String>,
) -> AppResult<Json<StoredSuites>> {
    let repo = state.db.repository(&repo).await?;
    match state.db.stored_suites(repo.id).await? {
        Some(toml) => Ok(Json(StoredSuites { toml })),
        None => Err(AppError::NotFound(format!(
            "{} keeps no suites on the server",
            repo.name
        ))),
    }
}

#[utoipa::path(delete, path = "/repos/{repo}/suites", tag = "repos", params(RepoPath),
    responses(
        (status = 204, description = "Forgotten: only commits with a kymo.toml run"),
        (status = 404, description = "No such repository", body = ApiErrorBody)))]
pub async fn delete_suites(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
) -> AppResult<StatusCode> {
    let repo = state.db.repository(&repo).await?;
    state.db.set_stored_suites(repo.id, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/repos/{repo}/backfill", tag = "repos", params(RepoPath),
    request_body = BackfillRequest,
    responses(
        (status = 202, description = "The range's commits queued on every machine, below pushed heads and bisection", body = BackfillQueued),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 422, description = "Bad range, unknown commit, or too many commits", body = ApiErrorBody)))]
pub async fn backfill(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
    ApiJson(request): ApiJson<BackfillRequest>,
) -> AppResult<(StatusCode, Json<BackfillQueued>)> {
    let repo = state.db.repository(&repo).await?;
    let backfill = Backfill::from_request(&request)?;
    let queued = crate::backfill::backfill(&state, &repo, backfill).await?;
    Ok((StatusCode::ACCEPTED, Json(queued)))
}

async fn settings_view(state: &AppState, repo: RepositoryRow) -> AppResult<RepositorySettingsView> {
    let credential = state.db.git_credential(repo.id).await?;
    let network_off = state.db.network_off(repo.id).await?;
    Ok(RepositorySettingsView {
        url: redact_secrets(&repo.url).into_owned(),
        name: repo.name,
        credential: credential.map(|c| c.summary()),
        network: !network_off,
        pulls: state.db.pull_settings(repo.id).await?,
        confirm: state.db.confirm_changes(repo.id).await?,
        budget_seconds: state.db.comparison_budget(repo.id).await?,
    })
}

#[utoipa::path(get, path = "/repos/{repo}/settings", tag = "repos", params(RepoPath),
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "The repository's settings, without secrets", body = RepositorySettingsView),
        (status = 404, description = "No such repository", body = ApiErrorBody)))]
pub async fn settings(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
) -> AppResult<Json<RepositorySettingsView>> {
    let repo = state.db.repository(&repo).await?;
    Ok(Json(settings_view(&state, repo).await?))
}

#[utoipa::path(post, path = "/repos/{repo}/settings", tag = "repos", params(RepoPath),
    security(("admin_token" = [])),
    request_body = RepositoryUpdate,
    responses(
        (status = 200, description = "Changed; the settings, without secrets", body = RepositorySettingsView),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 422, description = "Invalid settings, or a fetch with the new credential failed (nothing changed)", body = ApiErrorBody)))]
pub async fn update_settings(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
    ApiJson(update): ApiJson<RepositoryUpdate>,
) -> AppResult<Json<RepositorySettingsView>> {
    let repo = state.db.repository(&repo).await?;
    // Checked before anything is stored, and stored after the credential was: a bad request
    // changes nothing.
    update.budget_seconds.map(checked_budget).transpose()?;
    let pulls = match (&update.fork_authors, &update.pull_comments) {
        (None, None) => None,
        (authors, comments) => {
            let current = state.db.pull_settings(repo.id).await?;
            let wanted = PullSettings {
                fork_authors: authors.clone().unwrap_or(current.fork_authors),
                pull_comments: comments.clone().unwrap_or(current.pull_comments),
            };
            Some(wanted.validated()?)
        }
    };
    match (update.credential, update.clear_credential) {
        (Some(_), true) => {
            return Err(AppError::BadRequest(
                "give a credential or clear it, not both".into(),
            ));
        }
        (Some(credential), false) => {
            let credential = credential.validated().map_err(AppError::BadRequest)?;
            // Fetch with it before storing it: a wrong credential changes nothing.
            git::probe(
                &state,
                &repo.name,
                &repo.url,
                Some(&repo.branch),
                Some(&credential),
            )
            .await?;
            let now = state.now();
            state
                .db
                .set_git_credential(repo.id, Some(&credential), now)
                .await?;
            tracing::info!(
                repo = repo.name,
                credential = credential.describe(),
                "credential set"
            );
        }
        (None, true) => {
            state
                .db
                .set_git_credential(repo.id, None, state.now())
                .await?;
            tracing::info!(repo = repo.name, "credential removed");
        }
        (None, false) => {}
    }
    if let Some(network) = update.network {
        state.db.set_network_off(repo.id, !network).await?;
        tracing::info!(
            repo = repo.name,
            network = if network {
                "each suite decides"
            } else {
                "cut for every suite"
            },
            "network setting changed"
        );
    }
    if let Some(confirm) = update.confirm {
        state.db.set_confirm_changes(repo.id, confirm).await?;
        tracing::info!(repo = repo.name, confirm, "confirmation setting changed");
    }
    if let Some(budget) = update.budget_seconds {
        state.db.set_comparison_budget(repo.id, budget).await?;
        tracing::info!(repo = repo.name, budget, "comparison budget set");
    }
    if let Some(pulls) = pulls {
        state.db.set_pull_settings(repo.id, &pulls).await?;
        tracing::info!(
            repo = repo.name,
            fork_authors = pulls.fork_authors,
            pull_comments = pulls.pull_comments,
            "pull request settings set"
        );
    }
    Ok(Json(settings_view(&state, repo).await?))
}
