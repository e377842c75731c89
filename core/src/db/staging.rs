//! The staged measurements (migration 0028): uploads append to `measurements_staged`, keyed
//! in arrival order, and [`Db::merge_staged`] moves them into the clustered `measurements` in
//! batches. Why: an upload of 1,000 series into the clustered table changes at least one page
//! per series, each written to the WAL; staged, it changes a few contiguous pages, and a merge
//! of many uploads writes each series' page once (RELIABILITY.md, "Ingest").
//!
//! Which run wins: a merge moves every staged row of the commits it takes, so for one (series,
//! commit) the rows in `measurements` were all staged before the last merge that took that
//! commit and the staged ones after it. Runs are numbered as they are stored, so a staged row
//! is always a later run than any merged row of its series and commit: readers take the
//! latest staged run when there is one and the latest merged run otherwise.
//!
//! When a merge runs: after the upload that brings the staged rows to the threshold
//! ([`MERGE_ROWS`] by default), in the same call, once the upload is committed; and when the
//! server has been idle for a while (`kymo serve`). Readers read both tables, so nothing waits
//! for a merge to be visible.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Db, DbError};

/// Staged rows that start a merge: about 14 MB of rows, a few seconds of writing at most.
/// A reader seeks the staged table once per staged commit and series it reads, so its cost
/// follows the commits staged (a few hundred at this size), not the rows.
pub const MERGE_ROWS: u64 = 200_000;

/// The most rows one merge transaction moves (whole commits, so one more commit's rows at
/// most): bounds how long the write lock is held and how large the transaction's WAL grows.
const MERGE_BATCH_ROWS: i64 = 250_000;

/// How many rows wait in the staged table (as far as this process knows: another process
/// writing the same file only makes a merge come earlier or later) and when to merge them.
#[derive(Debug)]
pub(super) struct Staging {
    pending: AtomicU64,
    threshold: AtomicU64,
}

impl Staging {
    pub(super) fn new(pending: u64) -> Staging {
        Staging {
            pending: AtomicU64::new(pending),
            threshold: AtomicU64::new(MERGE_ROWS),
        }
    }

    /// Counts `rows` newly staged; whether they bring the staged rows to the threshold.
    pub(super) fn staged(&self, rows: u64) -> bool {
        let pending = self.pending.fetch_add(rows, Ordering::AcqRel) + rows;
        pending >= self.threshold.load(Ordering::Acquire)
    }
}

/// What a merge moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeSummary {
    /// Rows moved from the staged table into `measurements`.
    pub rows: u64,
    /// Transactions they took (each moved whole commits, at most about 250,000 rows).
    pub batches: u64,
}

impl Db {
    /// Merges the staged measurements into the clustered table, in batches of whole commits,
    /// each one transaction: a batch that fails (a crash, a full disk) leaves its rows staged
    /// and the clustered table as it was, so nothing is lost or stored twice. Readers are not
    /// blocked (WAL); writers wait for the batch in progress.
    pub async fn merge_staged(&self) -> Result<MergeSummary, DbError> {
        let mut summary = MergeSummary {
            rows: 0,
            batches: 0,
        };
        loop {
            let moved = self.merge_batch(MERGE_BATCH_ROWS).await?;
            if moved == 0 {
                return Ok(summary);
            }
            self.checkpoints.start();
            summary.rows += moved;
            summary.batches += 1;
        }
    }

