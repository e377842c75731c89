//! The ring benchmarks: the write-path comparison, series-count scaling, batch recording
//! and the cost of downsampling.

use std::hint::black_box;
use std::time::Duration;

use super::baselines::{AtomicCounter, UdpStatsdSink, WriteSyscallSink};
use super::store::{DEFAULT_TIERS, MetricsStore, SeriesHandle};
use crate::error::KernelError;
use crate::measure::{median, ns_per_op_for, per_op_latency};
use crate::report::{BenchmarkResult, Direction, Metric};
use crate::runner::{RunContext, Suite, unknown};

/// The ring suite.
pub struct RingSuite;

const SERIES_COUNTS: [usize; 4] = [1, 10, 30, 100];
/// A fixed wall-clock-like origin; the store only needs non-zero, increasing timestamps.
const T0: u64 = 1_699_999_200_000_000_000;

impl Suite for RingSuite {
    fn name(&self) -> &'static str {
        "ring"
    }

    fn benchmarks(&self, quick: bool) -> Vec<String> {
        let mut names: Vec<String> = ["record", "atomic_counter", "write_syscall", "udp_send"]
            .iter()
            .map(|case| format!("ring/write_path/{case}"))
            .collect();
        if !quick {
            for n in SERIES_COUNTS {
                names.push(format!("ring/series_count/{n}"));
            }
            for n in SERIES_COUNTS {
                names.push(format!("ring/record_batch/series_count_{n}"));
            }
            names.push("ring/record/30_series_throughput".to_string());
            names.push("ring/downsample/consolidate_16_series".to_string());
        }
        names
    }

    fn run(
        &self,
        selected: &[String],
        context: &RunContext,
    ) -> Result<Vec<BenchmarkResult>, KernelError> {
        selected
            .iter()
            .map(|name| {
                context.progress(name);
                let result = run_one(name, context)?;
                Ok(result.variant("store", context.variants.ring.store))
            })
            .collect()
    }
}

fn run_one(name: &str, context: &RunContext) -> Result<BenchmarkResult, KernelError> {
    let store_path = context.scratch.join("ring.store");
    let kind = context.variants.ring.store;
    match name {
        "ring/write_path/record" => {
            let mut store = MetricsStore::create(&store_path, 1, &DEFAULT_TIERS, kind)?;
            let series = store.register("vm.cpu")?;
            write_path(name, context, |i| {
                store.record(series, T0 + i * 1_000, i as f64)
            })
        }
        "ring/write_path/atomic_counter" => {
            let counter = AtomicCounter::default();
            let result = write_path(name, context, |_| {
                counter.inc();
                Ok(())
            });
            black_box(counter.get());
            result
        }
        "ring/write_path/write_syscall" => {
            let mut sink = WriteSyscallSink::create(&context.scratch.join("ring.write"))?;
            write_path(name, context, |i| sink.record(T0 + i * 1_000, i as f64))
        }
        "ring/write_path/udp_send" => {
            let mut sink = UdpStatsdSink::bind()?;
            write_path(name, context, |i| sink.record("vm.cpu", i as f64))
        }
        "ring/record/30_series_throughput" => {
            batch_throughput(name, context, &store_path, 30).map(|r| r.param("series", 30))
        }
        "ring/downsample/consolidate_16_series" => downsample(name, context, &store_path),
        _ => {
            if let Some(n) = name.strip_prefix("ring/series_count/") {
                let n: usize = n.parse().map_err(|_| unknown(name))?;
                return series_scaling(name, context, &store_path, n).map(|r| r.param("series", n));
            }
            if let Some(n) = name.strip_prefix("ring/record_batch/series_count_") {
                let n: usize = n.parse().map_err(|_| unknown(name))?;
                return batch_throughput(name, context, &store_path, n)
                    .map(|r| r.param("series", n));
            }
            Err(unknown(name))
        }
    }
}

struct Effort {
    repetitions: usize,
    per_repetition: Duration,
    max_latency_iterations: u64,
}

fn effort(context: &RunContext) -> Effort {
    if context.quick {
        Effort {
            repetitions: 9,
            per_repetition: Duration::from_millis(10),
            max_latency_iterations: 50_000,
        }
    } else {
        Effort {
            repetitions: 10,
            per_repetition: Duration::from_millis(100),
            max_latency_iterations: 10_000_000,
        }
    }
}

