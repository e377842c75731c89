//! Disturbed runs (issue 30): a run in which most benchmarks, those of code nobody touched
//! too, moved together by 20–50 % files nothing until its commit is measured again; then only
//! what moved in both runs is filed. On a worker's machine the commit is re-run at once (a
//! real worker runs the commit's suite); results uploaded from elsewhere wait for another
//! upload, marked, unannounced.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::api::{TestApp, specs as upload_specs};
use crate::confirmations::setup;
use crate::continuous::{post, run_until_empty, samples_at, specs};
use crate::support::{TestRepo, kymo_toml};

/// The benchmarks of the suite: `parse` runs the code commit 12 slows by 30 %; the others
/// time code no commit touches (a crate's benchmark files often time its competitors too).
const BENCHMARKS: [&str; 5] = ["parse", "serde_json", "simd_json", "format", "escape"];

/// A commit whose suite reports, for each benchmark, five samples around `level(benchmark)`.
fn suite_files(commit: usize, level: impl Fn(usize) -> f64) -> Vec<(String, String)> {
    let mut script = String::from("printf '{\"benchmarks\":['\n");
    let mut files = vec![("kymo.toml".to_owned(), kymo_toml("sh bench.sh", "30s", 1))];
    for (b, name) in BENCHMARKS.iter().enumerate() {
        let comma = if b + 1 < BENCHMARKS.len() { "," } else { "" };
        script.push_str(&format!(
            "printf '{{\"name\":\"{name}\",\"metrics\":[{{\"name\":\"time\",\"unit\":\"ns\",\
             \"direction\":\"lower\",\"samples\":[%s]}}]}}{comma}' \"$(cat s{b}.txt)\"\n"
        ));
        files.push((format!("s{b}.txt"), samples_at(level(b), commit)));
    }
    script.push_str("printf ']}\\n'\n");
    files.push(("bench.sh".to_owned(), script));
    files
}

/// What the code of commit `i` takes for benchmark `b`: `parse` 30 % slower from commit 12.
fn code_level(i: usize, b: usize) -> f64 {
    let base = 100.0 + 20.0 * b as f64;
    if b == 0 && i >= 12 { base * 1.3 } else { base }
}

/// An upload of one run at `sha`: each benchmark's level times `load(b)`.
fn upload(cpu: Option<&str>, sha: &str, commit: usize, load: impl Fn(usize) -> f64) -> Value {
    let benchmarks: Vec<Value> = (BENCHMARKS.iter().enumerate())
        .map(|(b, name)| {
            let samples: Vec<f64> = (samples_at(code_level(commit, b) * load(b), commit)
                .split(','))
            .map(|v| v.parse().unwrap())
            .collect();
            json!({ "name": name, "metrics": [{ "name": "time", "unit": "ns",
                "direction": "lower", "value": samples[2], "samples": samples }] })
        })
        .collect();
    let specs = match cpu {
        Some(cpu) => serde_json::to_value(specs(cpu)).unwrap(),
        None => upload_specs(),
    };
    json!({ "commit": sha, "specs": specs,
            "suites": [{ "suite": "demo", "results": { "benchmarks": benchmarks } }] })
}

/// The disturbance of the first run of commit 12: every benchmark 20–50 % slower.
fn disturbed(b: usize) -> f64 {
    [1.2, 1.5, 1.35, 1.45, 1.25][b]
}

fn findings(regressions: &Value) -> Vec<(String, String)> {
    (regressions.as_array().unwrap().iter())
        .map(|r| {
            let benchmark = r["benchmark"].as_str().unwrap().to_owned();
            (
                benchmark,
                r["confirmation"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_disturbed_run_is_measured_again_and_only_what_moved_in_both_is_filed() {
    let repo = TestRepo::new();
    let shas: Vec<String> = (0..13)
        .map(|i| {
            let files = suite_files(i, |b| code_level(i, b));
            let files: Vec<(&str, &str)> = files
                .iter()
                .map(|(n, c)| (n.as_str(), c.as_str()))
                .collect();
            repo.commit(&files, &format!("change {i}"))
        })
        .collect();
    let cpu = "Busy CPU";
    let s = setup(&repo, cpu);
    for (i, sha) in shas.iter().enumerate().take(12) {
        let (status, answer) = post(
            &s.server,
            "/api/v1/repos/app/results",
            &upload(Some(cpu), sha, i, |_| 1.0),
        );
        assert_eq!(status, 201, "{answer}");
    }
    // Commit 12's run, slowed by other work on the machine: every benchmark moved.
    let body = upload(Some(cpu), &shas[12], 12, disturbed);
    let (status, answer) = post(&s.server, "/api/v1/repos/app/results", &body);
    assert_eq!(status, 201, "{answer}");
    let regressions = s.server.get_json("/api/v1/repos/app/regressions");
    assert_eq!(
        findings(&regressions),
        [],
        "nothing filed from a disturbed run alone"
    );
    let jobs = s.server.get_json("/api/v1/jobs");
    let again: Vec<&Value> = (jobs.as_array().unwrap().iter())
        .filter(|j| j["reason"] == "confirm" && j["state"] == "queued")
        .collect();
    assert_eq!(again.len(), 1, "the commit is measured again: {jobs:#}");
    assert_eq!(again[0]["sha"], shas[12].as_str(), "{jobs:#}");

    // The worker runs commit 12's suite again (the code: `parse` 30 % slower), then the
    // confirmation of what that run files.
    assert_eq!(run_until_empty(&s.machine), 2);
    let regressions = s.server.get_json("/api/v1/repos/app/regressions");
    assert_eq!(
        findings(&regressions),
        [("parse".to_owned(), "confirmed".to_owned())],
        "{regressions:#}"
    );
    assert_eq!(regressions[0]["sha"], shas[12].as_str());
}

#[tokio::test]
async fn an_uploaded_disturbed_run_is_marked_and_waits_for_another_run_before_it_is_announced() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(13).await;
    for (i, sha) in shas.iter().enumerate().take(12) {
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &upload(None, sha, i, |_| 1.0))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (status, answer) = app
        .post(
            "/api/v1/repos/r/results",
            &upload(None, &shas[12], 12, disturbed),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let (_, regressions) = app.get("/api/v1/repos/r/regressions").await;
    let marked = findings(&regressions);
    assert_eq!(marked.len(), BENCHMARKS.len(), "{regressions:#}");
    assert!(
        marked.iter().all(|(_, c)| c == "confirming"),
        "{regressions:#}"
    );
    let id = regressions[0]["id"].as_i64().unwrap();
    let (_, confirmation) = app
        .get(&format!("/api/v1/repos/r/regressions/{id}/confirmation"))
        .await;
    assert_eq!(confirmation["evidence"], "disturbed", "{confirmation:#}");

    // Another run of the commit, not disturbed: `parse` moved in both, nothing else did.
    let (status, answer) = app
        .post(
            "/api/v1/repos/r/results",
            &upload(None, &shas[12], 12, |_| 1.0),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let (_, regressions) = app.get("/api/v1/repos/r/regressions").await;
    assert_eq!(
        findings(&regressions),
        [("parse".to_owned(), "confirmed".to_owned())],
        "{regressions:#}"
    );
}
