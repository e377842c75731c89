//! Alert channels, the outbox of regression messages to deliver, and the delivery log shared
//! with commit-status posts (`commit_status.rs`).
//!
//! The outbox is what makes delivery safe: a message is a row before it is a request, a row
//! exists at most once per (channel, regression), and every attempt is logged.

use std::collections::HashMap;

use super::{Db, DbError};

/// The kinds of alert channel: a generic JSON body, a Slack or a Discord incoming webhook.
pub const ALERT_KINDS: [&str; 3] = ["json", "slack", "discord"];

/// Longest URL accepted for a channel or a forge API.
pub const MAX_URL_LEN: usize = 2048;

/// Checks a URL that kymo is to POST to: `http` or `https`, a host, no credentials, no spaces
/// or control characters, at most [`MAX_URL_LEN`] bytes.
pub fn validate_outbound_url(url: &str) -> Result<(), DbError> {
    let invalid = |why: &str| Err(DbError::Invalid(format!("url {url:?} is not valid: {why}")));
    if url.is_empty() || url.len() > MAX_URL_LEN {
        return Err(DbError::Invalid(format!(
            "a url of 1-{MAX_URL_LEN} bytes is required"
        )));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return invalid("it holds spaces or control characters");
    }
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    else {
        return invalid("only http:// and https:// URLs are accepted");
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return invalid("credentials in the URL are not supported");
    }
    let host = authority
        .rsplit_once(':')
        .filter(|(_, port)| !port.contains(']'))
        .map_or(authority, |(host, _)| host);
    if host.is_empty() || host.contains(['<', '>', '"', '\\', '|', '^', '`', '{', '}']) {
        return invalid("it names no valid host");
    }
    Ok(())
}

/// An alert channel of a repository.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AlertChannelRow {
    pub id: i64,
    pub repository_id: i64,
    pub kind: String,
    pub url: String,
    pub created_at: i64,
}

/// A delivery whose time has come, with what is needed to send it.
#[derive(Debug, Clone, PartialEq)]
pub struct DueDelivery {
    pub id: i64,
    pub attempts: i64,
    pub kind: String,
    pub url: String,
    pub regression_id: i64,
}

/// A row of either outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutboxItem {
    Alert(i64),
    CommitStatus(i64),
}

impl OutboxItem {
    /// The row's id as (alert delivery, commit-status post), one of them `None`.
    fn ids(self) -> (Option<i64>, Option<i64>) {
        match self {
            OutboxItem::Alert(id) => (Some(id), None),
            OutboxItem::CommitStatus(id) => (None, Some(id)),
        }
    }
}

/// What one attempt got: the HTTP status, if an answer came, and what went wrong, if anything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptOutcome {
    pub http_status: Option<i64>,
    pub error: Option<String>,
}

/// What becomes of an outbox row after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    Delivered,
    RetryAt(i64),
    Failed,
    /// Nothing to send any more (the regression or the target went away).
    Cancelled,
}

/// Where an outbox row stands, with its logged attempts: what both log tables show.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct OutboxProgress {
    /// `pending`, `delivered`, `failed` or `cancelled`.
    pub state: String,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub log: Vec<AttemptRow>,
}

impl OutboxProgress {
    /// The log as anyone may read it: whether and with which status the remote answered, not
    /// its words. An admin sets where alerts and statuses go, so an answer's body could be an
    /// internal service's reply read back through kymo; it stays for admins.
    pub fn hide_answers(&mut self) {
        for attempt in &mut self.log {
            if attempt.error.is_some() {
                attempt.error = Some(match attempt.http_status {
                    Some(status) => format!("answered {status}; what it said is shown to admins"),
                    None => "no answer; the error is shown to admins".to_owned(),
                });
            }
        }
    }
}

/// A delivery as the log shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct DeliveryRow {
    pub id: i64,
    pub channel_id: i64,
    pub channel_kind: String,
    pub regression_id: i64,
    pub benchmark: String,
    #[serde(flatten)]
    pub progress: OutboxProgress,
}

/// One logged attempt.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct AttemptRow {
    pub attempt: i64,
    pub at: i64,
    pub http_status: Option<i64>,
    pub error: Option<String>,
}

impl Db {
    /// Adds a channel to a repository; refuses a bad kind or URL and a URL already added.
    pub async fn add_alert_channel(
        &self,
        repository_id: i64,
        kind: &str,
        url: &str,
        now: i64,
    ) -> Result<AlertChannelRow, DbError> {
        if !ALERT_KINDS.contains(&kind) {
            return Err(DbError::Invalid(format!(
                "alert kind {kind:?} is not one of {}",
                ALERT_KINDS.join(", ")
            )));
        }
        validate_outbound_url(url)?;
        let mut tx = self.begin_write().await?;
        let row = sqlx::query_as!(
            AlertChannelRow,
            r#"INSERT INTO alert_channels (repository_id, kind, url, created_at) VALUES (?, ?, ?, ?)
               ON CONFLICT (repository_id, url) DO NOTHING
               RETURNING id AS "id!", repository_id, kind, url, created_at"#,
            repository_id,
            kind,
            url,
            now
        )
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        row.ok_or_else(|| DbError::Conflict("this repository already has that alert url".into()))
    }

