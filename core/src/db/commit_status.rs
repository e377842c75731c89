//! Commit statuses: where a repository's go (a GitHub or Gitea API), what a commit's jobs and
//! regressions say about it, and the outbox of states to post.

use super::alerts::{OutboxItem, OutboxProgress, validate_outbound_url};
use super::{Db, DbError};

/// The forges kymo posts commit statuses (and pull request comments) to; Forgejo speaks
/// Gitea's API.
pub const STATUS_KINDS: [&str; 3] = ["github", "gitea", "gitlab"];

/// A repository's commit-status target as stored, token included.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitStatusTarget {
    pub kind: String,
    pub api_url: String,
    pub slug: String,
    pub token: String,
}

impl CommitStatusTarget {
    /// Checks every field before anything is stored.
    pub fn validate(&self) -> Result<(), DbError> {
        if !STATUS_KINDS.contains(&self.kind.as_str()) {
            return Err(DbError::Invalid(format!(
                "status kind {:?} is not one of {}",
                self.kind,
                STATUS_KINDS.join(", ")
            )));
        }
        validate_outbound_url(&self.api_url)?;
        let part_ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 100
                && p != "."
                && p != ".."
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        // GitLab projects may sit in nested groups (group/subgroup/project).
        let nested = self.kind == "gitlab";
        match self.slug.split_once('/') {
            Some((owner, name)) if part_ok(owner) && part_ok(name) => {}
            Some((owner, path))
                if nested
                    && part_ok(owner)
                    && path.len() <= 400
                    && path.split('/').all(part_ok) => {}
            _ => {
                return Err(DbError::Invalid(format!(
                    "slug {:?} is not owner/name (letters, digits, '-', '_', '.')",
                    self.slug
                )));
            }
        }
        if self.token.is_empty()
            || self.token.len() > 512
            || !self.token.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(DbError::Invalid(
                "the token must be 1-512 printable characters without spaces".into(),
            ));
        }
        Ok(())
    }
}

/// A commit as the status computation sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusCommit {
    pub repository_id: i64,
    pub repository: String,
    pub sha: String,
    /// States of the commit's jobs, cancelled ones left out.
    pub job_states: Vec<String>,
    /// Active regressions at this commit whose triage still stands (open or acknowledged).
    pub regressions: i64,
    /// Regressions at this commit still being confirmed (re-measured before they count).
    pub confirming: i64,
}

/// A commit-status post whose time has come; `target` is `None` when the repository's
/// target was removed meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct DueStatusPost {
    pub id: i64,
    pub attempts: i64,
    pub commit_state: String,
    pub description: String,
    pub repository: String,
    pub sha: String,
    pub target: Option<CommitStatusTarget>,
}

/// A commit-status post as the log shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct StatusPostRow {
    pub id: i64,
    pub sha: String,
    pub commit_state: String,
    pub description: String,
    #[serde(flatten)]
    pub progress: OutboxProgress,
}

