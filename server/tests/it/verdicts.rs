//! Verdicts end to end: results land, the series is re-analysed, a lasting step becomes one
//! regression record (no duplicates as commits arrive), triage is kept, and compares judge it.

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::api::{TestApp, specs};
use crate::support::TestRepo;

/// Five samples of commit `i` with a little deterministic jitter around `level`.
pub fn jittered(level: f64, i: usize) -> Vec<f64> {
    (0..5)
        .map(|k| level * (1.0 + (((i * 7 + k * 3) % 5) as f64 - 2.0) * 0.001))
        .collect()
}

fn upload(sha: &str, level: f64, i: usize) -> Value {
    let samples = jittered(level, i);
    json!({
        "commit": sha,
        "specs": specs(),
        "suites": [{ "suite": "s", "results": { "benchmarks": [
            { "name": "parse", "metrics": [{ "name": "time", "unit": "ns", "direction": "lower",
                                             "value": level, "samples": samples }] },
            { "name": "steady", "metrics": [{ "name": "time", "unit": "ns", "direction": "lower",
                                              "value": 50.0, "samples": [50.0, 50.1, 49.9, 50.0, 50.05] }] }
        ]}}]
    })
}

/// An app with a repository `r` of `commits` commits; the temporary repository is returned
/// so that it lives as long as the test.
pub async fn repository_r(commits: usize) -> (TestApp, TestRepo, Vec<String>) {
    let app = TestApp::new().await;
    let (repo, shas) = app.tracked_repository(commits).await;
    (app, repo, shas)
}

