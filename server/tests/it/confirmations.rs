//! Confirm before accusing: a change point is measured again (its suspect and its baseline,
//! alternately, on the machine that found it, by a real worker running the suite) before it
//! is alerted; instruction counts that moved with the time confirm it without re-running.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use kymo_server::alerts::deliver_once;
use kymo_worker::{Tick, Worker};
use serde_json::{Value, json};

use crate::api::{TestApp, specs as upload_specs};
use crate::continuous::{post, run_until_empty, sampled_suite, samples_at, specs, worker};
use crate::listener::Listener;
use crate::support::{KymoServer, TestRepo, assert_ok, kymo_toml};
use crate::verdicts::jittered;

/// Commits whose suite reports `samples(i)` for commit `i`; returns their shas, oldest first.
fn history(repo: &TestRepo, commits: usize, samples: impl Fn(usize) -> String) -> Vec<String> {
    (0..commits)
        .map(|i| {
            let suite = sampled_suite(&samples(i));
            let mut files: Vec<(&str, &str)> =
                suite.iter().map(|(n, c)| (*n, c.as_str())).collect();
            let notes = format!("step {i}");
            files.push(("NOTES.md", &notes));
            repo.commit(&files, &format!("change {i}"))
        })
        .collect()
}

/// A server without an embedded worker, the repository `app`, an alert channel, and one
/// in-process worker (its machine registered by an empty claim).
pub(crate) struct Setup {
    pub(crate) server: KymoServer,
    channel: Listener,
    pub(crate) machine: Worker,
    _cache: tempfile::TempDir,
}

pub(crate) fn setup(repo: &TestRepo, cpu: &str) -> Setup {
    let server = KymoServer::start(&["--no-worker"]);
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    let channel = Listener::answering(&[200]);
    let hook = format!("{}/hook", channel.url);
    assert_ok(&server.kymo(&["alert", "add", "app", "--url", &hook, "--kind", "json"]));
    let cache = tempfile::tempdir().unwrap();
    let machine = worker(&server, cpu, &[], cache.path());
    assert_eq!(machine.work_once().unwrap(), Tick::QueueEmpty);
    Setup {
        server,
        channel,
        machine,
        _cache: cache,
    }
}

/// Uploads, as from the worker's own machine, results of `parse` at each commit: `level(i)`
/// with the wobble of a real machine. The history a noisy machine leaves behind.
fn upload_history(s: &Setup, cpu: &str, shas: &[String], level: impl Fn(usize) -> f64) {
    let specs = serde_json::to_value(specs(cpu)).unwrap();
    for (i, sha) in shas.iter().enumerate() {
        let samples: Vec<f64> = (samples_at(level(i), i).split(','))
            .map(|v| v.parse().unwrap())
            .collect();
        let value = samples[2];
        let body = json!({ "commit": sha, "specs": specs, "suites": [{ "suite": "demo",
            "results": { "benchmarks": [{ "name": "parse", "metrics": [{ "name": "time",
                "unit": "ns", "direction": "lower", "value": value, "samples": samples }] }] } }] });
        let (status, answer) = post(&s.server, "/api/v1/repos/app/results", &body);
        assert_eq!(status, 201, "{answer}");
    }
}

fn only_regression(server: &KymoServer) -> Value {
    let found = server.get_json("/api/v1/repos/app/regressions?kind=regression");
    let found = found.as_array().unwrap();
    assert_eq!(found.len(), 1, "{found:#?}");
    found[0].clone()
}

fn confirmation(server: &KymoServer, id: i64) -> Value {
    server.get_json(&format!("/api/v1/repos/app/regressions/{id}/confirmation"))
}

fn jobs_for(server: &KymoServer, reason: &str) -> usize {
    let jobs = server.get_json("/api/v1/jobs");
    (jobs.as_array().unwrap().iter())
        .filter(|j| j["reason"] == reason)
        .count()
}

