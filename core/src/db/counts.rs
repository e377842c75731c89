//! Whole-server counts for monitoring (the Prometheus `/metrics` endpoint).

use super::{Db, DbError, RowCounts};

/// The job states, in the order monitoring lists them (all of them, even when zero, so that a
/// state's series does not vanish).
pub const JOB_STATES: [&str; 5] = ["queued", "running", "succeeded", "failed", "cancelled"];

/// What the server holds right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCounts {
    /// Jobs per state, in [`JOB_STATES`] order.
    pub jobs: Vec<(&'static str, i64)>,
    /// Rows of each table results land in.
    pub rows: RowCounts,
    /// Active regressions (not improvements) still open.
    pub open_regressions: i64,
}

impl Db {
    /// Counts for monitoring; three aggregate reads.
    pub async fn server_counts(&self) -> Result<ServerCounts, DbError> {
        let by_state = sqlx::query!(
            r#"SELECT state AS "state!: String", count(*) AS "count!: i64" FROM jobs GROUP BY state"#
        )
        .fetch_all(&self.reader)
        .await?;
        let jobs = JOB_STATES
            .iter()
            .map(|&s| {
                let count = by_state
                    .iter()
                    .find(|r| r.state == s)
                    .map_or(0, |r| r.count);
                (s, count)
            })
            .collect();
        let open_regressions = sqlx::query_scalar!(
            r#"SELECT count(*) AS "open!: i64" FROM regressions
               WHERE active = 1 AND kind = 'regression' AND state = 'open'"#
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(ServerCounts {
            jobs,
            rows: self.row_counts().await?,
            open_regressions,
        })
    }
}
