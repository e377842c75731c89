//! Bisections: the search for the commit that caused a regression whose suspect range holds
//! commits nobody measured.

use super::{Db, DbError};
use crate::samples::Samples;

/// A bisection with what stepping it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct BisectionRow {
    pub id: i64,
    pub regression_id: i64,
    pub repository_id: i64,
    pub series_id: i64,
    pub machine_id: i64,
    pub good_id: i64,
    pub good_position: i64,
    pub bad_id: i64,
    pub bad_position: i64,
    pub state: String,
    pub steps: i64,
    pub probe_id: Option<i64>,
    pub probe_runs: i64,
}

/// A bisection as pages and the API show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct BisectionView {
    pub state: String,
    pub steps: i64,
    pub good_sha: String,
    pub bad_sha: String,
    /// Unmeasured commits left between good and bad.
    pub remaining: i64,
    pub probe_sha: Option<String>,
    pub note: String,
    pub updated_at: i64,
}

/// A regression whose suspect range spans unmeasured commits.
#[derive(Debug, Clone, PartialEq)]
pub struct WideRegression {
    pub regression_id: i64,
    pub good_id: i64,
    pub bad_id: i64,
}

/// How a stored bisection moves on.
#[derive(Debug, Clone, PartialEq)]
pub struct BisectionUpdate<'a> {
    pub good_id: i64,
    pub bad_id: i64,
    pub state: &'a str,
    pub steps: i64,
    pub probe_id: Option<i64>,
    pub probe_runs: i64,
    pub note: &'a str,
}

/// The jobs of one commit on one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeJobs {
    pub active: bool,
    pub failed: i64,
}

