//! Timing primitives shared by the kernels: repeated timed runs, per-operation latency
//! histograms, and the statistics the reports quote.

use std::hint::black_box;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::error::KernelError;
use crate::instructions::region::{COUNTED_OPERATIONS, counted, counting};

/// The median of `values`; 0 for an empty slice (callers never pass one on purpose, and a
/// report with a zero is easier to diagnose than a panic mid-run).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// Runs `body(ops)` once to warm up, then `repetitions` times, and returns the nanoseconds
/// per operation of each timed repetition. Several short repetitions let the report carry
/// samples whose median resists a scheduler hiccup on a shared two-core machine.
pub fn ns_per_op(repetitions: usize, ops: u64, mut body: impl FnMut(u64)) -> Vec<f64> {
    body(ops.div_ceil(4).max(1));
    (0..repetitions)
        .map(|_| {
            let start = Instant::now();
            body(ops);
            start.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect()
}

/// Like [`ns_per_op`], but first sizes the operation count so that one repetition takes
/// about `per_repetition`: slow operations (a syscall, a UDP send) and fast ones (a store
/// into a map) then cost the run the same wall time.
pub fn ns_per_op_for(
    repetitions: usize,
    per_repetition: Duration,
    mut body: impl FnMut(u64),
) -> (u64, Vec<f64>) {
    if counting() {
        // The count run: a fixed number of operations, warmed up once like a timed run.
        let ops = COUNTED_OPERATIONS;
        body(ops.div_ceil(4));
        let ((), elapsed) = timed(|| counted(|| body(ops)));
        return (ops, vec![elapsed.as_nanos() as f64 / ops as f64]);
    }
    let ops = operations_for(per_repetition, |ops| timed(|| body(ops)).1);
    let samples = (0..repetitions)
        .map(|_| {
            let start = Instant::now();
            body(ops);
            start.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect();
    (ops, samples)
}

/// How many operations make one repetition last about `per_repetition`, given `run(ops)`
/// that does `ops` operations and says how long they took. The count grows fourfold from
/// 16 until a run lasts a quarter of the target, then scales to the whole target.
fn operations_for(per_repetition: Duration, mut run: impl FnMut(u64) -> Duration) -> u64 {
    let mut ops = 16u64;
    loop {
        let elapsed = run(ops);
        if elapsed * 4 >= per_repetition || ops >= 1 << 32 {
            let per_op = elapsed.as_nanos().max(1) as f64 / ops as f64;
            return ((per_repetition.as_nanos() as f64 / per_op) as u64).max(1);
        }
        ops *= 4;
    }
}

/// Times one run of `body`.
pub fn timed<T>(body: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = body();
    (out, start.elapsed())
}

/// A histogram for latencies in whatever unit the caller records (ns, µs), up to one hour
/// of nanoseconds with three significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds are valid")
}

/// Records `value` into `histogram`, clamping to its range rather than failing a whole run
/// on one absurd sample.
pub fn record_clamped(histogram: &mut Histogram<u64>, value: u64) {
    let value = value.min(histogram.high());
    histogram
        .record(value)
        .expect("value was clamped into the histogram's range");
}

/// What one `Instant::now()` pair costs here, so that per-operation latencies can report
/// the operation rather than the clock. The minimum over many tries is the clock's floor.
pub fn timer_overhead_ns() -> u64 {
    (0..2_000)
        .map(|_| {
            let start = Instant::now();
            black_box(());
            start.elapsed().as_nanos() as u64
        })
        .min()
        .unwrap_or(0)
}

/// Times each of `iterations` calls of `op(i)` with `Instant::now()` (the write-up's
/// method), after `warmup` untimed calls, subtracting the clock's own cost. Operations
/// faster than the clock's resolution land at 0 ns, as in the write-up's `~0` p50.
pub fn per_op_latency(
    warmup: u64,
    iterations: u64,
    mut op: impl FnMut(u64),
) -> Result<Histogram<u64>, KernelError> {
    for i in 0..warmup {
        op(i);
    }
    // The count run counts the timed loops, not this one; a short histogram keeps it quick.
    let iterations = if counting() {
        iterations.min(1_000)
    } else {
        iterations
    };
    let overhead = timer_overhead_ns();
    let mut histogram = latency_histogram();
    for i in 0..iterations {
        let start = Instant::now();
        op(warmup + i);
        let elapsed = start.elapsed().as_nanos() as u64;
        record_clamped(&mut histogram, elapsed.saturating_sub(overhead));
    }
    Ok(histogram)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn ns_per_op_returns_one_sample_per_repetition() {
        let mut calls = Vec::new();
        let samples = ns_per_op(3, 8, |ops| calls.push(ops));
        assert_eq!(samples.len(), 3);
        assert_eq!(calls, vec![2, 8, 8, 8]);
    }

    #[test]
    fn the_operation_count_scales_to_the_target_duration() {
        let mut asked = Vec::new();
        let ops = operations_for(Duration::from_millis(4), |n| {
            asked.push(n);
            Duration::from_micros(200) * n as u32
        });
        assert_eq!(asked, vec![16]);
        assert_eq!(ops, 20);

        let mut asked = Vec::new();
        let ops = operations_for(Duration::from_millis(10), |n| {
            asked.push(n);
            Duration::from_nanos(n)
        });
        assert_eq!(
            asked,
            vec![
                16, 64, 256, 1024, 4096, 16384, 65536, 262_144, 1_048_576, 4_194_304
            ]
        );
        assert_eq!(ops, 10_000_000);
    }

    #[test]
    fn an_operation_slower_than_the_target_runs_once() {
        assert_eq!(
            operations_for(Duration::from_millis(1), |_| Duration::from_secs(1)),
            1
        );
    }

    #[test]
    fn calibrated_runs_time_every_repetition() {
        // A real sleep is never shorter than asked, however loaded the machine; how much
        // longer it is, and so the operation count, depends on the scheduler.
        let (ops, samples) = ns_per_op_for(2, Duration::from_millis(4), |n| {
            for _ in 0..n {
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        assert!(ops >= 1);
        assert_eq!(samples.len(), 2);
        assert!(samples.iter().all(|&ns| ns >= 200_000.0), "{samples:?}");
    }

    #[test]
    fn per_op_latency_sees_a_sleep() {
        let h = per_op_latency(0, 3, |_| std::thread::sleep(Duration::from_millis(1))).unwrap();
        assert_eq!(h.len(), 3);
        assert!(h.min() >= 900_000, "min {}", h.min());
    }

    #[test]
    fn clamping_keeps_huge_values_in_range() {
        let mut h = latency_histogram();
        record_clamped(&mut h, u64::MAX);
        assert_eq!(h.len(), 1);
    }
}
