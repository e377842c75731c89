//! Windows of series' history read point by point: the newest points up to a commit, found by
//! walking the tracked branch down from that commit (the index on commit positions) a stretch
//! at a time and reading the series' runs at the commits of each stretch. The walk stops once
//! every series has the points asked for, so what it reads follows the window, not the
//! history: at 100,000 commits the newest 1,000 cost what they cost at 1,000 (RELIABILITY.md,
//! "Pages at any history"). A window too wide to draw point by point is read from the series'
//! summaries instead (`summaries.rs`).
//!
//! A stretch's runs are read as one range of commit ids when its commits' ids lie close
//! together, as they do when a repository's commits were recorded in history order: the
//! measurements are clustered by series, then commit, so the range is a few consecutive pages
//! of each series, where one seek a commit and series walked the index from its root each
//! time. Commits whose ids lie far apart are read by their ids.
//!
//! Which run wins is as everywhere (`staging.rs`): the newest staged run of a (series, commit)
//! when there is one, the newest merged run otherwise. The queries hand back every run of the
//! stretch's commits and the winners are chosen here.

use std::collections::HashMap;

use super::pages::{Environment, EnvironmentPoint, SeriesPoint};
use super::window_lines::{RunLine, WalkCommit, malformed};
use super::{Db, DbError, decode_error, unhex_into};
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
struct WindowRun {
    run_id: i64,
    point: SeriesPoint,
}

