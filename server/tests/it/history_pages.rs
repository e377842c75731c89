//! Issue 29, pages whose cost does not grow with history: the summaries kept per series and
//! zoom level equal what a full read gives after every kind of write (appends, a late commit,
//! a commit measured again, a new environment, a force-push, a deleted series, rows left
//! staged); a zoomed-out page draws the extremes of the whole window from them; the home page
//! counts without reading history. Issue 32, item 4: the repository summary compares levels.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use kymo_core::db::{CommitRecord, Db, RunRecord};
use kymo_core::model::{CommitSha, Environment, MachineSpecs};
use kymo_core::protocol::SuiteUpload;
use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};
use kymo_core::series_summary::{
    BucketSummary, LEVELS, SummaryPoint, combine, summarize, summarize_all,
};
use serde_json::json;
use sqlx::sqlite::SqliteConnectOptions;

use crate::api::{TestApp, specs};
use crate::support::TestRepo;

fn sha(i: usize, generation: usize) -> CommitSha {
    CommitSha::parse(&format!("{:08x}{:032x}", generation, i + 1)).unwrap()
}

/// A history of `commits` commits in a line; commits from `rewritten_from` on are those of
/// another generation (a force-push replaces them).
fn chain(commits: usize, rewritten_from: usize, generation: usize) -> Vec<CommitRecord> {
    let sha_of = |i: usize| sha(i, if i >= rewritten_from { generation } else { 0 });
    (0..commits)
        .map(|i| CommitRecord {
            sha: sha_of(i),
            parents: if i == 0 { vec![] } else { vec![sha_of(i - 1)] },
            author: "Tester".into(),
            time: 1_700_000_000 + 600 * i as i64,
            message: format!("commit {i}"),
        })
        .collect()
}

/// The repository `r` with one machine, on a database of its own.
struct History {
    db: Db,
    repository_id: i64,
    machine_id: i64,
    _dir: tempfile::TempDir,
}

impl History {
    async fn new(commits: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("kymo.db")).await.unwrap();
        let repository_id = (db.create_repository("r", "/nowhere", "main", Default::default(), 0))
            .await
            .unwrap()
            .id;
        Self::on(db, repository_id, commits, dir).await
    }

    /// `commits` commits recorded as the branch of repository `repository_id` of `db`.
    async fn on(db: Db, repository_id: i64, commits: usize, dir: tempfile::TempDir) -> Self {
        let specs = MachineSpecs {
            cpu_model: "Test CPU".into(),
            logical_cores: 2,
            physical_cores: 1,
            memory_gib: 8,
            arch: "x86_64".into(),
            virtualization: "none".into(),
        };
        let (machine_id, _) = db.upsert_machine(&specs, "m", None, 0).await.unwrap();
        db.record_history(repository_id, &chain(commits, commits, 0))
            .await
            .unwrap();
        History {
            db,
            repository_id,
            machine_id,
            _dir: dir,
        }
    }

    /// `commits` commits recorded as the branch of `app`'s repository `r`, to be measured
    /// straight into its store: a git repository that long is slow to make, uploads analyse
    /// each commit, and pages read only the store. Returns the repository's work tree too.
    async fn of_app(app: &TestApp, commits: usize) -> (Self, TestRepo) {
        let (tracked, _) = app.tracked_repository(1).await;
        let repository = app.state.db.repository("r").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let history = Self::on(app.state.db.clone(), repository.id, commits, dir).await;
        (history, tracked)
    }

    /// Stores a run of commit `sha` measuring `benchmarks` (name, value) in `toolchain`.
    async fn store(&self, sha: &CommitSha, benchmarks: &[(&str, f64)], toolchain: &str) {
        let commit_id = (self.db.commit_id(self.repository_id, sha).await)
            .unwrap()
            .unwrap();
        let metric = |value| MetricResult::time_ns(value, vec![value]);
        let suites = [SuiteUpload {
            suite: "s".into(),
            results: SuiteResults {
                benchmarks: (benchmarks.iter())
                    .map(|(name, value)| BenchmarkResult {
                        name: (*name).into(),
                        params: BTreeMap::new(),
                        metrics: vec![metric(*value)],
                    })
                    .collect(),
            },
        }];
        let environment = Environment {
            kernel: "6.1.0".into(),
            toolchain: toolchain.into(),
            governor: "performance".into(),
            hostname: "m".into(),
        };
        let record = RunRecord {
            repository_id: self.repository_id,
            commit_id,
            machine_id: self.machine_id,
            job: None,
            environment: &environment,
            log: "",
            suites: &suites,
            config: None,
            upload_key: None,
        };
        self.db.store_run(record, 1_800_000_000).await.unwrap();
    }

    async fn series_id(&self, benchmark: &str) -> Option<i64> {
        let all = (self
            .db
            .series(self.repository_id, Some(benchmark), None, None))
        .await
        .unwrap();
        all.first().map(|s| s.id)
    }

    /// Every level of a series' stored summaries, coarsest last.
    async fn stored(&self, series_id: i64) -> Vec<BucketSummary> {
        let mut all = Vec::new();
        for level in 0..LEVELS {
            all.extend(self.db.series_summaries(series_id, level).await.unwrap());
        }
        all
    }

    /// Asserts that the stored summaries of `benchmark` equal those of a full read.
    async fn assert_summaries_equal_a_full_read(&self, benchmark: &str, when: &str) {
        let id = self.series_id(benchmark).await.unwrap();
        let points = self.db.series_summary_points(id).await.unwrap();
        let expected = summarize_all(&points);
        let stored = self.stored(id).await;
        assert!(!expected.is_empty(), "{when}: {benchmark} has points");
        assert_eq!(stored.len(), expected.len(), "{when}: rows of {benchmark}");
        for (s, e) in stored.iter().zip(&expected) {
            assert_eq!(s, e, "{when}: {benchmark}");
        }
    }
}

