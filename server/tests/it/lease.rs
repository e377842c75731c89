//! A worker killed in the middle of a job: its lease expires, the job runs again on another
//! worker, and its results are stored exactly once.

use std::time::{Duration, Instant};

use crate::support::{
    KymoServer, TestRepo, assert_ok, bench_script, kymo_toml, start_worker, worker_token,
};

#[test]
fn a_killed_workers_job_runs_again_and_is_stored_once() {
    let repo = TestRepo::new();
    // The suite takes a few seconds, so that the first worker can be killed while it runs.
    let sha = repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sleep 3; sh bench.sh", "60s", 1)),
            ("bench.sh", &bench_script(42.0)),
        ],
        "slow suite",
    );
    let server = KymoServer::start(&["--no-worker", "--lease-seconds", "2"]);
    let token = worker_token(&server);
    let token = token.as_str();
    assert_ok(&server.kymo(&["repo", "add", "r", repo.path().to_str().unwrap()]));
    assert_ok(&server.kymo(&["run", "r", &sha]));

    let cache = tempfile::tempdir().unwrap();
    let mut first = start_worker(&server, token, cache.path());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let jobs = server.get_json("/api/v1/jobs");
        if jobs[0]["state"] == "running" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the job never started: {jobs:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    first.kill().unwrap();
    first.wait().unwrap();

    let mut second = start_worker(&server, token, &cache.path().join("second"));
    let jobs = server.wait_for_jobs(1, Duration::from_secs(60));
    second.kill().unwrap();
    second.wait().unwrap();

    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["state"], "succeeded", "{jobs:#?}");
    assert_eq!(jobs[0]["attempts"], 2);
    let commit = server.get_json(&format!("/api/v1/repos/r/commits/{sha}"));
    assert_eq!(commit["runs"].as_array().unwrap().len(), 1, "{commit:#?}");
    assert_eq!(commit["results"].as_array().unwrap().len(), 1);
    assert_eq!(commit["results"][0]["value"], 42.0);
}
