//! Stored noise models: the analysis keeps each series' noise models so that a compare at a
//! series' newest commit (or off the branch) reads one row instead of its history, with the
//! same verdicts; older heads read history as before; and analysing unchanged history writes
//! nothing.

use kymo_core::db::{CommitRecord, CommitRow, Db, RepositoryRow};
use kymo_core::model::CommitSha;
use kymo_core::stats::{NoiseModel, NoiseWindow};
use kymo_server::analysis::analyse_repository;
use serde_json::{Value, json};

use crate::api::{TestApp, specs};
use crate::out_of_order::change_at;
use crate::support::TestRepo;
use crate::verdicts::jittered;

const COMMITS: usize = 30;

/// A sampled benchmark with a step at commit 20, and one reporting a single value.
fn upload(sha: &str, i: usize, rerun: bool) -> Value {
    let level = if i < 20 { 100.0 } else { 110.0 };
    let single = 50.0 + ((i * 7) % 5) as f64 * 0.3 + if rerun { 3.0 } else { 0.0 };
    json!({
        "commit": sha,
        "specs": specs(),
        "suites": [{ "suite": "s", "results": { "benchmarks": [
            { "name": "sampled", "metrics": [{ "name": "time", "unit": "ns", "direction": "lower",
                                               "value": level, "samples": jittered(level, i) }] },
            { "name": "single", "metrics": [{ "name": "time", "unit": "ns", "direction": "lower",
                                              "value": single }] }
        ]}}]
    })
}

/// A repository of COMMITS measured commits (every third measured twice, differently: a
/// verdict reads the latest run), each analysed as it was uploaded.
async fn measured() -> (TestApp, RepositoryRow, Vec<String>, TestRepo) {
    let app = TestApp::new().await;
    let (repo, first) = app.with_repo().await;
    let mut shas = vec![first];
    for i in 1..COMMITS {
        shas.push(repo.commit(&[("f", &i.to_string())], &format!("change {i}")));
    }
    for (i, sha) in shas.iter().enumerate() {
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &upload(sha, i, false))
            .await;
        assert!(status.is_success(), "{answer}");
        if i % 3 == 0 {
            app.post("/api/v1/repos/r/results", &upload(sha, i, true))
                .await;
        }
    }
    let repository = app.state.db.repository("r").await.unwrap();
    (app, repository, shas, repo)
}

async fn compare(app: &TestApp, head: &str) -> Value {
    let (status, report) = app
        .get(&format!("/api/v1/repos/r/compare?head={head}"))
        .await;
    assert!(status.is_success(), "{report}");
    report
}

async fn series_ids(db: &Db, repository: &RepositoryRow) -> Vec<i64> {
    let series = db.series(repository.id, None, None, None).await.unwrap();
    series.iter().map(|s| s.id).collect()
}

/// Stores `model` as both windows of every series, as the analysis would store them when
/// `last` is each series' newest commit; anchored at `anchor`, which must be `last` for a
/// compare to read them (another commit does not have `last`'s position).
async fn store_everywhere(
    app: &TestApp,
    ids: &[i64],
    last: &CommitRow,
    anchor: &CommitRow,
    model: NoiseModel,
) {
    let position = last.position.unwrap();
    let windows = vec![
        NoiseWindow {
            newest_position: Some(position - 1),
            before_position: Some(position),
            model,
        },
        NoiseWindow {
            newest_position: Some(position),
            before_position: None,
            model,
        },
    ];
    let series: Vec<_> = (ids.iter())
        .map(|&id| (id, anchor.id, windows.clone()))
        .collect();
    (app.state.db)
        .store_noise_windows(&series, app.state.now())
        .await
        .unwrap();
}

/// A noise model no real history of these series has: verdicts read through it differ.
fn implausible() -> NoiseModel {
    NoiseModel {
        level: 100.0,
        between_commit_sd: 25.0,
        between_commit_pct: 25.0,
        within_run_cv_pct: None,
        changes: 99,
        samples_per_commit: 0,
    }
}