/// A value that moves from commit to commit, with a spike and a dip to be found.
fn value(position: usize) -> f64 {
    match position {
        137 => 900.0,
        211 => 1.0,
        _ => 100.0 + (position * 37 % 23) as f64,
    }
}

#[tokio::test]
async fn summaries_equal_a_full_read_after_every_kind_of_write() {
    let h = History::new(300).await;
    h.db.set_merge_threshold(40);
    let late = 100..110;
    for i in (0..260).filter(|i| !late.contains(i)) {
        let toolchain = if i < 200 { "rustc 1.94" } else { "rustc 1.95" };
        h.store(&sha(i, 0), &[("a", value(i)), ("gone", 5.0)], toolchain)
            .await;
    }
    h.db.merge_staged().await.unwrap();
    for benchmark in ["a", "gone"] {
        h.assert_summaries_equal_a_full_read(benchmark, "appends")
            .await;
    }
    let a = h.series_id("a").await.unwrap();
    let top = h.db.series_summaries(a, 2).await.unwrap();
    let change = top[0].change.expect("the toolchain changed at commit 200");
    assert_eq!(change.position, 200);

    for i in late.clone() {
        h.store(&sha(i, 0), &[("a", value(i) * 3.0)], "rustc 1.94")
            .await;
    }
    h.db.merge_staged().await.unwrap();
    h.assert_summaries_equal_a_full_read("a", "a late commit")
        .await;

    // Commit 137's spike measured again: the later run wins, and the spike is gone.
    h.store(&sha(137, 0), &[("a", 100.0)], "rustc 1.94").await;
    h.db.merge_staged().await.unwrap();
    h.assert_summaries_equal_a_full_read("a", "a commit measured again")
        .await;
    let highest = (h.db.series_summaries(a, 3).await.unwrap())
        .iter()
        .map(|s| s.high.value)
        .fold(f64::MIN, f64::max);
    assert!(highest < 900.0, "the old spike is no longer the highest");

    let options = SqliteConnectOptions::new().filename(h._dir.path().join("kymo.db"));
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let gone = h.series_id("gone").await.unwrap();
    sqlx::query("DELETE FROM series WHERE id = ?")
        .bind(gone)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert!(
        h.stored(gone).await.is_empty(),
        "a deleted series' summaries go with it"
    );
    h.assert_summaries_equal_a_full_read("a", "a deleted series")
        .await;

    // A force-push replaces commits from 240 on; the new ones are measured before the
    // history that makes them the branch is recorded (they hold no position yet).
    let pushed = chain(300, 240, 1);
    for (i, commit) in pushed.iter().enumerate().take(250).skip(240) {
        h.db.record_commit(h.repository_id, commit).await.unwrap();
        h.store(&sha(i, 1), &[("a", 50.0)], "rustc 1.95").await;
    }
    h.db.merge_staged().await.unwrap();
    h.db.record_history(h.repository_id, &pushed).await.unwrap();
    h.assert_summaries_equal_a_full_read("a", "a force-push")
        .await;
    let points = h.db.series_summary_points(a).await.unwrap();
    assert_eq!(
        points.last().map(|p| (p.position, p.value)),
        Some((249, 50.0))
    );
}

