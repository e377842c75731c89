//! Day one on an existing repository, as the README tells a new user: `kymo serve` with its
//! defaults in a fresh directory, a repository with nested directories and a history without
//! `kymo.toml`, measured over its whole history with suites kept on the server.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{TestRepo, assert_ok, bench_script, kymo_bin, kymo_toml, served_url};

/// `kymo serve` started with no flag but a free port, from `cwd`; killed on drop.
struct DefaultServer {
    child: Child,
    url: String,
    cwd: tempfile::TempDir,
}

impl DefaultServer {
    fn start() -> Self {
        let cwd = tempfile::tempdir().unwrap();
        let mut child = Command::new(kymo_bin())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .current_dir(cwd.path())
            .env_remove("KYMO_DB")
            .env_remove("KYMO_DATA")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let url = served_url(&mut child);
        Self { child, url, cwd }
    }

    /// Runs the CLI from the server's directory, where it finds the admin token by itself.
    fn kymo(&self, args: &[&str]) -> Output {
        Command::new(kymo_bin())
            .args(args)
            .current_dir(self.cwd.path())
            .env("KYMO_SERVER", &self.url)
            .env_remove("KYMO_TOKEN")
            .env_remove("KYMO_DB")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    }

    fn get_json(&self, path: &str) -> Value {
        let mut response = ureq::get(format!("{}{path}", self.url)).call().unwrap();
        serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap()
    }

    /// Waits until `count` jobs exist and none is waiting or running.
    fn wait_for_jobs(&self, count: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let jobs = self.get_json("/api/v1/jobs").as_array().unwrap().clone();
            let done = jobs
                .iter()
                .all(|j| !matches!(j["state"].as_str(), Some("queued" | "running")));
            if jobs.len() >= count && done {
                return jobs;
            }
            assert!(Instant::now() < deadline, "jobs did not finish: {jobs:#?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for DefaultServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn kymo_serve_with_its_defaults_benchmarks_a_repository_with_nested_directories() {
    let repo = TestRepo::new();
    let sha = repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sh scripts/bench/run.sh", "60s", 1)),
            ("scripts/bench/run.sh", &bench_script(7.0)),
            ("src/deeply/nested/module/mod.rs", "// nested"),
        ],
        "nested directories",
    );
    let server = DefaultServer::start();
    assert_ok(&server.kymo(&["repo", "add", "r", path_str(repo.path())]));
    assert_ok(&server.kymo(&["run", "r"]));
    let jobs = server.wait_for_jobs(1, Duration::from_secs(60));
    assert_eq!(jobs[0]["state"], "succeeded", "{jobs:#?}");
    assert!(
        jobs[0]["log_tail"].as_str().unwrap().contains("run.sh"),
        "a succeeded job keeps its log: {jobs:#?}"
    );
    let commit = server.get_json(&format!("/api/v1/repos/r/commits/{sha}"));
    assert_eq!(commit["results"][0]["value"], 7.0);
    assert_eq!(commit["results"][0]["samples"], serde_json::json!([]));
    assert_eq!(commit["commit"]["parents"], serde_json::json!([]));
    assert_eq!(commit["runs"][0]["config_source"], "commit");
    // Uploads take the same commit-ish as `kymo run`: a branch name or a short sha.
    let results = server.cwd.path().join("results.json");
    std::fs::write(
        &results,
        r#"{"benchmarks":[{"name":"upload/b","metrics":[{"name":"time","unit":"ns","direction":"lower","value":3.0}]}]}"#,
    )
    .unwrap();
    for commit in ["main", &sha[..8]] {
        let args = [
            "upload",
            "--repo",
            "r",
            "--commit",
            commit,
            path_str(&results),
        ];
        assert_ok(&server.kymo(&args));
    }
    let commit = server.get_json(&format!("/api/v1/repos/r/commits/{sha}"));
    assert_eq!(commit["runs"].as_array().unwrap().len(), 3, "{commit:#}");
    // Everything lives where the defaults say: in the directory `kymo serve` started in.
    for made in [
        "kymo.db",
        "kymo.db.admin-token",
        "kymo-data/mirrors",
        "kymo-data/worktrees",
    ] {
        assert!(server.cwd.path().join(made).exists(), "{made} is missing");
    }
}

