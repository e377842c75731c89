//! Keeping the series summaries (migration 0035, [`crate::series_summary`]) equal to what a
//! full read of the merged measurements gives, piece by piece:
//!
//! - **a merge** ([`absorb_merge`]) adds the points it moves: a bucket whose new points all
//!   come after its last one (the usual case: new commits) is combined with them; any other
//!   (a late commit inside it, a commit measured again) is summarized again from its points.
//!   Then each bucket above a changed one is combined again from its four children.
//! - **history that moved** ([`Db::record_history`] after a force-push, or commits that joined
//!   the branch after they were measured): the buckets from the first moved position on are
//!   summarized again ([`refresh_positions`]).
//! - **a deleted series**: a trigger deletes its summaries.
//! - **a database from before 0035**: [`build_pending`] summarizes each series once, when it
//!   is opened.
//!
//! Readers add the staged rows themselves (`summary_reads.rs`), so nothing here runs at upload.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sqlx::SqliteConnection;

use super::DbError;
use super::window_lines::RunLine;
use crate::series_summary::{
    BucketSummary, EnvironmentChange, FANOUT, LEVELS, Located, SummaryPoint, bucket_of, combine,
    summarize, summarize_all,
};

/// A bucket of one series: (series id, bucket).
pub(super) type BucketKey = (i64, i64);

/// Level-0 buckets summarized again from their points in one statement: bounds the JSON of
/// keys and the rows one query returns.
const KEYS_PER_QUERY: usize = 4_096;

/// Adds to the summaries the points of the staged rows of commits up to `through_commit`,
/// which the caller has just copied into `measurements` (and not yet deleted from the staged
/// table), in its transaction.
pub(super) async fn absorb_merge(
    conn: &mut SqliteConnection,
    through_commit: i64,
) -> Result<(), DbError> {
    // The positions of the staged commits (a few hundred), then their runs: as one text of a
    // line each (`window_lines.rs`) rather than a row each, since a merge moves some 200,000
    // and handing each from SQLite's thread to this task cost more than the rest of the
    // merge's summaries. Not the checked macro, which knows no `window_run`.
    let positions: HashMap<i64, i64> = sqlx::query!(
        r#"SELECT c.id AS "id!", c.position AS "position!" FROM staged_commits s
           JOIN commits c ON c.id = s.commit_id
           WHERE s.commit_id <= ? AND c.position IS NOT NULL"#,
        through_commit
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|c| (c.id, c.position))
    .collect();
    let lines: Option<String> = sqlx::query_scalar(
        "SELECT group_concat(window_run(1, series_id, commit_id, value, run_id, NULL), char(10))
         FROM measurements_staged WHERE commit_id <= ?",
    )
    .bind(through_commit)
    .fetch_one(&mut *conn)
    .await?;
    let mut rows = Vec::new();
    for line in lines.as_deref().unwrap_or_default().lines() {
        let run = RunLine::parse(line)?;
        if let Some(&position) = positions.get(&run.commit_id) {
            rows.push(StagedPoint {
                series_id: run.series_id,
                position,
                value: run.value,
                run_id: run.run_id,
            });
        }
    }
    let runs: BTreeSet<i64> = rows.iter().map(|r| r.run_id).collect();
    let environments = environment_ids(conn, &runs).await?;
    // The latest run of each (series, position), grouped by bucket: sorted rather than mapped
    // (some 200,000 rows).
    rows.sort_unstable_by_key(|r| (r.series_id, r.position, r.run_id));
    let mut added: Vec<(BucketKey, Vec<SummaryPoint>)> = Vec::new();
    for r in rows.chunk_by(|a, b| (a.series_id, a.position) == (b.series_id, b.position)) {
        let r = r.last().expect("chunks are never empty");
        let key = (r.series_id, bucket_of(0, r.position));
        let point = SummaryPoint {
            position: r.position,
            value: r.value,
            environment: environments.get(&r.run_id).copied().unwrap_or_default(),
        };
        match added.last_mut() {
            Some((last, points)) if *last == key => points.push(point),
            _ => added.push((key, vec![point])),
        }
    }
    let stored = read_level0(conn, added.iter().map(|(key, _)| *key)).await?;
    let mut level0 = Vec::with_capacity(added.len());
    let mut again = BTreeSet::new();
    for (key, points) in &added {
        match stored.get(key) {
            Some(old) if points[0].position <= old.last.position => {
                again.insert(*key);
            }
            old => {
                let new = summarize(0, key.1, points);
                let parts: Vec<BucketSummary> = old.into_iter().copied().chain(new).collect();
                level0.push((*key, combine(0, key.1, &parts)));
            }
        }
    }
    level0.extend(summarize_again(conn, &again).await?);
    store_and_propagate(conn, level0).await
}

