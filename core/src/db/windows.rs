//! A window of one series' history read point by point: the newest points up to a commit,
//! found by walking the tracked branch down from that commit (the index on commit positions)
//! and seeking each commit's measurement of the series in both tables. The walk stops once it
//! has the points asked for, so what it reads follows the window, not the history: at 100,000
//! commits the newest 1,000 cost what they cost at 1,000 (RELIABILITY.md, "Pages at any
//! history"). A window too wide to draw point by point is read from the series' summaries
//! instead (`summaries.rs`).
//!
//! Which run wins is as everywhere (`staging.rs`): the newest staged run of a (series, commit)
//! when there is one, the newest merged run otherwise.

use super::pages::{EnvironmentPoint, SeriesPoint};
use super::{Db, DbError};
use crate::model::Direction;
use crate::samples::Samples;
use crate::stats::run_value;

/// A point of a window with the environment of the run that measured it.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPoint {
    pub point: SeriesPoint,
    pub environment: EnvironmentPoint,
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
        let points = self.series_window(series_id, limit, until, true).await?;
        Ok(points.into_iter().map(|p| p.point).collect())
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
        let until = until.unwrap_or(i64::MAX);
        let rows = sqlx::query!(
            r#"SELECT c.position AS "position!", c.sha, c.committed_at,
                      coalesce(z.value, x.value) AS "value!: f64",
                      CASE WHEN ?4 THEN coalesce(z.samples, x.samples) ELSE x'' END
                        AS "samples!: Samples",
                      u.kernel, u.toolchain
               FROM commits c
               LEFT JOIN measurements_staged z ON z.commit_id = c.id AND z.series_id = ?1
                    AND z.run_id = (SELECT max(w.run_id) FROM measurements_staged w
                                    WHERE w.commit_id = c.id AND w.series_id = ?1)
               LEFT JOIN measurements x ON z.run_id IS NULL AND x.series_id = ?1
                    AND x.commit_id = c.id
                    AND x.run_id = (SELECT max(y.run_id) FROM measurements y
                                    WHERE y.series_id = ?1 AND y.commit_id = c.id)
               JOIN runs u ON u.id = coalesce(z.run_id, x.run_id)
               WHERE c.repository_id = (SELECT b.repository_id FROM series s
                                        JOIN benchmarks b ON b.id = s.benchmark_id
                                        WHERE s.id = ?1)
                 AND c.position IS NOT NULL AND c.position <= ?2
               ORDER BY c.position DESC LIMIT ?3"#,
            series_id,
            until,
            limit,
            with_samples
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows
            .into_iter()
            .rev()
            .map(|r| WindowPoint {
                point: SeriesPoint {
                    position: r.position,
                    sha: r.sha,
                    committed_at: r.committed_at,
                    value: r.value,
                    samples: r.samples,
                },
                environment: EnvironmentPoint {
                    position: r.position,
                    kernel: r.kernel,
                    toolchain: r.toolchain,
                },
            })
            .collect())
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
