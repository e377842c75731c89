//! Suite C of rondo's write-up: how many data points of a short-lived VM reach storage
//! when the VMM records inline every second, versus a scraper polling every 15 s or 30 s.
//!
//! It is a discrete-event simulation: the VM's start and stop, the recorder's ticks and
//! the scraper's polls are events on one timeline, and a collector captures a point only
//! when its event fires while the VM is alive. The scraper's phase relative to the VM's
//! start is unknown in practice, so every phase at millisecond steps is simulated and the
//! mean (and the best and worst alignment) reported.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::KernelError;
use crate::report::{BenchmarkResult, Direction, Metric};
use crate::runner::{RunContext, Suite, unknown};

/// How a collector gets data points out of the VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collector {
    /// Recorded inline by the VMM's event loop, starting with the VM.
    Embedded {
        /// Milliseconds between two recorded points.
        interval_ms: u64,
    },
    /// Polled from outside on its own schedule, offset by a phase.
    Scrape {
        /// Milliseconds between two scrapes.
        interval_ms: u64,
    },
}

impl Collector {
    fn interval_ms(self) -> u64 {
        match self {
            Collector::Embedded { interval_ms } | Collector::Scrape { interval_ms } => interval_ms,
        }
    }

    fn label(self) -> String {
        match self {
            Collector::Embedded { interval_ms } => format!("embedded_{}s", interval_ms / 1000),
            Collector::Scrape { interval_ms } => format!("scrape_{}s", interval_ms / 1000),
        }
    }
}

/// Events at the same instant are processed in this order: a VM is alive at its first
/// millisecond and dead at its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    VmStart,
    VmStop,
    Collect,
}

/// Points one collector captures from a VM living `lifetime_ms`, with the collector's
/// schedule offset by `phase_ms` (ignored by the embedded recorder, which starts with
/// the VM).
pub fn simulate(lifetime_ms: u64, collector: Collector, phase_ms: u64) -> u64 {
    let interval = collector.interval_ms();
    let first_collect = match collector {
        Collector::Embedded { .. } => 0,
        Collector::Scrape { .. } => phase_ms % interval,
    };
    let horizon = lifetime_ms + interval;
    let mut timeline = BinaryHeap::new();
    timeline.push(Reverse((0, Event::VmStart)));
    timeline.push(Reverse((lifetime_ms, Event::VmStop)));
    timeline.push(Reverse((first_collect, Event::Collect)));
    let (mut alive, mut captured) = (false, 0);
    while let Some(Reverse((now, event))) = timeline.pop() {
        match event {
            Event::VmStart => alive = true,
            Event::VmStop => alive = false,
            Event::Collect => {
                if alive {
                    captured += 1;
                }
                if now + interval < horizon {
                    timeline.push(Reverse((now + interval, Event::Collect)));
                }
            }
        }
    }
    captured
}

/// The points a collector captures over every phase alignment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CaptureOutcome {
    /// Mean points over all phases.
    pub mean: f64,
    /// Points at the best phase.
    pub best: u64,
    /// Points at the worst phase.
    pub worst: u64,
}

/// Simulates every phase at 1 ms steps across one collection interval.
pub fn over_all_phases(lifetime_ms: u64, collector: Collector) -> CaptureOutcome {
    let phases = collector.interval_ms();
    let (mut total, mut best, mut worst) = (0u64, 0u64, u64::MAX);
    for phase in 0..phases {
        let points = simulate(lifetime_ms, collector, phase);
        total += points;
        best = best.max(points);
        worst = worst.min(points);
    }
    CaptureOutcome {
        mean: total as f64 / phases as f64,
        best,
        worst,
    }
}

/// The VM lifetimes of the write-up, in seconds.
pub const LIFETIMES_S: [u64; 4] = [5, 10, 30, 45];
const COLLECTORS: [Collector; 3] = [
    Collector::Embedded { interval_ms: 1000 },
    Collector::Scrape {
        interval_ms: 15_000,
    },
    Collector::Scrape {
        interval_ms: 30_000,
    },
];

