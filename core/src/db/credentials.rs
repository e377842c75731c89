//! The credentials of private remotes: written by admins, read by the server's mirror and
//! handed to the worker that claims a job. Never part of a listing or a page query.

use super::{Db, DbError};
use crate::credentials::GitCredential;

struct CredentialRow {
    kind: String,
    username: Option<String>,
    secret: Option<String>,
    key_path: Option<String>,
}

impl CredentialRow {
    fn into_credential(self) -> Result<GitCredential, DbError> {
        match (
            self.kind.as_str(),
            self.username,
            self.secret,
            self.key_path,
        ) {
            ("https", Some(username), Some(token), None) => {
                Ok(GitCredential::Https { username, token })
            }
            ("ssh", None, passphrase, Some(key_path)) => Ok(GitCredential::Ssh {
                key_path,
                passphrase,
            }),
            (kind, ..) => Err(DbError::Invalid(format!(
                "a stored {kind} credential is corrupt"
            ))),
        }
    }
}

impl Db {
    /// Stores (or, with `None`, removes) the credential of a repository.
    pub async fn set_git_credential(
        &self,
        repository_id: i64,
        credential: Option<&GitCredential>,
        now: i64,
    ) -> Result<(), DbError> {
        let Some(credential) = credential else {
            let mut tx = self.begin_write().await?;
            sqlx::query!(
                "DELETE FROM repository_credentials WHERE repository_id = ?",
                repository_id
            )
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            return Ok(());
        };
        let credential = credential.clone().validated().map_err(DbError::Invalid)?;
        let (kind, username, secret, key_path) = match &credential {
            GitCredential::Https { username, token } => {
                ("https", Some(username), Some(token), None)
            }
            GitCredential::Ssh {
                key_path,
                passphrase,
            } => ("ssh", None, passphrase.as_ref(), Some(key_path)),
        };
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            r#"INSERT INTO repository_credentials (repository_id, kind, username, secret, key_path, updated_at)
               VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT (repository_id) DO UPDATE SET kind = excluded.kind,
                   username = excluded.username, secret = excluded.secret,
                   key_path = excluded.key_path, updated_at = excluded.updated_at"#,
            repository_id,
            kind,
            username,
            secret,
            key_path,
            now
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The credential of a repository, if it has one.
    pub async fn git_credential(
        &self,
        repository_id: i64,
    ) -> Result<Option<GitCredential>, DbError> {
        sqlx::query_as!(
            CredentialRow,
            "SELECT kind, username, secret, key_path FROM repository_credentials WHERE repository_id = ?",
            repository_id
        )
        .fetch_optional(&self.reader)
        .await?
        .map(CredentialRow::into_credential)
        .transpose()
    }

    /// The credential of the repository called `name`, if it has one (for claimed jobs).
    pub async fn git_credential_named(&self, name: &str) -> Result<Option<GitCredential>, DbError> {
        sqlx::query_as!(
            CredentialRow,
            r#"SELECT k.kind, k.username, k.secret, k.key_path
               FROM repository_credentials k JOIN repositories r ON r.id = k.repository_id
               WHERE r.name = ?"#,
            name
        )
        .fetch_optional(&self.reader)
        .await?
        .map(CredentialRow::into_credential)
        .transpose()
    }
}