/// Prints kymo JSON for the value in `value.txt`, with a little noise in each repeat.
const STORED_SUITES: &str = r#"[[suite]]
name = "stored"
run = '''v=$(cat value.txt); r=$(od -An -N2 -tu2 /dev/urandom); printf '{"benchmarks":[{"name":"parse/small","metrics":[{"name":"time","unit":"ns","direction":"lower","value":%s}]}]}' "$(awk -v v="$v" -v r="$r" 'BEGIN { print v * (1 + (r / 65535 - 0.5) / 100) }')"'''
repeat = 3
timeout = "60s"
"#;

#[test]
fn a_history_without_kymo_toml_is_measured_from_suites_kept_on_the_server() {
    let repo = TestRepo::new();
    let shas: Vec<String> = (0..20)
        .map(|i| {
            let value = if i < 12 { 100.0 } else { 150.0 };
            repo.commit(
                &[
                    ("value.txt", &format!("{value}")),
                    ("src/a/b/c.rs", &format!("// {i}")),
                ],
                &format!("commit {i}"),
            )
        })
        .collect();
    let server = DefaultServer::start();
    let suites = server.cwd.path().join("suites.toml");
    std::fs::write(&suites, STORED_SUITES).unwrap();
    let bad = server.cwd.path().join("bad.toml");
    std::fs::write(&bad, "[[suite]]\nname = 3\n").unwrap();

    // A bad file is refused with the parser's message, and nothing is added.
    let refused = server.kymo(&[
        "repo",
        "add",
        "r",
        path_str(repo.path()),
        "--suites",
        path_str(&bad),
    ]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("suites: "), "{message}");
    assert!(!message.contains("stack backtrace"), "{message}");
    assert_eq!(server.get_json("/api/v1/repos"), serde_json::json!([]));

    let out = assert_ok(&server.kymo(&[
        "repo",
        "add",
        "r",
        path_str(repo.path()),
        "--suites",
        path_str(&suites),
        "--backfill",
        "20",
    ]));
    assert!(out.contains("on branch main"), "{out}");
    let jobs = server.wait_for_jobs(20, Duration::from_secs(240));
    // The history's jobs, and the re-measurements that confirm the changes they show.
    let history = jobs.iter().filter(|j| j["reason"] != "confirm").count();
    assert_eq!(history, 20);
    assert!(jobs.iter().all(|j| j["state"] == "succeeded"), "{jobs:#?}");
    let commit = server.get_json(&format!("/api/v1/repos/r/commits/{}", shas[0]));
    assert_eq!(commit["runs"][0]["config_source"], "server");
    assert_eq!(commit["runs"][0]["config_hash"].as_str().unwrap().len(), 64);

    // A job is marked succeeded with its run; the analysis follows it (beside the whole suite
    // on a loaded machine, once later than 30 s).
    let deadline = Instant::now() + Duration::from_secs(120);
    let (found, regressions) = loop {
        let regressions = server.get_json("/api/v1/repos/r/regressions");
        let found: Vec<String> = regressions
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "regression")
            .map(|r| r["sha"].as_str().unwrap().to_owned())
            .collect();
        if found == [shas[12].clone()] || Instant::now() > deadline {
            break (found, regressions);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let series = server.get_json("/api/v1/repos/r/series?benchmark=parse/small&metric=time");
    assert_eq!(found, vec![shas[12].clone()], "{regressions:#?}\n{series}");

    // Backfilling again finds everything measured.
    let again = assert_ok(&server.kymo(&["run", "r", "--last", "20"]));
    assert!(
        again.contains("0 job(s) waiting for them, 20 already measured"),
        "{again}"
    );
}

#[test]
fn a_commit_without_suites_fails_with_how_to_fix_it() {
    let repo = TestRepo::new();
    repo.commit(&[("README", "no kymo.toml")], "first");
    // The file exists in the work tree but was never committed.
    std::fs::write(repo.path().join("kymo.toml"), "[[suite]]\n").unwrap();
    let server = DefaultServer::start();
    assert_ok(&server.kymo(&["repo", "add", "r", path_str(repo.path())]));
    assert_ok(&server.kymo(&["run", "r"]));
    let jobs = server.wait_for_jobs(1, Duration::from_secs(60));
    let error = jobs[0]["error"].as_str().unwrap();
    assert!(error.contains("commit it"), "{error}");
    assert!(error.contains("kymo repo set r --suites"), "{error}");

    // Doing what it says: a bad file is refused with the parser's message, a good one runs.
    let bad = server.cwd.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[suite]]\nname = \"s\"\nrun = \"true\"\nrepeat = 0\n",
    )
    .unwrap();
    let refused = server.kymo(&["repo", "set", "r", "--suites", path_str(&bad)]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("repeat"));
    let good = server.cwd.path().join("good.toml");
    std::fs::write(&good, kymo_toml(bench_script(5.0).trim(), "60s", 1)).unwrap();
    assert_ok(&server.kymo(&["repo", "set", "r", "--suites", path_str(&good)]));
    let shown = assert_ok(&server.kymo(&["repo", "set", "r"]));
    assert!(shown.contains("credential: none"), "{shown}");
    assert_ok(&server.kymo(&["retry", &jobs[0]["id"].to_string()]));
    let jobs = server.wait_for_jobs(2, Duration::from_secs(60));
    assert_eq!(jobs[0]["state"], "succeeded", "{jobs:#?}");
}

