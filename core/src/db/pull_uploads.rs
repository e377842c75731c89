//! Pull requests measured in CI: the head a CI job measured (which the server's mirror may
//! not have), the base results it is compared with, and the comparison that holds both, kept
//! apart from the tracked branch's runs and measurements like every comparison.

use super::comparisons::{MeasuredBy, NewComparison};
use super::pulls::{PullRequestRecord, open_pull_request};
use super::repos::CommitRecord;
use super::{Db, DbError};

/// What CI measured of a comparison, stored as it arrives (no job measures it).
#[derive(Debug, Clone)]
pub struct UploadedComparison<'a> {
    /// JSON: one round, `{"base": [SuiteUpload], "head": [SuiteUpload]}` (the caller
    /// validated the results).
    pub results: &'a str,
    pub machine_id: i64,
    pub measured: MeasuredBy,
    /// The upload's `Idempotency-Key`, if it sent one.
    pub upload_key: Option<&'a str>,
}

/// The commit whose stored results stand for a base on one machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasuredBase {
    pub commit_id: i64,
    pub sha: String,
    /// How many first-parent commits before the asked-for base it is (0: the base itself).
    pub commits_before: i64,
}

impl Db {
    /// The id of a pull request's head, recorded as CI named it when the mirror has not seen
    /// it: off the tracked branch, without parents (git's account replaces it once the
    /// mirror has the commit).
    pub async fn record_pull_head(
        &self,
        repository_id: i64,
        head: &CommitRecord,
    ) -> Result<i64, DbError> {
        if let Some(id) = self.commit_id(repository_id, &head.sha).await? {
            return Ok(id);
        }
        self.record_commit(repository_id, head).await
    }

    /// The comparison (and its pull request's number) that an upload with `key` stored.
    pub async fn uploaded_comparison(
        &self,
        repository_id: i64,
        key: &str,
    ) -> Result<Option<(i64, i64)>, DbError> {
        Ok(sqlx::query!(
            r#"SELECT k.id AS "id!", p.number AS "number!"
               FROM comparisons k JOIN pull_requests p ON p.id = k.pull_request_id
               WHERE k.repository_id = ? AND k.upload_key = ?"#,
            repository_id,
            key
        )
        .fetch_optional(&self.reader)
        .await?
        .map(|row| (row.id, row.number)))
    }

    /// The commit nearest to `base_id` whose results `machine_id` stored: the base itself,
    /// or, for a base on the tracked branch, one of the `max_before` first-parent commits
    /// before it (the newest first).
    pub async fn measured_base(
        &self,
        repository_id: i64,
        base_id: i64,
        machine_id: i64,
        max_before: i64,
    ) -> Result<Option<MeasuredBase>, DbError> {
        Ok(sqlx::query_as!(
            MeasuredBase,
            r#"SELECT c.id AS "commit_id!", c.sha,
                      coalesce((SELECT position FROM commits WHERE id = ?2) - c.position, 0)
                          AS "commits_before!: i64"
               FROM commits c
               WHERE c.repository_id = ?1
                 AND (c.id = ?2 OR c.position BETWEEN (SELECT position FROM commits WHERE id = ?2) - ?4
                                                  AND (SELECT position FROM commits WHERE id = ?2))
                 AND EXISTS (SELECT 1 FROM runs r WHERE r.commit_id = c.id AND r.machine_id = ?3)
               ORDER BY c.id = ?2 DESC, c.position DESC
               LIMIT 1"#,
            repository_id,
            base_id,
            machine_id,
            max_before
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// Records a pull request's head measured in CI and its comparison, in one transaction:
    /// the request is open with this head, its older comparisons' waiting jobs are cancelled,
    /// and its feedback (a status and the comment) falls due. Returns the comparison's id.
    pub async fn store_pull_upload(
        &self,
        pull: &PullRequestRecord<'_>,
        comparison: &NewComparison<'_>,
        uploaded: &UploadedComparison<'_>,
        now: i64,
    ) -> Result<i64, DbError> {
        let mut tx = self.begin_write().await?;
        let pull_request_id = open_pull_request(&mut tx, pull, now).await?;
        let measured = uploaded.measured.as_str();
        let origin = comparison.origin.as_str();
        let id = sqlx::query_scalar!(
            r#"INSERT INTO comparisons (repository_id, origin, label, base_id, head_id, baseline,
                                        rounds, created_at, pull_request_id, results, machine_id,
                                        finished_at, measured, upload_key)
               VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?8, ?12, ?13)
               RETURNING id AS "id!" "#,
            comparison.repository_id,
            origin,
            comparison.label,
            comparison.base_id,
            comparison.head_id,
            comparison.baseline,
            comparison.rounds,
            now,
            pull_request_id,
            uploaded.results,
            uploaded.machine_id,
            measured,
            uploaded.upload_key
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(id)
    }
}
