//! The worker loop: claim a job, keep its lease alive, check the commit out, run its suites,
//! report. `work_once` does one claim so that tests (and `kymo demo`) can drive it directly.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use anyhow::Context;
use kymo_core::credentials::redact_secrets;
use kymo_core::model::{Environment, MachineSpecs};
use kymo_core::protocol::{
    ClaimRequest, ClaimedJob, Completion, ConfigSource, ConfigUsed, JobOutcome, log_tail,
};

use crate::client::ServerClient;
use crate::config::{KYMO_TOML_MAX_BYTES, KymoToml, Suite, parse_kymo_toml_bytes};
use crate::fingerprint::{detect_environment, detect_specs};
use crate::mirror::{Mirror, mirror_dir_name};
use crate::rustup::Toolchains;
use crate::sandbox::{Sandbox, SandboxConfig, SuiteDirs};
use crate::suite::{OutputLimits, SuiteContext, SuiteFailure, measure_suites, run_suite};

/// How a worker is set up.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub server: String,
    pub token: String,
    /// Mirrors, work trees and cargo target directories live here.
    pub cache_dir: PathBuf,
    pub poll_interval: Duration,
    pub limits: OutputLimits,
    /// Labels this machine offers; repositories may require some (`kymo repo add --machines`).
    pub labels: Vec<String>,
    /// What suites must not reach, and whether they may run without a boundary.
    pub sandbox: SandboxConfig,
}

/// What one turn of the loop did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    Ran { job: i64, succeeded: bool },
    QueueEmpty,
}

mod directories;
mod interleave;
mod toolchains;

use self::directories::suite_dirs;

/// A worker bound to one server, with this machine's fingerprint.
pub struct Worker {
    config: WorkerConfig,
    client: ServerClient,
    specs: MachineSpecs,
    environment: Environment,
    sandbox: Sandbox,
    /// Toolchains that suites pinned, installed before their boundary closes.
    toolchains: Toolchains,
}

/// Most bytes of the combined suite log sent with a completion.
const MAX_LOG: usize = 64 * 1024;

impl Worker {
    pub fn new(config: WorkerConfig) -> Self {
        let client = ServerClient::new(&config.server, Some(config.token.clone()));
        let sandbox = Sandbox::probe(config.sandbox.clone(), &config.cache_dir);
        Self {
            client,
            sandbox,
            config,
            specs: detect_specs(),
            environment: detect_environment(),
            toolchains: Toolchains::new(),
        }
    }

    /// Replaces the detected specs (tests simulate other machines with it).
    pub fn with_specs(mut self, specs: MachineSpecs) -> Self {
        self.specs = specs;
        self
    }

    pub fn specs(&self) -> &MachineSpecs {
        &self.specs
    }

    /// What this machine enforces around suites (probed at start).
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Claims one job and runs it to completion, or reports that the queue is empty.
    pub fn work_once(&self) -> anyhow::Result<Tick> {
        let claim = ClaimRequest {
            specs: self.specs.clone(),
            environment: self.environment.clone(),
            labels: self.config.labels.clone(),
        };
        self.sandbox.check_runnable().map_err(anyhow::Error::msg)?;
        let Some(job) = self.client.claim(&claim)? else {
            return Ok(Tick::QueueEmpty);
        };
        tracing::info!(job = job.id, repo = job.repository, commit = %job.commit, "running job");
        let outcome = self.with_heartbeat(&job, |control| self.run_job(&job, control));
        let Some((outcome, environment)) = outcome else {
            // The server marked it cancelled already: there is nothing to report.
            tracing::info!(job = job.id, "job cancelled");
            return Ok(Tick::Ran {
                job: job.id,
                succeeded: false,
            });
        };
        let succeeded = matches!(
            outcome,
            JobOutcome::Succeeded { .. } | JobOutcome::Compared { .. }
        );
        let completion = Completion {
            lease_id: job.lease_id.clone(),
            environment,
            outcome,
        };
        self.client
            .complete(&job, &completion)
            .with_context(|| format!("reporting job {}", job.id))?;
        Ok(Tick::Ran {
            job: job.id,
            succeeded,
        })
    }

