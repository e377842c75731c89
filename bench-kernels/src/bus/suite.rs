//! The bus benchmarks of ron-kernel's `bus_publish`: steady publishing with no, one and a
//! lagging subscriber, and bursty fan-out to subscriber threads.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::{BroadcastBus, BusReceiver, ClassicBus, KernelEvent, RecvError, SoaBus};
use crate::error::KernelError;
use crate::instructions::region::{counted, counting};
use crate::measure::{median, ns_per_op_for};
use crate::report::{BenchmarkResult, Direction, Metric};
use crate::runner::{BusWorkload, RunContext, Suite, unknown};
use crate::variants::{BusBackend, BusVariant, PublishMode};

/// The bus suite.
pub struct BusSuite;

const STEADY: [&str; 3] = ["no_subscribers", "one_subscriber", "lagged_subscriber_cap1"];

impl Suite for BusSuite {
    fn name(&self) -> &'static str {
        "bus"
    }

    fn benchmarks(&self, _quick: bool) -> Vec<String> {
        STEADY
            .iter()
            .map(|case| format!("bus/steady/{case}"))
            .chain(std::iter::once("bus/bursty/fanout".to_string()))
            .collect()
    }

    fn run(
        &self,
        selected: &[String],
        context: &RunContext,
    ) -> Result<Vec<BenchmarkResult>, KernelError> {
        let variant = context.variants.bus;
        selected
            .iter()
            .map(|name| {
                context.progress(name);
                let result = match variant.backend {
                    BusBackend::Soa => {
                        run_case(name, context, |cap| SoaBus::new(cap, variant.wake))
                    }
                    BusBackend::Classic => {
                        run_case(name, context, |cap| ClassicBus::new(cap, variant.wake))
                    }
                }?;
                Ok(with_variant(result, variant))
            })
            .collect()
    }
}

fn with_variant(result: BenchmarkResult, variant: BusVariant) -> BenchmarkResult {
    result
        .variant("backend", variant.backend)
        .variant("wake", variant.wake)
        .variant("publish", variant.publish)
}

fn event(topic: &Arc<str>, seq: u64) -> KernelEvent {
    KernelEvent {
        topic: Arc::clone(topic),
        seq,
    }
}

struct Effort {
    repetitions: usize,
    per_repetition: Duration,
    bursts_per_repetition: usize,
}

fn effort(context: &RunContext) -> Effort {
    if counting() {
        // The count run: one warm-up and one counted repetition of the bursty benchmark.
        Effort {
            repetitions: 1,
            per_repetition: Duration::ZERO,
            bursts_per_repetition: 30,
        }
    } else if context.quick {
        // 22 samples of 5 ms rather than 11 of 10: the same time, and with 20 samples or more
        // a run stands for its fast end (`kymo_core::stats::location`), which a burst of other
        // work beside a single run does not move, while the median of 11 moves with it.
        Effort {
            repetitions: 22,
            per_repetition: Duration::from_millis(5),
            bursts_per_repetition: 30,
        }
    } else {
        Effort {
            repetitions: 15,
            per_repetition: Duration::from_millis(100),
            bursts_per_repetition: 200,
        }
    }
}

