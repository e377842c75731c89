//! Comparison runs: a head (a try run's ref, a pull request's head) measured against its
//! merge base, interleaved on one machine by one job. Their results live in `comparisons`,
//! never in `runs`/`measurements`, so no series of the tracked branch ever sees them.

use super::jobs::{JobReason, LeaseSettings, lease_lost};
use super::{Db, DbError};

/// Fewest and most rounds of base/head a comparison may ask for.
pub const COMPARISON_ROUNDS: std::ops::RangeInclusive<i64> = 1..=ADAPTIVE_ROUNDS;

/// Rounds of a fixed comparison when nobody says: three alternations are enough for drift to
/// fall on both sides, and give the verdict three runs of each side to measure noise with.
pub const DEFAULT_ROUNDS: i64 = 3;

/// Most rounds of an adaptive comparison: the horizon its sequential test spends its error
/// rate over (see `kymo_core::stats::sequential`). The budget, not this, should end the rounds
/// of a benchmark that is hard to decide: beside a CPU hog, `adler2`'s 5 % slowdown was still
/// undecided after 20 rounds (about 2.5 minutes of a 10-minute budget) in 2 runs of 10, its
/// rounds 5-25 % apart; resampled from those rounds, 40 rounds find it about 80 times in 100
/// against 54 at 20, at the same false-alarm bound (docs/VERDICTS.md, "Fifth pass").
pub const ADAPTIVE_ROUNDS: i64 = 40;

/// Budgets a comparison may be given, in seconds.
pub const BUDGET_SECONDS: std::ops::RangeInclusive<i64> = 10..=86_400;

/// Checks a comparison budget: `seconds` when within [`BUDGET_SECONDS`], else why not.
pub fn checked_budget(seconds: i64) -> Result<i64, DbError> {
    if BUDGET_SECONDS.contains(&seconds) {
        return Ok(seconds);
    }
    Err(DbError::Invalid(format!(
        "a budget of {seconds} s: use {} s to {} s",
        BUDGET_SECONDS.start(),
        BUDGET_SECONDS.end()
    )))
}

/// A repository's budget for its try runs and pull requests until it sets one: ten minutes of
/// rounds, enough for 20 rounds of a suite that runs for 15 seconds a side (40 of one of 7).
pub const DEFAULT_BUDGET_SECONDS: i64 = 600;

/// Where a comparison came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComparisonOrigin {
    /// `kymo try`.
    Try,
    /// A forge's pull or merge request.
    Pull,
    /// The confirmation of a change point found on the tracked branch.
    Confirm,
}

impl ComparisonOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            ComparisonOrigin::Try => "try",
            ComparisonOrigin::Pull => "pull",
            ComparisonOrigin::Confirm => "confirm",
        }
    }

    /// What the `origin` column holds. Its CHECK predates confirmations, and SQLite cannot
    /// widen a CHECK without rebuilding the table, which jobs cascade from: a confirmation's
    /// comparison is stored as `try`, and reads tell it apart by its job's reason (`confirm`)
    /// or its confirmation row (a moved finding's confirmation row is gone, its job is not).
    fn stored(self) -> &'static str {
        match self {
            ComparisonOrigin::Confirm => ComparisonOrigin::Try.as_str(),
            other => other.as_str(),
        }
    }

    fn job_reason(self) -> JobReason {
        match self {
            ComparisonOrigin::Try => JobReason::Try,
            ComparisonOrigin::Pull => JobReason::Pull,
            ComparisonOrigin::Confirm => JobReason::Confirm,
        }
    }
}

/// A comparison to queue.
#[derive(Debug, Clone)]
pub struct NewComparison<'a> {
    pub repository_id: i64,
    pub origin: ComparisonOrigin,
    pub label: &'a str,
    pub base_id: i64,
    pub head_id: i64,
    /// How the base was chosen, for the reader: `merge-base of main`, `--base v1.2`.
    pub baseline: &'a str,
    pub rounds: i64,
    /// Seconds its rounds may take: adaptive, `rounds` at most; `None`: exactly `rounds`.
    pub budget_seconds: Option<i64>,
    /// `refs/pull/N/head` (or GitLab's `refs/merge-requests/N/head`) for a head from a fork.
    pub head_ref: Option<&'a str>,
}