impl Db {
    /// Stores (or replaces) a repository's commit-status target.
    pub async fn set_commit_status_target(
        &self,
        repository_id: i64,
        target: &CommitStatusTarget,
        now: i64,
    ) -> Result<(), DbError> {
        target.validate()?;
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            r#"INSERT INTO commit_status_targets (repository_id, kind, api_url, slug, token, updated_at)
               VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT (repository_id) DO UPDATE SET kind = excluded.kind,
                   api_url = excluded.api_url, slug = excluded.slug, token = excluded.token,
                   updated_at = excluded.updated_at"#,
            repository_id,
            target.kind,
            target.api_url,
            target.slug,
            target.token,
            now
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A repository's commit-status target, if it has one.
    pub async fn commit_status_target(
        &self,
        repository_id: i64,
    ) -> Result<Option<CommitStatusTarget>, DbError> {
        Ok(sqlx::query_as!(
            CommitStatusTarget,
            "SELECT kind, api_url, slug, token FROM commit_status_targets WHERE repository_id = ?",
            repository_id
        )
        .fetch_optional(&self.reader)
        .await?)
    }

    /// Stops posting a repository's commit statuses.
    pub async fn remove_commit_status_target(&self, repository_id: i64) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        let removed = sqlx::query!(
            "DELETE FROM commit_status_targets WHERE repository_id = ?",
            repository_id
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if removed == 0 {
            return Err(DbError::NotFound("commit status target".into()));
        }
        Ok(())
    }

    /// What a commit's status depends on: its jobs' states and its standing regressions.
    pub async fn status_commit(&self, commit_id: i64) -> Result<StatusCommit, DbError> {
        let commit = sqlx::query!(
            r#"SELECT c.repository_id, r.name, c.sha FROM commits c
               JOIN repositories r ON r.id = c.repository_id WHERE c.id = ?"#,
            commit_id
        )
        .fetch_optional(&self.reader)
        .await?
        .ok_or_else(|| DbError::NotFound(format!("commit {commit_id}")))?;
        let job_states = sqlx::query_scalar!(
            "SELECT state FROM jobs WHERE commit_id = ? AND state <> 'cancelled' AND comparison_id IS NULL ORDER BY id",
            commit_id
        )
        .fetch_all(&self.reader)
        .await?;
        // A regression being confirmed is not one yet: it keeps the status pending.
        let regressions = sqlx::query!(
            r#"SELECT count(*) FILTER (WHERE f.state IS NULL OR f.state <> 'confirming') AS "found!: i64",
                      count(*) FILTER (WHERE f.state = 'confirming') AS "confirming!: i64"
               FROM regressions g LEFT JOIN confirmations f ON f.regression_id = g.id
               WHERE g.commit_id = ? AND g.kind = 'regression' AND g.active = 1
                 AND g.state IN ('open', 'acknowledged')"#,
            commit_id
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(StatusCommit {
            repository_id: commit.repository_id,
            repository: commit.name,
            sha: commit.sha,
            job_states,
            regressions: regressions.found,
            confirming: regressions.confirming,
        })
    }

    /// Queues `commit_state` for posting unless it is the state last queued for the commit.
    /// A post of an older state not yet delivered is cancelled, so that a forge never gets
    /// the states out of order. Returns the new post's id, if one was queued.
    pub async fn enqueue_status_post(
        &self,
        commit_id: i64,
        commit_state: &str,
        description: &str,
        now: i64,
    ) -> Result<Option<i64>, DbError> {
        let mut tx = self.begin_write().await?;
        let last = sqlx::query_scalar!(
            "SELECT commit_state FROM commit_status_posts WHERE commit_id = ? ORDER BY id DESC LIMIT 1",
            commit_id
        )
        .fetch_optional(&mut *tx)
        .await?;
        if last.as_deref() == Some(commit_state) {
            return Ok(None);
        }
        sqlx::query!(
            r#"UPDATE commit_status_posts SET state = 'cancelled', finished_at = ?
               WHERE commit_id = ? AND state = 'pending'"#,
            now,
            commit_id
        )
        .execute(&mut *tx)
        .await?;
        let id = sqlx::query_scalar!(
            r#"INSERT INTO commit_status_posts (commit_id, commit_state, description, next_attempt_at, created_at)
               VALUES (?, ?, ?, ?, ?) RETURNING id AS "id!""#,
            commit_id,
            commit_state,
            description,
            now,
            now
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(id))
    }

    /// Pending commit-status posts due at `now`, oldest first, with their target.
    pub async fn due_status_posts(
        &self,
        now: i64,
        limit: i64,
    ) -> Result<Vec<DueStatusPost>, DbError> {
        let rows = sqlx::query!(
            r#"SELECT p.id, p.attempts, p.commit_state, p.description, r.name AS repository, c.sha,
                      t.kind AS "kind?", t.api_url AS "api_url?", t.slug AS "slug?", t.token AS "token?"
               FROM commit_status_posts p
               JOIN commits c ON c.id = p.commit_id
               JOIN repositories r ON r.id = c.repository_id
               LEFT JOIN commit_status_targets t ON t.repository_id = c.repository_id
               WHERE p.state = 'pending' AND p.next_attempt_at <= ?
               ORDER BY p.next_attempt_at, p.id LIMIT ?"#,
            now,
            limit
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| DueStatusPost {
                id: r.id,
                attempts: r.attempts,
                commit_state: r.commit_state,
                description: r.description,
                repository: r.repository,
                sha: r.sha,
                target: match (r.kind, r.api_url, r.slug, r.token) {
                    (Some(kind), Some(api_url), Some(slug), Some(token)) => {
                        Some(CommitStatusTarget {
                            kind,
                            api_url,
                            slug,
                            token,
                        })
                    }
                    _ => None,
                },
            })
            .collect())
    }

    /// The latest commit-status posts of a repository, newest first, each with its log.
    pub async fn status_posts(
        &self,
        repository_id: i64,
        limit: i64,
    ) -> Result<Vec<StatusPostRow>, DbError> {
        let rows = sqlx::query!(
            r#"SELECT p.id, c.sha, p.commit_state, p.description, p.state, p.attempts,
                      p.next_attempt_at, p.created_at, p.finished_at
               FROM commit_status_posts p JOIN commits c ON c.id = p.commit_id
               WHERE c.repository_id = ? ORDER BY p.id DESC LIMIT ?"#,
            repository_id,
            limit
        )
        .fetch_all(&self.reader)
        .await?;
        let items: Vec<OutboxItem> = (rows.iter())
            .map(|r| OutboxItem::CommitStatus(r.id))
            .collect();
        let mut logs = self.attempt_logs(&items).await?;
        let mut posts = Vec::with_capacity(rows.len());
        for r in rows {
            posts.push(StatusPostRow {
                progress: OutboxProgress {
                    log: logs
                        .remove(&OutboxItem::CommitStatus(r.id))
                        .unwrap_or_default(),
                    state: r.state,
                    attempts: r.attempts,
                    next_attempt_at: r.next_attempt_at,
                    created_at: r.created_at,
                    finished_at: r.finished_at,
                },
                id: r.id,
                sha: r.sha,
                commit_state: r.commit_state,
                description: r.description,
            });
        }
        Ok(posts)
    }
}

#[cfg(test)]
mod tests {
    use super::CommitStatusTarget;

