//! Issue 20: floods of webhooks for no tracked repository are rate-limited per address, and
//! the API's refusals by axum's own extractors (413, 400) carry the JSON error body.

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::Value;

use crate::api::TestApp;

async fn unknown_repository_delivery(app: &TestApp, n: usize) -> StatusCode {
    let request = axum::http::Request::builder()
        .method("POST")
        .uri("/api/v1/webhooks/github?repo=nope")
        .header("x-github-event", "push")
        .header("x-github-delivery", format!("flood-{n}"))
        .header("content-type", "application/json")
        .body(Body::from("{}"))
        .unwrap();
    let response = tower::ServiceExt::oneshot(kymo_server::app(app.state()), request)
        .await
        .unwrap();
    response.status()
}

#[tokio::test]
async fn a_flood_of_webhooks_for_an_unknown_repository_is_refused_after_ten() {
    let app = TestApp::new().await;
    let mut statuses = Vec::new();
    for n in 0..300 {
        statuses.push(unknown_repository_delivery(&app, n).await);
    }
    assert!(
        statuses[..10].iter().all(|s| *s == StatusCode::NOT_FOUND),
        "{statuses:?}"
    );
    assert!(
        statuses[10..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    let (_, deliveries) = app.get("/api/v1/webhooks/deliveries").await;
    assert_eq!(
        deliveries.as_array().unwrap().len(),
        10,
        "one row per refusal before the lock-out"
    );
}

#[tokio::test]
async fn refusals_of_oversized_bodies_and_malformed_paths_are_json() {
    let app = TestApp::new().await;
    let (_repo, _) = app.with_repo().await;
    let huge = Body::from(vec![b'x'; 3 * 1024 * 1024]);
    let (status, body) = app
        .request("POST", "/api/v1/webhooks/github?repo=r", huge, None)
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );

    let (status, body) = app.get("/api/v1/jobs/not-a-number").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].is_string(), "{body}");

    let huge = Body::from(vec![b' '; 300 * 1024]);
    let (status, body) = app
        .request("POST", "/api/v1/repos", huge, Some(&app.admin.clone()))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(matches!(body, Value::Object(_)), "{body}");
    assert!(body["error"].is_string(), "{body}");
}

fn one_result(sha: &str) -> serde_json::Value {
    serde_json::json!({ "commit": sha, "specs": crate::api::specs(),
        "suites": [{ "suite": "s", "results": { "benchmarks": [
            { "name": "b", "metrics": [{ "name": "time", "unit": "ns", "direction": "lower", "value": 2.0 }] }
        ]}}] })
}

async fn upload_with_key(app: &TestApp, body: &impl ToString, key: &str) -> (StatusCode, Value) {
    let request = axum::http::Request::builder()
        .method("POST")
        .uri("/api/v1/repos/r/results")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {}", app.admin))
        .header("idempotency-key", key)
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = tower::ServiceExt::oneshot(kymo_server::app(app.state()), request)
        .await
        .unwrap();
    let status = response.status();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn an_upload_retried_with_its_idempotency_key_is_stored_once() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let body = one_result(&sha);
    let (status, first) = upload_with_key(&app, &body, "ci-build-41").await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = upload_with_key(&app, &body, "ci-build-41").await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, first, "the retry gets the first attempt's run");
    let (status, other) = upload_with_key(&app, &body, "ci-build-42").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_ne!(other["run"], first["run"]);
    for bad in ["", &"k".repeat(129), "two words", "caf\u{e9}"] {
        let request = axum::http::Request::builder()
            .method("POST")
            .uri("/api/v1/repos/r/results")
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {}", app.admin))
            .header(
                "idempotency-key",
                axum::http::HeaderValue::from_bytes(bad.as_bytes()).unwrap(),
            )
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = tower::ServiceExt::oneshot(kymo_server::app(app.state()), request)
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad:?}"
        );
    }
    let (_, commit) = app.get(&format!("/api/v1/repos/r/commits/{sha}")).await;
    assert_eq!(commit["runs"].as_array().unwrap().len(), 2, "{commit}");
}

