//! Pull and merge requests: what their webhooks announced, the comparisons that measured
//! them, and the feedback (one comment, edited in place, and a status on the head) waiting to
//! be published on their forge.

use super::comparisons::NewComparison;
use super::jobs::LeaseSettings;
use super::{Db, DbError};

/// A pull request as its webhook described it.
#[derive(Debug, Clone)]
pub struct PullRequestRecord<'a> {
    pub repository_id: i64,
    pub provider: &'a str,
    pub number: i64,
    pub title: &'a str,
    pub author: &'a str,
    pub head_sha: &'a str,
}

/// A pull request as pages and the API show it, with its latest comparison.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PullRequestRow {
    pub id: i64,
    pub provider: String,
    pub number: i64,
    pub title: String,
    pub author: String,
    /// open or closed.
    pub state: String,
    pub head_sha: String,
    /// The latest comparison of its head, if one was queued.
    pub comparison: Option<i64>,
    /// That comparison's state (its job's).
    pub comparison_state: Option<String>,
    pub updated_at: i64,
}

/// A pull request whose feedback is due: what to publish it with.
#[derive(Debug, Clone, PartialEq)]
pub struct DuePullFeedback {
    pub id: i64,
    pub repository_id: i64,
    pub repository: String,
    pub provider: String,
    pub number: i64,
    pub head_sha: String,
    pub comment_id: Option<String>,
    pub attempts: i64,
    /// When it fell due, to tell a publication from a newer result that arrived meanwhile.
    pub due_at: i64,
    /// `always` or `changes` (comment only when something changed).
    pub pull_comments: String,
    pub comparison: Option<i64>,
}

/// The repository settings pull requests follow.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PullSettings {
    /// Forge logins whose pull requests from forks are measured (comma-separated).
    pub fork_authors: String,
    /// `always`, or `changes`: comment only on a pull request where something changed.
    pub pull_comments: String,
}

impl PullSettings {
    /// Checks and normalizes the settings.
    pub fn validated(self) -> Result<Self, DbError> {
        let mut authors: Vec<String> = Vec::new();
        for login in self.fork_authors.split(',').map(str::trim) {
            if login.is_empty() {
                continue;
            }
            let ok = login.len() <= 100
                && login
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !ok {
                return Err(DbError::Invalid(format!(
                    "fork author {login:?} is not a forge login (letters, digits, '-', '_', '.')"
                )));
            }
            if !authors.iter().any(|a| a.eq_ignore_ascii_case(login)) {
                authors.push(login.to_owned());
            }
        }
        if authors.len() > 100 {
            return Err(DbError::Invalid("at most 100 fork authors".into()));
        }
        if !matches!(self.pull_comments.as_str(), "always" | "changes") {
            return Err(DbError::Invalid(format!(
                "pull comments {:?}: use always or changes",
                self.pull_comments
            )));
        }
        Ok(Self {
            fork_authors: authors.join(","),
            pull_comments: self.pull_comments,
        })
    }
}

impl Db {
    /// A repository's pull request settings.
    pub async fn pull_settings(&self, repository_id: i64) -> Result<PullSettings, DbError> {
        Ok(sqlx::query_as!(
            PullSettings,
            "SELECT fork_authors, pull_comments FROM repositories WHERE id = ?",
            repository_id
        )
        .fetch_one(&self.reader)
        .await?)
    }

