//! Figures at scale (issue "Trust"): the render time of a 10,000-point trend SVG, and of the
//! compare page for two commits of 1,000 benchmarks each with 100 commits of history. Run with
//! `cargo bench -p kymo-server --bench scale`. Prints medians; the machine is shared, so quote
//! them with the load at the time (see RELIABILITY.md).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use kymo_core::clock::ManualClock;
use kymo_core::db::{CommitRecord, Db, LeaseSettings, RunRecord};
use kymo_core::model::{CommitSha, Direction, Environment, MachineSpecs};
use kymo_core::protocol::SuiteUpload;
use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};
use kymo_server::chart::{TrendChart, TrendPoint, render_trend_svg};
use kymo_server::{AppState, app};
use tower::ServiceExt;

const TREND_POINTS: usize = 10_000;
const COMPARE_BENCHMARKS: usize = 1_000;
const COMPARE_HISTORY: usize = 100;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn sha(i: usize) -> CommitSha {
    CommitSha::parse(&format!("{:040x}", i + 1)).unwrap()
}

fn trend_svg() {
    let points: Vec<TrendPoint> = (0..TREND_POINTS)
        .map(|i| {
            let value = 100.0 + (i % 17) as f64 * 0.3 + if i > 6_000 { 10.0 } else { 0.0 };
            TrendPoint {
                position: i,
                sha: format!("{i:040x}"),
                value,
                low: Some(value * 0.99),
                high: Some(value * 1.01),
                href: format!("/repos/r/commits/{i:040x}"),
            }
        })
        .collect();
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..20 {
        let started = Instant::now();
        let svg = render_trend_svg(&TrendChart::new("bench/10k", "ns", &points)).unwrap();
        times.push(started.elapsed().as_secs_f64() * 1e3);
        size = svg.len();
    }
    println!(
        "trend SVG of {TREND_POINTS} points: median {:.2} ms over {} renders ({} KiB)",
        median(times),
        20,
        size / 1024
    );
}

fn suites(commit: usize) -> Vec<SuiteUpload> {
    let benchmarks = (0..COMPARE_BENCHMARKS)
        .map(|b| {
            let level = 1_000.0
                + b as f64
                + if commit == COMPARE_HISTORY && b % 50 == 0 {
                    200.0
                } else {
                    0.0
                };
            let samples: Vec<f64> = (0..5)
                .map(|s| level + ((commit + s + b) % 7) as f64)
                .collect();
            BenchmarkResult {
                name: format!("group/bench_{b}"),
                params: BTreeMap::new(),
                metrics: vec![MetricResult {
                    name: "time".into(),
                    unit: "ns".into(),
                    direction: Direction::Lower,
                    value: samples[2],
                    samples,
                    hdr: None,
                }],
            }
        })
        .collect();
    vec![SuiteUpload {
        suite: "compare".into(),
        results: SuiteResults { benchmarks },
    }]
}

async fn compare_page() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("bench.db")).await.unwrap();
    let repo = db
        .create_repository("bench", "/nowhere", "main", 0)
        .await
        .unwrap();
    let specs = MachineSpecs {
        cpu_model: "bench".into(),
        logical_cores: 2,
        physical_cores: 1,
        memory_gib: 8,
        arch: "x86_64".into(),
        virtualization: "none".into(),
    };
    let (machine, _) = db.upsert_machine(&specs, "bench", 0).await.unwrap();
    let history: Vec<CommitRecord> = (0..=COMPARE_HISTORY)
        .map(|i| CommitRecord {
            sha: sha(i),
            parents: if i == 0 { vec![] } else { vec![sha(i - 1)] },
            author: "bench".into(),
            time: i as i64,
            message: format!("commit {i}"),
        })
        .collect();
    db.record_history(repo.id, &history).await.unwrap();
    let environment = Environment::default();
    for commit in 0..=COMPARE_HISTORY {
        let commit_id = db.commit_id(repo.id, &sha(commit)).await.unwrap().unwrap();
        let suites = suites(commit);
        let record = RunRecord {
            repository_id: repo.id,
            commit_id,
            machine_id: machine,
            job: None,
            environment: &environment,
            log: "",
            suites: &suites,
        };
        db.store_run(record, 0).await.unwrap();
    }
    let state = AppState {
        db,
        clock: Arc::new(ManualClock::at(0)),
        leases: LeaseSettings::default(),
        data_dir: Arc::new(dir.path().to_owned()),
    };
    let router = app(state);
    let path = format!(
        "/repos/bench/compare/{}...{}",
        sha(COMPARE_HISTORY - 1),
        sha(COMPARE_HISTORY)
    );
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..10 {
        let started = Instant::now();
        let request = Request::get(path.as_str()).body(Body::empty()).unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        size = response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .len();
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "compare page of {COMPARE_BENCHMARKS} benchmarks ({COMPARE_HISTORY} commits of history): median {:.2} ms over {} renders ({} KiB)",
        median(times),
        10,
        size / 1024
    );
}

#[tokio::main]
async fn main() {
    trend_svg();
    compare_page().await;
}
