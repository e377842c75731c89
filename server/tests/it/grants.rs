//! Issue 20, authorization: a worker token claims only with the labels an admin granted it,
//! a job's lease answers only to the token it was handed to, `next` after a login stays on
//! this site, and lock-outs neither stop live tokens nor blame a trusted proxy.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use kymo_core::db::TokenScope;
use kymo_server::app;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::api::{TestApp, specs};
use crate::support::{KymoServer, TestRepo, assert_ok, bench_script, kymo_toml};

fn claim(labels: &[&str]) -> Body {
    let environment = json!({ "kernel": "6.1", "toolchain": "rustc", "governor": "performance",
                              "hostname": "h" });
    let claim = json!({ "specs": specs(), "environment": environment, "labels": labels });
    Body::from(claim.to_string())
}

/// The app with repository `r` restricted to machines labelled `secure`, its head queued.
async fn restricted_repo() -> (TestApp, TestRepo, String) {
    let app = TestApp::new().await;
    let repo = TestRepo::new();
    let sha = repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sh bench.sh", "10s", 1)),
            ("bench.sh", &bench_script(1.0)),
        ],
        "first",
    );
    let body = json!({ "name": "r", "url": repo.path().to_str().unwrap(), "branch": "main",
                       "machine_labels": "secure" });
    let (status, answer) = app.post("/api/v1/repos", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let (status, _) = app
        .post("/api/v1/repos/r/runs", &json!({ "commit": sha }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    (app, repo, sha)
}

#[tokio::test]
async fn a_worker_that_declares_a_label_it_was_not_granted_gets_no_restricted_job() {
    let (app, _repo, sha) = restricted_repo().await;
    let rogue = app.state.db.create_token("rogue", TokenScope::Worker, 0);
    let rogue = rogue.await.unwrap();
    let (status, answer) = app
        .request(
            "POST",
            "/api/v1/worker/claim",
            claim(&["secure"]),
            Some(&rogue),
        )
        .await;
    assert_eq!(
        (status, &answer),
        (StatusCode::OK, &json!({ "job": null })),
        "the undeclared label is ignored"
    );
    let (_, machines) = app.get("/api/v1/machines").await;
    assert_eq!(
        machines[0]["labels"], "",
        "the machine carries no ungranted label"
    );

    let granted = app.state.db.create_worker_token("secure-box", "Secure", 0);
    let granted = granted.await.unwrap();
    let (status, answer) = app
        .request(
            "POST",
            "/api/v1/worker/claim",
            claim(&["secure"]),
            Some(&granted),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["job"]["commit"], sha.as_str(), "{answer}");
}

#[tokio::test]
async fn a_granted_worker_token_rejects_malformed_labels() {
    let app = TestApp::new().await;
    for bad in ["has space", "UPPER!", &"x".repeat(40)] {
        let made = app.state.db.create_worker_token("w", bad, 0).await;
        assert!(made.is_err(), "{bad:?} was accepted");
    }
    let token = app
        .state
        .db
        .create_worker_token("w", "a,b", 0)
        .await
        .unwrap();
    let (status, answer) = app
        .request(
            "POST",
            "/api/v1/worker/claim",
            claim(&["no/slash"]),
            Some(&token),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["error"].is_string());
}

#[tokio::test]
async fn only_the_token_a_job_was_leased_to_may_renew_or_complete_it() {
    let (app, _repo, _sha) = restricted_repo().await;
    let holder = app.state.db.create_worker_token("holder", "secure", 0);
    let holder = holder.await.unwrap();
    let other = app.state.db.create_worker_token("other", "secure", 0);
    let other = other.await.unwrap();
    let (_, claimed) = app
        .request(
            "POST",
            "/api/v1/worker/claim",
            claim(&["secure"]),
            Some(&holder),
        )
        .await;
    let job = claimed["job"]["id"].as_i64().expect("a job");
    let lease = claimed["job"]["lease_id"].as_str().unwrap();

    let beat = Body::from(json!({ "lease_id": lease }).to_string());
    let path = format!("/api/v1/worker/jobs/{job}/heartbeat");
    let (status, answer) = app.request("POST", &path, beat, Some(&other)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");

    let environment = json!({ "kernel": "k", "toolchain": "t", "governor": "g", "hostname": "h" });
    let forged = json!({ "lease_id": lease, "environment": environment,
        "outcome": { "status": "succeeded", "suites": [{ "suite": "s", "results": { "benchmarks": [
            { "name": "b", "metrics": [{ "name": "time", "unit": "ns", "direction": "lower", "value": 1.0 }] }
        ]}}], "log": "" } });
    let path = format!("/api/v1/worker/jobs/{job}/complete");
    let (status, answer) = app
        .request("POST", &path, Body::from(forged.to_string()), Some(&other))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    let (_, jobs) = app.get("/api/v1/jobs").await;
    assert_eq!(
        jobs[0]["state"], "running",
        "the forged result changed nothing"
    );

    let beat = Body::from(json!({ "lease_id": lease }).to_string());
    let path = format!("/api/v1/worker/jobs/{job}/heartbeat");
    let (status, _) = app.request("POST", &path, beat, Some(&holder)).await;
    assert_eq!(status, StatusCode::OK);
}

/// Posts the login form with `next` (already form-encoded); returns status and Location.
async fn login_to(test: &TestApp, token: &str, next: &str) -> (StatusCode, String) {
    let request = Request::builder()
        .method("POST")
        .uri("/login")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin")
        .body(Body::from(format!("token={token}&next={next}")))
        .unwrap();
    let response = app(test.state()).oneshot(request).await.unwrap();
    let location = response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (response.status(), location)
}

#[tokio::test]
async fn after_a_login_next_goes_only_to_a_path_of_this_site() {
    let app = TestApp::new().await;
    for (next, expected) in [
        ("/repos/r", "/repos/r"),
        ("%2Fqueue%3Fstate%3Drunning", "/queue?state=running"),
        ("/%09/evil.example/phish", "/"),
        ("/%2509/evil.example/phish", "/"),
        ("/%0a/x", "/"),
        ("/%0d%0aSet-Cookie:%20a=b", "/"),
        ("//evil.example", "/"),
        ("/%5Cevil.example", "/"),
        ("https://evil.example", "/"),
    ] {
        let (status, location) = login_to(&app, &app.admin, next).await;
        assert_eq!(
            (status, location.as_str()),
            (StatusCode::SEE_OTHER, expected),
            "next={next}"
        );
    }
}

fn post_status(url: &str, path: &str, token: &str, forwarded: Option<&str>) -> u16 {
    let mut request = ureq::post(format!("{url}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .header("authorization", format!("Bearer {token}"));
    if let Some(client) = forwarded {
        request = request.header("x-forwarded-for", client);
    }
    request.send_json(json!({})).unwrap().status().as_u16()
}

#[test]
fn bad_tokens_from_localhost_do_not_stop_the_embedded_worker_or_a_live_token() {
    let server = KymoServer::start(&[]);
    for _ in 0..12 {
        post_status(&server.url, "/api/v1/worker/claim", "kymo_guess", None);
    }
    assert_eq!(
        post_status(&server.url, "/api/v1/worker/claim", "kymo_guess", None),
        429,
        "the address is locked out"
    );
    // A live token from the locked address still works: the admin's and the embedded worker's.
    let repo = TestRepo::new();
    repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sh bench.sh", "30s", 1)),
            ("bench.sh", &bench_script(3.0)),
        ],
        "first",
    );
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    assert_ok(&server.kymo(&["run", "app"]));
    let jobs = server.wait_for_jobs(1, Duration::from_secs(60));
    assert_eq!(jobs[0]["state"], "succeeded", "{jobs:#?}");
}

#[test]
fn behind_a_trusted_proxy_lock_outs_count_the_forwarded_client() {
    let server = KymoServer::start(&["--no-worker", "--trusted-proxy", "127.0.0.1"]);
    let path = "/api/v1/repos";
    for _ in 0..12 {
        post_status(&server.url, path, "kymo_guess", Some("203.0.113.7"));
    }
    let guesser = post_status(
        &server.url,
        path,
        "kymo_guess",
        Some("198.51.100.1, 203.0.113.7"),
    );
    assert_eq!(guesser, 429, "the client the proxy names is locked out");
    let neighbour = post_status(&server.url, path, "kymo_guess", Some("203.0.113.8"));
    assert_eq!(
        neighbour, 401,
        "another client behind the same proxy is not"
    );
    // A client cannot pick its address: only the last (proxy-appended) entry counts.
    let spoofed = post_status(
        &server.url,
        path,
        "kymo_guess",
        Some("203.0.113.7, 203.0.113.9"),
    );
    assert_eq!(spoofed, 401);
    let body: Value = ureq::get(format!("{}/api/v1/repos", server.url))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(body, json!([]));
}
