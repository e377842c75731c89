//! Suites that go wrong fail their job with a clear message and the log tail; the worker goes
//! on to the next job, the server stays healthy, and nothing partial is stored.

use std::time::Duration;

use crate::support::{KymoServer, TestRepo, assert_ok, bench_script, kymo_toml};

#[test]
fn broken_suites_fail_their_jobs_and_the_worker_goes_on() {
    let repo = TestRepo::new();
    let cases: Vec<(String, &str)> = vec![
        ("[[suite]]\nname = \"broken\"\n".into(), "kymo.toml"),
        (
            kymo_toml("echo going down >&2; exit 3", "30s", 1),
            "exited with status 3",
        ),
        (kymo_toml("echo started; sleep 60", "1s", 1), "timeout"),
        (
            kymo_toml("echo this is not json", "30s", 1),
            "not valid kymo output",
        ),
        (
            kymo_toml("yes kymo | head -c 100000000", "60s", 1),
            "more output",
        ),
    ];
    let mut shas = Vec::new();
    for (toml, _) in &cases {
        shas.push(repo.commit(&[("kymo.toml", toml)], "a broken suite"));
    }
    let good = repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sh bench.sh", "30s", 1)),
            ("bench.sh", &bench_script(7.0)),
        ],
        "a good suite",
    );

    let server = KymoServer::start(&[]);
    assert_ok(&server.kymo(&["repo", "add", "r", repo.path().to_str().unwrap()]));
    for sha in shas.iter().chain([&good]) {
        assert_ok(&server.kymo(&["run", "r", sha]));
    }
    let jobs = server.wait_for_jobs(cases.len() + 1, Duration::from_secs(120));

    for ((_, expected), sha) in cases.iter().zip(&shas) {
        let job = jobs.iter().find(|j| j["sha"] == sha.as_str()).unwrap();
        assert_eq!(job["state"], "failed", "{job:#?}");
        let error = job["error"].as_str().unwrap();
        assert!(error.contains(expected), "{expected:?} not in {error:?}");
        let commit = server.get_json(&format!("/api/v1/repos/r/commits/{sha}"));
        assert!(
            commit["runs"].as_array().unwrap().is_empty(),
            "partial run stored"
        );
        assert!(commit["results"].as_array().unwrap().is_empty());
    }
    let failing_exit = jobs.iter().find(|j| j["sha"] == shas[1].as_str()).unwrap();
    assert!(
        failing_exit["log_tail"]
            .as_str()
            .unwrap()
            .contains("going down")
    );

    let good_job = jobs.iter().find(|j| j["sha"] == good.as_str()).unwrap();
    assert_eq!(good_job["state"], "succeeded", "{good_job:#?}");
    assert_eq!(server.get("/healthz"), (200, "ok".into()));

    let (_, queue) = server.get("/queue");
    assert!(
        queue.contains("exited with status 3"),
        "the queue page shows why"
    );
}

#[test]
fn a_failed_builds_cause_is_on_the_queue_page_and_in_the_jobs_table() {
    let repo = TestRepo::new();
    // What cargo prints when the sandbox keeps it from its registry cache, then its exit.
    let build = "printf '   Compiling useg v0.1.0\\nerror: failed to download `cast v0.3.0`\\n\\n\
                 Caused by:\\n  unable to get packages from source\\n\\nCaused by:\\n  \
                 Permission denied (os error 13)\\n' >&2; exit 101";
    let toml = format!(
        "[[suite]]\nname = \"benches\"\nbuild = {build:?}\nrun = \"true\"\nformat = \"kymo\"\ntimeout = \"30s\"\n"
    );
    let sha = repo.commit(&[("kymo.toml", &toml)], "a suite whose build fails");
    let server = KymoServer::start(&[]);
    assert_ok(&server.kymo(&["repo", "add", "r", repo.path().to_str().unwrap()]));
    assert_ok(&server.kymo(&["run", "r", &sha]));
    let jobs = server.wait_for_jobs(1, Duration::from_secs(120));
    assert_eq!(jobs[0]["state"], "failed", "{jobs:#?}");
    let cause = "error: failed to download `cast v0.3.0` … Permission denied (os error 13)";
    assert_eq!(jobs[0]["cause"], cause, "{jobs:#?}");

    // The page shows the cause beside the error, outside the folded log.
    let (_, queue) = server.get("/queue");
    let row = queue.split("id=\"job-").nth(1).unwrap();
    let shown = row.split("</details>").nth(1).unwrap();
    assert!(
        shown.contains("error: failed to download `cast v0.3.0` … Permission denied"),
        "{row}"
    );
    // So does `kymo jobs`, on the job's one line.
    let table = assert_ok(&server.kymo(&["jobs"]));
    let line = table.lines().find(|l| l.contains("failed")).unwrap();
    assert!(
        line.contains("exited with status 101: error: failed to download")
            && line.contains("Permission denied"),
        "{table}"
    );
}
