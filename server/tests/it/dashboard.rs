//! The dashboard read at a glance: the trend chart's log scale, and pages whose size stays
//! bounded as benchmarks grow.

use axum::http::StatusCode;
use serde_json::json;

use crate::api::{TestApp, specs};
use crate::eco::{link, raw, stepped};
use crate::support::TestRepo;

#[tokio::test]
async fn the_log_scale_is_a_link_that_every_move_keeps_and_a_bad_scale_is_refused() {
    let app = TestApp::new().await;
    stepped(&app).await;
    let linear = raw(&app, "/repos/r/benchmarks/steady?last=5").await;
    assert!(
        !linear.body.contains("log scale</text>"),
        "linear by default"
    );
    let href = link(&linear.body, "log scale");
    assert_eq!(href, "?last=5&scale=log");
    let log = raw(&app, &format!("/repos/r/benchmarks/steady{href}")).await;
    assert_eq!(log.status, StatusCode::OK);
    assert!(log.body.contains("log scale"), "the axis says log scale");
    assert_eq!(link(&log.body, "linear scale"), "?last=5");
    assert!(
        link(&log.body, "zoom out").ends_with("&scale=log"),
        "moves keep it"
    );
    let image = raw(
        &app,
        "/repos/r/trend.svg?benchmark=steady&metric=rate&scale=log",
    )
    .await;
    assert_eq!(image.status, StatusCode::OK);
    assert!(image.body.contains("log scale"));
    // The page answers as pages do, the image as the API does; both name the bad value.
    for (path, status) in [
        ("/repos/r/benchmarks/steady?scale=cubic", 400),
        (
            "/repos/r/trend.svg?benchmark=steady&metric=rate&scale=LOG%00",
            422,
        ),
    ] {
        let page = raw(&app, path).await;
        assert_eq!(page.status.as_u16(), status, "{path}: {}", page.body);
        assert!(
            page.body.contains("expected `linear` or `log`"),
            "{}",
            page.body
        );
    }
}

/// Two measured commits sharing `n` benchmarks, each 5 % slower at the head.
async fn many_benchmarks(app: &TestApp, n: usize) -> (TestRepo, String, String) {
    let repo = TestRepo::new();
    let base = repo.commit(&[("f", "1")], "base");
    let head = repo.commit(&[("f", "2")], "head");
    let body = json!({ "name": "r", "url": repo.path().to_str().unwrap(), "branch": "main" });
    assert_eq!(
        app.post("/api/v1/repos", &body).await.0,
        StatusCode::CREATED
    );
    for (sha, level) in [(&base, 100.0), (&head, 105.0)] {
        let benchmarks: Vec<_> = (0..n)
            .map(|i| {
                let samples: Vec<f64> = (0..10).map(|k| level + f64::from(k % 3)).collect();
                json!({ "name": format!("b{i:04}"), "metrics": [{ "name": "time", "unit": "ns",
                        "direction": "lower", "value": level, "samples": samples }] })
            })
            .collect();
        let upload = json!({ "commit": sha, "specs": specs(),
            "suites": [{ "suite": "s", "results": { "benchmarks": benchmarks } }] });
        let (status, answer) = app.post("/api/v1/repos/r/results", &upload).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    (repo, base, head)
}

#[tokio::test]
async fn the_compare_page_shows_a_bounded_page_of_rows_and_links_the_rest() {
    let app = TestApp::new().await;
    let (_repo, base, head) = many_benchmarks(&app, 450).await;
    let path = format!("/repos/r/compare/{base}...{head}?sort=benchmark");
    let first = raw(&app, &path).await;
    assert_eq!(first.status, StatusCode::OK);
    let rows = |body: &str| body.matches("<tr>\n").count();
    assert_eq!(rows(&first.body), 200, "one page of rows");
    assert!(
        first.body.contains(" of 450 ·"),
        "the summary counts every row"
    );
    assert!(first.body.contains("Rows 1–200 of 450"));
    assert!(first.body.contains(">b0000<") && !first.body.contains(">b0200<"));
    let next = link(&first.body, "next rows");
    assert_eq!(next, "?sort=benchmark&from=200");
    let second = raw(&app, &format!("/repos/r/compare/{base}...{head}{next}")).await;
    assert!(second.body.contains(">b0200<") && !second.body.contains(">b0000<"));
    let last = raw(
        &app,
        &format!(
            "/repos/r/compare/{base}...{head}{}",
            link(&second.body, "next rows")
        ),
    )
    .await;
    assert_eq!(rows(&last.body), 50);
    assert!(
        !last.body.contains("next rows"),
        "the last page has no next"
    );
    assert_eq!(link(&last.body, "first rows"), "?sort=benchmark");
    // An offset past the end shows no rows and says so, without claiming nothing was measured.
    let beyond = raw(
        &app,
        &format!("/repos/r/compare/{base}...{head}?from=99999"),
    )
    .await;
    assert_eq!(beyond.status, StatusCode::OK);
    assert!(!beyond.body.contains("share no measured series"));
    let bad = raw(&app, &format!("/repos/r/compare/{base}...{head}?from=-1")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}