    /// Works until `stop` is set, sleeping between polls when there is nothing to do. A worker
    /// whose suites would run without a boundary it was not allowed claims nothing.
    pub fn run_until(&self, stop: &AtomicBool) {
        tracing::info!("{}", self.sandbox.describe());
        if let Err(refusal) = self.sandbox.check_runnable() {
            tracing::error!("{refusal}");
            return;
        }
        while !stop.load(Ordering::Relaxed) {
            match self.work_once() {
                Ok(Tick::Ran { .. }) => continue,
                Ok(Tick::QueueEmpty) => {}
                Err(err) => tracing::warn!(error = format!("{err:#}"), "worker turn failed"),
            }
            let mut slept = Duration::ZERO;
            while slept < self.config.poll_interval && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                slept += Duration::from_millis(50);
            }
        }
    }

    /// Runs `work` while a thread renews the job's lease and reports the phases `work` sends.
    /// When the lease is lost (the job was cancelled), `work`'s running command is killed.
    fn with_heartbeat<T>(&self, job: &ClaimedJob, work: impl FnOnce(&JobControl) -> T) -> T {
        let (phases, inbox) = mpsc::channel::<String>();
        // At most 5 s apart, so that a cancelled job stops within seconds, not a lease.
        let every = Duration::from_secs((job.lease_seconds / 3).clamp(1, 5) as u64);
        let client = &self.client;
        let cancelled = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let cancelled = &cancelled;
            scope.spawn(move || {
                let mut phase: Option<String> = None;
                loop {
                    match inbox.recv_timeout(every) {
                        Ok(new) => phase = Some(new),
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                    match client.heartbeat(job, phase.as_deref()) {
                        Ok(true) => {}
                        Ok(false) => {
                            tracing::warn!(
                                job = job.id,
                                "the job was cancelled or its lease expired; stopping it"
                            );
                            cancelled.store(true, Ordering::Relaxed);
                            break;
                        }
                        Err(err) => tracing::warn!(error = format!("{err:#}"), "heartbeat failed"),
                    }
                }
            });
            let control = JobControl {
                phases,
                cancelled,
                toolchains: Mutex::default(),
            };
            work(&control)
        })
    }

    /// Runs the job; `None` when it was cancelled while it ran. The environment is this
    /// machine's, with the compilers the job's suites built with.
    fn run_job(&self, job: &ClaimedJob, control: &JobControl) -> Option<(JobOutcome, Environment)> {
        let outcome = match self.try_run_job(job, control) {
            Ok(outcome) => outcome,
            Err(err) => {
                let error = format!("{err:#}");
                JobOutcome::Failed {
                    error: match &job.credential {
                        Some(credential) => credential.scrub(&error),
                        None => redact_secrets(&error).into_owned(),
                    },
                    log_tail: String::new(),
                }
            }
        };
        let mut environment = self.environment.clone();
        let toolchains = control.toolchains.lock().expect("toolchains lock");
        if !toolchains.is_empty() {
            environment.toolchain = toolchains.join(" + ");
        }
        (!control.cancelled.load(Ordering::Relaxed)).then_some((outcome, environment))
    }

    fn try_run_job(&self, job: &ClaimedJob, control: &JobControl) -> anyhow::Result<JobOutcome> {
        let sha = job.commit.as_str();
        let mut wanted = vec![sha];
        if let Some(spec) = &job.comparison {
            wanted.push(spec.base.as_str());
        }
        let mirror = self.open_mirror(job, &wanted, control)?;
        // A pull request's head from a fork is on no branch: fetch the ref its forge keeps.
        if let Some(reference) = job.comparison.as_ref().and_then(|c| c.head_ref.as_deref())
            && !mirror.has_commit(sha)
        {
            mirror
                .fetch_pull_head(reference)
                .with_context(|| format!("cannot fetch {reference}"))?;
        }
        if let Some(spec) = &job.comparison {
            return self.run_comparison(job, spec, &mirror, control);
        }
        let dir_name = mirror_dir_name(&job.repository)?;
        let side = match self.check_out(job, &mirror, sha, &dir_name, control)? {
            Ok(side) => side,
            Err(failed) => return Ok(failed),
        };
        let mut log = String::new();
        if !job.network {
            log.push_str("# the repository runs every suite without the network\n");
        }
        let count = side.config.suites.len();
        let all: Vec<(&Suite, &[String])> = (side.config.suites.iter())
            .map(|suite| (suite, &[][..]))
            .collect();
        let measured = measure_suites(&all, &mut log, |suite, _, log| {
            let index = (side.config.suites.iter())
                .position(|s| s.name == suite.name)
                .unwrap_or_default();
            let progress =
                |what: String| control.phase(&format!("suite {} of {count}: {what}", index + 1));
            run_suite(&self.suite_context(&side, control, &progress), suite, log)
        });
        let suites = match measured {
            Ok(suites) => suites,
            Err(SuiteFailure {
                mut error,
                log_tail,
            }) => {
                if !job.network {
                    error.push_str(" (the repository runs its suites without the network)");
                }
                return Ok(JobOutcome::Failed { error, log_tail });
            }
        };
        Ok(JobOutcome::Succeeded {
            suites,
            log: log_tail(&log, MAX_LOG).to_owned(),
            config: Some(side.used),
        })
    }

    /// The repository's mirror, fetched when it lacks one of the `wanted` commits.
    fn open_mirror(
        &self,
        job: &ClaimedJob,
        wanted: &[&str],
        control: &JobControl,
    ) -> anyhow::Result<Mirror> {
        // The server names the repository; it still must not pick paths outside the cache.
        mirror_dir_name(&job.repository)?;
        control.phase("fetching");
        let url = redact_secrets(&job.url);
        let mirror = Mirror::open_or_clone_with(
            &self.config.cache_dir,
            &job.repository,
            &job.url,
            job.credential.as_ref(),
        )
        .with_context(|| format!("cannot clone {url}"))?;
        if !wanted.iter().all(|sha| mirror.has_commit(sha)) {
            mirror
                .fetch()
                .with_context(|| format!("cannot fetch {url}"))?;
        }
        Ok(mirror)
    }

    /// Checks `sha` out into the work tree named `tree` and reads the suites it runs; the
    /// outcome of a job that cannot run (no or a broken `kymo.toml`) as `Err`.
    fn check_out(
        &self,
        job: &ClaimedJob,
        mirror: &Mirror,
        sha: &str,
        tree: &str,
        control: &JobControl,
    ) -> anyhow::Result<Result<CheckedOut, JobOutcome>> {
        let cache = &self.config.cache_dir;
        control.phase("checking out");
        let worktree = cache.join("worktrees").join(tree);
        mirror
            .checkout(sha, &worktree)
            .with_context(|| format!("cannot check out commit {sha}"))?;
        let own = mirror.read_file_at(sha, "kymo.toml", KYMO_TOML_MAX_BYTES + 1)?;
        let Some(chosen) = choose_config(own, job.stored_suites.as_deref()) else {
            return Ok(Err(JobOutcome::Failed {
                error: missing_config_error(job, sha),
                log_tail: String::new(),
            }));
        };
        let mut config = match parse_kymo_toml_bytes(&chosen.bytes) {
            Ok(config) => config,
            Err(err) => {
                let whose = match chosen.used.source {
                    ConfigSource::Commit => "kymo.toml",
                    ConfigSource::Server => "the kymo.toml kept on the server",
                };
                return Ok(Err(JobOutcome::Failed {
                    error: format!("{whose}: {err}"),
                    log_tail: String::new(),
                }));
            }
        };
        if !job.network {
            // The repository's setting, not the commit's file, has the last word.
            for suite in &mut config.suites {
                suite.boundary.network = false;
            }
        }
        if let Err(error) = self.pin_toolchains(mirror, sha, &mut config, control) {
            return Ok(Err(JobOutcome::Failed {
                error,
                log_tail: String::new(),
            }));
        }
        let dir_name = mirror_dir_name(&job.repository)?;
        let dirs = suite_dirs(cache, &dir_name, tree, worktree)?;
        Ok(Ok(CheckedOut {
            sha: sha.to_owned(),
            dirs,
            config,
            used: chosen.used,
        }))
    }

    fn suite_context<'a>(
        &'a self,
        side: &'a CheckedOut,
        control: &'a JobControl,
        progress: &'a dyn Fn(String),
    ) -> SuiteContext<'a> {
        SuiteContext {
            dirs: &side.dirs,
            cache_dir: &self.config.cache_dir,
            commit: &side.sha,
            sandbox: &self.sandbox,
            limits: self.config.limits,
            cancel: control.cancelled,
            progress,
            only_benchmarks: &[],
        }
    }
}

