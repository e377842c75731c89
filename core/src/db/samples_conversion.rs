//! The one-time conversion of samples stored as JSON text (before migration 0022) into the
//! binary encoding of [`crate::samples`]. It runs when a database is opened, before anything
//! reads or writes samples; each batch commits with the series it reached, so an interrupted
//! conversion resumes where it stopped.

use sqlx::SqlitePool;

use super::DbError;

/// Measurements converted per transaction: large enough that a 10-million-row database is
/// converted in minutes, small enough that a crash loses little work.
const BATCH: i64 = 20_000;

/// Converts every measurement whose samples are still JSON text; returns how many. Nothing is
/// done (one lookup of an empty table) when there is nothing to convert.
pub(super) async fn convert_text_samples(writer: &SqlitePool) -> Result<u64, DbError> {
    let mut converted = 0;
    loop {
        let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
        // `next_id` is the series the conversion goes on from (migration 0025 clustered the
        // measurements by series; they have no id of their own).
        let Some(next_series) = sqlx::query_scalar!("SELECT next_id FROM samples_conversion")
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(converted);
        };
        let rows = sqlx::query!(
            r#"SELECT series_id, commit_id, run_id, samples AS "samples!: String" FROM measurements
               WHERE series_id >= ? AND typeof(samples) = 'text'
               ORDER BY series_id, commit_id, run_id LIMIT ?"#,
            next_series,
            BATCH
        )
        .fetch_all(&mut *tx)
        .await?;
        // A batch may end inside a series: the next one starts at that series again and
        // skips the rows this one converted.
        let Some(last) = rows.last().map(|r| r.series_id) else {
            sqlx::query!("DELETE FROM samples_conversion")
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            tracing::info!(converted, "samples converted from JSON text to binary");
            return Ok(converted);
        };
        for row in &rows {
            let samples: Vec<f64> = serde_json::from_str(&row.samples).map_err(|e| {
                DbError::Invalid(format!(
                    "measurement of series {}, commit {}, run {}: stored samples are not a JSON \
                     array of numbers ({e}); nothing was converted in this batch",
                    row.series_id, row.commit_id, row.run_id
                ))
            })?;
            let bytes = crate::samples::encode(&samples);
            sqlx::query!(
                "UPDATE measurements SET samples = ?
                 WHERE series_id = ? AND commit_id = ? AND run_id = ?",
                bytes,
                row.series_id,
                row.commit_id,
                row.run_id
            )
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query!("UPDATE samples_conversion SET next_id = ?", last)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        converted += rows.len() as u64;
    }
}
