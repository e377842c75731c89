//! Hostile input through the real router on a real SQLite file: every oversized or malformed
//! field gets a clear 4xx and leaves every table as it was; markup in names, parameters,
//! commit messages and authors is shown escaped on every page, chart and JSON answer.

use axum::body::Body;
use axum::http::StatusCode;
use kymo_core::db::RowCounts;
use serde_json::{Value, json};

use crate::api::{TestApp, specs};

/// An upload of one benchmark whose fields are taken from `bench` and `metric`.
fn upload_of(sha: &str, bench: Value) -> Value {
    json!({ "commit": sha, "specs": specs(), "suites": [{ "suite": "s", "results": { "benchmarks": [bench] } }] })
}

fn bench_with(name: &str, params: Value, metric: Value) -> Value {
    json!({ "name": name, "params": params, "metrics": [metric] })
}

fn metric_with(name: &str, unit: &str, value: Value) -> Value {
    json!({ "name": name, "unit": unit, "direction": "lower", "value": value })
}

async fn counts(app: &TestApp) -> RowCounts {
    app.state.db.row_counts().await.unwrap()
}

/// The cases of [`every_oversized_or_malformed_field_is_refused_and_nothing_is_stored`]: what
/// is wrong, and the body that carries it.
fn hostile_uploads(sha: &str) -> Vec<(&'static str, Body)> {
    let ok_metric = || metric_with("time", "ns", json!(1.0));
    let bench = |b: Value| Body::from(upload_of(sha, b).to_string());
    let mut long_suite = upload_of(sha, bench_with("b", json!({}), ok_metric()));
    long_suite["suites"][0]["suite"] = json!("s".repeat(65));
    let mut long_kernel = upload_of(sha, bench_with("b", json!({}), ok_metric()));
    long_kernel["environment"] =
        json!({ "kernel": "k".repeat(100_000), "toolchain": "", "governor": "", "hostname": "h" });
    let mut huge_samples = ok_metric();
    huge_samples["samples"] = json!(vec![1.0; 100_001]);
    let mut negative_samples = ok_metric();
    negative_samples["samples"] = json!([1.0, -2.0]);
    let many_metrics: Vec<Value> = (0..65)
        .map(|i| metric_with(&format!("m{i}"), "ns", json!(1.0)))
        .collect();
    let many_metrics = json!({ "name": "b", "metrics": many_metrics });
    let nested_param = bench_with("b", json!({ "k": { "deeper": ["x"] } }), ok_metric());
    let mut nested = String::from("{\"commit\":\"");
    nested.push_str(sha);
    nested.push_str("\",\"specs\":");
    nested.push_str(&specs().to_string());
    nested.push_str(",\"suites\":");
    nested.push_str(&"[".repeat(10_000));
    vec![
        (
            "long benchmark name",
            bench(bench_with(&"b".repeat(201), json!({}), ok_metric())),
        ),
        (
            "control character in a name",
            bench(bench_with("a\u{7}b", json!({}), ok_metric())),
        ),
        (
            "empty benchmark name",
            bench(bench_with("", json!({}), ok_metric())),
        ),
        (
            "long metric name",
            bench(bench_with(
                "b",
                json!({}),
                metric_with(&"m".repeat(65), "ns", json!(1.0)),
            )),
        ),
        (
            "long unit",
            bench(bench_with(
                "b",
                json!({}),
                metric_with("time", &"u".repeat(33), json!(1.0)),
            )),
        ),
        (
            "long parameter key",
            bench(bench_with("b", json!({ "k".repeat(65): "v" }), ok_metric())),
        ),
        (
            "long parameter value",
            bench(bench_with(
                "b",
                json!({ "k": "v".repeat(201) }),
                ok_metric(),
            )),
        ),
        ("parameter that is an object", bench(nested_param)),
        ("long suite name", Body::from(long_suite.to_string())),
        ("long environment fact", Body::from(long_kernel.to_string())),
        (
            "too many samples",
            bench(bench_with("b", json!({}), huge_samples)),
        ),
        ("too many metrics", bench(many_metrics)),
        (
            "negative duration",
            bench(bench_with(
                "b",
                json!({}),
                metric_with("time", "ns", json!(-5.0)),
            )),
        ),
        (
            "negative duration sample",
            bench(bench_with("b", json!({}), negative_samples)),
        ),
        (
            "NaN",
            Body::from(
                upload_of(sha, bench_with("b", json!({}), ok_metric()))
                    .to_string()
                    .replace("1.0", "NaN"),
            ),
        ),
        (
            "infinity",
            Body::from(
                upload_of(sha, bench_with("b", json!({}), ok_metric()))
                    .to_string()
                    .replace("1.0", "1e400"),
            ),
        ),
        (
            "string for a number",
            bench(bench_with(
                "b",
                json!({}),
                metric_with("time", "ns", json!("1.0")),
            )),
        ),
        (
            "long commit",
            Body::from(
                upload_of(
                    &"a".repeat(1_000_000),
                    bench_with("b", json!({}), ok_metric()),
                )
                .to_string(),
            ),
        ),
        ("deeply nested suites", Body::from(nested)),
        ("non-UTF-8 in a name", {
            let mut bytes = upload_of(sha, bench_with("XX", json!({}), ok_metric()))
                .to_string()
                .into_bytes();
            let at = bytes.windows(2).position(|w| w == b"XX").unwrap();
            bytes[at] = 0xc3;
            bytes[at + 1] = 0x28;
            Body::from(bytes)
        }),
        (
            "unknown commit",
            Body::from(
                upload_of(&"ab".repeat(20), bench_with("b", json!({}), ok_metric())).to_string(),
            ),
        ),
        (
            "no suites",
            Body::from(json!({ "commit": sha, "specs": specs(), "suites": [] }).to_string()),
        ),
    ]
}

