//! The write-up's five scenarios as deterministic arrival lists. Times are virtual
//! microseconds; every task costs one unit, which the simulation serves in 1 ms, so two
//! workers complete at most 2 tasks per millisecond and every scenario is overloaded in
//! its own way.

use super::{Limits, Priority, Task, TenantId};

/// One of the five scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScenarioName {
    /// A sustained hot tenant among many cold ones (the noisy neighbour).
    HotTenantSustained,
    /// A massive simultaneous burst from many producers.
    BurstMassive,
    /// High, normal and low priorities under contention.
    MixedPriorities,
    /// Short deadlines under overload, forcing expirations.
    DeadlineExpiration,
    /// Tight `max_global` and `max_per_tenant`.
    CapacityPressure,
}

impl ScenarioName {
    /// All five, in the write-up's order.
    pub const ALL: [ScenarioName; 5] = [
        ScenarioName::HotTenantSustained,
        ScenarioName::BurstMassive,
        ScenarioName::MixedPriorities,
        ScenarioName::DeadlineExpiration,
        ScenarioName::CapacityPressure,
    ];

    /// The write-up's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ScenarioName::HotTenantSustained => "hot_tenant_sustained",
            ScenarioName::BurstMassive => "burst_massive",
            ScenarioName::MixedPriorities => "mixed_priorities",
            ScenarioName::DeadlineExpiration => "deadline_expiration",
            ScenarioName::CapacityPressure => "capacity_pressure",
        }
    }
}

/// A scenario ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Which scenario this is.
    pub name: ScenarioName,
    /// The write-up's base parameters: 2 workers, 4 shards, quantum 2, reject on full.
    pub workers: usize,
    /// Scheduler shards.
    pub shards: usize,
    /// Deficit credited per turn.
    pub quantum: u32,
    /// Backpressure limits.
    pub limits: Limits,
    /// Every task, sorted by arrival.
    pub arrivals: Vec<Task>,
    /// The noisy tenants; everyone else counts as cold for `cold_p99`.
    pub hot_tenants: Vec<TenantId>,
}

/// A small deterministic generator (SplitMix64), so arrival lists repeat exactly.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An exponential gap with the given mean: Poisson arrivals.
    fn gap_us(&mut self, mean_us: f64) -> u64 {
        (-(1.0 - self.unit()).ln() * mean_us).round() as u64
    }
}

/// What one tenant submits.
struct Stream {
    tenant: TenantId,
    mean_gap_us: f64,
    from_us: u64,
    until_us: u64,
    deadline_after_us: Option<u64>,
}

fn generate(
    rng: &mut SplitMix64,
    streams: &[Stream],
    priority_of: impl Fn(f64) -> Priority,
) -> Vec<Task> {
    let mut tasks = Vec::new();
    for stream in streams {
        let mut at = stream.from_us + rng.gap_us(stream.mean_gap_us);
        while at < stream.until_us {
            tasks.push(Task {
                id: 0,
                tenant: stream.tenant,
                priority: priority_of(rng.unit()),
                cost: 1,
                enqueued_at_us: at,
                deadline_us: stream.deadline_after_us.map(|d| at + d),
            });
            at += rng.gap_us(stream.mean_gap_us).max(1);
        }
    }
    tasks.sort_by_key(|t| (t.enqueued_at_us, t.tenant));
    for (id, task) in tasks.iter_mut().enumerate() {
        task.id = id as u64;
    }
    tasks
}

fn steady(tenants: std::ops::Range<TenantId>, mean_gap_us: f64, until_us: u64) -> Vec<Stream> {
    tenants
        .map(|tenant| Stream {
            tenant,
            mean_gap_us,
            from_us: 0,
            until_us,
            deadline_after_us: None,
        })
        .collect()
}

