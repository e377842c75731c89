//! The worker protocol: claim a job under a lease, renew it, complete it.

use axum::Json;
use axum::extract::{Path, State};
use kymo_core::db::{Credential, DbError, RunRecord};
use kymo_core::protocol::{
    ApiErrorBody, ClaimRequest, ClaimResponse, Completion, Heartbeat, JobOutcome, log_tail,
};
use serde_json::{Value, json};

use super::{ApiJson, WorkerAuth};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Longest error message and log tail kept for a failed job.
const MAX_ERROR_BYTES: usize = 4 * 1024;
const MAX_LOG_BYTES: usize = 64 * 1024;

#[utoipa::path(post, path = "/worker/claim", tag = "worker", security(("worker_token" = [])),
    request_body = ClaimRequest,
    responses((status = 200, description = "A job under a lease, or `job: null`", body = ClaimResponse), (status = 401, description = "Missing or unknown worker token", body = ApiErrorBody)))]
pub async fn claim(
    State(state): State<AppState>,
    WorkerAuth(token): WorkerAuth,
    ApiJson(request): ApiJson<ClaimRequest>,
) -> AppResult<Json<ClaimResponse>> {
    let now = state.now();
    // upsert_machine keeps the first 128 characters of the name.
    let name = &request.environment.hostname;
    // A worker may claim only with the labels an admin granted to its token: the others it
    // declares are ignored (and logged), so declaring `secure` does not reach the jobs of a
    // repository restricted to `secure` machines.
    let (labels, refused) = token.grant(&request.labels.join(","))?;
    if !refused.is_empty() {
        tracing::warn!(
            token = token.name,
            ?refused,
            "labels not granted to this worker token are ignored"
        );
    }
    let (machine_id, _) = state
        .db
        .upsert_machine(&request.specs, name, Some(&labels), now)
        .await?;
    let job = state
        .db
        .claim_job(machine_id, token.token_id, &labels, state.leases, now)
        .await?;
    if let Some(job) = &job {
        tracing::info!(job = job.id, commit = %job.commit, repo = job.repository, "job claimed");
        let target = state.db.job_target(job.id).await?;
        crate::alerts::commit_status_changed(&state, target.commit_id).await?;
    }
    Ok(Json(ClaimResponse { job }))
}

#[utoipa::path(post, path = "/worker/jobs/{id}/heartbeat", tag = "worker", security(("worker_token" = [])),
    params(("id" = i64, Path, description = "Job id")), request_body = Heartbeat,
    responses((status = 200, description = "The lease is renewed: `{\"lease_seconds\": N}`", body = Value), (status = 401, description = "Missing or unknown worker token", body = ApiErrorBody),
        (status = 403, description = "The job is leased to another token", body = ApiErrorBody),
        (status = 409, description = "The lease was lost", body = ApiErrorBody)))]
pub async fn heartbeat(
    State(state): State<AppState>,
    WorkerAuth(token): WorkerAuth,
    Path(id): Path<i64>,
    ApiJson(beat): ApiJson<Heartbeat>,
) -> AppResult<Json<Value>> {
    ensure_lease_holder(&state, id, &token).await?;
    let phase = beat.phase.as_deref().map(clean_phase);
    state
        .db
        .heartbeat(
            id,
            &beat.lease_id,
            phase.as_deref(),
            state.leases,
            state.now(),
        )
        .await?;
    Ok(Json(json!({ "lease_seconds": state.leases.lease_seconds })))
}

#[utoipa::path(post, path = "/worker/jobs/{id}/complete", tag = "worker", security(("worker_token" = [])),
    params(("id" = i64, Path, description = "Job id")), request_body = Completion,
    responses((status = 200, description = "`{\"state\": \"succeeded\"|\"failed\"}`", body = Value), (status = 401, description = "Missing or unknown worker token", body = ApiErrorBody),
        (status = 403, description = "The job is leased to another token", body = ApiErrorBody),
        (status = 409, description = "The lease was lost", body = ApiErrorBody),
        (status = 422, description = "Results refused; the job fails with the reason", body = ApiErrorBody)))]
