//! A window of one series' history read point by point: the newest points up to a commit,
//! found by walking the tracked branch down from that commit (the index on commit positions)
//! and seeking each commit's measurements of the series. The walk stops once it has the points
//! asked for, so what it reads follows the window, not the history: at 100,000 commits the
//! newest 1,000 cost what they cost at 1,000 (RELIABILITY.md, "Pages at any history"). A
//! window too wide to draw point by point is read from the series' summaries instead
//! (`summaries.rs`).
//!
//! Which run wins is as everywhere (`staging.rs`): the newest staged run of a (series, commit)
//! when there is one, the newest merged run otherwise. The query hands back every run of the
//! commits it walks and the newest is chosen here: a correlated `max(run_id)` per commit cost
//! SQLite more than the rest of the walk.

use std::collections::{BTreeMap, HashMap};

use super::pages::{Environment, EnvironmentPoint, SeriesPoint};
use super::window_lines::{CommitLine, RunField, malformed};
use super::{Db, DbError, decode_error, unhex};
use crate::model::Direction;
use crate::samples::Samples;
use crate::stats::run_value;

/// A point of a window with the environment of the run that measured it.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPoint {
    pub point: SeriesPoint,
    pub environment: EnvironmentPoint,
}

/// A run of a window, decoded.
pub(super) struct WindowRun {
    pub(super) staged: bool,
    pub(super) run_id: i64,
    pub(super) point: SeriesPoint,
}

impl WindowRun {
    /// The run of a line of a window's text, which names one commit and one run.
    fn read(line: &str) -> Result<WindowRun, DbError> {
        let commit = CommitLine::parse(line)?;
        let mut runs = commit.runs();
        let (Some(run), None) = (runs.next(), runs.next()) else {
            return Err(malformed("line of other than one run", line));
        };
        WindowRun::of(&commit, &run?)
    }

    /// `run` of `commit` as a window holds it: its samples decoded.
    pub(super) fn of(commit: &CommitLine<'_>, run: &RunField<'_>) -> Result<WindowRun, DbError> {
        let bytes = unhex(run.hex)?;
        let samples = Samples(crate::samples::decode(&bytes).map_err(decode_error)?);
        Ok(WindowRun {
            staged: commit.staged,
            run_id: run.run_id,
            point: SeriesPoint {
                position: commit.position,
                sha: commit.sha.to_owned(),
                committed_at: commit.committed_at,
                value: run.value,
                samples,
            },
        })
    }

    /// The point with its run's kernel and toolchain, from `environments`
    /// ([`Db::run_environments`] of the window's runs).
    pub(super) fn with_environment(
        self,
        environments: &HashMap<i64, Environment>,
    ) -> Result<WindowPoint, DbError> {
        let (kernel, toolchain) = environments.get(&self.run_id).cloned().ok_or_else(|| {
            decode_error(std::io::Error::other("a run read without its environment"))
        })?;
        Ok(WindowPoint {
            environment: EnvironmentPoint {
                position: self.point.position,
                kernel,
                toolchain,
            },
            point: self.point,
        })
    }

    /// Which of two runs of one commit wins: a staged one, then the newer.
    pub(super) fn rank(&self) -> (bool, i64) {
        (self.staged, self.run_id)
    }
}

impl Db {
    /// The newest `limit` points of a series on the tracked branch up to position `until`
    /// (the branch head when `None`), oldest first.
    pub async fn series_points(
        &self,
        series_id: i64,
        limit: i64,
        until: Option<i64>,
    ) -> Result<Vec<SeriesPoint>, DbError> {
        let runs = self.window_rows(series_id, limit, until, true).await?;
        Ok(runs.into_iter().map(|run| run.point).collect())
    }

    /// The newest `limit` points of a series up to position `until` (the head when `None`),
    /// oldest first, each with its run's environment; their samples only `with_samples` (a
    /// chart that thins its points draws none, and decoding them is most of a point's cost).
    pub async fn series_window(
        &self,
        series_id: i64,
        limit: i64,
        until: Option<i64>,
        with_samples: bool,
    ) -> Result<Vec<WindowPoint>, DbError> {
        let runs = self
            .window_rows(series_id, limit, until, with_samples)
            .await?;
        let environments = self.run_environments(runs.iter().map(|r| r.run_id)).await?;
        (runs.into_iter())
            .map(|run| run.with_environment(&environments))
            .collect()
    }

    /// The winning run of each of the newest `limit` measured commits up to `until`, oldest
    /// first.
    async fn window_rows(
        &self,
        series_id: i64,
        limit: i64,
        until: Option<i64>,
        with_samples: bool,
    ) -> Result<Vec<WindowRun>, DbError> {
        let mut until = until.unwrap_or(i64::MAX);
        // A few runs more than commits: the commit a walk stops on is read again, and a
        // commit measured again takes a run of its own.
        let limit = limit.max(0);
        let mut wanted = limit + limit / 64 + 2;
        let mut best: BTreeMap<i64, WindowRun> = BTreeMap::new();
        loop {
            let runs = self
                .window_runs(series_id, wanted, until, with_samples)
                .await?;
            let merged = runs.iter().filter(|r| !r.staged).count() as i64;
            // The walk stopped on a commit whose later runs it may not have reached: that
            // commit is read again whole by the next walk, if one is needed.
            let cut = (merged == wanted)
                .then(|| {
                    (runs.iter().filter(|r| !r.staged))
                        .map(|r| r.point.position)
                        .min()
                })
                .flatten();
            for run in runs {
                let position = run.point.position;
                if !run.staged && Some(position) == cut {
                    continue;
                }
                match best.get(&position) {
                    Some(held) if held.rank() >= run.rank() => {}
                    _ => {
                        best.insert(position, run);
                    }
                }
            }
            let Some(cut) = cut else { break };
            let settled = best.range(cut + 1..).count() as i64;
            if settled >= limit {
                break;
            }
            // Several runs of one commit filled the walk: walk again from it, further.
            until = cut;
            wanted *= 2;
        }
        let keep = best.len().saturating_sub(limit as usize);
        Ok(best.into_values().skip(keep).collect())
    }

