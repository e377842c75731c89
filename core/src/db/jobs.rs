//! The job queue: one job per (commit, machine), claimed under a lease that a heartbeat
//! renews. An expired lease returns the job to the queue; after `max_attempts` claims it fails.

use super::machines::random_secret;
use super::{Db, DbError};
use crate::model::CommitSha;
use crate::protocol::ClaimedJob;

/// How long a lease lasts and how often a job may be claimed.
#[derive(Debug, Clone, Copy)]
pub struct LeaseSettings {
    pub lease_seconds: i64,
    pub max_attempts: i64,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        Self {
            lease_seconds: 60,
            max_attempts: 3,
        }
    }
}

/// A job as the queue page and the API show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct JobRow {
    pub id: i64,
    pub repository: String,
    pub sha: String,
    pub message: String,
    pub machine: Option<String>,
    pub state: String,
    pub attempts: i64,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub error: Option<String>,
    pub log_tail: Option<String>,
}

impl Db {
    /// Queues `commit_id` for every registered machine (or for the first machine to ask, when
    /// none is registered yet). A commit already waiting for a machine is not queued again.
    /// Returns the ids of the jobs that wait for it.
    pub async fn enqueue_commit(
        &self,
        repository_id: i64,
        commit_id: i64,
        priority: i64,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<Vec<i64>, DbError> {
        let mut tx = self.begin_write().await?;
        let machines = sqlx::query_scalar!("SELECT id FROM machines ORDER BY id")
            .fetch_all(&mut *tx)
            .await?;
        let targets: Vec<Option<i64>> = if machines.is_empty() {
            vec![None]
        } else {
            machines.into_iter().map(Some).collect()
        };
        let mut jobs = Vec::new();
        for machine in targets {
            let active = sqlx::query_scalar!(
                r#"SELECT id AS "id!" FROM jobs WHERE commit_id = ? AND machine_id IS ?
                   AND state IN ('queued', 'running')"#,
                commit_id,
                machine
            )
            .fetch_optional(&mut *tx)
            .await?;
            let id =
                match active {
                    Some(id) => id,
                    None => sqlx::query_scalar!(
                        r#"INSERT INTO jobs (repository_id, commit_id, machine_id, state, priority,
                                             max_attempts, created_at)
                           VALUES (?, ?, ?, 'queued', ?, ?, ?) RETURNING id AS "id!" "#,
                        repository_id,
                        commit_id,
                        machine,
                        priority,
                        settings.max_attempts,
                        now
                    )
                    .fetch_one(&mut *tx)
                    .await?,
                };
            jobs.push(id);
        }
        tx.commit().await?;
        Ok(jobs)
    }

