//! Results that arrive out of history order (workers finish commits in any order) move a
//! series' change points about; re-recording them must never break the one-record-per-commit
//! rule. Found by the worker-kill fault test, where it made job completions fail with a 500.

use kymo_core::db::{ConfirmationDecision, FoundChange};
use serde_json::json;

use crate::api::{TestApp, specs};
use crate::support::TestRepo;

pub fn change_at(commit_id: i64, position: i64) -> FoundChange {
    FoundChange {
        commit_id,
        previous_id: None,
        position,
        kind: "regression",
        baseline: 1.0,
        value: 2.0,
        change_pct: 100.0,
        ci_low_pct: 90.0,
        ci_high_pct: 110.0,
        p_value: 1e-6,
        noise_pct: 1.0,
        segment_before: 5,
        segment_after: 5,
        span: 1,
        method: "test",
    }
}

/// Five commits of one flat benchmark `b` uploaded to the repository `r`: the repository (kept
/// while the test runs), the benchmark's series and each commit's id and position.
pub(crate) async fn flat_history(app: &TestApp) -> (TestRepo, i64, Vec<(i64, i64)>) {
    let (repo, first) = app.with_repo().await;
    let mut shas = vec![first];
    for i in 0..4 {
        shas.push(repo.commit(&[("f", &i.to_string())], "next"));
    }
    for sha in &shas {
        let upload = json!({ "commit": sha, "specs": specs(), "suites": [{ "suite": "s", "results": {
            "benchmarks": [{ "name": "b", "metrics": [{ "name": "t", "unit": "ns", "direction": "lower", "value": 1.0 }] }] } }] });
        let (status, answer) = app.post("/api/v1/repos/r/results", &upload).await;
        assert!(status.is_success(), "{answer}");
    }
    let db = &app.state.db;
    let repository = db.repository("r").await.unwrap();
    let series = db.series(repository.id, None, None, None).await.unwrap()[0].id;
    let mut commits = Vec::new();
    for sha in &shas {
        let row = db.commit(repository.id, sha).await.unwrap();
        commits.push((row.id, row.position.unwrap()));
    }
    (repo, series, commits)
}

#[tokio::test]
async fn a_change_point_moving_onto_another_ones_commit_updates_that_one() {
    let app = TestApp::new().await;
    let (_repo, series, commits) = flat_history(&app).await;
    let db = &app.state.db;
    let at = |i: usize| change_at(commits[i].0, commits[i].1);

    // One change at commit 1, then a second one two commits later.
    let created = db.record_changes(series, &[at(1)], 0).await.unwrap();
    assert_eq!(created.len(), 1);
    let mut ids = created;
    let created = db.record_changes(series, &[at(1), at(3)], 0).await.unwrap();
    assert_eq!(created.len(), 1);
    ids.extend(created);
    // Now only the later one is found: it must update the record at commit 3, not move the
    // record of commit 1 onto commit 3.
    let created = db.record_changes(series, &[at(3)], 0).await.unwrap();
    assert!(created.is_empty(), "{created:?}");
    let held = db.record_changes(series, &[at(3)], 0).await.unwrap();
    assert!(held.is_empty(), "found again where it is: no news");
    let confirmed = ConfirmationDecision {
        state: "confirmed",
        evidence: "instructions",
        rounds_run: 0,
        change_pct: Some(100.0),
        p_value: None,
        note: "",
    };
    for id in &ids {
        db.decide_confirmation(*id, &confirmed, 0).await.unwrap();
    }
    let moved = db.record_changes(series, &[at(2)], 0).await.unwrap();
    let (_, found) = app.get("/api/v1/repos/r/regressions").await;
    let id = found[0]["id"].as_i64().unwrap();
    assert_eq!(
        found.as_array().unwrap().len(),
        1,
        "a change that moved by one commit is the same one: {found:#}"
    );
    assert_eq!(moved, [id], "and, at another commit, news to confirm again");
    assert!(
        db.confirmation_of(id).await.unwrap().is_none(),
        "its old confirmation is gone"
    );
}
