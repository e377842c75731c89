//! Confirmations: a change point measured again before it is announced. The re-measurement is
//! a comparison job (base: the last commit of the old level, head: the suspect) pinned to the
//! machine that found the change. It measures only what its change points need: their suites,
//! and of those their benchmarks (see [`SuiteSelection`]), and only until they are decided (it
//! is adaptive). Change points of the same commit pair on that machine share one comparison,
//! widened to measure each of them while no worker has claimed it; one that moves to another
//! commit gives its place in the queue up.

use super::comparisons::{NewComparison, insert_comparison_on};
use super::jobs::LeaseSettings;
use super::{Db, DbError};
use crate::protocol::{Claim, SuiteSelection};

/// A confirmation as pages and the API show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ConfirmationView {
    /// confirming, confirmed, refuted or unconfirmed.
    pub state: String,
    /// `interleaved`, `instructions`, or why nothing was re-run: `no-worker`, `no-baseline`,
    /// `failed`.
    pub evidence: String,
    /// The comparison that measured (or measures) both commits again.
    pub comparison_id: Option<i64>,
    pub earlier_comparison_id: Option<i64>,
    pub rounds_run: i64,
    /// The change measured again, or the change of instruction counts, in percent.
    pub change_pct: Option<f64>,
    pub p_value: Option<f64>,
    pub note: String,
    pub created_at: i64,
    pub decided_at: Option<i64>,
}

/// What deciding how to confirm a change point needs to know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmationTarget {
    pub regression_id: i64,
    pub repository_id: i64,
    /// `regression` or `improvement`.
    pub kind: String,
    pub benchmark_id: i64,
    /// The benchmark's key (name and parameters), as a comparison's verdict names it.
    pub benchmark: String,
    /// The suite that measures it: all a re-measurement needs to run.
    pub suite: String,
    pub metric: String,
    pub direction: String,
    pub change_pct: f64,
    pub machine_id: i64,
    /// Whether the machine runs a worker (one known only from uploads cannot re-run).
    pub runs_worker: bool,
    pub commit_id: i64,
    pub commit_sha: String,
    pub previous_id: Option<i64>,
    /// The repository's setting: confirm before announcing.
    pub confirm_changes: bool,
    /// Its confirmation, if one was started.
    pub confirmation: Option<String>,
    /// Whether the latest analysis still finds it.
    pub active: bool,
}

impl ConfirmationTarget {
    /// What its re-measurement measures: its benchmark (every parameter of that name) in its
    /// suite, until the verdict of its metric is decided.
    pub fn selection(&self) -> SuiteSelection {
        let name = self.benchmark.split('{').next().unwrap_or_default();
        SuiteSelection {
            suite: self.suite.clone(),
            benchmarks: vec![name.to_owned()],
            metrics: vec![self.metric.clone()],
            claims: vec![Claim {
                benchmark: self.benchmark.clone(),
                metric: self.metric.clone(),
                change_pct: self.change_pct,
            }],
        }
    }
}

/// How a confirmation ends.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmationDecision<'a> {
    /// confirmed, refuted or unconfirmed.
    pub state: &'a str,
    pub evidence: &'a str,
    pub rounds_run: i64,
    pub change_pct: Option<f64>,
    pub p_value: Option<f64>,
    pub note: &'a str,
}

/// A confirmation waiting for the comparison it shares with others.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingConfirmation {
    pub regression_id: i64,
    pub comparison_id: Option<i64>,
    pub earlier_comparison_id: Option<i64>,
    pub rounds_run: i64,
    /// The state of the comparison's latest job.
    pub job_state: Option<String>,
    /// When the comparison it waits for was queued.
    pub queued_at: Option<i64>,
}

/// Who closes a refuted change point, in its triage record.
pub const REFUTED_BY: &str = "kymo confirmation";

impl Db {
    /// Whether a repository confirms changes before announcing them.
    pub async fn confirm_changes(&self, repository_id: i64) -> Result<bool, DbError> {
        sqlx::query_scalar!(
            r#"SELECT confirm_changes AS "on: bool" FROM repositories WHERE id = ?"#,
            repository_id
        )
        .fetch_optional(&self.reader)
        .await?
        .ok_or_else(|| DbError::NotFound(format!("repository {repository_id}")))
    }