/// A staged measurement as [`absorb_merge`] reads it: series, position, value, run.
struct StagedPoint {
    series_id: i64,
    position: i64,
    value: f64,
    run_id: i64,
}

/// After the tracked branch's chain was recorded anew (`before` and `after`: its commits by
/// position), summarizes again the buckets from the first position whose commit changed,
/// when a commit that moved there (in or out) was measured. A push that only adds commits
/// not measured yet costs one lookup.
pub(super) async fn follow_moved_history(
    conn: &mut SqliteConnection,
    repository_id: i64,
    before: &[i64],
    after: &[i64],
) -> Result<(), DbError> {
    let common = before.len().min(after.len());
    let first_moved = (before.iter().zip(after))
        .position(|(a, b)| a != b)
        .unwrap_or(common);
    let end = before.len().max(after.len());
    if first_moved == end {
        return Ok(());
    }
    let moved: Vec<i64> = (before[first_moved.min(before.len())..].iter())
        .chain(&after[first_moved.min(after.len())..])
        .copied()
        .collect();
    let json = serde_json::to_string(&moved).expect("integers");
    let measured = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM json_each(?) AS j CROSS JOIN runs u ON u.commit_id = j.value)
             AS "measured!: bool""#,
        json
    )
    .fetch_one(&mut *conn)
    .await?;
    if !measured {
        return Ok(());
    }
    refresh_positions(conn, repository_id, first_moved as i64, end as i64 - 1).await
}

/// Summarizes again every bucket of the repository's series that holds a position from `from`
/// to `to`: after positions there changed.
pub(super) async fn refresh_positions(
    conn: &mut SqliteConnection,
    repository_id: i64,
    from: i64,
    to: i64,
) -> Result<(), DbError> {
    let series = sqlx::query_scalar!(
        r#"SELECT s.id AS "id!" FROM series s JOIN benchmarks b ON b.id = s.benchmark_id
           WHERE b.repository_id = ?"#,
        repository_id
    )
    .fetch_all(&mut *conn)
    .await?;
    let buckets = bucket_of(0, from)..=bucket_of(0, to.max(from));
    let keys: Vec<BucketKey> = (series.iter())
        .flat_map(|&s| buckets.clone().map(move |b| (s, b)))
        .collect();
    for chunk in keys.chunks(KEYS_PER_QUERY) {
        let chunk: BTreeSet<BucketKey> = chunk.iter().copied().collect();
        let level0 = summarize_again(conn, &chunk).await?;
        store_and_propagate(conn, level0).await?;
    }
    Ok(())
}