fn wait_for_alerts(channel: &Listener, count: usize) {
    // Generous: the delivery loop shares a loaded machine with the other tests.
    let deadline = Instant::now() + Duration::from_secs(30);
    while channel.received().len() < count {
        assert!(Instant::now() < deadline, "no alert arrived");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_real_slowdown_is_confirmed_by_measuring_again_before_it_is_alerted() {
    let repo = TestRepo::new();
    // Commit 12 really makes `parse` 30 % slower: its suite reports slower samples.
    let shas = history(&repo, 20, |i| {
        samples_at(if i >= 12 { 130.0 } else { 100.0 }, i)
    });
    let s = setup(&repo, "Confirm CPU");
    for sha in &shas {
        let (status, _) = post(
            &s.server,
            "/api/v1/repos/app/runs",
            &json!({ "commit": sha }),
        );
        assert_eq!(status, 202);
    }
    // The history's jobs come first; the confirmation they asked for waits behind them.
    for _ in &shas {
        assert!(matches!(
            s.machine.work_once().unwrap(),
            Tick::Ran {
                succeeded: true,
                ..
            }
        ));
    }
    let regression = only_regression(&s.server);
    let id = regression["id"].as_i64().unwrap();
    assert_eq!(regression["sha"], shas[12].as_str());
    assert_eq!(regression["confirmation"], "confirming", "{regression:#}");
    assert_eq!(jobs_for(&s.server, "confirm"), 1);
    let (_, page) = s.server.get(&format!("/repos/app/regressions/{id}"));
    assert!(page.contains("confirming"), "{page}");
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        s.channel.received().is_empty(),
        "alerted before confirmation"
    );

    // The re-measurement: base and suspect, alternately, on the same machine.
    assert_eq!(run_until_empty(&s.machine), 1);
    let confirmed = confirmation(&s.server, id);
    assert_eq!(confirmed["state"], "confirmed", "{confirmed:#}");
    assert_eq!(confirmed["evidence"], "interleaved");
    assert_eq!(confirmed["rounds_run"], 3);
    let change = confirmed["change_pct"].as_f64().unwrap();
    assert!((change - 30.0).abs() < 2.0, "{confirmed:#}");
    let comparison = confirmed["comparison_id"].as_i64().unwrap();
    let comparisons = s.server.get_json("/api/v1/repos/app/comparisons");
    let listed = &comparisons.as_array().unwrap()[0];
    assert_eq!(listed["id"], comparison);
    assert_eq!(listed["origin"], "confirm");
    assert_eq!(listed["base"], shas[11].as_str());
    assert_eq!(listed["head"], shas[12].as_str());
    assert_eq!(
        listed["machine"], regression["machine"],
        "on the machine that found it"
    );

    wait_for_alerts(&s.channel, 1);
    let alert = s.channel.received()[0].json();
    assert_eq!(alert["benchmark"], "parse");
    assert_eq!(alert["confirmation"], "confirmed");
    assert_eq!(alert["culprit"]["sha"], shas[12].as_str());
    let (_, page) = s.server.get(&format!("/repos/app/regressions/{id}"));
    assert!(
        page.contains("confirmed") && page.contains("3 interleaved rounds"),
        "{page}"
    );
    assert!(page.contains(&format!("/repos/app/comparisons/{comparison}")));
}

#[test]
fn a_noise_flag_is_refuted_by_measuring_again_and_never_alerted() {
    let repo = TestRepo::new();
    // The code never changes speed: every commit's suite reports the same samples.
    let shas = history(&repo, 20, |_| samples_at(100.0, 0));
    let cpu = "Noisy CPU";
    let s = setup(&repo, cpu);
    // The machine's history says otherwise: from commit 12 on, a neighbour slowed it down.
    upload_history(&s, cpu, &shas, |i| if i >= 12 { 125.0 } else { 100.0 });
    let regression = only_regression(&s.server);
    let id = regression["id"].as_i64().unwrap();
    assert_eq!(regression["sha"], shas[12].as_str());
    assert_eq!(regression["confirmation"], "confirming");

    assert_eq!(run_until_empty(&s.machine), 1, "one re-measurement");
    let refuted = confirmation(&s.server, id);
    assert_eq!(refuted["state"], "refuted", "{refuted:#}");
    assert_eq!(refuted["evidence"], "interleaved");
    assert!(
        refuted["change_pct"].as_f64().unwrap().abs() < 1.0,
        "{refuted:#}"
    );
    assert!(
        refuted["note"].as_str().unwrap().contains("refuted"),
        "{refuted:#}"
    );
    // Closed as a false positive, still shown with what was re-run and what it found.
    let closed = s
        .server
        .get_json(&format!("/api/v1/repos/app/regressions/{id}"));
    assert_eq!(closed["state"], "false_positive");
    assert_eq!(closed["state_by"], "kymo confirmation");
    let open = s
        .server
        .get_json("/api/v1/repos/app/regressions?state=open");
    assert!(open.as_array().unwrap().is_empty(), "{open:#}");
    let (_, page) = s.server.get(&format!("/repos/app/regressions/{id}"));
    assert!(
        page.contains("refuted") && page.contains("comparisons/"),
        "{page}"
    );
    let (_, feed) = s.server.get("/repos/app/regressions.atom");
    assert!(
        !feed.contains(&shas[12]),
        "a refuted change is not in the feed"
    );

    std::thread::sleep(Duration::from_millis(800));
    assert!(s.channel.received().is_empty(), "a refuted change alerted");
}

/// A suite printing one value of `parse/small` per run, around `level`: each run of a work
/// tree the next of a fixed sequence of wobbles (±3 %), from `offset` on, as a machine's runs
/// differ.
fn wobbling_script(level: f64, offset: usize) -> String {
    format!(
        r#"n=$(cat .runs 2>/dev/null || echo {offset}); echo $((n + 1)) > .runs
w=$(echo "0 2 -2 1 -1 3 -3 2 -2 1" | cut -d' ' -f$((n % 10 + 1)))
v=$(awk -v l={level} -v w="$w" 'BEGIN {{ print l * (1 + w / 100) }}')
echo '{{"benchmarks":[{{"name":"parse/small","params":{{"size":"16"}},"metrics":[{{"name":"time","unit":"ns","direction":"lower","value":'"$v"'}}]}}]}}'
"#
    )
}

/// 20 commits whose suite is `script(i)` (one value of `parse/small` per run), a history
/// uploaded as from the worker's machine that steps to `flagged` at commit 12, and the one
/// re-measurement that step asks for, run: returns the setup and the step's confirmation.
fn confirmed_step(cpu: &str, script: impl Fn(usize) -> String, flagged: f64) -> (Setup, Value) {
    let repo = TestRepo::new();
    let shas: Vec<String> = (0..20)
        .map(|i| {
            let files = [
                ("kymo.toml", kymo_toml("sh bench.sh", "30s", 1)),
                ("bench.sh", script(i)),
                ("NOTES.md", format!("step {i}")),
            ];
            let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
            repo.commit(&files, &format!("change {i}"))
        })
        .collect();
    let s = setup(&repo, cpu);
    let specs = serde_json::to_value(specs(cpu)).unwrap();
    for (i, sha) in shas.iter().enumerate() {
        let level = if i >= 12 { flagged } else { 100.0 };
        let body = json!({ "commit": sha, "specs": specs, "suites": [{ "suite": "demo",
            "results": { "benchmarks": [{ "name": "parse/small", "params": { "size": "16" },
                "metrics": [{ "name": "time", "unit": "ns", "direction": "lower",
                    "value": level, "samples": jittered(level, i) }] }] } }] });
        let (status, answer) = post(&s.server, "/api/v1/repos/app/results", &body);
        assert_eq!(status, 201, "{answer}");
    }
    let id = only_regression(&s.server)["id"].as_i64().unwrap();
    assert_eq!(run_until_empty(&s.machine), 1, "one re-measurement");
    let found = confirmation(&s.server, id);
    (s, found)
}

#[test]
fn a_slowdown_seen_through_run_to_run_noise_is_confirmed_in_three_rounds() {
    // One value per run, a few percent apart from run to run, as on a busy machine; the code
    // is 30 % slower from commit 12 on.
    let script = |i| wobbling_script(if i >= 12 { 130.0 } else { 100.0 }, 0);
    let (s, confirmed) = confirmed_step("Patient CPU", script, 130.0);
    assert_eq!(confirmed["state"], "confirmed", "{confirmed:#}");
    assert_eq!(confirmed["rounds_run"], 3);
    let change = confirmed["change_pct"].as_f64().unwrap();
    assert!((change - 30.0).abs() < 3.0, "{confirmed:#}");
    wait_for_alerts(&s.channel, 1);
}

#[test]
fn a_noise_flag_on_a_wobbling_benchmark_is_refuted_at_the_first_look_by_the_change_it_claimed() {
    // The code never changes speed, but each run wobbles by up to 3 %, the suspect's runs
    // out of step with its baseline's: rounds 2–4 % apart, so ±2 % is out of reach of
    // three rounds. The +25 % the history claims (a neighbour slowed the machine from
    // commit 12 on) is not.
    let (s, refuted) = confirmed_step("Wobbling CPU", |i| wobbling_script(100.0, i), 125.0);
    assert_eq!(refuted["state"], "refuted", "{refuted:#}");
    assert_eq!(refuted["rounds_run"], 3, "{refuted:#}");
    let note = refuted["note"].as_str().unwrap();
    assert!(note.contains("within ±12.5 %"), "{note}");
    // The comparison shows the verdict the rounds stopped on.
    let comparison = refuted["comparison_id"].as_i64().unwrap();
    let view = s
        .server
        .get_json(&format!("/api/v1/repos/app/comparisons/{comparison}"));
    let verdict = &view["report"]["rows"][0]["verdict"];
    assert_eq!(verdict["kind"], "no_change", "{view:#}");
}

#[test]
fn a_confirmation_whose_re_measurement_is_cancelled_is_alerted_unconfirmed() {
    let repo = TestRepo::new();
    let shas = history(&repo, 20, |_| samples_at(100.0, 0));
    let cpu = "Busy CPU";
    let s = setup(&repo, cpu);
    upload_history(&s, cpu, &shas, |i| if i >= 12 { 125.0 } else { 100.0 });
    let id = only_regression(&s.server)["id"].as_i64().unwrap();
    let jobs = s.server.get_json("/api/v1/jobs");
    let job = (jobs.as_array().unwrap().iter())
        .find(|j| j["reason"] == "confirm")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let (status, _) = post(&s.server, &format!("/api/v1/jobs/{job}/cancel"), &json!({}));
    assert_eq!(status, 200);
    let marked = confirmation(&s.server, id);
    assert_eq!(marked["state"], "unconfirmed", "{marked:#}");
    assert_eq!(marked["evidence"], "failed");
    // Nobody waits for ever: it is announced, marked as not confirmed.
    wait_for_alerts(&s.channel, 1);
    let alert = s.channel.received()[0].json();
    assert_eq!(alert["confirmation"], "unconfirmed", "{alert:#}");
    assert!(
        alert["summary"].as_str().unwrap().contains("unconfirmed"),
        "{alert:#}"
    );
    assert_eq!(run_until_empty(&s.machine), 0);
}

#[test]
fn with_confirmation_off_a_change_is_alerted_as_soon_as_it_is_found() {
    let repo = TestRepo::new();
    let shas = history(&repo, 20, |_| samples_at(100.0, 0));
    let cpu = "Trusting CPU";
    let s = setup(&repo, cpu);
    let shown = assert_ok(&s.server.kymo(&["repo", "set", "app", "--confirm", "off"]));
    assert!(shown.contains("confirmation: off"), "{shown}");
    let refused = s.server.kymo(&["repo", "set", "app", "--confirm", "maybe"]);
    assert!(!refused.status.success());

    upload_history(&s, cpu, &shas, |i| if i >= 12 { 125.0 } else { 100.0 });
    let regression = only_regression(&s.server);
    assert_eq!(regression["confirmation"], Value::Null);
    assert_eq!(jobs_for(&s.server, "confirm"), 0);
    assert_eq!(run_until_empty(&s.machine), 0, "nothing is measured again");
}

/// Results of commit `i` with time and instruction counts: time steps up 20 % at commit 16;
/// instruction counts step up by `instructions_step` there (1.0: unchanged).
fn upload_with_instructions(sha: &str, i: usize, instructions_step: f64) -> Value {
    let slow = i >= 16;
    let time = if slow { 120.0 } else { 100.0 };
    let counts = 1_000_000.0 * if slow { instructions_step } else { 1.0 };
    json!({ "commit": sha, "specs": upload_specs(), "suites": [{ "suite": "s", "results": {
    "benchmarks": [{ "name": "parse", "params": { "size": "16" }, "metrics": [
        { "name": "time", "unit": "ns", "direction": "lower",
          "value": time, "samples": jittered(time, i) },
        { "name": "instructions", "unit": "instructions", "direction": "lower",
          "value": counts + (i % 3) as f64 }
    ]}]}}]})
}

/// A repository `r` with 24 uploaded commits and an alert channel at `hook`; returns the
/// regressions found, by metric.
async fn uploaded_history(app: &TestApp, hook: &str, instructions_step: f64) -> Vec<Value> {
    let (_repo, shas) = app.tracked_repository(24).await;
    let channel = json!({ "url": hook, "kind": "json" });
    assert_eq!(
        app.post("/api/v1/repos/r/alerts", &channel).await.0,
        StatusCode::CREATED
    );
    for (i, sha) in shas.iter().enumerate() {
        let upload = upload_with_instructions(sha, i, instructions_step);
        let (status, answer) = app.post("/api/v1/repos/r/results", &upload).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let (_, found) = app.get("/api/v1/repos/r/regressions?kind=regression").await;
    found.as_array().unwrap().clone()
}

async fn confirmation_of(app: &TestApp, regression: &Value) -> Value {
    let path = format!(
        "/api/v1/repos/r/regressions/{}/confirmation",
        regression["id"]
    );
    let (status, confirmation) = app.get(&path).await;
    assert_eq!(status, StatusCode::OK, "{confirmation}");
    confirmation
}

#[tokio::test]
async fn instruction_counts_that_moved_with_the_time_confirm_it_without_re_running() {
    let app = TestApp::new().await;
    let channel = Listener::answering(&[200, 200]);
    let found = uploaded_history(&app, &format!("{}/hook", channel.url), 1.25).await;
    let metrics: Vec<&str> = found
        .iter()
        .map(|r| r["metric"].as_str().unwrap())
        .collect();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(metrics.contains(&"time") && metrics.contains(&"instructions"));
    let time = found.iter().find(|r| r["metric"] == "time").unwrap();
    assert_eq!(
        time["benchmark"], found[0]["benchmark"],
        "the same benchmark"
    );
    let confirmed = confirmation_of(&app, time).await;
    assert_eq!(confirmed["state"], "confirmed", "{confirmed:#}");
    assert_eq!(confirmed["evidence"], "instructions");
    assert_eq!(confirmed["rounds_run"], 0, "nothing was re-run");
    assert!((confirmed["change_pct"].as_f64().unwrap() - 25.0).abs() < 0.1);
    assert!(
        confirmed["note"]
            .as_str()
            .unwrap()
            .contains("without re-running")
    );
    let (_, jobs) = app.get("/api/v1/jobs").await;
    assert!(jobs.as_array().unwrap().is_empty(), "{jobs:#}");
    assert_eq!(deliver_once(&app.state).await.unwrap(), 2, "both alerted");
}

#[tokio::test]
async fn a_change_of_time_alone_from_a_machine_that_cannot_re_run_is_alerted_unconfirmed() {
    let app = TestApp::new().await;
    let channel = Listener::answering(&[200]);
    let found = uploaded_history(&app, &format!("{}/hook", channel.url), 1.0).await;
    assert_eq!(found.len(), 1, "the counts did not change: {found:#?}");
    assert_eq!(found[0]["metric"], "time");
    let marked = confirmation_of(&app, &found[0]).await;
    assert_eq!(marked["state"], "unconfirmed", "{marked:#}");
    assert_eq!(marked["evidence"], "no-worker");
    // Uploads must not wait for a machine that will never take a job.
    assert_eq!(deliver_once(&app.state).await.unwrap(), 1);
}

#[tokio::test]
async fn the_confirmation_setting_is_checked_and_a_bad_value_changes_nothing() {
    let app = TestApp::new().await;
    let (_repo, _) = app.with_repo().await;
    let path = "/api/v1/repos/r/settings";
    let admin = app.admin.clone();
    let get = || app.request("GET", path, axum::body::Body::empty(), Some(&admin));
    let (_, shown) = get().await;
    assert_eq!(shown["confirm"], true, "on by default: {shown:#}");
    let (status, _) = app.post(path, &json!({ "confirm": "yes" })).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = app.post(path, &json!({ "confirmm": false })).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(get().await.1["confirm"], true);
    let (status, changed) = app.post(path, &json!({ "confirm": false })).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["confirm"], false);
    assert_eq!(get().await.1["confirm"], false);
}

/// Two suites: `demo` reports `parse` at `level` (and `extra`, unless the worker names the
/// benchmarks it wants), `other` reports `other`; neither of the unchanged ones should be run
/// again to confirm a change of `parse`.
fn two_suites(level: f64, commit: usize) -> Vec<(&'static str, String)> {
    let metric = |samples: &str| {
        format!(
            r#"{{\"name\":\"time\",\"unit\":\"ns\",\"direction\":\"lower\",\"samples\":[{samples}]}}"#
        )
    };
    let parse = metric("$(cat samples.txt)");
    let steady = metric(&samples_at(50.0, commit));
    let demo = format!(
        r#"if [ "$KYMO_ONLY_BENCHMARKS" = parse ]; then extra=""; else extra=",{{\"name\":\"extra\",\"metrics\":[{steady}]}}"; fi
echo "{{\"benchmarks\":[{{\"name\":\"parse\",\"metrics\":[{parse}]}}$extra]}}"
"#
    );
    let other =
        format!(r#"echo "{{\"benchmarks\":[{{\"name\":\"other\",\"metrics\":[{steady}]}}]}}""#);
    let toml = format!(
        "{}\n[[suite]]\nname = \"other\"\nrun = \"sh other.sh\"\nformat = \"kymo\"\ntimeout = \"30s\"\n",
        kymo_toml("sh bench.sh", "30s", 1)
    );
    vec![
        ("kymo.toml", toml),
        ("bench.sh", demo),
        ("other.sh", other),
        ("samples.txt", samples_at(level, commit)),
        ("NOTES.md", format!("step {commit}")),
    ]
}

#[test]
fn a_confirmation_measures_only_the_suite_and_benchmark_that_changed() {
    let repo = TestRepo::new();
    let shas: Vec<String> = (0..20)
        .map(|i| {
            let files = two_suites(if i >= 12 { 130.0 } else { 100.0 }, i);
            let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
            repo.commit(&files, &format!("change {i}"))
        })
        .collect();
    let s = setup(&repo, "Selective CPU");
    for sha in &shas {
        let (status, _) = post(
            &s.server,
            "/api/v1/repos/app/runs",
            &json!({ "commit": sha }),
        );
        assert_eq!(status, 202);
    }
    for _ in &shas {
        assert!(matches!(
            s.machine.work_once().unwrap(),
            Tick::Ran {
                succeeded: true,
                ..
            }
        ));
    }
    let regression = only_regression(&s.server);
    assert_eq!(regression["benchmark"], "parse", "{regression:#}");
    let id = regression["id"].as_i64().unwrap();
    assert_eq!(run_until_empty(&s.machine), 1, "one re-measurement");
    let confirmed = confirmation(&s.server, id);
    assert_eq!(confirmed["state"], "confirmed", "{confirmed:#}");
    let comparison = confirmed["comparison_id"].as_i64().unwrap();
    let view = s
        .server
        .get_json(&format!("/api/v1/repos/app/comparisons/{comparison}"));
    let measured: Vec<&str> = (view["report"]["rows"].as_array().unwrap().iter())
        .map(|r| r["benchmark"].as_str().unwrap())
        .collect();
    // `other` (another suite) was not run at all; `extra` was left out by the suite itself,
    // told which benchmark the comparison needs.
    assert_eq!(measured, ["parse"], "{view:#}");
}
