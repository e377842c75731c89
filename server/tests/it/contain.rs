//! The boundary around benchmark code, end to end: a repository's network setting overrides
//! every commit's kymo.toml, and a remote worker keeps its token out of reach of the suites
//! it runs.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::support::{KymoServer, TestRepo, assert_ok, bench_script, kymo_bin, worker_token};

/// A local listener standing in for anything on the network; counts the connections it gets.
fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stream.is_ok() {
                count.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (port, accepted)
}

/// A suite that says it needs the network and fails unless it can connect to `port`.
fn connecting_suite(port: u16, revision: u32) -> Vec<(&'static str, String)> {
    vec![
        (
            "kymo.toml",
            "[[suite]]\nname = \"net\"\nrun = \"bash connect.sh\"\nformat = \"kymo\"\ntimeout = \"30s\"\nnetwork = true\n".into(),
        ),
        (
            "connect.sh",
            format!(
                "# revision {revision}\nexec 3<>/dev/tcp/127.0.0.1/{port} || {{ echo 'cannot connect' >&2; exit 3; }}\n{}",
                bench_script(1.0)
            ),
        ),
    ]
}

fn job_of<'a>(jobs: &'a [Value], sha: &str) -> &'a Value {
    jobs.iter()
        .find(|j| j["sha"] == sha)
        .unwrap_or_else(|| panic!("no job for {sha}: {jobs:#?}"))
}

fn as_files<'a>(files: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    files.iter().map(|(n, c)| (*n, c.as_str())).collect()
}

#[test]
fn a_repository_without_network_cuts_every_suite_whatever_its_kymo_toml_says() {
    let (port, accepted) = counting_listener();
    let repo = TestRepo::new();
    let first = repo.commit(&as_files(&connecting_suite(port, 1)), "connect");
    let server = KymoServer::start(&[]);
    let path = repo.path().to_str().unwrap();
    let added = assert_ok(&server.kymo(&["repo", "add", "r", path, "--network", "off"]));
    assert!(added.contains("without the network"), "{added}");
    let shown = assert_ok(&server.kymo(&["repo", "set", "r"]));
    assert!(shown.contains("network: off for every suite"), "{shown}");

    assert_ok(&server.kymo(&["run", "r", &first]));
    let jobs = server.wait_for_jobs(1, Duration::from_secs(60));
    let job = job_of(&jobs, &first);
    assert_eq!(job["state"], "failed", "{job:#}");
    let log = job["log_tail"].as_str().unwrap_or_default();
    assert!(log.contains("cannot connect"), "{job:#}");
    let error = job["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the repository runs its suites without the network"),
        "{job:#}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "no connection got out");

    // Malformed or unauthenticated changes change nothing.
    let settings = format!("{}/api/v1/repos/r/settings", server.url);
    let send = |token: Option<&str>, body: &str| {
        let mut request = ureq::post(&settings)
            .config()
            .http_status_as_error(false)
            .build()
            .header("content-type", "application/json");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        request.send(body).unwrap().status().as_u16()
    };
    assert_eq!(send(None, r#"{"network": true}"#), 401);
    for hostile in [
        r#"{"network": "on"}"#,
        r#"{"network": 1}"#,
        r#"{"network": true, "networks": true}"#,
        "{\"network\": tru",
    ] {
        assert_eq!(send(Some(&server.admin), hostile), 422, "{hostile}");
    }
    let shown = assert_ok(&server.kymo(&["repo", "set", "r"]));
    assert!(shown.contains("network: off for every suite"), "{shown}");

    let changed = assert_ok(&server.kymo(&["repo", "set", "r", "--network", "on"]));
    assert!(changed.contains("network: each suite decides"), "{changed}");
    let second = repo.commit(&as_files(&connecting_suite(port, 2)), "again");
    assert_ok(&server.kymo(&["run", "r", &second]));
    let jobs = server.wait_for_jobs(2, Duration::from_secs(60));
    let job = job_of(&jobs, &second);
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "the suite connected");
}

/// `kymo worker` on another machine: its token, given on the command line and in its
/// environment, is blanked before any suite runs, and its cache is out of reach.
#[test]
fn a_remote_worker_keeps_its_token_out_of_reach_of_the_suites_it_runs() {
    let server = KymoServer::start(&["--no-worker"]);
    let token = worker_token(&server);
    let cache = tempfile::tempdir().unwrap();
    let mut worker = Command::new(kymo_bin())
        .args(["worker", "--server", &server.url, "--token", &token])
        .arg("--cache-dir")
        .arg(cache.path())
        .env("KYMO_TOKEN", &token)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = worker.id();
    let cache_dir = cache.path().canonicalize().unwrap();
    let script = format!(
        "W={pid}\n\
         probe() {{ if sh -c \"$2\" >/dev/null 2>&1; then echo \"BREACH $1\" >&2; else echo \"denied $1\" >&2; fi; }}\n\
         probe 'token in the environment' \"tr '\\\\0' '\\\\n' < /proc/$W/environ | grep -q '^KYMO_TOKEN=.'\"\n\
         probe 'the mirrors' \"ls '{cache}/mirrors'\"\n\
         probe 'the worker memory' \"head -c 1 /proc/$W/mem\"\n\
         echo \"command line: $(tr '\\0' ' ' < /proc/$W/cmdline)\" >&2\n\
         echo \"environment: $(tr '\\0' '\\n' < /proc/$W/environ | grep '^KYMO_' | tr '\\n' ' ')\" >&2\n\
         {}",
        bench_script(1.0),
        cache = cache_dir.display(),
    );
    let repo = TestRepo::new();
    let sha = repo.commit(
        &[
            (
                "kymo.toml",
                &crate::support::kymo_toml("sh pry.sh", "30s", 1),
            ),
            ("pry.sh", &script),
        ],
        "pry",
    );
    let path = repo.path().to_str().unwrap();
    assert_ok(&server.kymo(&["repo", "add", "r", path]));
    assert_ok(&server.kymo(&["run", "r", &sha]));
    let jobs = server.wait_for_jobs(1, Duration::from_secs(60));
    let _ = worker.kill();
    let _ = worker.wait();
    let job = job_of(&jobs, &sha);
    assert_eq!(
        job["state"], "succeeded",
        "a benchmark all the same: {job:#}"
    );
    let log = job["log_tail"].as_str().unwrap_or_default();
    assert!(!log.contains(&token), "the token leaked: {log}");
    assert!(!log.contains("BREACH"), "{log}");
    for attempt in [
        "token in the environment",
        "the mirrors",
        "the worker memory",
    ] {
        assert!(
            log.contains(&format!("denied {attempt}")),
            "{attempt}: {log}"
        );
    }
    // The suite did read both: what it found there was blank.
    assert!(log.contains("worker --server"), "{log}");
    assert!(log.contains("KYMO_TOKEN="), "{log}");
}
