//! Disturbed runs (migration 0037): runs in which most benchmarks moved together, the same
//! way. What the server needs to judge a run, to remember the verdict, to hold back what
//! such a run alone would file, and to settle a finding that waited for another run.

use super::{Db, DbError};
use crate::stats::disturbance::Disturbance;

/// Where a run belongs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPlace {
    pub repository_id: i64,
    pub commit_id: i64,
    pub machine_id: i64,
    /// The commit's place in the tracked branch's history, if it is on it.
    pub position: Option<i64>,
    /// Whether the machine runs a worker (one known only from uploads cannot re-run).
    pub runs_worker: bool,
    /// Runs of the commit on that machine, this one included.
    pub runs_of_commit: i64,
}

/// A series a run measured, with its direction (`lower` or `higher`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSeries {
    pub id: i64,
    pub direction: String,
}

/// A disturbed run that is its commit's only run on a worker's machine: what it alone would
/// file is held back until the commit is measured again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldRun {
    pub run_id: i64,
    pub commit_id: i64,
}

/// A change found on a disturbed upload, waiting unannounced for another run of its commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingFinding {
    pub regression_id: i64,
    /// Runs of the suspect commit on the change's machine now.
    pub runs_of_commit: i64,
    /// Whether the latest analysis still finds the change.
    pub active: bool,
}

impl Db {
    /// Where run `run_id` belongs.
    pub async fn run_place(&self, run_id: i64) -> Result<RunPlace, DbError> {
        sqlx::query_as!(
            RunPlace,
            r#"SELECT c.repository_id, r.commit_id, r.machine_id, c.position,
                      m.runs_worker AS "runs_worker: bool",
                      (SELECT count(*) FROM runs o WHERE o.commit_id = r.commit_id
                       AND o.machine_id = r.machine_id) AS "runs_of_commit!: i64"
               FROM runs r JOIN commits c ON c.id = r.commit_id
               JOIN machines m ON m.id = r.machine_id WHERE r.id = ?"#,
            run_id
        )
        .fetch_optional(&self.reader)
        .await?
        .ok_or_else(|| DbError::NotFound(format!("run {run_id}")))
    }

    /// The series a run measured whose values other work on the machine can move: every
    /// metric but instruction counts.
    pub async fn run_series_moved_by_load(&self, run_id: i64) -> Result<Vec<RunSeries>, DbError> {
        Ok(sqlx::query_as!(
            RunSeries,
            r#"SELECT s.id, s.direction
               FROM runs r JOIN commits c ON c.id = r.commit_id
               JOIN benchmarks b ON b.repository_id = c.repository_id
               JOIN series s ON s.benchmark_id = b.id AND s.machine_id = r.machine_id
               WHERE r.id = ?1 AND s.metric <> 'instructions'
                 AND (EXISTS (SELECT 1 FROM measurements x WHERE x.series_id = s.id
                              AND x.commit_id = r.commit_id AND x.run_id = r.id)
                      OR EXISTS (SELECT 1 FROM measurements_staged x WHERE x.run_id = r.id
                                 AND x.commit_id = r.commit_id AND x.series_id = s.id))
               ORDER BY s.id"#,
            run_id
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Remembers that run `run_id` is disturbed.
    pub async fn mark_disturbed(
        &self,
        run_id: i64,
        disturbance: &Disturbance,
        now: i64,
    ) -> Result<(), DbError> {
        let (moved, measured) = (disturbance.moved as i64, disturbance.measured as i64);
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            r#"INSERT INTO disturbed_runs (run_id, moved, measured, worse, detected_at)
               VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING"#,
            run_id,
            moved,
            measured,
            disturbance.worse,
            now
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether a commit has one run on a machine, and that run is disturbed.
    pub async fn rests_on_one_disturbed_run(
        &self,
        commit_id: i64,
        machine_id: i64,
    ) -> Result<bool, DbError> {
        Ok(sqlx::query_scalar!(
            r#"SELECT count(*) = 1 AND count(d.run_id) = 1 AS "only!: bool"
               FROM runs r LEFT JOIN disturbed_runs d ON d.run_id = r.id
               WHERE r.commit_id = ? AND r.machine_id = ?"#,
            commit_id,
            machine_id
        )
        .fetch_one(&self.reader)
        .await?)
    }

    /// The disturbed runs of a repository that are their commit's only run on a machine that
    /// runs a worker.
    pub async fn held_runs(&self, repository_id: i64) -> Result<Vec<HeldRun>, DbError> {
        Ok(sqlx::query_as!(
            HeldRun,
            r#"SELECT r.id AS run_id, r.commit_id
               FROM disturbed_runs d JOIN runs r ON r.id = d.run_id
               JOIN commits c ON c.id = r.commit_id JOIN machines m ON m.id = r.machine_id
               WHERE c.repository_id = ? AND m.runs_worker = 1
                 AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.commit_id = r.commit_id
                                 AND o.machine_id = r.machine_id AND o.id <> r.id)
               ORDER BY r.id"#,
            repository_id
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// The findings of a repository waiting for another run of their disturbed commit.
    pub async fn findings_waiting_for_a_run(
        &self,
        repository_id: i64,
    ) -> Result<Vec<WaitingFinding>, DbError> {
        Ok(sqlx::query_as!(
            WaitingFinding,
            r#"SELECT f.regression_id,
                      (SELECT count(*) FROM runs r WHERE r.commit_id = g.commit_id
                       AND r.machine_id = s.machine_id) AS "runs_of_commit!: i64",
                      g.active AS "active: bool"
               FROM confirmations f JOIN regressions g ON g.id = f.regression_id
               JOIN series s ON s.id = g.series_id JOIN benchmarks b ON b.id = s.benchmark_id
               WHERE f.state = 'confirming' AND f.evidence = 'disturbed'
                 AND b.repository_id = ?
               ORDER BY f.regression_id"#,
            repository_id
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Starts a confirmation that waits for another run of the suspect commit.
    pub async fn wait_for_another_run(
        &self,
        regression_id: i64,
        note: &str,
        now: i64,
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            r#"INSERT INTO confirmations (regression_id, state, evidence, note, created_at)
               VALUES (?1, 'confirming', 'disturbed', ?2, ?3)
               ON CONFLICT (regression_id) DO UPDATE SET state = 'confirming',
                   evidence = 'disturbed', note = ?2, comparison_id = NULL, decided_at = NULL"#,
            regression_id,
            note,
            now
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