    /// Stores a repository's pull request settings (validated by the caller).
    pub async fn set_pull_settings(
        &self,
        repository_id: i64,
        settings: &PullSettings,
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            "UPDATE repositories SET fork_authors = ?, pull_comments = ? WHERE id = ?",
            settings.fork_authors,
            settings.pull_comments,
            repository_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records an opened or updated pull request and queues the comparison of its head: the
    /// waiting jobs of its older comparisons are cancelled (their head is gone), and its
    /// feedback falls due (a pending status). Returns the comparison's and its job's ids.
    pub async fn start_pull_comparison(
        &self,
        pull: &PullRequestRecord<'_>,
        comparison: &NewComparison<'_>,
        settings: LeaseSettings,
        now: i64,
    ) -> Result<(i64, i64), DbError> {
        let mut tx = self.begin_write().await?;
        let id = open_pull_request(&mut tx, pull, now).await?;
        let (comparison, job) =
            super::comparisons::insert_comparison(&mut tx, comparison, Some(id), settings, now)
                .await?;
        tx.commit().await?;
        Ok((comparison, job))
    }

    /// Marks a pull request closed and cancels its waiting jobs; returns how many it
    /// cancelled, or `None` for a request kymo never measured.
    pub async fn close_pull_request(
        &self,
        repository_id: i64,
        provider: &str,
        number: i64,
        now: i64,
    ) -> Result<Option<u64>, DbError> {
        let mut tx = self.begin_write().await?;
        let id = sqlx::query_scalar!(
            r#"UPDATE pull_requests SET state = 'closed', updated_at = ?
               WHERE repository_id = ? AND provider = ? AND number = ? RETURNING id AS "id!" "#,
            now,
            repository_id,
            provider,
            number
        )
        .fetch_optional(&mut *tx)
        .await?;
        let Some(id) = id else {
            return Ok(None);
        };
        let cancelled = cancel_waiting(&mut tx, id, now).await?;
        tx.commit().await?;
        Ok(Some(cancelled))
    }

    /// After a pull request's comparison finished (or failed): its feedback falls due.
    pub async fn pull_feedback_due(&self, comparison_id: i64, now: i64) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            r#"UPDATE pull_requests SET feedback_due_at = ?, feedback_attempts = 0
               WHERE id = (SELECT pull_request_id FROM comparisons WHERE id = ?)"#,
            now,
            comparison_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Pull requests whose feedback is due now, oldest first.
    pub async fn due_pull_feedback(
        &self,
        now: i64,
        limit: i64,
    ) -> Result<Vec<DuePullFeedback>, DbError> {
        Ok(sqlx::query_as!(
            DuePullFeedback,
            r#"SELECT p.id, r.id AS repository_id, r.name AS repository, p.provider, p.number, p.head_sha, p.comment_id,
                      p.feedback_attempts AS attempts, p.feedback_due_at AS "due_at!",
                      r.pull_comments,
                      (SELECT max(k.id) FROM comparisons k WHERE k.pull_request_id = p.id) AS "comparison?: i64"
               FROM pull_requests p JOIN repositories r ON r.id = p.repository_id
               WHERE p.feedback_due_at IS NOT NULL AND p.feedback_due_at <= ?
               ORDER BY p.feedback_due_at LIMIT ?"#,
            now,
            limit
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Records a publication of a pull request's feedback that fell due at `due_at`: on
    /// success its comment's id (kept for later edits) and nothing more is due unless a newer
    /// result arrived meanwhile; on failure the error, retried at `retry_at` (never when
    /// `None`).
    pub async fn record_pull_feedback(
        &self,
        id: i64,
        due_at: i64,
        outcome: Result<Option<&str>, (&str, Option<i64>)>,
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        match outcome {
            Ok(comment_id) => {
                sqlx::query!(
                    r#"UPDATE pull_requests SET comment_id = coalesce(?1, comment_id),
                           feedback_error = NULL, feedback_attempts = 0,
                           feedback_due_at = CASE WHEN feedback_due_at = ?2 THEN NULL ELSE feedback_due_at END
                       WHERE id = ?3"#,
                    comment_id,
                    due_at,
                    id
                )
                .execute(&mut *tx)
                .await?;
            }
            Err((error, retry_at)) => {
                sqlx::query!(
                    r#"UPDATE pull_requests SET feedback_error = ?1,
                           feedback_attempts = feedback_attempts + 1,
                           feedback_due_at = CASE WHEN feedback_due_at = ?2 THEN ?3 ELSE feedback_due_at END
                       WHERE id = ?4"#,
                    error,
                    due_at,
                    retry_at,
                    id
                )
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// A repository's pull requests, open ones first, then the most recently updated.
    pub async fn pull_requests(
        &self,
        repository_id: i64,
        limit: i64,
    ) -> Result<Vec<PullRequestRow>, DbError> {
        Ok(sqlx::query_as!(
            PullRequestRow,
            r#"SELECT p.id AS "id!", p.provider, p.number AS "number!", p.title, p.author, p.state,
                      p.head_sha,
                      k.id AS "comparison?: i64",
                      coalesce((SELECT j.state FROM jobs j WHERE j.comparison_id = k.id ORDER BY j.id DESC LIMIT 1),
                               CASE WHEN k.results IS NOT NULL THEN 'succeeded' END)
                          AS "comparison_state?: String",
                      p.updated_at AS "updated_at!"
               FROM pull_requests p
               LEFT JOIN comparisons k ON k.id = (SELECT max(id) FROM comparisons WHERE pull_request_id = p.id)
               WHERE p.repository_id = ?
               ORDER BY p.state = 'closed', p.updated_at DESC LIMIT ?"#,
            repository_id,
            limit
        )
        .fetch_all(&self.reader)
        .await?)
    }
}

/// Records a pull request as open with a new head (its feedback falls due now), and cancels
/// the waiting jobs of its older comparisons: their head is gone. Returns its id.
pub(super) async fn open_pull_request(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    pull: &PullRequestRecord<'_>,
    now: i64,
) -> Result<i64, DbError> {
    let id = sqlx::query_scalar!(
        r#"INSERT INTO pull_requests (repository_id, provider, number, title, author, state,
                                      head_sha, feedback_due_at, created_at, updated_at)
           VALUES (?1, ?2, ?3, ?4, ?5, 'open', ?6, ?7, ?7, ?7)
           ON CONFLICT (repository_id, provider, number) DO UPDATE SET
               title = excluded.title, author = excluded.author, state = 'open',
               head_sha = excluded.head_sha, feedback_due_at = excluded.feedback_due_at,
               feedback_attempts = 0, updated_at = excluded.updated_at
           RETURNING id AS "id!" "#,
        pull.repository_id,
        pull.provider,
        pull.number,
        pull.title,
        pull.author,
        pull.head_sha,
        now
    )
    .fetch_one(&mut **tx)
    .await?;
    cancel_waiting(tx, id, now).await?;
    Ok(id)
}

/// Cancels the waiting (queued or running) comparison jobs of a pull request; a running one's
/// worker loses its lease and stops.
async fn cancel_waiting(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    pull_request_id: i64,
    now: i64,
) -> Result<u64, DbError> {
    Ok(sqlx::query!(
        r#"UPDATE jobs SET state = 'cancelled', finished_at = ?, lease_id = NULL,
                           lease_expires_at = NULL, error = 'cancelled: the pull request moved on or closed'
           WHERE state IN ('queued', 'running')
             AND comparison_id IN (SELECT id FROM comparisons WHERE pull_request_id = ?)"#,
        now,
        pull_request_id
    )
    .execute(&mut **tx)
    .await?
    .rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_settings_are_checked_and_normalized() {
        let settings = |authors: &str, comments: &str| {
            PullSettings {
                fork_authors: authors.into(),
                pull_comments: comments.into(),
            }
            .validated()
        };
        assert_eq!(
            settings(" ada, grace,,Ada ", "changes")
                .unwrap()
                .fork_authors,
            "ada,grace"
        );
        assert!(settings("ada;rm -rf", "always").is_err());
        assert!(settings("ada", "sometimes").is_err());
        let many: Vec<String> = (0..101).map(|i| format!("u{i}")).collect();
        assert!(settings(&many.join(","), "always").is_err());
    }
}