    /// One walk down the branch from `until`: every staged run of the series' staged commits,
    /// and the merged runs of the newest commits, `rows` runs at most.
    async fn window_runs(
        &self,
        series_id: i64,
        rows: i64,
        until: i64,
        with_samples: bool,
    ) -> Result<Vec<WindowRun>, DbError> {
        // One row of text, a line a run (`window_lines.rs`), rather than a row a run: handing
        // each of a window's 1,000 rows from SQLite's thread to this task cost more than
        // finding it. The environments are read apart (`run_environments`). Not the
        // checked macro: `f64_bits` exists only on this process's connections.
        let text: String = sqlx::query_scalar(
            r#"SELECT coalesce(group_concat(printf('%d %d %d %s;%d %d %d %s', staged,
                          position, committed_at, sha, ?1, f64_bits(value), run_id,
                          CASE WHEN ?4 THEN hex(samples) ELSE '' END), char(10)), '')
               FROM (SELECT 1 AS staged, c.position, c.sha, c.committed_at, x.value,
                            x.samples, x.run_id
                     FROM staged_commits k
                     CROSS JOIN measurements_staged x ON x.commit_id = k.commit_id
                          AND x.series_id = ?1
                     JOIN commits c ON c.id = x.commit_id
                     WHERE c.position IS NOT NULL AND c.position <= ?2
                     UNION ALL
                     SELECT * FROM (
                        SELECT 0, c.position, c.sha, c.committed_at, x.value, x.samples,
                               x.run_id
                        FROM commits c
                        JOIN measurements x ON x.series_id = ?1 AND x.commit_id = c.id
                        WHERE c.repository_id = (SELECT b.repository_id FROM series s
                                                 JOIN benchmarks b ON b.id = s.benchmark_id
                                                 WHERE s.id = ?1)
                          AND c.position IS NOT NULL AND c.position <= ?2
                        ORDER BY c.position DESC LIMIT ?3))"#,
        )
        .bind(series_id)
        .bind(until)
        .bind(rows)
        .bind(with_samples)
        .fetch_one(&self.reader)
        .await?;
        (text.split('\n').filter(|line| !line.is_empty()))
            .map(WindowRun::read)
            .collect()
    }

    /// The kernel and toolchain of each of `runs`, each environment read once with the ids of
    /// its runs and shared by them.
    pub(super) async fn run_environments(
        &self,
        runs: impl Iterator<Item = i64>,
    ) -> Result<HashMap<i64, Environment>, DbError> {
        let mut runs: Vec<i64> = runs.collect();
        runs.sort_unstable();
        runs.dedup();
        let ids = serde_json::to_string(&runs).map_err(decode_error)?;
        let json = sqlx::query_scalar!(
            r#"SELECT json_group_array(json_array(kernel, toolchain, ids)) AS "rows!: String"
               FROM (SELECT kernel, toolchain, group_concat(id) AS ids FROM runs
                     WHERE id IN (SELECT value FROM json_each(?1))
                     GROUP BY kernel, toolchain)"#,
            ids
        )
        .fetch_one(&self.reader)
        .await?;
        let rows: Vec<(String, String, String)> =
            serde_json::from_str(&json).map_err(decode_error)?;
        let mut environments = HashMap::with_capacity(runs.len());
        for (kernel, toolchain, ids) in rows {
            let environment: Environment = (kernel.into(), toolchain.into());
            for id in ids.split(',') {
                let id = id
                    .parse()
                    .map_err(|_| malformed("run's environment", &ids))?;
                environments.insert(id, environment.clone());
            }
        }
        Ok(environments)
    }

    /// The values (with their history positions) of the last `limit` points of a series before
    /// position `before` (all positions when `None`), oldest first, as verdicts see them
    /// ([`run_value`]): what a per-commit verdict's noise model uses. Walks down the branch
    /// as [`Db::series_window`] does.
    pub async fn series_values_before(
        &self,
        series_id: i64,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<(i64, f64)>, DbError> {
        let until = before.map_or(i64::MAX, |b| b.saturating_sub(1));
        let direction = sqlx::query_scalar!("SELECT direction FROM series WHERE id = ?", series_id)
            .fetch_optional(&self.reader)
            .await?;
        let direction = direction
            .as_deref()
            .and_then(Direction::parse)
            .unwrap_or(Direction::Lower);
        let points = self
            .series_window(series_id, limit, Some(until), true)
            .await?;
        Ok(points
            .into_iter()
            .map(|p| {
                let value = run_value(p.point.value, &p.point.samples, direction);
                (p.point.position, value)
            })
            .collect())
    }
}