/// A comparison as the API and pages show it; its state is its latest job's.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ComparisonRow {
    pub id: i64,
    pub repository: String,
    /// `try`, `pull` or `confirm`.
    pub origin: String,
    pub label: String,
    pub base: String,
    pub head: String,
    pub baseline: String,
    /// Rounds asked for; of an adaptive comparison, the most it may run.
    pub rounds: i64,
    /// Seconds its rounds may take when it is adaptive (stops once every benchmark is
    /// decided); `None`: it runs exactly `rounds` rounds.
    pub budget_seconds: Option<i64>,
    /// queued, running, succeeded, failed or cancelled.
    pub state: String,
    /// What the running job is doing, as its worker last said.
    pub phase: Option<String>,
    pub error: Option<String>,
    /// The fingerprint of the machine that measured both sides.
    pub machine: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    /// How both sides were measured: `interleaved` by a kymo worker, or in CI: `same-job`
    /// (the CI job uploaded both) or `stored-base` (the head against the base's stored results
    /// on the same machine fingerprint).
    #[serde(default = "interleaved")]
    pub measured: String,
}

fn interleaved() -> String {
    MeasuredBy::Interleaved.as_str().to_owned()
}

/// How a comparison's two sides were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeasuredBy {
    /// By a kymo worker, alternately on one machine.
    Interleaved,
    /// By one CI job on one runner, both uploaded.
    SameJob,
    /// The head by CI; the base's results were stored already, from the same machine
    /// fingerprint.
    StoredBase,
}

impl MeasuredBy {
    pub fn as_str(self) -> &'static str {
        match self {
            MeasuredBy::Interleaved => "interleaved",
            MeasuredBy::SameJob => "same-job",
            MeasuredBy::StoredBase => "stored-base",
        }
    }
}

/// A comparison's measured rounds and how they are judged, as stored with it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredComparison {
    pub rounds: i64,
    pub budget_seconds: Option<i64>,
    /// What it measures (empty: everything), with the changes a confirmation claims.
    pub selection: Vec<crate::protocol::SuiteSelection>,
    /// Its measured rounds (JSON, as its worker sent them), once it has them.
    pub results: Option<String>,
}

/// What a worker needs beyond the head commit to run a comparison job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComparisonJob {
    pub comparison_id: i64,
    pub base_sha: String,
    pub rounds: i64,
    pub budget_seconds: Option<i64>,
}

