//! A series' recent history in order: what verdicts and their noise models read, with a limit
//! (a per-commit verdict needs the last hundred points, not the whole series) and, for a
//! compare of many series, in one query; and the noise models the analysis stores so that a
//! compare need not read that history at all.

use crate::model::Direction;
use crate::stats::{NoiseModel, NoiseWindow, run_value};

use super::{Db, DbError};
use crate::samples::Samples;

/// A run's value as verdicts see it ([`run_value`]), its direction as stored.
fn verdict_value(value: f64, samples: &[f64], direction: &str) -> f64 {
    run_value(
        value,
        samples,
        Direction::parse(direction).unwrap_or(Direction::Lower),
    )
}

impl Db {
    /// The values of many series at history positions `from..before` (the latest run per
    /// commit), by series then position: the recent history of every series of a commit in
    /// one query, one key lookup per series and commit of the window, series outermost (as in
    /// [`Db::recent_values`], so that each series' lookups share its pages).
    pub async fn series_values_between(
        &self,
        repository_id: i64,
        series_ids: &[i64],
        from: i64,
        before: i64,
    ) -> Result<Vec<(i64, i64, f64)>, DbError> {
        let ids = serde_json::to_string(series_ids).expect("integers serialize");
        let rows = sqlx::query!(
            r#"SELECT x.series_id AS "series_id!", c.position AS "position!", x.value,
                      x.samples AS "samples: Samples", s.direction
               FROM (SELECT DISTINCT value FROM json_each(?3)) AS j
               CROSS JOIN commits c
               CROSS JOIN measurements x ON x.series_id = j.value AND x.commit_id = c.id
               JOIN series s ON s.id = x.series_id
               WHERE c.repository_id = ?1 AND c.position >= ?2 AND c.position < ?4
                 AND x.run_id = (SELECT max(y.run_id) FROM measurements y
                                 WHERE y.series_id = x.series_id AND y.commit_id = x.commit_id)
                 AND (x.commit_id < (SELECT min(commit_id) FROM measurements_staged)
                      OR NOT EXISTS (SELECT 1 FROM measurements_staged z
                                     WHERE z.commit_id = x.commit_id AND z.series_id = x.series_id))
               UNION ALL
               SELECT x.series_id, c.position, x.value, x.samples, s.direction
               FROM (SELECT DISTINCT value FROM json_each(?3)) AS j
               CROSS JOIN staged_commits k
               CROSS JOIN commits c ON c.id = k.commit_id
               CROSS JOIN measurements_staged x ON x.commit_id = c.id AND x.series_id = j.value
               JOIN series s ON s.id = x.series_id
               WHERE c.repository_id = ?1 AND c.position >= ?2 AND c.position < ?4
                 AND x.run_id = (SELECT max(z.run_id) FROM measurements_staged z
                                 WHERE z.commit_id = x.commit_id AND z.series_id = x.series_id)
               ORDER BY 1, 2"#,
            repository_id,
            from,
            ids,
            before
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let value = verdict_value(r.value, &r.samples, &r.direction);
                (r.series_id, r.position, value)
            })
            .collect())
    }

    /// Stores the noise windows of many series, in one transaction: for each, the series' id,
    /// the commit of its last point, and the windows measured up to that point. A window
    /// already stored with the same model and bounds is left alone (its `updated_at` too), so
    /// that analysing unchanged history writes nothing. Returns how many rows changed.
    pub async fn store_noise_windows(
        &self,
        series: &[(i64, i64, Vec<NoiseWindow>)],
        now: i64,
    ) -> Result<u64, DbError> {
        let mut tx = self.begin_write().await?;
        let mut changed = 0;
        for (series_id, last_commit_id, windows) in series {
            for w in windows {
                let through_last = w.before_position.is_none();
                // The window through the last point ends at it; the one before stops below it.
                let last_position = w.before_position.or(w.newest_position);
                let (series_id, last_commit_id, m) = (*series_id, *last_commit_id, &w.model);
                let (changes, samples_per_commit) = (m.changes as i64, m.samples_per_commit as i64);
                changed += sqlx::query!(
                    r#"INSERT INTO series_noise (series_id, through_last, last_commit_id, last_position,
                           newest_position, before_position, level, between_commit_sd, between_commit_pct,
                           within_run_cv_pct, changes, samples_per_commit, updated_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (series_id, through_last) DO UPDATE SET
                           last_commit_id = excluded.last_commit_id, last_position = excluded.last_position,
                           newest_position = excluded.newest_position,
                           before_position = excluded.before_position, level = excluded.level,
                           between_commit_sd = excluded.between_commit_sd,
                           between_commit_pct = excluded.between_commit_pct,
                           within_run_cv_pct = excluded.within_run_cv_pct, changes = excluded.changes,
                           samples_per_commit = excluded.samples_per_commit,
                           updated_at = excluded.updated_at
                       WHERE (series_noise.last_commit_id, series_noise.last_position,
                              series_noise.newest_position, series_noise.before_position,
                              series_noise.level, series_noise.between_commit_sd,
                              series_noise.between_commit_pct, series_noise.within_run_cv_pct,
                              series_noise.changes, series_noise.samples_per_commit)
                         IS NOT (excluded.last_commit_id, excluded.last_position,
                                 excluded.newest_position, excluded.before_position, excluded.level,
                                 excluded.between_commit_sd, excluded.between_commit_pct,
                                 excluded.within_run_cv_pct, excluded.changes,
                                 excluded.samples_per_commit)"#,
                    series_id,
                    through_last,
                    last_commit_id,
                    last_position,
                    w.newest_position,
                    w.before_position,
                    m.level,
                    m.between_commit_sd,
                    m.between_commit_pct,
                    m.within_run_cv_pct,
                    changes,
                    samples_per_commit,
                    now
                )
                .execute(&mut *tx)
                .await?
                .rows_affected();
            }
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// The stored noise windows of many series, in one query, leaving out those whose series'
    /// last point has moved in history since (a force-push renumbered it).
    pub async fn noise_windows(
        &self,
        series_ids: &[i64],
    ) -> Result<Vec<(i64, NoiseWindow)>, DbError> {
        let ids = serde_json::to_string(series_ids).expect("integers serialize");
        let rows = sqlx::query!(
            r#"SELECT n.series_id, n.newest_position, n.before_position, n.level,
                      n.between_commit_sd, n.between_commit_pct, n.within_run_cv_pct, n.changes,
                      n.samples_per_commit
               FROM series_noise n JOIN commits c ON c.id = n.last_commit_id
               WHERE n.series_id IN (SELECT value FROM json_each(?))
                 AND c.position = n.last_position"#,
            ids
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let model = NoiseModel {
                    level: r.level,
                    between_commit_sd: r.between_commit_sd,
                    between_commit_pct: r.between_commit_pct,
                    within_run_cv_pct: r.within_run_cv_pct,
                    changes: r.changes as usize,
                    samples_per_commit: r.samples_per_commit as usize,
                };
                let window = NoiseWindow {
                    newest_position: r.newest_position,
                    before_position: r.before_position,
                    model,
                };
                (r.series_id, window)
            })
            .collect())
    }

    /// When the analysis last changed anything stored for a series (its change points or its
    /// noise models), or `None` when it never stored anything: how to tell that re-analysing
    /// unchanged history wrote nothing.
    pub async fn analysis_changed_at(&self, series_id: i64) -> Result<Option<i64>, DbError> {
        Ok(sqlx::query_scalar!(
            r#"SELECT max(updated_at) AS "updated_at?: i64" FROM (
                   SELECT updated_at FROM regressions WHERE series_id = ?1
                   UNION ALL SELECT updated_at FROM series_noise WHERE series_id = ?1)"#,
            series_id
        )
        .fetch_one(&self.reader)
        .await?)
    }
}

