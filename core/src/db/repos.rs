//! Repositories and the commits of their history.

use super::{Db, DbError};
use crate::model::CommitSha;

/// A tracked repository.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RepositoryRow {
    pub id: i64,
    pub name: String,
    /// Shown with any `user:token@` redacted.
    #[serde(serialize_with = "crate::credentials::serialize_redacted")]
    pub url: String,
    pub branch: String,
    pub created_at: i64,
    /// Seconds between polls of the remote; `None` when pushes arrive by webhook only.
    pub poll_seconds: Option<i64>,
    /// Comma-separated labels a machine must carry to run this repository's jobs.
    pub machine_labels: String,
}

/// How a repository learns of pushes and where its jobs run. The webhook secret is written
/// here and never read back through the API.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RepositorySettings {
    pub webhook_secret: Option<String>,
    pub poll_seconds: Option<i64>,
    pub machine_labels: String,
    /// Every suite runs without the network, whatever a commit's `kymo.toml` says.
    pub network_off: bool,
}

impl RepositorySettings {
    /// Checks the settings and normalizes the labels.
    pub fn validated(mut self) -> Result<Self, DbError> {
        if let Some(secret) = &self.webhook_secret
            && (secret.len() < 8 || secret.len() > 256 || secret.chars().any(char::is_control))
        {
            return Err(DbError::Invalid(
                "a webhook secret has 8-256 characters and no control characters".into(),
            ));
        }
        if let Some(seconds) = self.poll_seconds
            && !(10..=86_400).contains(&seconds)
        {
            return Err(DbError::Invalid(format!(
                "poll interval {seconds}s is out of range: use 10 seconds to 1 day"
            )));
        }
        self.machine_labels = super::jobs::normalize_labels(&self.machine_labels)?;
        Ok(self)
    }
}

/// A commit as git describes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommitRecord {
    pub sha: CommitSha,
    pub parents: Vec<CommitSha>,
    pub author: String,
    pub time: i64,
    pub message: String,
}

/// Checks a repository's name and branch before anything is stored: names appear in URLs
/// and in paths on disk, so they are kept to a safe alphabet.
pub fn validate_repository(name: &str, url: &str, branch: &str) -> Result<(), DbError> {
    let safe = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    };
    if name.is_empty() || name.len() > 64 || !safe(name) || name.starts_with('.') {
        return Err(DbError::Invalid(format!(
            "repository name {name:?} is not valid: use 1-64 letters, digits, '-', '_' or '.', not starting with '.'"
        )));
    }
    if url.trim().is_empty() || url.len() > 2048 || url.chars().any(char::is_control) {
        return Err(DbError::Invalid(
            "repository url must be a non-empty path or URL of at most 2048 characters".into(),
        ));
    }
    let branch_ok = !branch.is_empty()
        && branch.len() <= 200
        && !branch.starts_with(['-', '/'])
        && !branch.contains("..")
        && branch
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'));
    if !branch_ok {
        return Err(DbError::Invalid(format!(
            "branch {branch:?} is not a valid branch name"
        )));
    }
    Ok(())
}

impl Db {
    /// Adds a repository to track. Refuses a name already taken.
    pub async fn create_repository(
        &self,
        name: &str,
        url: &str,
        branch: &str,
        settings: RepositorySettings,
        now: i64,
    ) -> Result<RepositoryRow, DbError> {
        validate_repository(name, url, branch)?;
        let settings = settings.validated()?;
        let mut tx = self.begin_write().await?;
        let existing = sqlx::query_scalar!("SELECT id FROM repositories WHERE name = ?", name)
            .fetch_optional(&mut *tx)
            .await?;
        if existing.is_some() {
            return Err(DbError::Conflict(format!(
                "a repository named {name:?} already exists"
            )));
        }
        let id = sqlx::query_scalar!(
            r#"INSERT INTO repositories (name, url, branch, created_at, webhook_secret, poll_seconds,
                                         machine_labels, network_off)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id AS "id!" "#,
            name,
            url,
            branch,
            now,
            settings.webhook_secret,
            settings.poll_seconds,
            settings.machine_labels,
            settings.network_off
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(RepositoryRow {
            id,
            name: name.into(),
            url: url.into(),
            branch: branch.into(),
            created_at: now,
            poll_seconds: settings.poll_seconds,
            machine_labels: settings.machine_labels,
        })
    }

    /// The repository called `name`.
    pub async fn repository(&self, name: &str) -> Result<RepositoryRow, DbError> {
        sqlx::query_as!(
            RepositoryRow,
            "SELECT id, name, url, branch, created_at, poll_seconds, machine_labels FROM repositories WHERE name = ?",
            name
        )
        .fetch_optional(&self.reader)
        .await?
        .ok_or_else(|| DbError::NotFound(format!("repository {name:?}")))
    }

