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