    /// Rows staged and not merged yet (counted in the table).
    pub async fn staged_rows(&self) -> Result<u64, DbError> {
        let rows = sqlx::query_scalar!(r#"SELECT count(*) AS "n!: i64" FROM measurements_staged"#)
            .fetch_one(&self.reader)
            .await?;
        Ok(u64::try_from(rows).unwrap_or(0))
    }

    /// Rows staged since this process last merged (as counted here, not in the table).
    pub fn staged_pending(&self) -> u64 {
        self.staging.pending.load(Ordering::Acquire)
    }

    /// Sets how many staged rows start a merge after an upload (tests merge after a few).
    pub fn set_merge_threshold(&self, rows: u64) {
        self.staging.threshold.store(rows.max(1), Ordering::Release);
    }

    /// Merges after an upload that brought the staged rows to the threshold. The upload is
    /// committed by then: a merge that fails is logged and leaves the rows staged for the next.
    pub(super) async fn merge_when_due(&self, staged_rows: usize) {
        if !self.staging.staged(staged_rows as u64) {
            return;
        }
        match self.merge_staged().await {
            Ok(summary) => tracing::debug!(rows = summary.rows, "merged staged measurements"),
            Err(err) => tracing::warn!(error = %err, "merging staged measurements failed"),
        }
    }

    /// Moves the staged rows of the oldest commits, about `max_rows` of them (all of the last
    /// commit reached, so that a (series, commit) is never split across the tables by a merge),
    /// into `measurements` in its key order; returns how many.
    ///
    /// Foreign keys are not checked here: ingest made every staged row's series, commit and
    /// run exist in its own transaction, and they cannot go while the write lock is held
    /// (deleting one deletes its staged rows too, by trigger). Checking three parents a row
    /// was 40 % of a merge's CPU time at 10 M stored (RELIABILITY.md).
    async fn merge_batch(&self, max_rows: i64) -> Result<u64, DbError> {
        let mut conn = self.writer.acquire().await?;
        sqlx::query("PRAGMA foreign_keys = OFF")
            .execute(&mut *conn)
            .await?;
        let moved = move_oldest_staged(&mut conn, max_rows).await;
        if sqlx::query("PRAGMA foreign_keys = ON")
            .execute(&mut *conn)
            .await
            .is_err()
        {
            // Never hand the pool a writer without its checks: it opens a fresh one instead.
            let _ = sqlx::Connection::close(conn.detach()).await;
        }
        let moved = moved?;
        let _ = (self.staging.pending).fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
            Some(p.saturating_sub(moved))
        });
        Ok(moved)
    }
}

/// One merge transaction on `conn` (see [`Db::merge_batch`]).
async fn move_oldest_staged(
    conn: &mut sqlx::SqliteConnection,
    max_rows: i64,
) -> Result<u64, DbError> {
    let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
    // The commit of the row `max_rows` in; none when fewer rows are staged: merge them all.
    let last_commit = sqlx::query_scalar!(
        "SELECT commit_id FROM measurements_staged ORDER BY commit_id, series_id, run_id
         LIMIT 1 OFFSET ?",
        max_rows
    )
    .fetch_optional(&mut *tx)
    .await?;
    let last_commit = last_commit.unwrap_or(i64::MAX);
    // OR IGNORE: an insert that could stop at a failing row keeps a statement journal, a copy
    // of every page it changes (a sixth of this statement at 100 M stored). No row can fail:
    // the staged keys are unique and their runs new; one that did would be counted below.
    let inserted = sqlx::query!(
        "INSERT OR IGNORE INTO measurements (series_id, commit_id, run_id, value, samples, hdr)
         SELECT series_id, commit_id, run_id, value, samples, hdr FROM measurements_staged
         WHERE commit_id <= ? ORDER BY series_id, commit_id, run_id",
        last_commit
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    // The summaries take the moved points in, in the same transaction: they always describe
    // exactly the merged rows.
    super::summaries::absorb_merge(&mut tx, last_commit).await?;
    let deleted = sqlx::query!(
        "DELETE FROM measurements_staged WHERE commit_id <= ?",
        last_commit
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted != deleted {
        // Dropping the transaction rolls it back: both tables stay as they were.
        return Err(DbError::Invalid(format!(
            "a merge moved {inserted} staged measurements but removed {deleted}; undone"
        )));
    }
    tx.commit().await?;
    Ok(deleted)
}