/// Builds the summaries of the series that have none yet (those of a database from before
/// migration 0035), one series a transaction; returns how many.
pub(super) async fn build_pending(writer: &sqlx::SqlitePool) -> Result<u64, DbError> {
    let mut built = 0;
    loop {
        let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
        let Some(series_id) =
            sqlx::query_scalar!("SELECT series_id FROM series_summaries_pending LIMIT 1")
                .fetch_optional(&mut *tx)
                .await?
        else {
            return Ok(built);
        };
        let points = series_points_merged(&mut tx, series_id, true).await?;
        let rows: Vec<(SummaryKey, Option<BucketSummary>)> = summarize_all(&points)
            .into_iter()
            .map(|s| ((series_id, s.level, s.bucket), Some(s)))
            .collect();
        sqlx::query!(
            "DELETE FROM series_summaries WHERE series_id = ?",
            series_id
        )
        .execute(&mut *tx)
        .await?;
        write_summaries(&mut tx, &rows).await?;
        sqlx::query!(
            "DELETE FROM series_summaries_pending WHERE series_id = ?",
            series_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        built += 1;
    }
}

/// Every merged point of a series on the tracked branch (the latest run of each commit), in
/// position order: a full read, for building its summaries once.
/// Environments not numbered yet are numbered when `number` (a writer), else left at 0.
pub(super) async fn series_points_merged(
    conn: &mut SqliteConnection,
    series_id: i64,
    number: bool,
) -> Result<Vec<SummaryPoint>, DbError> {
    let rows = sqlx::query!(
        r#"SELECT c.position AS "position!", x.value, x.run_id
           FROM measurements x JOIN commits c ON c.id = x.commit_id
           WHERE x.series_id = ?1 AND c.position IS NOT NULL
             AND x.run_id = (SELECT max(y.run_id) FROM measurements y
                             WHERE y.series_id = ?1 AND y.commit_id = x.commit_id)
           ORDER BY 1"#,
        series_id
    )
    .fetch_all(&mut *conn)
    .await?;
    let runs: BTreeSet<i64> = rows.iter().map(|r| r.run_id).collect();
    if number {
        number_environments(conn, &runs).await?;
    }
    let environments = numbered_environments(conn, &runs).await?;
    Ok(rows
        .into_iter()
        .map(|r| SummaryPoint {
            position: r.position,
            value: r.value,
            environment: environments.get(&r.run_id).copied().unwrap_or_default(),
        })
        .collect())
}

/// The level-0 summaries of `keys` from their merged points (`None` for a bucket left empty).
async fn summarize_again(
    conn: &mut SqliteConnection,
    keys: &BTreeSet<BucketKey>,
) -> Result<Vec<(BucketKey, Option<BucketSummary>)>, DbError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let json = serde_json::to_string(&keys.iter().collect::<Vec<_>>()).expect("integers");
    let rows = sqlx::query!(
        r#"SELECT s.id AS "series_id!", c.position AS "position!", x.value AS "value!",
                  x.run_id AS "run_id!"
           FROM jsonb_each(?1) AS j
           CROSS JOIN series s ON s.id = j.value ->> 0
           CROSS JOIN benchmarks b ON b.id = s.benchmark_id
           CROSS JOIN commits c ON c.repository_id = b.repository_id
                AND c.position BETWEEN (j.value ->> 1) * ?2 AND (j.value ->> 1) * ?2 + ?2 - 1
           CROSS JOIN measurements x ON x.series_id = s.id AND x.commit_id = c.id
           WHERE x.run_id = (SELECT max(y.run_id) FROM measurements y
                             WHERE y.series_id = s.id AND y.commit_id = c.id)
           ORDER BY 1, 2"#,
        json,
        crate::series_summary::BASE_SPAN
    )
    .fetch_all(&mut *conn)
    .await?;
    let runs: BTreeSet<i64> = rows.iter().map(|r| r.run_id).collect();
    let environments = environment_ids(conn, &runs).await?;
    let mut points: BTreeMap<BucketKey, Vec<SummaryPoint>> = BTreeMap::new();
    for r in rows {
        points
            .entry((r.series_id, bucket_of(0, r.position)))
            .or_default()
            .push(SummaryPoint {
                position: r.position,
                value: r.value,
                environment: environments.get(&r.run_id).copied().unwrap_or_default(),
            });
    }
    Ok(keys
        .iter()
        .map(|key| {
            let of_key = points.get(key).map_or(&[][..], Vec::as_slice);
            (*key, summarize(0, key.1, of_key))
        })
        .collect())
}