/// The capture suite.
pub struct CaptureSuite;

impl Suite for CaptureSuite {
    // A model of what each collector captures, computed rather than timed: nothing to count.
    fn counts_instructions(&self) -> bool {
        false
    }

    fn name(&self) -> &'static str {
        "capture"
    }

    fn benchmarks(&self, _quick: bool) -> Vec<String> {
        // Cheap enough (milliseconds) to run whole even in quick mode.
        LIFETIMES_S
            .iter()
            .flat_map(|l| {
                COLLECTORS
                    .iter()
                    .map(move |c| format!("capture/lifetime_{l}s/{}", c.label()))
            })
            .collect()
    }

    fn run(
        &self,
        selected: &[String],
        context: &RunContext,
    ) -> Result<Vec<BenchmarkResult>, KernelError> {
        context.progress("capture: simulating every scrape phase");
        selected
            .iter()
            .map(|name| {
                let (lifetime_s, collector) = LIFETIMES_S
                    .iter()
                    .flat_map(|&l| COLLECTORS.iter().map(move |&c| (l, c)))
                    .find(|(l, c)| *name == format!("capture/lifetime_{l}s/{}", c.label()))
                    .ok_or_else(|| unknown(name))?;
                let outcome = over_all_phases(lifetime_s * 1000, collector);
                let embedded = over_all_phases(lifetime_s * 1000, COLLECTORS[0]).mean;
                Ok(BenchmarkResult::new(name.clone())
                    .param("lifetime_s", lifetime_s)
                    .param("interval_s", collector.interval_ms() / 1000)
                    .metric(Metric::value(
                        "points",
                        "points",
                        Direction::Higher,
                        outcome.mean,
                    ))
                    .metric(Metric::value(
                        "capture_ratio",
                        "%",
                        Direction::Higher,
                        100.0 * outcome.mean / embedded,
                    ))
                    .metric(Metric::value(
                        "points_best_phase",
                        "points",
                        Direction::Higher,
                        outcome.best as f64,
                    ))
                    .metric(Metric::value(
                        "points_worst_phase",
                        "points",
                        Direction::Higher,
                        outcome.worst as f64,
                    )))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMBEDDED: Collector = Collector::Embedded { interval_ms: 1000 };
    const SCRAPE_15: Collector = Collector::Scrape {
        interval_ms: 15_000,
    };
    const SCRAPE_30: Collector = Collector::Scrape {
        interval_ms: 30_000,
    };

    #[test]
    fn the_embedded_recorder_gets_one_point_per_second_lived() {
        for lifetime in LIFETIMES_S {
            let o = over_all_phases(lifetime * 1000, EMBEDDED);
            assert_eq!(
                (o.mean, o.best, o.worst),
                (lifetime as f64, lifetime, lifetime)
            );
        }
    }

    #[test]
    fn a_five_second_vm_is_seen_by_a_15s_scrape_one_time_in_three() {
        // Only phases 0..5000 ms of the 15000 land a scrape inside the VM's life.
        assert_eq!(simulate(5000, SCRAPE_15, 0), 1);
        assert_eq!(simulate(5000, SCRAPE_15, 4999), 1);
        assert_eq!(simulate(5000, SCRAPE_15, 5000), 0);
        let o = over_all_phases(5000, SCRAPE_15);
        assert!((o.mean - 1.0 / 3.0).abs() < 1e-12, "{}", o.mean);
        assert_eq!((o.best, o.worst), (1, 0));
    }

    #[test]
    fn a_30s_vm_always_gets_two_15s_scrapes() {
        let o = over_all_phases(30_000, SCRAPE_15);
        assert_eq!((o.mean, o.best, o.worst), (2.0, 2, 2));
    }

    #[test]
    fn a_45s_vm_gets_one_or_two_30s_scrapes() {
        // Two scrapes when the first lands in the first 15 s: half the phases.
        let o = over_all_phases(45_000, SCRAPE_30);
        assert_eq!((o.best, o.worst), (2, 1));
        assert!((o.mean - 1.5).abs() < 1e-12, "{}", o.mean);
    }
}
