//! Pull request webhooks: a signed request from the same repository is measured against its
//! merge base and commented on (one comment, edited in place) with a status on its head, on a
//! local HTTP server standing in for the forge's API; a request from a fork runs nothing.

use std::time::{Duration, Instant};

use kymo_core::webhook::sign_hmac_sha256;
use serde_json::{Value, json};

use crate::listener::{Listener, Received};
use crate::support::{KymoServer, TestRepo, assert_ok, kymo_toml};
use crate::try_runs::{WORK_SCRIPT, branch};
use crate::webhooks::{SECRET, deliver, git};

/// A GitHub `pull_request` delivery of pull request 7, signed with the repository's secret.
fn pull_request(
    server: &KymoServer,
    delivery: &str,
    action: &str,
    head: &str,
    head_repo: i64,
) -> (u16, Value) {
    let body = serde_json::to_vec(&json!({
        "action": action,
        "number": 7,
        "pull_request": {
            "title": "Parse in one pass",
            "user": { "login": "ada" },
            "head": { "sha": head, "ref": "one-pass", "repo": { "id": head_repo, "full_name": "ada/app" } },
            "base": { "sha": head, "ref": "main", "repo": { "id": 1, "full_name": "acme/app" } },
        },
        "repository": { "id": 1, "full_name": "acme/app" },
    }))
    .unwrap();
    let signature = format!("sha256={}", sign_hmac_sha256(SECRET, &body));
    deliver(
        server,
        "github?repo=app",
        &[
            ("x-github-event", "pull_request"),
            ("x-github-delivery", delivery),
            ("x-hub-signature-256", &signature),
        ],
        &body,
    )
}

/// A tracked repository whose main does 300,000 steps; `one-pass` makes it 390,000 (30 % more).
fn tracked(server: &KymoServer, forge: &Listener) -> (TestRepo, String) {
    let repo = TestRepo::new();
    repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sh bench.sh", "60s", 3)),
            ("bench.sh", WORK_SCRIPT),
            ("work.txt", "300000\n"),
        ],
        "first",
    );
    let slower = branch(&repo, "one-pass", &[("work.txt", "390000\n")]);
    let path = repo.path().to_str().unwrap();
    assert_ok(&server.kymo(&["repo", "add", "app", path, "--webhook-secret", SECRET]));
    report_to(server, forge);
    (repo, slower)
}

/// Makes repository `app` post its statuses and comments to `forge` as GitHub's `acme/app`.
pub fn report_to(server: &KymoServer, forge: &Listener) {
    assert_ok(&server.kymo(&[
        "status",
        "set",
        "app",
        "--kind",
        "github",
        "--api-url",
        &forge.url,
        "--slug",
        "acme/app",
        "--forge-token",
        "forge-token-123",
    ]));
}

