//! Responses kept for anonymous readers: served again while the database's data version stays,
//! recomputed after any change, never for a request that carries a session or a token.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use kymo_core::db::{Db, RepositorySettings};
use kymo_server::cache::{CACHE_HEADER, MAX_AGE};
use serde_json::json;
use tower::ServiceExt;

use crate::api::TestApp;
use crate::eco::{Raw, raw, send_with, stepped};

fn served(response: &Raw) -> Option<&str> {
    response
        .headers
        .get(CACHE_HEADER)
        .map(|v| v.to_str().unwrap())
}

/// The data version once the writer's release has moved it too.
async fn settled_version(db: &Db) -> u64 {
    let mut last = db.data_version();
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = db.data_version();
        if now == last {
            return now;
        }
        last = now;
    }
}

#[tokio::test]
async fn the_data_version_moves_when_a_write_changed_a_row_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("kymo.db")).await.unwrap();
    let start = settled_version(&db).await;
    db.repositories().await.unwrap();
    assert_eq!(settled_version(&db).await, start, "a read");

    let add = || {
        db.create_repository(
            "r",
            "file:///nowhere",
            "main",
            RepositorySettings::default(),
            0,
        )
    };
    add().await.unwrap();
    let added = db.data_version();
    assert!(added > start, "the version moved before the call returned");
    let added = settled_version(&db).await;
    assert!(
        add().await.is_err(),
        "a second repository of that name is refused"
    );
    assert_eq!(
        settled_version(&db).await,
        added,
        "a refused write changed nothing"
    );
}

