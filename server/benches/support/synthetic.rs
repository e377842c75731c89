//! A synthetic repository for the benches and the load generator: a linear history of commits
//! on one machine, stored through the real ingest (`Db::store_run`). Included with `#[path]`
//! by `benches/spine.rs`, `benches/scale.rs` and `examples/load_db.rs`.

use std::path::Path;

use kymo_core::db::{CommitRecord, Db, IngestSummary, RunRecord};
use kymo_core::model::{CommitSha, Environment, MachineFingerprint, MachineSpecs};
use kymo_core::protocol::SuiteUpload;

/// The sha of commit `i` (its position): deterministic, so that scripts can name commits.
pub fn sha(i: usize) -> CommitSha {
    CommitSha::parse(&format!("{:040x}", i + 1)).unwrap()
}

/// A linear history of `commits` commits, oldest first.
fn history(commits: usize) -> Vec<CommitRecord> {
    (0..commits)
        .map(|i| CommitRecord {
            sha: sha(i),
            parents: if i == 0 { vec![] } else { vec![sha(i - 1)] },
            author: "Synthetic".into(),
            time: 1_700_000_000 + 600 * i as i64,
            message: format!("commit {i}: change something"),
        })
        .collect()
}

/// A repository named `name` with `commits` commits in a line, and the machine that measures.
pub struct Synthetic {
    pub db: Db,
    pub repository_id: i64,
    pub machine_id: i64,
    #[allow(
        dead_code,
        reason = "read by the load generator only; an `expect` would fail in the benches"
    )]
    pub fingerprint: MachineFingerprint,
    environment: Environment,
}

impl Synthetic {
    /// Creates the database at `path` with the repository, its history and the machine.
    pub async fn create(path: &Path, name: &str, commits: usize) -> Self {
        let db = Db::open(path).await.unwrap();
        let repository_id = db
            .create_repository(name, "/nowhere", "main", Default::default(), 0)
            .await
            .unwrap()
            .id;
        db.record_history(repository_id, &history(commits))
            .await
            .unwrap();
        Self::with_machine(db, repository_id, name).await
    }

    /// The machine that measures (made once, then found by its fingerprint).
    async fn with_machine(db: Db, repository_id: i64, name: &str) -> Self {
        let specs = MachineSpecs {
            cpu_model: "synthetic".into(),
            logical_cores: 2,
            physical_cores: 1,
            memory_gib: 8,
            arch: "x86_64".into(),
            virtualization: "none".into(),
        };
        let (machine_id, fingerprint) = db.upsert_machine(&specs, name, None, 0).await.unwrap();
        let environment = Environment {
            kernel: "6.1.0".into(),
            toolchain: "rustc 1.95.0".into(),
            governor: "performance".into(),
            hostname: name.into(),
        };
        Self {
            db,
            repository_id,
            machine_id,
            fingerprint,
            environment,
        }
    }

    /// Stores one run of `suites` on commit `i`, as an upload would.
    pub async fn store(&self, i: usize, suites: &[SuiteUpload]) -> IngestSummary {
        let commit_id = (self.db.commit_id(self.repository_id, &sha(i)).await)
            .unwrap()
            .unwrap();
        let record = RunRecord {
            repository_id: self.repository_id,
            commit_id,
            machine_id: self.machine_id,
            job: None,
            environment: &self.environment,
            log: "",
            suites,
            config: None,
            upload_key: None,
        };
        self.db.store_run(record, 600 * i as i64).await.unwrap()
    }
}

/// The load generator's alone (`examples/load_db.rs --append`): an `expect` of dead code
/// would fail in the benches, which do not call these.
#[allow(dead_code, reason = "used by the load generator only")]
impl Synthetic {
    /// Opens the database at `path` that [`Synthetic::create`] made with repository `name`,
    /// and how many commits its history holds.
    pub async fn open(path: &Path, name: &str) -> (Self, usize) {
        let db = Db::open(path).await.unwrap();
        let repository_id = db.repository(name).await.unwrap().id;
        let summaries = db.repository_summaries().await.unwrap();
        let commits = (summaries.iter())
            .find(|r| r.name == name)
            .map_or(0, |r| r.commits as usize);
        (Self::with_machine(db, repository_id, name).await, commits)
    }

    /// Makes the history `commits` long (it must hold fewer).
    pub async fn extend_history(&self, commits: usize) {
        (self
            .db
            .record_history(self.repository_id, &history(commits)))
        .await
        .unwrap();
    }
}
