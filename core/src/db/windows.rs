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
use super::{Db, DbError, decimal_f64, decode_error};
use crate::model::Direction;
use crate::samples::Samples;
use crate::stats::run_value;

/// A point of a window with the environment of the run that measured it.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPoint {
    pub point: SeriesPoint,
    pub environment: EnvironmentPoint,
}

/// A point of a window as its query spells it: position, sha, commit time, the value in
/// decimal, the samples' stored bytes in hex, kernel and toolchain.
#[derive(serde::Deserialize)]
struct WindowRow(
    i64,
    String,
    i64,
    #[serde(deserialize_with = "decimal_f64")] f64,
    String,
    String,
    String,
);

impl WindowRow {
    fn point(self) -> Result<WindowPoint, DbError> {
        let WindowRow(position, sha, committed_at, value, samples, kernel, toolchain) = self;
        let bytes = hex::decode(samples).map_err(decode_error)?;
        let samples = Samples(crate::samples::decode(&bytes).map_err(decode_error)?);
        Ok(WindowPoint {
            point: SeriesPoint {
                position,
                sha,
                committed_at,
                value,
                samples,
            },
            environment: EnvironmentPoint {
                position,
                kernel,
                toolchain,
            },
        })
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
        // One row of JSON rather than a row a point: handing each of a window's 1,000 rows from
        // SQLite's thread to this task cost more than finding it. Samples travel as their stored
        // bytes in hex, values in decimal (see `decimal_f64`).
        let rows = sqlx::query_scalar!(
            r#"SELECT json_group_array(json_array(position, sha, committed_at,
                          printf('%!.20e', value), hex(samples), kernel, toolchain))
                        AS "rows!: String"
               FROM (SELECT c.position, c.sha, c.committed_at,
                            coalesce(z.value, x.value) AS value,
                            CASE WHEN ?4 THEN coalesce(z.samples, x.samples) ELSE x'' END
                              AS samples,
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
                     ORDER BY c.position DESC LIMIT ?3)"#,
            series_id,
            until,
            limit,
            with_samples
        )
        .fetch_one(&self.reader)
        .await?;
        let rows: Vec<WindowRow> = serde_json::from_str(&rows).map_err(decode_error)?;
        let mut points = (rows.into_iter())
            .map(WindowRow::point)
            .collect::<Result<Vec<_>, DbError>>()?;
        points.sort_by_key(|p| p.point.position);
        Ok(points)
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
