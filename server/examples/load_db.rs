//! Generates the load-test database: one repository `load` with COMMITS commits, each measured
//! once on one machine for BENCHMARKS benchmarks × METRICS metrics (1,000 × 200 × 5 =
//! 1,000,000 measurements by default), through the same ingest code as uploads
//! (`Db::store_run`), then analysed for change points as the server would. Values are noisy and
//! some benchmarks step up or down at a commit, so pages have regressions to show.
//!
//! `cargo run --release -p kymo-server --example load_db -- PATH [COMMITS] [BENCHMARKS]
//! [--no-analysis] [--staged-tail=N]` (used by `scripts/load.sh` and `scripts/load-scale.sh`).
//! Prints the ingest rate and what it made. `--no-analysis` skips the change-point analysis: at
//! 100,000 commits a series it takes longer than the ingest, and the pages read the same
//! measurements without it. `--staged-tail=N` stores the last N commits without merging them
//! (as a server holds them between merges), so that readers measured afterwards read a full
//! staged table; the ingest rates are those of the commits before them, merges included.
//!
//! `load_db PATH [BENCHMARKS] --append=N` measures ingest into a database made before: it adds
//! N commits after its last and stores a run of each, merges included (at 100 million stored,
//! the rate of its last 1,000 commits without a 20-minute fill); `--staged-tail=M` leaves the
//! last M of them staged, and the rate is that of the others (`scripts/load-scale.sh` with
//! `APPEND=N`). It also prints the CPU time those took, steadier than the rate on a machine
//! whose speed moves.

#[path = "../benches/support/synthetic.rs"]
mod synthetic;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use kymo_core::clock::ManualClock;
use kymo_core::db::LeaseSettings;
use kymo_core::model::Direction;
use kymo_core::protocol::SuiteUpload;
use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};
use kymo_server::AppState;
use synthetic::{Synthetic, sha};

const METRICS: usize = 5;
const SAMPLES: usize = 5;

/// A small deterministic generator (no dependency needed for noise).
struct Noise(u64);

impl Noise {
    /// Roughly normal noise (sum of uniforms), mean 0, sd about 1.
    fn next(&mut self) -> f64 {
        let mut sum = 0.0;
        for _ in 0..4 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            sum += (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        }
        (sum - 2.0) * 1.7
    }
}

fn suites(commit: usize, benchmarks: usize, noise: &mut Noise) -> Vec<SuiteUpload> {
    let benchmarks = (0..benchmarks)
        .map(|b| {
            // Every 10th benchmark gets 15 % slower at a commit of its own; every 25th faster.
            let step_at = 100 + (b * 37) % 800;
            let step = match (b % 10, b % 25) {
                (0, _) if commit >= step_at => 1.15,
                (_, 3) if commit >= step_at => 0.9,
                _ => 1.0,
            };
            let metrics = (0..METRICS)
                .map(|m| {
                    let level = (1_000.0 + 37.0 * b as f64 + 500.0 * m as f64) * step;
                    let samples: Vec<f64> = (0..SAMPLES)
                        .map(|_| level * (1.0 + 0.01 * noise.next()))
                        .collect();
                    let mut sorted = samples.clone();
                    sorted.sort_by(f64::total_cmp);
                    MetricResult {
                        name: format!("metric_{m}"),
                        unit: "ns".into(),
                        direction: Direction::Lower,
                        value: sorted[SAMPLES / 2],
                        samples,
                        hdr: None,
                    }
                })
                .collect();
            BenchmarkResult {
                name: format!("group_{}/bench_{b}", b % 10),
                params: BTreeMap::new(),
                metrics,
            }
        })
        .collect();
    vec![SuiteUpload {
        suite: "load".into(),
        results: SuiteResults { benchmarks },
    }]
}