impl Db {
    /// Stores a comparison and queues its one job (on whichever machine of the repository's
    /// labels asks first); returns the comparison's and the job's ids.
    pub async fn create_comparison(
        &self,
        new: &NewComparison<'_>,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<(i64, i64), DbError> {
        let mut tx = self.begin_write().await?;
        let ids = insert_comparison(&mut tx, new, None, settings, now).await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// How long the rounds of a repository's try runs and pull requests may take, in seconds.
    pub async fn comparison_budget(&self, repository_id: i64) -> Result<i64, DbError> {
        sqlx::query_scalar!(
            "SELECT comparison_budget_seconds FROM repositories WHERE id = ?",
            repository_id
        )
        .fetch_optional(&self.reader)
        .await?
        .ok_or_else(|| DbError::NotFound(format!("repository {repository_id}")))
    }

    /// Sets that budget ([`BUDGET_SECONDS`]; anything else is refused and changes nothing).
    pub async fn set_comparison_budget(
        &self,
        repository_id: i64,
        seconds: i64,
    ) -> Result<(), DbError> {
        checked_budget(seconds)?;
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            "UPDATE repositories SET comparison_budget_seconds = ? WHERE id = ?",
            seconds,
            repository_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// One comparison of a repository.
    pub async fn comparison(&self, repository_id: i64, id: i64) -> Result<ComparisonRow, DbError> {
        self.comparison_rows(repository_id, Some(id), 1)
            .await?
            .pop()
            .ok_or_else(|| DbError::NotFound(format!("comparison {id}")))
    }

    /// A repository's latest comparisons, newest first.
    pub async fn comparisons(
        &self,
        repository_id: i64,
        limit: i64,
    ) -> Result<Vec<ComparisonRow>, DbError> {
        self.comparison_rows(repository_id, None, limit).await
    }

    async fn comparison_rows(
        &self,
        repository_id: i64,
        id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<ComparisonRow>, DbError> {
        Ok(sqlx::query_as!(
            ComparisonRow,
            r#"SELECT k.id, r.name AS repository,
                      CASE WHEN j.reason = 'confirm' OR EXISTS (SELECT 1 FROM confirmations f
                                        WHERE f.comparison_id = k.id OR f.earlier_comparison_id = k.id)
                           THEN 'confirm' ELSE k.origin END AS "origin!: String", k.label, b.sha AS base, h.sha AS head,
                      k.baseline, k.rounds, k.budget_seconds,
                      coalesce(j.state, CASE WHEN k.results IS NOT NULL THEN 'succeeded' ELSE 'cancelled' END)
                          AS "state!: String",
                      j.phase, j.error, m.fingerprint AS "machine?", k.created_at, k.finished_at,
                      k.measured
               FROM comparisons k JOIN repositories r ON r.id = k.repository_id
                    JOIN commits b ON b.id = k.base_id JOIN commits h ON h.id = k.head_id
                    LEFT JOIN jobs j ON j.id = (SELECT max(id) FROM jobs WHERE comparison_id = k.id)
                    LEFT JOIN machines m ON m.id = coalesce(k.machine_id, j.machine_id)
               WHERE k.repository_id = ?1 AND (?2 IS NULL OR k.id = ?2)
               ORDER BY k.id DESC LIMIT ?3"#,
            repository_id,
            id,
            limit
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// A comparison's most rounds, budget (see [`NewComparison`]), selection and measured
    /// rounds, in one read; `None` for an unknown id.
    pub async fn stored_comparison(&self, id: i64) -> Result<Option<StoredComparison>, DbError> {
        let Some(k) = sqlx::query!(
            "SELECT rounds, budget_seconds, selection, results FROM comparisons WHERE id = ?",
            id
        )
        .fetch_optional(&self.reader)
        .await?
        else {
            return Ok(None);
        };
        Ok(Some(StoredComparison {
            rounds: k.rounds,
            budget_seconds: k.budget_seconds,
            selection: super::confirmations::read_selection(k.selection.as_deref())?,
            results: k.results,
        }))
    }

    /// The comparison a job measures, if it measures one.
    pub async fn job_comparison(&self, job_id: i64) -> Result<Option<ComparisonJob>, DbError> {
        Ok(sqlx::query_as!(
            ComparisonJob,
            r#"SELECT k.id AS comparison_id, b.sha AS base_sha, k.rounds, k.budget_seconds
               FROM jobs j JOIN comparisons k ON k.id = j.comparison_id
                           JOIN commits b ON b.id = k.base_id
               WHERE j.id = ?"#,
            job_id
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// Completes a comparison job with its rounds (`results`, JSON the caller validated).
    /// Refused when the lease is no longer the caller's.
    pub async fn complete_comparison_job(
        &self,
        job_id: i64,
        lease_id: &str,
        results: &str,
        log: &str,
        now: i64,
    ) -> Result<i64, DbError> {
        let mut tx = self.begin_write().await?;
        let job = sqlx::query!(
            r#"UPDATE jobs SET state = 'succeeded', finished_at = ?, lease_id = NULL,
                               lease_expires_at = NULL
               WHERE id = ? AND state = 'running' AND lease_id = ? AND comparison_id IS NOT NULL
               RETURNING comparison_id AS "comparison_id!", machine_id"#,
            now,
            job_id,
            lease_id
        )
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| lease_lost(job_id))?;
        sqlx::query!(
            "UPDATE comparisons SET results = ?, log = ?, machine_id = ?, finished_at = ? WHERE id = ?",
            results,
            log,
            job.machine_id,
            now,
            job.comparison_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(job.comparison_id)
    }
}

/// Inserts a comparison (of `pull_request_id`, when it measures one) and its job.
pub(super) async fn insert_comparison(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    new: &NewComparison<'_>,
    pull_request_id: Option<i64>,
    settings: LeaseSettings,
    now: i64,
) -> Result<(i64, i64), DbError> {
    insert_comparison_row(tx, new, pull_request_id, None, settings, now).await
}

/// Inserts a comparison whose job only `machine_id` may run (a confirmation re-measures on
/// the machine that found the change).
pub(super) async fn insert_comparison_on(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    new: &NewComparison<'_>,
    machine_id: i64,
    settings: LeaseSettings,
    now: i64,
) -> Result<(i64, i64), DbError> {
    insert_comparison_row(tx, new, None, Some(machine_id), settings, now).await
}

async fn insert_comparison_row(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    new: &NewComparison<'_>,
    pull_request_id: Option<i64>,
    machine_id: Option<i64>,
    settings: LeaseSettings,
    now: i64,
) -> Result<(i64, i64), DbError> {
    if !COMPARISON_ROUNDS.contains(&new.rounds) {
        return Err(DbError::Invalid(format!(
            "{} rounds: use {} to {}",
            new.rounds,
            COMPARISON_ROUNDS.start(),
            COMPARISON_ROUNDS.end()
        )));
    }
    new.budget_seconds.map(checked_budget).transpose()?;
    let origin = new.origin.stored();
    let id = sqlx::query_scalar!(
        r#"INSERT INTO comparisons (repository_id, origin, label, base_id, head_id, baseline,
                                    rounds, created_at, pull_request_id, head_ref, budget_seconds)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id AS "id!" "#,
        new.repository_id,
        origin,
        new.label,
        new.base_id,
        new.head_id,
        new.baseline,
        new.rounds,
        now,
        pull_request_id,
        new.head_ref,
        new.budget_seconds
    )
    .fetch_one(&mut **tx)
    .await?;
    let job = queue_comparison_job(
        tx,
        ComparisonJobTarget {
            repository_id: new.repository_id,
            head_id: new.head_id,
            comparison_id: id,
            machine_id,
        },
        new.origin.job_reason(),
        settings,
        now,
    )
    .await?;
    Ok((id, job))
}

/// Where a comparison's job runs: the head commit, and the one machine allowed (any when
/// `None`).
pub(super) struct ComparisonJobTarget {
    pub repository_id: i64,
    pub head_id: i64,
    pub comparison_id: i64,
    pub machine_id: Option<i64>,
}

/// Inserts the job of a comparison: never merged with another job of its head commit, which
/// measures something else (the commit for history, or another comparison).
pub(super) async fn queue_comparison_job(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    target: ComparisonJobTarget,
    reason: JobReason,
    settings: LeaseSettings,
    now: i64,
) -> Result<i64, DbError> {
    let (reason_name, priority) = (reason.as_str(), reason.priority());
    let ComparisonJobTarget {
        repository_id,
        head_id,
        comparison_id,
        machine_id,
    } = target;
    Ok(sqlx::query_scalar!(
        r#"INSERT INTO jobs (repository_id, commit_id, machine_id, state, priority, reason,
                             max_attempts, created_at, comparison_id)
           VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?) RETURNING id AS "id!" "#,
        repository_id,
        head_id,
        machine_id,
        priority,
        reason_name,
        settings.max_attempts,
        now,
        comparison_id
    )
    .fetch_one(&mut **tx)
    .await?)
}
