//! The job queue: one job per (commit, machine), claimed under a lease that a heartbeat
//! renews. An expired lease returns the job to the queue; after `max_attempts` claims it fails.

use super::machines::random_secret;
use super::{Db, DbError};
use crate::model::CommitSha;
use crate::protocol::{ClaimedJob, ComparisonSpec};

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
    /// Why it was queued: head, manual, bisect or backfill.
    pub reason: String,
    pub attempts: i64,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub error: Option<String>,
    pub log_tail: Option<String>,
    /// What a running job is doing, as its worker last said.
    pub phase: Option<String>,
    /// Why a failed job failed, from its output: cargo's `error: ...` lines, a panic
    /// ([`failure_cause`](crate::failure_cause::failure_cause)).
    #[serde(default)]
    pub cause: Option<String>,
}

/// Why a job was queued. Its priority follows from it: a push's new head (or a commit someone
/// asked for) first, then bisection steps, then the backfill of a push's other commits, then
/// history asked for by `kymo run --last N | A..B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobReason {
    Head,
    Manual,
    Bisect,
    Backfill,
    History,
    /// A `kymo try` comparison: someone waits for it at a terminal.
    Try,
    /// A pull or merge request's comparison: a reviewer waits for it.
    Pull,
    /// A change point's confirmation: its announcement waits for it.
    Confirm,
}

impl JobReason {
    pub fn as_str(self) -> &'static str {
        match self {
            JobReason::Head => "head",
            JobReason::Manual => "manual",
            JobReason::Bisect => "bisect",
            JobReason::Backfill => "backfill",
            JobReason::History => "history",
            JobReason::Try => "try",
            JobReason::Pull => "pull",
            JobReason::Confirm => "confirm",
        }
    }

    pub fn priority(self) -> i64 {
        match self {
            JobReason::Head | JobReason::Manual | JobReason::Try | JobReason::Pull => 30,
            JobReason::Bisect | JobReason::Confirm => 20,
            JobReason::Backfill => 10,
            JobReason::History => 5,
        }
    }

    /// Pushes and polls may announce a commit again (a replayed or repeated delivery), and a
    /// history backfill skips what is measured already: a commit they queue is measured once
    /// per machine. Asking for one commit by hand always measures it again.
    fn once_per_machine(self) -> bool {
        matches!(
            self,
            JobReason::Head | JobReason::Backfill | JobReason::History
        )
    }

    /// A backfill someone asked for (`kymo run --last N`, `A..B`) measures again the commits
    /// whose every job failed: they were never measured, and a user who fixed the suites
    /// expects the history to fill in. A push or poll announcing a failed commit again does
    /// not re-run it (a replayed delivery would repeat every failure).
    fn retries_failures(self) -> bool {
        self == JobReason::History
    }
}

/// What a batch of commits queued: the jobs waiting for them (new or already waiting), and
/// how many (commit, machine) pairs were left alone because that machine measured them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Enqueued {
    pub jobs: Vec<i64>,
    pub skipped: usize,
    /// (commit, machine) pairs queued again because every earlier job of theirs failed.
    pub requeued: usize,
}

/// A job [`queue_one`] left waiting for a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Waiting {
    id: i64,
    /// The machine's earlier jobs of this commit all failed: this one measures it again.
    after_failure: bool,
}

/// Whether a machine offering `offered` labels may run a repository requiring `required`
/// (both comma-separated; every required label must be offered).
pub fn labels_satisfy(required: &str, offered: &str) -> bool {
    let offered: Vec<&str> = split_labels(offered).collect();
    split_labels(required).all(|label| offered.contains(&label))
}

fn split_labels(labels: &str) -> impl Iterator<Item = &str> {
    labels.split(',').map(str::trim).filter(|l| !l.is_empty())
}

/// Checks and normalizes a comma-separated label list: each label 1-32 of `[a-z0-9_.-]`.
pub fn normalize_labels(labels: &str) -> Result<String, DbError> {
    let mut out: Vec<String> = Vec::new();
    for label in split_labels(labels) {
        let label = label.to_ascii_lowercase();
        let ok = label.len() <= 32
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !ok {
            return Err(DbError::Invalid(format!(
                "label {label:?} is not valid: use 1-32 letters, digits, '-', '_' or '.'"
            )));
        }
        if !out.contains(&label) {
            out.push(label);
        }
    }
    if out.len() > 16 {
        return Err(DbError::Invalid("at most 16 labels".into()));
    }
    out.sort();
    Ok(out.join(","))
}