    fn target(kind: &str, api_url: &str, slug: &str, token: &str) -> CommitStatusTarget {
        CommitStatusTarget {
            kind: kind.into(),
            api_url: api_url.into(),
            slug: slug.into(),
            token: token.into(),
        }
    }

    #[test]
    fn targets_are_checked_field_by_field() {
        let api = "https://api.github.com";
        assert!(
            target("github", api, "ada/kymo", "ghp_x")
                .validate()
                .is_ok()
        );
        assert!(
            target("gitea", "https://git.example/api/v1", "o/r.s", "t")
                .validate()
                .is_ok()
        );
        assert!(
            target("gitlab", "https://gitlab.com/api/v4", "group/sub/kymo", "t")
                .validate()
                .is_ok()
        );
        for bad in [
            target("bitbucket", api, "ada/kymo", "t"),
            target("gitlab", api, "group/../kymo", "t"),
            target("gitlab", api, "group/", "t"),
            target("github", "ftp://x", "ada/kymo", "t"),
            target("github", api, "ada", "t"),
            target("github", api, "ada/kymo/extra", "t"),
            target("github", api, "../kymo", "t"),
            target("github", api, "ada/<b>", "t"),
            target("github", api, "ada/kymo", ""),
            target("github", api, "ada/kymo", "two words"),
            target("github", api, "ada/kymo", "line\nbreak"),
        ] {
            assert!(bad.validate().is_err(), "{bad:?} accepted");
        }
    }
}
