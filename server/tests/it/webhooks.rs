//! Push webhooks: a real `git push` whose hook posts a signed delivery, and signed, unsigned,
//! forged and replayed deliveries posted directly.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use kymo_core::webhook::sign_hmac_sha256;
use serde_json::{Value, json};

use crate::support::{KymoServer, TestRepo, assert_ok, bench_script, kymo_toml};

pub const SECRET: &str = "s3cret-hook-key";

/// Posts a webhook delivery; returns the status and the JSON body.
pub fn deliver(
    server: &KymoServer,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Value) {
    let mut request = ureq::post(format!("{}/api/v1/webhooks/{path}", server.url))
        .config()
        .http_status_as_error(false)
        .build()
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = match request.send(body) {
        Ok(response) => response,
        // A server that refuses an oversized body before reading it closes the connection
        // while the client is still sending: that is a refusal too.
        Err(ureq::Error::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            return (413, Value::Null);
        }
        Err(other) => panic!("delivery failed: {other}"),
    };
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn github_push(branch: &str, before: &str, after: &str, clone_url: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "ref": format!("refs/heads/{branch}"),
        "before": before,
        "after": after,
        "repository": { "full_name": "acme/app", "clone_url": clone_url },
        "commits": [],
    }))
    .unwrap()
}

pub fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn job_count(server: &KymoServer) -> usize {
    server.get_json("/api/v1/jobs").as_array().unwrap().len()
}

/// A source repository with a suite, cloned bare; the server tracks the bare one.
/// Commits a slower bench.sh to `source` and pushes it to the tracked bare clone; its sha.
fn push_second_commit(source: &TestRepo, bare: &tempfile::TempDir) -> String {
    let head = source.commit(&[("bench.sh", &bench_script(101.0))], "second");
    let bare_path = bare.path().join("app.git");
    git(
        source.path(),
        &["push", "--quiet", bare_path.to_str().unwrap(), "main"],
    );
    head
}

fn tracked_bare(server: &KymoServer, extra: &[&str]) -> (TestRepo, tempfile::TempDir) {
    let source = TestRepo::new();
    source.commit(
        &[
            ("kymo.toml", &kymo_toml("sh bench.sh", "30s", 1)),
            ("bench.sh", &bench_script(100.0)),
        ],
        "first",
    );
    let bare = tempfile::tempdir().unwrap();
    let output = Command::new("git")
        .args(["clone", "--quiet", "--bare"])
        .arg(source.path())
        .arg(bare.path().join("app.git"))
        .output()
        .unwrap();
    assert!(output.status.success());
    let bare_path = bare.path().join("app.git");
    let mut args = vec!["repo", "add", "app", bare_path.to_str().unwrap()];
    args.extend_from_slice(extra);
    assert_ok(&server.kymo(&args));
    (source, bare)
}

