//! Backfill through the real router: `A..B` and `last` choose exactly the first-parent commits
//! asked for, what is queued or measured is skipped, history ranks below pushed heads, and
//! bad ranges change nothing.

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::api::TestApp;
use crate::commit_status::TestWorker;
use crate::support::TestRepo;

/// A tracked repository with `n` commits, oldest first; returns it and their shas.
async fn history(app: &TestApp, n: usize) -> (TestRepo, Vec<String>) {
    let repo = TestRepo::new();
    let shas: Vec<String> = (0..n)
        .map(|i| repo.commit(&[("src/lib/code.rs", &format!("// {i}"))], &format!("c{i}")))
        .collect();
    let (status, body) = app
        .post(
            "/api/v1/repos",
            &json!({ "name": "r", "url": repo.path().to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    (repo, shas)
}

fn strings(value: &Value) -> Vec<String> {
    let list = value.as_array().unwrap_or_else(|| panic!("{value}"));
    list.iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

async fn queued_jobs(app: &TestApp) -> Vec<Value> {
    let (_, jobs) = app.get("/api/v1/jobs").await;
    jobs.as_array().unwrap().clone()
}

#[tokio::test]
async fn a_range_queues_exactly_the_commits_after_its_start_up_to_its_end() {
    let app = TestApp::new().await;
    let (_repo, shas) = history(&app, 12).await;
    let (status, queued) = app
        .post(
            "/api/v1/repos/r/backfill",
            &json!({ "from": &shas[5][..8], "to": shas[9] }),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    let mut want: Vec<String> = shas[6..=9].to_vec();
    want.reverse();
    assert_eq!(strings(&queued["commits"]), want, "newest first");
    assert_eq!(queued["jobs"].as_array().unwrap().len(), 4);
    let jobs = queued_jobs(&app).await;
    assert!(jobs.iter().all(|j| j["reason"] == "history"), "{jobs:#?}");

    // Asked again, the same jobs wait: nothing is queued twice.
    let (_, again) = app
        .post(
            "/api/v1/repos/r/backfill",
            &json!({ "from": shas[5], "to": shas[9] }),
        )
        .await;
    assert_eq!(again["jobs"], queued["jobs"]);
    assert_eq!(queued_jobs(&app).await.len(), 4);
}

#[tokio::test]
async fn last_n_thinned_by_every_keeps_the_newest_and_every_kth() {
    let app = TestApp::new().await;
    let (_repo, shas) = history(&app, 10).await;
    let (status, queued) = app
        .post(
            "/api/v1/repos/r/backfill",
            &json!({ "last": 10, "every": 3 }),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    let want: Vec<String> = [9, 6, 3, 0].iter().map(|&i| shas[i].clone()).collect();
    assert_eq!(strings(&queued["commits"]), want);
    // The branch name and `~` work as `to`, as everywhere else.
    let (_, tail) = app
        .post(
            "/api/v1/repos/r/backfill",
            &json!({ "last": 2, "to": "main~1" }),
        )
        .await;
    assert_eq!(
        strings(&tail["commits"]),
        vec![shas[8].clone(), shas[7].clone()]
    );
}

#[tokio::test]
async fn a_pushed_head_is_claimed_before_hundreds_of_waiting_backfill_jobs() {
    let app = TestApp::new().await;
    let (repo, _) = history(&app, 300).await;
    let (status, queued) = app
        .post(
            "/api/v1/repos/r/backfill",
            &json!({ "last": 299, "to": "main~1" }),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(queued["jobs"].as_array().unwrap().len(), 299);
    let head = repo.commit(&[("src/lib/code.rs", "// new")], "pushed");
    let (status, _) = app
        .post("/api/v1/repos/r/runs", &json!({ "commit": head }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);

    let claimed = TestWorker::new(&app).await.claim().await;
    assert_eq!(claimed["commit"], head.as_str(), "{claimed}");
}

#[tokio::test]
async fn bad_backfill_requests_are_refused_and_queue_nothing() {
    let app = TestApp::new().await;
    let (_repo, shas) = history(&app, 4).await;
    let bad = [
        json!({}),
        json!({ "last": 0 }),
        json!({ "last": 2, "from": shas[0] }),
        json!({ "last": 2, "every": 0 }),
        json!({ "last": 4_000_000_000u64 }),
        json!({ "from": "no-such-ref" }),
        json!({ "from": "--upload-pack=evil" }),
        json!({ "from": shas[3], "to": shas[0] }),
        json!({ "last": "many" }),
        json!({ "last": 2, "unknown": true }),
    ];
    for body in bad {
        let (status, answer) = app.post("/api/v1/repos/r/backfill", &body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body} -> {answer}"
        );
        assert!(answer["error"].is_string(), "{answer}");
    }
    let (status, _) = app
        .request(
            "POST",
            "/api/v1/repos/r/backfill",
            Body::from(json!({ "last": 2 }).to_string()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(queued_jobs(&app).await.is_empty());
}

#[tokio::test]
async fn the_repository_pages_form_queues_history_for_an_admin() {
    let app = TestApp::new().await;
    let (_repo, _) = history(&app, 6).await;
    let status = app.form("/repos/r/backfill", "last=3&range=&every=").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(queued_jobs(&app).await.len(), 3);
    let status = app.form("/repos/r/backfill", "last=x&range=&every=").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let status = app.form("/repos/r/backfill", "range=nodots").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(queued_jobs(&app).await.len(), 3);
}

#[tokio::test]
async fn suites_kept_on_the_server_are_validated_before_anything_changes() {
    let app = TestApp::new().await;
    let (_repo, _) = history(&app, 1).await;
    let put = |toml: &str| Body::from(json!({ "toml": toml }).to_string());
    let admin = app.admin.clone();
    let good = "[[suite]]\nname = \"s\"\nrun = \"sh bench.sh\"\n";
    let huge = format!("# {}\n{good}", "x".repeat(70_000));
    for bad in [
        "",
        "[[suite]]\nname = \"s\"\n",
        "not toml at all ][",
        huge.as_str(),
    ] {
        let (status, answer) = app
            .request("PUT", "/api/v1/repos/r/suites", put(bad), Some(&admin))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert!(
            answer["error"].as_str().unwrap().starts_with("suites: "),
            "{answer}"
        );
    }
    let (status, _) = app.get("/api/v1/repos/r/suites").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was kept");
    let (status, _) = app
        .request("PUT", "/api/v1/repos/r/suites", put(good), None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app
        .request("PUT", "/api/v1/repos/r/suites", put(good), Some(&admin))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, kept) = app.get("/api/v1/repos/r/suites").await;
    assert_eq!(kept["toml"], good);
    let (status, _) = app
        .request(
            "DELETE",
            "/api/v1/repos/r/suites",
            Body::empty(),
            Some(&admin),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app.get("/api/v1/repos/r/suites").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_backfill_queues_again_the_commits_whose_jobs_failed_and_says_how_many() {
    let app = TestApp::new().await;
    let (_repo, shas) = history(&app, 3).await;
    let (status, first) = app
        .post("/api/v1/repos/r/backfill", &json!({ "last": 3 }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    assert_eq!(first["requeued"], 0);
    let worker = TestWorker::new(&app).await;
    let mut failed_commits = Vec::new();
    for _ in 0..3 {
        let job = worker.claim().await;
        failed_commits.push(job["commit"].as_str().unwrap().to_owned());
        let failure = json!({ "status": "failed", "log_tail": "error: could not compile `r`",
                              "error": "suite \"s\": the build command exited with status 101" });
        worker.complete(&job, failure).await;
    }
    failed_commits.sort();
    let mut all = shas.clone();
    all.sort();
    assert_eq!(failed_commits, all, "every commit failed once");

    // The same backfill again measures them again, and says so: none was ever measured.
    let (status, again) = app
        .post("/api/v1/repos/r/backfill", &json!({ "last": 3 }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{again}");
    assert_eq!(again["jobs"].as_array().unwrap().len(), 3, "{again}");
    assert_eq!(
        (again["requeued"].as_u64(), again["skipped"].as_u64()),
        (Some(3), Some(0))
    );
    let waiting = queued_jobs(&app).await;
    let queued = waiting.iter().filter(|j| j["state"] == "queued").count();
    assert_eq!(queued, 3, "{waiting:#?}");

    // Asked once more while they wait, nothing new is queued and nothing counts as retried.
    let (_, waiting_again) = app
        .post("/api/v1/repos/r/backfill", &json!({ "last": 3 }))
        .await;
    assert_eq!(waiting_again["jobs"], again["jobs"]);
    assert_eq!(waiting_again["requeued"], 0);

    // One succeeds this time: a later backfill leaves it alone and retries the other two.
    let job = worker.claim().await;
    let measured = job["commit"].as_str().unwrap().to_owned();
    let results = json!({ "benchmarks": [{ "name": "b", "metrics": [
        { "name": "time", "unit": "ns", "direction": "lower", "value": 10.0 }] }] });
    worker
        .complete(
            &job,
            json!({ "status": "succeeded", "log": "", "suites": [{ "suite": "s", "results": results }] }),
        )
        .await;
    for _ in 0..2 {
        let job = worker.claim().await;
        worker
            .complete(
                &job,
                json!({ "status": "failed", "log_tail": "", "error": "boom" }),
            )
            .await;
    }
    let (_, third) = app
        .post("/api/v1/repos/r/backfill", &json!({ "last": 3 }))
        .await;
    assert_eq!(
        (third["requeued"].as_u64(), third["skipped"].as_u64()),
        (Some(2), Some(1)),
        "{third}"
    );
    let waiting = queued_jobs(&app).await;
    assert!(
        waiting
            .iter()
            .filter(|j| j["state"] == "queued")
            .all(|j| j["sha"] != measured.as_str()),
        "the measured commit is not queued again: {waiting:#?}"
    );
}