#[tokio::test]
async fn a_page_is_served_again_until_the_database_changes_or_it_grows_old() {
    let app = TestApp::new().await;
    stepped(&app).await;
    settled_version(&app.state.db).await;
    let (_, found) = app.get("/api/v1/repos/r/regressions").await;
    let id = found[0]["id"].as_i64().expect("the step is a regression");
    let page = format!("/repos/r/regressions/{id}");

    let first = raw(&app, &page).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(served(&first), Some("miss"));
    let second = raw(&app, &page).await;
    assert_eq!(served(&second), Some("hit"));
    assert_eq!(second.body, first.body);

    let (status, _) = app
        .post(
            &format!("/api/v1/repos/r/regressions/{id}/triage"),
            &json!({ "state": "acknowledged", "by": "ada", "note": "seen by ada" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let after = raw(&app, &page).await;
    // The version moves once more when the writer goes back to its pool, a moment after the
    // triage answered: the page computed in that moment is computed once more after it.
    settled_version(&app.state.db).await;
    assert_eq!(
        served(&after),
        Some("miss"),
        "the triage changed the database"
    );
    assert!(after.body.contains("seen by ada"));
    assert!(!first.body.contains("seen by ada"));

    assert!(matches!(
        served(&raw(&app, &page).await),
        Some("hit" | "miss")
    ));
    assert_eq!(served(&raw(&app, &page).await), Some("hit"));
    app.clock.advance(MAX_AGE);
    assert_eq!(served(&raw(&app, &page).await), Some("miss"), "too old");
}

#[tokio::test]
async fn personal_and_failed_requests_are_never_served_from_the_cache() {
    let app = TestApp::new().await;
    stepped(&app).await;
    settled_version(&app.state.db).await;
    let page = "/repos/r";
    assert_eq!(served(&raw(&app, page).await), Some("miss"));
    assert_eq!(served(&raw(&app, page).await), Some("hit"));

    let (cookie, _) = app.login().await;
    let token = format!("Bearer {}", app.admin);
    for (name, value) in [
        ("cookie", cookie.as_str()),
        ("authorization", token.as_str()),
    ] {
        let response = send_with(&app, Method::GET, page, &[(name, value)]).await;
        assert_eq!(response.status, StatusCode::OK);
        assert_eq!(served(&response), None, "{name}");
    }

    for _ in 0..2 {
        let missing = raw(&app, "/repos/nope").await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert_eq!(served(&missing), None, "a 404 is not kept");
    }
}

#[tokio::test]
async fn cookies_that_are_not_a_live_session_do_not_bypass_the_cache() {
    let app = TestApp::new().await;
    stepped(&app).await;
    settled_version(&app.state.db).await;
    let page = "/repos/r";
    assert_eq!(served(&raw(&app, page).await), Some("miss"));
    for cookie in [
        "a=b",
        "kymo_session=forged",
        "kymo_session=",
        "theme=dark; kymo_session=0000; x",
        &format!("kymo_session={}", "f".repeat(5000)),
    ] {
        let response = send_with(&app, Method::GET, page, &[("cookie", cookie)]).await;
        assert_eq!(response.status, StatusCode::OK, "{cookie}");
        assert_eq!(served(&response), Some("hit"), "{cookie}");
    }
    // A session that was live and ended is anonymous again.
    let (cookie, _) = app.login().await;
    let live = send_with(&app, Method::GET, page, &[("cookie", cookie.as_str())]).await;
    assert_eq!(served(&live), None, "a live session's page is its own");
    let secret = cookie.split_once('=').unwrap().1;
    let session = app.state.db.session(secret, 1_800_000_000).await.unwrap();
    app.state.db.end_session(session.unwrap().id).await.unwrap();
    let ended = send_with(&app, Method::GET, page, &[("cookie", cookie.as_str())]).await;
    assert!(matches!(served(&ended), Some("hit" | "miss" | "stale")));
}

#[tokio::test]
async fn readers_that_take_gzip_get_it_kept_compressed_and_others_get_plain_text() {
    let app = TestApp::new().await;
    stepped(&app).await;
    settled_version(&app.state.db).await;
    let page = "/repos/r";
    let gzip = [("accept-encoding", "gzip, deflate, br, zstd")];
    let encoding = |response: &Raw| {
        (response.headers.get(header::CONTENT_ENCODING)).map(|v| v.to_str().unwrap().to_owned())
    };

    let first = send_with(&app, Method::GET, page, &gzip).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(encoding(&first).as_deref(), Some("gzip"));
    assert!(
        first.headers[header::VARY]
            .to_str()
            .unwrap()
            .contains("accept-encoding")
    );
    assert_eq!(served(&first), Some("miss"));
    let again = send_with(&app, Method::GET, page, &gzip).await;
    assert_eq!(served(&again), Some("hit"));
    assert_eq!(encoding(&again).as_deref(), Some("gzip"));
    assert_eq!(again.body, first.body);

    let plain = raw(&app, page).await;
    assert_eq!(
        served(&plain),
        Some("miss"),
        "kept apart from the gzipped answer"
    );
    assert_eq!(encoding(&plain), None);
    assert_eq!(plain.body, first.body);
    assert!(plain.body.contains("<html"));
    assert!(
        first.sent * 3 < plain.sent,
        "{} of {} bytes",
        first.sent,
        plain.sent
    );

    let (cookie, _) = app.login().await;
    let personal = send_with(&app, Method::GET, page, &[gzip[0], ("cookie", &cookie)]).await;
    assert_eq!(
        encoding(&personal).as_deref(),
        Some("gzip"),
        "computed, and compressed"
    );
    assert_eq!(served(&personal), None);
}

#[tokio::test]
async fn many_readers_of_a_page_not_yet_kept_compute_it_once() {
    let app = TestApp::new().await;
    let (_repo, shas) = stepped(&app).await;
    settled_version(&app.state.db).await;
    let page = format!("/repos/r/compare/{}...{}", shas[15], shas[16]);
    let readers = (0..16).map(|_| {
        let state = app.state();
        let page = page.clone();
        tokio::spawn(async move {
            let request = Request::builder()
                .method(Method::GET)
                .uri(page)
                .body(Body::empty())
                .unwrap();
            let response = kymo_server::app(state).oneshot(request).await.unwrap();
            let how = response.headers()[CACHE_HEADER]
                .to_str()
                .unwrap()
                .to_owned();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (how, body)
        })
    });
    let mut answers = Vec::new();
    for reader in readers.collect::<Vec<_>>() {
        answers.push(reader.await.unwrap());
    }
    let misses = answers.iter().filter(|(how, _)| how == "miss").count();
    assert_eq!(
        misses,
        1,
        "{:?}",
        answers.iter().map(|a| &a.0).collect::<Vec<_>>()
    );
    assert!(answers.iter().all(|(_, body)| *body == answers[0].1));
}

/// How often the data version moves for the upload of the last of 20 commits, whose series
/// all stepped up by 30 % at the 13th (the analysis of each upload updates their records).
async fn version_moves_for_a_step_in(series: usize) -> (u64, usize) {
    let app = TestApp::new().await;
    let (repo, first) = app.with_repo().await;
    let upload = |sha: &str, level: f64| {
        let benchmarks: Vec<_> = (0..series)
            .map(|b| {
                let samples: Vec<f64> = (0..5).map(|i| level + b as f64 + i as f64 * 0.1).collect();
                json!({ "name": format!("b{b}"), "metrics": [{ "name": "time", "unit": "ns",
                    "direction": "lower", "value": samples[2], "samples": samples }] })
            })
            .collect();
        json!({ "commit": sha, "specs": crate::api::specs(),
                "suites": [{ "suite": "s", "results": { "benchmarks": benchmarks } }] })
    };
    let mut sha = first;
    let mut moves = 0;
    for i in 0..20 {
        let level = if i < 12 { 100.0 } else { 130.0 } + (i % 3) as f64 * 0.3;
        let before = settled_version(&app.state.db).await;
        let (status, _) = app
            .post("/api/v1/repos/r/results", &upload(&sha, level))
            .await;
        assert_eq!(status, StatusCode::CREATED);
        moves = settled_version(&app.state.db).await - before;
        sha = repo.commit(&[("f", &i.to_string())], "next");
    }
    let (_, found) = app.get("/api/v1/repos/r/regressions").await;
    (moves, found.as_array().unwrap().len())
}

#[tokio::test]
async fn an_analysis_moves_the_version_as_often_for_200_series_as_for_20() {
    let (few, few_found) = version_moves_for_a_step_in(20).await;
    let (many, many_found) = version_moves_for_a_step_in(200).await;
    assert_eq!(
        (few_found, many_found),
        (20, 200),
        "each series has its regression"
    );
    // The commit, the run, the analysis' records, its noise windows: a transaction each, not
    // one per series.
    assert_eq!(
        few, many,
        "20 series moved it {few} times, 200 series {many} times"
    );
}
