//! Crashes, with the real binary: the server killed (SIGKILL) in the middle of a large upload,
//! and workers killed at random points of fifty jobs. After each, nothing partial is visible,
//! the database passes `PRAGMA integrity_check`, and the service goes on. The other faults
//! (a vanished remote, a force-push, a full disk) are in `git_faults` and `disk_full`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use kymo_core::db::{Db, RowCounts};
use serde_json::{Value, json};

use crate::api::specs;
use crate::support::{
    KymoServer, TestRepo, assert_ok, bench_script, kymo_toml, start_worker, worker_token,
};

/// Benchmarks × metrics of the large upload: big enough that ingest takes a noticeable time.
const BENCHMARKS: usize = 8_000;
const METRICS: usize = 5;

fn large_upload(sha: &str) -> String {
    let benchmarks: Vec<Value> = (0..BENCHMARKS)
        .map(|b| {
            let metrics: Vec<Value> = (0..METRICS)
                .map(|m| {
                    let v = (b * METRICS + m) as f64 + 1.0;
                    json!({ "name": format!("m{m}"), "unit": "ns", "direction": "lower",
                            "value": v, "samples": [v, v + 1.0, v + 2.0] })
                })
                .collect();
            json!({ "name": format!("group/bench{b}"), "metrics": metrics })
        })
        .collect();
    json!({ "commit": sha, "specs": specs(), "suites": [{ "suite": "big", "results": { "benchmarks": benchmarks } }] })
        .to_string()
}

/// Opens a raw connection and sends the request line, headers and the first `sent` bytes of
/// `body`, so that the caller decides when the server dies.
fn send_partly(server: &KymoServer, path: &str, body: &str, sent: usize) -> TcpStream {
    let url = &server.url;
    let address = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        server.admin,
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&body.as_bytes()[..sent]).unwrap();
    stream
}

/// The database's row counts and integrity, read with a connection of our own.
pub fn inspect(db: &Path) -> (RowCounts, String) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let db = Db::open(db).await.unwrap();
        let counts = db.row_counts().await.unwrap();
        let integrity = db.integrity_check().await.unwrap();
        db.close().await;
        (counts, integrity)
    })
}

fn tracked_repo(server: &KymoServer) -> (TestRepo, String) {
    let repo = TestRepo::new();
    let sha = repo.commit(&[("README", "x")], "first");
    assert_ok(&server.kymo(&["repo", "add", "r", repo.path().to_str().unwrap()]));
    (repo, sha)
}

#[test]
fn a_server_killed_during_a_large_upload_shows_no_partial_run() {
    let mut server = KymoServer::start(&["--no-worker"]);
    let (_repo, sha) = tracked_repo(&server);
    let body = large_upload(&sha);
    let per_run = (BENCHMARKS * METRICS) as i64;
    // Killed half-way through the body, then at points of the ingest after the whole body.
    let kills: [(usize, u64); 6] = [
        (body.len() / 2, 0),
        (body.len(), 0),
        (body.len(), 30),
        (body.len(), 150),
        (body.len(), 400),
        (body.len(), 1_200),
    ];
    for (sent, after_ms) in kills {
        let stream = send_partly(&server, "/api/v1/repos/r/results", &body, sent);
        std::thread::sleep(Duration::from_millis(after_ms));
        server.sigkill();
        drop(stream);
        let (counts, integrity) = inspect(&server.db_path());
        assert_eq!(integrity, "ok");
        assert_eq!(
            counts.measurements,
            counts.runs * per_run,
            "a partial run is visible after a kill {after_ms} ms after {sent} bytes: {counts:?}"
        );
        server.restart(&["--no-worker"], |_| {});
        assert_eq!(server.get("/healthz"), (200, "ok".into()));
    }
    // The service still takes the whole upload after all that.
    let mut stream = send_partly(&server, "/api/v1/repos/r/results", &body, body.len());
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer:.300}");
    server.sigkill();
    let (counts, integrity) = inspect(&server.db_path());
    assert_eq!(integrity, "ok");
    assert!(counts.runs >= 1, "{counts:?}");
    assert_eq!(counts.measurements, counts.runs * per_run, "{counts:?}");
}