fn run_case<B, F>(name: &str, context: &RunContext, make: F) -> Result<BenchmarkResult, KernelError>
where
    B: BroadcastBus<KernelEvent> + Send,
    F: Fn(usize) -> B,
{
    let effort = effort(context);
    let topic: Arc<str> = Arc::from("kernel.health");
    let workload = context.bus;
    let steady = |samples: Vec<f64>| {
        let ns = median(&samples);
        BenchmarkResult::new(name)
            .metric(Metric::samples("time", "ns", Direction::Lower, samples))
            .metric(Metric::value(
                "throughput",
                "elem/s",
                Direction::Higher,
                1e9 / ns.max(1e-3),
            ))
    };
    match name {
        "bus/steady/no_subscribers" => {
            let bus = make(workload.capacity);
            let (_, samples) = ns_per_op_for(effort.repetitions, effort.per_repetition, |n| {
                for seq in 0..n {
                    black_box(bus.publish(event(&topic, seq)));
                }
            });
            Ok(steady(samples).param("capacity", workload.capacity))
        }
        "bus/steady/one_subscriber" => {
            let bus = make(workload.capacity);
            let mut rx = bus.subscribe();
            let (_, samples) = ns_per_op_for(effort.repetitions, effort.per_repetition, |n| {
                for seq in 0..n {
                    bus.publish(event(&topic, seq));
                    black_box(rx.try_recv().ok());
                }
            });
            Ok(steady(samples).param("capacity", workload.capacity))
        }
        "bus/steady/lagged_subscriber_cap1" => {
            // Two publishes into a one-slot ring, then the subscriber catches up: it is
            // told it lagged, then reads the survivor. Time is per publish.
            let bus = make(1);
            let mut rx = bus.subscribe();
            let (_, samples) = ns_per_op_for(effort.repetitions, effort.per_repetition, |n| {
                for seq in 0..n.div_ceil(2) {
                    bus.publish(event(&topic, 2 * seq));
                    bus.publish(event(&topic, 2 * seq + 1));
                    black_box(rx.try_recv().err());
                    black_box(rx.try_recv().ok());
                }
            });
            Ok(steady(samples).param("capacity", 1))
        }
        "bus/bursty/fanout" => {
            let bus = make(workload.capacity);
            // Subscriber threads wait and wake as the scheduler lets them, so this count varies
            // a little from run to run, unlike the single-threaded kernels'.
            counted(|| bursty(name, context, &bus, &topic, &effort))
        }
        _ => Err(unknown(name)),
    }
}

/// Bursts of `burst` messages to `fanout` subscriber threads that sleep between bursts;
/// one repetition times `bursts_per_repetition` bursts, each fully received.
fn bursty<B>(
    name: &str,
    context: &RunContext,
    bus: &B,
    topic: &Arc<str>,
    effort: &Effort,
) -> Result<BenchmarkResult, KernelError>
where
    B: BroadcastBus<KernelEvent>,
{
    let BusWorkload {
        burst,
        fanout,
        capacity,
    } = context.bus;
    let publish = context.variants.bus.publish;
    let barrier = Barrier::new(fanout + 1);
    let receivers: Vec<B::Receiver> = (0..fanout).map(|_| bus.subscribe()).collect();
    let bursts_total = effort.bursts_per_repetition * (effort.repetitions + 1);
    let samples = std::thread::scope(|scope| {
        let threads: Vec<_> = receivers
            .into_iter()
            .map(|mut rx| {
                let barrier = &barrier;
                scope.spawn(move || {
                    loop {
                        let mut advanced = 0;
                        while advanced < burst {
                            match rx.recv() {
                                Ok(e) => {
                                    black_box(e);
                                    advanced += 1;
                                }
                                Err(RecvError::Lagged(n)) => advanced += n as usize,
                                Err(RecvError::Closed) => return,
                            }
                        }
                        barrier.wait();
                    }
                })
            })
            .collect();
        let mut seq = 0u64;
        let mut samples = Vec::new();
        let mut started = Instant::now();
        for b in 0..bursts_total {
            if b % effort.bursts_per_repetition == 0 {
                if b > effort.bursts_per_repetition {
                    // The first repetition warms up and is not kept.
                    samples.push(
                        started.elapsed().as_nanos() as f64 / effort.bursts_per_repetition as f64,
                    );
                }
                started = Instant::now();
            }
            match publish {
                PublishMode::Batch => {
                    bus.publish_batch((0..burst).map(|i| event(topic, seq + i as u64)));
                }
                PublishMode::Single => {
                    for s in seq..seq + burst as u64 {
                        bus.publish(event(topic, s));
                    }
                }
            }
            seq += burst as u64;
            barrier.wait();
        }
        samples.push(started.elapsed().as_nanos() as f64 / effort.bursts_per_repetition as f64);
        bus.close();
        let panicked = threads.into_iter().any(|t| t.join().is_err());
        if panicked {
            Err(KernelError::ThreadPanicked("bus subscriber"))
        } else {
            Ok(samples)
        }
    })?;
    let ns_per_burst = median(&samples);
    Ok(BenchmarkResult::new(name)
        .param("burst", burst)
        .param("fanout", fanout)
        .param("capacity", capacity)
        .metric(Metric::samples("time", "ns", Direction::Lower, samples))
        .metric(Metric::value(
            "throughput",
            "elem/s",
            Direction::Higher,
            burst as f64 * 1e9 / ns_per_burst.max(1e-3),
        )))
}
