//! Runs a scenario against a queue on a virtual clock: arrivals enter at their instants,
//! each of the workers takes the next task whenever it is free and serves it for 1 ms per
//! cost unit. Queue times therefore depend only on the scheduling decisions, and repeat
//! exactly from run to run and machine to machine.

use hdrhistogram::Histogram;

use super::{Priority, Scenario, TaskQueue};
use crate::measure::{latency_histogram, record_clamped};

const TICK_US: u64 = 100;
const SERVICE_US_PER_COST: u64 = 1_000;

/// What a simulated run produced.
#[derive(Debug, Clone)]
pub struct SimulationOutcome {
    /// Tasks offered.
    pub submitted: u64,
    /// Tasks refused by backpressure.
    pub rejected: u64,
    /// Tasks served.
    pub completed: u64,
    /// Tasks dropped past their deadline.
    pub expired: u64,
    /// Queue time (µs) of every completed task.
    pub queue_time_us: Histogram<u64>,
    /// Queue time of tasks from tenants that are not hot.
    pub cold_queue_time_us: Histogram<u64>,
    /// Queue time of high-priority tasks.
    pub high_queue_time_us: Histogram<u64>,
    /// Virtual time until the queue drained.
    pub virtual_duration_us: u64,
}

impl SimulationOutcome {
    /// Rejected at the door, as a share of submitted tasks.
    pub fn drop_rate(&self) -> f64 {
        ratio(self.rejected, self.submitted)
    }

    /// Expired in the queue, as a share of accepted tasks.
    pub fn expired_rate(&self) -> f64 {
        ratio(self.expired, self.submitted - self.rejected)
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Runs `scenario` through `queue` until every arrival was submitted and the queue drained.
pub fn simulate(scenario: &Scenario, queue: &dyn TaskQueue) -> SimulationOutcome {
    let mut outcome = SimulationOutcome {
        submitted: 0,
        rejected: 0,
        completed: 0,
        expired: 0,
        queue_time_us: latency_histogram(),
        cold_queue_time_us: latency_histogram(),
        high_queue_time_us: latency_histogram(),
        virtual_duration_us: 0,
    };
    let mut busy_until = vec![0u64; scenario.workers];
    let mut next = 0;
    let mut now = 0u64;
    while next < scenario.arrivals.len() || !queue.is_empty() {
        while let Some(task) = scenario.arrivals.get(next) {
            if task.enqueued_at_us > now {
                break;
            }
            outcome.submitted += 1;
            if queue.enqueue(*task).is_err() {
                outcome.rejected += 1;
            }
            next += 1;
        }
        for (worker, free_at) in busy_until.iter_mut().enumerate() {
            if *free_at > now {
                continue;
            }
            let Some(task) = queue.dequeue(worker, now) else {
                break;
            };
            let waited = now - task.enqueued_at_us;
            record_clamped(&mut outcome.queue_time_us, waited);
            if !scenario.hot_tenants.contains(&task.tenant) {
                record_clamped(&mut outcome.cold_queue_time_us, waited);
            }
            if task.priority == Priority::High {
                record_clamped(&mut outcome.high_queue_time_us, waited);
            }
            outcome.completed += 1;
            *free_at = now + u64::from(task.cost) * SERVICE_US_PER_COST;
        }
        now += TICK_US;
    }
    outcome.expired = queue.expired();
    outcome.virtual_duration_us = now;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair_queue::{FairScheduler, FifoQueue, Limits, ScenarioName, Task};

    fn p99(h: &Histogram<u64>) -> u64 {
        h.value_at_quantile(0.99)
    }

    #[test]
    fn every_task_is_accounted_for() {
        for name in ScenarioName::ALL {
            let s = Scenario::build(name, true);
            let q = FairScheduler::new(s.shards, s.quantum, s.limits);
            let o = simulate(&s, &q);
            assert_eq!(o.submitted as usize, s.arrivals.len());
            assert_eq!(
                o.submitted,
                o.rejected + o.completed + o.expired,
                "{}",
                name.as_str()
            );
        }
    }

    #[test]
    fn queue_times_repeat_exactly() {
        let s = Scenario::build(ScenarioName::MixedPriorities, true);
        let run = || {
            let o = simulate(&s, &FairScheduler::new(s.shards, s.quantum, s.limits));
            (
                o.completed,
                o.queue_time_us.value_at_quantile(0.99),
                o.queue_time_us.mean(),
            )
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn fairness_halves_the_hot_tenant_p99_and_protects_the_cold_tenants() {
        let s = Scenario::build(ScenarioName::HotTenantSustained, true);
        let fair = simulate(&s, &FairScheduler::new(s.shards, s.quantum, s.limits));
        let fifo = simulate(&s, &FifoQueue::new(s.limits.max_global));
        let gain = 1.0 - p99(&fair.queue_time_us) as f64 / p99(&fifo.queue_time_us) as f64;
        assert!(gain >= 0.5, "p99 gain {gain}");
        assert!(p99(&fair.cold_queue_time_us) * 10 < p99(&fifo.cold_queue_time_us));
    }

    #[test]
    fn one_worker_serves_one_task_per_millisecond() {
        let arrivals = (0..3)
            .map(|id| Task {
                id,
                tenant: 0,
                priority: Priority::Normal,
                cost: 1,
                enqueued_at_us: 0,
                deadline_us: None,
            })
            .collect();
        let s = Scenario {
            workers: 1,
            arrivals,
            hot_tenants: vec![],
            ..Scenario::build(ScenarioName::BurstMassive, true)
        };
        let o = simulate(
            &s,
            &FifoQueue::new(
                Limits {
                    max_global: 8,
                    max_per_tenant: 8,
                }
                .max_global,
            ),
        );
        assert_eq!(o.completed, 3);
        assert_eq!(o.queue_time_us.max(), 2_000);
        assert_eq!(o.queue_time_us.min(), 0);
    }
}
