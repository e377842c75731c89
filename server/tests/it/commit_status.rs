//! Commit statuses end to end: a commit's jobs move through the real worker protocol, the
//! seam queues each change of state, and the delivery tick posts it to local listeners
//! standing in for GitHub's and Gitea's statuses APIs. Then the CLI, against a real server.

use axum::body::Body;
use axum::http::StatusCode;
use kymo_server::alerts::{commit_status_changed, deliver_once};
use serde_json::{Value, json};

use crate::alerts::{delivery_log, repository_with_a_regression, upload};
use crate::api::{TestApp, specs};
use crate::listener::Listener;
use crate::support::{KymoServer, TestRepo, assert_ok};

/// A worker speaking the real protocol to the test app.
pub struct TestWorker<'a> {
    app: &'a TestApp,
    token: String,
}

impl<'a> TestWorker<'a> {
    pub async fn new(app: &'a TestApp) -> Self {
        let token = app
            .state
            .db
            .create_token("w", kymo_core::db::TokenScope::Worker, 0)
            .await
            .unwrap();
        Self { app, token }
    }

    fn environment() -> Value {
        json!({ "kernel": "6.1", "toolchain": "rustc", "governor": "performance", "hostname": "h" })
    }

    /// Claims the next job; returns it.
    pub async fn claim(&self) -> Value {
        let claim = json!({ "specs": specs(), "environment": Self::environment() });
        let (status, claimed) = self
            .app
            .request(
                "POST",
                "/api/v1/worker/claim",
                Body::from(claim.to_string()),
                Some(&self.token),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{claimed}");
        claimed["job"].clone()
    }

    /// Completes `job` with `outcome`.
    pub async fn complete(&self, job: &Value, outcome: Value) {
        let done = json!({ "lease_id": job["lease_id"], "environment": Self::environment(),
                           "outcome": outcome });
        let path = format!("/api/v1/worker/jobs/{}/complete", job["id"]);
        let (status, answer) = self
            .app
            .request(
                "POST",
                &path,
                Body::from(done.to_string()),
                Some(&self.token),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
}

/// The id of commit `sha` of repository `r`.
async fn commit_id(app: &TestApp, sha: &str) -> i64 {
    let (_, commit) = app.get(&format!("/api/v1/repos/r/commits/{sha}")).await;
    commit["commit"]["id"].as_i64().unwrap()
}

#[tokio::test]
async fn commit_statuses_follow_the_jobs_to_github_then_gitea() {
    let app = TestApp::new().await;
    let (_repo, shas, _) = repository_with_a_regression(&app).await;
    let github = Listener::answering(&[201]);
    let gitea = Listener::answering(&[201]);
    let set = |body: Value| {
        let app = &app;
        async move {
            app.request(
                "PUT",
                "/api/v1/repos/r/commit-status",
                Body::from(body.to_string()),
                Some(&app.admin),
            )
            .await
        }
    };
    let token = "ghp_secret0123456789";
    for bad in [
        json!({ "kind": "bitbucket", "slug": "ada/kymo", "token": token }),
        json!({ "kind": "gitlab", "slug": "ada/../kymo", "token": token }),
        json!({ "kind": "github", "slug": "ada", "token": token }),
        json!({ "kind": "github", "slug": "ada/../x", "token": token }),
        json!({ "kind": "github", "slug": "ada/kymo", "token": "two words" }),
        json!({ "kind": "github", "slug": "ada/kymo", "token": "" }),
        json!({ "kind": "github", "api_url": "file:///etc", "slug": "ada/kymo", "token": token }),
        json!({ "kind": "gitea", "slug": "ada/kymo", "token": token }),
        json!({ "kind": "github", "slug": "ada/kymo" }),
    ] {
        let (status, answer) = set(bad.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {answer}");
    }
    assert_eq!(
        app.get("/api/v1/repos/r/commit-status").await.0,
        StatusCode::NOT_FOUND
    );
    let (status, shown) =
        set(json!({ "kind": "github", "api_url": github.url, "slug": "ada/kymo", "token": token }))
            .await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["token_hint"], "…6789");
    assert!(
        !shown.to_string().contains(token),
        "the token is never shown back"
    );

    // Queued: pending. Asking again with nothing changed posts nothing more.
    let sha = &shas[3];
    let commit = commit_id(&app, sha).await;
    let (status, _) = app
        .post("/api/v1/repos/r/runs", &json!({ "commit": sha }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    commit_status_changed(&app.state, commit).await.unwrap();
    commit_status_changed(&app.state, commit).await.unwrap();
    assert_eq!(deliver_once(&app.state).await.unwrap(), 1);
    let posted = &github.received()[0];
    assert_eq!(posted.method, "POST");
    assert_eq!(posted.path, format!("/repos/ada/kymo/statuses/{sha}"));
    assert_eq!(
        posted.header("authorization"),
        Some(format!("Bearer {token}").as_str())
    );
    let body = posted.json();
    assert_eq!(body["state"], "pending");
    assert_eq!(body["context"], "kymo");
    assert_eq!(
        body["target_url"],
        format!("https://kymo.example/repos/r/commits/{sha}")
    );

    // Claimed, then finished: success.
    let worker = TestWorker::new(&app).await;
    let job = worker.claim().await;
    commit_status_changed(&app.state, commit).await.unwrap();
    assert_eq!(
        deliver_once(&app.state).await.unwrap(),
        0,
        "running is still pending"
    );
    let suites = upload(sha, 3)["suites"].clone();
    worker
        .complete(
            &job,
            json!({ "status": "succeeded", "suites": suites, "log": "" }),
        )
        .await;
    commit_status_changed(&app.state, commit).await.unwrap();
    assert_eq!(deliver_once(&app.state).await.unwrap(), 1);
    assert_eq!(github.received()[1].json()["state"], "success");

    // Queued and failed again before the pending state was sent: only the newest is posted.
    app.post("/api/v1/repos/r/runs", &json!({ "commit": sha }))
        .await;
    commit_status_changed(&app.state, commit).await.unwrap();
    let job = worker.claim().await;
    worker
        .complete(
            &job,
            json!({ "status": "failed", "error": "boom", "log_tail": "" }),
        )
        .await;
    commit_status_changed(&app.state, commit).await.unwrap();
    assert_eq!(deliver_once(&app.state).await.unwrap(), 1);
    assert_eq!(github.received().len(), 3);
    assert_eq!(github.received()[2].json()["state"], "error");

    // Moved to Gitea: the regression's culprit commit fails there, with Gitea's token header.
    let gitea_api = format!("{}/api/v1", gitea.url);
    let (status, _) =
        set(json!({ "kind": "gitea", "api_url": gitea_api, "slug": "ada/kymo", "token": token }))
            .await;
    assert_eq!(status, StatusCode::OK);
    let culprit = commit_id(&app, &shas[16]).await;
    commit_status_changed(&app.state, culprit).await.unwrap();
    assert_eq!(deliver_once(&app.state).await.unwrap(), 1);
    let posted = &gitea.received()[0];
    assert_eq!(
        posted.path,
        format!("/api/v1/repos/ada/kymo/statuses/{}", shas[16])
    );
    assert_eq!(
        posted.header("authorization"),
        Some(format!("token {token}").as_str())
    );
    assert_eq!(posted.json()["state"], "failure");
    assert_eq!(posted.json()["description"], "1 regression found");

    let log = delivery_log(&app).await;
    let states: Vec<(&str, &str)> = log["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["commit_state"].as_str().unwrap(),
                p["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("failure", "delivered"),
            ("error", "delivered"),
            ("pending", "cancelled"),
            ("success", "delivered"),
            ("pending", "delivered")
        ]
    );
    let (status, _) = app
        .request(
            "DELETE",
            "/api/v1/repos/r/commit-status",
            Body::empty(),
            Some(&app.admin),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[test]
fn the_cli_manages_channels_and_status_targets_on_a_real_server() {
    let server = KymoServer::start(&["--no-worker", "--public-url", "https://kymo.example/"]);
    let repo = TestRepo::new();
    repo.commit(&[("file", "0")], "first");
    assert_ok(&server.kymo(&["repo", "add", "r", repo.path().to_str().unwrap()]));

    let hook = "https://hooks.example/services/T0/B0/abcdefghijkl";
    let added = assert_ok(&server.kymo(&["alert", "add", "r", "--url", hook, "--kind", "slack"]));
    assert!(added.contains("added slack channel 1"), "{added}");
    let refused = server.kymo(&["alert", "add", "r", "--url", "ftp://x", "--kind", "json"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("http"),
        "a clear reason"
    );
    let refused = server.kymo(&["alert", "add", "r", "--url", hook, "--kind", "teams"]);
    assert!(!refused.status.success());

    let listed = assert_ok(&server.kymo(&["alert", "list", "r", "--json"]));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["kind"], "slack");
    assert_eq!(listed[0]["url"], "https://hooks.example/…ijkl");
    let table = assert_ok(&server.kymo(&["alert", "list", "r"]));
    assert!(!table.contains("abcdefgh"), "{table}");

    let token = "ghp_0123456789secret";
    let set = server.kymo(&[
        "status",
        "set",
        "r",
        "--kind",
        "github",
        "--slug",
        "ada/kymo",
        "--forge-token",
        token,
    ]);
    let set = assert_ok(&set);
    assert!(
        set.contains("https://api.github.com") && !set.contains(token),
        "{set}"
    );
    let shown = assert_ok(&server.kymo(&["status", "show", "r"]));
    assert!(shown.contains("ada/kymo") && shown.contains("…cret") && !shown.contains(token));
    let refused = server.kymo(&[
        "status",
        "set",
        "r",
        "--kind",
        "gitea",
        "--slug",
        "a/b",
        "--forge-token",
        "t",
    ]);
    assert!(!refused.status.success(), "gitea needs its API URL");

    assert_ok(&server.kymo(&["alert", "remove", "r", "1"]));
    assert!(!server.kymo(&["alert", "remove", "r", "1"]).status.success());
    assert_ok(&server.kymo(&["status", "remove", "r"]));
    assert!(!server.kymo(&["status", "show", "r"]).status.success());

    let (status, page) = server.get("/repos/r/alerts");
    assert_eq!(status, 200);
    assert!(page.contains("Alerts for r"));
}

#[test]
fn a_bad_public_url_stops_the_server_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(crate::support::kymo_bin())
        .args([
            "serve",
            "--no-worker",
            "--listen",
            "127.0.0.1:0",
            "--public-url",
            "kymo.example",
        ])
        .arg("--db")
        .arg(dir.path().join("kymo.db"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("public-url"));
}