/// A commit checked out in its own work tree, with the suites it runs.
struct CheckedOut {
    sha: String,
    dirs: SuiteDirs,
    config: KymoToml,
    used: ConfigUsed,
}

/// What a running job shares with its heartbeat: the phases to report and whether the lease
/// was lost; and the compilers its suites built with.
struct JobControl<'a> {
    phases: mpsc::Sender<String>,
    cancelled: &'a AtomicBool,
    /// Each distinct `rustc --version`, in the order the suites used them.
    toolchains: Mutex<Vec<String>>,
}

impl JobControl<'_> {
    fn phase(&self, phase: &str) {
        let _ = self.phases.send(phase.to_owned());
    }

    fn record_toolchain(&self, version: &str) {
        let mut toolchains = self.toolchains.lock().expect("toolchains lock");
        if !version.is_empty() && !toolchains.iter().any(|v| v == version) {
            toolchains.push(version.to_owned());
        }
    }
}

/// The configuration a job runs: its bytes and where they came from.
#[derive(Debug, PartialEq)]
struct ChosenConfig {
    bytes: Vec<u8>,
    used: ConfigUsed,
}

/// A commit's own `kymo.toml` wins; a commit without one runs the suites kept on the server.
fn choose_config(own: Option<Vec<u8>>, stored: Option<&str>) -> Option<ChosenConfig> {
    let (bytes, source) = match (own, stored) {
        (Some(own), _) => (own, ConfigSource::Commit),
        (None, Some(stored)) => (stored.as_bytes().to_vec(), ConfigSource::Server),
        (None, None) => return None,
    };
    let sha256 = hex_sha256(&bytes);
    Some(ChosenConfig {
        bytes,
        used: ConfigUsed { source, sha256 },
    })
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Says how to give a commit suites: commit the file (when it sits uncommitted in a local
/// repository's work tree), or keep one on the server.
fn missing_config_error(job: &ClaimedJob, sha: &str) -> String {
    let name = &job.repository;
    let local = std::path::Path::new(&job.url);
    let uncommitted = !job.url.contains("://") && local.join("kymo.toml").is_file();
    if uncommitted {
        return format!(
            "commit {sha} has no kymo.toml at its root, but {} has one that is not committed \
             in this commit: commit it (`git add kymo.toml && git commit`), or keep it on the \
             server for every commit with `kymo repo set {name} --suites kymo.toml`",
            job.url
        );
    }
    format!(
        "commit {sha} has no kymo.toml at its root and {name} has no suites kept on the \
         server: commit a kymo.toml, or run `kymo repo set {name} --suites FILE` to benchmark \
         commits without one"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commits_own_kymo_toml_wins_over_the_stored_one() {
        let own = b"[[suite]]\nname='own'\nrun='true'\n".to_vec();
        let chosen = choose_config(Some(own.clone()), Some("stored")).unwrap();
        assert_eq!(chosen.bytes, own);
        assert_eq!(chosen.used.source, ConfigSource::Commit);
        let stored = choose_config(None, Some("stored")).unwrap();
        assert_eq!(stored.bytes, b"stored");
        assert_eq!(stored.used.source, ConfigSource::Server);
        // `printf stored | sha256sum`
        assert_eq!(
            stored.used.sha256,
            "87b04e58961f9a99d853d4046a0b5b793e7c3e4bbd21f5aca8fb17c20cdb1d8b"
        );
        assert!(choose_config(None, None).is_none());
    }
}