/// Stores changed level-0 summaries and combines every bucket above them again: the stored
/// siblings they combine with, at every level, are read in one pass and everything changed is
/// written in another (a merge changes some 20,000 buckets, a query a level cost a tenth of it).
async fn store_and_propagate(
    conn: &mut SqliteConnection,
    level0: Vec<(BucketKey, Option<BucketSummary>)>,
) -> Result<(), DbError> {
    // The changed buckets of each level, level 0's first.
    let mut changed: Vec<BTreeSet<BucketKey>> = vec![level0.iter().map(|(key, _)| *key).collect()];
    let mut siblings = Vec::new();
    for level in 1..LEVELS {
        let below = changed.last().expect("level 0's are there");
        let parents: BTreeSet<BucketKey> = (below.iter())
            .map(|&(series, bucket)| (series, bucket.div_euclid(FANOUT)))
            .collect();
        siblings.extend((parents.iter()).map(|&(series, parent)| {
            (
                series,
                level - 1,
                parent * FANOUT,
                (parent + 1) * FANOUT - 1,
            )
        }));
        changed.push(parents);
    }
    // Every bucket known, by (level, series, bucket): stored, then replaced as it changes.
    let mut known: BTreeMap<(u8, i64, i64), Option<BucketSummary>> =
        (read_summaries(conn, &siblings).await?.into_iter())
            .map(|(series, s)| ((s.level, series, s.bucket), Some(s)))
            .collect();
    let mut rows: Vec<(SummaryKey, Option<BucketSummary>)> = Vec::new();
    for ((series, bucket), summary) in level0 {
        known.insert((0, series, bucket), summary);
        rows.push(((series, 0, bucket), summary));
    }
    for (level, parents) in (1..LEVELS).zip(changed.into_iter().skip(1)) {
        for (series, parent) in parents {
            let children = (level - 1, series, parent * FANOUT)
                ..=(level - 1, series, parent * FANOUT + FANOUT - 1);
            let parts: Vec<BucketSummary> = known.range(children).filter_map(|(_, s)| *s).collect();
            let summary = combine(level, parent, &parts);
            known.insert((level, series, parent), summary);
            rows.push(((series, level, parent), summary));
        }
    }
    write_summaries(conn, &rows).await
}

/// The environment id of each of `runs`, numbering environments not seen before.
pub(super) async fn environment_ids(
    conn: &mut SqliteConnection,
    runs: &BTreeSet<i64>,
) -> Result<HashMap<i64, i64>, DbError> {
    number_environments(conn, runs).await?;
    numbered_environments(conn, runs).await
}

/// Numbers the environments of `runs` not seen before.
async fn number_environments(
    conn: &mut SqliteConnection,
    runs: &BTreeSet<i64>,
) -> Result<(), DbError> {
    if runs.is_empty() {
        return Ok(());
    }
    let json = serde_json::to_string(&runs.iter().collect::<Vec<_>>()).expect("integers");
    sqlx::query!(
        r#"INSERT INTO run_environments (kernel, toolchain)
           SELECT DISTINCT u.kernel, u.toolchain FROM json_each(?) AS j
           CROSS JOIN runs u ON u.id = j.value
           WHERE NOT EXISTS (SELECT 1 FROM run_environments e
                             WHERE e.kernel = u.kernel AND e.toolchain = u.toolchain)"#,
        json
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The environment id of each of `runs` whose environment is numbered.
async fn numbered_environments(
    conn: &mut SqliteConnection,
    runs: &BTreeSet<i64>,
) -> Result<HashMap<i64, i64>, DbError> {
    if runs.is_empty() {
        return Ok(HashMap::new());
    }
    let json = serde_json::to_string(&runs.iter().collect::<Vec<_>>()).expect("integers");
    let rows = sqlx::query!(
        r#"SELECT u.id AS "run_id!", e.id AS "environment!" FROM json_each(?) AS j
           CROSS JOIN runs u ON u.id = j.value
           JOIN run_environments e ON e.kernel = u.kernel AND e.toolchain = u.toolchain"#,
        json
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.run_id, r.environment))
        .collect())
}

