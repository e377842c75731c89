//! kymo's own overhead from a push webhook's receipt to the alert's delivery, with the
//! benchmark's run time taken out. Run with `cargo bench -p kymo-server --bench push_to_alert`.
//!
//! Each of 20 repositories has 12 measured commits at one level; a signed GitHub push of one
//! commit 30 % slower arrives; a worker (in this process, claiming as soon as the webhook
//! returns) measures it; the analysis finds the regression and the alert goes to a local
//! listener. The time from sending the webhook to the listener reading the message, minus the
//! suite's own run time (measured alone), is kymo's overhead: fetch, queue, claim, checkout,
//! parse, store, analyse, and the delivery loop's pick-up.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kymo_core::db::LeaseSettings;
use kymo_core::model::MachineSpecs;
use kymo_core::webhook::sign_hmac_sha256;
use kymo_server::serve::{ServeOptions, start};
use kymo_worker::{Tick, Worker, WorkerConfig};
use serde_json::{Value, json};

const PUSHES: usize = 20;
const HISTORY: usize = 12;
const SECRET: &str = "bench-webhook-secret";
const SUITE: &str = r#"echo "{\"benchmarks\":[{\"name\":\"parse\",\"metrics\":[{\"name\":\"time\",\"unit\":\"ns\",\"direction\":\"lower\",\"samples\":[$(cat samples.txt)]}]}]}""#;

fn specs() -> MachineSpecs {
    MachineSpecs {
        cpu_model: "Bench CPU".into(),
        logical_cores: 2,
        physical_cores: 1,
        memory_gib: 4,
        arch: "x86_64".into(),
        virtualization: "none".into(),
    }
}

fn samples(level: f64, commit: usize) -> Vec<f64> {
    let wobble = [0.0, 0.4, -0.3, 0.2, -0.1, 0.3, -0.4][commit % 7];
    (0..5)
        .map(|i| level + wobble + (i as f64 - 2.0) * 0.1)
        .collect()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@kymo.invalid",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn commit(dir: &Path, samples: &[f64]) -> String {
    let text: Vec<String> = samples.iter().map(|s| format!("{s:.2}")).collect();
    std::fs::write(dir.join("samples.txt"), text.join(",")).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "change"]);
    git(dir, &["rev-parse", "HEAD"])
}

/// Accepts alert messages; sends the arrival time of each on `arrived`.
fn listener(arrived: mpsc::Sender<Instant>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = arrived.send(Instant::now());
            let mut stream = stream;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    url
}