/// A key names one upload: the same key with other results is refused, never answered with
/// the first run while the new results are dropped.
#[tokio::test]
async fn a_reused_idempotency_key_with_other_results_is_refused_and_stores_nothing() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let body = one_result(&sha);
    let (status, first) = upload_with_key(&app, &body, "ci-build-7").await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let before = app.state.db.row_counts().await.unwrap();

    let mut changed = body.clone();
    changed["suites"][0]["results"]["benchmarks"][0]["metrics"][0]["value"] = 3.0.into();
    let mut other_environment = body.clone();
    other_environment["environment"] =
        serde_json::json!({ "kernel": "6.1", "toolchain": "", "governor": "", "hostname": "h" });
    for (what, other) in [
        ("a changed value", &changed),
        ("another environment", &other_environment),
    ] {
        let (status, answer) = upload_with_key(&app, other, "ci-build-7").await;
        assert_eq!(status, StatusCode::CONFLICT, "{what}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("ci-build-7") && error.contains("other results"),
            "{what}: {error}"
        );
        assert_eq!(app.state.db.row_counts().await.unwrap(), before, "{what}");
    }
    // The same results, spelled differently (keys in another order, spaces), are a retry.
    let respelled = serde_json::to_string_pretty(&body).unwrap();
    let (status, again) = upload_with_key(&app, &respelled, "ci-build-7").await;
    assert_eq!((status, &again), (StatusCode::OK, &first));
}

#[test]
fn kymo_upload_of_the_same_results_twice_stores_them_once() {
    use crate::support::{KymoServer, TestRepo, assert_ok};
    let repo = TestRepo::new();
    let sha = repo.commit(&[("README", "hello")], "first");
    let server = KymoServer::start(&["--no-worker"]);
    assert_ok(&server.kymo(&["repo", "add", "ci", repo.path().to_str().unwrap()]));
    let results = tempfile::tempdir().unwrap();
    let file = results.path().join("s.json");
    let doc = r#"{"benchmarks":[{"name":"a","metrics":[{"name":"time","unit":"ns","direction":"lower","value":1}]}]}"#;
    std::fs::write(&file, doc).unwrap();
    let upload = || {
        assert_ok(&server.kymo(&[
            "upload",
            "--repo",
            "ci",
            "--commit",
            &sha,
            file.to_str().unwrap(),
        ]))
    };
    let first = upload();
    assert_eq!(upload(), first, "the same run both times");
    std::fs::write(&file, doc.replace("\"value\":1", "\"value\":2")).unwrap();
    assert_ne!(upload(), first, "other results are another run");
    let commit = server.get_json(&format!("/api/v1/repos/ci/commits/{sha}"));
    assert_eq!(commit["runs"].as_array().unwrap().len(), 2, "{commit}");
}

#[tokio::test]
async fn large_uploads_wait_their_turn_and_small_requests_do_not() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let held = app
        .state
        .large_bodies
        .clone()
        .acquire_many_owned(kymo_server::limits::CONCURRENT_LARGE_BODIES as u32)
        .await
        .unwrap();
    let mut large = one_result(&sha).to_string();
    // Whitespace pads the document past the threshold without changing it.
    large.push_str(&" ".repeat(kymo_server::limits::LARGE_BODY_BYTES as usize));
    let send = |text: String| {
        let request = axum::http::Request::builder()
            .method("POST")
            .uri("/api/v1/repos/r/results")
            .header("content-type", "application/json")
            .header("content-length", text.len())
            .header("authorization", format!("Bearer {}", app.admin))
            .body(Body::from(text))
            .unwrap();
        tower::ServiceExt::oneshot(kymo_server::app(app.state()), request)
    };
    let waiting = tokio::spawn(send(large));
    let small = send(one_result(&sha).to_string()).await.unwrap();
    assert_eq!(
        small.status(),
        StatusCode::CREATED,
        "a small upload is not held up"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "the large upload waits while the permits are taken"
    );
    drop(held);
    let large = tokio::time::timeout(std::time::Duration::from_secs(20), waiting)
        .await
        .expect("the large upload goes in once a permit is free")
        .unwrap()
        .unwrap();
    assert_eq!(large.status(), StatusCode::CREATED);
}