    /// The channels of a repository, oldest first.
    pub async fn alert_channels(
        &self,
        repository_id: i64,
    ) -> Result<Vec<AlertChannelRow>, DbError> {
        Ok(sqlx::query_as!(
            AlertChannelRow,
            r#"SELECT id, repository_id, kind, url, created_at FROM alert_channels
               WHERE repository_id = ? ORDER BY id"#,
            repository_id
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Removes a channel of a repository, with its deliveries and their log.
    pub async fn remove_alert_channel(&self, repository_id: i64, id: i64) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        let removed = sqlx::query!(
            "DELETE FROM alert_channels WHERE id = ? AND repository_id = ?",
            id,
            repository_id
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if removed == 0 {
            return Err(DbError::NotFound(format!("alert channel {id}")));
        }
        Ok(())
    }

    /// Queues one delivery per channel of the regression's repository, for active regressions
    /// only (not improvements). A (channel, regression) pair already queued is left alone.
    /// Returns how many deliveries were added.
    pub async fn enqueue_alert_deliveries(
        &self,
        regression_ids: &[i64],
        now: i64,
    ) -> Result<u64, DbError> {
        let mut tx = self.begin_write().await?;
        let mut added = 0;
        for id in regression_ids {
            added += sqlx::query!(
                r#"INSERT INTO alert_deliveries (channel_id, regression_id, next_attempt_at, created_at)
                   SELECT ch.id, g.id, ?, ? FROM regressions g
                   JOIN series s ON s.id = g.series_id
                   JOIN benchmarks b ON b.id = s.benchmark_id
                   JOIN alert_channels ch ON ch.repository_id = b.repository_id
                   WHERE g.id = ? AND g.kind = 'regression' AND g.active = 1
                   ON CONFLICT (channel_id, regression_id) DO NOTHING"#,
                now,
                now,
                id
            )
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(added)
    }

    /// How many commits of the tracked branch a regression's suspect range holds (the first
    /// bad commit included): 1 means its commit is the culprit. `None` when it has no
    /// previous measured commit or either commit is off the branch.
    pub async fn regression_span(&self, regression_id: i64) -> Result<Option<i64>, DbError> {
        let span = sqlx::query_scalar!(
            r#"SELECT c.position - p.position AS "span?: i64" FROM regressions g
               JOIN commits c ON c.id = g.commit_id
               LEFT JOIN commits p ON p.id = g.previous_id
               WHERE g.id = ?"#,
            regression_id
        )
        .fetch_optional(&self.reader)
        .await?;
        Ok(span.flatten())
    }

    /// Pending deliveries due at `now`, oldest first.
    pub async fn due_alert_deliveries(
        &self,
        now: i64,
        limit: i64,
    ) -> Result<Vec<DueDelivery>, DbError> {
        Ok(sqlx::query_as!(
            DueDelivery,
            r#"SELECT d.id, d.attempts, ch.kind, ch.url, d.regression_id
               FROM alert_deliveries d JOIN alert_channels ch ON ch.id = d.channel_id
               WHERE d.state = 'pending' AND d.next_attempt_at <= ?
               ORDER BY d.next_attempt_at, d.id LIMIT ?"#,
            now,
            limit
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Logs an attempt at an outbox row and moves the row on. A row no longer pending (a
    /// newer commit status superseded it meanwhile) keeps its state; the attempt is logged.
    pub async fn record_attempt(
        &self,
        item: OutboxItem,
        attempt: i64,
        outcome: &AttemptOutcome,
        next: NextStep,
        now: i64,
    ) -> Result<(), DbError> {
        let (state, next_at, finished_at) = match next {
            NextStep::Delivered => ("delivered", now, Some(now)),
            NextStep::RetryAt(at) => ("pending", at, None),
            NextStep::Failed => ("failed", now, Some(now)),
            NextStep::Cancelled => ("cancelled", now, Some(now)),
        };
        let (delivery, post) = item.ids();
        let mut tx = self.begin_write().await?;
        // The row may have gone while it was being sent (its channel was removed): then
        // there is nothing left to log against.
        sqlx::query!(
            r#"INSERT INTO alert_attempts (delivery_id, status_post_id, attempt, at, http_status, error)
               SELECT ?1, ?2, ?3, ?4, ?5, ?6
               WHERE EXISTS (SELECT 1 FROM alert_deliveries WHERE id = ?1)
                  OR EXISTS (SELECT 1 FROM commit_status_posts WHERE id = ?2)"#,
            delivery,
            post,
            attempt,
            now,
            outcome.http_status,
            outcome.error
        )
        .execute(&mut *tx)
        .await?;
        match item {
            OutboxItem::Alert(id) => sqlx::query!(
                r#"UPDATE alert_deliveries SET state = ?, attempts = ?, next_attempt_at = ?, finished_at = ?
                   WHERE id = ? AND state = 'pending'"#,
                state,
                attempt,
                next_at,
                finished_at,
                id
            )
            .execute(&mut *tx)
            .await?,
            OutboxItem::CommitStatus(id) => sqlx::query!(
                r#"UPDATE commit_status_posts SET state = ?, attempts = ?, next_attempt_at = ?, finished_at = ?
                   WHERE id = ? AND state = 'pending'"#,
                state,
                attempt,
                next_at,
                finished_at,
                id
            )
            .execute(&mut *tx)
            .await?,
        };
        tx.commit().await?;
        Ok(())
    }

    /// The latest deliveries of a repository's channels, newest first, each with its log.
    pub async fn alert_deliveries(
        &self,
        repository_id: i64,
        limit: i64,
    ) -> Result<Vec<DeliveryRow>, DbError> {
        let rows = sqlx::query!(
            r#"SELECT d.id, d.channel_id, ch.kind, d.regression_id, b.name AS benchmark, d.state,
                      d.attempts, d.next_attempt_at, d.created_at, d.finished_at
               FROM alert_deliveries d
               JOIN alert_channels ch ON ch.id = d.channel_id
               JOIN regressions g ON g.id = d.regression_id
               JOIN series s ON s.id = g.series_id
               JOIN benchmarks b ON b.id = s.benchmark_id
               WHERE ch.repository_id = ? ORDER BY d.id DESC LIMIT ?"#,
            repository_id,
            limit
        )
        .fetch_all(&self.reader)
        .await?;
        let items: Vec<OutboxItem> = rows.iter().map(|r| OutboxItem::Alert(r.id)).collect();
        let mut logs = self.attempt_logs(&items).await?;
        let mut deliveries = Vec::with_capacity(rows.len());
        for r in rows {
            deliveries.push(DeliveryRow {
                progress: OutboxProgress {
                    log: logs.remove(&OutboxItem::Alert(r.id)).unwrap_or_default(),
                    state: r.state,
                    attempts: r.attempts,
                    next_attempt_at: r.next_attempt_at,
                    created_at: r.created_at,
                    finished_at: r.finished_at,
                },
                id: r.id,
                channel_id: r.channel_id,
                channel_kind: r.kind,
                regression_id: r.regression_id,
                benchmark: r.benchmark,
            });
        }
        Ok(deliveries)
    }

    /// The logged attempts at each of `items`, oldest first, in one query (a listing shows
    /// every row with its log).
    pub(super) async fn attempt_logs(
        &self,
        items: &[OutboxItem],
    ) -> Result<HashMap<OutboxItem, Vec<AttemptRow>>, DbError> {
        let (deliveries, posts): (Vec<_>, Vec<_>) = items.iter().map(|item| item.ids()).unzip();
        let ids = |ids: Vec<Option<i64>>| {
            serde_json::to_string(&ids.into_iter().flatten().collect::<Vec<i64>>())
                .expect("integers serialize")
        };
        let (deliveries, posts) = (ids(deliveries), ids(posts));
        let rows = sqlx::query!(
            r#"SELECT delivery_id, status_post_id, attempt, at, http_status, error
               FROM alert_attempts
               WHERE delivery_id IN (SELECT value FROM json_each(?))
                  OR status_post_id IN (SELECT value FROM json_each(?))
               ORDER BY id"#,
            deliveries,
            posts
        )
        .fetch_all(&self.reader)
        .await?;
        let mut logs: HashMap<OutboxItem, Vec<AttemptRow>> = HashMap::new();
        for r in rows {
            let item = match (r.delivery_id, r.status_post_id) {
                (Some(id), _) => OutboxItem::Alert(id),
                (None, Some(id)) => OutboxItem::CommitStatus(id),
                (None, None) => continue,
            };
            logs.entry(item).or_default().push(AttemptRow {
                attempt: r.attempt,
                at: r.at,
                http_status: r.http_status,
                error: r.error,
            });
        }
        Ok(logs)
    }
}

#[cfg(test)]
mod tests {
    use super::validate_outbound_url;

    #[test]
    fn outbound_urls_must_be_http_with_a_host() {
        for good in [
            "https://hooks.slack.com/services/T0/B0/xyz",
            "http://127.0.0.1:9000/hook",
            "HTTPS://example.com",
            "http://[::1]:8080/x?y=1",
        ] {
            assert!(validate_outbound_url(good).is_ok(), "{good}");
        }
        let long = format!("https://example.com/{}", "a".repeat(3000));
        for bad in [
            "",
            "ftp://example.com/x",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "https://",
            "https:///path",
            "https://user:pw@example.com/",
            "https://exa mple.com/",
            "https://example.com/\n",
            "example.com/hook",
            long.as_str(),
        ] {
            assert!(validate_outbound_url(bad).is_err(), "{bad:?} accepted");
        }
    }
}