#[tokio::test]
async fn a_window_read_from_summaries_holds_every_point_staged_ones_included() {
    let h = History::new(2_000).await;
    h.db.set_merge_threshold(1_000_000);
    for i in 0..1_200 {
        h.store(&sha(i, 0), &[("a", value(i))], "rustc 1.94").await;
    }
    h.db.merge_staged().await.unwrap();
    // Left staged: new commits, a late one and one measured again.
    for i in (1_200..1_500).chain([50, 137]) {
        h.store(&sha(i, 0), &[("a", value(i) + 1.0)], "rustc 1.95")
            .await;
    }
    let a = h.series_id("a").await.unwrap();
    let raw = h.db.series_window(a, 100_000, None, false).await.unwrap();
    assert_eq!(raw.len(), 1_500);
    let environment = |toolchain: &str| i64::from(toolchain == "rustc 1.95");
    let expected: Vec<SummaryPoint> = (raw.iter())
        .map(|p| SummaryPoint {
            position: p.point.position,
            value: p.point.value,
            environment: environment(&p.environment.toolchain),
        })
        .collect();
    // (window, buckets asked for, the level that gives them)
    for (last, until, buckets, level) in [
        (1_500, None, 90, 0),
        (1_000, Some(1_234), 15, 1),
        (700, Some(1_499), 40, 0),
    ] {
        let window = (h.db.series_summary_window(a, last, until, buckets))
            .await
            .unwrap()
            .expect("enough commits for summaries");
        // Environment ids are the store's: compare them by name.
        let named: Vec<BucketSummary> = (window.buckets.iter())
            .map(|b| {
                let by_name = |id: i64| environment(&window.environments[&id].1);
                let mut b = *b;
                b.first_environment = by_name(b.first_environment);
                b.last_environment = by_name(b.last_environment);
                b.change = b.change.map(|mut c| {
                    c.from = by_name(c.from);
                    c.to = by_name(c.to);
                    c
                });
                b
            })
            .collect();
        let to = until.unwrap_or(1_499);
        let from = to - last + 1;
        let inside: Vec<SummaryPoint> = (expected.iter())
            .filter(|p| (from..=to).contains(&p.position))
            .copied()
            .collect();
        let whole = |b: Option<BucketSummary>| {
            b.map(|b| (b.points, b.low, b.high, b.first, b.last, b.change))
        };
        assert_eq!(
            whole(combine(9, 0, &named)),
            whole(summarize(9, 0, &inside)),
            "window {from}..={to} at level {level}"
        );
        assert!(
            window.buckets.len() <= (last as usize / 16 / 4usize.pow(level as u32)) + 24,
            "{} pieces for {last} commits",
            window.buckets.len()
        );
        for b in &window.buckets {
            assert!(window.commits.contains_key(&b.low.position));
        }
    }
}

#[tokio::test]
async fn windows_read_samples_to_the_bit_and_values_to_sixteen_digits() {
    // Values that fifteen significant digits (SQLite's JSON numbers) would round.
    let awkward = [
        0.1 + 0.2,
        1.0 / 3.0,
        1e-300,
        123_456_789.123_456_79,
        2f64.sqrt() * 1e10,
        5e-324,
    ];
    let value = |i: usize| awkward[i % awkward.len()] * (1.0 + i as f64 * 1e-9);
    let h = History::new(200).await;
    for i in 0..200 {
        h.store(&sha(i, 0), &[("a", value(i))], "rustc 1.94").await;
    }
    h.db.merge_staged().await.unwrap();
    let a = h.series_id("a").await.unwrap();
    let window = h.db.series_window(a, 200, None, true).await.unwrap();
    assert_eq!(window.len(), 200);
    let summary = (h.db.series_summary_window(a, 200, None, 10).await)
        .unwrap()
        .expect("200 commits make 12 buckets");
    for (i, p) in window.iter().enumerate() {
        assert_eq!(p.point.position, i as i64, "oldest first");
        // Samples are stored as bytes: exact. The value went into SQLite and back as text,
        // whose conversion may miss the last bits (it does at 1e-300 here).
        assert_eq!(p.point.samples.0, vec![value(i)], "samples of point {i}");
        let error = (p.point.value - value(i)).abs() / value(i);
        assert!(
            error < 1e-15,
            "point {i}: {} for {}",
            p.point.value,
            value(i)
        );
    }
    // The summaries (read as binary numbers) hold the values a full read gives.
    for b in &summary.buckets {
        for located in [b.low, b.high, b.first, b.last] {
            let read = window[located.position as usize].point.value;
            let error = (located.value - read).abs() / read;
            assert!(error < 1e-15, "{located:?} against {read}");
        }
    }
}