/// A value of a series at a commit near the head of the branch.
#[derive(Debug, Clone, PartialEq)]
pub struct RecentValue {
    pub series_id: i64,
    pub position: i64,
    pub value: f64,
}

impl Db {
    /// Every series' values at the newest `window` positions of the tracked branch, oldest
    /// first within each series (the latest run of a commit last). One key lookup per series
    /// and commit of the window, so the cost follows the window and the series, not the
    /// history. Series are the outer loop (`CROSS JOIN` keeps SQLite to that order): a series'
    /// lookups then land on the same page or two, where commits outermost would visit every
    /// series' pages once per commit, more than a reader's page cache holds.
    pub async fn recent_values(
        &self,
        repository_id: i64,
        window: i64,
    ) -> Result<Vec<RecentValue>, DbError> {
        let rows = sqlx::query!(
            r#"SELECT x.series_id AS "series_id!", c.position AS "position!", x.value, x.run_id
               FROM benchmarks b JOIN series s ON s.benchmark_id = b.id
               CROSS JOIN commits c
               CROSS JOIN measurements x ON x.series_id = s.id AND x.commit_id = c.id
               WHERE b.repository_id = ?1 AND c.repository_id = ?1 AND c.position IS NOT NULL
                 AND c.position > (SELECT coalesce(max(position), 0) FROM commits
                                   WHERE repository_id = ?1) - ?2
               UNION ALL
               SELECT x.series_id, c.position, x.value, x.run_id
               FROM staged_commits k
               CROSS JOIN commits c ON c.id = k.commit_id
               CROSS JOIN measurements_staged x ON x.commit_id = c.id
               WHERE c.repository_id = ?1 AND c.position IS NOT NULL
                 AND c.position > (SELECT coalesce(max(position), 0) FROM commits
                                   WHERE repository_id = ?1) - ?2
               ORDER BY 1, 2, 4"#,
            repository_id,
            window
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| RecentValue {
                series_id: r.series_id,
                position: r.position,
                value: r.value,
            })
            .collect())
    }
}
