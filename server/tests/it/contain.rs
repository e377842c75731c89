//! The boundary around benchmark code, end to end: a repository's network setting overrides
//! every commit's kymo.toml; a remote worker's suites see no process but their own (so not its
//! environment or token) and hold no capability; a worker that cannot make their namespaces
//! refuses to run them, or fails what it cannot contain.

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

/// `kymo worker` on another machine, with its token on its command line and in its
/// environment beside a cloud key and a forge token: its suites run in their own PID
/// namespace, so none of it is in sight (not merely blanked), and they hold no capability.
#[test]
fn a_remote_worker_keeps_its_environment_and_token_out_of_sight_of_the_suites_it_runs() {
    const CLOUD_KEY: &str = "cloud-secret-0123456789";
    const FORGE_TOKEN: &str = "forge-secret-9876543210";
    let server = KymoServer::start(&["--no-worker"]);
    let token = worker_token(&server);
    let cache = tempfile::tempdir().unwrap();
    let mut worker = Command::new(kymo_bin())
        .args(["worker", "--server", &server.url, "--token", &token])
        .arg("--cache-dir")
        .arg(cache.path())
        .env("KYMO_TOKEN", &token)
        .env("AWS_SECRET_ACCESS_KEY", CLOUD_KEY)
        .env("FORGE_TOKEN", FORGE_TOKEN)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = worker.id();
    let cache_dir = cache.path().canonicalize().unwrap();
    let script = format!(
        "W={pid}\n\
         probe() {{ if sh -c \"$2\" >/dev/null 2>&1; then echo \"BREACH $1\" >&2; else echo \"denied $1\" >&2; fi; }}\n\
         probe 'the worker environment' \"cat /proc/$W/environ\"\n\
         probe 'the worker command line' \"cat /proc/$W/cmdline\"\n\
         probe 'the mirrors' \"ls '{cache}/mirrors'\"\n\
         probe 'the worker memory' \"head -c 1 /proc/$W/mem\"\n\
         echo \"environments in sight: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' ' ')\" >&2\n\
         echo \"command lines in sight: $(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ')\" >&2\n\
         grep -E '^(CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status >&2\n\
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
    for secret in [token.as_str(), CLOUD_KEY, FORGE_TOKEN] {
        assert!(!log.contains(secret), "{secret} leaked: {log}");
    }
    assert!(!log.contains("BREACH"), "{log}");
    for attempt in [
        "the worker environment",
        "the worker command line",
        "the mirrors",
        "the worker memory",
    ] {
        assert!(
            log.contains(&format!("denied {attempt}")),
            "{attempt}: {log}"
        );
    }
    assert!(!log.contains("worker --server"), "{log}");
    for set in ["CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            log.contains(&format!("{set}:\t0000000000000000")),
            "{set}: {log}"
        );
    }
    assert!(log.contains("NoNewPrivs:\t1"), "{log}");
}

/// A worker that can make no namespace: not root (here root of a user namespace, with every
/// capability dropped) where user namespaces are disabled (that namespace allows no nested
/// one, as bubblewrap's `--disable-userns` does). It refuses to run suites unless its admin
/// accepts that, and even then a suite without the network fails instead of running with
/// Landlock's TCP rule alone; the next job runs.
#[test]
fn a_worker_that_can_make_no_namespace_refuses_or_fails_what_it_cannot_contain() {
    let server = KymoServer::start(&["--no-worker"]);
    let token = worker_token(&server);
    let cache = tempfile::tempdir().unwrap();
    let worker = |extra: &[&str]| {
        let mut command = Command::new("unshare");
        command
            .args(["--user", "--map-root-user", "sh", "-c"])
            .arg(
                "echo 0 > /proc/sys/user/max_user_namespaces && \
                 exec setpriv --bounding-set=-all --inh-caps=-all \"$@\"",
            )
            .args(["sh", kymo_bin(), "worker", "--server", &server.url])
            .args(["--token", &token, "--cache-dir"])
            .arg(cache.path())
            .args(extra)
            .env("RUST_LOG", "error");
        command
    };
    let refused = worker(&[]).output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("NO PID namespace") && said.contains("refuses to run suites"),
        "{said}"
    );

    let suite = |network: bool| {
        format!(
            "[[suite]]\nname = \"s\"\nrun = \"sh bench.sh\"\nformat = \"kymo\"\ntimeout = \"30s\"\nnetwork = {network}\n"
        )
    };
    let script = format!("echo 'the suite ran' >&2\n{}", bench_script(1.0));
    let repo = TestRepo::new();
    let offline = repo.commit(
        &[("kymo.toml", &suite(false)), ("bench.sh", &script)],
        "offline",
    );
    let online = repo.commit(&[("kymo.toml", &suite(true))], "online");
    assert_ok(&server.kymo(&["repo", "add", "r", repo.path().to_str().unwrap()]));
    assert_ok(&server.kymo(&["run", "r", &offline]));
    assert_ok(&server.kymo(&["run", "r", &online]));
    let mut accepted = worker(&["--allow-unconfined-suites"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let jobs = server.wait_for_jobs(2, Duration::from_secs(120));
    let _ = accepted.kill();
    let _ = accepted.wait();
    let failed = job_of(&jobs, &offline);
    assert_eq!(failed["state"], "failed", "{failed:#}");
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("did not run: its boundary could not be set up (making its own PID, mount and network namespaces"),
        "{failed:#}"
    );
    let log = failed["log_tail"].as_str().unwrap_or_default();
    assert!(!log.contains("the suite ran"), "{log}");
    let ran = job_of(&jobs, &online);
    assert_eq!(ran["state"], "succeeded", "the next job runs: {ran:#}");
}
