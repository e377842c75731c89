//! Alert channels, commit-status targets and the delivery log, as JSON.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kymo_core::db::{AlertChannelRow, CommitStatusTarget, DeliveryRow, StatusPostRow};
use serde::{Deserialize, Serialize};

use kymo_core::protocol::ApiErrorBody;

use super::ApiJson;
use super::doc::RepoPath;
use crate::alerts::{
    AlertChannelView, GITHUB_API, NewAlertChannel, StatusTargetRequest, StatusTargetView,
    redact_url, token_hint,
};
use crate::auth::{Admin, ReaderIsAdmin};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Deliveries and status posts the log shows at most.
pub const LOG_LIMIT: i64 = 100;

impl From<AlertChannelRow> for AlertChannelView {
    fn from(row: AlertChannelRow) -> Self {
        AlertChannelView {
            id: row.id,
            kind: row.kind,
            url: redact_url(&row.url),
            created_at: row.created_at,
        }
    }
}

#[utoipa::path(get, path = "/repos/{repo}/alerts", tag = "alerts", params(RepoPath),
    responses((status = 200, description = "The repository's alert channels (URLs redacted)", body = Vec<AlertChannelView>),
        (status = 404, description = "No such repository", body = ApiErrorBody)))]
pub async fn channels(
    State(state): State<AppState>,
    Path(repo): Path<String>,
) -> AppResult<Json<Vec<AlertChannelView>>> {
    let repo = state.db.repository(&repo).await?;
    let rows = state.db.alert_channels(repo.id).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}

#[utoipa::path(post, path = "/repos/{repo}/alerts", tag = "alerts", params(RepoPath), security(("admin_token" = [])),
    request_body = NewAlertChannel,
    responses((status = 201, description = "The new channel", body = AlertChannelView),
        (status = 401, description = "No admin token", body = ApiErrorBody),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 409, description = "The URL is a channel already", body = ApiErrorBody),
        (status = 422, description = "Bad URL or kind", body = ApiErrorBody)))]
pub async fn add_channel(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
    ApiJson(new): ApiJson<NewAlertChannel>,
) -> AppResult<(StatusCode, Json<AlertChannelView>)> {
    let repo = state.db.repository(&repo).await?;
    let kind = new.kind.as_deref().unwrap_or("json");
    let row = state
        .db
        .add_alert_channel(repo.id, kind, new.url.trim(), state.now())
        .await?;
    tracing::info!(
        repo = repo.name,
        channel = row.id,
        kind,
        "alert channel added"
    );
    Ok((StatusCode::CREATED, Json(row.into())))
}

#[utoipa::path(delete, path = "/repos/{repo}/alerts/{id}", tag = "alerts", security(("admin_token" = [])),
    params(RepoPath, ("id" = i64, Path, description = "Channel id")),
    responses((status = 204, description = "Removed"),
        (status = 401, description = "No admin token", body = ApiErrorBody),
        (status = 404, description = "No such repository or channel", body = ApiErrorBody)))]
pub async fn remove_channel(
    State(state): State<AppState>,
    _admin: Admin,
    Path((repo, id)): Path<(String, i64)>,
) -> AppResult<StatusCode> {
    let repo = state.db.repository(&repo).await?;
    state.db.remove_alert_channel(repo.id, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The delivery log of a repository: alert deliveries and commit-status posts, newest first.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveryLog {
    pub deliveries: Vec<DeliveryRow>,
    pub statuses: Vec<StatusPostRow>,
}

#[utoipa::path(get, path = "/repos/{repo}/alerts/deliveries", tag = "alerts", params(RepoPath),
    responses((status = 200, description = "Alert deliveries and commit-status posts with their attempts, newest first; what a remote answered is shown to admins, its status to everyone", body = DeliveryLog),
        (status = 404, description = "No such repository", body = ApiErrorBody)))]
pub async fn deliveries(
    State(state): State<AppState>,
    ReaderIsAdmin(admin): ReaderIsAdmin,
    Path(repo): Path<String>,
) -> AppResult<Json<DeliveryLog>> {
    let repo = state.db.repository(&repo).await?;
    let mut deliveries = state.db.alert_deliveries(repo.id, LOG_LIMIT).await?;
    let mut statuses = state.db.status_posts(repo.id, LOG_LIMIT).await?;
    if !admin {
        deliveries
            .iter_mut()
            .for_each(|d| d.progress.hide_answers());
        statuses.iter_mut().for_each(|s| s.progress.hide_answers());
    }
    Ok(Json(DeliveryLog {
        deliveries,
        statuses,
    }))
}

/// A stored target as shown: the token reduced to a hint.
pub fn target_view(target: CommitStatusTarget) -> StatusTargetView {
    StatusTargetView {
        token_hint: token_hint(&target.token),
        kind: target.kind,
        api_url: target.api_url,
        slug: target.slug,
    }
}

#[utoipa::path(get, path = "/repos/{repo}/commit-status", tag = "alerts", params(RepoPath),
    responses((status = 200, description = "Where commit statuses go (the token only as a hint)", body = StatusTargetView),
        (status = 404, description = "No such repository or no target", body = ApiErrorBody)))]
pub async fn status_target(
    State(state): State<AppState>,
    Path(repo): Path<String>,
) -> AppResult<Json<StatusTargetView>> {
    let repo = state.db.repository(&repo).await?;
    let target = state
        .db
        .commit_status_target(repo.id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("{} posts no commit statuses", repo.name)))?;
    Ok(Json(target_view(target)))
}

#[utoipa::path(put, path = "/repos/{repo}/commit-status", tag = "alerts", params(RepoPath), security(("admin_token" = [])),
    request_body = StatusTargetRequest,
    responses((status = 200, description = "The stored target", body = StatusTargetView),
        (status = 401, description = "No admin token", body = ApiErrorBody),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 422, description = "Bad kind, slug, URL or token", body = ApiErrorBody)))]
pub async fn set_status_target(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
    ApiJson(request): ApiJson<StatusTargetRequest>,
) -> AppResult<Json<StatusTargetView>> {
    let repo = state.db.repository(&repo).await?;
    let api_url = match (request.api_url, request.kind.as_str()) {
        (Some(url), _) => url.trim().trim_end_matches('/').to_owned(),
        (None, "github") => GITHUB_API.to_owned(),
        (None, "gitlab") => crate::alerts::GITLAB_API.to_owned(),
        (None, _) => {
            return Err(AppError::BadRequest(
                "api_url is required for gitea (e.g. https://gitea.example/api/v1)".into(),
            ));
        }
    };
    let target = CommitStatusTarget {
        kind: request.kind,
        api_url,
        slug: request.slug.trim().to_owned(),
        token: request.token,
    };
    state
        .db
        .set_commit_status_target(repo.id, &target, state.now())
        .await?;
    tracing::info!(
        repo = repo.name,
        kind = target.kind,
        slug = target.slug,
        "commit statuses set"
    );
    Ok(Json(target_view(target)))
}

#[utoipa::path(delete, path = "/repos/{repo}/commit-status", tag = "alerts", params(RepoPath), security(("admin_token" = [])),
    responses((status = 204, description = "Removed"),
        (status = 401, description = "No admin token", body = ApiErrorBody),
        (status = 404, description = "No such repository or no target", body = ApiErrorBody)))]
pub async fn remove_status_target(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
) -> AppResult<StatusCode> {
    let repo = state.db.repository(&repo).await?;
    state.db.remove_commit_status_target(repo.id).await?;
    Ok(StatusCode::NO_CONTENT)
}
