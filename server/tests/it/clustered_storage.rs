//! Issue 16, storage: migration 0025 clusters the measurements on (series, commit, run) in a
//! WITHOUT ROWID table. A database in the layout before it (a rowid table, the
//! `(series_id, commit_id)` index and `UNIQUE (run_id, series_id)`) is converted when opened
//! and gives back every row to the bit and the same pages; a conversion that fails leaves the
//! database as it was.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;

use crate::api::{TestApp, specs};

/// The measurements table of migration 0001, as every database before 0025 holds it.
const OLD_LAYOUT: &str = r#"
CREATE TABLE measurements_old (
    id        INTEGER PRIMARY KEY,
    run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    commit_id INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
    value     REAL    NOT NULL,
    samples   TEXT    NOT NULL,
    hdr       TEXT,
    UNIQUE (run_id, series_id)
);
INSERT INTO measurements_old (run_id, series_id, commit_id, value, samples, hdr)
SELECT run_id, series_id, commit_id, value, samples, hdr FROM measurements
ORDER BY run_id, series_id;
DROP TABLE measurements;
ALTER TABLE measurements_old RENAME TO measurements;
CREATE INDEX measurements_by_series ON measurements (series_id, commit_id);
DELETE FROM _sqlx_migrations WHERE version = 25;
"#;

/// One row as stored, every value by its bits: (series, commit, run, value bits, samples in
/// hex, storage class of the samples, hdr).
type StoredRow = (i64, i64, i64, i64, String, String, Option<String>);

fn upload(sha: &str, shift: f64) -> Value {
    let metric = |name: &str, samples: Vec<f64>| {
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        json!({ "name": name, "unit": "ns", "direction": "lower",
                "value": sorted[sorted.len() / 2], "samples": samples })
    };
    json!({ "commit": sha, "specs": specs(), "suites": [{ "suite": "s", "results": {
        "benchmarks": [
            { "name": "parse", "metrics": [
                metric("time", vec![992.2469488434278 + shift, 986.4030831480563, 989.7329122956687]),
                metric("instructions", vec![400000.0 + shift, 401230.0, 400000.0]),
            ] },
            { "name": "render", "metrics": [
                metric("time", vec![5e-324, 1.7976931348623157e308, 0.1 + shift]),
                { "name": "bytes", "unit": "B", "direction": "lower", "value": 12.5 + shift },
            ] },
        ] } }] })
}

/// Three commits, the middle one measured twice (a retry: its later run is the one shown).
async fn app_with_history() -> (TestApp, Vec<String>) {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(3).await;
    for (sha, shift) in [
        (&shas[0], 0.0),
        (&shas[1], 1.0),
        (&shas[1], 2.0),
        (&shas[2], 3.0),
    ] {
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &upload(sha, shift))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    // Uploads are staged first (migration 0028); what these tests put back into the old
    // layout is the clustered table.
    app.state.db.merge_staged().await.unwrap();
    (app, shas)
}

async fn raw_pool(app: &TestApp) -> SqlitePool {
    // Foreign keys off, as a database edited by hand or by an older SQLite may have been.
    let options = SqliteConnectOptions::new()
        .filename(app.db_path())
        .foreign_keys(false);
    SqlitePool::connect_with(options).await.unwrap()
}

