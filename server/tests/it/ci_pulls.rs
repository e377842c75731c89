//! Pull requests measured in CI, end to end with the real binary: the tracked branch's
//! results are uploaded from "CI" on every push, then `kymo upload --pull-request` uploads a
//! head that only a fork has (the server never fetches it) with a repository-scoped upload
//! token; a local HTTP server stands in for GitHub's statuses and comments APIs.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::listener::Listener;
use crate::pull_requests::{report_to, status_of, wait_for};
use crate::support::{KymoServer, TestRepo, assert_ok, kymo_bin};
use crate::webhooks::git;

/// Commits of the tracked branch measured in CI before the pull request.
const HISTORY: usize = 12;

/// kymo JSON of one `parse` benchmark at `level` ns, five samples within ±0.5 %.
fn results(level: f64, i: usize) -> String {
    let samples: Vec<f64> = (0..5)
        .map(|k| level * (1.0 + (((i * 7 + k * 3) % 5) as f64 - 2.0) * 0.0025))
        .collect();
    json!({ "benchmarks": [{ "name": "parse", "params": { "size": "16" }, "metrics": [
        { "name": "time", "unit": "ns", "direction": "lower", "value": level, "samples": samples }
    ] }] })
    .to_string()
}

/// A `kymo` command in `dir` (no git clone: CI may run it anywhere) with `token` and `env`.
fn kymo_in(
    server: &KymoServer,
    dir: &Path,
    token: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let mut command = Command::new(kymo_bin());
    command
        .args(args)
        .current_dir(dir)
        .env("KYMO_SERVER", &server.url)
        .env("KYMO_TOKEN", token)
        .env("XDG_CONFIG_HOME", server.config_dir())
        .env("RUST_LOG", "warn")
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITLAB_CI");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn upload_token(server: &KymoServer, name: &str, repo: &str) -> String {
    let db = server.db_path();
    let db = db.to_str().unwrap();
    let args = [
        "token", "create", "--upload", name, "--repo", repo, "--db", db,
    ];
    assert_ok(&server.kymo(&args)).trim().to_owned()
}

fn comments_posted(forge: &Listener) -> usize {
    (forge.received().iter())
        .filter(|r| r.method == "POST" && r.path.ends_with("/comments"))
        .count()
}

/// The tracked repository `app` with its history measured in CI, a fork with the pull
/// request's head, the forge, and a CI secret for `app`.
struct Setup {
    server: KymoServer,
    forge: Listener,
    _repo: TestRepo,
    main_head: String,
    fork: tempfile::TempDir,
    work: tempfile::TempDir,
    token: String,
}

fn setup() -> Setup {
    let server = KymoServer::start(&["--no-worker"]);
    let forge = Listener::answering(&[201]);
    let repo = TestRepo::new();
    let shas: Vec<String> = (0..HISTORY)
        .map(|i| {
            repo.commit(
                &[("src/lib.rs", &format!("// {i}\n"))],
                &format!("change {i}"),
            )
        })
        .collect();
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    report_to(&server, &forge);
    let token = upload_token(&server, "ci", "app");
    let work = tempfile::tempdir().unwrap();
    // CI on every push to main: each commit's results, under this runner's fingerprint.
    for (i, sha) in shas.iter().enumerate() {
        let file = work.path().join("main.json");
        std::fs::write(&file, results(100.0, i)).unwrap();
        let args = [
            "upload",
            "--repo",
            "app",
            "--commit",
            sha,
            file.to_str().unwrap(),
        ];
        assert_ok(&kymo_in(&server, work.path(), &token, &[], &args));
    }
    // The pull request's head lives in a fork: nothing the server can fetch has it.
    let fork = tempfile::tempdir().unwrap();
    git(
        fork.path(),
        &["clone", "--quiet", repo.path().to_str().unwrap(), "."],
    );
    let main_head = shas.last().unwrap().clone();
    Setup {
        server,
        forge,
        _repo: repo,
        main_head,
        fork,
        work,
        token,
    }
}