impl Db {
    /// Active regressions of the repository whose range (previous, commit] holds commits never
    /// measured, and that no bisection has taken up yet.
    pub async fn wide_regressions(
        &self,
        repository_id: i64,
    ) -> Result<Vec<WideRegression>, DbError> {
        Ok(sqlx::query_as!(
            WideRegression,
            r#"SELECT g.id AS regression_id, g.previous_id AS "good_id!", g.commit_id AS bad_id
               FROM regressions g
               JOIN series s ON s.id = g.series_id
               JOIN benchmarks b ON b.id = s.benchmark_id
               JOIN commits c ON c.id = g.commit_id
               JOIN commits p ON p.id = g.previous_id
               WHERE b.repository_id = ? AND g.active = 1 AND g.kind = 'regression'
                 AND c.position - p.position > 1
                 AND NOT EXISTS (SELECT 1 FROM bisections x WHERE x.regression_id = g.id)"#,
            repository_id
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Starts a bisection of a regression between `good_id` and `bad_id`; `None` when the
    /// regression has one already.
    pub async fn start_bisection(
        &self,
        wide: &WideRegression,
        now: i64,
    ) -> Result<Option<i64>, DbError> {
        let mut tx = self.begin_write().await?;
        let id = sqlx::query_scalar!(
            r#"INSERT INTO bisections (regression_id, good_id, bad_id, state, created_at, updated_at)
               VALUES (?, ?, ?, 'running', ?, ?)
               ON CONFLICT (regression_id) DO NOTHING RETURNING id AS "id!" "#,
            wide.regression_id,
            wide.good_id,
            wide.bad_id,
            now,
            now
        )
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// The running bisections of a repository.
    pub async fn running_bisections(
        &self,
        repository_id: i64,
    ) -> Result<Vec<BisectionRow>, DbError> {
        Ok(sqlx::query_as!(
            BisectionRow,
            r#"SELECT x.id, x.regression_id, b.repository_id, s.id AS series_id,
                      s.machine_id, x.good_id, gc.position AS "good_position!", x.bad_id,
                      bc.position AS "bad_position!", x.state, x.steps, x.probe_id, x.probe_runs
               FROM bisections x
               JOIN regressions g ON g.id = x.regression_id
               JOIN series s ON s.id = g.series_id
               JOIN benchmarks b ON b.id = s.benchmark_id
               JOIN commits gc ON gc.id = x.good_id
               JOIN commits bc ON bc.id = x.bad_id
               WHERE b.repository_id = ? AND x.state = 'running'
                 AND gc.position IS NOT NULL AND bc.position IS NOT NULL
               ORDER BY x.id"#,
            repository_id
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Stores a bisection's step. When it found its culprit, the regression is moved onto the
    /// culprit (unless the analysis already keeps another record there).
    pub async fn update_bisection(
        &self,
        bisection: &BisectionRow,
        update: &BisectionUpdate<'_>,
        now: i64,
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            r#"UPDATE bisections SET good_id = ?, bad_id = ?, state = ?, steps = ?, probe_id = ?,
                                     probe_runs = ?, note = ?, updated_at = ?
               WHERE id = ?"#,
            update.good_id,
            update.bad_id,
            update.state,
            update.steps,
            update.probe_id,
            update.probe_runs,
            update.note,
            now,
            bisection.id
        )
        .execute(&mut *tx)
        .await?;
        if update.state == "found" {
            sqlx::query!(
                r#"UPDATE OR IGNORE regressions SET commit_id = ?, previous_id = ?, updated_at = ?
                   WHERE id = ?"#,
                update.bad_id,
                update.good_id,
                now,
                bisection.regression_id
            )
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The bisection of a regression, if one was started.
    pub async fn bisection_of(&self, regression_id: i64) -> Result<Option<BisectionView>, DbError> {
        Ok(sqlx::query_as!(
            BisectionView,
            r#"SELECT x.state, x.steps, gc.sha AS good_sha, bc.sha AS bad_sha,
                      max(coalesce(bc.position - gc.position - 1, 0), 0) AS "remaining!: i64",
                      pc.sha AS "probe_sha?", x.note, x.updated_at
               FROM bisections x
               JOIN commits gc ON gc.id = x.good_id
               JOIN commits bc ON bc.id = x.bad_id
               LEFT JOIN commits pc ON pc.id = x.probe_id
               WHERE x.regression_id = ?"#,
            regression_id
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// The commit at a position of the tracked branch's chain.
    pub async fn commit_at_position(
        &self,
        repository_id: i64,
        position: i64,
    ) -> Result<Option<i64>, DbError> {
        Ok(sqlx::query_scalar!(
            "SELECT id FROM commits WHERE repository_id = ? AND position = ?",
            repository_id,
            position
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// Every sample of a series at one commit, over all its runs (a run without samples
    /// contributes its value).
    pub async fn samples_at(
        &self,
        series_id: i64,
        commit_id: i64,
    ) -> Result<Vec<Vec<f64>>, DbError> {
        let rows = sqlx::query!(
            r#"SELECT value, samples AS "samples: Samples", run_id FROM measurements
               WHERE series_id = ?1 AND commit_id = ?2
               UNION ALL
               SELECT value, samples, run_id FROM measurements_staged
               WHERE commit_id = ?2 AND series_id = ?1
               ORDER BY 3"#,
            series_id,
            commit_id
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| r.samples.or_value(r.value))
            .collect())
    }

    /// Whether a commit waits for (or runs on) a machine, and how often it failed there.
    pub async fn probe_jobs(&self, commit_id: i64, machine_id: i64) -> Result<ProbeJobs, DbError> {
        let row = sqlx::query!(
            r#"SELECT coalesce(sum(state IN ('queued', 'running')), 0) AS "active!: i64",
                      coalesce(sum(state = 'failed'), 0) AS "failed!: i64"
               FROM jobs WHERE commit_id = ? AND machine_id = ? AND comparison_id IS NULL"#,
            commit_id,
            machine_id
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(ProbeJobs {
            active: row.active > 0,
            failed: row.failed,
        })
    }
}
