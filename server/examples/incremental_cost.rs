//! What one new point costs the analysis of a long history, side by side in one run on three
//! databases holding the same generated series (steps, a drift, spikes, 1–3 % noise, five
//! samples a commit):
//! - *incremental*: windows of `ANALYSIS_WINDOW` points, the earlier ones kept once proved
//!   unchanged (what the server does);
//! - *windowed, full*: the same windows, every one re-examined (the proof made to fail);
//! - *whole history*: one window over everything, the analysis before windows existed.
//!
//! Each round stores one more commit in each database (not timed), then times the analysis of
//! that run (reads, detection, records, state), in an order rotated per round. Prints the
//! medians per series, how many analyses took the incremental path, and how far the windowed
//! decisions agree with whole-history ones.
//!
//! `cargo run --release -p kymo-server --example incremental_cost -- [HISTORY] [SERIES] [ROUNDS]`

#[path = "../benches/support/synthetic.rs"]
mod synthetic;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kymo_core::clock::ManualClock;
use kymo_core::db::{LeaseSettings, RegressionFilter};
use kymo_core::protocol::SuiteUpload;
use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};
use kymo_core::stats::{ANALYSIS_WINDOW, Windows};
use kymo_server::AppState;
use synthetic::Synthetic;

const SAMPLES: usize = 5;

/// A small deterministic generator: uniform in [0, 1).
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Roughly normal, mean 0, sd about 1.
    fn normal(&mut self) -> f64 {
        ((0..4).map(|_| self.uniform()).sum::<f64>() - 2.0) * 1.7
    }
}

/// The level of series `b` at `commit`: a step of ±10–20 % every 500–900 commits, a slow
/// drift of 8 % over 200 commits in the middle, a spike every 333 commits.
fn level(b: usize, commit: usize) -> f64 {
    let every = 500 + (b * 131) % 400;
    let steps = commit / every;
    let mut level = 1_000.0 + 50.0 * b as f64;
    for s in 0..steps {
        level *= if (s + b).is_multiple_of(3) {
            0.85
        } else {
            1.12
        };
    }
    let drift_from = 4_000 + 97 * b;
    if commit >= drift_from {
        level *= 1.0 + 0.08 * ((commit - drift_from).min(200) as f64 / 200.0);
    }
    if commit % 333 == 100 + b {
        level *= 1.5;
    }
    level
}

fn suites(commit: usize, series: usize, rng: &mut Rng) -> Vec<SuiteUpload> {
    let benchmarks = (0..series)
        .map(|b| {
            let cv = 0.01 + 0.02 * (b % 3) as f64 / 2.0;
            let level = level(b, commit);
            let samples: Vec<f64> = (0..SAMPLES)
                .map(|_| level * (1.0 + cv * rng.normal()))
                .collect();
            let mut sorted = samples.clone();
            sorted.sort_by(f64::total_cmp);
            BenchmarkResult {
                name: format!("bench_{b}"),
                params: BTreeMap::new(),
                metrics: vec![MetricResult::time_ns(sorted[SAMPLES / 2], samples)],
            }
        })
        .collect();
    vec![SuiteUpload {
        suite: "generated".into(),
        results: SuiteResults { benchmarks },
    }]
}

struct Setup {
    name: &'static str,
    data: Synthetic,
    state: AppState,
    forced_full: bool,
    times: Vec<Duration>,
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let history: usize = args.next().map_or(10_000, |a| a.parse().unwrap());
    let series: usize = args.next().map_or(20, |a| a.parse().unwrap());
    let rounds: usize = args.next().map_or(21, |a| a.parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let whole = Windows::new(usize::MAX / 4);
    let mut setups = Vec::new();
    for (name, windows, forced_full) in [
        ("incremental", Windows::default(), false),
        ("windowed, full", Windows::default(), true),
        ("whole history", whole, false),
    ] {
        let path = dir.path().join(format!("{}.db", setups.len()));
        let data = Synthetic::create(&path, "generated", history + rounds).await;
        let mut rng = Rng(7);
        for commit in 0..history {
            data.store(commit, &suites(commit, series, &mut rng)).await;
        }
        let mut state = AppState::new(
            data.db.clone(),
            Arc::new(ManualClock::at(1_800_000_000)),
            LeaseSettings::default(),
            path.with_extension("data"),
            "http://127.0.0.1:8080".into(),
        );
        state.analysis_windows = windows;
        kymo_server::analysis::analyse_repository(&state, data.repository_id)
            .await
            .unwrap();
        setups.push(Setup {
            name,
            data,
            state,
            forced_full,
            times: Vec::new(),
        });
    }
    let mut rng = Rng(99);
    for round in 0..rounds {
        let commit = history + round;
        let suites = suites(commit, series, &mut rng);
        for k in 0..setups.len() {
            let setup = &mut setups[(k + round) % 3];
            if setup.forced_full {
                // A window length the stored states were not made with: the proof fails.
                let len = ANALYSIS_WINDOW + 2 * (round % 2);
                setup.state.analysis_windows = Windows::new(len);
            }
            let run = setup.data.store(commit, &suites).await.run_id;
            let started = Instant::now();
            kymo_server::analysis::analyse_run(&setup.state, run)
                .await
                .unwrap();
            setup.times.push(started.elapsed() / series as u32);
        }
    }
    println!(
        "{series} series of {history} commits, {rounds} commits appended; per series and new point (median):"
    );
    let whole_median = median(&mut setups[2].times.clone());
    for setup in &mut setups {
        let m = median(&mut setup.times);
        println!(
            "  {:<15} {:>9.2} ms  ({:.2}× the whole-history analysis)",
            setup.name,
            m.as_secs_f64() * 1e3,
            m.as_secs_f64() / whole_median.as_secs_f64()
        );
    }

    let (mut incremental, mut full) = (0, 0);
    let db = &setups[0].data.db;
    let repository = setups[0].data.repository_id;
    for s in db.series(repository, None, None, None).await.unwrap() {
        let counts = db.analysis_counts(s.id).await.unwrap();
        incremental += counts.incremental;
        full += counts.full;
    }
    println!(
        "incremental database: {incremental} incremental analyses, {full} full (the first analysis of each series)"
    );

    let found = |setup: &Setup| {
        let (db, repository) = (setup.data.db.clone(), setup.data.repository_id);
        async move {
            let rows = db
                .regressions(repository, &RegressionFilter::default())
                .await
                .unwrap();
            (rows.into_iter())
                .map(|r| (r.benchmark, r.position.unwrap(), r.kind))
                .collect::<BTreeSet<_>>()
        }
    };
    let windowed = found(&setups[0]).await;
    let whole = found(&setups[2]).await;
    let near = |a: &BTreeSet<(String, i64, String)>, b: &BTreeSet<(String, i64, String)>| {
        (a.iter())
            .filter(|(bench, p, kind)| {
                b.iter()
                    .any(|(b2, p2, k2)| b2 == bench && k2 == kind && (p - p2).abs() <= 3)
            })
            .count()
    };
    println!(
        "change points: windowed {}, whole history {}; {} windowed ones within 3 commits of a whole-history one, {} whole-history ones within 3 of a windowed one",
        windowed.len(),
        whole.len(),
        near(&windowed, &whole),
        near(&whole, &windowed)
    );
    for setup in &setups {
        setup.data.db.close().await;
    }
}
