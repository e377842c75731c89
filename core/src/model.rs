//! Identifiers and machine descriptions shared by every part of kymo.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A full 40-hex-digit git commit id, always lowercase.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(try_from = "String", into = "String")]
pub struct CommitSha(String);

/// Why a string is not a valid identifier.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdError {
    #[error("a commit sha is 40 hexadecimal digits, got {0:?}")]
    CommitSha(String),
    #[error("a machine fingerprint is 16 hexadecimal digits, got {0:?}")]
    Fingerprint(String),
}

fn truncate_for_message(s: &str) -> String {
    s.chars().take(64).collect()
}

impl CommitSha {
    pub fn parse(s: &str) -> Result<Self, IdError> {
        if s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Self(s.to_ascii_lowercase()))
        } else {
            Err(IdError::CommitSha(truncate_for_message(s)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 10 digits, as people quote commits.
    pub fn short(&self) -> &str {
        &self.0[..10]
    }
}

impl TryFrom<String> for CommitSha {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<CommitSha> for String {
    fn from(sha: CommitSha) -> String {
        sha.0
    }
}

impl fmt::Display for CommitSha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A stable hash of the hardware facts that change performance (see [`MachineSpecs`]).
/// Results from different fingerprints are never mixed in one series.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(try_from = "String", into = "String")]
pub struct MachineFingerprint(String);

impl MachineFingerprint {
    pub fn parse(s: &str) -> Result<Self, IdError> {
        if s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Self(s.to_ascii_lowercase()))
        } else {
            Err(IdError::Fingerprint(truncate_for_message(s)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for MachineFingerprint {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<MachineFingerprint> for String {
    fn from(fp: MachineFingerprint) -> String {
        fp.0
    }
}

impl fmt::Display for MachineFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The hardware facts behind a [`MachineFingerprint`]: what changes performance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MachineSpecs {
    pub cpu_model: String,
    pub logical_cores: u32,
    pub physical_cores: u32,
    /// Total memory rounded to whole GiB, so that firmware reservations do not change it.
    pub memory_gib: u32,
    pub arch: String,
    /// `none` on bare metal, otherwise the hypervisor or container kind (`kvm`, `docker`, ...).
    pub virtualization: String,
}

impl MachineSpecs {
    /// The fingerprint: the first 16 hex digits of SHA-256 over a canonical, versioned rendering
    /// of the specs, so that it stays stable across kymo releases and serde changes.
    pub fn fingerprint(&self) -> MachineFingerprint {
        let canonical = format!(
            "kymo-fingerprint-v1\ncpu={}\nlogical={}\nphysical={}\nmemory_gib={}\narch={}\nvirt={}\n",
            self.cpu_model.trim(),
            self.logical_cores,
            self.physical_cores,
            self.memory_gib,
            self.arch.trim(),
            self.virtualization.trim(),
        );
        let digest = Sha256::digest(canonical.as_bytes());
        MachineFingerprint(hex::encode(&digest[..8]))
    }
}

/// Per-run metadata that may change without the machine changing. A change of environment is
/// annotated on trend graphs; it never starts a new series.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Environment {
    pub kernel: String,
    pub toolchain: String,
    pub governor: String,
    pub hostname: String,
}

/// Whether smaller or larger values of a metric are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Lower,
    Higher,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "lower" => Some(Direction::Lower),
            "higher" => Some(Direction::Higher),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> MachineSpecs {
        MachineSpecs {
            cpu_model: "AMD EPYC 7B13".into(),
            logical_cores: 2,
            physical_cores: 1,
            memory_gib: 24,
            arch: "x86_64".into(),
            virtualization: "kvm".into(),
        }
    }

    #[test]
    fn fingerprint_is_stable_and_sensitive_to_every_field() {
        let base = specs().fingerprint();
        assert_eq!(base, specs().fingerprint());
        assert_eq!(base.as_str().len(), 16);
        let mut changed = specs();
        changed.memory_gib = 32;
        assert_ne!(base, changed.fingerprint());
        let mut changed = specs();
        changed.virtualization = "none".into();
        assert_ne!(base, changed.fingerprint());
    }

    #[test]
    fn commit_sha_rejects_short_and_non_hex_input() {
        assert!(CommitSha::parse("abc").is_err());
        assert!(CommitSha::parse(&"g".repeat(40)).is_err());
        let sha = CommitSha::parse(&"A".repeat(40)).unwrap();
        assert_eq!(sha.as_str(), "a".repeat(40));
        assert_eq!(sha.short().len(), 10);
    }
}
