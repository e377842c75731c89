//! Alerts end to end: real regressions from uploaded results, channels added through the
//! API, messages delivered to local listeners by the delivery loop's tick under a manual
//! clock, retried with back-off, logged, and never sent twice.

use axum::body::Body;
use axum::http::StatusCode;
use kymo_server::alerts::{MAX_ATTEMPTS, backoff_seconds, deliver_once, regressions_found};
use serde_json::{Value, json};

use crate::api::{TestApp, specs};
use crate::listener::{Listener, closed_url};
use crate::support::TestRepo;
use crate::verdicts::jittered;

/// A benchmark name a hostile suite could print.
const HOSTILE: &str = "<b>parse</b> @everyone <!channel> *x*";

/// Results of commit `i`: `HOSTILE` steps up 20 % at commit 16 (a regression), `steady`
/// steps down at the same commit (an improvement, which alerts nobody).
pub fn upload(sha: &str, i: usize) -> Value {
    let (slow, steady) = if i < 16 { (100.0, 50.0) } else { (120.0, 40.0) };
    let metric = |level: f64| {
        json!([{ "name": "time", "unit": "ns", "direction": "lower",
                 "value": level, "samples": jittered(level, i) }])
    };
    json!({
        "commit": sha,
        "specs": specs(),
        "suites": [{ "suite": "s", "results": { "benchmarks": [
            { "name": HOSTILE, "metrics": metric(slow) },
            { "name": "steady", "metrics": metric(steady) }
        ]}}]
    })
}

/// A tracked repository `r` whose history holds one regression and one improvement; returns
/// the shas and the ids of every change point found.
pub async fn repository_with_a_regression(app: &TestApp) -> (TestRepo, Vec<String>, Vec<i64>) {
    let (repo, shas) = app.tracked_repository(24).await;
    for (i, sha) in shas.iter().enumerate() {
        let (status, answer) = app.post("/api/v1/repos/r/results", &upload(sha, i)).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (_, found) = app.get("/api/v1/repos/r/regressions").await;
    let kinds: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 2, "{found:#}");
    assert!(kinds.contains(&"regression") && kinds.contains(&"improvement"));
    let ids = found
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    (repo, shas, ids)
}

