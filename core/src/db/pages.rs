//! Read queries behind the dashboard pages and the JSON API.

use std::sync::Arc;

use super::{Db, DbError};
use crate::samples::Samples;

/// The shortest sha prefix that names a commit, as git accepts it.
pub const MIN_SHA_PREFIX: usize = 4;

/// A repository with the counts the home page shows.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RepositorySummary {
    pub name: String,
    /// Shown with any `user:token@` redacted.
    #[serde(serialize_with = "crate::credentials::serialize_redacted")]
    pub url: String,
    pub branch: String,
    pub commits: i64,
    pub benchmarks: i64,
    pub last_run_at: Option<i64>,
    /// Regressions found and not yet triaged (acknowledged, fixed or dismissed).
    pub open_regressions: i64,
}

/// A commit of the tracked branch, newest first, with its jobs' states per machine.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HistoryRow {
    pub id: i64,
    pub position: i64,
    pub sha: String,
    pub author: String,
    pub committed_at: i64,
    pub message: String,
    pub statuses: Vec<HistoryStatus>,
}

/// The latest job state of one commit on one machine.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HistoryStatus {
    pub machine: String,
    pub state: String,
}

/// A run of a commit on a machine.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct CommitRunRow {
    pub id: i64,
    pub machine: String,
    pub machine_name: String,
    pub source: String,
    pub kernel: String,
    pub toolchain: String,
    pub governor: String,
    pub hostname: String,
    pub created_at: i64,
    /// Which `kymo.toml` ran: `commit`, `server`, or none (an upload).
    pub config_source: Option<String>,
    /// The SHA-256 of that `kymo.toml`.
    pub config_hash: Option<String>,
}

/// One result of a commit, with the parent commit's value of the same series.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct CommitMeasurementRow {
    pub series_id: i64,
    pub benchmark: String,
    pub metric: String,
    pub unit: String,
    pub direction: String,
    pub machine: String,
    pub value: f64,
    #[schema(value_type = Vec<f64>)]
    pub samples: Samples,
    pub parent_value: Option<f64>,
}

/// A series of a benchmark: one metric on one machine.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct BenchmarkSeriesRow {
    pub id: i64,
    pub benchmark: String,
    pub metric: String,
    pub unit: String,
    pub direction: String,
    pub machine: String,
}

/// A point of a series: a commit's latest value, in history order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct SeriesPoint {
    pub position: i64,
    pub sha: String,
    /// When the commit was made, in Unix seconds.
    pub committed_at: i64,
    pub value: f64,
    /// The raw samples.
    #[schema(value_type = Vec<f64>)]
    pub samples: Samples,
}

/// Row shape of the commit page's header.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct CommitRow {
    pub id: i64,
    pub sha: String,
    /// Parent shas, the first parent first.
    #[serde(with = "super::json_text::words")]
    #[schema(value_type = Vec<String>)]
    pub parents: String,
    pub author: String,
    pub committed_at: i64,
    pub message: String,
    pub position: Option<i64>,
}

