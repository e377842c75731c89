//! The regressions list through the API: by default what is open; every `state` the API
//! documents selects what it says (refuted findings only when asked for); a misspelt filter is
//! refused instead of answering with an empty list.

use axum::http::StatusCode;
use kymo_core::db::ConfirmationDecision;
use serde_json::{Value, json};

use crate::api::{TestApp, specs};
use crate::verdicts::{jittered, repository_r};

/// Benchmarks that step up 20 % at commit 16 (regressions), and one that steps down (an
/// improvement).
const SLOWER: [&str; 5] = ["kept", "seen", "mended", "noise", "refuted"];

fn upload(sha: &str, i: usize) -> Value {
    let step = |up: bool| match (i >= 16, up) {
        (false, _) => 100.0,
        (true, true) => 120.0,
        (true, false) => 80.0,
    };
    let metric = |level: f64| {
        json!([{ "name": "time", "unit": "ns", "direction": "lower", "value": level,
                 "samples": jittered(level, i) }])
    };
    let mut benchmarks: Vec<Value> = SLOWER
        .iter()
        .map(|name| json!({ "name": name, "metrics": metric(step(true)) }))
        .collect();
    benchmarks.push(json!({ "name": "faster", "metrics": metric(step(false)) }));
    json!({ "commit": sha, "specs": specs(), "suites": [{ "suite": "s",
            "results": { "benchmarks": benchmarks } }] })
}

/// The benchmarks a list names, sorted.
fn names(list: &Value) -> Vec<String> {
    let list = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"));
    let mut names: Vec<String> = (list.iter())
        .map(|r| r["benchmark"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

async fn listed(app: &TestApp, query: &str) -> Vec<String> {
    let (status, list) = app
        .get(&format!("/api/v1/repos/r/regressions{query}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{query}: {list}");
    names(&list)
}

#[tokio::test]
async fn the_default_list_is_what_is_open_and_every_state_filter_selects_what_it_says() {
    let (app, _repo, shas) = repository_r(24).await;
    for (i, sha) in shas.iter().enumerate() {
        let (status, answer) = app.post("/api/v1/repos/r/results", &upload(sha, i)).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (_, found) = app.get("/api/v1/repos/r/regressions?state=all").await;
    let id_of = |name: &str| {
        (found.as_array().unwrap().iter())
            .find(|r| r["benchmark"] == name)
            .unwrap_or_else(|| panic!("{name} not found: {found:#}"))["id"]
            .as_i64()
            .unwrap()
    };
    for (name, state) in [
        ("seen", "acknowledged"),
        ("mended", "fixed"),
        ("noise", "false_positive"),
    ] {
        let path = format!("/api/v1/repos/r/regressions/{}/triage", id_of(name));
        let (status, answer) = app
            .post(&path, &json!({ "state": state, "by": "ada" }))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    // Measured again, the step was not there: the confirmation refutes and closes it.
    let refuted = ConfirmationDecision {
        state: "refuted",
        evidence: "interleaved",
        rounds_run: 3,
        change_pct: Some(0.2),
        p_value: Some(0.8),
        note: "not seen again",
    };
    (app.state.db)
        .decide_confirmation(id_of("refuted"), &refuted, 1)
        .await
        .unwrap();

    let open = vec!["faster".to_owned(), "kept".to_owned()];
    assert_eq!(listed(&app, "").await, open, "the default is what is open");
    assert_eq!(listed(&app, "?state=open").await, open);
    assert_eq!(listed(&app, "?state=acknowledged").await, ["seen"]);
    assert_eq!(listed(&app, "?state=fixed").await, ["mended"]);
    assert_eq!(
        listed(&app, "?state=false_positive").await,
        ["noise", "refuted"]
    );
    assert_eq!(
        listed(&app, "?state=closed").await,
        ["mended", "noise", "refuted"]
    );
    assert_eq!(listed(&app, "?state=refuted").await, ["refuted"]);
    assert_eq!(listed(&app, "?state=all").await.len(), 6);
    assert_eq!(listed(&app, "?kind=improvement").await, ["faster"]);
    assert_eq!(listed(&app, "?kind=regression").await, ["kept"]);
    assert_eq!(listed(&app, "?kind=regression&state=all").await.len(), 5);
    assert_eq!(
        listed(&app, "?state=all&benchmark=en&min_change=10").await,
        ["mended", "seen"]
    );
    assert!(listed(&app, "?state=all&min_change=25").await.is_empty());

    // The regressions page keeps listing every state unless one is chosen.
    let (status, page) = app.get("/repos/r/regressions").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.as_str().unwrap().contains("mended"), "{page}");
}

#[tokio::test]
async fn a_bad_filter_is_refused_with_what_it_accepts() {
    let (app, _repo, shas) = repository_r(2).await;
    app.post("/api/v1/repos/r/results", &upload(&shas[0], 0))
        .await;
    for (query, says) in [
        ("?state=opne", "use open, acknowledged"),
        ("?state=", "state \"\""),
        ("?state=OPEN", "use open"),
        ("?kind=slower", "regression or improvement"),
        ("?min_change=-1", "min_change"),
        ("?min_change=NaN", "min_change"),
        ("?min_change=lots", "min_change"),
        ("?benchmark=a%00b", "control"),
        ("?unknown=1", "unknown"),
    ] {
        let (status, answer) = app
            .get(&format!("/api/v1/repos/r/regressions{query}"))
            .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{query}: {answer}"
        );
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{query}: {error}");
    }
    let long = format!("?state={}", "x".repeat(50_000));
    let (status, answer) = app.get(&format!("/api/v1/repos/r/regressions{long}")).await;
    assert!(
        [StatusCode::UNPROCESSABLE_ENTITY, StatusCode::URI_TOO_LONG].contains(&status),
        "{status}"
    );
    assert!(
        answer.to_string().len() < 1_000,
        "the error does not echo it whole"
    );
}