#[tokio::test]
async fn a_compare_at_the_newest_commit_judges_by_the_stored_noise_as_by_the_history() {
    let (app, repository, shas, _repo) = measured().await;
    let db = &app.state.db;
    let ids = series_ids(db, &repository).await;
    let newest = &shas[COMMITS - 1];
    let stored = compare(&app, newest).await;
    assert_eq!(stored["rows"].as_array().unwrap().len(), 2, "{stored:#}");
    let windows = db.noise_windows(&ids).await.unwrap();
    assert_eq!(windows.len(), 4, "two windows per series: {windows:?}");

    let last = db.commit(repository.id, newest).await.unwrap();
    let first = db.commit(repository.id, &shas[0]).await.unwrap();
    store_everywhere(&app, &ids, &last, &first, implausible()).await;
    assert!(db.noise_windows(&ids).await.unwrap().is_empty());
    let computed = compare(&app, newest).await;
    assert_eq!(
        stored, computed,
        "the stored models are the ones history gives"
    );

    // And the compare does read them: other models, other verdicts.
    store_everywhere(&app, &ids, &last, &last, implausible()).await;
    let implausible = compare(&app, newest).await;
    assert_ne!(implausible["rows"], stored["rows"]);
    assert_ne!(
        implausible["rows"][0]["verdict"]["noise_pct"],
        stored["rows"][0]["verdict"]["noise_pct"]
    );
}

#[tokio::test]
async fn an_older_head_reads_its_own_history() {
    let (app, repository, shas, _repo) = measured().await;
    let db = &app.state.db;
    let ids = series_ids(db, &repository).await;
    // The culprit of the step, ten commits before the newest.
    let older = compare(&app, &shas[20]).await;
    assert_eq!(older["regressed"], 1, "{older:#}");

    // Models stored for the newest commit do not hold for it.
    let last = db.commit(repository.id, &shas[COMMITS - 1]).await.unwrap();
    store_everywhere(&app, &ids, &last, &last, implausible()).await;
    assert_eq!(compare(&app, &shas[20]).await, older);
}

#[tokio::test]
async fn a_head_off_the_branch_judges_by_the_noise_through_the_newest_point() {
    let (app, repository, shas, _repo) = measured().await;
    let db = &app.state.db;
    let ids = series_ids(db, &repository).await;
    // The branch is rewritten without its newest commit, which stays measured off the
    // branch like a pull request's head; the stored models of its series are void until the
    // analysis runs again.
    let chain: Vec<CommitRecord> = (shas[..COMMITS - 1].iter().enumerate())
        .map(|(i, sha)| CommitRecord {
            sha: CommitSha::parse(sha).unwrap(),
            parents: (i > 0)
                .then(|| CommitSha::parse(&shas[i - 1]).unwrap())
                .into_iter()
                .collect(),
            author: "Ada Bench".into(),
            time: 0,
            message: String::new(),
        })
        .collect();
    db.record_history(repository.id, &chain).await.unwrap();
    assert!(db.noise_windows(&ids).await.unwrap().is_empty());
    let off_branch = &shas[COMMITS - 1];
    let computed = compare(&app, off_branch).await;

    analyse_repository(&app.state, repository.id).await.unwrap();
    assert_eq!(db.noise_windows(&ids).await.unwrap().len(), 4);
    assert_eq!(compare(&app, off_branch).await, computed);

    let last = db.commit(repository.id, &shas[COMMITS - 2]).await.unwrap();
    store_everywhere(&app, &ids, &last, &last, implausible()).await;
    assert_ne!(compare(&app, off_branch).await["rows"], computed["rows"]);
}

#[tokio::test]
async fn analysing_unchanged_history_again_writes_nothing() {
    let (app, repository, _, repo) = measured().await;
    let db = &app.state.db;
    let ids = series_ids(db, &repository).await;
    let analysed_at = app.state.now();
    let regressions = app.get("/api/v1/repos/r/regressions").await.1;
    assert_eq!(regressions.as_array().unwrap().len(), 1, "{regressions:#}");
    for &id in &ids {
        assert_eq!(db.analysis_changed_at(id).await.unwrap(), Some(analysed_at));
    }

    app.clock.advance(600);
    analyse_repository(&app.state, repository.id).await.unwrap();
    for &id in &ids {
        assert_eq!(db.analysis_changed_at(id).await.unwrap(), Some(analysed_at));
    }
    assert_eq!(app.get("/api/v1/repos/r/regressions").await.1, regressions);

    // A new commit does change what is stored, and says when.
    app.clock.advance(600);
    let next = repo.commit(&[("f", "next")], "one more");
    let (status, _) = (app.post("/api/v1/repos/r/results", &upload(&next, COMMITS, false))).await;
    assert!(status.is_success());
    for &id in &ids {
        assert_eq!(
            db.analysis_changed_at(id).await.unwrap(),
            Some(analysed_at + 1200)
        );
    }
}

