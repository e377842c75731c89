//! Whole-server counts for monitoring (the Prometheus `/metrics` endpoint).

use super::{Db, DbError};

/// The job states, in the order monitoring lists them (all of them, even when zero, so that a
/// state's series does not vanish).
pub const JOB_STATES: [&str; 5] = ["queued", "running", "succeeded", "failed", "cancelled"];

/// What the server holds right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCounts {
    /// Jobs per state, in [`JOB_STATES`] order.
    pub jobs: Vec<(&'static str, i64)>,
    pub runs: i64,
    pub measurements: i64,
    pub repositories: i64,
    pub machines: i64,
    /// Active regressions (not improvements) still open.
    pub open_regressions: i64,
}

impl Db {
    /// Counts for monitoring; a handful of aggregate reads.
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
        let totals = sqlx::query!(
            r#"SELECT (SELECT count(*) FROM runs) AS "runs!: i64",
                      (SELECT count(*) FROM measurements) AS "measurements!: i64",
                      (SELECT count(*) FROM repositories) AS "repositories!: i64",
                      (SELECT count(*) FROM machines) AS "machines!: i64",
                      (SELECT count(*) FROM regressions
                       WHERE active = 1 AND kind = 'regression' AND state = 'open') AS "open_regressions!: i64""#
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(ServerCounts {
            jobs,
            runs: totals.runs,
            measurements: totals.measurements,
            repositories: totals.repositories,
            machines: totals.machines,
            open_regressions: totals.open_regressions,
        })
    }
}
