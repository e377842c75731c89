//! Who may do what: API tokens (listed, revoked) and the browser sessions of admins.

use super::machines::{random_secret, token_hash};
use super::{Db, DbError, TokenScope};

/// A token as `kymo token list` shows it: never the secret.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TokenRow {
    pub id: i64,
    pub name: String,
    pub scope: String,
    /// Labels granted to a worker token (comma-separated, normalized); empty otherwise.
    pub labels: String,
    /// The one repository an upload token is limited to; any when absent.
    #[serde(default)]
    pub repository: Option<String>,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// The holder of a live token.
#[derive(Debug, Clone, PartialEq)]
pub struct Credential {
    pub token_id: i64,
    pub name: String,
    pub scope: String,
    /// The labels an admin granted to this worker token (comma-separated, normalized).
    pub labels: String,
    /// The one repository an upload token may upload to; any when `None`.
    pub repository_id: Option<i64>,
    pub last_used_at: Option<i64>,
}

impl Credential {
    /// Whether this credential may act with `scope` (an admin may do anything).
    pub fn allows(&self, scope: TokenScope) -> bool {
        self.scope == "admin" || self.scope == scope.as_str()
    }

    /// Whether this credential may act on the repository `repository_id`.
    pub fn reaches(&self, repository_id: i64) -> bool {
        self.repository_id.is_none_or(|only| only == repository_id)
    }

    /// The labels of `declared` (normalized) that this credential may claim with: an admin
    /// token may use any, a worker token only those granted to it. Returns the usable labels
    /// and those refused.
    pub fn grant(&self, declared: &str) -> Result<(String, Vec<String>), DbError> {
        let declared = super::normalize_labels(declared)?;
        if self.scope == "admin" {
            return Ok((declared, Vec::new()));
        }
        let granted: Vec<&str> = self.labels.split(',').collect();
        let (usable, refused): (Vec<&str>, Vec<&str>) = declared
            .split(',')
            .filter(|l| !l.is_empty())
            .partition(|label| granted.contains(label));
        Ok((
            usable.join(","),
            refused.into_iter().map(str::to_owned).collect(),
        ))
    }
}

/// A live browser session.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: i64,
    pub name: String,
    pub csrf: String,
    pub expires_at: i64,
}

/// Checks a token's name: it is shown in listings and recorded as who triaged.
pub fn validate_token_name(name: &str) -> Result<(), DbError> {
    if name.trim().is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
        return Err(DbError::Invalid(
            "a token's name has 1-64 characters and no control characters".into(),
        ));
    }
    Ok(())
}

impl Db {
    /// The live token `token`, if it is one. Does not record its use.
    pub async fn credential(&self, token: &str) -> Result<Option<Credential>, DbError> {
        if token.len() > 256 {
            return Ok(None);
        }
        let hash = token_hash(token);
        Ok(sqlx::query_as!(
            Credential,
            r#"SELECT id AS "token_id!", name, scope, labels, repository_id, last_used_at FROM tokens
               WHERE hash = ? AND revoked_at IS NULL"#,
            hash
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// Records that a token was used, at most once a minute (workers poll every second or so;
    /// their polls must not each take the write lock).
    pub async fn record_token_use(&self, credential: &Credential, now: i64) -> Result<(), DbError> {
        if credential.last_used_at.is_some_and(|last| now - last < 60) {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            "UPDATE tokens SET last_used_at = ? WHERE id = ?",
            now,
            credential.token_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Creates a worker token granted `labels` (comma-separated): its worker may claim with
    /// those and no others. The token is returned once and stored hashed.
    pub async fn create_worker_token(
        &self,
        name: &str,
        labels: &str,
        now: i64,
    ) -> Result<String, DbError> {
        let labels = super::normalize_labels(labels)?;
        self.insert_token(name, TokenScope::Worker, &labels, None, now)
            .await
    }

    /// Creates an upload token that may upload to the repository named `repository` only
    /// (a CI secret of that project). The token is returned once and stored hashed.
    pub async fn create_repository_upload_token(
        &self,
        name: &str,
        repository: &str,
        now: i64,
    ) -> Result<String, DbError> {
        let repository_id = self.repository(repository).await?.id;
        self.insert_token(name, TokenScope::Upload, "", Some(repository_id), now)
            .await
    }

    /// The token a job's current lease was handed to (None when the job is not running, or
    /// was claimed before tokens were recorded).
    pub async fn job_lease_token(&self, job_id: i64) -> Result<Option<i64>, DbError> {
        Ok(sqlx::query_scalar!(
            "SELECT leased_token_id FROM jobs WHERE id = ? AND state = 'running'",
            job_id
        )
        .fetch_optional(&self.reader)
        .await?
        .flatten())
    }

    /// Every token, newest first.
    pub async fn tokens(&self) -> Result<Vec<TokenRow>, DbError> {
        Ok(sqlx::query_as!(
            TokenRow,
            r#"SELECT t.id, t.name, t.scope, t.labels, r.name AS "repository?", t.created_at,
                      t.last_used_at, t.revoked_at
               FROM tokens t LEFT JOIN repositories r ON r.id = t.repository_id
               ORDER BY t.id DESC"#
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Revokes a token and ends the sessions it opened.
    pub async fn revoke_token(&self, id: i64, now: i64) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query!(
            "UPDATE tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?",
            now,
            id
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        sqlx::query!("DELETE FROM sessions WHERE token_id = ?", id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        if updated == 0 {
            return Err(DbError::NotFound(format!("token {id}")));
        }
        Ok(())
    }

    /// Opens a session for an admin token's holder; returns the cookie's value (stored only
    /// hashed) and the session.
    pub async fn create_session(
        &self,
        credential: &Credential,
        lifetime_seconds: i64,
        now: i64,
    ) -> Result<(String, Session), DbError> {
        let secret = random_secret("");
        let csrf = random_secret("");
        let hash = token_hash(&secret);
        let expires_at = now + lifetime_seconds;
        let mut tx = self.begin_write().await?;
        sqlx::query!("DELETE FROM sessions WHERE expires_at < ?", now)
            .execute(&mut *tx)
            .await?;
        let id = sqlx::query_scalar!(
            r#"INSERT INTO sessions (hash, token_id, csrf, created_at, expires_at)
               VALUES (?, ?, ?, ?, ?) RETURNING id AS "id!" "#,
            hash,
            credential.token_id,
            csrf,
            now,
            expires_at
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((
            secret,
            Session {
                id,
                name: credential.name.clone(),
                csrf,
                expires_at,
            },
        ))
    }

    /// The live session whose cookie is `secret`, while its admin token is live.
    pub async fn session(&self, secret: &str, now: i64) -> Result<Option<Session>, DbError> {
        if secret.len() > 128 {
            return Ok(None);
        }
        let hash = token_hash(secret);
        Ok(sqlx::query_as!(
            Session,
            r#"SELECT s.id, t.name, s.csrf, s.expires_at FROM sessions s
               JOIN tokens t ON t.id = s.token_id
               WHERE s.hash = ? AND s.expires_at > ? AND t.revoked_at IS NULL AND t.scope = 'admin'"#,
            hash,
            now
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// Ends a session.
    pub async fn end_session(&self, id: i64) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!("DELETE FROM sessions WHERE id = ?", id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