impl Scenario {
    /// Builds `name`; `quick` shortens the arrival window, not the shape.
    pub fn build(name: ScenarioName, quick: bool) -> Self {
        let until = if quick { 1_000_000 } else { 3_000_000 };
        let mut rng = SplitMix64(0x6b79_6d6f ^ name as u64);
        let normal = |_: f64| Priority::Normal;
        let roomy = Limits {
            max_global: 1024,
            max_per_tenant: 256,
        };
        let (limits, arrivals, hot_tenants) = match name {
            ScenarioName::HotTenantSustained => {
                // Tenant 0 alone offers 4 tasks/ms; 40 cold tenants 0.4/ms together.
                let mut streams = steady(0..1, 250.0, until);
                streams.extend(steady(1..41, 100_000.0, until));
                (roomy, generate(&mut rng, &streams, normal), vec![0])
            }
            ScenarioName::BurstMassive => {
                // 64 producers each fire 40 tasks within 5 ms, then trickle.
                let mut streams: Vec<Stream> = (0..64)
                    .map(|tenant| Stream {
                        tenant,
                        mean_gap_us: 125.0,
                        from_us: 0,
                        until_us: 5_000,
                        deadline_after_us: None,
                    })
                    .collect();
                streams.extend((0..64).map(|tenant| Stream {
                    tenant,
                    mean_gap_us: 200_000.0,
                    from_us: 5_000,
                    until_us: until,
                    deadline_after_us: None,
                }));
                (roomy, generate(&mut rng, &streams, normal), vec![])
            }
            ScenarioName::MixedPriorities => {
                // 12 tenants at 2.2 tasks/ms together: 20 % high, 50 % normal, 30 % low.
                let streams = steady(0..12, 12.0 / 2.2 * 1000.0, until);
                let mix = |u: f64| match u {
                    u if u < 0.2 => Priority::High,
                    u if u < 0.7 => Priority::Normal,
                    _ => Priority::Low,
                };
                (roomy, generate(&mut rng, &streams, mix), vec![])
            }
            ScenarioName::DeadlineExpiration => {
                // 16 tenants at 3 tasks/ms together, each task worthless after 20 ms.
                let streams: Vec<Stream> = steady(0..16, 16.0 / 3.0 * 1000.0, until)
                    .into_iter()
                    .map(|s| Stream {
                        deadline_after_us: Some(20_000),
                        ..s
                    })
                    .collect();
                let limits = Limits {
                    max_global: 1024,
                    max_per_tenant: 128,
                };
                (limits, generate(&mut rng, &streams, normal), vec![])
            }
            ScenarioName::CapacityPressure => {
                // 32 tenants at 4 tasks/ms together against a small queue.
                let streams = steady(0..32, 32.0 / 4.0 * 1000.0, until);
                let limits = Limits {
                    max_global: 128,
                    max_per_tenant: 8,
                };
                (limits, generate(&mut rng, &streams, normal), vec![])
            }
        };
        Self {
            name,
            workers: 2,
            shards: 4,
            quantum: 2,
            limits,
            arrivals,
            hot_tenants,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_repeat_exactly_and_are_sorted() {
        for name in ScenarioName::ALL {
            let a = Scenario::build(name, true);
            let b = Scenario::build(name, true);
            assert_eq!(a.arrivals, b.arrivals, "{}", name.as_str());
            assert!(
                a.arrivals
                    .windows(2)
                    .all(|w| w[0].enqueued_at_us <= w[1].enqueued_at_us)
            );
        }
    }

    #[test]
    fn the_hot_tenant_offers_about_ten_times_the_cold_ones_together() {
        let s = Scenario::build(ScenarioName::HotTenantSustained, true);
        let hot = s.arrivals.iter().filter(|t| t.tenant == 0).count() as f64;
        let cold = s.arrivals.len() as f64 - hot;
        assert!((3500.0..4500.0).contains(&hot), "{hot}");
        assert!((8.0..12.5).contains(&(hot / cold)), "{}", hot / cold);
    }

    #[test]
    fn mixed_priorities_has_all_three_classes() {
        let s = Scenario::build(ScenarioName::MixedPriorities, true);
        let share = |p| {
            s.arrivals.iter().filter(|t| t.priority == p).count() as f64 / s.arrivals.len() as f64
        };
        assert!((0.15..0.25).contains(&share(Priority::High)));
        assert!((0.25..0.35).contains(&share(Priority::Low)));
    }
}