/// Waits until the forge received a request that `wanted` accepts; returns it with its
/// 1-based number (what the stand-in answers as a created comment's id).
pub fn wait_for(
    forge: &Listener,
    what: &str,
    wanted: impl Fn(&Received) -> bool,
) -> (usize, Received) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let received = forge.received();
        if let Some(found) = received.iter().position(&wanted) {
            return (found + 1, received[found].clone());
        }
        assert!(Instant::now() < deadline, "no {what}: {received:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether `request` posts the status `state` on commit `sha` of GitHub's `acme/app`.
pub fn status_of(request: &Received, sha: &str, state: &str) -> bool {
    request.path == format!("/repos/acme/app/statuses/{sha}") && request.json()["state"] == state
}

#[test]
fn a_slower_pull_request_gets_a_failure_and_one_comment_that_its_fix_edits_to_success() {
    let server = KymoServer::start(&[]);
    let forge = Listener::answering(&[201]);
    let (repo, slower) = tracked(&server, &forge);

    let (status, answer) = pull_request(&server, "pr-1", "opened", &slower, 1);
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["jobs"].as_array().unwrap().len(), 1, "{answer}");
    wait_for(&forge, "pending status", |r| {
        status_of(r, &slower, "pending")
    });
    let (_, failure) = wait_for(&forge, "failure status", |r| {
        status_of(r, &slower, "failure")
    });
    assert_eq!(
        failure.header("authorization"),
        Some("Bearer forge-token-123")
    );
    let link = failure.json()["target_url"].as_str().unwrap().to_owned();
    assert!(link.contains("/repos/app/comparisons/"), "{link}");
    let (comment_id, comment) = wait_for(&forge, "a comment", |r| {
        r.method == "POST" && r.path == "/repos/acme/app/issues/7/comments"
    });
    let text = comment.json()["body"].as_str().unwrap().to_owned();
    assert!(text.contains("1 regressed"), "{text}");
    assert!(text.contains("| loop | time |"), "{text}");
    assert!(text.contains("interleaved"), "{text}");
    assert!(text.contains(&link), "{text}");
    let change: f64 = (text.split("| loop | time |").nth(1).unwrap().split('|'))
        .nth(2)
        .unwrap()
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .unwrap();
    assert!(
        (10.0..60.0).contains(&change),
        "{change} % for 30 % more steps"
    );

    // A push to the pull request that undoes the slowdown.
    git(repo.path(), &["checkout", "--quiet", "one-pass"]);
    let fixed = repo.commit(&[("work.txt", "300000\n")], "back to one pass");
    git(repo.path(), &["checkout", "--quiet", "main"]);
    let (status, answer) = pull_request(&server, "pr-2", "synchronize", &fixed, 1);
    assert_eq!(status, 202, "{answer}");
    wait_for(&forge, "success status", |r| {
        status_of(r, &fixed, "success")
    });
    let edit_path = format!("/repos/acme/app/issues/comments/{comment_id}");
    let (_, edit) = wait_for(&forge, "the comment edited", |r| {
        r.method == "PATCH" && r.path == edit_path
    });
    let text = edit.json()["body"].as_str().unwrap().to_owned();
    assert!(text.contains("0 regressed"), "{text}");
    let comments = (forge.received().iter())
        .filter(|r| r.method == "POST" && r.path.ends_with("/comments"))
        .count();
    assert_eq!(comments, 1, "one comment per pull request");

    // The same delivery again is a duplicate: nothing more is queued.
    let (status, answer) = pull_request(&server, "pr-2", "synchronize", &fixed, 1);
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("duplicate"))
    );

    // Neither head entered the tracked branch's history.
    let series = server.get_json("/api/v1/repos/app/series?benchmark=loop&metric=time");
    assert!(series.as_array().unwrap().is_empty(), "{series:#}");
    let page = server.get("/repos/app").1;
    assert!(page.contains("#7 Parse in one pass"), "{page}");
}

#[test]
fn a_fork_runs_nothing_unless_its_author_is_allowed_and_closing_cancels_the_waiting_job() {
    let server = KymoServer::start(&["--no-worker"]);
    let forge = Listener::answering(&[201]);
    let (repo, _) = tracked(&server, &forge);
    // A fork's head is on no branch of the repository, made after kymo cloned it: only the
    // ref GitHub keeps for the pull request holds it.
    let slower = branch(
        &repo,
        "fork-head",
        &[("work.txt", "390000\n"), ("FORK", "x\n")],
    );
    git(repo.path(), &["update-ref", "refs/pull/7/head", &slower]);
    git(repo.path(), &["branch", "-D", "fork-head"]);

    let (status, answer) = pull_request(&server, "fork-1", "opened", &slower, 99);
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("ignored")),
        "{answer}"
    );
    let reason = answer["detail"].as_str().unwrap();
    assert!(
        reason.contains("fork") && reason.contains("--fork-authors"),
        "{reason}"
    );
    assert!(
        server
            .get_json("/api/v1/jobs")
            .as_array()
            .unwrap()
            .is_empty()
    );
    let log = server.get_json("/api/v1/webhooks/deliveries");
    assert_eq!(log[0]["outcome"], "ignored");
    assert!(log[0]["detail"].as_str().unwrap().contains("fork"));

    // A bad setting is refused whole.
    let refused = server.kymo(&[
        "repo",
        "set",
        "app",
        "--fork-authors",
        "ada;rm",
        "--pull-comments",
        "changes",
    ]);
    assert!(!refused.status.success());
    let shown = assert_ok(&server.kymo(&["repo", "set", "app", "--fork-authors", "Ada"]));
    assert!(shown.contains("forks run for: Ada"), "{shown}");
    assert!(shown.contains("comments: always"), "{shown}");

    let (status, answer) = pull_request(&server, "fork-2", "reopened", &slower, 99);
    assert_eq!(status, 202, "{answer}");
    let job = answer["jobs"][0].as_i64().unwrap();
    assert_eq!(
        server.get_json(&format!("/api/v1/jobs/{job}"))["reason"],
        "pull"
    );
    let listed = server.get_json("/api/v1/repos/app/comparisons");
    assert_eq!(listed[0]["head"], slower.as_str(), "{listed:#}");

    let (status, answer) = pull_request(&server, "fork-3", "closed", &slower, 99);
    assert_eq!(status, 202, "{answer}");
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .contains("1 waiting job(s) cancelled"),
        "{answer}"
    );
    assert_eq!(
        server.get_json(&format!("/api/v1/jobs/{job}"))["state"],
        "cancelled"
    );
}

