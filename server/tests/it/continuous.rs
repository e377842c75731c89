//! The queue across machines, cancel and retry, and automatic bisection of a multi-commit
//! push, with in-process workers that present different hardware fingerprints.

use std::path::Path;
use std::time::Duration;

use kymo_core::model::MachineSpecs;
use kymo_worker::{Tick, Worker, WorkerConfig};
use serde_json::{Value, json};

use kymo_core::webhook::sign_hmac_sha256;

use crate::listener::Listener;
use crate::support::{KymoServer, TestRepo, assert_ok, kymo_toml};
use crate::webhooks::{SECRET, deliver};

pub(crate) fn specs(cpu: &str) -> MachineSpecs {
    MachineSpecs {
        cpu_model: cpu.into(),
        logical_cores: 2,
        physical_cores: 1,
        memory_gib: 4,
        arch: "x86_64".into(),
        virtualization: "none".into(),
    }
}

/// A worker in this process, presenting `cpu` as its CPU model (so its own fingerprint).
pub(crate) fn worker(server: &KymoServer, cpu: &str, labels: &[&str], cache: &Path) -> Worker {
    let grant = labels.join(",");
    let db = server.db_path();
    let mut args = vec![
        "token",
        "create",
        "--worker",
        cpu,
        "--db",
        db.to_str().unwrap(),
    ];
    if !labels.is_empty() {
        args.extend(["--labels", grant.as_str()]);
    }
    let token = assert_ok(&server.kymo(&args));
    Worker::new(WorkerConfig {
        server: server.url.clone(),
        token: token.trim().to_owned(),
        cache_dir: cache.join(cpu),
        poll_interval: Duration::from_millis(100),
        limits: Default::default(),
        labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        sandbox: Default::default(),
    })
    .with_specs(specs(cpu))
}

