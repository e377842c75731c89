//! Issue 16, storage: samples are stored in a compact binary encoding; a database whose
//! samples are JSON text (written before migration 0022) is converted when it is opened and
//! gives every sample back exactly; stored bytes that do not decode give a clear error.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;

use crate::api::{TestApp, specs};

/// Samples of every shape a tool gives: full mantissas, integers, repeats, none, extremes.
fn metrics() -> Value {
    json!([
        { "name": "noisy", "unit": "ns", "direction": "lower", "value": 989.7329122956687,
          "samples": [992.2469488434278, 986.4030831480563, 989.7329122956687, 999.5245184353574] },
        { "name": "integer", "unit": "ns", "direction": "lower", "value": 400000.0,
          "samples": [400000.0, 401230.0, 399871.0, 400000.0, 400000.0] },
        { "name": "single", "unit": "ns", "direction": "lower", "value": 12.5 },
        { "name": "extreme", "unit": "B/s", "direction": "higher", "value": 1.0,
          "samples": [5e-324, 1.7976931348623157e308, 0.1, 0.0, 1e-300] },
    ])
}

async fn app_with_samples() -> (TestApp, String) {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let upload = json!({ "commit": sha, "specs": specs(), "suites": [{ "suite": "s",
        "results": { "benchmarks": [{ "name": "b", "metrics": metrics() }] } }] });
    let (status, answer) = app.post("/api/v1/repos/r/results", &upload).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    // Uploads are staged first (migration 0028); the rows these tests rewrite by hand, as an
    // older kymo stored them, are those of the clustered table.
    app.state.db.merge_staged().await.unwrap();
    (app, sha)
}

/// The samples of each metric as the API shows them.
async fn samples_shown(app: &TestApp, sha: &str) -> Vec<(String, Value)> {
    let (status, commit) = app.get(&format!("/api/v1/repos/r/commits/{sha}")).await;
    assert_eq!(status, StatusCode::OK, "{commit}");
    let mut shown: Vec<(String, Value)> = (commit["results"].as_array().unwrap().iter())
        .map(|r| {
            (
                r["metric"].as_str().unwrap().to_owned(),
                r["samples"].clone(),
            )
        })
        .collect();
    shown.sort_by(|a, b| a.0.cmp(&b.0));
    shown
}

async fn raw_pool(app: &TestApp) -> SqlitePool {
    let options = SqliteConnectOptions::new().filename(app.db_path());
    SqlitePool::connect_with(options).await.unwrap()
}

/// Puts the database back as a kymo from before migration 0022 left it: every measurement's
/// samples as the JSON text it stored, and the migration not applied.
async fn downgrade_to_text(app: &TestApp, texts: &[(&str, &str)]) {
    let pool = raw_pool(app).await;
    for (metric, text) in texts {
        sqlx::query(
            "UPDATE measurements SET samples = ?
             WHERE series_id = (SELECT id FROM series WHERE metric = ?)",
        )
        .bind(*text)
        .bind(*metric)
        .execute(&pool)
        .await
        .unwrap();
    }
    sqlx::query("DROP TABLE samples_conversion")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 22")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}

async fn series_id(app: &TestApp, metric: &str) -> i64 {
    let pool = raw_pool(app).await;
    let id = sqlx::query_scalar("SELECT id FROM series WHERE metric = ?")
        .bind(metric)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    id
}

async fn storage_classes(app: &TestApp) -> Vec<String> {
    let pool = raw_pool(app).await;
    let classes = sqlx::query_scalar("SELECT DISTINCT typeof(samples) FROM measurements")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    classes
}

/// The texts the old ingest stored (serde_json's shortest round-trip form, `[]` for none),
/// and spellings a hand-edited or older database may hold.
const OLD_TEXTS: [(&str, &str); 4] = [
    (
        "noisy",
        "[992.2469488434278,986.4030831480563,989.7329122956687,999.5245184353574]",
    ),
    ("integer", "[4e5, 401230, 399871.0 ,400000.000,4.0E+5]"),
    ("single", "[]"),
    ("extreme", "[5e-324,1.7976931348623157e308,0.1,0.0,1e-300]"),
];

#[tokio::test]
async fn samples_are_stored_as_bytes_and_shown_as_numbers() {
    let (app, sha) = app_with_samples().await;
    assert_eq!(storage_classes(&app).await, ["blob"]);
    let shown = samples_shown(&app, &sha).await;
    // As the server read them: serde_json parses the upload's text (without its
    // `float_roundtrip` feature, a few full-mantissa decimals land one ulp away).
    let uploaded: Value = serde_json::from_str(&metrics().to_string()).unwrap();
    let expected: Vec<(String, Value)> = {
        let mut m: Vec<(String, Value)> = (uploaded.as_array().unwrap().iter())
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_owned(),
                    m.get("samples").cloned().unwrap_or(json!([])),
                )
            })
            .collect();
        m.sort_by(|a, b| a.0.cmp(&b.0));
        m
    };
    assert_eq!(shown, expected);
}

#[tokio::test]
async fn a_database_with_json_text_samples_is_converted_when_opened_and_loses_nothing() {
    let (mut app, sha) = app_with_samples().await;
    let before = samples_shown(&app, &sha).await;
    downgrade_to_text(&app, &OLD_TEXTS).await;
    assert_eq!(storage_classes(&app).await, ["text"]);

    app.reopen().await.unwrap();
    assert_eq!(storage_classes(&app).await, ["blob"]);
    assert_eq!(samples_shown(&app, &sha).await, before);
    // Exact to the bit, not only equal after printing.
    let series = series_id(&app, "extreme").await;
    let points = app.state.db.series_points(series, 10, None).await.unwrap();
    let bits: Vec<u64> = points[0].samples.iter().map(|v| v.to_bits()).collect();
    let want: Vec<u64> = [5e-324, f64::MAX, 0.1, 0.0, 1e-300]
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(bits, want);
    // Done once: opening again finds nothing left to convert.
    let pool = raw_pool(&app).await;
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM samples_conversion")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert_eq!(pending, 0);
    app.reopen().await.unwrap();
    assert_eq!(samples_shown(&app, &sha).await, before);
}

#[tokio::test]
async fn text_that_is_not_a_json_array_of_numbers_stops_the_conversion_and_changes_nothing() {
    let (mut app, _sha) = app_with_samples().await;
    let mut texts = OLD_TEXTS;
    texts[1] = ("integer", "[1, \"two\"]");
    downgrade_to_text(&app, &texts).await;
    let path = app.db_path();
    let error = app.reopen().await.unwrap_err().to_string();
    assert!(error.contains("not a JSON array of numbers"), "{error}");
    // The batch was rolled back: every row is still text, and the conversion is still due.
    let options = SqliteConnectOptions::new().filename(&path);
    let pool = SqlitePool::connect_with(options).await.unwrap();
    let classes: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT typeof(samples) FROM measurements")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(classes, ["text"]);
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM samples_conversion")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(pending, 1);
    pool.close().await;
}

#[tokio::test]
async fn stored_bytes_that_do_not_decode_give_a_clear_error() {
    let (app, sha) = app_with_samples().await;
    let pool = raw_pool(&app).await;
    // A sample cut short: the control byte promises 8 bytes, 3 follow.
    sqlx::query("UPDATE measurements SET samples = x'00010203'")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let series = series_id(&app, "noisy").await;
    let error = app
        .state
        .db
        .series_points(series, 10, None)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("truncated"), "{error}");
    let (status, _) = app.get(&format!("/api/v1/repos/r/commits/{sha}")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
}