impl WindowRun {
    /// `run` at `commit` as a window holds it: its samples decoded (through `bytes`, whose
    /// room the window's runs share).
    fn of(
        commit: &WalkCommit<'_>,
        run: &RunLine<'_>,
        bytes: &mut Vec<u8>,
    ) -> Result<WindowRun, DbError> {
        unhex_into(run.hex, bytes)?;
        let samples = Samples(crate::samples::decode(bytes).map_err(decode_error)?);
        Ok(WindowRun {
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
    fn with_environment(
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
}

/// A run of one of the series at a commit of the walk, still as text: only the winners in a
/// window are decoded.
struct Candidate<'a> {
    commit: &'a WalkCommit<'a>,
    run: RunLine<'a>,
}

impl Candidate<'_> {
    /// Its commit's position, then its rank there: staged, then the newer run.
    fn key(&self) -> (i64, bool, i64) {
        (self.commit.position, self.run.staged, self.run.run_id)
    }
}

/// The query of a stretch's run lines (`RunLine`, written by `window_run`): the merged runs
/// `x` that `$merged` (a FROM and WHERE) picks, then the staged runs `x` that `$staged` picks;
/// `?4` says whether their samples are written.
macro_rules! run_lines {
    ($merged:literal, $staged:literal) => {
        concat!(
            "SELECT coalesce(group_concat(line, char(10)), '') FROM (
               SELECT window_run(0, x.series_id, x.commit_id, x.value, x.run_id,
                                 CASE WHEN ?4 THEN x.samples END) AS line ",
            $merged,
            " UNION ALL
               SELECT window_run(1, x.series_id, x.commit_id, x.value, x.run_id,
                                 CASE WHEN ?4 THEN x.samples END) ",
            $staged,
            ")"
        )
    };
}

/// Whether the runs of commits with ids from `low` to `high` are read as that one range:
/// when it holds few more ids than the `commits` of the stretch (the others are commits off
/// the branch or of other repositories, whose runs, if any, are read and left).
fn read_as_range(low: i64, high: i64, commits: usize) -> bool {
    high.saturating_sub(low) < 4 * commits as i64 + 64
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
        let runs = self.window_runs(&[series_id], limit, until, true).await?;
        Ok((runs.into_iter().flatten()).map(|run| run.point).collect())
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
        let windows = (self.series_windows(&[series_id], limit, until, with_samples)).await?;
        Ok(windows.into_iter().flatten().collect())
    }

    /// [`Db::series_window`] of each of `series` (ids of one repository), in the same order,
    /// read in one walk: a benchmark page draws each of its metrics over the newest commits,
    /// and its series are measured by the same runs.
    pub async fn series_windows(
        &self,
        series: &[i64],
        limit: i64,
        until: Option<i64>,
        with_samples: bool,
    ) -> Result<Vec<Vec<WindowPoint>>, DbError> {
        let windows = self.window_runs(series, limit, until, with_samples).await?;
        let run_ids = windows.iter().flatten().map(|run| run.run_id);
        let environments = self.run_environments(run_ids).await?;
        (windows.into_iter())
            .map(|runs| {
                (runs.into_iter())
                    .map(|run| run.with_environment(&environments))
                    .collect()
            })
            .collect()
    }

    /// The winning run of each of the newest `limit` measured commits up to `until` of each
    /// of `series`, oldest first. The walk goes down the branch a stretch at a time, each
    /// twice the last, until every series has its `limit` points or the walk has reached the
    /// root; a stretch's runs are read only for the series still short.
    async fn window_runs(
        &self,
        series: &[i64],
        limit: i64,
        until: Option<i64>,
        with_samples: bool,
    ) -> Result<Vec<Vec<WindowRun>>, DbError> {
        let limit = usize::try_from(limit).unwrap_or(0);
        // Newest first while the walk goes down; turned round at the end.
        let mut windows: Vec<Vec<WindowRun>> = series.iter().map(|_| Vec::new()).collect();
        let Some(&first) = series.first() else {
            return Ok(windows);
        };
        let mut until = until.unwrap_or(i64::MAX);
        // A few commits more than points: some commits of a stretch may be unmeasured.
        let mut stretch = limit + limit / 64 + 2;
        let mut bytes = Vec::new();
        loop {
            let short: HashMap<i64, usize> = (series.iter().enumerate())
                .filter(|(i, _)| windows[*i].len() < limit)
                .map(|(i, id)| (*id, i))
                .collect();
            if short.is_empty() {
                break;
            }
            let walk = self.walk(first, until, stretch).await?;
            let commits = (walk.split('\n').filter(|line| !line.is_empty()))
                .map(WalkCommit::parse)
                .collect::<Result<Vec<_>, _>>()?;
            let Some(lowest) = commits.iter().map(|c| c.position).min() else {
                break;
            };
            let text = (self.stretch_runs(short.keys().copied(), &commits, with_samples)).await?;
            let at: HashMap<i64, &WalkCommit<'_>> = commits.iter().map(|c| (c.id, c)).collect();
            let mut found: Vec<Vec<Candidate<'_>>> = series.iter().map(|_| Vec::new()).collect();
            for line in text.split('\n').filter(|line| !line.is_empty()) {
                let run = RunLine::parse(line)?;
                if let (Some(commit), Some(&i)) =
                    (at.get(&run.commit_id), short.get(&run.series_id))
                {
                    found[i].push(Candidate { commit, run });
                }
            }
            for (window, mut runs) in windows.iter_mut().zip(found) {
                runs.sort_unstable_by_key(Candidate::key);
                // The last run of each position is its winner.
                runs.dedup_by(|later, earlier| {
                    let same = later.commit.position == earlier.commit.position;
                    if same {
                        std::mem::swap(later, earlier);
                    }
                    same
                });
                let wanted = limit.saturating_sub(window.len());
                for candidate in runs.iter().rev().take(wanted) {
                    window.push(WindowRun::of(candidate.commit, &candidate.run, &mut bytes)?);
                }
            }
            if commits.len() < stretch {
                // The walk reached the root.
                break;
            }
            until = lowest - 1;
            stretch = stretch.saturating_mul(2);
        }
        windows.iter_mut().for_each(|window| window.reverse());
        Ok(windows)
    }

    /// The newest `count` commits of the tracked branch of `series`' repository up to
    /// position `until`, a line each (`WalkCommit`).
    async fn walk(&self, series: i64, until: i64, count: usize) -> Result<String, DbError> {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        Ok(sqlx::query_scalar!(
            r#"SELECT coalesce(group_concat(printf('%d %d %d %s', id, position, committed_at, sha),
                                            char(10)), '') AS "text!: String"
               FROM (SELECT c.id, c.position, c.committed_at, c.sha FROM commits c
                     WHERE c.repository_id = (SELECT b.repository_id FROM series s
                                              JOIN benchmarks b ON b.id = s.benchmark_id
                                              WHERE s.id = ?1)
                       AND c.position IS NOT NULL AND c.position <= ?2
                     ORDER BY c.position DESC LIMIT ?3)"#,
            series,
            until,
            count
        )
        .fetch_one(&self.reader)
        .await?)
    }

    /// Every run, staged and merged, of the `series` (ids) at `commits`, a line each
    /// (`RunLine`); runs at other commits may come too. Not the checked macro: `window_run`
    /// exists only on this process's connections.
    async fn stretch_runs(
        &self,
        series: impl Iterator<Item = i64>,
        commits: &[WalkCommit<'_>],
        with_samples: bool,
    ) -> Result<String, DbError> {
        let series: Vec<i64> = series.collect();
        let series = serde_json::to_string(&series).map_err(decode_error)?;
        let ids = commits.iter().map(|c| c.id);
        let (low, high) = (ids.clone().min(), ids.max());
        let (Some(low), Some(high)) = (low, high) else {
            return Ok(String::new());
        };
        // The staged runs are found through the staged commits (`staged_commits`): a seek
        // each, where a range of commit ids over the staged table would read every series'
        // staged runs of those commits.
        let query = if read_as_range(low, high, commits.len()) {
            sqlx::query_scalar(run_lines!(
                "FROM measurements x
                 WHERE x.series_id IN (SELECT value FROM json_each(?1))
                   AND x.commit_id BETWEEN ?2 AND ?3",
                "FROM staged_commits k
                 CROSS JOIN measurements_staged x ON x.commit_id = k.commit_id
                      AND x.series_id IN (SELECT value FROM json_each(?1))
                 WHERE k.commit_id BETWEEN ?2 AND ?3"
            ))
            .bind(series)
            .bind(low)
            .bind(high)
        } else {
            let ids: Vec<i64> = commits.iter().map(|c| c.id).collect();
            sqlx::query_scalar(run_lines!(
                "FROM measurements x
                 WHERE x.series_id IN (SELECT value FROM json_each(?1))
                   AND x.commit_id IN (SELECT value FROM json_each(?2))",
                "FROM measurements_staged x
                 WHERE x.commit_id IN (SELECT value FROM json_each(?2))
                   AND x.series_id IN (SELECT value FROM json_each(?1))"
            ))
            .bind(series)
            .bind(serde_json::to_string(&ids).map_err(decode_error)?)
            .bind(0)
        };
        Ok(query.bind(with_samples).fetch_one(&self.reader).await?)
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

#[cfg(test)]
mod tests {
    use super::read_as_range;

    #[test]
    fn a_stretch_is_read_as_one_range_while_its_ids_lie_close() {
        // Recorded in history order, alone or between three other repositories' commits.
        assert!(read_as_range(1, 1_000, 1_000));
        assert!(read_as_range(1, 4_000, 1_000));
        // Eight commits spread over 7,000 ids; ids at both ends of the integers.
        assert!(!read_as_range(1_000, 8_000, 8));
        assert!(!read_as_range(i64::MIN, i64::MAX, 5));
        assert!(read_as_range(7, 7, 1));
    }
}
