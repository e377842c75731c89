//! Repositories, their commits, series and uploaded results.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use kymo_core::db::{
    BenchmarkSeriesRow, CommitMeasurementRow, CommitRow, CommitRunRow, RepositoryRow,
    RepositorySummary, RunRecord, SeriesPoint, validate_repository,
};
use kymo_core::model::CommitSha;
use kymo_core::protocol::{NewRepository, RunQueued, RunRequest, UploadAccepted, UploadRequest};
use serde::{Deserialize, Serialize};

use super::ApiJson;
use crate::error::{AppError, AppResult};
use crate::git;
use crate::state::AppState;

/// Newest-first commits the series endpoint returns at most.
const MAX_SERIES_POINTS: i64 = 10_000;

pub async fn list(State(state): State<AppState>) -> AppResult<Json<Vec<RepositorySummary>>> {
    Ok(Json(state.db.repository_summaries().await?))
}

pub async fn show(
    State(state): State<AppState>,
    Path(repo): Path<String>,
) -> AppResult<Json<RepositoryRow>> {
    Ok(Json(state.db.repository(&repo).await?))
}

pub async fn create(
    State(state): State<AppState>,
    ApiJson(new): ApiJson<NewRepository>,
) -> AppResult<(StatusCode, Json<RepositoryRow>)> {
    let branch = new.branch.as_deref().unwrap_or("main");
    validate_repository(&new.name, &new.url, branch)?;
    if state.db.repository(&new.name).await.is_ok() {
        return Err(AppError::Conflict(format!(
            "a repository named {:?} already exists",
            new.name
        )));
    }
    // Clone before storing anything, so that a wrong URL or branch changes nothing.
    git::probe(&state, &new.name, &new.url, branch).await?;
    let repo = state
        .db
        .create_repository(&new.name, &new.url, branch, state.now())
        .await?;
    git::sync_history(&state, &repo).await?;
    tracing::info!(repo = repo.name, url = repo.url, "repository added");
    Ok((StatusCode::CREATED, Json(repo)))
}

pub async fn enqueue_run(
    State(state): State<AppState>,
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
        .enqueue_commit(repo.id, commit_id, 0, state.leases, state.now())
        .await?;
    Ok((StatusCode::ACCEPTED, Json(RunQueued { commit, jobs })))
}

/// A commit with everything measured on it.
#[derive(Serialize)]
pub struct CommitDetail {
    pub commit: CommitRow,
    pub runs: Vec<CommitRunRow>,
    pub results: Vec<CommitMeasurementRow>,
}

/// Loads a commit and its results; shared by the API and the commit page.
pub async fn load_commit(state: &AppState, repo: &str, sha: &str) -> AppResult<CommitDetail> {
    let repo = state.db.repository(repo).await?;
    let commit = state.db.commit(repo.id, sha).await?;
    let parent_id = match commit.parents.split(' ').next().map(CommitSha::parse) {
        Some(Ok(parent)) => state.db.commit_id(repo.id, &parent).await?,
        _ => None,
    };
    let runs = state.db.commit_runs(commit.id).await?;
    let results = state.db.commit_measurements(commit.id, parent_id).await?;
    Ok(CommitDetail {
        commit,
        runs,
        results,
    })
}

pub async fn commit(
    State(state): State<AppState>,
    Path((repo, sha)): Path<(String, String)>,
) -> AppResult<Json<CommitDetail>> {
    Ok(Json(load_commit(&state, &repo, &sha).await?))
}

/// Filters of the series endpoint.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesQuery {
    pub benchmark: Option<String>,
    pub metric: Option<String>,
    pub machine: Option<String>,
    pub limit: Option<i64>,
}

/// A series with its points in history order.
#[derive(Serialize)]
pub struct SeriesWithPoints {
    #[serde(flatten)]
    pub series: BenchmarkSeriesRow,
    pub points: Vec<SeriesPoint>,
}

pub async fn series(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    Query(query): Query<SeriesQuery>,
) -> AppResult<Json<Vec<SeriesWithPoints>>> {
    let repo = state.db.repository(&repo).await?;
    let limit = query.limit.unwrap_or(1_000).clamp(1, MAX_SERIES_POINTS);
    let all = state
        .db
        .series(
            repo.id,
            query.benchmark.as_deref(),
            query.metric.as_deref(),
            query.machine.as_deref(),
        )
        .await?;
    if all.len() > 100 {
        return Err(AppError::BadRequest(format!(
            "{} series match; narrow the query with benchmark, metric or machine",
            all.len()
        )));
    }
    let mut out = Vec::with_capacity(all.len());
    for series in all {
        let points = state.db.series_points(series.id, limit).await?;
        out.push(SeriesWithPoints { series, points });
    }
    Ok(Json(out))
}

pub async fn upload_results(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    ApiJson(upload): ApiJson<UploadRequest>,
) -> AppResult<(StatusCode, Json<UploadAccepted>)> {
    let repo = state.db.repository(&repo).await?;
    kymo_core::results::validate_suites(&upload.suites).map_err(AppError::BadRequest)?;
    kymo_core::results::validate_environment(&upload.environment).map_err(AppError::BadRequest)?;
    // The commit first: an upload refused for an unknown commit must not register its machine.
    let commit_id = match state.db.commit_id(repo.id, &upload.commit).await? {
        Some(id) => id,
        None => {
            git::resolve_commit(&state, &repo, Some(upload.commit.as_str()))
                .await?
                .1
        }
    };
    let now = state.now();
    let (machine_id, machine) = match (&upload.machine, &upload.specs) {
        (Some(fingerprint), _) => (state.db.machine_id(fingerprint).await?, fingerprint.clone()),
        (None, Some(specs)) => {
            let name = upload
                .environment
                .hostname
                .chars()
                .take(128)
                .collect::<String>();
            state.db.upsert_machine(specs, &name, now).await?
        }
        (None, None) => {
            return Err(AppError::BadRequest(
                "an upload names a registered `machine` or sends the uploader's `specs`".into(),
            ));
        }
    };
    let summary = state
        .db
        .store_run(
            RunRecord {
                repository_id: repo.id,
                commit_id,
                machine_id,
                job: None,
                environment: &upload.environment,
                log: "",
                suites: &upload.suites,
            },
            now,
        )
        .await?;
    crate::analysis::analyse_run(&state, summary.run_id).await?;
    Ok((
        StatusCode::CREATED,
        Json(UploadAccepted {
            run: summary.run_id,
            machine,
            measurements: summary.measurements,
        }),
    ))
}
