//! How long analysing one long series takes: median over repeated runs in one process.

use std::hint::black_box;
use std::time::{Duration, Instant};

use kymo_core::model::Direction;
use kymo_core::stats::{
    CommitObservation, Sensitivity, compare, detect_change_points, noise_model,
};

use crate::generator::Rng;

/// Median, fastest and slowest of `runs` timings of `work`, and the median time the thread
/// spent on a CPU (None where the kernel does not say).
pub struct Timing {
    pub median: Duration,
    pub min: Duration,
    pub max: Duration,
    pub on_cpu_median: Option<Duration>,
}

/// The time this thread has spent running on a CPU (`CLOCK_THREAD_CPUTIME_ID`). On a shared
/// machine the wall time of a run includes the time other work held the CPUs; this does not.
fn on_cpu() -> Option<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to a local.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    (status == 0).then(|| Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
}

fn time(runs: usize, mut work: impl FnMut()) -> Timing {
    let (mut durations, mut on_cpu_durations): (Vec<Duration>, Vec<Option<Duration>>) = (0..runs)
        .map(|_| {
            let cpu = on_cpu();
            let start = Instant::now();
            work();
            let wall = start.elapsed();
            (wall, cpu.zip(on_cpu()).map(|(a, b)| b.saturating_sub(a)))
        })
        .unzip();
    durations.sort_unstable();
    on_cpu_durations.sort_unstable();
    Timing {
        median: durations[runs / 2],
        min: durations[0],
        max: durations[runs - 1],
        on_cpu_median: on_cpu_durations[runs / 2],
    }
}

/// A 10,000-commit series with 3 % noise, a step every 700 commits, a drift and spikes.
pub fn long_series(len: usize) -> Vec<CommitObservation> {
    let mut rng = Rng::new(0x5EED);
    let mut level = 1000.0;
    (0..len)
        .map(|i| {
            if i % 700 == 350 {
                level *= if rng.coin(0.5) { 1.1 } else { 0.9 };
            }
            if (5000..5040).contains(&i) {
                level *= 1.004;
            }
            let spike = if i % 333 == 100 { 1.5 } else { 1.0 };
            CommitObservation::new(i, level * spike * (1.0 + 0.03 * rng.normal()))
        })
        .collect()
}

/// Times the full analysis of a series (noise model + change points) and one per-commit
/// test of 30 samples against 30.
pub fn run(len: usize, runs: usize) -> (Timing, Timing, usize) {
    let series = long_series(len);
    let sensitivity = Sensitivity::default();
    let found = detect_change_points(&series, Direction::Lower, &sensitivity).len();
    let analysis = time(runs, || {
        let noise = noise_model(black_box(&series));
        let points = detect_change_points(black_box(&series), Direction::Lower, &sensitivity);
        black_box((noise, points));
    });
    let mut rng = Rng::new(7);
    let base: Vec<f64> = (0..30).map(|_| 100.0 + rng.normal()).collect();
    let head: Vec<f64> = (0..30).map(|_| 101.0 + rng.normal()).collect();
    let noise = noise_model(&series[..100]);
    let per_commit = time(runs * 20, || {
        black_box(compare(
            black_box(&base),
            black_box(&head),
            Direction::Lower,
            &noise,
            &sensitivity,
        ));
    });
    (analysis, per_commit, found)
}
