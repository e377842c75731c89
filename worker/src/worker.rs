//! The worker loop: claim a job, keep its lease alive, check the commit out, run its suites,
//! report. `work_once` does one claim so that tests (and `kymo demo`) can drive it directly.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;
use kymo_core::credentials::redact_secrets;
use kymo_core::model::{Environment, MachineSpecs};
use kymo_core::protocol::{ClaimRequest, ClaimedJob, Completion, JobOutcome, log_tail};

use crate::client::ServerClient;
use crate::config::{KYMO_TOML_MAX_BYTES, parse_kymo_toml_bytes};
use crate::fingerprint::{detect_environment, detect_specs};
use crate::mirror::{Mirror, mirror_dir_name};
use crate::suite::{OutputLimits, SuiteContext, SuiteFailure, run_suite};

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
}

/// What one turn of the loop did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    Ran { job: i64, succeeded: bool },
    QueueEmpty,
}

/// A worker bound to one server, with this machine's fingerprint.
pub struct Worker {
    config: WorkerConfig,
    client: ServerClient,
    specs: MachineSpecs,
    environment: Environment,
}

/// Most bytes of the combined suite log sent with a completion.
const MAX_LOG: usize = 64 * 1024;

impl Worker {
    pub fn new(config: WorkerConfig) -> Self {
        let client = ServerClient::new(&config.server, Some(config.token.clone()));
        Self {
            client,
            config,
            specs: detect_specs(),
            environment: detect_environment(),
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

    /// Claims one job and runs it to completion, or reports that the queue is empty.
    pub fn work_once(&self) -> anyhow::Result<Tick> {
        let claim = ClaimRequest {
            specs: self.specs.clone(),
            environment: self.environment.clone(),
            labels: self.config.labels.clone(),
        };
        let Some(job) = self.client.claim(&claim)? else {
            return Ok(Tick::QueueEmpty);
        };
        tracing::info!(job = job.id, repo = job.repository, commit = %job.commit, "running job");
        let outcome = self.with_heartbeat(&job, || self.run_job(&job));
        let succeeded = matches!(outcome, JobOutcome::Succeeded { .. });
        let completion = Completion {
            lease_id: job.lease_id.clone(),
            environment: self.environment.clone(),
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

    /// Works until `stop` is set, sleeping between polls when there is nothing to do.
    pub fn run_until(&self, stop: &AtomicBool) {
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

    /// Runs `work` while a thread renews the job's lease.
    fn with_heartbeat<T>(&self, job: &ClaimedJob, work: impl FnOnce() -> T) -> T {
        let (done, finished) = mpsc::channel::<()>();
        let every = Duration::from_secs((job.lease_seconds / 3).max(1) as u64);
        let client = &self.client;
        std::thread::scope(|scope| {
            scope.spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(every) {
                    match client.heartbeat(job) {
                        Ok(true) => {}
                        Ok(false) => {
                            tracing::warn!(
                                job = job.id,
                                "lease lost; the server re-queued the job"
                            );
                            break;
                        }
                        Err(err) => tracing::warn!(error = format!("{err:#}"), "heartbeat failed"),
                    }
                }
            });
            let result = work();
            drop(done);
            result
        })
    }

    fn run_job(&self, job: &ClaimedJob) -> JobOutcome {
        match self.try_run_job(job) {
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
        }
    }

    fn try_run_job(&self, job: &ClaimedJob) -> anyhow::Result<JobOutcome> {
        let cache = &self.config.cache_dir;
        let sha = job.commit.as_str();
        // The server names the repository; it still must not pick paths outside the cache.
        let dir_name = mirror_dir_name(&job.repository)?;
        let url = redact_secrets(&job.url);
        let mirror =
            Mirror::open_or_clone_with(cache, &job.repository, &job.url, job.credential.as_ref())
                .with_context(|| format!("cannot clone {url}"))?;
        if !mirror.has_commit(sha) {
            mirror
                .fetch()
                .with_context(|| format!("cannot fetch {url}"))?;
        }
        let worktree = cache.join("worktrees").join(&dir_name);
        mirror
            .checkout(sha, &worktree)
            .with_context(|| format!("cannot check out commit {sha}"))?;
        let Some(toml) = mirror.read_file_at(sha, "kymo.toml", KYMO_TOML_MAX_BYTES + 1)? else {
            return Ok(JobOutcome::Failed {
                error: format!("commit {sha} has no kymo.toml at its root"),
                log_tail: String::new(),
            });
        };
        let config = match parse_kymo_toml_bytes(&toml) {
            Ok(config) => config,
            Err(err) => {
                return Ok(JobOutcome::Failed {
                    error: format!("kymo.toml: {err}"),
                    log_tail: String::new(),
                });
            }
        };
        // One cargo target directory per repository keeps rebuilds incremental across commits.
        let target = cache.join("targets").join(&dir_name);
        let env = vec![
            ("CARGO_TARGET_DIR".to_owned(), target.display().to_string()),
            ("KYMO_COMMIT".to_owned(), sha.to_owned()),
        ];
        let ctx = SuiteContext {
            worktree: &worktree,
            target_dir: &target,
            env: &env,
            limits: self.config.limits,
        };
        let mut log = String::new();
        let mut suites = Vec::with_capacity(config.suites.len());
        for suite in &config.suites {
            match run_suite(&ctx, suite, &mut log) {
                Ok(upload) => suites.push(upload),
                Err(SuiteFailure { error, log_tail }) => {
                    return Ok(JobOutcome::Failed { error, log_tail });
                }
            }
        }
        Ok(JobOutcome::Succeeded {
            suites,
            log: log_tail(&log, MAX_LOG).to_owned(),
        })
    }
}