/// A small deterministic generator, so that a failing run can be replayed with its seed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[test]
fn workers_killed_at_random_points_of_fifty_jobs_lose_none_and_store_each_once() {
    const JOBS: usize = 50;
    let seed = std::env::var("KYMO_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.unwrap().as_nanos() as u64
        });
    eprintln!("worker kills: KYMO_FAULT_SEED={seed}");
    let mut random = Lcg(seed);
    let repo = TestRepo::new();
    let shas: Vec<String> = (0..JOBS)
        .map(|i| {
            let files = [
                // Long enough that a quiet machine still gives five chances to kill: each kill
                // holds the next one back until its job's lease expires (3 s).
                ("kymo.toml", kymo_toml("sleep 0.6; sh bench.sh", "30s", 1)),
                // Distinct per commit, so each result is traced to its commit, and far below
                // any change the analysis reports, so no bisection adds jobs of its own.
                ("bench.sh", bench_script(fault_value(i))),
            ];
            let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
            repo.commit(&files, &format!("commit {i}"))
        })
        .collect();
    let server = KymoServer::start(&["--no-worker", "--lease-seconds", "3"]);
    let token = worker_token(&server);
    assert_ok(&server.kymo(&["repo", "add", "r", repo.path().to_str().unwrap()]));
    for sha in &shas {
        assert_ok(&server.kymo(&["run", "r", sha]));
    }

    let caches = tempfile::tempdir().unwrap();
    let cache = |slot: usize| caches.path().join(format!("worker{slot}"));
    let mut workers: Vec<Child> = (0..3)
        .map(|slot| start_worker(&server, &token, &cache(slot)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut kills = 0;
    let jobs = loop {
        std::thread::sleep(Duration::from_millis(100 + random.below(500)));
        let jobs = server.get_json("/api/v1/jobs");
        let jobs = jobs.as_array().unwrap().clone();
        let finished = jobs
            .iter()
            .filter(|j| matches!(j["state"].as_str(), Some("succeeded" | "failed")))
            .count();
        if finished == JOBS {
            break jobs;
        }
        assert!(
            Instant::now() < deadline,
            "jobs did not finish after {kills} kills: {jobs:#?}"
        );
        // Kill only while every running job is on its first attempt, so that no job is killed
        // as often as its attempts allow (a job claimed again between this look and the kill
        // is then on its second): the point is that a killed job is recovered.
        let first_attempts = jobs
            .iter()
            .filter(|j| j["state"] == "running")
            .all(|j| j["attempts"] == 1);
        if first_attempts && random.below(2) == 0 {
            let slot = random.below(workers.len() as u64) as usize;
            workers[slot].kill().unwrap();
            workers[slot].wait().unwrap();
            kills += 1;
            workers[slot] = start_worker(&server, &token, &cache(slot));
        }
    };
    for worker in &mut workers {
        worker.kill().unwrap();
        worker.wait().unwrap();
    }
    eprintln!("{kills} workers killed");
    assert!(kills >= 5, "only {kills} kills: the test proved little");
    for (i, sha) in shas.iter().enumerate() {
        let job = jobs.iter().find(|j| j["sha"] == sha.as_str()).unwrap();
        assert_eq!(job["state"], "succeeded", "{job:#?}");
        let commit = server.get_json(&format!("/api/v1/repos/r/commits/{sha}"));
        assert_eq!(commit["runs"].as_array().unwrap().len(), 1, "{commit:#?}");
        assert_eq!(
            commit["results"].as_array().unwrap().len(),
            1,
            "{commit:#?}"
        );
        assert_eq!(commit["results"][0]["value"], fault_value(i));
    }
    let (counts, integrity) = inspect(&server.db_path());
    assert_eq!(
        (counts.runs, counts.measurements),
        (JOBS as i64, JOBS as i64)
    );
    assert_eq!(integrity, "ok");
}

/// The value commit `i` of the worker-kill test reports.
fn fault_value(i: usize) -> f64 {
    100.0 + i as f64 * 0.001
}