pub async fn complete(
    State(state): State<AppState>,
    WorkerAuth(token): WorkerAuth,
    Path(id): Path<i64>,
    ApiJson(completion): ApiJson<Completion>,
) -> AppResult<Json<Value>> {
    ensure_lease_holder(&state, id, &token).await?;
    let now = state.now();
    let lease = completion.lease_id.as_str();
    let comparison = state.db.job_comparison(id).await?;
    match (&completion.outcome, &comparison) {
        (JobOutcome::Compared { .. }, None) | (JobOutcome::Succeeded { .. }, Some(_)) => {
            let error = "the results do not fit the job: a comparison job answers with its rounds, \
                         any other job with its suites";
            state.db.fail_job(id, lease, error, "", now).await?;
            Err(DbError::Invalid(error.into()).into())
        }
        (JobOutcome::Compared { rounds, log }, Some(comparison)) => {
            let adaptive = comparison.budget_seconds.is_some();
            if let Err(reason) =
                crate::interleaved::validate_rounds(rounds, comparison.rounds, adaptive)
            {
                let error = format!("the results were refused: {reason}");
                let error = log_tail(&error, MAX_ERROR_BYTES);
                state.db.fail_job(id, lease, error, "", now).await?;
                return Err(DbError::Invalid(reason).into());
            }
            let results =
                serde_json::to_string(rounds).map_err(|e| AppError::Internal(e.into()))?;
            let log = log_tail(log, MAX_LOG_BYTES);
            let comparison = (state.db)
                .complete_comparison_job(id, lease, &results, log, now)
                .await?;
            tracing::info!(job = id, comparison, "comparison measured");
            state.db.pull_feedback_due(comparison, now).await?;
            // Stored: judging a confirmation failing must not make the worker send it again.
            if let Err(err) = crate::confirm::comparison_measured(&state, comparison).await {
                tracing::warn!(comparison, error = %err, "judging its confirmations failed");
            }
            Ok(Json(
                json!({ "state": "succeeded", "comparison": comparison }),
            ))
        }
        (
            JobOutcome::Failed {
                error,
                log_tail: tail,
            },
            _,
        ) => {
            let (error, tail) = (
                log_tail(error, MAX_ERROR_BYTES),
                log_tail(tail, MAX_LOG_BYTES),
            );
            let target = state.db.job_target(id).await?;
            state.db.fail_job(id, lease, error, tail, now).await?;
            tracing::warn!(job = id, error, "job failed");
            match &comparison {
                Some(comparison) => {
                    (state.db)
                        .pull_feedback_due(comparison.comparison_id, now)
                        .await?;
                    // A confirmation waiting for it is settled (announced unconfirmed).
                    crate::analysis::follow_up(&state, target.repository_id, &[]).await?;
                }
                None => {
                    crate::analysis::follow_up(&state, target.repository_id, &[]).await?;
                    crate::alerts::commit_status_changed(&state, target.commit_id).await?;
                }
            }
            Ok(Json(json!({ "state": "failed" })))
        }
        (
            JobOutcome::Succeeded {
                suites,
                log,
                config,
            },
            None,
        ) => {
            let target = state.db.job_target(id).await?;
            let record = RunRecord {
                repository_id: target.repository_id,
                commit_id: target.commit_id,
                machine_id: target.machine_id,
                job: Some((id, lease)),
                environment: &completion.environment,
                log: log_tail(log, MAX_LOG_BYTES),
                suites,
                config: config.as_ref().filter(|c| is_sha256_hex(&c.sha256)),
                upload_key: None,
            };
            match state.db.store_run(record, now).await {
                Ok(summary) => {
                    tracing::info!(
                        job = id,
                        measurements = summary.measurements,
                        "job succeeded"
                    );
                    crate::analysis::after_stored_run(&state, target.repository_id, summary.run_id)
                        .await;
                    crate::alerts::commit_status_changed(&state, target.commit_id).await?;
                    Ok(Json(json!({ "state": "succeeded", "run": summary.run_id })))
                }
                Err(DbError::Invalid(reason)) => {
                    // Results the server cannot store fail the job, with the reason, instead
                    // of leaving it to be retried forever.
                    let error = format!("the results were refused: {reason}");
                    state
                        .db
                        .fail_job(
                            id,
                            lease,
                            log_tail(&error, MAX_ERROR_BYTES),
                            log_tail(log, MAX_LOG_BYTES),
                            now,
                        )
                        .await?;
                    Err(DbError::Invalid(reason).into())
                }
                Err(other) => Err(other.into()),
            }
        }
    }
}

/// Refuses a heartbeat or completion sent with another token than the one the job's lease
/// was handed to (the lease id is checked as well, when the job is written).
async fn ensure_lease_holder(state: &AppState, job: i64, token: &Credential) -> AppResult<()> {
    match state.db.job_lease_token(job).await? {
        Some(holder) if holder != token.token_id => Err(AppError::Forbidden(format!(
            "job {job} is leased to another token"
        ))),
        _ => Ok(()),
    }
}

/// Longest phase kept for the queue page.
const MAX_PHASE_CHARS: usize = 120;

/// A worker's phase as the queue page may show it: one short line without control characters.
fn clean_phase(phase: &str) -> String {
    phase
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_PHASE_CHARS)
        .collect()
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_one_short_line() {
        assert_eq!(
            clean_phase("suite 1 of 2:\nbuild\u{1b}[31m"),
            "suite 1 of 2: build [31m"
        );
        assert_eq!(
            clean_phase(&"x".repeat(1000)).chars().count(),
            MAX_PHASE_CHARS
        );
    }

    #[test]
    fn only_a_sha256_is_kept_as_a_configuration_hash() {
        assert!(is_sha256_hex(&"ab".repeat(32)));
        assert!(!is_sha256_hex("abc"));
        assert!(!is_sha256_hex(&"zz".repeat(32)));
    }
}