#[tokio::main]
async fn main() {
    let (flags, positional): (Vec<String>, Vec<String>) =
        std::env::args().skip(1).partition(|a| a.starts_with("--"));
    let mut analyse = true;
    let mut staged_tail = 0;
    let mut append = None;
    for flag in &flags {
        match flag.split_once('=') {
            None if flag == "--no-analysis" => analyse = false,
            Some(("--staged-tail", n)) => staged_tail = n.parse().expect("--staged-tail=N"),
            Some(("--append", n)) => append = Some(n.parse().expect("--append=N")),
            _ => panic!(
                "unknown flag {flag}; they are --no-analysis, --staged-tail=N and --append=N"
            ),
        }
    }
    let mut args = positional.into_iter();
    let path = PathBuf::from(
        args.next()
            .expect("usage: load_db PATH [COMMITS] [BENCHMARKS] [--no-analysis]"),
    );
    if let Some(added) = append {
        let benchmarks = args.next().map_or(200, |a| a.parse().unwrap());
        return append_commits(&path, added, benchmarks, staged_tail).await;
    }
    let commits: usize = args.next().map_or(1_000, |a| a.parse().unwrap());
    let benchmarks: usize = args.next().map_or(200, |a| a.parse().unwrap());
    assert!(!path.exists(), "{} exists; remove it first", path.display());
    let data = Synthetic::create(&path, "load", commits).await;
    let mut noise = Noise(42);
    let mut stored = 0;
    let mut ingest_seconds = 0.0;
    let merged = staged_tail.min(commits);
    let filled = commits - merged;
    // The rate at the end of the fill, when the database holds (nearly) everything: what an
    // upload costs at this size, which the average over the whole fill hides.
    let last = (filled / 10).clamp(1, 1_000);
    let (mut last_seconds, mut last_stored) = (0.0, 0);
    let (mut tail_seconds, mut tail_stored) = (0.0, 0);
    for commit in 0..commits {
        if commit == filled {
            data.db.set_merge_threshold(u64::MAX);
        }
        let suites = suites(commit, benchmarks, &mut noise);
        let started = Instant::now();
        let summary = data.store(commit, &suites).await;
        let seconds = started.elapsed().as_secs_f64();
        if commit >= filled {
            tail_seconds += seconds;
            tail_stored += summary.measurements;
            continue;
        }
        ingest_seconds += seconds;
        stored += summary.measurements;
        if commit + last >= filled {
            last_seconds += seconds;
            last_stored += summary.measurements;
        }
    }
    println!(
        "stored {stored} measurements ({filled} commits × {benchmarks} benchmarks × {METRICS} metrics) in {ingest_seconds:.1} s of ingest, merges included: {:.0} measurements/s; the last {last} commits {:.0} measurements/s",
        stored as f64 / ingest_seconds,
        last_stored as f64 / last_seconds
    );
    if merged > 0 {
        println!(
            "then {tail_stored} measurements of {merged} more commits, left staged: {:.0} measurements/s; {} rows staged",
            tail_stored as f64 / tail_seconds,
            data.db.staged_rows().await.unwrap()
        );
    }

    if analyse {
        let started = Instant::now();
        let state = AppState::new(
            data.db.clone(),
            Arc::new(ManualClock::at(1_800_000_000)),
            LeaseSettings::default(),
            path.with_extension("data"),
            "http://127.0.0.1:8080".into(),
        );
        let found = kymo_server::analysis::analyse_repository(&state, data.repository_id)
            .await
            .unwrap();
        println!(
            "analysed {} series in {:.1} s: {} changes found",
            benchmarks * METRICS,
            started.elapsed().as_secs_f64(),
            found.len()
        );
    }
    println!(
        "machine {}; head {}; a stepped benchmark: group_0/bench_0",
        data.fingerprint,
        sha(commits - 1)
    );
    data.db.close().await;
}

/// Adds `added` commits to the database at `path` and stores a run of each, timed; the last
/// `staged_tail` without a merge.
async fn append_commits(path: &Path, added: usize, benchmarks: usize, staged_tail: usize) {
    let (data, first) = Synthetic::open(path, "load").await;
    data.extend_history(first + added).await;
    let merged = first + added - staged_tail.min(added);
    let mut noise = Noise(first as u64);
    let (mut stored, mut seconds) = (0, 0.0);
    let cpu_before = cpu_seconds();
    let mut cpu = None;
    for commit in first..first + added {
        if commit == merged {
            cpu = cpu_seconds()
                .zip(cpu_before)
                .map(|(after, before)| after - before);
            // What the last merge left staged goes first: a reader then finds exactly the
            // tail staged, the most it finds between two merges.
            data.db.merge_staged().await.unwrap();
            data.db.set_merge_threshold(u64::MAX);
        }
        let suites = suites(commit, benchmarks, &mut noise);
        let started = Instant::now();
        let summary = data.store(commit, &suites).await;
        if commit < merged {
            seconds += started.elapsed().as_secs_f64();
            stored += summary.measurements;
        }
    }
    // The process' CPU time steadies a comparison on a machine whose speed moves: it counts
    // the noise generated for each commit too, which is the same in every build.
    let cpu = cpu.or_else(|| {
        cpu_seconds()
            .zip(cpu_before)
            .map(|(after, before)| after - before)
    });
    let timed = merged - first;
    println!(
        "appended {stored} measurements (commits {first}..{merged}) in {seconds:.1} s, merges included: {:.0} measurements/s; CPU {}; then {} commits left staged, {} rows staged",
        stored as f64 / seconds,
        cpu.map_or("not known".into(), |cpu| format!(
            "{cpu:.2} s, {:.2} ms a commit",
            1e3 * cpu / timed as f64
        )),
        first + added - merged,
        data.db.staged_rows().await.unwrap(),
    );
    data.db.close().await;
}

/// This process' CPU time, user and system (every thread's), in seconds.
fn cpu_seconds() -> Option<f64> {
    // SAFETY: getrusage fills the struct it is handed; zeroes are a valid `rusage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}
