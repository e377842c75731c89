//! Repositories, their commits, series and uploaded results.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kymo_core::credentials::{GitCredential, redact_secrets, split_url_credentials};
use kymo_core::db::{
    IngestSummary, JobReason, RepositoryRow, RepositorySettings, RepositorySummary, RunRecord,
    validate_repository,
};
use kymo_core::model::{CommitSha, Environment, MachineFingerprint, MachineSpecs};
use kymo_core::protocol::{
    ApiErrorBody, BackfillRequest, NewRepository, RunQueued, RunRequest, UploadAccepted,
    UploadRequest,
};

use super::ApiJson;
use super::doc::RepoPath;
use super::settings::validate_suites_toml;
use crate::auth::{Admin, Uploader};
use crate::backfill::Backfill;
use crate::error::{AppError, AppResult};
use crate::git;
use crate::state::AppState;

#[utoipa::path(get, path = "/repos", tag = "repos",
    responses((status = 200, description = "Tracked repositories with their counts", body = Vec<RepositorySummary>)))]
pub async fn list(State(state): State<AppState>) -> AppResult<Json<Vec<RepositorySummary>>> {
    Ok(Json(state.db.repository_summaries().await?))
}

#[utoipa::path(get, path = "/repos/{repo}", tag = "repos", params(RepoPath),
    responses((status = 200, description = "The repository", body = RepositoryRow), (status = 404, description = "No such repository", body = ApiErrorBody)))]
pub async fn show(
    State(state): State<AppState>,
    Path(repo): Path<String>,
) -> AppResult<Json<RepositoryRow>> {
    Ok(Json(state.db.repository(&repo).await?))
}

#[utoipa::path(post, path = "/repos", tag = "repos", request_body = NewRepository,
    responses(
        (status = 201, description = "Cloned and tracked (and its history queued, with `backfill`)", body = RepositoryRow),
        (status = 409, description = "The name is taken", body = ApiErrorBody),
        (status = 422, description = "Invalid name, URL, branch or suites, or the clone failed", body = ApiErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    _admin: Admin,
    ApiJson(new): ApiJson<NewRepository>,
) -> AppResult<(StatusCode, Json<RepositoryRow>)> {
    let (url, credential) = separate_credential(&new.url, new.credential)?;
    // The branch is checked once known; "main" stands in for the remote's default here.
    validate_repository(&new.name, &url, new.branch.as_deref().unwrap_or("main"))?;
    if state.db.repository(&new.name).await.is_ok() {
        return Err(AppError::Conflict(format!(
            "a repository named {:?} already exists",
            new.name
        )));
    }
    let settings = RepositorySettings {
        webhook_secret: new.webhook_secret,
        poll_seconds: new.poll_seconds,
        machine_labels: new.machine_labels.unwrap_or_default(),
        network_off: new.network == Some(false),
    }
    .validated()?;
    if let Some(toml) = &new.suites {
        validate_suites_toml(toml)?;
    }
    let backfill = new
        .backfill
        .map(|last| {
            Backfill::from_request(&BackfillRequest {
                last: Some(last),
                ..Default::default()
            })
        })
        .transpose()?;
    // Clone before storing anything, so that a wrong URL, branch or credential changes nothing.
    let branch = git::probe(
        &state,
        &new.name,
        &url,
        new.branch.as_deref(),
        credential.as_ref(),
    )
    .await?;
    validate_repository(&new.name, &url, &branch)?;
    let repo = state
        .db
        .create_repository(&new.name, &url, &branch, settings, state.now())
        .await?;
    state
        .db
        .set_git_credential(repo.id, credential.as_ref(), state.now())
        .await?;
    if let Some(toml) = &new.suites {
        state.db.set_stored_suites(repo.id, Some(toml)).await?;
    }
    // `probe` has just fetched the mirror: its history is read as it is.
    git::record_history(&state, &repo).await?;
    tracing::info!(repo = repo.name, url = %redact_secrets(&repo.url), branch, "repository added");
    if let Some(backfill) = backfill {
        crate::backfill::backfill_synced(&state, &repo, backfill).await?;
    }
    Ok((StatusCode::CREATED, Json(repo)))
}

/// The URL to store and the credential to use: a password written into an HTTPS URL is moved
/// out of it into the credential, so that it is neither stored in nor shown with the URL.
fn separate_credential(
    url: &str,
    given: Option<GitCredential>,
) -> AppResult<(String, Option<GitCredential>)> {
    let (url, credential) = match (split_url_credentials(url), given) {
        (Some(_), Some(_)) => {
            return Err(AppError::BadRequest(
                "the URL holds a password and a credential is given too: give the token once, as the credential".into(),
            ));
        }
        (Some((bare, username, token)), None) => {
            (bare, Some(GitCredential::Https { username, token }))
        }
        (None, given) => (url.to_owned(), given),
    };
    let credential = credential
        .map(GitCredential::validated)
        .transpose()
        .map_err(AppError::BadRequest)?;
    Ok((url, credential))
}

#[utoipa::path(post, path = "/repos/{repo}/runs", tag = "repos", params(RepoPath),
    request_body(content = RunRequest, description = "Optional: an empty body queues the branch head"),
    responses(
        (status = 202, description = "Jobs queued for every machine", body = RunQueued),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 422, description = "Unknown commit or malformed body", body = ApiErrorBody)))]