/// The stored level-0 summaries of `keys` (in order), read as one range a series.
async fn read_level0(
    conn: &mut SqliteConnection,
    keys: impl Iterator<Item = BucketKey>,
) -> Result<BTreeMap<BucketKey, BucketSummary>, DbError> {
    let mut ranges: Vec<SummaryRange> = Vec::new();
    for (series, bucket) in keys {
        match ranges.last_mut() {
            Some((last, _, _, to)) if *last == series => *to = bucket,
            _ => ranges.push((series, 0, bucket, bucket)),
        }
    }
    let stored = read_summaries(conn, &ranges).await?;
    Ok(stored
        .into_iter()
        .map(|(series, s)| ((series, s.bucket), s))
        .collect())
}

/// Consecutive buckets of a series at one level: (series id, level, first bucket, last bucket).
pub(super) type SummaryRange = (i64, u8, i64, i64);

/// The stored summaries in `ranges` (those that exist), with their series, in the order of
/// `ranges` and by bucket within each: in one row of JSON a chunk (a merge reads some 30,000,
/// a zoomed-out chart some 400, and a row each cost more than finding them), values as their
/// bits as [`absorb_merge`] reads them.
pub(super) async fn read_summaries(
    conn: &mut SqliteConnection,
    ranges: &[SummaryRange],
) -> Result<Vec<(i64, BucketSummary)>, DbError> {
    let mut out = Vec::with_capacity(ranges.len());
    for chunk in ranges.chunks(KEYS_PER_QUERY) {
        let json = serde_json::to_string(chunk).expect("integers");
        let found: String = sqlx::query_scalar(
            r#"SELECT json_group_array(json_array(s.series_id, s.level, s.bucket, s.points,
                          s.low_position, f64_bits(s.low_value), s.high_position,
                          f64_bits(s.high_value), s.first_position, f64_bits(s.first_value),
                          s.last_position, f64_bits(s.last_value), s.first_environment,
                          s.last_environment, s.change_position, s.change_from, s.change_to)
                          ORDER BY j.key, s.bucket)
               FROM jsonb_each(?1) AS j
               CROSS JOIN series_summaries s ON s.series_id = j.value ->> 0
                    AND s.level = j.value ->> 1
                    AND s.bucket BETWEEN j.value ->> 2 AND j.value ->> 3"#,
        )
        .bind(json)
        .fetch_one(&mut *conn)
        .await?;
        let rows: Vec<StoredSummary> = serde_json::from_str(&found).map_err(super::decode_error)?;
        out.extend(rows.iter().map(|r| (r.series_id, r.summary())));
    }
    Ok(out)
}

/// A bucket of one series at one level: (series id, level, bucket).
type SummaryKey = (i64, u8, i64);

