//! The worker protocol of comparison jobs, spoken by hand: a completion that does not fit its
//! job (suites for a comparison, rounds for a commit, too few rounds) is refused whole and
//! fails the job with the reason; a retried comparison job is a comparison job again.

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::api::{TestApp, specs};
use crate::support::TestRepo;

async fn claim(app: &TestApp, token: &str) -> Value {
    let claim = json!({ "specs": specs(), "environment": environment() });
    let (status, answer) = (app)
        .request(
            "POST",
            "/api/v1/worker/claim",
            Body::from(claim.to_string()),
            Some(token),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["job"].clone()
}

fn environment() -> Value {
    json!({ "kernel": "6.1", "toolchain": "rustc", "governor": "performance", "hostname": "h" })
}

async fn complete(app: &TestApp, token: &str, job: &Value, outcome: Value) -> (StatusCode, Value) {
    let done =
        json!({ "lease_id": job["lease_id"], "environment": environment(), "outcome": outcome });
    let path = format!("/api/v1/worker/jobs/{}/complete", job["id"]);
    app.request("POST", &path, Body::from(done.to_string()), Some(token))
        .await
}

fn suites() -> Value {
    json!([{ "suite": "s", "results": { "benchmarks": [{ "name": "parse", "metrics": [
        { "name": "time", "unit": "ns", "direction": "lower", "value": 100.0 }] }] } }])
}

/// Repository `r` with two commits, tracked: the repository and the commits (base, head).
async fn two_commits(app: &TestApp) -> (TestRepo, String, String) {
    let repo = TestRepo::new();
    let base = repo.commit(&[("file", "0")], "first");
    let head = repo.commit(&[("file", "1")], "second");
    let body = json!({ "name": "r", "url": repo.path().to_str().unwrap(), "branch": "main" });
    assert_eq!(
        app.post("/api/v1/repos", &body).await.0,
        StatusCode::CREATED
    );
    (repo, base, head)
}

#[tokio::test]
async fn completions_that_do_not_fit_a_comparison_job_are_refused_and_fail_it() {
    let app = TestApp::new().await;
    let (_repo, base, head) = two_commits(&app).await;
    let token = (app.state.db)
        .create_token("w", kymo_core::db::TokenScope::Worker, 0)
        .await
        .unwrap();

    let (status, queued) = app
        .post(
            "/api/v1/repos/r/try",
            &json!({ "commit": head, "base": base, "rounds": 3 }),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    for bad in [
        json!({ "commit": head, "rounds": 0 }),
        json!({ "commit": head, "rounds": 99 }),
        json!({ "commit": "-x" }),
        json!({ "commit": head, "extra": 1 }),
    ] {
        let (status, answer) = app.post("/api/v1/repos/r/try", &bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {answer}");
    }

    // The claimed job names its base and rounds; suites instead of rounds are refused.
    let job = claim(&app, &token).await;
    assert_eq!(job["commit"], head.as_str());
    assert_eq!(job["comparison"]["base"], base.as_str());
    assert_eq!(job["comparison"]["rounds"], 3);
    assert_eq!(
        job["comparison"]["budget_seconds"],
        Value::Null,
        "exactly 3 rounds: {job}"
    );
    let succeeded = json!({ "status": "succeeded", "suites": suites(), "log": "" });
    let (status, answer) = complete(&app, &token, &job, succeeded).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    let (_, row) = app.get(&format!("/api/v1/jobs/{}", job["id"])).await;
    assert_eq!(row["state"], "failed");
    assert!(
        row["error"].as_str().unwrap().contains("comparison job"),
        "{row}"
    );

    // Retried, it is a comparison job again; two rounds where three were asked are refused.
    let (status, retried) = app
        .post(&format!("/api/v1/jobs/{}/retry", job["id"]), &json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{retried}");
    let job = claim(&app, &token).await;
    assert_eq!(job["comparison"]["rounds"], 3, "{job}");
    let round = json!({ "base": suites(), "head": suites() });
    let short = json!({ "status": "compared", "rounds": [round, round], "log": "" });
    let (status, answer) = complete(&app, &token, &job, short).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("2 rounds were sent"),
        "{answer}"
    );

    // Rounds for a job that measures one commit are refused too.
    let (status, _) = app
        .post("/api/v1/repos/r/runs", &json!({ "commit": head }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let job = claim(&app, &token).await;
    assert!(job["comparison"].is_null(), "{job}");
    let rounds = json!({ "status": "compared", "rounds": [round, round, round], "log": "" });
    let (status, _) = complete(&app, &token, &job, rounds).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // Nothing of it reached the comparison or the branch's series.
    let id = queued["comparison"].as_i64().unwrap();
    let (_, view) = app.get(&format!("/api/v1/repos/r/comparisons/{id}")).await;
    assert_eq!(view["rounds_run"], 0, "{view}");
    assert!(view["report"].is_null());
    let (_, series) = app.get("/api/v1/repos/r/series?benchmark=parse").await;
    assert!(series.as_array().unwrap().is_empty(), "{series}");
}

/// The database file opened past the application.
async fn raw_pool(app: &TestApp) -> sqlx::SqlitePool {
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(app.db_path());
    sqlx::SqlitePool::connect_with(options).await.unwrap()
}

/// The `comparisons` table's stored definition and how many comparisons and comparison jobs
/// the database holds, read past the application.
async fn comparisons_on_disk(app: &TestApp) -> (String, i64, i64) {
    let pool = raw_pool(app).await;
    let found = sqlx::query_as(
        "SELECT (SELECT sql FROM sqlite_schema WHERE name = 'comparisons'),
                (SELECT count(*) FROM comparisons),
                (SELECT count(*) FROM jobs WHERE comparison_id IS NOT NULL)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    found
}

#[tokio::test]
async fn a_database_from_before_forty_rounds_keeps_its_comparisons_and_takes_forty() {
    let mut app = TestApp::new().await;
    let (_repo, base, head) = two_commits(&app).await;
    let ask = |rounds: i64| json!({ "commit": head, "base": base, "rounds": rounds });
    assert_eq!(
        app.post("/api/v1/repos/r/try", &ask(20)).await.0,
        StatusCode::ACCEPTED
    );

    // As a database was before migration 0039: at most 20 rounds, the migration not applied.
    let pool = raw_pool(&app).await;
    sqlx::raw_sql(
        "PRAGMA writable_schema = ON;
         UPDATE sqlite_schema SET sql = replace(sql, 'BETWEEN 1 AND 40', 'BETWEEN 1 AND 20')
          WHERE name = 'comparisons';
         PRAGMA writable_schema = RESET;
         DELETE FROM _sqlx_migrations WHERE version = 39;",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let (old, comparisons, jobs) = comparisons_on_disk(&app).await;
    assert!(old.contains("CHECK (rounds BETWEEN 1 AND 20)"), "{old}");
    assert_eq!((comparisons, jobs), (1, 1));

    app.reopen().await.unwrap();
    let (new, comparisons, jobs) = comparisons_on_disk(&app).await;
    assert!(new.contains("CHECK (rounds BETWEEN 1 AND 40)"), "{new}");
    assert_eq!(
        new.replace("AND 40", "AND 20"),
        old,
        "nothing else of the table changed"
    );
    // The comparison and its job outlived the migration: nothing cascaded.
    assert_eq!((comparisons, jobs), (1, 1));
    assert_eq!(
        app.post("/api/v1/repos/r/try", &ask(40)).await.0,
        StatusCode::ACCEPTED
    );
    let (status, refused) = app.post("/api/v1/repos/r/try", &ask(41)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(comparisons_on_disk(&app).await.1, 2);
}
