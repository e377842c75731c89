//! Copying the WAL back into the database off the writer's path. SQLite's own checkpoint runs
//! inside the COMMIT of the write that takes the WAL past its threshold, so that write waits
//! while every page is copied and both files are synced. At 100 M stored a merge of staged
//! rows writes some 22,000 pages, and each merge's commit waited about 0.25 s of the merge's
//! 1.3 s for its checkpoint (RELIABILITY.md, "Ingest at 100 M").
//!
//! So after each merge a connection of its own copies the WAL with `PRAGMA
//! wal_checkpoint(PASSIVE)`, which never blocks the writer or a reader, while uploads go on.
//! The writer keeps SQLite's automatic checkpoint as a backstop at a larger WAL
//! (`WAL_CHECKPOINT_PAGES`), for writes that no merge follows.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::SqlitePool;

/// The connection that checkpoints, and whether it is at it (shared by the database's clones).
#[derive(Clone, Debug)]
pub(super) struct Checkpoints {
    pool: SqlitePool,
    running: Arc<AtomicBool>,
}

impl Checkpoints {
    pub(super) fn new(pool: SqlitePool) -> Checkpoints {
        Checkpoints {
            pool,
            running: Arc::default(),
        }
    }

    /// Starts copying the WAL into the database in the background, unless a copy is under way
    /// (it takes what was written since it began at its next start).
    pub(super) fn start(&self) {
        if self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            let copied = sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(PASSIVE)")
                .fetch_one(&this.pool)
                .await;
            match copied {
                Ok((busy, pages, copied)) => {
                    tracing::debug!(busy, pages, copied, "checkpointed the WAL");
                }
                // The backstop copies it at the latest: nothing is lost, the WAL grows.
                Err(err) => tracing::warn!(error = %err, "checkpointing the WAL failed"),
            }
            this.running.store(false, Ordering::Release);
        });
    }

    pub(super) async fn close(&self) {
        self.pool.close().await;
    }
}