async fn single_series(db: &Db, repository: &RepositoryRow) -> i64 {
    let series = db
        .series(repository.id, Some("single"), None, None)
        .await
        .unwrap();
    series[0].id
}

#[tokio::test]
async fn recording_the_same_changes_again_touches_no_record() {
    let (app, repository, shas, _repo) = measured().await;
    let db = &app.state.db;
    // The single-value series has no change point of its own.
    let single = single_series(db, &repository).await;
    let commit = db.commit(repository.id, &shas[3]).await.unwrap();
    let found = [change_at(commit.id, commit.position.unwrap())];
    let changed_at = || db.analysis_changed_at(single);

    let created = db
        .record_changes(single, &found, 2_000_000_000)
        .await
        .unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(changed_at().await.unwrap(), Some(2_000_000_000));
    db.record_changes(single, &found, 2_000_000_100)
        .await
        .unwrap();
    assert_eq!(
        changed_at().await.unwrap(),
        Some(2_000_000_000),
        "the same change again"
    );

    // No longer found: deactivated once, then left alone.
    db.record_changes(single, &[], 2_000_000_200).await.unwrap();
    assert_eq!(changed_at().await.unwrap(), Some(2_000_000_200));
    db.record_changes(single, &[], 2_000_000_300).await.unwrap();
    assert_eq!(
        changed_at().await.unwrap(),
        Some(2_000_000_200),
        "already inactive"
    );

    // Found again, and then with other evidence: each is a change.
    db.record_changes(single, &found, 2_000_000_400)
        .await
        .unwrap();
    assert_eq!(changed_at().await.unwrap(), Some(2_000_000_400));
    let mut moved = found[0].clone();
    moved.p_value = 1e-7;
    let created = db
        .record_changes(single, &[moved], 2_000_000_500)
        .await
        .unwrap();
    assert!(created.is_empty());
    assert_eq!(changed_at().await.unwrap(), Some(2_000_000_500));

    // An improvement found where the active regression is stays that record, untouched.
    let mut other_kind = found[0].clone();
    other_kind.kind = "improvement";
    let created = (db.record_changes(single, &[other_kind], 2_000_000_600))
        .await
        .unwrap();
    assert!(created.is_empty());
    assert_eq!(changed_at().await.unwrap(), Some(2_000_000_500));
}

/// The repository page's pointer at series too noisy to see 10 %: a series whose runs differ
/// by ±20 % from commit to commit is named with that reason, a young one with its short
/// history; neither with a count of samples its stored noise never saw (it once read "0
/// samples a run" beside runs of 20 samples).
#[tokio::test]
async fn the_repository_page_names_the_series_too_noisy_to_see_10_percent_and_why() {
    let app = TestApp::new().await;
    let (repo, first) = app.with_repo().await;
    let mut shas = vec![first];
    for i in 1..24 {
        shas.push(repo.commit(&[("f", &i.to_string())], &format!("change {i}")));
    }
    for (i, sha) in shas.iter().enumerate() {
        let wild = 100.0 * (1.0 + 0.2 * ((i * 7 % 5) as f64 - 2.0) / 2.0);
        let mut benchmarks = vec![json!({ "name": "wild", "metrics": [{ "name": "time",
            "unit": "ns", "direction": "lower", "value": wild, "samples": jittered(wild, i) }] })];
        if i >= 22 {
            let young = if i == 22 { 100.0 } else { 160.0 };
            benchmarks.push(json!({ "name": "young", "metrics": [{ "name": "time",
                "unit": "ns", "direction": "lower", "value": young,
                "samples": jittered(young, i) }] }));
        }
        let upload = json!({ "commit": sha, "specs": specs(),
            "suites": [{ "suite": "s", "results": { "benchmarks": benchmarks } }] });
        let (status, answer) = app.post("/api/v1/repos/r/results", &upload).await;
        assert!(status.is_success(), "{answer}");
    }
    let (_, page) = app.get("/repos/r").await;
    let page = page.as_str().unwrap();
    let section = &page[page.find("Too noisy to see 10 %").expect(page)..];
    assert!(
        section.contains("runs of the same code differ by about"),
        "{section}"
    );
    assert!(
        section.contains("short history: 1 commit-to-commit change bound"),
        "{section}"
    );
    assert!(!section.contains("samples a run"), "{section}");
}
