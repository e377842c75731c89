//! How many rows each stored table holds: what the hostile-input and fault tests check to prove
//! that a refused or interrupted request stored nothing, what the load generator reports, and
//! part of what `/metrics` exposes.

use serde::Serialize;

use super::{Db, DbError};

/// Row counts of the tables that results and their context land in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RowCounts {
    pub repositories: i64,
    pub commits: i64,
    pub machines: i64,
    pub jobs: i64,
    pub runs: i64,
    pub benchmarks: i64,
    pub series: i64,
    pub measurements: i64,
}

impl Db {
    /// Counts the rows of every table a run or repository writes to, in one read transaction.
    pub async fn row_counts(&self) -> Result<RowCounts, DbError> {
        Ok(sqlx::query_as!(
            RowCounts,
            r#"SELECT (SELECT COUNT(*) FROM repositories) AS "repositories!: i64",
                      (SELECT COUNT(*) FROM commits) AS "commits!: i64",
                      (SELECT COUNT(*) FROM machines) AS "machines!: i64",
                      (SELECT COUNT(*) FROM jobs) AS "jobs!: i64",
                      (SELECT COUNT(*) FROM runs) AS "runs!: i64",
                      (SELECT COUNT(*) FROM benchmarks) AS "benchmarks!: i64",
                      (SELECT COUNT(*) FROM series) AS "series!: i64",
                      (SELECT COUNT(*) FROM measurements)
                          + (SELECT COUNT(*) FROM measurements_staged) AS "measurements!: i64""#
        )
        .fetch_one(&self.reader)
        .await?)
    }
}