async fn add_channel(app: &TestApp, url: &str, kind: &str) -> i64 {
    let (status, channel) = app
        .post(
            "/api/v1/repos/r/alerts",
            &json!({ "url": url, "kind": kind }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{channel}");
    channel["id"].as_i64().unwrap()
}

pub async fn delivery_log(app: &TestApp) -> Value {
    let (status, log) = app.get("/api/v1/repos/r/alerts/deliveries").await;
    assert_eq!(status, StatusCode::OK, "{log}");
    log
}

#[tokio::test]
async fn a_regression_alerts_each_channel_once_through_failures() {
    let app = TestApp::new().await;
    let (_repo, shas, changes) = repository_with_a_regression(&app).await;
    let flaky = Listener::answering(&[500, 500, 200]);
    let slack = Listener::answering(&[200]);
    let discord = Listener::answering(&[204]);
    add_channel(&app, &format!("{}/hook/json", flaky.url), "json").await;
    add_channel(
        &app,
        &format!("{}/services/T0/B0/secret", slack.url),
        "slack",
    )
    .await;
    add_channel(
        &app,
        &format!("{}/api/webhooks/1/tok", discord.url),
        "discord",
    )
    .await;

    // The seam, called twice, queues one delivery per channel, for the regression only.
    regressions_found(&app.state, &changes).await.unwrap();
    regressions_found(&app.state, &changes).await.unwrap();
    assert_eq!(
        delivery_log(&app).await["deliveries"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    assert_eq!(deliver_once(&app.state).await.unwrap(), 3);
    let (_, regression) = app.get("/api/v1/repos/r/regressions?kind=regression").await;
    let regression = &regression[0];
    let id = regression["id"].as_i64().unwrap();

    // The generic JSON body carries every fact, with absolute links.
    let json_alert = flaky.received()[0].json();
    assert_eq!(flaky.received()[0].path, "/hook/json");
    let content_type = flaky.received()[0]
        .header("content-type")
        .map(str::to_owned);
    assert!(
        content_type
            .unwrap_or_default()
            .starts_with("application/json")
    );
    assert_eq!(json_alert["event"], "regression");
    assert_eq!(json_alert["repository"], "r");
    assert_eq!(json_alert["benchmark"], HOSTILE);
    assert_eq!(json_alert["metric"], "time");
    assert_eq!(json_alert["machine"], regression["machine"]);
    assert_eq!(json_alert["change_pct"], regression["change_pct"]);
    assert_eq!(json_alert["confidence"]["p_value"], regression["p_value"]);
    assert_eq!(
        json_alert["culprit"],
        json!({ "type": "commit", "sha": shas[16], "summary": "change 16" })
    );
    assert_eq!(
        json_alert["regression_url"],
        format!("https://kymo.example/repos/r/regressions/{id}")
    );
    assert_eq!(
        json_alert["compare_url"],
        format!(
            "https://kymo.example/repos/r/compare/{}...{}",
            shas[15], shas[16]
        )
    );

    // Slack and Discord get their own shapes, with the hostile name defused.
    let slack_alert = slack.received()[0].json();
    let text = slack_alert["text"].as_str().unwrap();
    assert!(
        text.contains("&lt;b&gt;parse&lt;/b&gt; @everyone &lt;!channel&gt;"),
        "{text}"
    );
    assert!(!slack_alert.to_string().contains("<!channel>"));
    assert!(slack_alert["blocks"].as_array().unwrap().len() >= 2);
    let discord_alert = discord.received()[0].json();
    assert_eq!(discord_alert["allowed_mentions"], json!({ "parse": [] }));
    assert!(
        discord_alert["content"]
            .as_str()
            .unwrap()
            .contains(r"\@everyone")
    );
    assert_eq!(
        discord_alert["embeds"][0]["url"],
        format!("https://kymo.example/repos/r/regressions/{id}")
    );

    // The flaky channel is retried after 1 s, then 2 s: not before.
    assert_eq!(
        deliver_once(&app.state).await.unwrap(),
        0,
        "retried too early"
    );
    app.clock.advance(backoff_seconds(1));
    assert_eq!(deliver_once(&app.state).await.unwrap(), 1);
    app.clock.advance(backoff_seconds(2) - 1);
    assert_eq!(
        deliver_once(&app.state).await.unwrap(),
        0,
        "retried too early"
    );
    app.clock.advance(1);
    assert_eq!(deliver_once(&app.state).await.unwrap(), 1);
    assert_eq!(flaky.received().len(), 3);

    // Nothing is ever sent again for this regression, however often it is reported.
    regressions_found(&app.state, &changes).await.unwrap();
    app.clock.advance(3600);
    assert_eq!(deliver_once(&app.state).await.unwrap(), 0);
    assert_eq!(
        (
            flaky.received().len(),
            slack.received().len(),
            discord.received().len()
        ),
        (3, 1, 1)
    );

    // The log shows every attempt, through the API and on the page.
    let log = delivery_log(&app).await;
    let deliveries = log["deliveries"].as_array().unwrap();
    assert!(
        deliveries.iter().all(|d| d["state"] == "delivered"),
        "{log:#}"
    );
    let flaky_log = deliveries
        .iter()
        .find(|d| d["channel_kind"] == "json")
        .unwrap();
    let statuses: Vec<i64> = flaky_log["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["http_status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, [500, 500, 200]);
    assert!(
        flaky_log["log"][0]["error"]
            .as_str()
            .unwrap()
            .contains("answered 500")
    );
    let (status, page) = app
        .request("GET", "/repos/r/alerts", Body::empty(), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let page = page.as_str().unwrap();
    assert!(
        page.contains("HTTP 500") && page.contains("delivered"),
        "{page}"
    );
    assert!(!page.contains("<b>parse"), "benchmark names are escaped");
    assert!(
        !page.contains("secret"),
        "channel URLs are shown without their secret"
    );
    let (_, repo_page) = app.request("GET", "/repos/r", Body::empty(), None).await;
    assert!(repo_page.as_str().unwrap().contains("/repos/r/alerts"));
}

/// An admin chooses where alerts and statuses go, so a URL can name an internal service:
/// whatever it answers is the admins' to read. Anyone sees that it answered, and with which
/// status; only an admin (token or session) sees what it said.
#[tokio::test]
async fn what_a_channel_or_forge_answered_is_shown_to_admins_only() {
    const SECRET: &str = "db_password=hunter2";
    let app = TestApp::new().await;
    let (_repo, shas, changes) = repository_with_a_regression(&app).await;
    let internal = Listener::answering_saying(&[500], SECRET);
    add_channel(&app, &format!("{}/hook", internal.url), "json").await;
    let target = json!({ "kind": "github", "api_url": internal.url, "slug": "ada/kymo",
                         "token": "ghp_secret0123456789" });
    let (status, answer) = app
        .request(
            "PUT",
            "/api/v1/repos/r/commit-status",
            Body::from(target.to_string()),
            Some(&app.admin),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    regressions_found(&app.state, &changes).await.unwrap();
    let (status, _) = app
        .post("/api/v1/repos/r/runs", &json!({ "commit": shas[3] }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(deliver_once(&app.state).await.unwrap(), 2);
    assert_eq!(
        internal.received().len(),
        2,
        "an alert and a status were sent"
    );

    let public = delivery_log(&app).await.to_string();
    assert!(!public.contains("hunter2"), "{public}");
    assert_eq!(
        public
            .matches("answered 500; what it said is shown to admins")
            .count(),
        2,
        "{public}"
    );
    let (_, page) = app
        .request("GET", "/repos/r/alerts", Body::empty(), None)
        .await;
    let page = page.as_str().unwrap();
    assert!(
        page.contains("HTTP 500") && !page.contains("hunter2"),
        "{page}"
    );

    let (status, admin) = app
        .request(
            "GET",
            "/api/v1/repos/r/alerts/deliveries",
            Body::empty(),
            Some(&app.admin),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(admin.to_string().matches("hunter2").count(), 2, "{admin}");
    let (cookie, _) = app.login().await;
    let page = app.page_with_cookie("/repos/r/alerts", &cookie).await;
    assert!(page.contains(SECRET), "{page}");
    // A junk cookie is anyone: it gets what anyone gets (and from the cache).
    let page = app
        .page_with_cookie("/repos/r/alerts", "kymo_session=forged")
        .await;
    assert!(!page.contains("hunter2"), "{page}");
}

#[tokio::test]
async fn a_channel_that_keeps_failing_is_given_up_on_schedule() {
    let app = TestApp::new().await;
    let (_repo, _shas, changes) = repository_with_a_regression(&app).await;
    let down = Listener::answering(&[503]);
    add_channel(&app, &format!("{}/hook", down.url), "json").await;
    add_channel(&app, &closed_url(), "slack").await;
    regressions_found(&app.state, &changes).await.unwrap();

    let start = 1_800_000_000;
    let mut elapsed = 0;
    for attempt in 1..=MAX_ATTEMPTS {
        assert_eq!(
            deliver_once(&app.state).await.unwrap(),
            2,
            "attempt {attempt}"
        );
        let log = delivery_log(&app).await;
        for d in log["deliveries"].as_array().unwrap() {
            assert_eq!(d["attempts"], attempt);
            if attempt < MAX_ATTEMPTS {
                assert_eq!(d["state"], "pending");
                let due = start + elapsed + backoff_seconds(attempt);
                assert_eq!(
                    d["next_attempt_at"], due,
                    "back-off after attempt {attempt}"
                );
            } else {
                assert_eq!(d["state"], "failed", "{d:#}");
            }
        }
        app.clock.advance(backoff_seconds(attempt));
        elapsed += backoff_seconds(attempt);
    }
    app.clock.advance(86_400);
    assert_eq!(
        deliver_once(&app.state).await.unwrap(),
        0,
        "a failed delivery rests"
    );
    assert_eq!(down.received().len() as i64, MAX_ATTEMPTS);

    let log = delivery_log(&app).await;
    let refused = log["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["channel_kind"] == "slack")
        .unwrap();
    let first = &refused["log"][0];
    assert_eq!(
        first["http_status"],
        Value::Null,
        "nothing answered: {first}"
    );
    assert!(!first["error"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn bad_channels_are_refused_and_change_nothing() {
    let app = TestApp::new().await;
    let _ = repository_with_a_regression(&app).await;
    let id = add_channel(&app, "https://hooks.example/services/T/B/abcdefgh", "slack").await;
    let long = format!("https://example.com/{}", "a".repeat(3000));
    for bad in [
        json!({ "url": "ftp://example.com/hook" }),
        json!({ "url": "javascript:alert(1)", "kind": "json" }),
        json!({ "url": "https://example.com/", "kind": "teams" }),
        json!({ "url": long }),
        json!({ "url": "https://user:pw@example.com/" }),
        json!({ "kind": "slack" }),
        json!({ "url": "https://example.com/", "colour": "red" }),
        json!({ "url": 7 }),
    ] {
        let (status, answer) = app.post("/api/v1/repos/r/alerts", &bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {answer}");
        assert!(answer["error"].is_string(), "{answer}");
    }
    let huge = Body::from(format!(
        "{{\"url\":\"https://e.com/{}\"}}",
        "a".repeat(400_000)
    ));
    let (status, _) = app
        .request("POST", "/api/v1/repos/r/alerts", huge, Some(&app.admin))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let (status, _) = app
        .post(
            "/api/v1/repos/r/alerts",
            &json!({ "url": "https://hooks.example/services/T/B/abcdefgh" }),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "the same URL twice");
    let (status, _) = app
        .post(
            "/api/v1/repos/nope/alerts",
            &json!({ "url": "https://example.com/" }),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (_, channels) = app.get("/api/v1/repos/r/alerts").await;
    assert_eq!(channels.as_array().unwrap().len(), 1, "{channels}");
    assert_eq!(channels[0]["url"], "https://hooks.example/…efgh");

    let (status, _) = app
        .request(
            "DELETE",
            &format!("/api/v1/repos/r/alerts/{}", id + 100),
            Body::empty(),
            Some(&app.admin),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let path = format!("/api/v1/repos/r/alerts/{id}");
    let (status, _) = app
        .request("DELETE", &path, Body::empty(), Some(&app.admin))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, channels) = app.get("/api/v1/repos/r/alerts").await;
    assert_eq!(channels, json!([]));
}

#[tokio::test]
async fn the_regressions_of_one_commit_go_out_as_one_message_per_channel() {
    let app = TestApp::new().await;
    let (_repo, shas) = app.tracked_repository(24).await;
    for (i, sha) in shas.iter().enumerate() {
        // At commit 16 `parse` gets 30 % slower and `encode` 60 %.
        let level = |before: f64, after: f64| if i < 16 { before } else { after };
        let metric = |level: f64| {
            json!([{ "name": "time", "unit": "ns", "direction": "lower",
                     "value": level, "samples": jittered(level, i) }])
        };
        let upload = json!({
            "commit": sha,
            "specs": specs(),
            "suites": [{ "suite": "s", "results": { "benchmarks": [
                { "name": "parse", "metrics": metric(level(100.0, 130.0)) },
                { "name": "encode", "metrics": metric(level(50.0, 80.0)) }
            ]}}]
        });
        let (status, answer) = app.post("/api/v1/repos/r/results", &upload).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (_, found) = app.get("/api/v1/repos/r/regressions?kind=regression").await;
    let ids: Vec<i64> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{found:#}");
    let hook = Listener::answering(&[200]);
    let chat = Listener::answering(&[200]);
    add_channel(&app, &format!("{}/hook", hook.url), "json").await;
    add_channel(&app, &format!("{}/services/T0/B0/x", chat.url), "slack").await;

    regressions_found(&app.state, &ids).await.unwrap();
    assert_eq!(deliver_once(&app.state).await.unwrap(), 4, "four rows");
    assert_eq!((hook.received().len(), chat.received().len()), (1, 1));
    let body = hook.received()[0].json();
    assert_eq!(body["benchmark"], "encode", "the bigger change leads");
    assert_eq!(body["also"].as_array().unwrap().len(), 1, "{body:#}");
    assert_eq!(body["also"][0]["benchmark"], "parse");
    assert_eq!(body["culprit"]["sha"], shas[16]);
    let slack = chat.received()[0].json().to_string();
    assert!(slack.contains("Also at this commit") && slack.contains("parse time"));

    // Every row is delivered, and nothing is sent again.
    let log = delivery_log(&app).await;
    let deliveries = log["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 4);
    assert!(
        deliveries.iter().all(|d| d["state"] == "delivered"),
        "{log:#}"
    );
    regressions_found(&app.state, &ids).await.unwrap();
    app.clock.advance(3600);
    assert_eq!(deliver_once(&app.state).await.unwrap(), 0);
    assert_eq!((hook.received().len(), chat.received().len()), (1, 1));
}
