//! A new point re-examines only the analysis windows it can change. What is stored after every
//! upload equals a full re-analysis of the series, and a history that changed before those
//! windows (a commit measured late) makes the next analysis a full one, counted.

use kymo_core::db::RegressionFilter;
use kymo_core::model::Direction;
use kymo_core::stats::{Sensitivity, Windows};
use kymo_server::analysis::changes_in;
use serde_json::{Value, json};

use crate::api::{TestApp, specs};

/// Five samples of commit `i`: around 100 ns (the middle one is the value), 130 from commit 30 on, 90 from commit 70 on, a
/// spike at 55, with a deterministic wobble.
fn samples(i: usize) -> Vec<f64> {
    let level = match i {
        55 => 160.0,
        70.. => 90.0,
        30.. => 130.0,
        _ => 100.0,
    };
    let wobble = [0.0, 0.6, -0.4, 0.2, -0.7, 0.5, -0.1][i % 7];
    (0..5)
        .map(|k| level + wobble + (k as f64 - 2.0) * 0.1)
        .collect()
}

fn upload(sha: &str, samples: Vec<f64>) -> Value {
    let value = samples[2];
    json!({ "commit": sha, "specs": specs(), "suites": [{ "suite": "s", "results": { "benchmarks": [
        { "name": "b", "metrics": [{ "name": "time", "unit": "ns", "direction": "lower", "value": value, "samples": samples }] }
    ] } }] })
}

/// A change point as one comparable line: every field, numbers to the last bit.
fn row(
    position: i64,
    kind: &str,
    numbers: [f64; 5],
    more: [f64; 2],
    counts: [i64; 3],
    method: &str,
) -> String {
    format!("{position} {kind} {numbers:?} {more:?} {counts:?} {method}")
}

/// The stored change points of the repository's one series, and those a full re-analysis of
/// its history finds, as comparable rows.
async fn stored_and_full(app: &TestApp) -> (Vec<String>, Vec<String>, i64) {
    let db = &app.state.db;
    let repository = db.repository("r").await.unwrap();
    let series = db.series(repository.id, None, None, None).await.unwrap()[0].id;
    let points = db.analysis_points(series).await.unwrap();
    let full = changes_in(
        &points,
        Direction::Lower,
        &Sensitivity::default(),
        app.state.analysis_windows,
    );
    let mut full: Vec<String> = (full.iter())
        .map(|c| {
            let numbers = [
                c.baseline,
                c.value,
                c.change_pct,
                c.ci_low_pct,
                c.ci_high_pct,
            ];
            let more = [c.p_value, c.noise_pct];
            let counts = [c.segment_before, c.segment_after, c.span];
            row(c.position, c.kind, numbers, more, counts, c.method)
        })
        .collect();
    let stored = db
        .regressions(repository.id, &RegressionFilter::default())
        .await
        .unwrap();
    let mut stored: Vec<String> = (stored.iter())
        .map(|c| {
            let numbers = [
                c.baseline,
                c.value,
                c.change_pct,
                c.ci_low_pct,
                c.ci_high_pct,
            ];
            let more = [c.p_value, c.noise_pct];
            let counts = [c.segment_before, c.segment_after, c.span];
            row(
                c.position.unwrap(),
                &c.kind,
                numbers,
                more,
                counts,
                &c.method,
            )
        })
        .collect();
    full.sort();
    stored.sort();
    (stored, full, series)
}

#[tokio::test]
async fn every_upload_stores_what_a_full_re_analysis_finds_and_a_late_commit_forces_one() {
    let mut app = TestApp::new().await;
    // Windows of 32 commits, so that 100 commits cross several window borders (16 are too
    // few to confirm these steps at all).
    app.state.analysis_windows = Windows::new(32);
    let (_repo, shas) = app.tracked_repository(100).await;
    let late = 50;
    for (i, sha) in shas.iter().enumerate().filter(|(i, _)| *i != late) {
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &upload(sha, samples(i)))
            .await;
        assert!(status.is_success(), "{answer}");
        let (stored, full, _) = stored_and_full(&app).await;
        assert_eq!(stored, full, "after commit {i}");
    }
    let (stored, _, series) = stored_and_full(&app).await;
    assert!(stored.len() >= 2, "{stored:#?}");
    let counts = app.state.db.analysis_counts(series).await.unwrap();
    assert_eq!((counts.incremental, counts.full), (98, 1), "{counts:?}");
    assert_eq!(counts.full_reason.as_deref(), Some("no earlier analysis"));

    // A commit in the middle of the analysed history, measured last.
    let late_upload = upload(&shas[late], samples(late));
    let (status, answer) = app.post("/api/v1/repos/r/results", &late_upload).await;
    assert!(status.is_success(), "{answer}");
    let (stored, full, _) = stored_and_full(&app).await;
    assert_eq!(stored, full, "after the late commit");
    let counts = app.state.db.analysis_counts(series).await.unwrap();
    assert_eq!((counts.incremental, counts.full), (98, 2), "{counts:?}");
    assert_eq!(
        counts.full_reason.as_deref(),
        Some("commits were measured, or left the branch, inside the analysed history")
    );

    // Analysing the unchanged history again writes nothing, so no cached page goes stale.
    let version = app.state.db.data_version();
    let repository = app.state.db.repository("r").await.unwrap();
    kymo_server::analysis::analyse_repository(&app.state, repository.id)
        .await
        .unwrap();
    assert_eq!(app.state.db.data_version(), version);
    let again = app.state.db.analysis_counts(series).await.unwrap();
    assert_eq!(again, counts);
}
