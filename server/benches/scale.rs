//! Figures at scale (issue "Trust"): the render time of a 10,000-point trend SVG, and of the
//! compare page for two commits of 1,000 benchmarks each with 100 commits of history, first
//! reading that history, then with the noise models the analysis stores; and the verdicts
//! alone, 1,000 at a time, for three shapes of data. Run with
//! `cargo bench -p kymo-server --bench scale`. Prints medians; the machine is shared, so quote
//! them with the load at the time (see RELIABILITY.md).

#[path = "support/synthetic.rs"]
mod synthetic;
#[path = "support/timing.rs"]
mod timing;

use std::collections::BTreeMap;
use std::time::Instant;

use kymo_core::model::Direction;
use kymo_core::protocol::SuiteUpload;
use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};
use kymo_core::stats::{NoiseModel, Sensitivity, compare};
use kymo_server::analysis::analyse_repository;
use kymo_server::chart::{TrendChart, TrendPoint, render_trend_svg};
use synthetic::{Synthetic, sha};
use timing::{median, router, state, time_cached_page, time_page};

const TREND_POINTS: usize = 10_000;
const COMPARE_BENCHMARKS: usize = 1_000;
const COMPARE_HISTORY: usize = 100;

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
                committed_at: Some(1_790_000_000 + i as i64 * 3_600),
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
    let data = Synthetic::create(&dir.path().join("bench.db"), "bench", COMPARE_HISTORY + 1).await;
    for commit in 0..=COMPARE_HISTORY {
        data.store(commit, &suites(commit)).await;
    }
    let analysis = state(data.db.clone(), dir.path());
    let router = router(data.db, dir.path());
    let path = format!(
        "/repos/bench/compare/{}...{}",
        sha(COMPARE_HISTORY - 1),
        sha(COMPARE_HISTORY)
    );
    // Stored through the database alone, nothing was analysed: the compare reads history.
    let (median_ms, size) = time_page(&router, &path, 10).await;
    println!(
        "compare page of {COMPARE_BENCHMARKS} benchmarks ({COMPARE_HISTORY} commits of history), reading history: median {:.2} ms over {} renders ({} KiB)",
        median_ms,
        10,
        size / 1024
    );
    let started = Instant::now();
    analyse_repository(&analysis, data.repository_id)
        .await
        .unwrap();
    let analysis_s = started.elapsed().as_secs_f64();
    let (median_ms, size) = time_page(&router, &path, 10).await;
    println!(
        "compare page of {COMPARE_BENCHMARKS} benchmarks ({COMPARE_HISTORY} commits of history), stored noise models: median {:.2} ms over {} renders ({} KiB; analysis took {analysis_s:.1} s)",
        median_ms,
        10,
        size / 1024
    );
    let (cached_ms, _) = time_cached_page(&router, &path, 10).await;
    println!(
        "the same compare to anonymous readers, from the response cache: median {cached_ms:.3} ms"
    );
}

/// The base and head samples of the `i`-th of many verdicts.
type Shape = fn(usize) -> (Vec<f64>, Vec<f64>);

/// 1,000 per-commit verdicts against a noise history, as a compare of 1,000 series judges
/// them: single values, five distinct samples a side, and five samples a side that tie.
fn verdicts() {
    let noise = NoiseModel {
        level: 100.0,
        between_commit_sd: 1.0,
        between_commit_pct: 1.0,
        within_run_cv_pct: None,
        changes: 99,
        samples_per_commit: 1,
    };
    let sensitivity = Sensitivity::default();
    fn side(start: f64, step: f64, count: usize) -> Vec<f64> {
        (0..count).map(|k| start + k as f64 * step).collect()
    }
    let shapes: [(&str, Shape); 3] = [
        ("single values", |i| {
            (vec![100.0 + i as f64 * 1e-3], vec![101.0])
        }),
        ("five samples", |i| {
            (side(100.0 + i as f64 * 1e-3, 0.37, 5), side(100.5, 0.41, 5))
        }),
        ("five tied samples", |_| {
            (side(100.0, 1.0, 5), side(101.0, 1.0, 5))
        }),
    ];
    for (shape, data) in shapes {
        let inputs: Vec<(Vec<f64>, Vec<f64>)> = (0..COMPARE_BENCHMARKS).map(data).collect();
        let times: Vec<f64> = (0..20)
            .map(|_| {
                let started = Instant::now();
                for (base, head) in &inputs {
                    std::hint::black_box(compare(
                        base,
                        head,
                        Direction::Lower,
                        &noise,
                        &sensitivity,
                    ));
                }
                started.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        println!(
            "{COMPARE_BENCHMARKS} verdicts of {shape}: median {:.2} ms over 20 rounds",
            median(times)
        );
    }
}

#[tokio::main]
async fn main() {
    trend_svg();
    verdicts();
    compare_page().await;
}
