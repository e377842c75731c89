//! Figures for the spine: ingest throughput into SQLite and the render time of a benchmark
//! page whose series has 1,000 commits. Run with `cargo bench -p kymo-server --bench spine`;
//! `-- ingest` measures ingest alone.
//! Prints medians over repetitions; the machine is shared, so compare ratios within one run.

#[path = "support/synthetic.rs"]
mod synthetic;
#[path = "support/timing.rs"]
mod timing;

use std::collections::BTreeMap;
use std::time::Instant;

use kymo_core::model::Direction;
use kymo_core::protocol::SuiteUpload;
use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};
use synthetic::Synthetic;
use timing::{median, router, time_cached_page, time_page};

const BENCHMARKS: usize = 200;
const METRICS: usize = 5;
const COMMITS: usize = 1_000;
const INGEST_BATCHES: usize = 100;

fn suite(commit: usize, benchmarks: usize) -> Vec<SuiteUpload> {
    let benchmarks = (0..benchmarks)
        .map(|b| BenchmarkResult {
            name: format!("group/bench_{b}"),
            params: BTreeMap::new(),
            metrics: (0..METRICS)
                .map(|m| {
                    let base = 100.0 + b as f64 + m as f64 * 10.0 + (commit % 7) as f64;
                    MetricResult {
                        name: format!("metric_{m}"),
                        unit: "ns".into(),
                        direction: Direction::Lower,
                        value: base,
                        samples: vec![base * 0.99, base, base * 1.01, base * 1.005, base * 0.995],
                        hdr: None,
                    }
                })
                .collect(),
        })
        .collect();
    vec![SuiteUpload {
        suite: "bench".into(),
        results: SuiteResults { benchmarks },
    }]
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let data = Synthetic::create(&dir.path().join("bench.db"), "bench", COMMITS).await;

    // Ingest: 100 batches (runs) of 200 benchmarks × 5 metrics = 100,000 measurements.
    let mut rates = Vec::new();
    for commit in 0..INGEST_BATCHES {
        let suites = suite(commit, BENCHMARKS);
        let started = Instant::now();
        let summary = data.store(commit, &suites).await;
        rates.push(summary.measurements as f64 / started.elapsed().as_secs_f64());
    }
    println!(
        "ingest: {} measurements in {INGEST_BATCHES} batches of {}: median {:.0} measurements/s (min {:.0}, max {:.0})",
        INGEST_BATCHES * BENCHMARKS * METRICS,
        BENCHMARKS * METRICS,
        median(rates.clone()),
        rates.iter().copied().fold(f64::INFINITY, f64::min),
        rates.iter().copied().fold(0.0, f64::max),
    );

    if std::env::args().any(|arg| arg == "ingest") {
        return;
    }
    // One benchmark with 1,000 commits of results (one metric), for the page render.
    for commit in 0..COMMITS {
        let mut suites = suite(commit, 1);
        suites[0].results.benchmarks[0].name = "page/one".into();
        suites[0].results.benchmarks[0].metrics.truncate(1);
        data.store(commit, &suites).await;
    }
    let router = router(data.db, dir.path());
    let (median_ms, size) = time_page(&router, "/repos/bench/benchmarks/page/one", 50).await;
    println!(
        "benchmark page, series of {COMMITS} commits: median {:.2} ms over {} renders ({} KiB)",
        median_ms,
        50,
        size / 1024
    );
    let (cached_ms, _) = time_cached_page(&router, "/repos/bench/benchmarks/page/one", 50).await;
    println!(
        "the same page to anonymous readers, from the response cache: median {cached_ms:.3} ms"
    );
}
