//! Pull requests measured in CI: `kymo upload --pull-request N` sends the head's results here.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kymo_core::protocol::ApiErrorBody;
use kymo_core::pull_upload::{PullUploadAccepted, PullUploadRequest};

use super::ApiJson;
use super::doc::RepoPath;
use super::repos::idempotency_key;
use crate::auth::Uploader;
use crate::error::AppResult;
use crate::state::AppState;

#[utoipa::path(post, path = "/repos/{repo}/pulls/{number}/results", tag = "comparisons",
    security(("upload_token" = [])),
    params(RepoPath, ("number" = i64, Path, description = "The pull (or merge) request's number")),
    request_body = PullUploadRequest,
    responses(
        (status = 201, description = "Stored apart from the branch's history as a comparison with the base; the pull request's status and comment follow", body = PullUploadAccepted),
        (status = 200, description = "An upload with this `Idempotency-Key` was stored already: its comparison", body = PullUploadAccepted),
        (status = 403, description = "An upload token of another repository", body = ApiErrorBody),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 413, description = "Body too large", body = ApiErrorBody),
        (status = 422, description = "Malformed results, an unknown base, or no stored results of the base from this machine", body = ApiErrorBody)))]
/// Compares a pull request's head, measured in CI, with its base's results (uploaded with it,
/// or stored from the same machine), and publishes the verdict on the pull request.
pub async fn upload(
    State(state): State<AppState>,
    uploader: Uploader,
    Path((repo, number)): Path<(String, i64)>,
    headers: axum::http::HeaderMap,
    ApiJson(request): ApiJson<PullUploadRequest>,
) -> AppResult<(StatusCode, Json<PullUploadAccepted>)> {
    let key = idempotency_key(&headers)?;
    let repo = state.db.repository(&repo).await?;
    uploader.may_upload_to(&repo)?;
    let (status, accepted) =
        crate::pulls::ci::store_upload(&state, &repo, number, request, key).await?;
    Ok((status, Json(accepted)))
}
