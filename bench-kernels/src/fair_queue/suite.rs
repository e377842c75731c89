//! The fair-queue benchmarks: each scenario on the scheduler under test and on the FIFO
//! baseline. Queue-time figures come from the virtual-clock simulation (they repeat
//! exactly); throughput is measured for real, as the wall time the scheduler takes to do
//! the scenario's operations.

use std::time::Instant;

use super::{
    FairScheduler, FifoQueue, Scenario, ScenarioName, SimulationOutcome, TaskQueue, simulate,
};
use crate::error::KernelError;
use crate::instructions::region::{counted, counting};
use crate::report::{BenchmarkResult, Direction, Metric};
use crate::runner::{RunContext, Suite, unknown};
use crate::variants::SchedulerKind;

/// The fair-queue suite.
pub struct FairQueueSuite;

impl Suite for FairQueueSuite {
    fn name(&self) -> &'static str {
        "fair_queue"
    }

    fn benchmarks(&self, quick: bool) -> Vec<String> {
        let scenarios: &[ScenarioName] = if quick {
            &[
                ScenarioName::HotTenantSustained,
                ScenarioName::DeadlineExpiration,
            ]
        } else {
            &ScenarioName::ALL
        };
        scenarios
            .iter()
            .map(|s| format!("fair_queue/scenario/{}", s.as_str()))
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
                let scenario = ScenarioName::ALL
                    .into_iter()
                    .find(|s| name.ends_with(&format!("/{}", s.as_str())))
                    .ok_or_else(|| unknown(name))?;
                run_scenario(name, Scenario::build(scenario, context.quick), context)
            })
            .collect()
    }
}

fn make_queue(kind: SchedulerKind, scenario: &Scenario) -> Box<dyn TaskQueue> {
    match kind {
        SchedulerKind::Drr => Box::new(FairScheduler::new(
            scenario.shards,
            scenario.quantum,
            scenario.limits,
        )),
        SchedulerKind::Fifo => Box::new(FifoQueue::new(scenario.limits.max_global)),
    }
}

fn p(h: &hdrhistogram::Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64
}

fn run_scenario(
    name: &str,
    scenario: Scenario,
    context: &RunContext,
) -> Result<BenchmarkResult, KernelError> {
    let kind = context.variants.fair_queue.scheduler;
    // The simulation is single-threaded and seeded: its instruction count is deterministic.
    let tested = counted(|| simulate(&scenario, make_queue(kind, &scenario).as_ref()));
    let fifo = simulate(
        &scenario,
        make_queue(SchedulerKind::Fifo, &scenario).as_ref(),
    );
    let repetitions = if counting() { 1 } else { context.sized(7, 9) };
    let throughput: Vec<f64> = (0..repetitions)
        .map(|_| measured_throughput(&scenario, make_queue(kind, &scenario).as_ref()))
        .collect();
    let (p99, fifo_p99) = (p(&tested.queue_time_us, 0.99), p(&fifo.queue_time_us, 0.99));
    let gain = if fifo_p99 > 0.0 {
        100.0 * (fifo_p99 - p99) / fifo_p99
    } else {
        0.0
    };
    let mut result = BenchmarkResult::new(name)
        .param("workers", scenario.workers)
        .param("shards", scenario.shards)
        .param("quantum", scenario.quantum)
        .param("max_global", scenario.limits.max_global)
        .param("max_per_tenant", scenario.limits.max_per_tenant)
        .param("tasks", scenario.arrivals.len())
        .variant("scheduler", kind)
        .metric(Metric::samples(
            "throughput",
            "ops/s",
            Direction::Higher,
            throughput,
        ))
        .metric(Metric::value(
            "drop_rate",
            "%",
            Direction::Lower,
            100.0 * tested.drop_rate(),
        ))
        .metric(Metric::value(
            "expired_rate",
            "%",
            Direction::Lower,
            100.0 * tested.expired_rate(),
        ))
        .metric(Metric::histogram(
            "queue_time",
            "us",
            Direction::Lower,
            &tested.queue_time_us,
        )?);
    for (label, q) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)] {
        result = result.metric(Metric::value(
            &format!("queue_time_{label}"),
            "us",
            Direction::Lower,
            p(&tested.queue_time_us, q),
        ));
    }
    result = result
        .metric(Metric::value(
            "cold_p99",
            "us",
            Direction::Lower,
            p(&tested.cold_queue_time_us, 0.99),
        ))
        .metric(Metric::value(
            "p99_gain_vs_fifo",
            "%",
            Direction::Higher,
            gain,
        ))
        .metric(Metric::value(
            "fifo_queue_time_p99",
            "us",
            Direction::Lower,
            fifo_p99,
        ))
        .metric(Metric::value(
            "fifo_drop_rate",
            "%",
            Direction::Lower,
            100.0 * fifo.drop_rate(),
        ))
        .metric(Metric::value(
            "fifo_expired_rate",
            "%",
            Direction::Lower,
            100.0 * fifo.expired_rate(),
        ))
        .metric(Metric::value(
            "fifo_cold_p99",
            "us",
            Direction::Lower,
            p(&fifo.cold_queue_time_us, 0.99),
        ));
    if scenario.name == ScenarioName::MixedPriorities {
        result = result
            .metric(Metric::value(
                "high_p99",
                "us",
                Direction::Lower,
                p(&tested.high_queue_time_us, 0.99),
            ))
            .metric(Metric::value(
                "fifo_high_p99",
                "us",
                Direction::Lower,
                p(&fifo.high_queue_time_us, 0.99),
            ));
    }
    Ok(result)
}

/// Scheduler operations (enqueue attempts and dequeues) per second of wall time while
/// the simulation replays the scenario through a fresh `queue`: the real scheduler code
/// doing the scenario's work, on one thread so that the figure does not depend on how the
/// operating system happens to schedule threads on a shared machine.
pub fn measured_throughput(scenario: &Scenario, queue: &dyn TaskQueue) -> f64 {
    let start = Instant::now();
    let outcome = simulate(scenario, queue);
    let operations = outcome.submitted + outcome.completed + outcome.expired;
    operations as f64 / start.elapsed().as_secs_f64().max(1e-9)
}

/// Exposed for the criterion bench: one simulated run.
pub fn simulate_once(name: ScenarioName, kind: SchedulerKind, quick: bool) -> SimulationOutcome {
    let scenario = Scenario::build(name, quick);
    simulate(&scenario, make_queue(kind, &scenario).as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_counts_real_operations() {
        let scenario = Scenario::build(ScenarioName::CapacityPressure, true);
        let queue = FairScheduler::new(scenario.shards, scenario.quantum, scenario.limits);
        assert!(measured_throughput(&scenario, &queue) > 0.0);
        assert!(queue.is_empty());
    }
}