#[tokio::test]
async fn every_oversized_or_malformed_field_is_refused_and_nothing_is_stored() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let before = counts(&app).await;
    for (what, body) in hostile_uploads(&sha) {
        let (status, answer) = app
            .request("POST", "/api/v1/repos/r/results", body, Some(&app.admin))
            .await;
        assert!(status.is_client_error(), "{what}: {status} {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(!error.is_empty(), "{what}: no JSON error in {answer}");
        assert_eq!(counts(&app).await, before, "{what} stored something");
    }
    // The same fixture with sane fields is stored: the refusals above were about the field.
    let fine = upload_of(
        &sha,
        bench_with(
            "b",
            json!({ "k": "v" }),
            metric_with("time", "ns", json!(1.0)),
        ),
    );
    let (status, answer) = app.post("/api/v1/repos/r/results", &fine).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(counts(&app).await.measurements, before.measurements + 1);
}

#[tokio::test]
async fn oversized_repository_fields_commits_and_query_parameters_are_refused() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let before = counts(&app).await;
    let repos = [
        json!({ "name": "n".repeat(65), "url": "/tmp", "branch": "main" }),
        json!({ "name": "<b>x</b>", "url": "/tmp", "branch": "main" }),
        json!({ "name": "ok", "url": "/".repeat(2049), "branch": "main" }),
        json!({ "name": "ok", "url": "/tmp\n", "branch": "main" }),
        json!({ "name": "ok", "url": "/tmp", "branch": "b".repeat(201) }),
        json!({ "name": "ok", "url": "/tmp", "branch": "a/../../b" }),
        json!({ "name": ["nested"], "url": "/tmp", "branch": "main" }),
    ];
    for body in repos {
        let (status, answer) = app.post("/api/v1/repos", &body).await;
        assert!(status.is_client_error(), "{body}: {status} {answer}");
    }
    for commit in ["x".repeat(100_000), "HEAD~1; rm -rf /".into(), "-n".into()] {
        let (status, answer) = app
            .post("/api/v1/repos/r/runs", &json!({ "commit": commit }))
            .await;
        assert!(
            status.is_client_error(),
            "run {commit:.20}: {status} {answer}"
        );
    }
    // Just under the longest URI the `http` crate accepts.
    let long = "q".repeat(60_000);
    for path in [
        format!("/api/v1/repos/r/series?benchmark={long}"),
        format!("/api/v1/repos/r/series?limit={long}"),
        "/api/v1/repos/r/series?limit=-5&bogus=1".into(),
        format!("/api/v1/repos/r/commits/{long}"),
        format!("/api/v1/repos/r/compare?base={sha}&head={long}"),
        format!("/repos/r/compare/{sha}...{long}"),
        format!("/repos/r/benchmarks/{long}"),
    ] {
        let (status, answer) = app.get(&path).await;
        assert!(
            status.is_client_error(),
            "{:.60}: {status} {answer:.200}",
            path
        );
    }
    assert_eq!(counts(&app).await, before);
}