pub(crate) fn post(server: &KymoServer, path: &str, body: &Value) -> (u16, Value) {
    let mut response = ureq::post(format!("{}{path}", server.url))
        .config()
        .http_status_as_error(false)
        .build()
        .header("authorization", format!("Bearer {}", server.admin))
        .send_json(body)
        .unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

/// A suite whose one benchmark reports the five samples in `samples.txt`.
pub(crate) fn sampled_suite(samples: &str) -> [(&'static str, String); 3] {
    [
        ("kymo.toml", kymo_toml("sh bench.sh", "30s", 1)),
        (
            "bench.sh",
            r#"echo "{\"benchmarks\":[{\"name\":\"parse\",\"metrics\":[{\"name\":\"time\",\"unit\":\"ns\",\"direction\":\"lower\",\"samples\":[$(cat samples.txt)]}]}]}""#
                .to_owned(),
        ),
        ("samples.txt", samples.to_owned()),
    ]
}

/// Five samples around `level`, wobbling from commit to commit like a real machine.
pub(crate) fn samples_at(level: f64, commit: usize) -> String {
    let wobble = [0.0, 0.4, -0.3, 0.2, -0.1, 0.3, -0.4][commit % 7];
    (0..5)
        .map(|i| format!("{:.2}", level + wobble + (f64::from(i) - 2.0) * 0.1))
        .collect::<Vec<_>>()
        .join(",")
}

fn commit_level(repo: &TestRepo, level: f64, index: usize) -> String {
    let files = sampled_suite(&samples_at(level, index));
    let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
    repo.commit(&files, &format!("commit {index}"))
}

pub(crate) fn run_until_empty(worker: &Worker) -> usize {
    let mut ran = 0;
    while let Tick::Ran { succeeded, .. } = worker.work_once().unwrap() {
        assert!(succeeded);
        ran += 1;
    }
    ran
}

#[test]
fn every_machine_measures_every_commit_unless_the_repository_asks_for_a_label() {
    let server = KymoServer::start(&["--no-worker"]);
    let repo = TestRepo::new();
    commit_level(&repo, 100.0, 0);
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    let cache = tempfile::tempdir().unwrap();
    let plain = worker(&server, "Plain CPU", &[], cache.path());
    let fast = worker(&server, "Fast CPU", &["fast", "x86"], cache.path());
    // An empty claim registers each machine.
    assert_eq!(plain.work_once().unwrap(), Tick::QueueEmpty);
    assert_eq!(fast.work_once().unwrap(), Tick::QueueEmpty);

    let (status, queued) = post(&server, "/api/v1/repos/app/runs", &json!({}));
    assert_eq!(status, 202);
    assert_eq!(
        queued["jobs"].as_array().unwrap().len(),
        2,
        "one job per machine"
    );
    assert_eq!(run_until_empty(&plain), 1);
    assert_eq!(run_until_empty(&fast), 1);
    let series = server.get_json("/api/v1/repos/app/series?benchmark=parse");
    assert_eq!(
        series.as_array().unwrap().len(),
        2,
        "one series per fingerprint: {series:#}"
    );
    let machines = server.get_json("/api/v1/machines");
    let labels: Vec<&str> = machines
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["labels"].as_str().unwrap())
        .collect();
    assert!(labels.contains(&"fast,x86"), "{labels:?}");

    // A repository that requires a label runs only where it is offered.
    let other = TestRepo::new();
    commit_level(&other, 50.0, 0);
    assert_ok(&server.kymo(&[
        "repo",
        "add",
        "lab",
        other.path().to_str().unwrap(),
        "--machines",
        "FAST",
    ]));
    let (_, queued) = post(&server, "/api/v1/repos/lab/runs", &json!({}));
    assert_eq!(queued["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(plain.work_once().unwrap(), Tick::QueueEmpty);
    assert_eq!(run_until_empty(&fast), 1);
}

#[test]
fn jobs_can_be_cancelled_and_retried_from_the_api_the_cli_and_the_page() {
    let server = KymoServer::start(&["--no-worker"]);
    let repo = TestRepo::new();
    commit_level(&repo, 100.0, 0);
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    let (_, queued) = post(&server, "/api/v1/repos/app/runs", &json!({}));
    let job = queued["jobs"][0].as_i64().unwrap();

    let (status, cancelled) = post(&server, &format!("/api/v1/jobs/{job}/cancel"), &json!({}));
    assert_eq!(
        (status, cancelled["state"].as_str()),
        (200, Some("cancelled"))
    );
    let (status, _) = post(&server, &format!("/api/v1/jobs/{job}/cancel"), &json!({}));
    assert_eq!(status, 409, "a finished job cannot be cancelled");
    let (status, _) = post(&server, "/api/v1/jobs/9999/cancel", &json!({}));
    assert_eq!(status, 404);

    let out = assert_ok(&server.kymo(&["retry", &job.to_string()]));
    assert!(out.contains("queued again"), "{out}");
    let retried = server.get_json("/api/v1/jobs");
    let waiting: Vec<&Value> = retried
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["state"] == "queued")
        .collect();
    assert_eq!(waiting.len(), 1);
    let new = waiting[0]["id"].as_i64().unwrap();
    let (status, _) = post(&server, &format!("/api/v1/jobs/{new}/retry"), &json!({}));
    assert_eq!(status, 409, "a waiting job is not queued twice");

    // The queue page's button posts a form and comes back to the queue: for an admin who
    // logged in, with the anti-forgery token the page carries.
    let (_, anonymous) = server.get("/queue");
    assert!(!anonymous.contains("Cancel"), "buttons are for admins");
    let session = server.login();
    let page = session.get("/queue");
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page carries the anti-forgery token");
    assert_eq!(
        session.post_form(&format!("/queue/jobs/{new}/cancel"), "csrf=forged"),
        403
    );
    assert_eq!(
        session.post_form(
            &format!("/queue/jobs/{new}/cancel"),
            &format!("csrf={csrf}")
        ),
        303
    );
    assert_eq!(
        server.get_json(&format!("/api/v1/jobs/{new}"))["state"],
        "cancelled"
    );
    let page = session.get("/queue");
    assert!(page.contains("Retry") && page.contains("manual"), "{page}");
}

#[test]
fn a_push_of_eight_commits_is_bisected_to_the_commit_that_regressed() {
    let server = KymoServer::start(&["--no-worker"]);
    let repo = TestRepo::new();
    for i in 0..12 {
        commit_level(&repo, 100.0, i);
    }
    let path = repo.path().to_str().unwrap();
    assert_ok(&server.kymo(&["repo", "add", "app", path, "--webhook-secret", SECRET]));
    let cache = tempfile::tempdir().unwrap();
    let machine = worker(&server, "Bisect CPU", &[], cache.path());
    assert_eq!(machine.work_once().unwrap(), Tick::QueueEmpty);
    // The history before the push is measured commit by commit.
    let history = server.get_json("/api/v1/repos/app/series?benchmark=parse");
    assert!(history.as_array().unwrap().is_empty());
    let mut shas = Vec::new();
    for i in 0..12 {
        let sha = repo_sha_at(&repo, 11 - i);
        let (status, _) = post(&server, "/api/v1/repos/app/runs", &json!({ "commit": sha }));
        assert_eq!(status, 202);
        shas.push(sha);
    }
    assert_eq!(run_until_empty(&machine), 12);

    // People hear of regressions on a channel: once, with the culprit bisection found.
    let channel = Listener::answering(&[200]);
    let hook = format!("{}/hook", channel.url);
    assert_ok(&server.kymo(&["alert", "add", "app", "--url", &hook, "--kind", "json"]));

    // One push of eight commits; the fifth makes `parse` 30 % slower.
    let mut pushed = Vec::new();
    for i in 12..20 {
        let level = if i >= 16 { 130.0 } else { 100.0 };
        pushed.push(commit_level(&repo, level, i));
    }
    // The push arrives by webhook: the head is queued first, the other seven after it.
    let body = serde_json::to_vec(&json!({
        "ref": "refs/heads/main", "before": shas[11], "after": pushed[7],
        "repository": { "full_name": "acme/app" },
    }))
    .unwrap();
    let signature = format!("sha256={}", sign_hmac_sha256(SECRET, &body));
    let (status, answer) = deliver(
        &server,
        "github?repo=app",
        &[
            ("x-github-event", "push"),
            ("x-github-delivery", "push-1"),
            ("x-hub-signature-256", &signature),
        ],
        &body,
    );
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["jobs"].as_array().unwrap().len(), 8);
    let mut ran = 0;
    let culprit = loop {
        match machine.work_once().unwrap() {
            Tick::Ran { succeeded, .. } => {
                assert!(succeeded);
                ran += 1;
            }
            Tick::QueueEmpty => panic!("the queue ran dry before the bisection ended"),
        }
        let regressions = server.get_json("/api/v1/repos/app/regressions?kind=regression");
        let Some(regression) = regressions.as_array().unwrap().first().cloned() else {
            continue;
        };
        let id = regression["id"].as_i64().unwrap();
        let (status, bisection) =
            server.get(&format!("/api/v1/repos/app/regressions/{id}/bisection"));
        if status != 200 {
            continue;
        }
        let bisection: Value = serde_json::from_str(&bisection).unwrap();
        if bisection["state"] != "running" {
            assert_eq!(bisection["state"], "found", "{bisection:#}");
            let regression = server.get_json(&format!("/api/v1/repos/app/regressions/{id}"));
            break (bisection, regression);
        }
    };
    let (bisection, regression) = culprit;
    assert_eq!(bisection["bad_sha"], pushed[4].as_str(), "{bisection:#}");
    assert_eq!(bisection["good_sha"], pushed[3].as_str());
    assert_eq!(
        regression["sha"],
        pushed[4].as_str(),
        "the regression names its culprit"
    );
    assert!(ran <= 5, "the head and at most four probes: {ran} jobs ran");
    let (_, page) = server.get(&format!("/repos/app/regressions/{}", regression["id"]));
    assert!(
        page.contains("bisection") && page.contains("found"),
        "{page}"
    );

    // The culprit pair is measured again before anyone hears of it.
    assert_eq!(regression["confirmation"], "confirming", "{regression:#}");
    assert!(channel.received().is_empty(), "alerted before confirmation");
    run_until_empty(&machine);
    let confirmed = server.get_json(&format!(
        "/api/v1/repos/app/regressions/{}/confirmation",
        regression["id"]
    ));
    assert_eq!(confirmed["state"], "confirmed", "{confirmed:#}");
    let comparisons = server.get_json("/api/v1/repos/app/comparisons");
    let measured = &comparisons.as_array().unwrap()[0];
    assert_eq!(
        measured["base"],
        pushed[3].as_str(),
        "the culprit pair, not the range"
    );
    assert_eq!(measured["head"], pushed[4].as_str());

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while channel.received().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no alert arrived");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The rest of the push is measured too; no second message comes for the same regression.
    run_until_empty(&machine);
    std::thread::sleep(Duration::from_millis(600));
    let messages = channel.received();
    assert_eq!(messages.len(), 1, "one message per regression");
    let alert = messages[0].json();
    assert_eq!(alert["culprit"]["type"], "commit", "{alert:#}");
    assert_eq!(alert["culprit"]["sha"], pushed[4].as_str());
    assert_eq!(alert["benchmark"], "parse");
}

/// The sha of the commit `back` commits behind the head.
fn repo_sha_at(repo: &TestRepo, back: usize) -> String {
    let git = git2::Repository::open(repo.path()).unwrap();
    let mut commit = git.head().unwrap().peel_to_commit().unwrap();
    for _ in 0..back {
        commit = commit.parent(0).unwrap();
    }
    commit.id().to_string()
}
