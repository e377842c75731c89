//! A window of a series too wide to draw point by point, read from its summaries: the window
//! is covered by whole buckets of one level (a few hundred, whatever the history), with finer
//! buckets at its two ends and points read one by one only where no bucket fits (the ends,
//! and the level-0 buckets that hold staged rows, which the summaries do not have yet).

use std::collections::{BTreeMap, HashMap};

use super::pages::Environment;
use super::summaries::{StoredSummary, SummaryRange, read_summaries};
use super::{Db, DbError, decode_error};
use crate::series_summary::{
    BucketSummary, LEVELS, Located, Piece, SummaryPoint, bucket_of, cover, drawn_points, level_for,
    summarize,
};

/// A window of a series as summaries: what a chart of it draws.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SummaryWindow {
    /// Disjoint summaries that cover the window, in position order.
    pub buckets: Vec<BucketSummary>,
    /// The points a chart draws of the buckets ([`drawn_points`]), in position order.
    pub drawn: Vec<Located>,
    /// The sha and commit time (Unix seconds) of every drawn point.
    pub commits: HashMap<i64, (String, i64)>,
    /// The kernel and toolchain of every environment the buckets name.
    pub environments: HashMap<i64, Environment>,
}

/// A point read one by one: its position, value and its run's environment.
#[derive(Clone)]
struct RawPoint {
    position: i64,
    value: f64,
    kernel: String,
    toolchain: String,
}

/// Points by position; of two at one position (two runs), the later in `rows` wins.
fn by_position(rows: Vec<RawPoint>) -> BTreeMap<i64, RawPoint> {
    rows.into_iter().map(|p| (p.position, p)).collect()
}

impl Db {
    /// The newest `last` commits of history up to position `until` (the series' newest point
    /// when `None`) of a series, summarized at the coarsest level that still gives `buckets`
    /// buckets over them ([`level_for`], [`cover`]); `None` when the window holds too few
    /// commits for that (a short history), and is read point by point.
    pub async fn series_summary_window(
        &self,
        series_id: i64,
        last: i64,
        until: Option<i64>,
        buckets: i64,
    ) -> Result<Option<SummaryWindow>, DbError> {
        let staged = self.staged_points(series_id).await?;
        let newest_merged = sqlx::query_scalar!(
            r#"SELECT max(last_position) AS "newest?: i64" FROM series_summaries
               WHERE series_id = ? AND level = ?"#,
            series_id,
            LEVELS - 1
        )
        .fetch_one(&self.reader)
        .await?;
        let newest = newest_merged.max(staged.keys().next_back().copied());
        let Some(to) = until.or(newest) else {
            return Ok(None);
        };
        let from = (to - last + 1).max(0);
        let Some(level) = level_for(to - from + 1, buckets) else {
            return Ok(None);
        };
        let dirty: Vec<i64> = (staged.range(from..=to))
            .map(|(position, _)| bucket_of(0, *position))
            .collect();
        let pieces = cover(from, to, level, &dirty);
        let stored = self.stored_pieces(series_id, &pieces).await?;
        let ranges: Vec<(i64, i64)> = (pieces.iter())
            .filter_map(|p| match *p {
                Piece::Points(a, b) => Some((a, b)),
                Piece::Bucket { .. } => None,
            })
            .collect();
        let mut raw = self.merged_points_in(series_id, &ranges).await?;
        // A staged run is later than any merged run of its commit: it wins.
        for (position, point) in staged.range(from..=to) {
            raw.insert(*position, point.clone());
        }
        let mut names = self.environment_names().await?;
        let mut ids: HashMap<(String, String), i64> = (names.iter())
            .map(|(id, name)| (name.clone(), *id))
            .collect();
        let mut summaries = Vec::with_capacity(pieces.len());
        for piece in &pieces {
            match *piece {
                Piece::Bucket { level, bucket } => {
                    summaries.extend(stored.get(&(level, bucket)).copied());
                }
                Piece::Points(a, b) => {
                    let points: Vec<SummaryPoint> = (raw.range(a..=b))
                        .map(|(_, p)| {
                            let name = (p.kernel.clone(), p.toolchain.clone());
                            // An environment only staged runs ran in has no number yet.
                            let fresh = -(ids.len() as i64) - 1;
                            let environment = *ids.entry(name.clone()).or_insert(fresh);
                            names.entry(environment).or_insert(name);
                            SummaryPoint {
                                position: p.position,
                                value: p.value,
                                environment,
                            }
                        })
                        .collect();
                    // Ends and staged stretches, by the level-0 buckets they fall in.
                    let bucket = |p: &SummaryPoint| bucket_of(0, p.position);
                    for part in points.chunk_by(|p, q| bucket(p) == bucket(q)) {
                        summaries.extend(summarize(0, bucket(&part[0]), part));
                    }
                }
            }
        }
        let drawn = drawn_points(&summaries);
        let commits = self.commits_at(series_id, &drawn).await?;
        names.retain(|id, _| {
            (summaries.iter()).any(|b| {
                b.first_environment == *id
                    || b.last_environment == *id
                    || b.change.is_some_and(|c| c.to == *id || c.from == *id)
            })
        });
        Ok(Some(SummaryWindow {
            buckets: summaries,
            drawn,
            commits,
            environments: (names.into_iter())
                .map(|(id, (kernel, toolchain))| (id, (kernel.into(), toolchain.into())))
                .collect(),
        }))
    }