impl Db {
    /// Every repository with its counts, for the home page. What it reads does not grow with
    /// history: the commit count is the newest position plus one (positions number the
    /// tracked chain from 0, without gaps), and the last run's time is kept on the repository
    /// by ingest (migration 0036). Counting the commits and reading every run of every commit
    /// made this page ten times slower at 100,000 commits than at 10,000 (RELIABILITY.md).
    pub async fn repository_summaries(&self) -> Result<Vec<RepositorySummary>, DbError> {
        Ok(sqlx::query_as!(
            RepositorySummary,
            r#"SELECT r.name, r.url, r.branch,
                      (SELECT coalesce(max(c.position) + 1, 0) FROM commits c
                       WHERE c.repository_id = r.id) AS "commits!: i64",
                      (SELECT count(*) FROM benchmarks b WHERE b.repository_id = r.id) AS "benchmarks!: i64",
                      r.last_run_at AS "last_run_at?: i64",
                      (SELECT count(*) FROM regressions g JOIN series s ON s.id = g.series_id
                       JOIN benchmarks b ON b.id = s.benchmark_id
                       WHERE b.repository_id = r.id AND g.active = 1 AND g.state = 'open'
                         AND g.kind = 'regression') AS "open_regressions!: i64"
               FROM repositories r ORDER BY r.name"#
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// The tracked branch's history, newest first, with job states per machine.
    pub async fn history(
        &self,
        repository_id: i64,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<HistoryRow>, DbError> {
        let commits = sqlx::query!(
            r#"SELECT id, position AS "position!", sha, author, committed_at, message
               FROM commits WHERE repository_id = ? AND position IS NOT NULL
               ORDER BY position DESC LIMIT ? OFFSET ?"#,
            repository_id,
            limit,
            offset
        )
        .fetch_all(&self.reader)
        .await?;
        let (Some(newest), Some(oldest)) = (commits.first(), commits.last()) else {
            return Ok(Vec::new());
        };
        let (high, low) = (newest.position, oldest.position);
        let states = sqlx::query!(
            r#"SELECT j.commit_id, coalesce(m.fingerprint, 'any machine') AS "machine!: String", j.state
               FROM jobs j JOIN commits c ON c.id = j.commit_id
               LEFT JOIN machines m ON m.id = j.machine_id
               WHERE c.repository_id = ? AND c.position BETWEEN ? AND ? AND j.comparison_id IS NULL
               ORDER BY j.id"#,
            repository_id,
            low,
            high
        )
        .fetch_all(&self.reader)
        .await?;
        let uploads = sqlx::query!(
            r#"SELECT DISTINCT r.commit_id, m.fingerprint AS machine
               FROM runs r JOIN commits c ON c.id = r.commit_id
               JOIN machines m ON m.id = r.machine_id
               WHERE c.repository_id = ? AND c.position BETWEEN ? AND ? AND r.source = 'upload'"#,
            repository_id,
            low,
            high
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(commits
            .into_iter()
            .map(|c| {
                let mut statuses: Vec<HistoryStatus> = Vec::new();
                for s in states.iter().filter(|s| s.commit_id == c.id) {
                    // Later jobs of the same machine supersede earlier ones.
                    statuses.retain(|x| x.machine != s.machine);
                    statuses.push(HistoryStatus {
                        machine: s.machine.clone(),
                        state: s.state.clone(),
                    });
                }
                // Results uploaded for a machine supersede its finished jobs (a job that failed
                // for want of a kymo.toml is not the commit's state once CI uploaded results);
                // a job still waiting or running stays what the reader wants to see.
                for u in uploads.iter().filter(|u| u.commit_id == c.id) {
                    let active = statuses.iter().any(|x| {
                        x.machine == u.machine && matches!(x.state.as_str(), "queued" | "running")
                    });
                    if !active {
                        statuses.retain(|x| x.machine != u.machine);
                        statuses.push(HistoryStatus {
                            machine: u.machine.clone(),
                            state: "uploaded".into(),
                        });
                    }
                }
                HistoryRow {
                    id: c.id,
                    position: c.position,
                    sha: c.sha,
                    author: c.author,
                    committed_at: c.committed_at,
                    message: c.message,
                    statuses,
                }
            })
            .collect())
    }

    /// A commit by sha (a unique prefix of at least 4 digits also works, as in git; an
    /// ambiguous one is refused with the commits it could name).
    pub async fn commit(&self, repository_id: i64, sha: &str) -> Result<CommitRow, DbError> {
        let pattern = format!("{}%", sha.to_ascii_lowercase());
        let mut rows = sqlx::query_as!(
            CommitRow,
            r#"SELECT id, sha, parents, author, committed_at, message, position
               FROM commits WHERE repository_id = ? AND sha LIKE ? LIMIT 2"#,
            repository_id,
            pattern
        )
        .fetch_all(&self.reader)
        .await?;
        let valid = (MIN_SHA_PREFIX..=40).contains(&sha.len())
            && sha.bytes().all(|b| b.is_ascii_hexdigit());
        match (valid, rows.len()) {
            (true, 1) => Ok(rows.remove(0)),
            (true, 2..) => Err(DbError::Invalid(format!(
                "commit prefix {sha:?} is ambiguous: it begins {} and {} (at least); give more digits",
                &rows[0].sha[..12],
                &rows[1].sha[..12]
            ))),
            _ => Err(DbError::NotFound(format!(
                "commit {:?}",
                sha.chars().take(40).collect::<String>()
            ))),
        }
    }

    /// The runs of a commit.
    pub async fn commit_runs(&self, commit_id: i64) -> Result<Vec<CommitRunRow>, DbError> {
        Ok(sqlx::query_as!(
            CommitRunRow,
            r#"SELECT u.id, m.fingerprint AS machine, m.name AS machine_name, u.source, u.kernel,
                      u.toolchain, u.governor, u.hostname, u.created_at, u.config_source, u.config_hash
               FROM runs u JOIN machines m ON m.id = u.machine_id
               WHERE u.commit_id = ? ORDER BY u.id"#,
            commit_id
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Every result of a commit (the latest run's, per series) beside its first parent's.
    pub async fn commit_measurements(
        &self,
        commit_id: i64,
        parent_id: Option<i64>,
    ) -> Result<Vec<CommitMeasurementRow>, DbError> {
        // SQLite reads a negative LIMIT as none.
        self.commit_measurements_window(commit_id, parent_id, 0, -1)
            .await
    }

    /// The results of a commit from the `from`-th, at most `limit` of them, in the order of
    /// benchmark, metric and machine: what one page of an answer shows, whatever a run holds.
    /// Reached through the repository's series, one key lookup each: `measurements` is
    /// clustered by series, and nothing leads with `commit_id`.
    pub async fn commit_measurements_window(
        &self,
        commit_id: i64,
        parent_id: Option<i64>,
        from: i64,
        limit: i64,
    ) -> Result<Vec<CommitMeasurementRow>, DbError> {
        Ok(sqlx::query_as!(
            CommitMeasurementRow,
            r#"SELECT s.id AS series_id, b.name AS benchmark, s.metric, s.unit, s.direction,
                      m.fingerprint AS machine, x.value, x.samples AS "samples: Samples",
                      coalesce((SELECT p.value FROM measurements_staged p WHERE p.commit_id = ?1
                                AND p.series_id = x.series_id ORDER BY p.run_id DESC LIMIT 1),
                               (SELECT p.value FROM measurements p WHERE p.series_id = x.series_id
                                AND p.commit_id = ?1 ORDER BY p.run_id DESC LIMIT 1))
                        AS "parent_value?: f64"
               FROM benchmarks b
               JOIN series s ON s.benchmark_id = b.id
               JOIN measurements x ON x.series_id = s.id AND x.commit_id = ?2
               JOIN machines m ON m.id = s.machine_id
               WHERE b.repository_id = (SELECT repository_id FROM commits WHERE id = ?2)
                 AND x.run_id = (SELECT max(y.run_id) FROM measurements y
                                 WHERE y.series_id = x.series_id AND y.commit_id = x.commit_id)
                 AND NOT EXISTS (SELECT 1 FROM measurements_staged z
                                 WHERE z.commit_id = ?2 AND z.series_id = x.series_id)
               UNION ALL
               SELECT s.id, b.name, s.metric, s.unit, s.direction, m.fingerprint, x.value,
                      x.samples,
                      coalesce((SELECT p.value FROM measurements_staged p WHERE p.commit_id = ?1
                                AND p.series_id = x.series_id ORDER BY p.run_id DESC LIMIT 1),
                               (SELECT p.value FROM measurements p WHERE p.series_id = x.series_id
                                AND p.commit_id = ?1 ORDER BY p.run_id DESC LIMIT 1))
               FROM benchmarks b
               JOIN series s ON s.benchmark_id = b.id
               JOIN measurements_staged x ON x.commit_id = ?2 AND x.series_id = s.id
               JOIN machines m ON m.id = s.machine_id
               WHERE b.repository_id = (SELECT repository_id FROM commits WHERE id = ?2)
                 AND x.run_id = (SELECT max(z.run_id) FROM measurements_staged z
                                 WHERE z.commit_id = x.commit_id AND z.series_id = x.series_id)
               ORDER BY 2, 3, 6
               LIMIT ?3 OFFSET ?4"#,
            parent_id,
            commit_id,
            limit,
            from
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// How many results a commit has (one per series measured at it).
    pub async fn commit_measurement_count(&self, commit_id: i64) -> Result<i64, DbError> {
        Ok(sqlx::query_scalar!(
            r#"SELECT count(*) AS "count!: i64"
               FROM benchmarks b JOIN series s ON s.benchmark_id = b.id
               WHERE b.repository_id = (SELECT repository_id FROM commits WHERE id = ?1)
                 AND (EXISTS (SELECT 1 FROM measurements x
                              WHERE x.series_id = s.id AND x.commit_id = ?1)
                      OR EXISTS (SELECT 1 FROM measurements_staged z
                                 WHERE z.commit_id = ?1 AND z.series_id = s.id))"#,
            commit_id
        )
        .fetch_one(&self.reader)
        .await?)
    }

    /// The series of a repository, optionally narrowed to one benchmark, metric or machine.
    pub async fn series(
        &self,
        repository_id: i64,
        benchmark: Option<&str>,
        metric: Option<&str>,
        machine: Option<&str>,
    ) -> Result<Vec<BenchmarkSeriesRow>, DbError> {
        Ok(sqlx::query_as!(
            BenchmarkSeriesRow,
            r#"SELECT s.id, b.name AS benchmark, s.metric, s.unit, s.direction, m.fingerprint AS machine
               FROM series s JOIN benchmarks b ON b.id = s.benchmark_id
               JOIN machines m ON m.id = s.machine_id
               WHERE b.repository_id = ?1 AND (?2 IS NULL OR b.name = ?2)
                 AND (?3 IS NULL OR s.metric = ?3) AND (?4 IS NULL OR m.fingerprint = ?4)
               ORDER BY b.name, s.metric, m.fingerprint"#,
            repository_id,
            benchmark,
            metric,
            machine
        )
        .fetch_all(&self.reader)
        .await?)
    }
}

/// A run's kernel and toolchain, shared by the points whose runs had them: a window of a
/// thousand points names a handful of environments, and a copy of both names a point was a
/// tenth of a benchmark page's allocations.
pub type Environment = (Arc<str>, Arc<str>);

/// The environment of a run that measured the commit at `position`, in history order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EnvironmentPoint {
    pub position: i64,
    pub kernel: Arc<str>,
    pub toolchain: Arc<str>,
}