impl Db {
    /// Queues `commit_id` for every registered machine carrying the repository's labels (or
    /// for the first machine to ask, when none is registered yet). A commit already waiting
    /// for a machine is not queued again; one queued by a push or poll is measured once per
    /// machine. Returns the ids of the jobs that wait for it.
    pub async fn enqueue_commit(
        &self,
        repository_id: i64,
        commit_id: i64,
        reason: JobReason,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<Vec<i64>, DbError> {
        let queued = self
            .enqueue_commits(repository_id, &[commit_id], reason, settings, now)
            .await?;
        Ok(queued.jobs)
    }

    /// Queues each of `commit_ids`, in that order, as [`Db::enqueue_commit`] does, in one
    /// transaction (a backfill of thousands of commits is one write).
    pub async fn enqueue_commits(
        &self,
        repository_id: i64,
        commit_ids: &[i64],
        reason: JobReason,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<Enqueued, DbError> {
        let mut tx = self.begin_write().await?;
        let required = sqlx::query_scalar!(
            "SELECT machine_labels FROM repositories WHERE id = ?",
            repository_id
        )
        .fetch_one(&mut *tx)
        .await?;
        // Machines known only from uploads run no worker: a job for them would wait forever.
        let machines =
            sqlx::query!("SELECT id, labels FROM machines WHERE runs_worker = 1 ORDER BY id")
                .fetch_all(&mut *tx)
                .await?;
        let targets: Vec<Option<i64>> = if machines.is_empty() {
            vec![None]
        } else {
            machines
                .into_iter()
                .filter(|m| labels_satisfy(&required, &m.labels))
                .map(|m| Some(m.id))
                .collect()
        };
        let mut queued = Enqueued::default();
        for &commit_id in commit_ids {
            for &machine in &targets {
                match queue_one(
                    &mut tx,
                    repository_id,
                    commit_id,
                    machine,
                    reason,
                    settings,
                    now,
                )
                .await?
                {
                    Some(waiting) => {
                        queued.jobs.push(waiting.id);
                        queued.requeued += usize::from(waiting.after_failure);
                    }
                    None => queued.skipped += 1,
                }
            }
        }
        tx.commit().await?;
        Ok(queued)
    }

    /// Queues `commit_id` on one machine (a bisection step or a repeat of one). Returns the job
    /// waiting for it, new or already queued.
    pub async fn enqueue_on_machine(
        &self,
        repository_id: i64,
        commit_id: i64,
        machine_id: i64,
        reason: JobReason,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<Option<i64>, DbError> {
        let mut tx = self.begin_write().await?;
        let id = queue_one(
            &mut tx,
            repository_id,
            commit_id,
            Some(machine_id),
            reason,
            settings,
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(id.map(|waiting| waiting.id))
    }

    /// Cancels a waiting or running job. A worker running it loses its lease: its heartbeat and
    /// its completion are refused.
    pub async fn cancel_job(&self, job_id: i64, now: i64) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query!(
            r#"UPDATE jobs SET state = 'cancelled', finished_at = ?, lease_id = NULL,
                               lease_expires_at = NULL, error = 'cancelled'
               WHERE id = ? AND state IN ('queued', 'running')"#,
            now,
            job_id
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if updated == 0 {
            self.job(job_id).await?;
            return Err(DbError::Conflict(format!(
                "job {job_id} has already finished; retry it instead"
            )));
        }
        Ok(())
    }

    /// Queues a finished job's commit again on the same machine; returns the new job's id.
    pub async fn retry_job(
        &self,
        job_id: i64,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<i64, DbError> {
        let mut tx = self.begin_write().await?;
        let job = sqlx::query!(
            "SELECT repository_id, commit_id, machine_id, state, reason, comparison_id FROM jobs WHERE id = ?",
            job_id
        )
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| DbError::NotFound(format!("job {job_id}")))?;
        if job.state == "queued" || job.state == "running" {
            return Err(DbError::Conflict(format!(
                "job {job_id} is still {}; cancel it first",
                job.state
            )));
        }
        if let Some(comparison_id) = job.comparison_id {
            // A comparison is measured again whole, on whichever machine asks first; a
            // confirmation's only on the machine whose change it confirms.
            let (reason, machine_id) = match job.reason.as_str() {
                "pull" => (JobReason::Pull, None),
                "confirm" => (JobReason::Confirm, job.machine_id),
                _ => (JobReason::Try, None),
            };
            let target = super::comparisons::ComparisonJobTarget {
                repository_id: job.repository_id,
                head_id: job.commit_id,
                comparison_id,
                machine_id,
            };
            let id =
                super::comparisons::queue_comparison_job(&mut tx, target, reason, settings, now)
                    .await?;
            tx.commit().await?;
            return Ok(id);
        }
        let id = queue_one(
            &mut tx,
            job.repository_id,
            job.commit_id,
            job.machine_id,
            JobReason::Manual,
            settings,
            now,
        )
        .await?
        .ok_or_else(|| DbError::Conflict(format!("job {job_id}'s commit is queued already")))?;
        tx.commit().await?;
        Ok(id.id)
    }

    /// Hands the next job for `machine_id` to its worker under a fresh lease held by the token
    /// `token_id`, after returning expired leases to the queue. Only jobs of repositories
    /// whose required labels are among `labels` (what the token may claim with) are handed
    /// out: a job queued for this machine under labels it no longer holds waits.
    pub async fn claim_job(
        &self,
        machine_id: i64,
        token_id: i64,
        labels: &str,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<Option<ClaimedJob>, DbError> {
        self.expire_leases(now).await?;
        let mut tx = self.begin_write().await?;
        // Confirmations take turns with everything else: after one, any other job waiting
        // for this machine goes first, history included, so that a row of confirmations
        // cannot hold a backfill back for their whole length.
        let last = sqlx::query_scalar!(
            "SELECT last_claim_reason FROM machines WHERE id = ?",
            machine_id
        )
        .fetch_optional(&mut *tx)
        .await?
        .flatten();
        let confirm_waits = last.as_deref() == Some(JobReason::Confirm.as_str());
        // Jobs this machine may not run stay queued; looking past a bounded number of them
        // keeps a claim cheap however long the queue is.
        let candidates = sqlx::query!(
            r#"SELECT j.id AS "id!", j.reason, r.name, r.url, r.suites_toml, r.machine_labels,
                      r.network_off AS "network_off: bool", c.sha,
                      b.sha AS "base_sha?", k.rounds AS "rounds?", k.head_ref, k.budget_seconds,
                      k.selection
               FROM jobs j JOIN repositories r ON r.id = j.repository_id
                           JOIN commits c ON c.id = j.commit_id
                           LEFT JOIN comparisons k ON k.id = j.comparison_id
                           LEFT JOIN commits b ON b.id = k.base_id
               WHERE j.state = 'queued' AND (j.machine_id = ?1 OR j.machine_id IS NULL)
               ORDER BY ?2 AND j.reason = 'confirm', j.priority DESC, j.id LIMIT 256"#,
            machine_id,
            confirm_waits
        )
        .fetch_all(&mut *tx)
        .await?;
        let Some(next) = candidates
            .into_iter()
            .find(|job| labels_satisfy(&job.machine_labels, labels))
        else {
            return Ok(None);
        };
        let lease_id = random_secret("");
        let expires = now + settings.lease_seconds;
        sqlx::query!(
            r#"UPDATE jobs SET state = 'running', machine_id = ?, lease_id = ?, lease_expires_at = ?,
                               attempts = attempts + 1, started_at = ?, phase = NULL,
                               leased_token_id = ?
               WHERE id = ?"#,
            machine_id,
            lease_id,
            expires,
            now,
            token_id,
            next.id
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query!(
            "UPDATE machines SET last_claim_reason = ? WHERE id = ?",
            next.reason,
            machine_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let commit = CommitSha::parse(&next.sha)
            .map_err(|e| DbError::Invalid(format!("stored commit is corrupt: {e}")))?;
        let comparison = match (next.base_sha, next.rounds) {
            (Some(base), Some(rounds)) => Some(ComparisonSpec {
                base: CommitSha::parse(&base)
                    .map_err(|e| DbError::Invalid(format!("stored commit is corrupt: {e}")))?,
                rounds: rounds as u32,
                budget_seconds: next.budget_seconds.map(|b| b as u32),
                head_ref: next.head_ref,
                selection: match next.selection {
                    Some(json) => serde_json::from_str(&json).map_err(|e| {
                        DbError::Invalid(format!("stored comparison selection is corrupt: {e}"))
                    })?,
                    None => Vec::new(),
                },
            }),
            _ => None,
        };
        let credential = self.git_credential_named(&next.name).await?;
        Ok(Some(ClaimedJob {
            id: next.id,
            lease_id,
            lease_seconds: settings.lease_seconds,
            repository: next.name,
            url: next.url,
            commit,
            stored_suites: next.suites_toml,
            credential,
            network: !next.network_off,
            comparison,
        }))
    }

    /// Renews a job's lease and records what it is doing (`phase`, when the worker says).
    /// Refused (Conflict) when the lease is no longer this worker's.
    pub async fn heartbeat(
        &self,
        job_id: i64,
        lease_id: &str,
        phase: Option<&str>,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<(), DbError> {
        let expires = now + settings.lease_seconds;
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query!(
            r#"UPDATE jobs SET lease_expires_at = ?, phase = coalesce(?, phase)
               WHERE id = ? AND state = 'running' AND lease_id = ? AND lease_expires_at >= ?"#,
            expires,
            phase,
            job_id,
            lease_id,
            now
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        // The machines page shows the last heartbeat, also of a worker busy with a long job.
        sqlx::query!(
            "UPDATE machines SET last_seen_at = ? WHERE id = (SELECT machine_id FROM jobs WHERE id = ?)",
            now,
            job_id
        )
        .execute(&mut *tx)
        .await?;
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
        let mut rows = sqlx::query_as!(
            JobRow,
            r#"SELECT j.id, r.name AS repository, c.sha, c.message, m.fingerprint AS "machine?",
                      j.state, j.reason, j.attempts, j.created_at, j.started_at, j.finished_at, j.error, j.log_tail,
                      j.phase, NULL AS "cause?: String"
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
        .await?;
        for row in rows.iter_mut().filter(|r| r.state == "failed") {
            if let (Some(error), Some(log)) = (&row.error, &row.log_tail) {
                row.cause = crate::failure_cause::failure_cause(error, log);
            }
        }
        Ok(rows)
    }
}

/// Queues one (commit, machine) job unless one is waiting already (returned instead) or, for
/// reasons measured once per machine, the machine has measured it or been given it (`None`).
/// A backfill asked for by hand gives a commit whose jobs on the machine all failed another.
async fn queue_one(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    repository_id: i64,
    commit_id: i64,
    machine: Option<i64>,
    reason: JobReason,
    settings: LeaseSettings,
    now: i64,
) -> Result<Option<Waiting>, DbError> {
    // A job not yet bound to a machine (queued before any registered) counts for every one.
    let active = sqlx::query_scalar!(
        r#"SELECT id AS "id!" FROM jobs WHERE commit_id = ?1 AND (machine_id IS ?2 OR machine_id IS NULL)
           AND state IN ('queued', 'running') AND comparison_id IS NULL
           ORDER BY machine_id IS NULL LIMIT 1"#,
        commit_id,
        machine
    )
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(id) = active {
        // A bisection needs the commit sooner than the backfill that queued it.
        let (reason_name, priority) = (reason.as_str(), reason.priority());
        sqlx::query!(
            "UPDATE jobs SET priority = ?, reason = ? WHERE id = ? AND state = 'queued' AND priority < ?",
            priority,
            reason_name,
            id,
            priority
        )
        .execute(&mut **tx)
        .await?;
        return Ok(Some(Waiting {
            id,
            after_failure: false,
        }));
    }
    let mut after_failure = false;
    if reason.once_per_machine() {
        let seen = sqlx::query!(
            r#"SELECT EXISTS (SELECT 1 FROM jobs WHERE commit_id = ?1 AND machine_id IS ?2
                                AND state = 'succeeded' AND comparison_id IS NULL)
                      OR EXISTS (SELECT 1 FROM runs WHERE commit_id = ?1 AND machine_id IS ?2)
                      AS "measured!: bool",
                      EXISTS (SELECT 1 FROM jobs WHERE commit_id = ?1 AND machine_id IS ?2
                                AND state = 'failed' AND comparison_id IS NULL)
                      AS "failed!: bool" "#,
            commit_id,
            machine
        )
        .fetch_one(&mut **tx)
        .await?;
        if seen.measured || (seen.failed && !reason.retries_failures()) {
            return Ok(None);
        }
        after_failure = seen.failed;
    }
    let (reason_name, priority) = (reason.as_str(), reason.priority());
    let id = sqlx::query_scalar!(
        r#"INSERT INTO jobs (repository_id, commit_id, machine_id, state, priority, reason,
                             max_attempts, created_at)
           VALUES (?, ?, ?, 'queued', ?, ?, ?, ?) RETURNING id AS "id!" "#,
        repository_id,
        commit_id,
        machine,
        priority,
        reason_name,
        settings.max_attempts,
        now
    )
    .fetch_one(&mut **tx)
    .await?;
    Ok(Some(Waiting { id, after_failure }))
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