    /// The staged points of a series on the tracked branch (its latest staged run of each
    /// commit), by position: one key seek per staged commit.
    async fn staged_points(&self, series_id: i64) -> Result<BTreeMap<i64, RawPoint>, DbError> {
        let rows = sqlx::query_as!(
            RawPoint,
            r#"SELECT c.position AS "position!", x.value, u.kernel, u.toolchain
               FROM staged_commits k
               CROSS JOIN measurements_staged x ON x.commit_id = k.commit_id AND x.series_id = ?1
               JOIN commits c ON c.id = x.commit_id
               JOIN runs u ON u.id = x.run_id
               WHERE c.position IS NOT NULL
               ORDER BY 1, x.run_id"#,
            series_id
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(by_position(rows))
    }

    /// The merged points of a series at the positions of `ranges` (inclusive), by position.
    async fn merged_points_in(
        &self,
        series_id: i64,
        ranges: &[(i64, i64)],
    ) -> Result<BTreeMap<i64, RawPoint>, DbError> {
        if ranges.is_empty() {
            return Ok(BTreeMap::new());
        }
        let json = serde_json::to_string(ranges).expect("integers");
        let rows = sqlx::query_as!(
            RawPoint,
            r#"SELECT c.position AS "position!", x.value AS "value!", u.kernel AS "kernel!",
                      u.toolchain AS "toolchain!"
               FROM jsonb_each(?2) AS j
               CROSS JOIN commits c ON c.repository_id = (SELECT b.repository_id FROM series s
                                          JOIN benchmarks b ON b.id = s.benchmark_id
                                          WHERE s.id = ?1)
                    AND c.position BETWEEN j.value ->> 0 AND j.value ->> 1
               CROSS JOIN measurements x ON x.series_id = ?1 AND x.commit_id = c.id
               JOIN runs u ON u.id = x.run_id
               WHERE x.run_id = (SELECT max(y.run_id) FROM measurements y
                                 WHERE y.series_id = ?1 AND y.commit_id = c.id)"#,
            series_id,
            json
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(by_position(rows))
    }

    /// The stored summaries of the whole-bucket pieces, by (level, bucket): the runs of
    /// consecutive buckets of a level read as ranges.
    async fn stored_pieces(
        &self,
        series_id: i64,
        pieces: &[Piece],
    ) -> Result<HashMap<(u8, i64), BucketSummary>, DbError> {
        let mut ranges: Vec<SummaryRange> = Vec::new();
        for piece in pieces {
            let Piece::Bucket { level, bucket } = *piece else {
                continue;
            };
            match ranges.last_mut() {
                Some((_, l, _, to)) if *l == level && *to + 1 == bucket => *to = bucket,
                _ => ranges.push((series_id, level, bucket, bucket)),
            }
        }
        let mut conn = self.reader.acquire().await?;
        Ok((read_summaries(&mut conn, &ranges).await?)
            .into_iter()
            .map(|(_, s)| ((s.level, s.bucket), s))
            .collect())
    }

    /// Every numbered environment's kernel and toolchain (a handful: one per upgrade).
    async fn environment_names(&self) -> Result<HashMap<i64, (String, String)>, DbError> {
        let rows = sqlx::query!(r#"SELECT id AS "id!", kernel, toolchain FROM run_environments"#)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| (r.id, (r.kernel, r.toolchain)))
            .collect())
    }

    /// The sha and time of the commits at the positions of `points`.
    async fn commits_at(
        &self,
        series_id: i64,
        points: &[Located],
    ) -> Result<HashMap<i64, (String, i64)>, DbError> {
        let positions: Vec<i64> = points.iter().map(|p| p.position).collect();
        if positions.is_empty() {
            return Ok(HashMap::new());
        }
        let json = serde_json::to_string(&positions).expect("integers");
        // One row of JSON rather than a row a commit: a page names some 1,500 commits a chart,
        // and each row handed from SQLite's thread to the page's costs more than finding it.
        let found = sqlx::query_scalar!(
            r#"SELECT json_group_array(json_array(c.position, c.sha, c.committed_at))
                 AS "found!: String"
               FROM json_each(?2) AS j
               CROSS JOIN commits c ON c.repository_id = (SELECT b.repository_id FROM series s
                                          JOIN benchmarks b ON b.id = s.benchmark_id
                                          WHERE s.id = ?1)
                    AND c.position = j.value"#,
            series_id,
            json
        )
        .fetch_one(&self.reader)
        .await?;
        let rows: Vec<(i64, String, i64)> = serde_json::from_str(&found).map_err(decode_error)?;
        Ok(rows
            .into_iter()
            .map(|(position, sha, time)| (position, (sha, time)))
            .collect())
    }

    /// The stored summaries of a series at `level`, in position order: what tests compare
    /// with a full read.
    pub async fn series_summaries(
        &self,
        series_id: i64,
        level: u8,
    ) -> Result<Vec<BucketSummary>, DbError> {
        let rows = sqlx::query_as!(
            StoredSummary,
            r#"SELECT series_id, level, bucket, points, low_position, low_value, high_position,
                      high_value, first_position, first_value, last_position, last_value,
                      first_environment, last_environment, change_position, change_from,
                      change_to
               FROM series_summaries WHERE series_id = ? AND level = ? ORDER BY bucket"#,
            series_id,
            level
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows.iter().map(StoredSummary::summary).collect())
    }

    /// Every merged point of a series (the latest run of each commit on the branch), in
    /// position order, as summaries see them: a full read, for tests to summarize themselves.
    pub async fn series_summary_points(
        &self,
        series_id: i64,
    ) -> Result<Vec<SummaryPoint>, DbError> {
        let mut conn = self.reader.acquire().await?;
        super::summaries::series_points_merged(&mut conn, series_id, false).await
    }
}
