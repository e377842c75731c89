//! Hostile suites that really use what they ask for, against the real server and a real worker
//! held to low maximums: a commit's `kymo.toml` asks for a terabyte of memory and disk and
//! 32,768 processes, and its suite allocates, writes and forks without end. Each is stopped
//! with a message naming the worker's limit, `/healthz` answers within a second all the while,
//! and the next job runs. As root (the embedded worker: cgroups) and as `nobody` (a remote
//! `kymo worker`: resource limits, a user namespace).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{KymoServer, TestRepo, assert_ok, bench_script, kymo_bin, worker_token};

/// The ceilings both workers are started with.
const MAXIMUMS: [&str; 6] = [
    "--max-suite-memory",
    "256MiB",
    "--max-suite-disk",
    "64MiB",
    "--max-suite-processes",
    "64",
];

/// What each hostile commit's suite does, and the limit its job must name.
const HOSTILE: [(&str, &str, &str); 3] = [
    (
        "allocates without end",
        "awk 'BEGIN { s = \"x\"; while (1) s = s s }'",
        "memory limit of 256MiB",
    ),
    (
        "writes without end",
        "head -c 4000000000 /dev/zero > big; echo wrote",
        "disk limit of 64MiB",
    ),
    (
        "forks without end",
        "b() { b & b & wait; }; b",
        "process limit of 64",
    ),
];

/// A suite asking for far more than any machine should give.
fn greedy_toml() -> String {
    "[[suite]]\nname = \"greedy\"\nrun = \"sh hostile.sh\"\nformat = \"kymo\"\ntimeout = \"120s\"\n\
     memory = \"1TiB\"\ndisk = \"1TiB\"\nprocesses = 32768\n"
        .to_owned()
}

/// A repository of the three hostile commits, then a well-behaved one; their shas in order.
fn hostile_repository() -> (TestRepo, Vec<String>) {
    let repo = TestRepo::new();
    let mut shas: Vec<String> = HOSTILE
        .iter()
        .map(|(what, script, _)| {
            repo.commit(
                &[("kymo.toml", &greedy_toml()), ("hostile.sh", script)],
                what,
            )
        })
        .collect();
    shas.push(repo.commit(
        &[
            ("kymo.toml", &greedy_toml()),
            ("hostile.sh", &bench_script(1.0)),
        ],
        "behaves",
    ));
    (repo, shas)
}

/// Asks `/healthz` every 100 ms until stopped; the slowest answer, or the first failure.
fn watch_health(url: &str) -> (Arc<AtomicBool>, JoinHandle<Result<Duration, String>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = stop.clone();
    let health = format!("{url}/healthz");
    let watcher = std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let mut slowest = Duration::ZERO;
        while !done.load(Ordering::Relaxed) {
            let asked = Instant::now();
            match agent.get(&health).call() {
                Ok(response) if response.status() == 200 => {}
                other => return Err(format!("{other:?}")),
            }
            slowest = slowest.max(asked.elapsed());
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(slowest)
    });
    (stop, watcher)
}

/// Queues every commit of `shas` and checks, once all ran, that each hostile one failed
/// naming its limit as the worker's maximum, that the last one succeeded, and that the
/// server answered its health check within a second throughout.
fn hostile_suites_are_stopped(server: &KymoServer, repo: &TestRepo, shas: &[String]) {
    let (stop, watcher) = watch_health(&server.url);
    assert_ok(&server.kymo(&["repo", "add", "r", repo.path().to_str().unwrap()]));
    for sha in shas {
        assert_ok(&server.kymo(&["run", "r", sha]));
    }
    let jobs = server.wait_for_jobs(shas.len(), Duration::from_secs(600));
    stop.store(true, Ordering::Relaxed);
    let slowest = watcher.join().unwrap().expect("/healthz always answered");
    let job = |sha: &str| -> Value {
        jobs.iter()
            .find(|j| j["sha"] == sha)
            .unwrap_or_else(|| panic!("no job for {sha}: {jobs:#?}"))
            .clone()
    };
    for ((what, _, limit), sha) in HOSTILE.iter().zip(shas) {
        let job = job(sha);
        assert_eq!(job["state"], "failed", "{what}: {job:#}");
        let error = job["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(limit) && error.contains("this worker's maximum"),
            "{what}: {job:#}"
        );
        let log = job["log_tail"].as_str().unwrap_or_default();
        assert!(log.contains("above this worker's maximum"), "{what}: {log}");
    }
    let last = job(shas.last().unwrap());
    assert_eq!(last["state"], "succeeded", "the next job runs: {last:#}");
    eprintln!("slowest /healthz answer while hostile suites ran: {slowest:?}");
    assert!(
        slowest < Duration::from_secs(1),
        "/healthz took {slowest:?}"
    );
}

#[test]
fn hostile_suites_on_the_embedded_worker_are_stopped_at_its_maximums() {
    let (repo, shas) = hostile_repository();
    let server = KymoServer::start(&MAXIMUMS);
    hostile_suites_are_stopped(&server, &repo, &shas);
}

/// `kymo worker` as `nobody`, from a copy of the binary `nobody` can reach (cargo may build
/// it under root's home), with its own cache and home. Skipped unless run as root.
fn worker_as_nobody(server: &KymoServer, dir: &Path) -> Child {
    let binary = dir.join("kymo");
    std::fs::copy(kymo_bin(), &binary).unwrap();
    let (cache, home) = (dir.join("cache"), dir.join("home"));
    for made in [&cache, &home] {
        std::fs::create_dir(made).unwrap();
        std::os::unix::fs::chown(made, Some(65534), Some(65534)).unwrap();
    }
    // libgit2 refuses repositories of other users unless told they are safe.
    std::fs::write(home.join(".gitconfig"), "[safe]\n\tdirectory = *\n").unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let token = worker_token(server);
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "env",
            "-i",
        ])
        .arg("PATH=/usr/local/bin:/usr/bin:/bin")
        .arg(format!("HOME={}", home.display()))
        .arg(format!("TMPDIR={}", home.display()))
        .arg("RUST_LOG=warn")
        .arg(&binary)
        .args(["worker", "--server", &server.url, "--token", &token])
        .arg("--cache-dir")
        .arg(&cache)
        .args(MAXIMUMS)
        .current_dir(&home)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn hostile_suites_on_a_worker_that_is_not_root_are_stopped_at_its_maximums() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let (repo, shas) = hostile_repository();
    std::fs::set_permissions(repo.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = KymoServer::start(&["--no-worker"]);
    let dir = tempfile::tempdir().unwrap();
    let mut worker = worker_as_nobody(&server, dir.path());
    hostile_suites_are_stopped(&server, &repo, &shas);
    let _ = worker.kill();
    let _ = worker.wait();
}
