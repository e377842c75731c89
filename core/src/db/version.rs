//! The data version: a number that moves whenever a write to the database changes a row, so
//! that what was computed from the database (a cached page) can tell whether it is still
//! current without asking SQLite.
//!
//! SQLite calls the writer connection's update hook for every row inserted, updated or deleted,
//! and its commit hook just *before* a transaction becomes visible. The version moves in the
//! commit hook, so a reader that began before the commit sees an older version; and once more
//! when the connection goes back to the pool, after the commit, so that a page computed by a
//! reader in the moment between the two (which may not yet see the commit) is never taken
//! for current. A transaction that changed no row moves nothing: re-analysing a series to the
//! same result leaves cached pages in place.
//!
//! The update hook does not see changes to `WITHOUT ROWID` tables, nor a `DELETE` without a
//! `WHERE` clause (SQLite truncates the table instead). kymo's queries use no such `DELETE`;
//! its two `WITHOUT ROWID` tables are `measurements` and `measurements_staged`, which a stored
//! run only ever changes together with its row in `runs` (seen). A merge of the staged rows
//! into `measurements` changes nothing any reader sees, and rightly moves no version.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sqlx::SqliteConnection;
use sqlx::pool::PoolConnectionMetadata;
use sqlx::sqlite::SqlitePoolOptions;

/// What sqlx's connection callbacks return (its `BoxFuture`).
pub(super) type Setup<'c> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), sqlx::Error>> + Send + 'c>>;

/// Shared by the writer pool's hooks and by readers of the version.
#[derive(Debug, Default)]
pub(super) struct DataVersion {
    version: AtomicU64,
    /// A row changed since the version last moved after a release of the writer.
    changed: AtomicBool,
}

impl DataVersion {
    pub(super) fn current(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    fn row_changed(&self) {
        self.changed.store(true, Ordering::Release);
    }

    fn committing(&self) {
        if self.changed.load(Ordering::Acquire) {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn released(&self) {
        if self.changed.swap(false, Ordering::AcqRel) {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The writer pool's options with the hooks that move `version`: each new connection of
    /// the pool gets `setup` (its SQL functions), then the hooks.
    pub(super) fn watch<F>(
        version: &Arc<Self>,
        options: SqlitePoolOptions,
        setup: F,
    ) -> SqlitePoolOptions
    where
        F: for<'c> Fn(&'c mut SqliteConnection) -> Setup<'c> + Send + Sync + 'static,
    {
        let on_connect = Arc::clone(version);
        let on_release = Arc::clone(version);
        let setup = Arc::new(setup);
        options
            .after_connect(move |conn: &mut SqliteConnection, _| {
                let version = Arc::clone(&on_connect);
                let setup = Arc::clone(&setup);
                Box::pin(async move {
                    setup(conn).await?;
                    let mut handle = conn.lock_handle().await?;
                    let rows = Arc::clone(&version);
                    handle.set_update_hook(move |_| rows.row_changed());
                    handle.set_commit_hook(move || {
                        version.committing();
                        true
                    });
                    Ok(())
                })
            })
            .after_release(move |_: &mut SqliteConnection, _: PoolConnectionMetadata| {
                on_release.released();
                Box::pin(async { Ok(true) })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_changed_row_moves_the_version_at_commit_and_release() {
        let v = DataVersion::default();
        v.committing();
        v.released();
        assert_eq!(v.current(), 0, "a transaction without changes");
        v.row_changed();
        v.committing();
        assert_eq!(v.current(), 1, "before the commit is visible");
        v.released();
        assert_eq!(v.current(), 2, "after it");
        v.released();
        assert_eq!(v.current(), 2, "once per change");
    }
}
