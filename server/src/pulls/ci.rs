//! Pull requests measured in CI (`kymo upload --pull-request N`): teams without benchmark
//! machines run their benchmarks in CI and upload the head's results. The head need not be in
//! the server's mirror (CI checked it out; it may live in a fork): it is recorded as a pull
//! request's head and never fetched. Its results are compared with the base's, uploaded by
//! the same job (measured on the same runner), or stored already from the same machine
//! fingerprint (the base branch measured in CI on every push), and the pull request gets the
//! same status and single comment as one measured by kymo's own workers.
//!
//! How an uploaded comparison is judged is [`super::ci_verdict`]'s.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use kymo_core::db::{
    CommitRecord, ComparisonOrigin, ComparisonRow, MeasuredBy, NewComparison, PullRequestRecord,
    RepositoryRow, UploadedComparison,
};
use kymo_core::model::{CommitSha, Direction, MachineFingerprint};
use kymo_core::protocol::{ComparedRound, SuiteUpload};
use kymo_core::pull_upload::{PullUploadAccepted, PullUploadRequest};
use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};
use kymo_core::webhook::Provider;

use crate::error::{AppError, AppResult};
use crate::git;
use crate::state::AppState;

/// How many first-parent commits before the base may stand for it when the base itself was
/// not measured on the uploader's machine: beyond, the comparison would mostly measure what
/// the base branch changed meanwhile.
pub const MAX_COMMITS_BEFORE_BASE: i64 = 20;

/// Stores a pull request's results uploaded from CI and lets its feedback fall due. Returns
/// 201 with the comparison, or 200 with the one an upload with the same key stored.
pub async fn store_upload(
    state: &AppState,
    repo: &RepositoryRow,
    number: i64,
    request: PullUploadRequest,
    key: Option<&str>,
) -> AppResult<(StatusCode, PullUploadAccepted)> {
    let checked = request.checked(number).map_err(AppError::BadRequest)?;
    if let Some(key) = key
        && let Some((comparison, number)) = state.db.uploaded_comparison(repo.id, key).await?
    {
        let row = state.db.comparison(repo.id, comparison).await?;
        return Ok((StatusCode::OK, accepted(state, repo, number, &row)?));
    }
    let (machine_id, machine) = crate::api::uploading_machine(
        state,
        &request.machine,
        &request.specs,
        &request.environment,
    )
    .await?;
    let provider = match checked.provider {
        Some(provider) => provider,
        None => repository_forge(state, repo).await?,
    };
    let branch = checked.base_branch.as_deref().unwrap_or(&repo.branch);
    let (base, measured, base_suites) =
        base_results(state, repo, &request, branch, (machine_id, &machine)).await?;
    let head_id = (state.db)
        .record_pull_head(
            repo.id,
            &CommitRecord {
                sha: request.head.clone(),
                parents: Vec::new(),
                author: checked.author.clone(),
                time: state.now(),
                message: checked.title.clone(),
            },
        )
        .await?;
    let round = [ComparedRound {
        base: base_suites,
        head: request.suites,
    }];
    let results = serde_json::to_string(&round).map_err(|e| AppError::Internal(e.into()))?;
    let label = format!("#{number} {}", checked.title);
    let comparison = (state.db)
        .store_pull_upload(
            &PullRequestRecord {
                repository_id: repo.id,
                provider: provider.as_str(),
                number,
                title: &checked.title,
                author: &checked.author,
                head_sha: request.head.as_str(),
            },
            &NewComparison {
                repository_id: repo.id,
                origin: ComparisonOrigin::Pull,
                label: label.trim(),
                base_id: base.id,
                head_id,
                baseline: &base.baseline,
                rounds: 1,
                budget_seconds: None,
                head_ref: None,
            },
            &UploadedComparison {
                results: &results,
                machine_id,
                measured,
                upload_key: key,
            },
            state.now(),
        )
        .await?;
    tracing::info!(
        repo = repo.name,
        number,
        comparison,
        measured = measured.as_str(),
        "pull request results uploaded from CI"
    );
    let row = state.db.comparison(repo.id, comparison).await?;
    Ok((StatusCode::CREATED, accepted(state, repo, number, &row)?))
}

fn accepted(
    state: &AppState,
    repo: &RepositoryRow,
    number: i64,
    row: &ComparisonRow,
) -> AppResult<PullUploadAccepted> {
    let internal = |e: kymo_core::model::IdError| AppError::Internal(e.into());
    Ok(PullUploadAccepted {
        pull_request: number,
        comparison: row.id,
        base: CommitSha::parse(&row.base).map_err(internal)?,
        baseline: row.baseline.clone(),
        machine: MachineFingerprint::parse(row.machine.as_deref().unwrap_or_default())
            .map_err(internal)?,
        url: format!(
            "{}/repos/{}/comparisons/{}",
            state.public_url, repo.name, row.id
        ),
    })
}