    /// Hands the next job for `machine_id` to its worker under a fresh lease, after returning
    /// expired leases to the queue.
    pub async fn claim_job(
        &self,
        machine_id: i64,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<Option<ClaimedJob>, DbError> {
        self.expire_leases(now).await?;
        let mut tx = self.begin_write().await?;
        let next = sqlx::query!(
            r#"SELECT j.id AS "id!", r.name, r.url, c.sha
               FROM jobs j JOIN repositories r ON r.id = j.repository_id
                           JOIN commits c ON c.id = j.commit_id
               WHERE j.state = 'queued' AND (j.machine_id = ? OR j.machine_id IS NULL)
               ORDER BY j.priority DESC, j.id LIMIT 1"#,
            machine_id
        )
        .fetch_optional(&mut *tx)
        .await?;
        let Some(next) = next else {
            return Ok(None);
        };
        let lease_id = random_secret("");
        let expires = now + settings.lease_seconds;
        sqlx::query!(
            r#"UPDATE jobs SET state = 'running', machine_id = ?, lease_id = ?, lease_expires_at = ?,
                               attempts = attempts + 1, started_at = ?
               WHERE id = ?"#,
            machine_id,
            lease_id,
            expires,
            now,
            next.id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let commit = CommitSha::parse(&next.sha)
            .map_err(|e| DbError::Invalid(format!("stored commit is corrupt: {e}")))?;
        Ok(Some(ClaimedJob {
            id: next.id,
            lease_id,
            lease_seconds: settings.lease_seconds,
            repository: next.name,
            url: next.url,
            commit,
        }))
    }

    /// Renews a job's lease. Refused (Conflict) when the lease is no longer this worker's.
    pub async fn heartbeat(
        &self,
        job_id: i64,
        lease_id: &str,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<(), DbError> {
        let expires = now + settings.lease_seconds;
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query!(
            r#"UPDATE jobs SET lease_expires_at = ?
               WHERE id = ? AND state = 'running' AND lease_id = ? AND lease_expires_at >= ?"#,
            expires,
            job_id,
            lease_id,
            now
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if updated == 0 {
            return Err(lease_lost(job_id));
        }
        Ok(())
    }

    /// Marks a job failed with the reason and the log tail. Refused when the lease is gone.
    pub async fn fail_job(
        &self,
        job_id: i64,
        lease_id: &str,
        error: &str,
        log_tail: &str,
        now: i64,
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query!(
            r#"UPDATE jobs SET state = 'failed', error = ?, log_tail = ?, finished_at = ?,
                               lease_id = NULL, lease_expires_at = NULL
               WHERE id = ? AND state = 'running' AND lease_id = ?"#,
            error,
            log_tail,
            now,
            job_id,
            lease_id
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if updated == 0 {
            return Err(lease_lost(job_id));
        }
        Ok(())
    }

    /// Returns running jobs whose lease has expired to the queue, or fails them when they have
    /// used all their attempts. Returns how many jobs it touched.
    pub async fn expire_leases(&self, now: i64) -> Result<u64, DbError> {
        let mut tx = self.begin_write().await?;
        let failed = sqlx::query!(
            r#"UPDATE jobs SET state = 'failed', lease_id = NULL, lease_expires_at = NULL, finished_at = ?,
                               error = 'the worker stopped renewing its lease ' || attempts || ' times; giving up'
               WHERE state = 'running' AND lease_expires_at < ? AND attempts >= max_attempts"#,
            now,
            now
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let requeued = sqlx::query!(
            r#"UPDATE jobs SET state = 'queued', lease_id = NULL, lease_expires_at = NULL
               WHERE state = 'running' AND lease_expires_at < ?"#,
            now
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(failed + requeued)
    }

    /// Jobs for the queue page: waiting and running first, then the latest finished ones.
    pub async fn jobs(&self, limit: i64) -> Result<Vec<JobRow>, DbError> {
        self.job_rows(None, limit).await
    }

    /// One job.
    pub async fn job(&self, id: i64) -> Result<JobRow, DbError> {
        self.job_rows(Some(id), 1)
            .await?
            .pop()
            .ok_or_else(|| DbError::NotFound(format!("job {id}")))
    }

    /// Jobs in queue-page order: all of them, or the one with `id`.
    async fn job_rows(&self, id: Option<i64>, limit: i64) -> Result<Vec<JobRow>, DbError> {
        Ok(sqlx::query_as!(
            JobRow,
            r#"SELECT j.id, r.name AS repository, c.sha, c.message, m.fingerprint AS "machine?",
                      j.state, j.attempts, j.created_at, j.started_at, j.finished_at, j.error, j.log_tail
               FROM jobs j JOIN repositories r ON r.id = j.repository_id
                           JOIN commits c ON c.id = j.commit_id
                           LEFT JOIN machines m ON m.id = j.machine_id
               WHERE ?1 IS NULL OR j.id = ?1
               ORDER BY CASE j.state WHEN 'running' THEN 0 WHEN 'queued' THEN 1 ELSE 2 END,
                        CASE WHEN j.state IN ('running', 'queued') THEN j.id ELSE -coalesce(j.finished_at, 0) END,
                        j.id DESC
               LIMIT ?2"#,
            id,
            limit
        )
        .fetch_all(&self.reader)
        .await?)
    }
}

pub(super) fn lease_lost(job_id: i64) -> DbError {
    DbError::Conflict(format!(
        "job {job_id} is no longer leased to this worker (its lease expired or it finished)"
    ))
}

/// What a job measures: the ids a completed run is stored under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobTarget {
    pub repository_id: i64,
    pub commit_id: i64,
    pub machine_id: i64,
}

impl Db {
    /// The repository, commit and machine of a claimed job.
    pub async fn job_target(&self, job_id: i64) -> Result<JobTarget, DbError> {
        sqlx::query_as!(
            JobTarget,
            r#"SELECT repository_id, commit_id, machine_id AS "machine_id!"
               FROM jobs WHERE id = ? AND machine_id IS NOT NULL"#,
            job_id
        )
        .fetch_optional(&self.reader)
        .await?
        .ok_or_else(|| DbError::NotFound(format!("claimed job {job_id}")))
    }
}
