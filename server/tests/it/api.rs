//! The JSON API through the real router (`oneshot`) on a real SQLite file: hostile and
//! malformed input gets a clear 4xx and changes nothing.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kymo_core::clock::ManualClock;
use kymo_core::db::{Db, LeaseSettings, TokenScope};
use kymo_server::{AppState, app};
use serde_json::{Value, json};
use tempfile::TempDir;
use tower::ServiceExt;

use crate::support::{TestRepo, bench_script, kymo_toml};

pub struct TestApp {
    pub state: AppState,
    /// The state's clock, to move time forward.
    pub clock: ManualClock,
    /// An admin token for the requests that change things.
    pub admin: String,
    _dir: TempDir,
}

impl TestApp {
    /// Repository `r` tracking `main` of a new git repository of `commits` commits ("change
    /// 0", "change 1", ...), with their shas, oldest first.
    pub async fn tracked_repository(&self, commits: usize) -> (TestRepo, Vec<String>) {
        let repo = TestRepo::new();
        let shas: Vec<String> = (0..commits)
            .map(|i| repo.commit(&[("file", &format!("{i}"))], &format!("change {i}")))
            .collect();
        let body = json!({ "name": "r", "url": repo.path().to_str().unwrap(), "branch": "main" });
        assert_eq!(
            self.post("/api/v1/repos", &body).await.0,
            StatusCode::CREATED
        );
        (repo, shas)
    }

