//! firq's scenarios as criterion groups: one simulated run of each scheduler.

use std::hint::black_box;
use std::time::Duration;

use bench_kernels::fair_queue::{ScenarioName, simulate_once};
use bench_kernels::variants::SchedulerKind;
use criterion::{Criterion, criterion_group, criterion_main};

fn scenarios(c: &mut Criterion) {
    for name in [
        ScenarioName::HotTenantSustained,
        ScenarioName::CapacityPressure,
    ] {
        let mut group = c.benchmark_group(format!("fair_queue/{}", name.as_str()));
        for kind in [SchedulerKind::Drr, SchedulerKind::Fifo] {
            group.bench_function(kind.as_str(), |b| {
                b.iter(|| black_box(simulate_once(name, kind, true).completed))
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    targets = scenarios
}
criterion_main!(benches);