#[test]
fn a_real_git_push_fires_the_hook_and_queues_the_new_head_before_the_rest() {
    let server = KymoServer::start(&["--no-worker"]);
    let (source, bare) = tracked_bare(&server, &["--webhook-secret", SECRET]);
    let bare_path = bare.path().join("app.git");
    // The hook a forge would run: a GitHub-style payload, signed with the shared secret.
    let hook = format!(
        r#"#!/bin/sh
while read old new ref; do
  body=$(printf '{{"ref":"%s","before":"%s","after":"%s","repository":{{"full_name":"acme/app"}}}}' "$ref" "$old" "$new")
  sig=$(printf '%s' "$body" | openssl dgst -sha256 -hmac '{SECRET}' | sed 's/^.*= //')
  curl -sS -o /dev/null -w '%{{http_code}}\n' -X POST '{url}/api/v1/webhooks/github?repo=app' \
    -H 'Content-Type: application/json' -H 'X-GitHub-Event: push' \
    -H "X-GitHub-Delivery: push-$new" -H "X-Hub-Signature-256: sha256=$sig" --data-binary "$body"
done
"#,
        url = server.url
    );
    let hook_path = bare_path.join("hooks/post-receive");
    std::fs::write(&hook_path, hook).unwrap();
    std::fs::set_permissions(&hook_path, std::fs::Permissions::from_mode(0o755)).unwrap();

    let mut pushed = Vec::new();
    for i in 0..3 {
        pushed.push(source.commit(&[("bench.sh", &bench_script(100.0 + f64::from(i)))], "more"));
    }
    let output = Command::new("git")
        .arg("-C")
        .arg(source.path())
        .args(["push", "--quiet"])
        .arg(&bare_path)
        .arg("main")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.contains("202"),
        "push: {stderr}"
    );

    let jobs = server.get_json("/api/v1/jobs");
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), 3, "{jobs:#?}");
    let reason_of = |sha: &str| {
        jobs.iter()
            .find(|j| j["sha"] == sha)
            .map(|j| j["reason"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(reason_of(&pushed[2]), "head");
    assert_eq!(reason_of(&pushed[0]), "backfill");
    assert_eq!(reason_of(&pushed[1]), "backfill");

    let deliveries = server.get_json("/api/v1/webhooks/deliveries");
    assert_eq!(deliveries[0]["outcome"], "processed", "{deliveries:#}");
    assert!(
        deliveries[0]["detail"]
            .as_str()
            .unwrap()
            .contains("3 new commit")
    );
    let (status, page) = server.get("/deliveries");
    assert_eq!(status, 200);
    assert!(page.contains(&format!("push-{}", pushed[2])), "{page}");

    // A push of a branch that is not tracked queues nothing.
    git(source.path(), &["checkout", "--quiet", "-b", "feature"]);
    source.commit(&[("bench.sh", &bench_script(5.0))], "feature work");
    git(
        source.path(),
        &["push", "--quiet", bare_path.to_str().unwrap(), "feature"],
    );
    assert_eq!(job_count(&server), 3);
    assert_eq!(
        server.get_json("/api/v1/webhooks/deliveries")[0]["outcome"],
        "ignored"
    );
}

#[test]
fn unsigned_forged_replayed_and_oversized_deliveries_change_nothing() {
    let server = KymoServer::start(&["--no-worker"]);
    let (source, bare) = tracked_bare(&server, &["--webhook-secret", SECRET]);
    let bare_path = bare.path().join("app.git");
    let head = push_second_commit(&source, &bare);
    let body = github_push("main", &"0".repeat(40), &head, bare_path.to_str().unwrap());
    let signed = format!("sha256={}", sign_hmac_sha256(SECRET, &body));
    let forged = format!("sha256={}", sign_hmac_sha256("not-the-secret", &body));

    let push = [("x-github-event", "push"), ("x-github-delivery", "d-1")];
    let (status, answer) = deliver(&server, "github?repo=app", &push, &body);
    assert_eq!(status, 401, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("not signed"));
    fn with<'a>(sig: &'a str, id: &'a str) -> [(&'a str, &'a str); 3] {
        [
            ("x-github-event", "push"),
            ("x-github-delivery", id),
            ("x-hub-signature-256", sig),
        ]
    }
    let (status, _) = deliver(&server, "github?repo=app", &with(&forged, "d-1"), &body);
    assert_eq!(status, 401);
    // A signature over another body does not carry over.
    let (status, _) = deliver(&server, "github?repo=app", &with(&signed, "d-1"), b"{}");
    assert_eq!(status, 401);
    assert_eq!(job_count(&server), 0, "refused deliveries queue nothing");

    // Matched by the payload's clone URL, without ?repo.
    let (status, answer) = deliver(&server, "github", &with(&signed, "d-1"), &body);
    assert_eq!(status, 202, "{answer}");
    assert_eq!(job_count(&server), 1);
    // The same delivery again is acknowledged and changes nothing; so is the same push under
    // another delivery id.
    let (status, answer) = deliver(&server, "github", &with(&signed, "d-1"), &body);
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("duplicate"))
    );
    let (status, _) = deliver(&server, "github", &with(&signed, "d-2"), &body);
    assert_eq!(status, 202);
    assert_eq!(job_count(&server), 1);

    // Unknown repositories, malformed payloads and oversized bodies are refused.
    let (status, _) = deliver(&server, "github?repo=nope", &with(&signed, "d-3"), &body);
    assert_eq!(status, 404);
    let (status, _) = deliver(&server, "bitbucket?repo=app", &with(&signed, "d-3"), &body);
    assert_eq!(status, 404, "an unknown provider");
    let garbage = b"{\"ref\": \"refs/heads/main\", \"after\": 12}";
    let sig = format!("sha256={}", sign_hmac_sha256(SECRET, garbage));
    let (status, answer) = deliver(&server, "github?repo=app", &with(&sig, "d-4"), garbage);
    assert_eq!(status, 422, "{answer}");
    let huge = vec![b' '; 3 * 1024 * 1024];
    let (status, _) = deliver(&server, "github?repo=app", &with(&signed, "d-5"), &huge);
    assert_eq!(status, 413);
    let (status, _) = deliver(&server, "github?repo=app", &[], &body);
    assert_eq!(status, 422, "a delivery without an event header");
    assert_eq!(job_count(&server), 1);

    let outcomes: Vec<String> = server
        .get_json("/api/v1/webhooks/deliveries")
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["outcome"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        outcomes.iter().filter(|o| *o == "rejected").count(),
        5,
        "{outcomes:?}"
    );
}