#[tokio::test]
async fn a_slow_drift_is_one_regression_over_a_range_from_where_it_started() {
    let (app, _repo, shas) = repository_r(70).await;
    // 30 commits at 100, a ramp to 130 over commits 30..=49, then 20 commits at 130, each
    // commit off by up to ±1 % (run-to-run noise, which the change points are measured in).
    let level = |i: usize| {
        let noise = 1.0 + ((i * 37) % 11) as f64 / 500.0 - 0.01;
        noise * (100.0 + 30.0 * ((i as f64 - 29.0) / 20.0).clamp(0.0, 1.0))
    };
    for (i, sha) in shas.iter().enumerate() {
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &upload(sha, level(i), i))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (_, found) = app.get("/api/v1/repos/r/regressions").await;
    let found = found.as_array().unwrap().clone();
    let [drift] = found.as_slice() else {
        panic!("one drift expected: {found:#?}");
    };
    let start = shas
        .iter()
        .position(|s| drift["sha"] == s.as_str())
        .unwrap();
    assert!(
        start.abs_diff(30) <= 2,
        "starts at commit {start}: {drift:#?}"
    );
    assert!(
        drift["span"].as_i64().unwrap().abs_diff(20) <= 4,
        "{drift:#?}"
    );
    assert!(
        (drift["change_pct"].as_f64().unwrap() - 30.0).abs() < 2.0,
        "{drift:#?}"
    );
    let id = drift["id"].as_i64().unwrap();
    let (status, page) = app.get(&format!("/repos/r/regressions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.as_str().unwrap().contains("a drift over"), "{page}");
}

#[tokio::test]
async fn a_lasting_step_is_one_regression_that_compare_and_triage_agree_on() {
    let (app, _repo, shas) = repository_r(28).await;

    let level = |i: usize| if i < 16 { 100.0 } else { 120.0 };
    for (i, sha) in shas.iter().enumerate().take(24) {
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &upload(sha, level(i), i))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (_, found) = app.get("/api/v1/repos/r/regressions").await;
    let found = found.as_array().unwrap().clone();
    assert_eq!(found.len(), 1, "{found:#?}");
    let regression = &found[0];
    assert_eq!(regression["kind"], "regression");
    assert_eq!(regression["benchmark"], "parse");
    assert_eq!(
        regression["sha"],
        shas[16].as_str(),
        "the culprit is the first slow commit"
    );
    assert_eq!(regression["previous_sha"], shas[15].as_str());
    assert!((regression["change_pct"].as_f64().unwrap() - 20.0).abs() < 1.0);
    assert_eq!(regression["span"], 1, "a step, not a drift");
    assert_eq!(regression["state"], "open");

    // More commits at the new level do not duplicate it.
    for (i, sha) in shas.iter().enumerate().skip(24) {
        app.post("/api/v1/repos/r/results", &upload(sha, level(i), i))
            .await;
    }
    let (_, again) = app.get("/api/v1/repos/r/regressions").await;
    assert_eq!(again.as_array().unwrap().len(), 1, "{again:#?}");
    let id = again[0]["id"].as_i64().unwrap();
    assert_eq!(id, regression["id"].as_i64().unwrap());

    // Triage through the API keeps who, when and a note; bad states are refused.
    let path = format!("/api/v1/repos/r/regressions/{id}/triage");
    let (status, _) = app
        .post(&path, &json!({ "state": "ignored", "by": "ada" }))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, triaged) = app
        .post(
            &path,
            &json!({ "state": "acknowledged", "by": "ada", "note": "<b>known</b>" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{triaged}");
    assert_eq!(triaged["state"], "acknowledged");
    assert_eq!(triaged["state_by"], "ada");
    let (_, open) = app.get("/api/v1/repos/r/regressions?state=open").await;
    assert_eq!(open, json!([]));

    // The page shows the evidence and escapes the note; the form triages without JavaScript.
    let (status, page) = app.get(&format!("/repos/r/regressions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    let page = page.as_str().unwrap();
    assert!(
        page.contains("&#60;b&#62;known") || page.contains("&lt;b&gt;known"),
        "note not escaped"
    );
    assert!(page.contains("p-value"));
    let response = app
        .form(
            &format!("/repos/r/regressions/{id}/triage"),
            "state=fixed&by=bob&note=reverted",
        )
        .await;
    assert_eq!(response, StatusCode::SEE_OTHER);
    let (_, fixed) = app.get(&format!("/api/v1/repos/r/regressions/{id}")).await;
    assert_eq!(
        (fixed["state"].as_str(), fixed["state_by"].as_str()),
        (Some("fixed"), Some("bob"))
    );

    // Compare the culprit with its parent: one regressed row, the steady one unchanged.
    let (status, report) = app
        .get(&format!("/api/v1/repos/r/compare?head={}", shas[16]))
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["regressed"], 1, "{report:#}");
    assert_eq!(report["improved"], 0);
    assert_eq!(report["baseline"], "parent");
    let (status, csv) = app
        .get(&format!(
            "/api/v1/repos/r/compare?base={}&head={}&format=csv",
            shas[0], shas[1]
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let csv = csv.as_str().unwrap();
    assert!(csv.starts_with("benchmark,metric,machine"), "{csv}");
    assert_eq!(csv.lines().count(), 3);

    // The compare page, filtered to significant changes, lists only the regression.
    let spec = format!("{}...{}", shas[15], shas[16]);
    let (status, page) = app
        .get(&format!("/repos/r/compare/{spec}?significant=1"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let page = page.as_str().unwrap();
    assert!(page.contains("1 regressed"), "{page}");
    assert_eq!(page.matches("badge regression").count(), 1);

    // A benchmark's sensitivity can be raised: a 20 % change is then below its floor.
    let request = |body: Value| Body::from(body.to_string());
    let (status, _) = app
        .request(
            "PUT",
            "/api/v1/repos/r/sensitivity",
            request(json!({ "overrides": { "alpha": 7.0 } })),
            Some(&app.admin),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "nonsense settings are refused"
    );
    let (status, _) = app
        .request(
            "PUT",
            "/api/v1/repos/r/sensitivity",
            request(json!({ "overrides": { "colour": 1 } })),
            Some(&app.admin),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown keys are refused"
    );
    let rule = json!({ "benchmark": "par", "overrides": { "min_effect_pct": 50.0 } });
    let (status, rules) = app
        .request(
            "PUT",
            "/api/v1/repos/r/sensitivity",
            request(rule),
            Some(&app.admin),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{rules}");
    assert_eq!(rules[0]["benchmark"], "par");
    let (_, after) = app.get("/api/v1/repos/r/regressions").await;
    assert_eq!(after, json!([]), "re-analysed under the new floor");
}

/// Three samples of commit `i` about 1 % apart around `level`; the reported `value` is a
/// harness's own estimate (at the newest commit 3 % above the median), as criterion's is.
fn young_upload(sha: &str, level: f64, i: usize) -> Value {
    let wobble = [0.0, 0.004, -0.003, 0.002, -0.004, 0.001][i % 6];
    let center = level * (1.0 + wobble);
    json!({
        "commit": sha,
        "specs": specs(),
        "suites": [{ "suite": "s", "results": { "benchmarks": [
            { "name": "encode/hex", "metrics": [{ "name": "time", "unit": "ns", "direction": "lower",
                "value": center * if i == 5 { 1.03 } else { 1.0 }, "samples": [center * 0.99, center, center * 1.01] }] }
        ]}}]
    })
}

#[tokio::test]
async fn a_fifty_percent_step_after_five_quiet_commits_is_a_regression_on_both_pages() {
    let (app, _repo, shas) = repository_r(6).await;
    for (i, sha) in shas.iter().enumerate() {
        let level = if i < 5 { 100.0 } else { 150.0 };
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &young_upload(sha, level, i))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (status, report) = app
        .get(&format!("/api/v1/repos/r/compare?head={}", shas[5]))
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["regressed"], 1, "{report:#}");
    assert_eq!(
        (
            report["unchanged"].as_u64(),
            report["inconclusive"].as_u64()
        ),
        (Some(0), Some(0))
    );
    let verdict = &report["rows"][0]["verdict"];
    assert!(
        verdict["note"]
            .as_str()
            .unwrap()
            .starts_with("short history"),
        "{verdict}"
    );
    let change = format!("{:+.1} %", verdict["change_pct"].as_f64().unwrap());

    // The commit page shows the compare page's number (the median of samples, not the
    // harness's estimate), coloured as a regression.
    let page = html(&app, &format!("/repos/r/commits/{}", shas[5])).await;
    assert!(
        page.contains(&format!("num worse\">{change}")),
        "{change} not on {page}"
    );
    let compare_page = html(&app, &format!("/repos/r/compare/{}", shas[5])).await;
    assert!(compare_page.contains(&change), "{compare_page}");
    assert!(
        compare_page.contains("0 unchanged, 0 inconclusive"),
        "{compare_page}"
    );
}

/// The HTML of the page at `path`, which must answer 200.
async fn html(app: &TestApp, path: &str) -> String {
    let (status, page) = app.get(path).await;
    assert_eq!(status, StatusCode::OK, "{path}");
    page.as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_backfilled_step_after_four_commits_is_filed_at_its_commit() {
    // The hex trial's encode times (µs) at load 1.3: 0.3.1, docs, 0.3.2, docs, 0.4.0 (+47 %),
    // docs, 0.4.1, docs, 0.4.3, docs. Backfilled newest first, so 0.4.0 is never the newest
    // commit, and it has four commits before it, one fewer than a change point's segment.
    let levels = [66.4, 66.7, 62.3, 62.7, 92.3, 92.1, 72.2, 71.8, 92.4, 92.1];
    let (app, _repo, shas) = repository_r(levels.len()).await;
    for (i, sha) in shas.iter().enumerate().rev() {
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &upload(sha, levels[i], i))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (_, found) = app.get("/api/v1/repos/r/regressions").await;
    let found = found.as_array().unwrap().clone();
    // 0.4.1 (-22 %) and 0.4.3 (+28 %) moved the time too, two commits after each earlier
    // step, with the same instruction counts; the close-steps rule files them at their own
    // commits. The step here is the first one.
    let Some(step) = found.iter().find(|f| f["sha"] == shas[4].as_str()) else {
        panic!("a regression at 0.4.0 expected: {found:#?}");
    };
    assert!(
        found.iter().all(|f| [&shas[4], &shas[6], &shas[8]]
            .iter()
            .any(|sha| f["sha"] == sha.as_str())),
        "only the three level changes are filed: {found:#?}"
    );
    assert_eq!(step["benchmark"], "parse");
    assert_eq!(step["sha"], shas[4].as_str());
    assert_eq!(step["previous_sha"], shas[3].as_str());
    assert_eq!(step["method"], "first-commits+per-commit-test");
    assert_eq!(step["segment_before"], 4);
    let change = step["change_pct"].as_f64().unwrap();
    assert!((40.0..55.0).contains(&change), "{step:#}");
}

#[tokio::test]
async fn a_step_in_counts_that_repeat_exactly_is_filed_at_its_commit() {
    // base64 0.21.5 to 0.22.1 (docs/trials/base64-counts.md): decode/3072 executed 24,480
    // instructions an iteration in every run before 0.22.0's new decoder and 25,548 after;
    // encode/3072 28,275 throughout. Uploaded oldest first, one value a commit.
    let (app, _repo, shas) = repository_r(12).await;
    for (i, sha) in shas.iter().enumerate() {
        let decode = if i < 6 { 24_480.0 } else { 25_548.0 };
        let counts = |name: &str, value: f64| {
            json!({ "name": name, "metrics": [{ "name": "instructions", "unit": "count",
                                               "direction": "lower", "value": value }] })
        };
        let body = json!({
            "commit": sha,
            "specs": specs(),
            "suites": [{ "suite": "s", "results": { "benchmarks": [
                counts("decode/3072", decode), counts("encode/3072", 28_275.0)
            ]}}]
        });
        let (status, answer) = app.post("/api/v1/repos/r/results", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (_, found) = app.get("/api/v1/repos/r/regressions").await;
    let found = found.as_array().unwrap().clone();
    let [step] = found.as_slice() else {
        panic!("one regression expected: {found:#?}");
    };
    assert_eq!(step["benchmark"], "decode/3072");
    assert_eq!(step["sha"], shas[6].as_str());
    assert_eq!(step["method"], "repeating-values");
    let change = step["change_pct"].as_f64().unwrap();
    assert!((change - 4.3627).abs() < 0.001, "{step:#}");
}