async fn stored_rows(app: &TestApp) -> Vec<StoredRow> {
    let pool = raw_pool(app).await;
    let rows = sqlx::query_as(
        "SELECT series_id, commit_id, run_id, CAST(value AS REAL) AS v, hex(samples),
                typeof(samples), hdr
         FROM measurements ORDER BY series_id, commit_id, run_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    (rows.into_iter())
        .map(|(s, c, r, v, x, t, h): (i64, i64, i64, f64, _, _, _)| {
            (s, c, r, v.to_bits() as i64, x, t, h)
        })
        .collect()
}

async fn table_sql(app: &TestApp) -> String {
    let pool = raw_pool(app).await;
    let sql = sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE name = 'measurements'")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    sql
}

async fn to_old_layout(app: &TestApp) {
    let pool = raw_pool(app).await;
    sqlx::raw_sql(OLD_LAYOUT).execute(&pool).await.unwrap();
    pool.close().await;
}

/// What readers show of the history: each commit as the API gives it (with its parent's
/// values), a series' points, and the compare page.
async fn what_readers_see(app: &TestApp, shas: &[String]) -> Vec<Value> {
    let mut seen = Vec::new();
    for sha in shas {
        let (status, commit) = app.get(&format!("/api/v1/repos/r/commits/{sha}")).await;
        assert_eq!(status, StatusCode::OK, "{commit}");
        seen.push(commit["results"].clone());
    }
    for metric in ["time", "instructions"] {
        let path = format!("/api/v1/repos/r/series?benchmark=parse&metric={metric}");
        let (status, series) = app.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{series}");
        seen.push(series);
    }
    seen
}

#[tokio::test]
async fn an_old_layout_database_is_converted_to_the_bit_and_reads_the_same() {
    let (mut app, shas) = app_with_history().await;
    let rows = stored_rows(&app).await;
    assert_eq!(rows.len(), 16, "4 runs × 4 measurements");
    let seen = what_readers_see(&app, &shas).await;
    // The retried commit shows its later run.
    let retried = seen[1].as_array().unwrap();
    let bytes = retried.iter().find(|r| r["metric"] == "bytes").unwrap();
    assert_eq!(bytes["value"], 14.5, "{bytes}");
    assert_eq!(bytes["parent_value"], 12.5, "{bytes}");

    to_old_layout(&app).await;
    assert!(
        table_sql(&app)
            .await
            .contains("id        INTEGER PRIMARY KEY")
    );
    assert_eq!(stored_rows(&app).await, rows);

    app.reopen().await.unwrap();
    let sql = table_sql(&app).await;
    assert!(sql.contains("WITHOUT ROWID"), "{sql}");
    assert_eq!(stored_rows(&app).await, rows);
    assert_eq!(what_readers_see(&app, &shas).await, seen);
    let pool = raw_pool(&app).await;
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'measurements'
         AND sql IS NOT NULL",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert!(indexes.is_empty(), "{indexes:?}");

    // Ingest goes on in the new layout.
    let (status, answer) = app
        .post("/api/v1/repos/r/results", &upload(&shas[2], 4.0))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    // Staged first (migration 0028), then merged into the clustered table.
    assert_eq!(stored_rows(&app).await.len(), 16);
    assert_eq!(app.state.db.merge_staged().await.unwrap().rows, 4);
    assert_eq!(stored_rows(&app).await.len(), 20);
}

#[tokio::test]
async fn a_conversion_that_fails_leaves_the_database_as_it_was() {
    let (mut app, _shas) = app_with_history().await;
    to_old_layout(&app).await;
    // A measurement whose series is gone (stored with foreign keys off): the new table's
    // foreign key refuses it, and the migration's transaction rolls back.
    let pool = raw_pool(&app).await;
    sqlx::query(
        "INSERT INTO measurements (run_id, series_id, commit_id, value, samples)
         SELECT run_id, 999999, commit_id, 1.0, samples FROM measurements LIMIT 1",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let rows = stored_rows(&app).await;
    let sql = table_sql(&app).await;

    let error = app.reopen().await.unwrap_err().to_string();
    assert!(error.contains("FOREIGN KEY"), "{error}");
    assert_eq!(table_sql(&app).await, sql);
    assert_eq!(stored_rows(&app).await, rows);
    assert_eq!(rows.len(), 17);
    let pool = raw_pool(&app).await;
    let state: (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM _sqlx_migrations WHERE version = 25),
                (SELECT count(*) FROM sqlite_master WHERE name = 'measurements_clustered')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(state, (0, 0));
}

#[tokio::test]
async fn a_database_from_before_binary_samples_goes_through_both_conversions() {
    let (mut app, shas) = app_with_history().await;
    to_old_layout(&app).await;
    // As kymo left it before migration 0022: samples as JSON text, neither 0022 nor 0025 run.
    let pool = raw_pool(&app).await;
    sqlx::raw_sql(
        "UPDATE measurements SET samples = '[1.5,2.5,1e-300]';
         DROP TABLE samples_conversion;
         DELETE FROM _sqlx_migrations WHERE version = 22;",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert!(
        (stored_rows(&app).await.iter()).all(|r| r.5 == "text"),
        "every row is text before"
    );

    app.reopen().await.unwrap();
    assert!(table_sql(&app).await.contains("WITHOUT ROWID"));
    let rows = stored_rows(&app).await;
    assert_eq!(rows.len(), 16);
    assert!(rows.iter().all(|r| r.5 == "blob"), "{rows:?}");
    let (status, commit) = app
        .get(&format!("/api/v1/repos/r/commits/{}", shas[1]))
        .await;
    assert_eq!(status, StatusCode::OK, "{commit}");
    for result in commit["results"].as_array().unwrap() {
        assert_eq!(result["samples"], json!([1.5, 2.5, 1e-300]), "{result}");
    }
}