/// The write-path comparison: time per operation from tight loops (samples), and a
/// per-operation latency histogram timed with `Instant::now()` as the write-up does.
fn write_path(
    name: &str,
    context: &RunContext,
    mut op: impl FnMut(u64) -> Result<(), KernelError>,
) -> Result<BenchmarkResult, KernelError> {
    let effort = effort(context);
    let mut failure = None;
    let mut offset = 0u64;
    let (ops, samples) = ns_per_op_for(effort.repetitions, effort.per_repetition, |n| {
        for i in offset..offset + n {
            if let Err(e) = op(i) {
                failure.get_or_insert(e);
            }
        }
        offset += n;
    });
    let iterations = (ops * effort.repetitions as u64).min(effort.max_latency_iterations);
    let warmup = (iterations / 10).min(100_000);
    let histogram = per_op_latency(warmup, iterations, |i| {
        if let Err(e) = op(offset + i) {
            failure.get_or_insert(e);
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    let ns = median(&samples);
    Ok(BenchmarkResult::new(name)
        .metric(Metric::samples("time", "ns", Direction::Lower, samples))
        .metric(Metric::value(
            "throughput",
            "writes/s",
            Direction::Higher,
            1e9 / ns.max(1e-3),
        ))
        .metric(Metric::histogram(
            "latency",
            "ns",
            Direction::Lower,
            &histogram,
        )?)
        .metric(Metric::value(
            "latency_p50",
            "ns",
            Direction::Lower,
            histogram.value_at_quantile(0.5) as f64,
        ))
        .metric(Metric::value(
            "latency_p99",
            "ns",
            Direction::Lower,
            histogram.value_at_quantile(0.99) as f64,
        ))
        .metric(Metric::value(
            "latency_p999",
            "ns",
            Direction::Lower,
            histogram.value_at_quantile(0.999) as f64,
        )))
}

fn store_with_series(
    context: &RunContext,
    path: &std::path::Path,
    n: usize,
) -> Result<(MetricsStore, Vec<SeriesHandle>), KernelError> {
    let mut store = MetricsStore::create(path, n, &DEFAULT_TIERS, context.variants.ring.store)?;
    let handles = (0..n)
        .map(|i| store.register(&format!("vm.series_{i}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((store, handles))
}

/// `record()` round-robin over `n` series: how the cost grows when the slabs touched no
/// longer share cache lines.
fn series_scaling(
    name: &str,
    context: &RunContext,
    path: &std::path::Path,
    n: usize,
) -> Result<BenchmarkResult, KernelError> {
    let (mut store, handles) = store_with_series(context, path, n)?;
    let effort = effort(context);
    let mut failure = None;
    let mut offset = 0u64;
    let (_, samples) = ns_per_op_for(effort.repetitions, effort.per_repetition, |ops| {
        for i in offset..offset + ops {
            let series = handles[(i % n as u64) as usize];
            if let Err(e) = store.record(series, T0 + i * 1_000, i as f64) {
                failure.get_or_insert(e);
            }
        }
        offset += ops;
    });
    failure.map_or(Ok(()), Err)?;
    let ns = median(&samples);
    Ok(BenchmarkResult::new(name)
        .metric(Metric::samples("time", "ns", Direction::Lower, samples))
        .metric(Metric::value(
            "throughput",
            "writes/s",
            Direction::Higher,
            1e9 / ns.max(1e-3),
        )))
}

/// `record_batch()` of one value per series per tick, as a VMM's event loop records.
fn batch_throughput(
    name: &str,
    context: &RunContext,
    path: &std::path::Path,
    n: usize,
) -> Result<BenchmarkResult, KernelError> {
    let (mut store, handles) = store_with_series(context, path, n)?;
    let mut points: Vec<(SeriesHandle, f64)> = handles.iter().map(|&h| (h, 0.0)).collect();
    let effort = effort(context);
    let mut failure = None;
    let mut tick = 0u64;
    let (_, samples) = ns_per_op_for(effort.repetitions, effort.per_repetition, |batches| {
        for _ in 0..batches {
            tick += 1;
            for (i, point) in points.iter_mut().enumerate() {
                point.1 = (tick + i as u64) as f64;
            }
            if let Err(e) = store.record_batch(T0 + tick * 1_000_000, &points) {
                failure.get_or_insert(e);
            }
        }
    });
    failure.map_or(Ok(()), Err)?;
    let ns_per_batch = median(&samples);
    Ok(BenchmarkResult::new(name)
        .metric(Metric::samples("time", "ns", Direction::Lower, samples))
        .metric(Metric::value(
            "throughput",
            "writes/s",
            Direction::Higher,
            1e9 * n as f64 / ns_per_batch.max(1e-3),
        )))
}

/// One maintenance pass over 16 series × 3 tiers after an hour of seconds.
fn downsample(
    name: &str,
    context: &RunContext,
    path: &std::path::Path,
) -> Result<BenchmarkResult, KernelError> {
    let (mut store, handles) = store_with_series(context, path, 16)?;
    const SECOND: u64 = 1_000_000_000;
    for s in 0..3600u64 {
        for &h in &handles {
            store.record(h, T0 + s * SECOND, s as f64)?;
        }
    }
    let samples: Vec<f64> = (0..effort(context).repetitions)
        .map(|_| {
            // Reset the consolidation marks so every repetition does the same work.
            for series in 0..handles.len() {
                for tier in 1..3 {
                    store.set_consolidated_until(series, tier, 0);
                }
            }
            let (written, elapsed) =
                crate::measure::timed(|| store.consolidate(T0 + 3600 * SECOND));
            black_box(written);
            elapsed.as_nanos() as f64
        })
        .collect();
    Ok(BenchmarkResult::new(name)
        .param("series", 16)
        .metric(Metric::samples("time", "ns", Direction::Lower, samples)))
}