    /// Every repository, by name.
    pub async fn repositories(&self) -> Result<Vec<RepositoryRow>, DbError> {
        Ok(sqlx::query_as!(
            RepositoryRow,
            "SELECT id, name, url, branch, created_at, poll_seconds, machine_labels FROM repositories ORDER BY name"
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Records the tracked branch's first-parent chain, oldest first, and renumbers history
    /// positions to follow it: commits that left the chain (a force-push) lose their position,
    /// and the series summaries of the positions that moved are made again.
    pub async fn record_history(
        &self,
        repository_id: i64,
        chain_oldest_first: &[CommitRecord],
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        let before = sqlx::query_scalar!(
            r#"SELECT id AS "id!" FROM commits WHERE repository_id = ? AND position IS NOT NULL
               ORDER BY position"#,
            repository_id
        )
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query!(
            "UPDATE commits SET position = NULL WHERE repository_id = ?",
            repository_id
        )
        .execute(&mut *tx)
        .await?;
        let mut after = Vec::with_capacity(chain_oldest_first.len());
        for (position, commit) in chain_oldest_first.iter().enumerate() {
            after.push(upsert_commit(&mut tx, repository_id, commit, Some(position as i64)).await?);
        }
        // Summaries are by position: those of positions that moved are made again.
        super::summaries::follow_moved_history(&mut tx, repository_id, &before, &after).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records one commit (off the tracked chain, or already on it) and returns its id.
    pub async fn record_commit(
        &self,
        repository_id: i64,
        commit: &CommitRecord,
    ) -> Result<i64, DbError> {
        let mut tx = self.begin_write().await?;
        let id = upsert_commit(&mut tx, repository_id, commit, None).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Keeps `toml` as the repository's suites for commits without a `kymo.toml` (or forgets
    /// them, with `None`). The caller has validated the file.
    pub async fn set_stored_suites(
        &self,
        repository_id: i64,
        toml: Option<&str>,
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            "UPDATE repositories SET suites_toml = ? WHERE id = ?",
            toml,
            repository_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The `kymo.toml` kept on the server for the repository, if any.
    pub async fn stored_suites(&self, repository_id: i64) -> Result<Option<String>, DbError> {
        Ok(sqlx::query_scalar!(
            "SELECT suites_toml FROM repositories WHERE id = ?",
            repository_id
        )
        .fetch_optional(&self.reader)
        .await?
        .flatten())
    }

    /// Cuts the network of every suite of the repository (`true`), or lets each suite's
    /// `kymo.toml` decide again (`false`).
    pub async fn set_network_off(&self, repository_id: i64, off: bool) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            "UPDATE repositories SET network_off = ? WHERE id = ?",
            off,
            repository_id
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether the repository cuts the network of all its suites.
    pub async fn network_off(&self, repository_id: i64) -> Result<bool, DbError> {
        Ok(sqlx::query_scalar!(
            r#"SELECT network_off AS "off: bool" FROM repositories WHERE id = ?"#,
            repository_id
        )
        .fetch_optional(&self.reader)
        .await?
        .unwrap_or(false))
    }

    /// The id of a known commit.
    pub async fn commit_id(
        &self,
        repository_id: i64,
        sha: &CommitSha,
    ) -> Result<Option<i64>, DbError> {
        let sha = sha.as_str();
        Ok(sqlx::query_scalar!(
            "SELECT id FROM commits WHERE repository_id = ? AND sha = ?",
            repository_id,
            sha
        )
        .fetch_optional(&self.reader)
        .await?)
    }
}

/// Inserts a commit or, when it is known, updates its position (keeping an existing one when
/// `position` is `None`).
async fn upsert_commit(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    repository_id: i64,
    commit: &CommitRecord,
    position: Option<i64>,
) -> Result<i64, DbError> {
    let sha = commit.sha.as_str();
    let parents = commit
        .parents
        .iter()
        .map(CommitSha::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let id = sqlx::query_scalar!(
        r#"INSERT INTO commits (repository_id, sha, parents, author, committed_at, message, position)
           VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (repository_id, sha) DO UPDATE SET position = coalesce(excluded.position, commits.position),
               -- A pull request's head measured in CI is recorded without parents until the
               -- mirror has it (its author and title stand in): git's account then wins.
               parents = CASE WHEN commits.parents = '' THEN excluded.parents ELSE commits.parents END,
               author = CASE WHEN commits.parents = '' THEN excluded.author ELSE commits.author END,
               committed_at = CASE WHEN commits.parents = '' THEN excluded.committed_at ELSE commits.committed_at END,
               message = CASE WHEN commits.parents = '' THEN excluded.message ELSE commits.message END
           RETURNING id AS "id!" "#,
        repository_id,
        sha,
        parents,
        commit.author,
        commit.time,
        commit.message,
        position
    )
    .fetch_one(&mut **tx)
    .await?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_names_that_could_escape_a_path_are_refused() {
        assert!(validate_repository("kymo", "/tmp/x", "main").is_ok());
        for name in [
            "",
            "../etc",
            "a/b",
            ".hidden",
            "x\0y",
            &"n".repeat(65),
            "<b>",
        ] {
            assert!(
                validate_repository(name, "/tmp/x", "main").is_err(),
                "{name:?}"
            );
        }
        for branch in ["", "-rf", "a..b", "a b", "/abs"] {
            assert!(
                validate_repository("k", "/tmp/x", branch).is_err(),
                "{branch:?}"
            );
        }
        assert!(validate_repository("k", "  ", "main").is_err());
    }
}