    pub async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("kymo.db")).await.unwrap();
        let clock = ManualClock::at(1_800_000_000);
        let state = AppState::new(
            db,
            Arc::new(clock.clone()),
            LeaseSettings::default(),
            dir.path().join("data"),
            "https://kymo.example".into(),
        );
        let admin = state
            .db
            .create_token("test-admin", TokenScope::Admin, 0)
            .await
            .unwrap();
        Self {
            state,
            clock,
            admin,
            _dir: dir,
        }
    }

    /// The database file, for tests that change it behind the application's back.
    pub fn db_path(&self) -> std::path::PathBuf {
        self._dir.path().join("kymo.db")
    }

    /// Closes the database and opens it again (with all that opening does), as a restart does.
    pub async fn reopen(&mut self) -> Result<(), kymo_core::db::DbError> {
        self.state.db.close().await;
        let db = Db::open(&self.db_path()).await?;
        self.state = AppState::new(
            db,
            Arc::new(self.clock.clone()),
            LeaseSettings::default(),
            self._dir.path().join("data"),
            "https://kymo.example".into(),
        );
        Ok(())
    }

    /// The application state, for tests that drive `app` themselves.
    pub fn state(&self) -> AppState {
        self.state.clone()
    }

    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Body,
        token: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json");
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        let response = app(self.state.clone())
            .oneshot(builder.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }

    pub async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let admin = self.admin.clone();
        self.request("POST", path, Body::from(body.to_string()), Some(&admin))
            .await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.request("GET", path, Body::empty(), None).await
    }

    /// Logs in with the admin token as a browser does; returns the session cookie and the
    /// session's anti-forgery token.
    pub async fn login(&self) -> (String, String) {
        let request = Request::builder()
            .method("POST")
            .uri("/login")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("sec-fetch-site", "same-origin")
            .body(Body::from(format!("token={}&next=/", self.admin)))
            .unwrap();
        let response = app(self.state.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let cookie = response.headers()["set-cookie"].to_str().unwrap();
        let pair = cookie.split(';').next().unwrap().to_owned();
        let secret = pair.split_once('=').unwrap().1;
        let session = self.state.db.session(secret, 1_800_000_000).await.unwrap();
        (pair, session.expect("a live session").csrf)
    }

    /// A page as the browser holding `cookie` gets it.
    pub async fn page_with_cookie(&self, path: &str, cookie: &str) -> String {
        let request = Request::builder()
            .uri(path)
            .header("cookie", cookie)
            .body(Body::empty())
            .unwrap();
        let response = app(self.state.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Posts a form as a logged-in admin's browser does (without JavaScript); returns the
    /// status.
    pub async fn form(&self, path: &str, fields: &str) -> StatusCode {
        let (cookie, csrf) = self.login().await;
        let request = Request::builder()
            .method("POST")
            .uri(path)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", cookie)
            .header("sec-fetch-site", "same-origin")
            .body(Body::from(format!("{fields}&csrf={csrf}")))
            .unwrap();
        app(self.state.clone())
            .oneshot(request)
            .await
            .unwrap()
            .status()
    }

    /// A tracked repository with one commit; returns the repository and the commit's sha.
    pub async fn with_repo(&self) -> (TestRepo, String) {
        let repo = TestRepo::new();
        let sha = repo.commit(
            &[
                ("kymo.toml", &kymo_toml("sh bench.sh", "10s", 1)),
                ("bench.sh", &bench_script(1.0)),
            ],
            "first",
        );
        let body = json!({ "name": "r", "url": repo.path().to_str().unwrap(), "branch": "main" });
        let (status, answer) = self.post("/api/v1/repos", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        (repo, sha)
    }
}

pub fn specs() -> Value {
    json!({ "cpu_model": "Test CPU", "logical_cores": 4, "physical_cores": 2, "memory_gib": 8,
            "arch": "x86_64", "virtualization": "none" })
}

fn upload(sha: &str, value: Value) -> Value {
    json!({
        "commit": sha,
        "specs": specs(),
        "suites": [{ "suite": "s", "results": { "benchmarks": [
            { "name": "b", "metrics": [{ "name": "time", "unit": "ns", "direction": "lower", "value": value }] }
        ]}}]
    })
}

async fn run_count(app: &TestApp, sha: &str) -> usize {
    let (_, commit) = app.get(&format!("/api/v1/repos/r/commits/{sha}")).await;
    commit["runs"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn an_upload_is_stored_under_the_uploaders_fingerprint() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let (status, answer) = app
        .post("/api/v1/repos/r/results", &upload(&sha, json!(12.5)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["measurements"], 1);
    let (_, machines) = app.get("/api/v1/machines").await;
    assert_eq!(machines[0]["fingerprint"], answer["machine"]);
    assert_eq!(machines[0]["cpu_model"], "Test CPU");
    assert_eq!(run_count(&app, &sha).await, 1);

    // A second upload may name that machine instead of sending specs.
    let mut named = upload(&sha, json!(13.0));
    named["machine"] = answer["machine"].clone();
    named.as_object_mut().unwrap().remove("specs");
    let (status, _) = app.post("/api/v1/repos/r/results", &named).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(run_count(&app, &sha).await, 2);

    // That machine runs no worker: a run asked for now waits for any worker, not for it.
    let (status, queued) = app
        .post("/api/v1/repos/r/runs", &json!({ "commit": sha }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    assert_eq!(queued["jobs"].as_array().unwrap().len(), 1);
    let (_, jobs) = app.get("/api/v1/jobs").await;
    assert_eq!(jobs[0]["machine"], Value::Null, "{jobs}");
}

#[tokio::test]
async fn an_upload_of_known_and_new_series_stores_each_measurement_once() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let (status, _) = app
        .post("/api/v1/repos/r/results", &upload(&sha, json!(1.0)))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    // `b`/`time` exists now; `b`/`alloc` and `c`/`time` are new.
    let mut mixed = upload(&sha, json!(2.0));
    let metric = |name: &str, value: f64| json!({ "name": name, "unit": "ns", "direction": "lower", "value": value });
    let benchmarks = mixed["suites"][0]["results"]["benchmarks"]
        .as_array_mut()
        .unwrap();
    benchmarks[0]["metrics"]
        .as_array_mut()
        .unwrap()
        .push(metric("alloc", 3.0));
    benchmarks.push(json!({ "name": "c", "metrics": [metric("time", 4.0)] }));
    let (status, answer) = app.post("/api/v1/repos/r/results", &mixed).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["measurements"], 3);

    let repository = app.state.db.repository("r").await.unwrap();
    let commit = app.state.db.commit(repository.id, &sha).await.unwrap();
    let mut stored: Vec<(String, String, f64)> = (app.state.db)
        .commit_measurements(commit.id, None)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.benchmark, m.metric, m.value))
        .collect();
    stored.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(
        stored,
        [
            ("b".into(), "alloc".into(), 3.0),
            ("b".into(), "time".into(), 2.0),
            ("c".into(), "time".into(), 4.0)
        ]
    );
    let counts = app.state.db.row_counts().await.unwrap();
    assert_eq!(
        (counts.benchmarks, counts.series, counts.measurements),
        (2, 3, 4)
    );
}

#[tokio::test]
async fn malformed_and_hostile_uploads_are_refused_and_store_nothing() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let mut duplicate = upload(&sha, json!(1.0));
    let suite = duplicate["suites"][0].clone();
    duplicate["suites"].as_array_mut().unwrap().push(suite);
    let mut unknown_machine = upload(&sha, json!(1.0));
    unknown_machine["machine"] = json!("0123456789abcdef");
    let mut no_machine = upload(&sha, json!(1.0));
    no_machine.as_object_mut().unwrap().remove("specs");
    let cases: Vec<(&str, Body, StatusCode)> = vec![
        (
            "not json",
            Body::from("{ nope"),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "infinite",
            Body::from(upload(&sha, json!(1)).to_string().replace(":1}", ":1e999}")),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "bad sha",
            Body::from(upload("xyz", json!(1.0)).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "unknown commit",
            Body::from(upload(&"ab".repeat(20), json!(1.0)).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "duplicate series",
            Body::from(duplicate.to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "unknown machine",
            Body::from(unknown_machine.to_string()),
            StatusCode::NOT_FOUND,
        ),
        (
            "no machine",
            Body::from(no_machine.to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "deep nesting",
            Body::from("[".repeat(100_000)),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "oversized",
            Body::from(vec![b' '; 65 * 1024 * 1024]),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            "non-utf8",
            Body::from(vec![0xff, 0xfe, 0x00]),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ];
    for (what, body, expected) in cases {
        let (status, answer) = app
            .request("POST", "/api/v1/repos/r/results", body, Some(&app.admin))
            .await;
        assert_eq!(status, expected, "{what}: {answer}");
        assert!(
            answer["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{what}: {answer}"
        );
    }
    assert_eq!(run_count(&app, &sha).await, 0);
    let (status, _) = app
        .post("/api/v1/repos/missing/results", &upload(&sha, json!(1.0)))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn repositories_with_bad_names_or_unreachable_urls_are_not_added() {
    let app = TestApp::new().await;
    for body in [
        json!({ "name": "../escape", "url": "/tmp", "branch": "main" }),
        json!({ "name": "ok", "url": "/definitely/not/a/repository", "branch": "main" }),
        json!({ "name": "ok", "url": "", "branch": "main" }),
        json!({ "name": "ok", "url": "/tmp", "branch": "-rf" }),
        json!({ "name": "ok", "url": "/tmp", "unknown": true }),
    ] {
        let (status, answer) = app.post("/api/v1/repos", &body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
    }
    let (_, repos) = app.get("/api/v1/repos").await;
    assert_eq!(repos, json!([]));
    let (_repo, _) = app.with_repo().await;
    let (status, _) = app
        .post(
            "/api/v1/repos",
            &json!({ "name": "r", "url": "/tmp", "branch": "main" }),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn the_worker_protocol_needs_a_token_and_a_live_lease() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let claim = json!({ "specs": specs(), "environment": { "kernel": "6.1", "toolchain": "rustc",
                                                            "governor": "performance", "hostname": "h" } });
    let body = || Body::from(claim.to_string());
    let (status, _) = app
        .request("POST", "/api/v1/worker/claim", body(), None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app
        .request("POST", "/api/v1/worker/claim", body(), Some("kymo_forged"))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let upload_token = app
        .state
        .db
        .create_token("u", TokenScope::Upload, 0)
        .await
        .unwrap();
    let (status, _) = app
        .request("POST", "/api/v1/worker/claim", body(), Some(&upload_token))
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "an upload token is not a worker token"
    );

    let token = app
        .state
        .db
        .create_token("w", TokenScope::Worker, 0)
        .await
        .unwrap();
    let (status, empty) = app
        .request("POST", "/api/v1/worker/claim", body(), Some(&token))
        .await;
    assert_eq!((status, empty), (StatusCode::OK, json!({ "job": null })));

    let (status, _) = app
        .post("/api/v1/repos/r/runs", &json!({ "commit": sha }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, claimed) = app
        .request("POST", "/api/v1/worker/claim", body(), Some(&token))
        .await;
    let job = claimed["job"]["id"].as_i64().unwrap();
    assert_eq!(claimed["job"]["commit"], sha.as_str());

    let beat = |lease: &str| Body::from(json!({ "lease_id": lease }).to_string());
    let path = format!("/api/v1/worker/jobs/{job}/heartbeat");
    let (status, _) = app
        .request("POST", &path, beat("stolen"), Some(&token))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let lease = claimed["job"]["lease_id"].as_str().unwrap();
    let (status, _) = app.request("POST", &path, beat(lease), Some(&token)).await;
    assert_eq!(status, StatusCode::OK);

    // The same commit is not queued twice for a machine while its job waits or runs.
    let (_, again) = app
        .post("/api/v1/repos/r/runs", &json!({ "commit": sha }))
        .await;
    assert_eq!(again["jobs"], json!([job]));
}
