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

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use super::pages::SeriesPoint;
use super::windows::{WindowPoint, WindowRun};
use super::{Db, DbError, decimal_f64, decode_error, unhex};
use crate::samples::Samples;

/// A commit of the walk as the query spells it: whether its runs are staged, position, sha,
/// commit time, and its runs of the series.
#[derive(serde::Deserialize)]
struct CommitRow<'a>(u8, i64, String, i64, #[serde(borrow)] Vec<RunRow<'a>>);

/// A run of one series at a commit: the series, the value in decimal, the samples' stored
/// bytes in hex (empty unless asked for), the run.
#[derive(serde::Deserialize)]
struct RunRow<'a>(
    i64,
    #[serde(deserialize_with = "decimal_f64")] f64,
    #[serde(borrow)] Cow<'a, str>,
    i64,
);

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
        let json = sqlx::query_scalar!(
            r#"SELECT json_group_array(json_array(staged, position, sha, committed_at, json(runs)))
                        AS "rows!: String"
               FROM (SELECT 1 AS staged, c.position, c.sha, c.committed_at,
                            (SELECT json_group_array(json_array(x.series_id,
                                        printf('%!.20e', x.value),
                                        CASE WHEN ?4 THEN hex(x.samples) ELSE '' END, x.run_id))
                             FROM measurements_staged x
                             WHERE x.commit_id = k.commit_id
                               AND x.series_id IN (SELECT value FROM json_each(?1))) AS runs
                     FROM staged_commits k
                     JOIN commits c ON c.id = k.commit_id
                     WHERE c.position IS NOT NULL AND c.position <= ?2
                     UNION ALL
                     SELECT * FROM (
                        SELECT 0, c.position, c.sha, c.committed_at,
                               (SELECT json_group_array(json_array(x.series_id,
                                           printf('%!.20e', x.value),
                                           CASE WHEN ?4 THEN hex(x.samples) ELSE '' END,
                                           x.run_id))
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
            ids,
            until_position,
            limit,
            with_samples,
            first
        )
        .fetch_one(&self.reader)
        .await?;
        let commits: Vec<CommitRow<'_>> = serde_json::from_str(&json).map_err(decode_error)?;
        // Where the walk stopped, when it stopped before the root: a series' points older
        // than that may be missing (a staged point there is older than merged ones unread).
        let merged: Vec<i64> = (commits.iter()).filter(|c| c.0 == 0).map(|c| c.1).collect();
        let stopped = (merged.len() as i64 == limit).then(|| merged.iter().min().copied());
        let stopped = stopped.flatten();
        let index: HashMap<i64, usize> = (series.iter().enumerate())
            .map(|(i, id)| (*id, i))
            .collect();
        let mut best: Vec<BTreeMap<i64, WindowRun>> =
            series.iter().map(|_| BTreeMap::new()).collect();
        for CommitRow(staged, position, sha, committed_at, runs) in commits {
            for RunRow(series_id, value, hex, run_id) in runs {
                let Some(&i) = index.get(&series_id) else {
                    continue;
                };
                let bytes = unhex(&hex)?;
                let candidate = WindowRun {
                    staged: staged != 0,
                    run_id,
                    point: SeriesPoint {
                        position,
                        sha: sha.clone(),
                        committed_at,
                        value,
                        samples: Samples(crate::samples::decode(&bytes).map_err(decode_error)?),
                    },
                    environment: None,
                };
                match best[i].get(&position) {
                    Some(held) if held.rank() >= candidate.rank() => {}
                    _ => {
                        best[i].insert(position, candidate);
                    }
                }
            }
        }
        let environments = self.run_environments(&best).await?;
        let mut windows = Vec::with_capacity(series.len());
        for (id, points) in series.iter().zip(best) {
            // The walk stopped before the root and this series was not measured at enough of
            // its commits: older commits may hold the rest of its window.
            if stopped.is_some_and(|s| (points.range(s..).count() as i64) < limit) {
                windows.push(self.series_window(*id, limit, until, with_samples).await?);
                continue;
            }
            let keep = points.len().saturating_sub(limit as usize);
            let window = (points.into_values().skip(keep))
                .map(|mut run| {
                    run.environment = environments.get(&run.run_id).cloned();
                    run.with_environment()
                })
                .collect::<Result<_, DbError>>()?;
            windows.push(window);
        }
        Ok(windows)
    }

    /// The kernel and toolchain of every run that won a point of `best`, read once a run.
    async fn run_environments(
        &self,
        best: &[BTreeMap<i64, WindowRun>],
    ) -> Result<HashMap<i64, (String, String)>, DbError> {
        let mut runs: Vec<i64> = (best.iter().flat_map(|b| b.values()))
            .map(|c| c.run_id)
            .collect();
        runs.sort_unstable();
        runs.dedup();
        let ids = serde_json::to_string(&runs).map_err(decode_error)?;
        let json = sqlx::query_scalar!(
            r#"SELECT json_group_array(json_array(id, kernel, toolchain)) AS "rows!: String"
               FROM runs WHERE id IN (SELECT value FROM json_each(?1))"#,
            ids
        )
        .fetch_one(&self.reader)
        .await?;
        let rows: Vec<(i64, String, String)> = serde_json::from_str(&json).map_err(decode_error)?;
        Ok(rows
            .into_iter()
            .map(|(id, kernel, toolchain)| (id, (kernel, toolchain)))
            .collect())
    }
}
