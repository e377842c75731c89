//! Push notifications: webhook secrets and deliveries, polling schedules, and the commits of
//! the tracked branch that a push added.

use sqlx::SqliteConnection;

use super::{Db, DbError};

/// One webhook delivery as the deliveries page shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct WebhookDeliveryRow {
    pub id: i64,
    pub provider: String,
    pub delivery: String,
    pub event: String,
    pub repository: Option<String>,
    pub outcome: String,
    pub status: i64,
    pub detail: String,
    pub received_at: i64,
}

/// A delivery to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDelivery<'a> {
    pub provider: &'a str,
    pub delivery: &'a str,
    pub event: &'a str,
    pub repository_id: Option<i64>,
    pub outcome: &'a str,
    pub status: i64,
    pub detail: &'a str,
}

/// A commit of the tracked branch's first-parent chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainCommit {
    pub id: i64,
    pub sha: String,
    pub position: i64,
}

/// Where a tracked repository's remote lives, to match a webhook payload against.
#[derive(Debug, Clone, PartialEq)]
pub struct RepositoryRemote {
    pub id: i64,
    pub name: String,
    pub url: String,
    pub branch: String,
}

impl Db {
    /// The repository's webhook secret, if it has one.
    pub async fn webhook_secret(&self, repository_id: i64) -> Result<Option<String>, DbError> {
        Ok(sqlx::query_scalar!(
            "SELECT webhook_secret FROM repositories WHERE id = ?",
            repository_id
        )
        .fetch_optional(&self.reader)
        .await?
        .flatten())
    }

    /// Every repository's remote.
    pub async fn repository_remotes(&self) -> Result<Vec<RepositoryRemote>, DbError> {
        Ok(sqlx::query_as!(
            RepositoryRemote,
            "SELECT id, name, url, branch FROM repositories ORDER BY id"
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Records a delivery. An accepted delivery whose id was recorded already is refused
    /// (Conflict), so that two concurrent copies are processed once.
    pub async fn record_delivery(
        &self,
        delivery: &NewDelivery<'_>,
        now: i64,
    ) -> Result<i64, DbError> {
        let mut tx = self.begin_write().await?;
        let id = sqlx::query_scalar!(
            r#"INSERT INTO webhook_deliveries (provider, delivery, event, repository_id, outcome,
                                               status, detail, received_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT DO NOTHING RETURNING id AS "id!" "#,
            delivery.provider,
            delivery.delivery,
            delivery.event,
            delivery.repository_id,
            delivery.outcome,
            delivery.status,
            delivery.detail,
            now
        )
        .fetch_optional(&mut *tx)
        .await?;
        if delivery.outcome == "rejected" {
            prune_rejected(&mut tx, KEPT_REJECTED_DELIVERIES).await?;
        }
        tx.commit().await?;
        id.ok_or_else(|| {
            DbError::Conflict(format!(
                "{} delivery {} was processed already",
                delivery.provider, delivery.delivery
            ))
        })
    }

    /// Deletes refused deliveries but the newest `keep`; returns how many went.
    pub async fn prune_rejected_deliveries(&self, keep: i64) -> Result<u64, DbError> {
        let mut tx = self.begin_write().await?;
        let deleted = prune_rejected(&mut tx, keep).await?;
        tx.commit().await?;
        Ok(deleted)
    }

    /// Updates a delivery's outcome once its push has been processed.
    pub async fn finish_delivery(
        &self,
        id: i64,
        outcome: &str,
        status: i64,
        detail: &str,
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            "UPDATE webhook_deliveries SET outcome = ?, status = ?, detail = ? WHERE id = ?",
            outcome,
            status,
            detail,
            id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The latest deliveries, newest first.
    pub async fn deliveries(&self, limit: i64) -> Result<Vec<WebhookDeliveryRow>, DbError> {
        Ok(sqlx::query_as!(
            WebhookDeliveryRow,
            r#"SELECT d.id, d.provider, d.delivery, d.event, r.name AS "repository?", d.outcome,
                      d.status, d.detail, d.received_at
               FROM webhook_deliveries d LEFT JOIN repositories r ON r.id = d.repository_id
               ORDER BY d.received_at DESC, d.id DESC LIMIT ?"#,
            limit
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Repositories whose poll is due at `now`.
    pub async fn repositories_due_for_poll(&self, now: i64) -> Result<Vec<String>, DbError> {
        Ok(sqlx::query_scalar!(
            r#"SELECT name FROM repositories
               WHERE poll_seconds IS NOT NULL AND coalesce(polled_at, 0) + poll_seconds <= ?
               ORDER BY coalesce(polled_at, 0)"#,
            now
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Notes that the repository was polled at `now`.
    pub async fn mark_polled(&self, repository_id: i64, now: i64) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            "UPDATE repositories SET polled_at = ? WHERE id = ?",
            now,
            repository_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The newest commit of the tracked branch's recorded history.
    pub async fn chain_head(&self, repository_id: i64) -> Result<Option<ChainCommit>, DbError> {
        Ok(sqlx::query_as!(
            ChainCommit,
            r#"SELECT id, sha, position AS "position!" FROM commits
               WHERE repository_id = ? AND position IS NOT NULL
               ORDER BY position DESC LIMIT 1"#,
            repository_id
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// The chain's commits with `after < position <= through`, oldest first.
    pub async fn chain_between(
        &self,
        repository_id: i64,
        after: i64,
        through: i64,
    ) -> Result<Vec<ChainCommit>, DbError> {
        Ok(sqlx::query_as!(
            ChainCommit,
            r#"SELECT id, sha, position AS "position!" FROM commits
               WHERE repository_id = ? AND position > ? AND position <= ?
               ORDER BY position"#,
            repository_id,
            after,
            through
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// The chain position of a commit, if it is on the chain.
    pub async fn chain_position(&self, commit_id: i64) -> Result<Option<i64>, DbError> {
        Ok(
            sqlx::query_scalar!("SELECT position FROM commits WHERE id = ?", commit_id)
                .fetch_optional(&self.reader)
                .await?
                .flatten(),
        )
    }
}

/// Refused deliveries kept for the deliveries page. Anyone can send them (forged, for unknown
/// repositories), so without a bound a flood would grow the table until the rate limit or the
/// disk stops it; accepted ones are one per push and are all kept.
const KEPT_REJECTED_DELIVERIES: i64 = 10_000;

async fn prune_rejected(conn: &mut SqliteConnection, keep: i64) -> Result<u64, DbError> {
    Ok(sqlx::query!(
        r#"DELETE FROM webhook_deliveries
           WHERE outcome = 'rejected'
             AND id <= (SELECT id FROM webhook_deliveries WHERE outcome = 'rejected'
                        ORDER BY id DESC LIMIT 1 OFFSET ?)"#,
        keep
    )
    .execute(&mut *conn)
    .await?
    .rows_affected())
}