#[test]
fn gitlab_and_gitea_deliveries_and_pings_are_understood() {
    let server = KymoServer::start(&["--no-worker"]);
    let (source, bare) = tracked_bare(&server, &["--webhook-secret", SECRET]);
    let head = push_second_commit(&source, &bare);

    let ping = br#"{"zen":"Keep it logically awesome.","hook_id":1}"#;
    let sig = sign_hmac_sha256(SECRET, ping);
    let (status, answer) = deliver(
        &server,
        "gitea?repo=app",
        &[
            ("x-gitea-event", "ping"),
            ("x-gitea-delivery", "p-1"),
            ("x-gitea-signature", &sig),
        ],
        ping,
    );
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("processed")),
        "{answer}"
    );

    let gitlab = serde_json::to_vec(&json!({
        "object_kind": "push", "ref": "refs/heads/main", "before": "0".repeat(40), "after": head,
        "project": { "path_with_namespace": "acme/app", "git_http_url": "https://gitlab.example/acme/app.git" },
    }))
    .unwrap();
    let hook = |token: &'static str| {
        [
            ("x-gitlab-event", "Push Hook"),
            ("x-gitlab-event-uuid", "g-1"),
            ("x-gitlab-token", token),
        ]
    };
    let (status, _) = deliver(&server, "gitlab?repo=app", &hook("wrong-token"), &gitlab);
    assert_eq!(status, 401);
    assert_eq!(job_count(&server), 0);
    let (status, answer) = deliver(&server, "gitlab?repo=app", &hook(SECRET), &gitlab);
    assert_eq!(status, 202, "{answer}");
    assert_eq!(job_count(&server), 1);

    // Forgejo's header names work as Gitea's do.
    let forgejo = github_push("main", &head, &head, "");
    let sig = sign_hmac_sha256(SECRET, &forgejo);
    let (status, answer) = deliver(
        &server,
        "gitea?repo=app",
        &[
            ("x-forgejo-event", "push"),
            ("x-forgejo-delivery", "f-1"),
            ("x-forgejo-signature", &sig),
        ],
        &forgejo,
    );
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["detail"], "no new commits on the tracked branch");
}

#[test]
fn a_repository_without_a_secret_refuses_deliveries_and_bad_settings_are_refused() {
    let server = KymoServer::start(&["--no-worker"]);
    let (_source, bare) = tracked_bare(&server, &[]);
    let body = github_push("main", &"0".repeat(40), &"a".repeat(40), "");
    let sig = format!("sha256={}", sign_hmac_sha256(SECRET, &body));
    let (status, answer) = deliver(
        &server,
        "github?repo=app",
        &[
            ("x-github-event", "push"),
            ("x-github-delivery", "x"),
            ("x-hub-signature-256", &sig),
        ],
        &body,
    );
    assert_eq!(status, 401);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("no webhook secret"),
        "{answer}"
    );

    let path = bare.path().join("app.git");
    for bad in [
        vec!["--webhook-secret", "short"],
        vec!["--poll", "1"],
        vec!["--machines", "has space"],
    ] {
        let mut args = vec!["repo", "add", "other", path.to_str().unwrap()];
        args.extend(bad.iter().copied());
        let output = server.kymo(&args);
        assert!(!output.status.success(), "{bad:?} was accepted");
    }
    assert_eq!(
        server.get_json("/api/v1/repos").as_array().unwrap().len(),
        1
    );
}

#[test]
fn a_polled_repository_notices_new_commits_without_a_webhook() {
    let server = KymoServer::start(&["--no-worker"]);
    let (source, bare) = tracked_bare(&server, &["--poll", "10"]);
    let head = push_second_commit(&source, &bare);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    loop {
        let jobs = server.get_json("/api/v1/jobs");
        if jobs
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["sha"] == head.as_str())
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the poll did not queue {head}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

#[tokio::test]
async fn refused_deliveries_are_pruned_to_the_newest_and_accepted_ones_kept() {
    use kymo_core::db::{Db, NewDelivery};
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("kymo.db")).await.unwrap();
    fn delivery<'a>(id: &'a str, outcome: &'a str) -> NewDelivery<'a> {
        NewDelivery {
            provider: "github",
            delivery: id,
            event: "push",
            repository_id: None,
            outcome,
            status: if outcome == "rejected" { 401 } else { 200 },
            detail: "x",
        }
    }
    for i in 0..5 {
        db.record_delivery(&delivery(&format!("ok-{i}"), "ignored"), i)
            .await
            .unwrap();
    }
    for i in 0..30 {
        db.record_delivery(&delivery(&format!("forged-{i}"), "rejected"), 10 + i)
            .await
            .unwrap();
    }
    assert_eq!(db.prune_rejected_deliveries(10).await.unwrap(), 20);
    let kept = db.deliveries(100).await.unwrap();
    let rejected: Vec<&str> = (kept.iter())
        .filter(|d| d.outcome == "rejected")
        .map(|d| d.delivery.as_str())
        .collect();
    assert_eq!(rejected.len(), 10);
    assert!(rejected.contains(&"forged-29") && rejected.contains(&"forged-20"));
    assert!(!rejected.contains(&"forged-19"), "the oldest went first");
    assert_eq!(
        kept.len() - rejected.len(),
        5,
        "accepted deliveries are all kept"
    );
    assert_eq!(db.prune_rejected_deliveries(10).await.unwrap(), 0);
}