/// Commits `work` into the fork; returns the head's sha.
fn fork_commit(fork: &Path, work: &str) -> String {
    std::fs::write(fork.join("work.txt"), work).unwrap();
    git(fork, &["add", "work.txt"]);
    git(
        fork,
        &[
            "-c",
            "user.name=Ada",
            "-c",
            "user.email=ada@example.com",
            "commit",
            "--quiet",
            "-m",
            work,
        ],
    );
    let out = Command::new("git")
        .arg("-C")
        .arg(fork)
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_slower_head_uploaded_from_ci_gets_a_failure_and_one_comment_that_its_fix_edits_to_success() {
    let s = setup();
    let slower = fork_commit(s.fork.path(), "390000");
    let file = s.work.path().join("head.json");
    std::fs::write(&file, results(130.0, 3)).unwrap();
    let file = file.to_str().unwrap();
    let upload = [
        "upload",
        "--repo",
        "app",
        "--pull-request",
        "7",
        "--commit",
        &slower,
        "--merge-base",
        &s.main_head,
        "--title",
        "Parse in one pass",
        file,
    ];
    let said = assert_ok(&kymo_in(&s.server, s.work.path(), &s.token, &[], &upload));
    assert!(said.contains("pull request #7"), "{said}");
    assert!(said.contains("/repos/app/comparisons/"), "{said}");
    assert!(said.contains("regression"), "the compare table: {said}");

    let (_, failure) = wait_for(&s.forge, "failure status", |r| {
        status_of(r, &slower, "failure")
    });
    assert_eq!(
        failure.header("authorization"),
        Some("Bearer forge-token-123")
    );
    let link = failure.json()["target_url"].as_str().unwrap().to_owned();
    let (comment_id, comment) = wait_for(&s.forge, "a comment", |r| {
        r.method == "POST" && r.path == "/repos/acme/app/issues/7/comments"
    });
    let text = comment.json()["body"].as_str().unwrap().to_owned();
    assert!(text.contains("1 regressed"), "{text}");
    assert!(text.contains("| parse{size=16} | time |"), "{text}");
    assert!(text.contains("measured in CI"), "{text}");
    assert!(text.contains("CI runners are noisy"), "{text}");
    assert!(text.contains(&link), "{text}");

    // Nothing of the head entered the tracked branch: its series has the main commits only.
    let series = s
        .server
        .get_json("/api/v1/repos/app/series?benchmark=parse%7Bsize%3D16%7D&metric=time");
    let [series] = series.as_array().unwrap().as_slice() else {
        panic!("one series: {series:#}");
    };
    let points = series["points"].as_array().unwrap();
    assert_eq!(points.len(), HISTORY, "{series:#}");
    assert!(
        points.iter().all(|p| p["sha"] != slower.as_str()),
        "{series:#}"
    );
    let head = s
        .server
        .get_json(&format!("/api/v1/repos/app/commits/{slower}"));
    assert!(head["runs"].as_array().unwrap().is_empty(), "{head:#}");
    assert_eq!(head["commit"]["position"], Value::Null, "off the branch");

    // The same upload again (a re-run CI step) is the same comparison: no second comment.
    let again = assert_ok(&kymo_in(&s.server, s.work.path(), &s.token, &[], &upload));
    assert_eq!(said.lines().next(), again.lines().next());

    // The fix, uploaded by a GitHub Actions job that says everything through its environment.
    let fixed = fork_commit(s.fork.path(), "300000");
    std::fs::write(s.work.path().join("head.json"), results(100.2, 5)).unwrap();
    let event = s.work.path().join("event.json");
    let payload = json!({ "action": "synchronize", "number": 7, "pull_request": {
        "number": 7, "title": "Parse in one pass", "user": { "login": "ada" },
        "head": { "sha": fixed, "ref": "one-pass" },
        "base": { "sha": s.main_head, "ref": "main" } } });
    std::fs::write(&event, payload.to_string()).unwrap();
    let actions = [
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_EVENT_PATH", event.to_str().unwrap()),
        ("GITHUB_BASE_REF", "main"),
        ("GITHUB_REF", "refs/pull/7/merge"),
    ];
    let upload = ["upload", "--repo", "app", "--pull-request", "auto", file];
    let said = assert_ok(&kymo_in(
        &s.server,
        s.work.path(),
        &s.token,
        &actions,
        &upload,
    ));
    assert!(said.contains("pull request #7"), "{said}");
    wait_for(&s.forge, "success status", |r| {
        status_of(r, &fixed, "success")
    });
    let edit_path = format!("/repos/acme/app/issues/comments/{comment_id}");
    let (_, edit) = wait_for(&s.forge, "the comment edited", |r| {
        r.method == "PATCH" && r.path == edit_path
    });
    let text = edit.json()["body"].as_str().unwrap().to_owned();
    assert!(text.contains("0 regressed"), "{text}");
    assert_eq!(comments_posted(&s.forge), 1, "one comment per pull request");
    let page = s.server.get("/repos/app").1;
    assert!(page.contains("#7 Parse in one pass"), "{page}");
}

#[test]
fn base_results_from_the_same_job_are_compared_and_bad_uploads_change_nothing() {
    let s = setup();
    let head = fork_commit(s.fork.path(), "390000");
    let base_file = s.work.path().join("base.json");
    std::fs::write(&base_file, results(100.0, 1)).unwrap();
    let head_file = s.work.path().join("head.json");
    std::fs::write(&head_file, results(130.0, 2)).unwrap();
    let upload = |token: &str, repo: &str, extra: &[&str]| {
        let mut args = vec![
            "upload",
            "--repo",
            repo,
            "--pull-request",
            "8",
            "--commit",
            &head,
        ];
        args.extend_from_slice(extra);
        args.push(head_file.to_str().unwrap());
        kymo_in(&s.server, s.work.path(), token, &[], &args)
    };
    let same_job = ["--base-results", base_file.to_str().unwrap()];
    let said = assert_ok(&upload(&s.token, "app", &same_job));
    assert!(said.contains("measured in the same CI job"), "{said}");
    let comparisons = s.server.get_json("/api/v1/repos/app/comparisons");
    let latest = &comparisons[0];
    assert_eq!(latest["measured"], "same-job", "{latest:#}");
    assert_eq!(latest["state"], "succeeded", "{latest:#}");
    let view = s
        .server
        .get_json(&format!("/api/v1/repos/app/comparisons/{}", latest["id"]));
    assert_eq!(view["interleaved"], false);
    assert_eq!(view["report"]["regressed"], 1, "{view:#}");
    let before = comparisons.as_array().unwrap().len();

    // The CI secret of another repository is refused, and says why.
    assert_ok(
        &s.server
            .kymo(&["repo", "add", "other", s._repo.path().to_str().unwrap()]),
    );
    let other_token = upload_token(&s.server, "other-ci", "other");
    let refused = upload(&other_token, "app", &same_job);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("another repository"), "{stderr}");
    // Nor can it act as an admin.
    let refused = kymo_in(&s.server, s.work.path(), &s.token, &[], &["run", "app"]);
    assert!(!refused.status.success());

    // No stored results of the base from this machine: a clear refusal naming the way out.
    let refused = upload(&other_token, "other", &[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("no results of") && stderr.contains("--base-results"),
        "{stderr}"
    );
    // Hostile or broken requests: a bad number, forge or branch, a short head outside a clone.
    for (extra, says) in [
        (&["--forge", "bitbucket"][..], "provider"),
        (&["--base-branch=--upload-pack=x"][..], "branch"),
        (&["--merge-base", "nonexistent"][..], "no git clone"),
    ] {
        let refused = upload(&s.token, "app", extra);
        assert!(!refused.status.success(), "{extra:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    }
    let zero = kymo_in(
        &s.server,
        s.work.path(),
        &s.token,
        &[],
        &[
            "upload",
            "--repo",
            "app",
            "--pull-request",
            "0",
            "--commit",
            &head,
            head_file.to_str().unwrap(),
        ],
    );
    assert!(!zero.status.success());
    let comparisons = s.server.get_json("/api/v1/repos/app/comparisons");
    assert_eq!(
        comparisons.as_array().unwrap().len(),
        before,
        "nothing more was stored"
    );
}
