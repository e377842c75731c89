//! The produce benchmarks: the write-up's three configurations (latency-optimized,
//! balanced, high-throughput) and a compression comparison.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::broker::{Broker, BrokerConfig, SyncPolicy};
use super::producer::{LiveCounters, ProduceOutcome, ProducerConfig, StopAfter, run_producers};
use super::protocol::Codec;
use crate::error::KernelError;
use crate::measure::{latency_histogram, median};
use crate::report::{BenchmarkResult, Direction, Metric};
use crate::runner::{RunContext, Suite, unknown};

/// The produce suite.
pub struct ProduceSuite;

const MESSAGE_SIZE: usize = 1024;

struct Case {
    name: &'static str,
    concurrency: usize,
    codec: Codec,
    batch_size: usize,
    linger: Duration,
    quick: bool,
}

const CASES: [Case; 4] = [
    Case {
        name: "produce/latency_optimized/concurrency_1",
        concurrency: 1,
        codec: Codec::None,
        batch_size: 1,
        linger: Duration::ZERO,
        quick: true,
    },
    Case {
        name: "produce/balanced/concurrency_32",
        concurrency: 32,
        codec: Codec::None,
        batch_size: 16_384,
        linger: Duration::from_millis(5),
        quick: false,
    },
    Case {
        name: "produce/high_throughput/concurrency_64",
        concurrency: 64,
        codec: Codec::Snappy,
        batch_size: 16_384,
        linger: Duration::from_millis(5),
        quick: true,
    },
    Case {
        name: "produce/compression/snappy_concurrency_32",
        concurrency: 32,
        codec: Codec::Snappy,
        batch_size: 16_384,
        linger: Duration::from_millis(5),
        quick: false,
    },
];

impl Suite for ProduceSuite {
    // Its figures are acknowledgements over a loopback socket, paced by a clock and by
    // threads: no fixed amount of work to count.
    fn counts_instructions(&self) -> bool {
        false
    }

    fn name(&self) -> &'static str {
        "produce"
    }

    fn benchmarks(&self, quick: bool) -> Vec<String> {
        CASES
            .iter()
            .filter(|c| c.quick || !quick)
            .map(|c| c.name.to_string())
            .collect()
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
                let case = CASES
                    .iter()
                    .find(|c| c.name == name)
                    .ok_or_else(|| unknown(name))?;
                run_case(case, context)
            })
            .collect()
    }
}

/// Prints a progress line on stderr every second while `body` runs.
pub fn with_progress<T>(label: &str, live: &LiveCounters, body: impl FnOnce() -> T) -> T {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut waited = Duration::ZERO;
            let mut last = 0;
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(50));
                waited += Duration::from_millis(50);
                if waited.as_millis().is_multiple_of(1000) {
                    let acked = live.acked.load(Ordering::Relaxed);
                    eprintln!(
                        "{label}: {:>4} s  {acked} acked  {} failed  {} msg/s",
                        waited.as_secs(),
                        live.failed.load(Ordering::Relaxed),
                        acked - last
                    );
                    last = acked;
                }
            }
        });
        let out = body();
        done.store(true, Ordering::Release);
        out
    })
}

fn run_case(case: &Case, context: &RunContext) -> Result<BenchmarkResult, KernelError> {
    // Quick runs skip the fsync: on a shared disk its cost varies more than the code does.
    let sync = if context.quick {
        SyncPolicy::None
    } else {
        SyncPolicy::Group
    };
    let stop = if context.quick {
        StopAfter::MessagesPerProducer((8_000 / case.concurrency as u64).clamp(100, 600))
    } else {
        StopAfter::Duration(Duration::from_secs(5))
    };
    let repetitions = 3;
    let mut outcomes: Vec<ProduceOutcome> = Vec::new();
    for rep in 0..repetitions {
        let dir = context
            .scratch
            .join(format!("broker-{}-{rep}", case.concurrency));
        let broker = Broker::start(BrokerConfig {
            dir: dir.clone(),
            segment_bytes: 64 << 20,
            sync,
        })?;
        let config = ProducerConfig {
            concurrency: case.concurrency,
            message_size: MESSAGE_SIZE,
            codec: case.codec,
            batch_size: case.batch_size.max(MESSAGE_SIZE),
            linger: case.linger,
            stop,
        };
        let live = LiveCounters::default();
        let outcome = with_progress(case.name, &live, || {
            run_producers(broker.addr(), &config, &live)
        })?;
        broker.stop()?;
        let _ = std::fs::remove_dir_all(&dir);
        outcomes.push(outcome);
    }
    let mut latency = latency_histogram();
    for o in &outcomes {
        latency
            .add(&o.latency_us)
            .map_err(|e| KernelError::Histogram(format!("{e:?}")))?;
    }
    let throughput: Vec<f64> = outcomes
        .iter()
        .map(ProduceOutcome::messages_per_second)
        .collect();
    let mb_s = median(
        &outcomes
            .iter()
            .map(ProduceOutcome::megabytes_per_second)
            .collect::<Vec<_>>(),
    );
    let (acked, failed) = outcomes
        .iter()
        .fold((0, 0), |(a, f), o| (a + o.acked, f + o.failed));
    let success = if acked + failed == 0 {
        0.0
    } else {
        100.0 * acked as f64 / (acked + failed) as f64
    };
    let mut result = BenchmarkResult::new(case.name)
        .param("concurrency", case.concurrency)
        .param("message_size", MESSAGE_SIZE)
        .param("compression", case.codec.as_str())
        .param("batch_size", case.batch_size)
        .param("linger_ms", case.linger.as_millis())
        .param(
            "sync",
            if sync == SyncPolicy::Group {
                "group"
            } else {
                "none"
            },
        )
        .metric(Metric::samples(
            "throughput",
            "msg/s",
            Direction::Higher,
            throughput,
        ))
        .metric(Metric::value(
            "throughput_mb",
            "MB/s",
            Direction::Higher,
            mb_s,
        ))
        .metric(Metric::histogram(
            "latency",
            "us",
            Direction::Lower,
            &latency,
        )?);
    for (label, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
        result = result.metric(Metric::value(
            &format!("latency_{label}"),
            "us",
            Direction::Lower,
            latency.value_at_quantile(q) as f64,
        ));
    }
    Ok(result.metric(Metric::value(
        "success_rate",
        "%",
        Direction::Higher,
        success,
    )))
}
