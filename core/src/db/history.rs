//! A series' recent history in order: what verdicts and their noise models read, with a limit
//! (a per-commit verdict needs the last hundred points, not the whole series) and, for a
//! compare of many series, in one query.

use super::{Db, DbError};

impl Db {
    /// The values (with their history positions) of the last `limit` points of a series before
    /// position `before` (all positions when `None`), oldest first. What a per-commit verdict's
    /// noise model uses; the samples, which it does not use, are neither read nor parsed.
    pub async fn series_values_before(
        &self,
        series_id: i64,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<(i64, f64)>, DbError> {
        let rows = sqlx::query!(
            r#"SELECT c.position AS "position!", x.value
               FROM measurements x JOIN commits c ON c.id = x.commit_id
               WHERE x.series_id = ? AND c.position IS NOT NULL
                 AND (? IS NULL OR c.position < ?)
                 AND x.id = (SELECT max(y.id) FROM measurements y
                             WHERE y.series_id = x.series_id AND y.commit_id = x.commit_id)
               ORDER BY c.position DESC LIMIT ?"#,
            series_id,
            before,
            before,
            limit
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows
            .into_iter()
            .rev()
            .map(|r| (r.position, r.value))
            .collect())
    }

    /// The values of many series at history positions `from..before` (the latest run per
    /// commit), by series then position: the recent history of every series of a commit in
    /// one query, reached through the commits' runs.
    pub async fn series_values_between(
        &self,
        repository_id: i64,
        series_ids: &[i64],
        from: i64,
        before: i64,
    ) -> Result<Vec<(i64, i64, f64)>, DbError> {
        let ids = serde_json::to_string(series_ids).expect("integers serialize");
        let rows = sqlx::query!(
            r#"SELECT x.series_id AS "series_id!", c.position AS "position!", x.value
               FROM commits c
               JOIN runs r ON r.commit_id = c.id
               JOIN measurements x ON x.run_id = r.id
               WHERE c.repository_id = ? AND c.position >= ? AND c.position < ?
                 AND x.series_id IN (SELECT value FROM json_each(?))
                 AND x.id = (SELECT max(y.id) FROM measurements y
                             WHERE y.series_id = x.series_id AND y.commit_id = x.commit_id)
               ORDER BY x.series_id, c.position"#,
            repository_id,
            from,
            before,
            ids
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| (r.series_id, r.position, r.value))
            .collect())
    }
}