fn post(url: &str, token: Option<&str>, headers: &[(&str, &str)], body: &[u8]) -> (u16, Value) {
    let mut request = ureq::post(url)
        .config()
        .http_status_as_error(false)
        .build()
        .header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.send(body).unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let running = start(ServeOptions {
        db: dir.path().join("kymo.db"),
        listen: "127.0.0.1:0".parse().unwrap(),
        embedded_worker: false,
        leases: LeaseSettings::default(),
        data_dir: dir.path().join("data"),
        public_url: None,
        allow_unconfined_suites: false,
        suite_maximums: Default::default(),
        worker_labels: Vec::new(),
        header_read_timeout: kymo_server::serve::HEADER_READ_TIMEOUT,
        merge_when_idle: Some(kymo_server::serve::MERGE_WHEN_IDLE),
        access: Default::default(),
    })
    .await
    .unwrap();
    let base = format!("http://{}", running.address);
    let admin = std::fs::read_to_string(dir.path().join("kymo.db.admin-token")).unwrap();
    let worker_token = running
        .state
        .db
        .create_token("bench-worker", kymo_core::db::TokenScope::Worker, 0)
        .await
        .unwrap();
    let (arrived_tx, arrived) = mpsc::channel();
    let hook = listener(arrived_tx);
    let cache = dir.path().join("worker");

    let results = tokio::task::spawn_blocking(move || {
        let worker = Worker::new(WorkerConfig {
            server: base.clone(),
            token: worker_token,
            cache_dir: cache,
            poll_interval: Duration::from_millis(100),
            limits: Default::default(),
            labels: Vec::new(),
            sandbox: Default::default(),
        })
        .with_specs(specs());
        assert_eq!(worker.work_once().unwrap(), Tick::QueueEmpty);
        let fingerprint = specs().fingerprint().to_string();
        let mut overheads = Vec::new();
        let mut suite_times = Vec::new();
        for push in 0..PUSHES {
            let repo = tempfile::tempdir().unwrap();
            git(repo.path(), &["init", "-q", "-b", "main"]);
            std::fs::write(
                repo.path().join("kymo.toml"),
                "[[suite]]\nname = \"bench\"\nrun = \"sh bench.sh\"\nformat = \"kymo\"\ntimeout = \"30s\"\n",
            )
            .unwrap();
            std::fs::write(repo.path().join("bench.sh"), SUITE).unwrap();
            let history: Vec<String> = (0..HISTORY)
                .map(|i| commit(repo.path(), &samples(100.0, i)))
                .collect();
            let name = format!("app{push}");
            let body = json!({ "name": name, "url": repo.path().to_str().unwrap(),
                               "webhook_secret": SECRET });
            let (status, _) = post(&format!("{base}/api/v1/repos"), Some(&admin), &[], body.to_string().as_bytes());
            assert_eq!(status, 201);
            let channel = json!({ "url": hook, "kind": "json" });
            let (status, _) = post(&format!("{base}/api/v1/repos/{name}/alerts"), Some(&admin), &[], channel.to_string().as_bytes());
            assert_eq!(status, 201);
            for (i, sha) in history.iter().enumerate() {
                let upload = json!({
                    "commit": sha, "machine": fingerprint,
                    "suites": [{ "suite": "bench", "results": { "benchmarks": [{ "name": "parse",
                        "metrics": [{ "name": "time", "unit": "ns", "direction": "lower",
                                      "value": samples(100.0, i)[2],
                                      "samples": samples(100.0, i) }] }] } }],
                });
                let (status, answer) = post(&format!("{base}/api/v1/repos/{name}/results"), Some(&admin), &[], upload.to_string().as_bytes());
                assert_eq!(status, 201, "{answer}");
            }

            let head = commit(repo.path(), &samples(130.0, HISTORY));
            // The suite's own run time, measured alone in the same checkout.
            let suite_started = Instant::now();
            let output = Command::new("sh").arg("bench.sh").current_dir(repo.path()).output().unwrap();
            assert!(output.status.success());
            let suite_time = suite_started.elapsed().as_secs_f64();

            let payload = json!({ "ref": "refs/heads/main", "before": history[HISTORY - 1],
                                  "after": head, "repository": { "full_name": "bench/app" } })
            .to_string();
            let signature = format!("sha256={}", sign_hmac_sha256(SECRET, payload.as_bytes()));
            let delivery = format!("push-{push}");
            let sent = Instant::now();
            let (status, answer) = post(
                &format!("{base}/api/v1/webhooks/github?repo={name}"),
                None,
                &[("x-github-event", "push"), ("x-github-delivery", &delivery), ("x-hub-signature-256", &signature)],
                payload.as_bytes(),
            );
            assert_eq!(status, 202, "{answer}");
            assert!(matches!(worker.work_once().unwrap(), Tick::Ran { succeeded: true, .. }));
            let at = arrived
                .recv_timeout(Duration::from_secs(30))
                .expect("the alert arrived");
            let total = at.duration_since(sent).as_secs_f64();
            overheads.push(total - suite_time);
            suite_times.push(suite_time);
            println!(
                "push {push:>2}: webhook to alert {:>6.1} ms, suite {:>5.1} ms, overhead {:>6.1} ms",
                total * 1e3,
                suite_time * 1e3,
                (total - suite_time) * 1e3
            );
        }
        (overheads, suite_times)
    })
    .await
    .unwrap();
    let (mut overheads, _) = results;
    overheads.sort_by(f64::total_cmp);
    println!(
        "kymo overhead from webhook receipt to alert delivered, {PUSHES} pushes: median {:.0} ms, p90 {:.0} ms, max {:.0} ms (target: median under 1 s)",
        percentile(&overheads, 0.5) * 1e3,
        percentile(&overheads, 0.9) * 1e3,
        overheads.last().unwrap() * 1e3
    );
    running.stop().await.unwrap();
}