/// A GitLab `Merge Request Hook` delivery for merge request 5 from project `source` (the
/// tracked project is 1), caused by `user` (id, login), written by the user numbered
/// `author_id`.
fn merge_request(
    server: &KymoServer,
    delivery: &str,
    action: &str,
    head: &str,
    (source, user, author_id): (i64, (i64, &str), i64),
) -> (u16, Value) {
    let body = serde_json::to_vec(&json!({
        "object_kind": "merge_request",
        "user": { "id": user.0, "username": user.1, "name": user.1 },
        "project": { "id": 1, "path_with_namespace": "acme/app" },
        "object_attributes": {
            "iid": 5, "title": "Faster parse", "action": action, "author_id": author_id,
            "source_project_id": source, "target_project_id": 1,
            "last_commit": { "id": head },
        },
    }))
    .unwrap();
    deliver(
        server,
        "gitlab?repo=app",
        &[
            ("x-gitlab-event", "Merge Request Hook"),
            ("x-gitlab-event-uuid", delivery),
            ("x-gitlab-token", SECRET),
        ],
        &body,
    )
}

/// GitLab names who caused an event, not who wrote the merge request: a fork's request by
/// someone not allowed stays refused when an allowed user reopens it.
#[test]
fn a_gitlab_fork_request_reopened_by_an_allowed_user_still_runs_nothing() {
    let server = KymoServer::start(&["--no-worker"]);
    let forge = Listener::answering(&[201]);
    let (repo, _) = tracked(&server, &forge);
    let fork_head = branch(&repo, "mallory-head", &[("FORK", "x\n")]);
    git(
        repo.path(),
        &["update-ref", "refs/merge-requests/5/head", &fork_head],
    );
    git(repo.path(), &["branch", "-D", "mallory-head"]);
    assert_ok(&server.kymo(&["repo", "set", "app", "--fork-authors", "ada"]));
    const ADA: (i64, &str) = (7, "ada");
    const MALLORY: i64 = 66;

    let (status, answer) = merge_request(&server, "mr-1", "reopen", &fork_head, (2, ADA, MALLORY));
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("ignored")),
        "{answer}"
    );
    let reason = answer["detail"].as_str().unwrap();
    assert!(
        reason.contains("fork") && reason.contains("GitLab user #66"),
        "{reason}"
    );
    let jobs = server.get_json("/api/v1/jobs");
    assert!(jobs.as_array().unwrap().is_empty(), "{jobs:#}");

    // Ada's own request from a fork runs.
    let (status, answer) = merge_request(&server, "mr-2", "open", &fork_head, (2, ADA, ADA.0));
    assert_eq!(status, 202, "{answer}");
    let listed = server.get_json("/api/v1/repos/app/comparisons");
    assert_eq!(listed[0]["head"], fork_head.as_str(), "{listed:#}");
}