#[tokio::test]
async fn a_zoomed_out_page_draws_the_extremes_of_its_whole_window() {
    let app = TestApp::new().await;
    let (h, _tracked) = History::of_app(&app, 6_000).await;
    h.db.set_merge_threshold(2_000);
    for i in 0..6_000 {
        let value = match i {
            2_345 => 5_000.0,
            4_567 => 0.5,
            _ => 100.0 + (i % 7) as f64,
        };
        h.store(&sha(i, 0), &[("b", value)], "rustc 1.94").await;
    }
    let app = &app;
    let page = |query: &'static str| async move {
        let (status, page) = app.get(&format!("/repos/r/benchmarks/b{query}")).await;
        assert_eq!(status, StatusCode::OK);
        page.as_str().unwrap().to_owned()
    };
    let zoomed_out = page("?last=10000").await;
    for spike in [2_345, 4_567] {
        let link = format!("/repos/r/commits/{}", sha(spike, 0).as_str());
        assert!(
            zoomed_out.contains(&link),
            "commit {spike} is drawn and linked"
        );
    }
    assert!(
        zoomed_out.contains("the newest 6000 commits"),
        "every commit counted"
    );
    assert!(zoomed_out.len() < 300_000, "{} bytes", zoomed_out.len());
    // The default window reads point by point, up to the newest commit.
    let newest = page("").await;
    assert!(newest.contains(&format!("/repos/r/commits/{}", sha(5_999, 0).as_str())));
    assert!(newest.contains("the newest 1000 commits"));
}

#[tokio::test]
async fn a_short_history_zoomed_out_shows_every_commit() {
    let app = TestApp::new().await;
    let (h, _tracked) = History::of_app(&app, 300).await;
    for i in 0..300 {
        let value = 100.0 + (i % 7) as f64;
        h.store(&sha(i, 0), &[("b", value)], "rustc 1.94").await;
    }
    // A window of 100,000 commits over 300: too few for summaries to lose nothing, so every
    // commit is drawn and linked, as in the default window.
    for query in ["?last=100000", ""] {
        let (status, page) = app.get(&format!("/repos/r/benchmarks/b{query}")).await;
        assert_eq!(status, StatusCode::OK);
        let page = page.as_str().unwrap();
        let linked = (0..300)
            .filter(|i| page.contains(&format!("/repos/r/commits/{}", sha(*i, 0).as_str())))
            .count();
        assert_eq!(linked, 300, "{query}");
    }
}

#[tokio::test]
async fn the_home_page_counts_commits_and_knows_the_last_run() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(3).await;
    let body = json!({ "commit": shas[1], "specs": specs(), "suites": [{
        "suite": "s", "results": { "benchmarks": [{ "name": "b", "metrics": [
            { "name": "time", "unit": "ns", "direction": "lower", "value": 1.0 }] }] } }] });
    assert_eq!(
        app.post("/api/v1/repos/r/results", &body).await.0,
        StatusCode::CREATED
    );
    let (status, home) = app.get("/").await;
    assert_eq!(status, StatusCode::OK);
    let home = home.as_str().unwrap();
    assert!(
        home.contains("<td class=\"num\">3</td>"),
        "three commits: {home}"
    );
    assert!(home.contains("2027-01-15"), "the run's day: {home}");
}

#[tokio::test]
async fn the_repository_summary_ignores_one_slow_first_run() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(30).await;
    for (i, sha) in shas.iter().enumerate() {
        // The first run on a loaded machine: twice as slow. Then "b" gets 30 % slower
        // half-way; "a" stays where it was.
        let a = if i == 0 { 200.0 } else { 100.0 };
        let b = match i {
            0 => 250.0,
            1..15 => 100.0,
            _ => 130.0,
        };
        let metric = |value: f64| {
            json!({ "name": "time", "unit": "ns", "direction": "lower",
                                          "value": value })
        };
        let body = json!({ "commit": sha, "specs": specs(), "suites": [{
            "suite": "s", "results": { "benchmarks": [
                { "name": "a", "metrics": [metric(a)] },
                { "name": "b", "metrics": [metric(b)] }] } }] });
        assert_eq!(
            app.post("/api/v1/repos/r/results", &body).await.0,
            StatusCode::CREATED
        );
    }
    let (status, page) = app.get("/repos/r").await;
    assert_eq!(status, StatusCode::OK);
    let page = page.as_str().unwrap();
    let row = |benchmark: &str| {
        let start = page.find(&format!(">{benchmark}</a></td>")).unwrap();
        page[start..start + page[start..].find("</tr>").unwrap()].to_owned()
    };
    assert!(row("a").contains("+0.0 %"), "{}", row("a"));
    assert!(!row("a").contains("better"), "no improvement: {}", row("a"));
    assert!(
        row("b").contains("+30.0 %") && row("b").contains("worse"),
        "{}",
        row("b")
    );
}