pub async fn enqueue_run(
    State(state): State<AppState>,
    _admin: Admin,
    Path(repo): Path<String>,
    body: axum::body::Bytes,
) -> AppResult<(StatusCode, Json<RunQueued>)> {
    // The body is optional: an empty one queues the branch head.
    let request: RunRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RunRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| AppError::BadRequest(format!("run request: {e}")))?
    };
    let repo = state.db.repository(&repo).await?;
    let (commit, commit_id) = git::resolve_commit(&state, &repo, request.commit.as_deref()).await?;
    let jobs = state
        .db
        .enqueue_commit(
            repo.id,
            commit_id,
            JobReason::Manual,
            state.leases,
            state.now(),
        )
        .await?;
    crate::alerts::commit_status_changed(&state, commit_id).await?;
    Ok((StatusCode::ACCEPTED, Json(RunQueued { commit, jobs })))
}

#[utoipa::path(post, path = "/repos/{repo}/results", tag = "repos", params(RepoPath),
    request_body = UploadRequest,
    responses(
        (status = 201, description = "Stored and analysed", body = UploadAccepted),
        (status = 200, description = "An upload with this `Idempotency-Key` was stored already: its run", body = UploadAccepted),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 409, description = "This `Idempotency-Key` was sent before with other results", body = ApiErrorBody),
        (status = 413, description = "Body too large", body = ApiErrorBody),
        (status = 422, description = "Malformed or invalid results", body = ApiErrorBody)))]
pub async fn upload_results(
    State(state): State<AppState>,
    uploader: Uploader,
    Path(repo): Path<String>,
    headers: axum::http::HeaderMap,
    ApiJson(upload): ApiJson<UploadRequest>,
) -> AppResult<(StatusCode, Json<UploadAccepted>)> {
    let key = idempotency_key(&headers)?;
    let repo = state.db.repository(&repo).await?;
    uploader.may_upload_to(&repo)?;
    kymo_core::results::validate_suites(&upload.suites).map_err(AppError::BadRequest)?;
    kymo_core::results::validate_environment(&upload.environment).map_err(AppError::BadRequest)?;
    // The commit first: an upload refused for an unknown commit must not register its machine.
    let known = match CommitSha::parse(&upload.commit) {
        Ok(sha) => state.db.commit_id(repo.id, &sha).await?,
        Err(_) => None,
    };
    let commit_id = match known {
        Some(id) => id,
        None => {
            git::resolve_commit(&state, &repo, Some(upload.commit.as_str()))
                .await?
                .1
        }
    };
    let now = state.now();
    let (machine_id, machine) =
        uploading_machine(&state, &upload.machine, &upload.specs, &upload.environment).await?;
    let accepted = |summary: IngestSummary| UploadAccepted {
        run: summary.run_id,
        machine: machine.clone(),
        measurements: summary.measurements,
    };
    let record = RunRecord {
        repository_id: repo.id,
        commit_id,
        machine_id,
        job: None,
        environment: &upload.environment,
        log: "",
        suites: &upload.suites,
        config: None,
        upload_key: key,
    };
    if let Some(stored) = state.db.upload_with_key(&record).await? {
        return Ok((StatusCode::OK, Json(accepted(stored))));
    }
    let summary = state.db.store_run(record, now).await?;
    crate::analysis::after_stored_run(&state, repo.id, summary.run_id).await;
    Ok((StatusCode::CREATED, Json(accepted(summary))))
}

/// The machine an upload's results are filed under: the registered one it names, or the
/// uploader's own (registered from its specs, named after its host).
pub(crate) async fn uploading_machine(
    state: &AppState,
    named: &Option<MachineFingerprint>,
    specs: &Option<MachineSpecs>,
    environment: &Environment,
) -> AppResult<(i64, MachineFingerprint)> {
    Ok(match (named, specs) {
        (Some(fingerprint), _) => (state.db.machine_id(fingerprint).await?, fingerprint.clone()),
        (None, Some(specs)) => {
            let name = environment.hostname.chars().take(128).collect::<String>();
            (state.db)
                .upsert_machine(specs, &name, None, state.now())
                .await?
        }
        (None, None) => {
            return Err(AppError::BadRequest(
                "an upload names a registered `machine` or sends the uploader's `specs`".into(),
            ));
        }
    })
}

/// Longest `Idempotency-Key` accepted.
const MAX_IDEMPOTENCY_KEY: usize = 128;

/// The upload's `Idempotency-Key`: 1-128 printable ASCII characters, if sent.
pub(crate) fn idempotency_key(headers: &axum::http::HeaderMap) -> AppResult<Option<&str>> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(key)
            if !key.is_empty()
                && key.len() <= MAX_IDEMPOTENCY_KEY
                && key.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            Ok(Some(key))
        }
        _ => Err(AppError::BadRequest(format!(
            "Idempotency-Key must be 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters"
        ))),
    }
}