/// `count` benchmarks named `b0`, `b1`... with one metric each.
fn benchmarks(count: usize, offset: usize) -> Vec<Value> {
    (offset..offset + count)
        .map(|i| {
            bench_with(
                &format!("b{i}"),
                json!({}),
                metric_with("time", "ns", json!(1.0)),
            )
        })
        .collect()
}

/// The API takes no more benchmarks in a suite than `kymo upload` and a worker do, and a
/// commit's answers stay bounded however many results its runs hold.
#[tokio::test]
async fn uploads_hold_the_parsers_limit_and_commit_answers_come_a_page_at_a_time() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let before = counts(&app).await;
    let over = json!({ "commit": sha, "specs": specs(), "suites": [
        { "suite": "s", "results": { "benchmarks": benchmarks(10_001, 0) } }] });
    let (status, answer) = app.post("/api/v1/repos/r/results", &over).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer:.300}");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(error.contains("10001 benchmarks; at most 10000"), "{error}");
    assert_eq!(counts(&app).await, before, "nothing stored");

    let total = 12_000;
    let split = json!({ "commit": sha, "specs": specs(), "suites": [
        { "suite": "s", "results": { "benchmarks": benchmarks(6_000, 0) } },
        { "suite": "t", "results": { "benchmarks": benchmarks(6_000, 6_000) } }] });
    let (status, answer) = app.post("/api/v1/repos/r/results", &split).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");

    let commit = format!("/api/v1/repos/r/commits/{sha}");
    let (status, first) = app.get(&commit).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first["results"].as_array().unwrap().len(), 1_000);
    assert_eq!(
        (first["results_total"].as_i64(), first["next_from"].as_i64()),
        (Some(total), Some(1_000))
    );
    let (_, last) = app.get(&format!("{commit}?from=11500&limit=1000")).await;
    assert_eq!(last["results"].as_array().unwrap().len(), 500);
    assert_eq!(last["next_from"], Value::Null);
    let mut names = std::collections::BTreeSet::new();
    let mut from = Some(0);
    while let Some(at) = from {
        let (_, page) = app.get(&format!("{commit}?from={at}&limit=700")).await;
        for row in page["results"].as_array().unwrap() {
            assert!(names.insert(row["benchmark"].as_str().unwrap().to_owned()));
        }
        from = page["next_from"].as_i64();
    }
    assert_eq!(
        names.len() as i64,
        total,
        "the pages together hold every result once"
    );
    for bad in ["limit=0", "limit=1001", "from=-1", "from=x", "page=2"] {
        let (status, answer) = app.get(&format!("{commit}?{bad}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {answer}");
    }

    let (status, page) = app
        .request(
            "GET",
            &format!("/repos/r/commits/{sha}"),
            Body::empty(),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let page = page.as_str().unwrap();
    assert!(page.contains("Rows 1–200 of 12000"), "{:.2000}", page);
    assert!(page.contains("?from=200"), "a link to the next rows");
    assert!(page.len() < 300_000, "a page of {} bytes", page.len());
    let (_, page) = app
        .request(
            "GET",
            &format!("/repos/r/commits/{sha}?from=11900"),
            Body::empty(),
            None,
        )
        .await;
    assert!(page.as_str().unwrap().contains("Rows 11901–12000 of 12000"));
}

/// Markup that must never reach a page, a chart or a feed as markup.
const MARKUP: &str = "<script>alert(1)</script>";

/// An author whose name would end an HTML attribute if it were not escaped.
const AUTHOR: &str = "Eve\" onmouseover=\"alert(2)";

/// Percent-encodes everything but unreserved characters, as a browser encodes a path segment.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn markup_in_names_params_and_commits_is_escaped_everywhere() {
    let app = TestApp::new().await;
    let (repo, base) = app.with_repo().await;
    let git = git2::Repository::open(repo.path()).unwrap();
    // git refuses angle brackets in a signature; a quote that would end an attribute is allowed.
    let evil = git2::Signature::now(AUTHOR, "eve@example.com").unwrap();
    let parent = git.head().unwrap().peel_to_commit().unwrap();
    let tree = parent.tree().unwrap();
    let head = git
        .commit(
            Some("HEAD"),
            &evil,
            &evil,
            &format!("fix {MARKUP}\n\nbody {MARKUP}"),
            &tree,
            &[&parent],
        )
        .unwrap()
        .to_string();
    let name = format!("bench/{MARKUP}");
    for (sha, value) in [(&base, 10.0), (&head, 30.0)] {
        let samples: Vec<f64> = (0..20).map(|i| value + f64::from(i % 3)).collect();
        let metric = json!({ "name": format!("m{MARKUP}"), "unit": "<i>", "direction": "lower",
                             "value": value + 1.0, "samples": samples });
        let bench = bench_with(&name, json!({ MARKUP: MARKUP }), metric);
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &upload_of(sha, bench))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let key = format!("{name}{{{MARKUP}={MARKUP}}}");
    let pages = [
        "/".to_string(),
        "/repos/r".into(),
        format!("/repos/r/commits/{head}"),
        format!("/repos/r/benchmarks/{}", encoded(&key)),
        format!("/repos/r/compare/{base}...{head}"),
        format!("/repos/r/compare/{head}?sort={}", encoded(MARKUP)),
        "/repos/r/regressions".into(),
        "/queue".into(),
        "/machines".into(),
        format!("/repos/r/benchmarks/{}", encoded(MARKUP)),
        format!("/repos/r/compare/{}", encoded(MARKUP)),
    ];
    let mut seen_escaped = 0;
    for path in pages {
        let (status, body) = app.get(&path).await;
        let body = body
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| body.to_string());
        assert!(
            status != StatusCode::INTERNAL_SERVER_ERROR,
            "{path}: {body:.300}"
        );
        assert!(!body.contains("<script>alert"), "{path} shows raw markup");
        assert!(!body.contains("<i>"), "{path} shows a raw unit");
        assert!(
            !body.contains("\" onmouseover"),
            "{path} shows a raw author"
        );
        if body.contains("&lt;script&gt;") || body.contains("&#60;script&#62;") {
            seen_escaped += 1;
        }
    }
    assert!(
        seen_escaped >= 6,
        "the markup was shown escaped on only {seen_escaped} pages"
    );
    // JSON answers carry the text as data, to be escaped by whoever renders it.
    let (status, commit) = app.get(&format!("/api/v1/repos/r/commits/{head}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(commit.to_string().contains(MARKUP), "{commit}");
    let (_, regressions) = app.get("/api/v1/repos/r/regressions").await;
    assert!(regressions.is_array(), "{regressions}");
}