    pub async fn set_confirm_changes(&self, repository_id: i64, on: bool) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            "UPDATE repositories SET confirm_changes = ? WHERE id = ?",
            on,
            repository_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// What confirming a change point needs; `None` for an unknown id.
    pub async fn confirmation_target(
        &self,
        regression_id: i64,
    ) -> Result<Option<ConfirmationTarget>, DbError> {
        Ok(sqlx::query_as!(
            ConfirmationTarget,
            r#"SELECT g.id AS regression_id, b.repository_id, g.kind, b.id AS benchmark_id,
                      b.name AS benchmark, b.suite, s.metric, s.direction, g.change_pct, s.machine_id,
                      m.runs_worker AS "runs_worker: bool", g.commit_id, c.sha AS commit_sha,
                      g.previous_id, r.confirm_changes AS "confirm_changes: bool",
                      f.state AS "confirmation?", g.active AS "active: bool"
               FROM regressions g JOIN series s ON s.id = g.series_id
                    JOIN benchmarks b ON b.id = s.benchmark_id
                    JOIN repositories r ON r.id = b.repository_id
                    JOIN machines m ON m.id = s.machine_id
                    JOIN commits c ON c.id = g.commit_id
                    LEFT JOIN confirmations f ON f.regression_id = g.id
               WHERE g.id = ?"#,
            regression_id
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// The instruction counts of a benchmark on a machine at one commit, over all its runs
    /// (empty when the benchmark reports none).
    pub async fn instructions_at(
        &self,
        benchmark_id: i64,
        machine_id: i64,
        commit_id: i64,
    ) -> Result<Vec<f64>, DbError> {
        match self.instructions_series(benchmark_id, machine_id).await? {
            Some(id) => Ok(self.samples_at(id, commit_id).await?.concat()),
            None => Ok(Vec::new()),
        }
    }

    /// The instruction counts of a benchmark on a machine at the last `limit` commits before
    /// history position `before` (the suspect's), oldest first: how far counts move while the
    /// code stays the same.
    pub async fn instructions_before(
        &self,
        benchmark_id: i64,
        machine_id: i64,
        before: i64,
        limit: i64,
    ) -> Result<Vec<f64>, DbError> {
        let Some(id) = self.instructions_series(benchmark_id, machine_id).await? else {
            return Ok(Vec::new());
        };
        let values = self.series_values_before(id, Some(before), limit).await?;
        Ok(values.into_iter().map(|(_, value)| value).collect())
    }

    async fn instructions_series(
        &self,
        benchmark_id: i64,
        machine_id: i64,
    ) -> Result<Option<i64>, DbError> {
        Ok(sqlx::query_scalar!(
            "SELECT id FROM series WHERE benchmark_id = ? AND machine_id = ? AND metric = 'instructions'",
            benchmark_id,
            machine_id
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// Starts confirming a change point by re-measuring `base` and `head` on its machine, in
    /// the comparison every finding of that pair there shares: the latest one that measures
    /// (or will measure) its benchmark, measured already or not, else one not yet claimed,
    /// widened to measure it too, else a new adaptive one of at most `rounds` rounds within
    /// `budget_seconds`. Returns the comparison's id and whether its rounds are in already.
    #[expect(
        clippy::too_many_arguments,
        reason = "the confirmation, its pair, its plan, the lease settings and the clock"
    )]
    pub async fn start_confirmation(
        &self,
        target: &ConfirmationTarget,
        base_id: i64,
        rounds: i64,
        budget_seconds: i64,
        note: &str,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<(i64, bool), DbError> {
        let mut tx = self.begin_write().await?;
        let wanted = target.selection();
        let known = sqlx::query!(
            r#"SELECT k.id AS "id!", k.results IS NOT NULL AS "measured!: bool",
                      j.state AS job_state, k.selection
               FROM comparisons k JOIN confirmations f
                        ON f.comparison_id = k.id OR f.earlier_comparison_id = k.id
                    JOIN jobs j ON j.comparison_id = k.id
               WHERE k.base_id = ? AND k.head_id = ? AND j.machine_id = ?
                     AND (k.results IS NOT NULL OR j.state IN ('queued', 'running'))
               GROUP BY k.id ORDER BY k.id DESC"#,
            base_id,
            target.commit_id,
            target.machine_id
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut covering = None;
        let mut widenable = None;
        for k in known {
            let selection = read_selection(k.selection.as_deref())?;
            if SuiteSelection::covers(&selection, &wanted) {
                // Not yet claimed by a worker, it takes this change's claim too: its rounds
                // may then stop once they rule this change out.
                if !k.measured && k.job_state == "queued" {
                    widen_selection(&mut tx, k.id, selection, &wanted).await?;
                }
                covering = Some((k.id, k.measured));
                break;
            }
            if !k.measured && k.job_state == "queued" && widenable.is_none() {
                widenable = Some((k.id, selection));
            }
        }
        let (comparison, measured) = match (covering, widenable) {
            (Some(known), _) => known,
            (None, Some((id, selection))) => {
                widen_selection(&mut tx, id, selection, &wanted).await?;
                (id, false)
            }
            (None, None) => {
                let plan = (rounds, budget_seconds);
                let id = new_comparison(&mut tx, target, base_id, plan, settings, now).await?;
                (id, false)
            }
        };
        sqlx::query!(
            r#"INSERT INTO confirmations (regression_id, state, evidence, comparison_id, note,
                                          created_at)
               VALUES (?, 'confirming', 'interleaved', ?, ?, ?)
               ON CONFLICT (regression_id) DO NOTHING"#,
            target.regression_id,
            comparison,
            note,
            now
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((comparison, measured))
    }

    /// Ends a confirmation. A refuted change point is closed as a false positive (by
    /// [`REFUTED_BY`]) unless someone triaged it meanwhile; only its confirmation says why.
    /// A new confirmation row is created when there was none (decided without re-running).
    pub async fn decide_confirmation(
        &self,
        regression_id: i64,
        decision: &ConfirmationDecision<'_>,
        now: i64,
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            r#"INSERT INTO confirmations (regression_id, state, evidence, rounds_run, change_pct,
                                          p_value, note, created_at, decided_at)
               VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
               ON CONFLICT (regression_id) DO UPDATE SET state = ?2, evidence = ?3,
                   rounds_run = ?4, change_pct = ?5, p_value = ?6, note = ?7, decided_at = ?8"#,
            regression_id,
            decision.state,
            decision.evidence,
            decision.rounds_run,
            decision.change_pct,
            decision.p_value,
            decision.note,
            now
        )
        .execute(&mut *tx)
        .await?;
        if decision.state == "refuted" {
            sqlx::query!(
                r#"UPDATE regressions SET state = 'false_positive', state_by = ?, state_at = ?,
                                          updated_at = ?
                   WHERE id = ? AND state = 'open' AND state_by IS NULL"#,
                REFUTED_BY,
                now,
                now,
                regression_id
            )
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A change point's confirmation, if it has one.
    pub async fn confirmation_of(
        &self,
        regression_id: i64,
    ) -> Result<Option<ConfirmationView>, DbError> {
        Ok(sqlx::query_as!(
            ConfirmationView,
            r#"SELECT state, evidence, comparison_id, earlier_comparison_id, rounds_run,
                      change_pct, p_value, note, created_at, decided_at
               FROM confirmations WHERE regression_id = ?"#,
            regression_id
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// The confirmations of a repository still waiting, with the state of the job of the
    /// comparison each waits for; of one comparison only when `comparison_id` is given.
    pub async fn pending_confirmations(
        &self,
        repository_id: Option<i64>,
        comparison_id: Option<i64>,
    ) -> Result<Vec<PendingConfirmation>, DbError> {
        Ok(sqlx::query_as!(
            PendingConfirmation,
            r#"SELECT f.regression_id, f.comparison_id, f.earlier_comparison_id, f.rounds_run,
                      (SELECT j.state FROM jobs j WHERE j.comparison_id = f.comparison_id
                       ORDER BY j.id DESC LIMIT 1) AS "job_state?: String",
                      (SELECT k.created_at FROM comparisons k WHERE k.id = f.comparison_id) AS "queued_at?: i64"
               FROM confirmations f JOIN regressions g ON g.id = f.regression_id
                    JOIN series s ON s.id = g.series_id JOIN benchmarks b ON b.id = s.benchmark_id
               WHERE f.state = 'confirming' AND (?1 IS NULL OR b.repository_id = ?1)
                     AND (?2 IS NULL OR f.comparison_id = ?2)
               ORDER BY f.regression_id"#,
            repository_id,
            comparison_id
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// How many confirmations of a repository wait for a re-measurement.
    pub async fn confirmations_waiting(&self, repository_id: i64) -> Result<i64, DbError> {
        Ok(self
            .pending_confirmations(Some(repository_id), None)
            .await?
            .len() as i64)
    }
}

/// Forgets the confirmation of a change point that moved to another commit (what re-measured
/// the old pair says nothing about the new one), and cancels its re-measurement when no other
/// finding waits for it: a moved finding's confirmation does not keep its place in the queue.
pub(super) async fn forget_confirmation(
    conn: &mut sqlx::SqliteConnection,
    regression_id: i64,
    now: i64,
) -> Result<(), DbError> {
    let comparison = sqlx::query_scalar!(
        "DELETE FROM confirmations WHERE regression_id = ? RETURNING comparison_id",
        regression_id
    )
    .fetch_optional(&mut *conn)
    .await?
    .flatten();
    let Some(comparison) = comparison else {
        return Ok(());
    };
    sqlx::query!(
        r#"UPDATE jobs SET state = 'cancelled', finished_at = ?1, lease_id = NULL,
                           lease_expires_at = NULL,
                           error = 'cancelled: the change it confirms moved to another commit'
           WHERE comparison_id = ?2 AND state IN ('queued', 'running')
             AND NOT EXISTS (SELECT 1 FROM confirmations f
                             WHERE f.comparison_id = ?2 AND f.state = 'confirming')"#,
        now,
        comparison
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A new comparison re-measuring `base` against the target's commit on its machine,
/// measuring only the target's benchmark, adaptive: at most `plan.0` rounds within `plan.1`
/// seconds.
async fn new_comparison(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    target: &ConfirmationTarget,
    base_id: i64,
    (rounds, budget_seconds): (i64, i64),
    settings: LeaseSettings,
    now: i64,
) -> Result<i64, DbError> {
    let label = format!(
        "confirmation of {}",
        &target.commit_sha[..target.commit_sha.len().min(10)]
    );
    let new = NewComparison {
        repository_id: target.repository_id,
        origin: super::ComparisonOrigin::Confirm,
        label: &label,
        base_id,
        head_id: target.commit_id,
        baseline: "the last commit of the old level",
        rounds,
        budget_seconds: Some(budget_seconds),
        head_ref: None,
    };
    let (id, _job) = insert_comparison_on(tx, &new, target.machine_id, settings, now).await?;
    widen_selection(tx, id, Vec::new(), &target.selection()).await?;
    Ok(id)
}

/// A comparison's stored selection; `None` (a try run's, a pull request's) is everything.
pub(super) fn read_selection(json: Option<&str>) -> Result<Vec<SuiteSelection>, DbError> {
    json.map_or(Ok(Vec::new()), |json| {
        serde_json::from_str(json)
            .map_err(|e| DbError::Invalid(format!("stored comparison selection is corrupt: {e}")))
    })
}

/// Stores `selection` widened by `wanted` as the selection of a comparison not yet claimed.
async fn widen_selection(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    comparison_id: i64,
    mut selection: Vec<SuiteSelection>,
    wanted: &SuiteSelection,
) -> Result<(), DbError> {
    SuiteSelection::widen(&mut selection, wanted);
    let json = serde_json::to_string(&selection)
        .map_err(|e| DbError::Invalid(format!("cannot store a selection: {e}")))?;
    sqlx::query!(
        "UPDATE comparisons SET selection = ? WHERE id = ?",
        json,
        comparison_id
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}