/// The forge of the repository's commit statuses (where the feedback goes), GitHub when none
/// is set: the upload did not say.
async fn repository_forge(state: &AppState, repo: &RepositoryRow) -> AppResult<Provider> {
    let target = state.db.commit_status_target(repo.id).await?;
    Ok(target
        .and_then(|t| Provider::parse(&t.kind))
        .unwrap_or(Provider::GitHub))
}

/// The commit a head is compared with, and how it was chosen.
struct Base {
    id: i64,
    baseline: String,
}

/// The base's results: those the same job uploaded, or the base's stored results from this
/// machine (of the nearest commit before it this machine measured, within
/// [`MAX_COMMITS_BEFORE_BASE`]).
async fn base_results(
    state: &AppState,
    repo: &RepositoryRow,
    request: &PullUploadRequest,
    branch: &str,
    (machine_id, machine): (i64, &MachineFingerprint),
) -> AppResult<(Base, MeasuredBy, Vec<SuiteUpload>)> {
    // The base is in the repository (unlike the head): fetched if the mirror is behind.
    let (asked, what) = match &request.merge_base {
        Some(sha) => (sha.as_str(), format!("merge base with {branch}")),
        None => (branch, format!("head of {branch}")),
    };
    let (sha, id) = match request.merge_base.as_ref() {
        Some(sha) => match state.db.commit_id(repo.id, sha).await? {
            Some(id) => (sha.clone(), id),
            None => git::resolve_commit(state, repo, Some(asked)).await?,
        },
        None => git::resolve_commit(state, repo, Some(asked)).await?,
    };
    if let Some(suites) = &request.base_suites {
        let baseline = format!("{what} {}, measured in the same CI job", sha.short());
        return Ok((Base { id, baseline }, MeasuredBy::SameJob, suites.clone()));
    }
    let found = (state.db)
        .measured_base(repo.id, id, machine_id, MAX_COMMITS_BEFORE_BASE)
        .await?;
    let no_results = || {
        AppError::BadRequest(format!(
            "no results of {} (the {what}) or of the {MAX_COMMITS_BEFORE_BASE} commits before \
             it are stored from machine {machine}: upload the base branch's results from CI \
             on every push (`kymo upload --commit SHA`), or measure the base in the same job \
             and send it with `--base-results DIR`",
            sha.short()
        ))
    };
    let found = found.ok_or_else(no_results)?;
    let suites = stored_suites(state, found.commit_id, machine).await?;
    if suites.is_empty() {
        return Err(no_results());
    }
    let stored = CommitSha::parse(&found.sha).map_err(|e| AppError::Internal(e.into()))?;
    let baseline = match found.commits_before {
        0 => format!("{what} {}, results stored from this machine", sha.short()),
        n => format!(
            "{what} {}: results of {}, {n} commit(s) before it, the nearest stored from this \
             machine",
            sha.short(),
            stored.short()
        ),
    };
    let base = Base {
        id: found.commit_id,
        baseline,
    };
    Ok((base, MeasuredBy::StoredBase, suites))
}

/// A commit's stored results from one machine, as an upload would send them: one suite, each
/// benchmark under its stored name (its parameters written into it).
async fn stored_suites(
    state: &AppState,
    commit_id: i64,
    machine: &MachineFingerprint,
) -> AppResult<Vec<SuiteUpload>> {
    let rows = state.db.commit_measurements(commit_id, None).await?;
    let mut benchmarks: BTreeMap<String, Vec<MetricResult>> = BTreeMap::new();
    for row in rows.into_iter().filter(|r| r.machine == machine.as_str()) {
        benchmarks
            .entry(row.benchmark)
            .or_default()
            .push(MetricResult {
                name: row.metric,
                unit: row.unit,
                direction: Direction::parse(&row.direction).unwrap_or(Direction::Lower),
                value: row.value,
                samples: row.samples.clone().or_value(row.value),
                hdr: None,
            });
    }
    if benchmarks.is_empty() {
        return Ok(Vec::new());
    }
    let benchmarks = benchmarks
        .into_iter()
        .map(|(name, metrics)| BenchmarkResult {
            name,
            params: Default::default(),
            metrics,
        })
        .collect();
    Ok(vec![SuiteUpload {
        suite: "stored".into(),
        results: SuiteResults { benchmarks },
    }])
}