#[test]
fn cancelling_a_running_job_kills_its_commands_at_once() {
    let repo = TestRepo::new();
    // Suites write only inside their work tree: the pid file lands there.
    let command = "sleep 617 & echo $! > pid; wait";
    repo.commit(&[("kymo.toml", &kymo_toml(command, "20m", 1))], "slow");
    let server = DefaultServer::start();
    let worktrees = server.cwd.path().join("kymo-data/worktrees");
    let pid_file = || {
        std::fs::read_dir(&worktrees)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("pid"))
            .find(|p| p.exists())
    };
    assert_ok(&server.kymo(&["repo", "add", "r", path_str(repo.path())]));
    assert_ok(&server.kymo(&["run", "r"]));
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid_file = loop {
        if let Some(found) = pid_file() {
            break found;
        }
        assert!(Instant::now() < deadline, "the suite never started");
        std::thread::sleep(Duration::from_millis(100));
    };
    // The shell writes the pid a moment after creating the file.
    std::thread::sleep(Duration::from_millis(200));
    let jobs = server.get_json("/api/v1/jobs");
    assert_eq!(jobs[0]["state"], "running");
    assert!(
        jobs[0]["phase"]
            .as_str()
            .unwrap()
            .starts_with("suite 1 of 1"),
        "{jobs:#?}"
    );
    let listed = assert_ok(&server.kymo(&["jobs"]));
    assert!(listed.contains("suite 1 of 1"), "{listed}");
    // The pid in the file is the one in the suite's own PID namespace: find the process
    // as this machine numbers it, by its command line.
    assert!(pid_file.exists());
    let pid = process_running(&["sleep", "617"]).expect("the benchmark's sleep is running");
    let cancelled = Instant::now();
    assert_ok(&server.kymo(&["cancel", &jobs[0]["id"].to_string()]));
    loop {
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z");
        if !alive {
            break;
        }
        assert!(
            cancelled.elapsed() < Duration::from_secs(15),
            "the benchmark outlived its cancelled job"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let jobs = server.get_json("/api/v1/jobs");
    assert_eq!(jobs[0]["state"], "cancelled", "{jobs:#?}");
}

#[test]
fn cli_errors_are_messages_and_pipes_close_quietly() {
    let server = DefaultServer::start();
    let output = Command::new(kymo_bin())
        .args(["run", "no-such-repo"])
        .current_dir(server.cwd.path())
        .env("KYMO_SERVER", &server.url)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
    // `kymo completions bash | head -0`: the reader is gone before the writer starts.
    let mut child = Command::new(kymo_bin())
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // `--token` belongs to commands that talk to a server, not to `kymo token`.
    let help = Command::new(kymo_bin())
        .args(["token", "create", "--help"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains("--token"));
}

/// The pid, as this machine numbers it, of a process whose command line is `argv`.
fn process_running(argv: &[&str]) -> Option<i32> {
    let wanted: String = argv.iter().map(|a| format!("{a}\0")).collect();
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted.as_bytes())
        })
}
