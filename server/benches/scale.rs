//! Figures at scale (issue "Trust"): the render time of a 10,000-point trend SVG, and of the
//! compare page for two commits of 1,000 benchmarks each with 100 commits of history, first
//! reading that history, then with the noise models the analysis stores; and the verdicts
//! alone, 1,000 at a time, for three shapes of data; and the benchmark page of 100 and 10,000
//! commits side by side (issue "The dashboard at a glance"). Run with
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
const PAGE_HISTORY: usize = 10_000;
const PAGE_METRICS: [(&str, &str, Direction); 5] = [
    ("time", "ns", Direction::Lower),
    ("throughput", "B/s", Direction::Higher),
    ("p99", "ns", Direction::Lower),
    ("allocations", "", Direction::Lower),
    ("rss", "B", Direction::Lower),
];

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
                committed_at: Some(1_790_000_000 + i as i64 * 3_600),
            }
        })
        .collect();
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..20 {
        let started = Instant::now();
        let chart =
            TrendChart::new("bench/10k", "ns", &points).with_commit_links("/repos/r/commits/");
        let svg = render_trend_svg(&chart).unwrap();
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
                metrics: vec![MetricResult::time_ns(samples[2], samples)],
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

/// One benchmark with five metrics at `commit` of `history`: noisy, with a step at three
/// quarters.
fn page_suite(commit: usize, history: usize) -> Vec<SuiteUpload> {
    let step = if commit >= history * 3 / 4 { 1.3 } else { 1.0 };
    let metrics = PAGE_METRICS
        .iter()
        .enumerate()
        .map(|(m, (name, unit, direction))| {
            let level = 1_000.0 * 10f64.powi(m as i32) * step;
            let samples: Vec<f64> = (0..5)
                .map(|s| level * (1.0 + ((commit * 7 + s * 3 + m) % 11) as f64 / 200.0))
                .collect();
            MetricResult {
                name: (*name).into(),
                unit: (*unit).into(),
                direction: *direction,
                value: samples[2],
                samples,
                hdr: None,
            }
        })
        .collect();
    vec![SuiteUpload {
        suite: "page".into(),
        results: SuiteResults {
            benchmarks: vec![BenchmarkResult {
                name: "group/page".into(),
                params: BTreeMap::new(),
                metrics,
            }],
        },
    }]
}

/// The benchmark page (five charts) of 100 and of 10,000 commits, computed, side by side.
async fn benchmark_page() {
    let dir = tempfile::tempdir().unwrap();
    let data = Synthetic::create(&dir.path().join("page.db"), "page", PAGE_HISTORY).await;
    for commit in 0..PAGE_HISTORY {
        data.store(commit, &page_suite(commit, PAGE_HISTORY)).await;
    }
    analyse_repository(&state(data.db.clone(), dir.path()), data.repository_id)
        .await
        .unwrap();
    let router = router(data.db, dir.path());
    let mut figures = Vec::new();
    for _ in 0..3 {
        for last in [100, PAGE_HISTORY] {
            let path = format!("/repos/page/benchmarks/group/page?last={last}");
            figures.push((last, time_page(&router, &path, 10).await));
        }
    }
    for last in [100, PAGE_HISTORY] {
        let times: Vec<f64> = figures
            .iter()
            .filter(|f| f.0 == last)
            .map(|f| f.1.0)
            .collect();
        let size = figures.iter().find(|f| f.0 == last).map_or(0, |f| f.1.1);
        println!(
            "benchmark page, 5 charts, last {last} commits: median {:.2} ms over 30 renders ({} KiB)",
            median(times),
            size / 1024
        );
    }
}

/// Histories of the pages timed side by side (issue "Every page costs the same at 100,000
/// commits as at 100").
const HISTORIES: [usize; 3] = [100, 10_000, 100_000];

/// The benchmark page (five charts, the default window and zoomed out to 100,000 commits),
/// the series API and `trend.svg` of one benchmark at 100, 10,000 and 100,000 commits of
/// history, computed: 15 rounds, each rendering every page of every history once in turn, so
/// that the machine's load falls on all alike; medians and their ratio to 100 commits.
async fn history_pages() {
    let dir = tempfile::tempdir().unwrap();
    let mut routers = Vec::new();
    for history in HISTORIES {
        let started = Instant::now();
        let path = dir.path().join(format!("history-{history}.db"));
        let data = Synthetic::create(&path, "page", history).await;
        for commit in 0..history {
            data.store(commit, &page_suite(commit, history)).await;
        }
        data.db.merge_staged().await.unwrap();
        analyse_repository(&state(data.db.clone(), dir.path()), data.repository_id)
            .await
            .unwrap();
        println!(
            "history of {history} commits made and analysed in {:.0} s",
            started.elapsed().as_secs_f64()
        );
        routers.push(router(data.db, dir.path()));
    }
    let pages = [
        ("benchmark page", "/repos/page/benchmarks/group/page"),
        (
            "benchmark page zoomed out",
            "/repos/page/benchmarks/group/page?last=100000",
        ),
        (
            "series API",
            "/api/v1/repos/page/series?benchmark=group/page&metric=time",
        ),
        (
            "trend.svg",
            "/repos/page/trend.svg?benchmark=group/page&metric=time",
        ),
    ];
    let mut times = vec![vec![Vec::new(); HISTORIES.len()]; pages.len()];
    let mut sizes = vec![vec![0; HISTORIES.len()]; pages.len()];
    for _ in 0..15 {
        for (p, (_, path)) in pages.iter().enumerate() {
            for (h, router) in routers.iter().enumerate() {
                let (ms, size) = time_page(router, path, 1).await;
                times[p][h].push(ms);
                sizes[p][h] = size;
            }
        }
    }
    for (p, (name, _)) in pages.iter().enumerate() {
        let base = median(times[p][0].clone());
        for (h, history) in HISTORIES.iter().enumerate() {
            let ms = median(times[p][h].clone());
            println!(
                "{name}, {history} commits: median {ms:.2} ms of 15 ({:.2}x 100 commits), {} KiB",
                ms / base,
                sizes[p][h] / 1024
            );
        }
    }
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
    // `cargo bench -p kymo-server --bench scale -- NAME` runs the parts whose name holds NAME.
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let run = |name: &str| wanted.is_empty() || wanted.iter().any(|w| name.contains(w.as_str()));
    if run("trend_svg") {
        trend_svg();
    }
    if run("verdicts") {
        verdicts();
    }
    if run("compare_page") {
        compare_page().await;
    }
    if run("benchmark_page") {
        benchmark_page().await;
    }
    if run("history_pages") {
        history_pages().await;
    }
}
