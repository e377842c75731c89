//! Issue 16, ingest at scale: uploads are staged in arrival order (migration 0028) and merged
//! into the clustered table later. Every reader sees a stored measurement as soon as its
//! upload returns, the same before and after a merge; a commit measured again shows its later
//! run whichever table each run is in; a merge that fails leaves both tables as they were.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;

use crate::api::{TestApp, specs};

fn upload(sha: &str, level: f64) -> Value {
    let metric = |name: &str, value: f64| {
        json!({ "name": name, "unit": "ns", "direction": "lower", "value": value,
                "samples": [value * 0.99, value, value * 1.01] })
    };
    json!({ "commit": sha, "specs": specs(), "suites": [{ "suite": "s", "results": {
        "benchmarks": [
            { "name": "parse", "metrics": [metric("time", level), metric("instructions", level * 400.0)] },
            { "name": "render", "metrics": [metric("time", level * 3.0)] },
        ] } }] })
}

async fn store(app: &TestApp, sha: &str, level: f64) {
    let (status, answer) = app
        .post("/api/v1/repos/r/results", &upload(sha, level))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

async fn raw_pool(app: &TestApp) -> SqlitePool {
    let options = SqliteConnectOptions::new().filename(app.db_path());
    SqlitePool::connect_with(options).await.unwrap()
}

/// Rows in (the clustered table, the staged table).
async fn rows_in_tables(app: &TestApp) -> (i64, i64) {
    let pool = raw_pool(app).await;
    let counts = sqlx::query_as(
        "SELECT (SELECT count(*) FROM measurements), (SELECT count(*) FROM measurements_staged)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    counts
}

/// What every reader of measurements answers: the commit and series APIs, the regressions,
/// and the storage layer's readers the analysis, bisection and verdicts use.
async fn everything_read(app: &TestApp, shas: &[String]) -> Vec<String> {
    let mut seen = Vec::new();
    for sha in shas {
        seen.push(
            app.get(&format!("/api/v1/repos/r/commits/{sha}"))
                .await
                .1
                .to_string(),
        );
    }
    for (benchmark, metric) in [
        ("parse", "time"),
        ("parse", "instructions"),
        ("render", "time"),
    ] {
        let path = format!("/api/v1/repos/r/series?benchmark={benchmark}&metric={metric}");
        seen.push(app.get(&path).await.1.to_string());
    }
    seen.push(app.get("/api/v1/repos/r/regressions").await.1.to_string());
    let pool = raw_pool(app).await;
    let series: Vec<i64> = sqlx::query_scalar("SELECT id FROM series ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    let commits: Vec<i64> = sqlx::query_scalar("SELECT id FROM commits ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    let runs: Vec<i64> = sqlx::query_scalar("SELECT id FROM runs ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    let repository: i64 = sqlx::query_scalar("SELECT id FROM repositories")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    let db = &app.state.db;
    for &s in &series {
        seen.push(format!(
            "{:?}",
            db.series_points(s, 100, None).await.unwrap()
        ));
        seen.push(format!(
            "{:?}",
            db.series_values_before(s, None, 100).await.unwrap()
        ));
        seen.push(format!(
            "{:?}",
            db.analysis_points_from(s, i64::MIN).await.unwrap()
        ));
        let snapshot = db.analysis_snapshot(s, |_, _| 0).await.unwrap();
        seen.push(format!("{:?} {:?}", snapshot.input, snapshot.points));
        for &c in &commits {
            seen.push(format!("{:?}", db.samples_at(s, c).await.unwrap()));
        }
    }
    let between = db.series_values_between(repository, &series, 0, 100);
    seen.push(format!("{:?}", between.await.unwrap()));
    seen.push(format!(
        "{:?}",
        db.recent_values(repository, 100).await.unwrap()
    ));
    for &c in &commits {
        seen.push(format!(
            "{:?}",
            db.commit_measurements(c, c.checked_sub(1)).await.unwrap()
        ));
    }
    for &r in &runs {
        seen.push(format!("{:?}", db.run_series(r).await.unwrap()));
    }
    seen.push(format!("{:?}", db.row_counts().await.unwrap()));
    seen
}

async fn commit_id(app: &TestApp, sha: &str) -> i64 {
    let pool = raw_pool(app).await;
    let id = sqlx::query_scalar("SELECT id FROM commits WHERE sha = ?")
        .bind(sha)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    id
}

/// The value the commit API shows for parse/time at `sha`.
/// The id of the series `parse` · `time`.
async fn parse_time_series(app: &TestApp) -> i64 {
    let db = &app.state.db;
    let repository = db.repository("r").await.unwrap().id;
    let series = db.series(repository, Some("parse"), Some("time"), None);
    series.await.unwrap()[0].id
}

async fn parse_time(app: &TestApp, sha: &str) -> f64 {
    let (status, commit) = app.get(&format!("/api/v1/repos/r/commits/{sha}")).await;
    assert_eq!(status, StatusCode::OK, "{commit}");
    let results = commit["results"].as_array().unwrap();
    let row = (results.iter())
        .find(|r| r["benchmark"] == "parse" && r["metric"] == "time")
        .unwrap_or_else(|| panic!("no parse/time in {commit}"));
    row["value"].as_f64().unwrap()
}

#[tokio::test]
async fn an_upload_is_read_at_once_and_reads_the_same_after_the_merge() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(4).await;
    for (i, sha) in shas.iter().enumerate() {
        store(&app, sha, 100.0 + i as f64).await;
        // Read-your-write: staged, not merged, and shown.
        assert_eq!(parse_time(&app, sha).await, 100.0 + i as f64);
    }
    assert_eq!(rows_in_tables(&app).await, (0, 12));
    let staged = everything_read(&app, &shas).await;

    let merged = app.state.db.merge_staged().await.unwrap();
    assert_eq!((merged.rows, merged.batches), (12, 1));
    assert_eq!(rows_in_tables(&app).await, (12, 0));
    assert_eq!(everything_read(&app, &shas).await, staged);
    // Nothing left: a second merge moves nothing.
    assert_eq!(app.state.db.merge_staged().await.unwrap().rows, 0);
}

#[tokio::test]
async fn uploads_that_reach_the_threshold_merge_and_are_read_alike_half_merged() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(5).await;
    app.state.db.set_merge_threshold(6);
    store(&app, &shas[0], 10.0).await;
    assert_eq!(rows_in_tables(&app).await, (0, 3));
    store(&app, &shas[1], 11.0).await;
    // The second upload brought 6 rows: merged when it returned.
    assert_eq!(rows_in_tables(&app).await, (6, 0));
    store(&app, &shas[2], 12.0).await;
    store(&app, &shas[3], 13.0).await;
    store(&app, &shas[4], 14.0).await;
    assert_eq!(rows_in_tables(&app).await, (12, 3));
    let half_merged = everything_read(&app, &shas).await;
    app.state.db.merge_staged().await.unwrap();
    assert_eq!(rows_in_tables(&app).await, (15, 0));
    assert_eq!(everything_read(&app, &shas).await, half_merged);
    for (i, sha) in shas.iter().enumerate() {
        assert_eq!(parse_time(&app, sha).await, 10.0 + i as f64);
    }
}

#[tokio::test]
async fn a_commit_measured_again_shows_its_later_run_whichever_table_holds_it() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(2).await;
    store(&app, &shas[0], 100.0).await;
    store(&app, &shas[1], 200.0).await;
    app.state.db.merge_staged().await.unwrap();
    // The re-measurement is staged, the first run merged: the later one is shown.
    store(&app, &shas[1], 250.0).await;
    assert_eq!(rows_in_tables(&app).await, (6, 3));
    assert_eq!(parse_time(&app, &shas[1]).await, 250.0);
    let (_, series) = app
        .get("/api/v1/repos/r/series?benchmark=parse&metric=time")
        .await;
    let values: Vec<f64> = (series[0]["points"].as_array().unwrap().iter())
        .map(|p| p["value"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [100.0, 250.0], "{series}");
    // Both runs are kept: the bisection's samples hold the first run's, then the later's.
    let db = &app.state.db;
    let parse_time_series = parse_time_series(&app).await;
    let (first, second) = (
        commit_id(&app, &shas[0]).await,
        commit_id(&app, &shas[1]).await,
    );
    let commit = db.commit_measurements(second, Some(first)).await.unwrap();
    let row = commit
        .iter()
        .find(|r| r.series_id == parse_time_series)
        .unwrap();
    assert_eq!((row.value, row.parent_value), (250.0, Some(100.0)));
    let samples = db.samples_at(parse_time_series, second).await.unwrap();
    assert_eq!(
        samples,
        [vec![198.0, 200.0, 202.0], vec![247.5, 250.0, 252.5]]
    );
    let staged = everything_read(&app, &shas).await;

    // Merged together, nothing changes; measured a third time (staged again), that one wins.
    db.merge_staged().await.unwrap();
    assert_eq!(rows_in_tables(&app).await, (9, 0));
    assert_eq!(everything_read(&app, &shas).await, staged);
    store(&app, &shas[1], 300.0).await;
    assert_eq!(parse_time(&app, &shas[1]).await, 300.0);
    // A parent measured again in staging is the parent value shown beside its child.
    store(&app, &shas[0], 90.0).await;
    let commit = db.commit_measurements(second, Some(first)).await.unwrap();
    let row = commit
        .iter()
        .find(|r| r.series_id == parse_time_series)
        .unwrap();
    assert_eq!((row.value, row.parent_value), (300.0, Some(90.0)));
}

#[tokio::test]
async fn a_merge_that_fails_leaves_both_tables_as_they_were_and_a_later_one_completes() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(3).await;
    store(&app, &shas[0], 10.0).await;
    app.state.db.merge_staged().await.unwrap();
    store(&app, &shas[1], 20.0).await;
    store(&app, &shas[2], 30.0).await;
    let before = everything_read(&app, &shas).await;
    assert_eq!(rows_in_tables(&app).await, (3, 6));

    // The merge's transaction fails on its last row (in key order), after it moved the others.
    let pool = raw_pool(&app).await;
    sqlx::query(
        "CREATE TRIGGER refuse_one BEFORE INSERT ON measurements
         WHEN NEW.series_id = (SELECT max(series_id) FROM measurements_staged)
          AND NEW.commit_id = (SELECT max(commit_id) FROM measurements_staged)
         BEGIN SELECT RAISE(ABORT, 'the disk failed mid-merge'); END",
    )
    .execute(&pool)
    .await
    .unwrap();
    let error = app.state.db.merge_staged().await.unwrap_err().to_string();
    assert!(error.contains("the disk failed mid-merge"), "{error}");
    assert_eq!(rows_in_tables(&app).await, (3, 6));
    assert_eq!(everything_read(&app, &shas).await, before);
    // Uploads go on meanwhile, and are read.
    store(&app, &shas[2], 35.0).await;
    assert_eq!(parse_time(&app, &shas[2]).await, 35.0);

    sqlx::query("DROP TRIGGER refuse_one")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let merged = app.state.db.merge_staged().await.unwrap();
    assert_eq!(merged.rows, 9);
    assert_eq!(rows_in_tables(&app).await, (12, 0));
    assert_eq!(parse_time(&app, &shas[2]).await, 35.0);
    assert_eq!(parse_time(&app, &shas[1]).await, 20.0);
}

#[tokio::test]
async fn staged_rows_survive_a_restart_and_are_merged_by_the_next_process() {
    let mut app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(2).await;
    store(&app, &shas[0], 10.0).await;
    store(&app, &shas[1], 20.0).await;
    let before = everything_read(&app, &shas).await;
    app.reopen().await.unwrap();
    assert_eq!(rows_in_tables(&app).await, (0, 6));
    assert_eq!(everything_read(&app, &shas).await, before);
    // The new process counted what was staged: a threshold of 7 merges at the next upload.
    assert_eq!(app.state.db.staged_pending(), 6);
    app.state.db.set_merge_threshold(7);
    store(&app, &shas[1], 25.0).await;
    assert_eq!(rows_in_tables(&app).await, (9, 0));
    assert_eq!(parse_time(&app, &shas[1]).await, 25.0);
}

#[tokio::test]
async fn deleting_a_run_a_commit_or_a_series_deletes_its_staged_rows_too() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(3).await;
    store(&app, &shas[0], 10.0).await;
    app.state.db.merge_staged().await.unwrap();
    store(&app, &shas[0], 11.0).await;
    store(&app, &shas[1], 20.0).await;
    store(&app, &shas[2], 30.0).await;
    assert_eq!(rows_in_tables(&app).await, (3, 9));
    // As a database edited by hand, or a future retention, deletes: foreign keys on.
    let pool = raw_pool(&app).await;
    let delete = |sql: &'static str| {
        let pool = pool.clone();
        async move { sqlx::query(sql).execute(&pool).await.unwrap() }
    };
    delete("DELETE FROM runs WHERE id = (SELECT max(run_id) FROM measurements_staged)").await;
    assert_eq!(rows_in_tables(&app).await, (3, 6));
    // A commit's runs go by cascade, and with them its rows in both tables.
    let first = commit_id(&app, &shas[0]).await;
    sqlx::query("DELETE FROM commits WHERE id = ?")
        .bind(first)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(rows_in_tables(&app).await, (0, 3));
    delete("DELETE FROM series WHERE metric = 'instructions'").await;
    assert_eq!(rows_in_tables(&app).await, (0, 2));
    let orphans: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM measurements_staged x
         WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = x.run_id AND r.commit_id = x.commit_id)
            OR NOT EXISTS (SELECT 1 FROM series s WHERE s.id = x.series_id)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(orphans, 0);
    pool.close().await;
    assert_eq!(app.state.db.merge_staged().await.unwrap().rows, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kymo_serve_merges_what_is_staged_once_nothing_was_staged_for_a_while() {
    use kymo_server::serve::{ServeOptions, start};
    let dir = tempfile::tempdir().unwrap();
    let running = start(ServeOptions {
        db: dir.path().join("kymo.db"),
        listen: "127.0.0.1:0".parse().unwrap(),
        embedded_worker: false,
        leases: kymo_core::db::LeaseSettings::default(),
        data_dir: dir.path().join("data"),
        public_url: None,
        worker_labels: Vec::new(),
        allow_unconfined_suites: false,
        suite_maximums: Default::default(),
        header_read_timeout: kymo_server::serve::HEADER_READ_TIMEOUT,
        merge_when_idle: Some(std::time::Duration::from_secs(4)),
        access: Default::default(),
    })
    .await
    .unwrap();
    let api = format!("http://{}/api/v1", running.address);
    let admin = std::fs::read_to_string(dir.path().join("kymo.db.admin-token")).unwrap();
    let repo = crate::support::TestRepo::new();
    let shas: Vec<String> = (0..3)
        .map(|i| repo.commit(&[("file", &format!("{i}"))], &format!("change {i}")))
        .collect();
    let body = json!({ "name": "r", "url": repo.path().to_str().unwrap() });
    let call = crate::delivery_loop::call;
    assert_eq!(
        call("POST", format!("{api}/repos"), body, &admin).await.0,
        201
    );
    for (i, sha) in shas.iter().enumerate() {
        let upload = upload(sha, 10.0 + i as f64);
        let (status, answer) = call("POST", format!("{api}/repos/r/results"), upload, &admin).await;
        assert_eq!(status, 201, "{answer}");
    }
    let stored = std::time::Instant::now();
    let db = &running.state.db;
    assert_eq!(db.staged_rows().await.unwrap(), 9);
    // Not before the server has been quiet for 4 s (ticks of 2 s), then at the next tick;
    // a worker's machine seen every 200 ms meanwhile is a write, not an upload.
    let machine: kymo_core::model::MachineSpecs = serde_json::from_value(specs()).unwrap();
    while db.staged_rows().await.unwrap() > 0 {
        assert!(stored.elapsed().as_secs() < 20, "not merged after 20 s");
        let seen = stored.elapsed().as_secs() as i64;
        db.upsert_machine(&machine, "worker", None, seen)
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(
        stored.elapsed().as_secs_f64() >= 3.5,
        "{:?}",
        stored.elapsed()
    );
    let (status, commit) = call(
        "GET",
        format!("{api}/repos/r/commits/{}", shas[2]),
        json!(null),
        &admin,
    )
    .await;
    assert_eq!(status, 200, "{commit}");
    let results = commit["results"].as_array().unwrap();
    let row = (results.iter())
        .find(|r| r["benchmark"] == "parse" && r["metric"] == "time")
        .unwrap();
    assert_eq!(row["value"], 12.0, "{commit}");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn every_window_over_commits_measured_many_times_shows_each_commits_latest_run() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(6).await;
    // Runs per commit: 1, 4, 1, 3, 5, 2, the newest of some staged, of others merged; a
    // commit's last run is worth 10 × its position + its run count.
    let runs = [1, 4, 1, 3, 5, 2];
    for (position, (sha, count)) in shas.iter().zip(runs).enumerate() {
        for run in 1..=count {
            store(&app, sha, (10 * position + run) as f64).await;
        }
        if position % 2 == 0 {
            app.state.db.merge_staged().await.unwrap();
        }
    }
    let db = &app.state.db;
    let series = parse_time_series(&app).await;
    let latest: Vec<(i64, f64)> = (runs.iter().enumerate())
        .map(|(position, count)| (position as i64, (10 * position + count) as f64))
        .collect();
    for until in 0..6_i64 {
        for limit in 1..=7_i64 {
            let end = until as usize + 1;
            let expected = &latest[end.saturating_sub(limit as usize)..end];
            let window = db.series_window(series, limit, Some(until), false).await;
            let seen: Vec<(i64, f64)> = (window.unwrap().iter())
                .map(|p| (p.point.position, p.point.value))
                .collect();
            assert_eq!(seen, expected, "the newest {limit} up to {until}");
            let points = db.series_points(series, limit, Some(until)).await.unwrap();
            assert_eq!(points.len(), expected.len());
            assert!(points.iter().all(|p| p.samples.len() == 3));
        }
    }
}

/// Every point of `series` up to position `until` as (position, sha, value): each commit's
/// winning run (staged, then the newest), the newest `limit`, read the plain way: every row of
/// both tables.
async fn window_read_whole(
    pool: &SqlitePool,
    series: i64,
    limit: i64,
    until: Option<i64>,
) -> Vec<(i64, String, f64)> {
    let rows: Vec<(i64, String, bool, i64, f64)> = sqlx::query_as(
        "SELECT c.position, c.sha, x.staged, x.run_id, x.value
         FROM (SELECT commit_id, run_id, value, 1 AS staged FROM measurements_staged
               WHERE series_id = ?1
               UNION ALL
               SELECT commit_id, run_id, value, 0 FROM measurements WHERE series_id = ?1) x
         JOIN commits c ON c.id = x.commit_id
         WHERE c.position IS NOT NULL",
    )
    .bind(series)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut winners = std::collections::BTreeMap::new();
    for (position, sha, staged, run, value) in rows {
        if until.is_some_and(|u| position > u) {
            continue;
        }
        let held = winners
            .entry(position)
            .or_insert((false, i64::MIN, sha, value));
        if (staged, run) > (held.0, held.1) {
            (held.0, held.1, held.3) = (staged, run, value);
        }
    }
    let points: Vec<(i64, String, f64)> = (winners.into_iter())
        .map(|(position, (_, _, sha, value))| (position, sha, value))
        .collect();
    let keep = points.len().saturating_sub(limit.max(0) as usize);
    points[keep..].to_vec()
}

/// A benchmark page reads its series in one walk (`Db::series_windows`). Each window is what
/// a plain read of every row gives, for every limit and end, over commits measured 1–5 times,
/// staged and merged, the oldest measured again and staged, and a series measured at only
/// some commits (its walk goes further down than the others'); with the commits' ids close
/// together (their runs read as a range of ids) and far apart (read by their ids).
#[tokio::test]
async fn windows_read_together_equal_every_row_read_plainly() {
    for ids_apart in [false, true] {
        let app = TestApp::new().await;
        let (_repo, shas) = app.tracked_repository(8).await;
        let pool = raw_pool(&app).await;
        if ids_apart {
            // Nothing refers to the commits yet.
            sqlx::query("UPDATE commits SET id = id * 1000")
                .execute(&pool)
                .await
                .unwrap();
        }
        let runs = [1, 4, 1, 3, 5, 2, 1, 2];
        for (position, (sha, count)) in shas.iter().zip(runs).enumerate() {
            for run in 1..=count {
                let level = (10 * position + run) as f64;
                let mut upload = upload(sha, level);
                if position % 3 != 0 {
                    // `render` measured at positions 0, 3 and 6 only.
                    let benchmarks = &mut upload["suites"][0]["results"]["benchmarks"];
                    benchmarks.as_array_mut().unwrap().pop();
                }
                let (status, answer) = app.post("/api/v1/repos/r/results", &upload).await;
                assert_eq!(status, StatusCode::CREATED, "{answer}");
            }
            if position % 2 == 0 {
                app.state.db.merge_staged().await.unwrap();
            }
        }
        // The oldest commit measured again, staged: older than merged points the walk may not
        // read.
        store(&app, &shas[0], 1.5).await;
        let db = &app.state.db;
        let repository = db.repository("r").await.unwrap().id;
        let series: Vec<i64> = (db.series(repository, None, None, None).await.unwrap())
            .iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(series.len(), 3);
        for until in [None, Some(0), Some(2), Some(4), Some(5), Some(7)] {
            for limit in 0..=9_i64 {
                for with_samples in [false, true] {
                    let together = db.series_windows(&series, limit, until, with_samples).await;
                    for (id, window) in series.iter().zip(together.unwrap()) {
                        let seen: Vec<(i64, String, f64)> = (window.into_iter())
                            .map(|p| (p.point.position, p.point.sha, p.point.value))
                            .collect();
                        assert_eq!(
                            seen,
                            window_read_whole(&pool, *id, limit, until).await,
                            "series {id}, the newest {limit} up to {until:?}, ids apart: {ids_apart}"
                        );
                    }
                }
            }
        }
        assert!(
            db.series_windows(&[], 5, None, false)
                .await
                .unwrap()
                .is_empty()
        );
        pool.close().await;
    }
}

#[tokio::test]
async fn a_merge_has_the_wal_copied_into_the_database_in_the_background() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(2).await;
    store(&app, &shas[0], 10.0).await;
    store(&app, &shas[1], 20.0).await;
    // In WAL mode only a checkpoint writes the database file itself.
    let file = || {
        let meta = std::fs::metadata(app.db_path()).unwrap();
        (meta.len(), meta.modified().unwrap())
    };
    let before = file();
    // The writer's own checkpoint waits for a far larger WAL: only the merge's copies it.
    app.state.db.merge_staged().await.unwrap();
    for waited in 0.. {
        if file() != before {
            break;
        }
        assert!(waited < 100, "the WAL was not copied 10 s after the merge");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(rows_in_tables(&app).await, (6, 0));
}
