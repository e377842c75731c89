//! Benchmark machines (by hardware fingerprint) and the tokens that let clients in.

use std::io::Read;

use sha2::{Digest, Sha256};

use super::{Db, DbError};
use crate::model::{MachineFingerprint, MachineSpecs};

/// A registered machine, its specs, and what it is doing.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct MachineRow {
    pub id: i64,
    pub fingerprint: String,
    pub name: String,
    pub cpu_model: String,
    pub logical_cores: i64,
    pub physical_cores: i64,
    pub memory_gib: i64,
    pub arch: String,
    pub virtualization: String,
    pub first_seen_at: i64,
    pub last_seen_at: i64,
    /// Comma-separated labels its worker declares.
    pub labels: String,
    /// The job it is running now, if any.
    pub current_job: Option<i64>,
}

/// What a token lets its holder do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenScope {
    Admin,
    Worker,
    Upload,
}

impl TokenScope {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Admin => "admin",
            TokenScope::Worker => "worker",
            TokenScope::Upload => "upload",
        }
    }
}

/// A fresh secret of 32 random bytes, hex-encoded behind `prefix`.
pub fn random_secret(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("the kernel's random source /dev/urandom must be readable");
    format!("{prefix}{}", hex::encode(bytes))
}

pub(super) fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Db {
    /// Registers the machine with these specs, or refreshes it; returns its id. `labels` comes
    /// with a worker's claim (and marks the machine as running a worker), `None` with an upload.
    pub async fn upsert_machine(
        &self,
        specs: &MachineSpecs,
        name: &str,
        labels: Option<&str>,
        now: i64,
    ) -> Result<(i64, MachineFingerprint), DbError> {
        let fingerprint = specs.fingerprint();
        let fp = fingerprint.as_str();
        let name: String = name.chars().take(128).collect();
        let cpu: String = specs.cpu_model.chars().take(256).collect();
        let arch: String = specs.arch.chars().take(32).collect();
        let virt: String = specs.virtualization.chars().take(32).collect();
        let (logical, physical, memory) = (
            i64::from(specs.logical_cores),
            i64::from(specs.physical_cores),
            i64::from(specs.memory_gib),
        );
        let mut tx = self.begin_write().await?;
        let id = sqlx::query_scalar!(
            r#"INSERT INTO machines (fingerprint, name, cpu_model, logical_cores, physical_cores,
                                     memory_gib, arch, virtualization, first_seen_at, last_seen_at, labels,
                                     runs_worker)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, ''), ?11 IS NOT NULL)
               ON CONFLICT (fingerprint) DO UPDATE SET last_seen_at = excluded.last_seen_at,
                   name = excluded.name, labels = coalesce(?11, machines.labels),
                   runs_worker = max(machines.runs_worker, ?11 IS NOT NULL)
               RETURNING id AS "id!" "#,
            fp,
            name,
            cpu,
            logical,
            physical,
            memory,
            arch,
            virt,
            now,
            now,
            labels
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((id, fingerprint))
    }

    /// The id of the registered machine with this fingerprint.
    pub async fn machine_id(&self, fingerprint: &MachineFingerprint) -> Result<i64, DbError> {
        let fp = fingerprint.as_str();
        sqlx::query_scalar!("SELECT id FROM machines WHERE fingerprint = ?", fp)
            .fetch_optional(&self.reader)
            .await?
            .ok_or_else(|| {
                DbError::NotFound(format!(
                    "machine {fingerprint} (no worker or upload with that fingerprint has registered it)"
                ))
            })
    }

    /// Every machine, most recently seen first.
    pub async fn machines(&self) -> Result<Vec<MachineRow>, DbError> {
        Ok(sqlx::query_as!(
            MachineRow,
            r#"SELECT m.id, m.fingerprint, m.name, m.cpu_model, m.logical_cores, m.physical_cores,
                      m.memory_gib, m.arch, m.virtualization, m.first_seen_at, m.last_seen_at,
                      m.labels, (SELECT j.id FROM jobs j WHERE j.machine_id = m.id AND j.state = 'running'
                       LIMIT 1) AS "current_job?: i64"
               FROM machines m ORDER BY m.last_seen_at DESC, m.id"#
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Creates a token and returns it; only its hash is stored.
    pub async fn create_token(
        &self,
        name: &str,
        scope: TokenScope,
        now: i64,
    ) -> Result<String, DbError> {
        self.insert_token(name, scope, "", None, now).await
    }

    /// Stores a new token (hashed) with its scope, granted labels and the one repository it
    /// is limited to (any when `None`); returns the token.
    pub(super) async fn insert_token(
        &self,
        name: &str,
        scope: TokenScope,
        labels: &str,
        repository_id: Option<i64>,
        now: i64,
    ) -> Result<String, DbError> {
        super::validate_token_name(name)?;
        let token = random_secret("kymo_");
        let hash = token_hash(&token);
        let scope = scope.as_str();
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            "INSERT INTO tokens (name, scope, hash, labels, repository_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            name,
            scope,
            hash,
            labels,
            repository_id,
            now
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(token)
    }
}

impl Db {
    /// Revokes every live token called `name` (the embedded worker's token of an earlier start).
    pub async fn revoke_tokens_named(&self, name: &str, now: i64) -> Result<u64, DbError> {
        let mut tx = self.begin_write().await?;
        let revoked = sqlx::query!(
            "UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
            now,
            name
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(revoked)
    }
}