/// Writes the summaries of `rows`, deleting those of buckets left empty. (Writes to this
/// `WITHOUT ROWID` table do not move the data version: summaries change nothing a reader sees,
/// they only make it cheaper to see.) The rows go as JSONB: each of a row's 17 fields read from
/// JSON text parsed the row again, which was half of a merge's summaries.
async fn write_summaries(
    conn: &mut SqliteConnection,
    rows: &[(SummaryKey, Option<BucketSummary>)],
) -> Result<(), DbError> {
    let (kept, emptied): (Vec<_>, Vec<_>) = rows.iter().partition(|(_, s)| s.is_some());
    for chunk in kept.chunks(KEYS_PER_QUERY) {
        let json = serde_json::to_string(
            &chunk
                .iter()
                .filter_map(|((series, _, _), s)| s.map(|s| summary_json(*series, &s)))
                .collect::<Vec<_>>(),
        )
        .expect("finite numbers");
        sqlx::query!(
            r#"INSERT INTO series_summaries (series_id, level, bucket, points, low_position,
                   low_value, high_position, high_value, first_position, first_value,
                   last_position, last_value, first_environment, last_environment,
                   change_position, change_from, change_to)
               SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3,
                      j.value ->> 4, j.value ->> 5, j.value ->> 6, j.value ->> 7, j.value ->> 8,
                      j.value ->> 9, j.value ->> 10, j.value ->> 11, j.value ->> 12,
                      j.value ->> 13, j.value ->> 14, j.value ->> 15, j.value ->> 16
               FROM jsonb_each(?1) AS j WHERE true
               ON CONFLICT (series_id, level, bucket) DO UPDATE SET
                   points = excluded.points, low_position = excluded.low_position,
                   low_value = excluded.low_value, high_position = excluded.high_position,
                   high_value = excluded.high_value, first_position = excluded.first_position,
                   first_value = excluded.first_value, last_position = excluded.last_position,
                   last_value = excluded.last_value,
                   first_environment = excluded.first_environment,
                   last_environment = excluded.last_environment,
                   change_position = excluded.change_position,
                   change_from = excluded.change_from, change_to = excluded.change_to"#,
            json
        )
        .execute(&mut *conn)
        .await?;
    }
    for chunk in emptied.chunks(KEYS_PER_QUERY) {
        let json = serde_json::to_string(&chunk.iter().map(|(key, _)| *key).collect::<Vec<_>>())
            .expect("integers");
        sqlx::query!(
            r#"DELETE FROM series_summaries WHERE (series_id, level, bucket) IN
                   (SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2 FROM jsonb_each(?1) AS j)"#,
            json
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// A summary as one JSON array, in the order `write_summaries` reads it.
fn summary_json(series_id: i64, s: &BucketSummary) -> serde_json::Value {
    let change = s.change;
    serde_json::json!([
        series_id,
        s.level,
        s.bucket,
        s.points,
        s.low.position,
        s.low.value,
        s.high.position,
        s.high.value,
        s.first.position,
        s.first.value,
        s.last.position,
        s.last.value,
        s.first_environment,
        s.last_environment,
        change.map(|c| c.position),
        change.map(|c| c.from),
        change.map(|c| c.to),
    ])
}

/// A row of `series_summaries`, as sqlx reads it or as a JSON array of its columns in order
/// (values as their bits, see `sql_functions.rs`).
#[derive(serde::Deserialize)]
pub(super) struct StoredSummary {
    pub series_id: i64,
    pub level: i64,
    pub bucket: i64,
    pub points: i64,
    pub low_position: i64,
    #[serde(deserialize_with = "super::sql_functions::deserialize")]
    pub low_value: f64,
    pub high_position: i64,
    #[serde(deserialize_with = "super::sql_functions::deserialize")]
    pub high_value: f64,
    pub first_position: i64,
    #[serde(deserialize_with = "super::sql_functions::deserialize")]
    pub first_value: f64,
    pub last_position: i64,
    #[serde(deserialize_with = "super::sql_functions::deserialize")]
    pub last_value: f64,
    pub first_environment: i64,
    pub last_environment: i64,
    pub change_position: Option<i64>,
    pub change_from: Option<i64>,
    pub change_to: Option<i64>,
}

impl StoredSummary {
    pub(super) fn summary(&self) -> BucketSummary {
        let at = |position, value| Located { position, value };
        BucketSummary {
            level: u8::try_from(self.level).unwrap_or_default(),
            bucket: self.bucket,
            points: self.points,
            low: at(self.low_position, self.low_value),
            high: at(self.high_position, self.high_value),
            first: at(self.first_position, self.first_value),
            last: at(self.last_position, self.last_value),
            first_environment: self.first_environment,
            last_environment: self.last_environment,
            change: match (self.change_position, self.change_from, self.change_to) {
                (Some(position), Some(from), Some(to)) => {
                    Some(EnvironmentChange { position, from, to })
                }
                _ => None,
            },
        }
    }
}
