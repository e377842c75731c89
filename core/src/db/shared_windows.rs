//! The windows of several series over the same commits, read in one walk: a benchmark page
//! draws each of its metrics over the newest commits, and its series are measured by the same
//! runs. Walking the branch once and reading every series' runs of each commit there, with
//! each commit's sha and each run's environment read once, costs SQLite and the page a
//! fraction of a walk per series (RELIABILITY.md, "Pages at any history").
//!
//! Each window is what [`Db::series_window`] reads for its series alone: the newest `limit`
//! points up to `until`, each commit's winning run (`staging.rs`). The walk reads commits that
//! any of the series measured, each whole; a series measured at fewer of them than `limit`
//! (when the walk did not reach the root) is read again alone.

use std::collections::HashMap;

use super::window_lines::{CommitLine, RunField};
use super::windows::{WindowPoint, WindowRun};
use super::{Db, DbError, decode_error};

/// A run of one of the series at a commit of the walk, still as text.
struct Candidate<'a> {
    commit: &'a CommitLine<'a>,
    run: RunField<'a>,
}

impl Candidate<'_> {
    /// Its commit's position, then its rank there (`WindowRun::rank`: staged, then the newer
    /// run).
    fn key(&self) -> (i64, bool, i64) {
        (self.commit.position, self.commit.staged, self.run.run_id)
    }
}

impl Db {
    /// The windows of `series` (ids of one repository) over the same walk: for each, in the
    /// same order, what [`Db::series_window`] gives it alone.
    pub async fn series_windows(
        &self,
        series: &[i64],
        limit: i64,
        until: Option<i64>,
        with_samples: bool,
    ) -> Result<Vec<Vec<WindowPoint>>, DbError> {
        let limit = limit.max(0);
        let first = match series {
            [] => return Ok(Vec::new()),
            // One series' own walk is the cheaper: no runs to group, no environments apart.
            [one] => {
                return Ok(vec![
                    self.series_window(*one, limit, until, with_samples).await?,
                ]);
            }
            [first, ..] => *first,
        };
        let ids = serde_json::to_string(series).map_err(decode_error)?;
        let until_position = until.unwrap_or(i64::MAX);
        // Staged runs shadow merged ones, so every staged commit up to `until` comes whole
        // (the staged table holds what arrived since the last merge); then the newest
        // `limit` merged commits that any of the series measured, each with all its runs.
        // Not the checked macro: `f64_bits` exists only on this process's connections.
        let text: String = sqlx::query_scalar(
            r#"SELECT coalesce(group_concat(printf('%d %d %d %s', staged, position, committed_at,
                                                   sha) || coalesce(runs, ''), char(10)), '')
               FROM (SELECT 1 AS staged, c.position, c.sha, c.committed_at,
                            (SELECT group_concat(printf(';%d %d %d %s', x.series_id,
                                        f64_bits(x.value), x.run_id,
                                        CASE WHEN ?4 THEN hex(x.samples) ELSE '' END), '')
                             FROM measurements_staged x
                             WHERE x.commit_id = k.commit_id
                               AND x.series_id IN (SELECT value FROM json_each(?1))) AS runs
                     FROM staged_commits k
                     JOIN commits c ON c.id = k.commit_id
                     WHERE c.position IS NOT NULL AND c.position <= ?2
                     UNION ALL
                     SELECT * FROM (
                        SELECT 0, c.position, c.sha, c.committed_at,
                               (SELECT group_concat(printf(';%d %d %d %s', x.series_id,
                                           f64_bits(x.value), x.run_id,
                                           CASE WHEN ?4 THEN hex(x.samples) ELSE '' END), '')
                                FROM measurements x
                                WHERE x.series_id IN (SELECT value FROM json_each(?1))
                                  AND x.commit_id = c.id)
                        FROM commits c
                        WHERE c.repository_id = (SELECT b.repository_id FROM series s
                                                 JOIN benchmarks b ON b.id = s.benchmark_id
                                                 WHERE s.id = ?5)
                          AND c.position IS NOT NULL AND c.position <= ?2
                          AND EXISTS (SELECT 1 FROM measurements x
                                      WHERE x.series_id IN (SELECT value FROM json_each(?1))
                                        AND x.commit_id = c.id)
                        ORDER BY c.position DESC LIMIT ?3))"#,
        )
        .bind(ids)
        .bind(until_position)
        .bind(limit)
        .bind(with_samples)
        .bind(first)
        .fetch_one(&self.reader)
        .await?;
        let commits = (text.split('\n').filter(|line| !line.is_empty()))
            .map(CommitLine::parse)
            .collect::<Result<Vec<_>, _>>()?;
        // Where the walk stopped, when it stopped before the root: a series' points older
        // than that may be missing (a staged point there is older than merged ones unread).
        let merged = || commits.iter().filter(|c| !c.staged).map(|c| c.position);
        let stopped = (merged().count() as i64 == limit)
            .then(|| merged().min())
            .flatten();
        let index: HashMap<i64, usize> = (series.iter().enumerate())
            .map(|(i, id)| (*id, i))
            .collect();
        // Each series' runs, then the winner of each commit (`WindowRun::rank`: staged, then
        // the newer run), still unparsed: only the winners in a window become points.
        let mut found: Vec<Vec<Candidate<'_>>> = series.iter().map(|_| Vec::new()).collect();
        for commit in &commits {
            for run in commit.runs() {
                let run = run?;
                if let Some(&i) = index.get(&run.series_id) {
                    found[i].push(Candidate { commit, run });
                }
            }
        }
        let mut windows: Vec<Option<Vec<_>>> = Vec::with_capacity(series.len());
        for mut runs in found {
            runs.sort_unstable_by_key(Candidate::key);
            // The last run of each position is its winner.
            runs.dedup_by(|later, earlier| {
                let same = later.commit.position == earlier.commit.position;
                if same {
                    std::mem::swap(later, earlier);
                }
                same
            });
            // The walk stopped before the root and this series was not measured at enough of
            // its commits: older commits may hold the rest of its window.
            let short = stopped.is_some_and(|s| {
                (runs.iter().filter(|c| c.commit.position >= s).count() as i64) < limit
            });
            let keep = runs.len().saturating_sub(limit as usize);
            windows.push((!short).then(|| runs.split_off(keep)));
        }
        let run_ids = (windows.iter().flatten().flatten()).map(|c| c.run.run_id);
        let environments = self.run_environments(run_ids).await?;
        let mut read = Vec::with_capacity(series.len());
        for (id, window) in series.iter().zip(windows) {
            let Some(window) = window else {
                read.push(self.series_window(*id, limit, until, with_samples).await?);
                continue;
            };
            let points = (window.into_iter())
                .map(|Candidate { commit, run }| {
                    WindowRun::of(commit, &run)?.with_environment(&environments)
                })
                .collect::<Result<_, DbError>>()?;
            read.push(points);
        }
        Ok(read)
    }
}
