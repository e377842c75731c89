//! A tracked remote that disappears and a queued commit that is force-pushed away: each job
//! fails with a message that says what happened, and the service goes on with the next job.

use std::time::Duration;

use crate::support::{
    KymoServer, TestRepo, assert_ok, bench_script, kymo_toml, start_worker, worker_token,
};

fn suite_files(value: f64) -> [(&'static str, String); 2] {
    [
        ("kymo.toml", kymo_toml("sh bench.sh", "30s", 1)),
        ("bench.sh", bench_script(value)),
    ]
}

fn commit(repo: &TestRepo, value: f64, message: &str) -> String {
    let files = suite_files(value);
    let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
    repo.commit(&files, message)
}

/// Moves `main` back to its parent and commits something else on top, then deletes the old
/// head's commit object, as a force-push followed by `git gc` on the remote would.
fn force_push_away(repo: &TestRepo, old_head: &str) -> String {
    let git = git2::Repository::open(repo.path()).unwrap();
    let old = git
        .find_commit(git2::Oid::from_str(old_head).unwrap())
        .unwrap();
    let parent = old.parent(0).unwrap();
    git.reset(parent.as_object(), git2::ResetType::Hard, None)
        .unwrap();
    let new_head = commit(repo, 3.0, "rewritten");
    let object = repo
        .path()
        .join(".git/objects")
        .join(&old_head[..2])
        .join(&old_head[2..]);
    std::fs::remove_file(&object).unwrap();
    new_head
}

#[test]
fn a_vanished_remote_and_a_force_pushed_commit_fail_their_jobs_clearly() {
    let gone = TestRepo::new();
    let gone_sha = commit(&gone, 1.0, "first");
    let forced = TestRepo::new();
    commit(&forced, 1.0, "base");
    let doomed = commit(&forced, 2.0, "to be force-pushed away");

    let server = KymoServer::start(&["--no-worker"]);
    let token = worker_token(&server);
    assert_ok(&server.kymo(&["repo", "add", "gone", gone.path().to_str().unwrap()]));
    assert_ok(&server.kymo(&["repo", "add", "forced", forced.path().to_str().unwrap()]));
    assert_ok(&server.kymo(&["run", "gone", &gone_sha]));
    assert_ok(&server.kymo(&["run", "forced", &doomed]));

    // Both jobs wait; now the remote of one disappears and the other's commit is rewritten.
    let gone_path = gone.path().to_owned();
    drop(gone);
    assert!(!gone_path.exists());
    let rewritten = force_push_away(&forced, &doomed);

    let cache = tempfile::tempdir().unwrap();
    let mut worker = start_worker(&server, &token, cache.path());
    let jobs = server.wait_for_jobs(2, Duration::from_secs(60));
    let error_of = |sha: &str| {
        let job = jobs.iter().find(|j| j["sha"] == sha).unwrap();
        assert_eq!(job["state"], "failed", "{job:#?}");
        job["error"].as_str().unwrap().to_owned()
    };
    let vanished = error_of(&gone_sha);
    assert!(
        vanished.contains("cannot clone")
            && vanished.contains(&format!("{} does not exist", gone_path.display())),
        "{vanished}"
    );
    let rewritten_error = error_of(&doomed);
    assert!(
        rewritten_error.contains(&doomed) && rewritten_error.contains("force-pushed away"),
        "{rewritten_error}"
    );

    // The service goes on: the vanished repository is refused clearly, the other one runs.
    assert_eq!(server.get("/healthz"), (200, "ok".into()));
    let refused = server.kymo(&["run", "gone"]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("gone") && !message.contains("internal error"),
        "{message}"
    );
    assert_ok(&server.kymo(&["run", "forced"]));
    let jobs = server.wait_for_jobs(3, Duration::from_secs(60));
    worker.kill().unwrap();
    worker.wait().unwrap();
    let job = jobs
        .iter()
        .find(|j| j["sha"] == rewritten.as_str())
        .unwrap();
    assert_eq!(job["state"], "succeeded", "{job:#?}");
}
