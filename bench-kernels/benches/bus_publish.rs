//! ron-kernel's `bus_publish` groups: steady publishing on both backends.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bench_kernels::bus::{BroadcastBus, BusReceiver, ClassicBus, KernelEvent, SoaBus, WakeMode};
use criterion::{Criterion, criterion_group, criterion_main};

fn event(topic: &Arc<str>, seq: u64) -> KernelEvent {
    KernelEvent {
        topic: Arc::clone(topic),
        seq,
    }
}

fn steady<B: BroadcastBus<KernelEvent>>(
    c: &mut Criterion,
    backend: &str,
    make: impl Fn(usize) -> B,
) {
    let topic: Arc<str> = Arc::from("kernel.health");
    let mut group = c.benchmark_group(format!("bus/{backend}/steady"));
    let bus = make(2048);
    let mut seq = 0;
    group.bench_function("no_subscribers", |b| {
        b.iter(|| {
            seq += 1;
            black_box(bus.publish(event(&topic, seq)))
        })
    });
    let mut rx = bus.subscribe();
    group.bench_function("one_subscriber", |b| {
        b.iter(|| {
            seq += 1;
            bus.publish(event(&topic, seq));
            black_box(rx.try_recv().ok())
        })
    });
    let lagged = make(1);
    let mut rx = lagged.subscribe();
    group.bench_function("lagged_subscriber_cap1", |b| {
        b.iter(|| {
            seq += 2;
            lagged.publish(event(&topic, seq));
            lagged.publish(event(&topic, seq + 1));
            black_box(rx.try_recv().err());
            black_box(rx.try_recv().ok())
        })
    });
    group.finish();
}

fn publish(c: &mut Criterion) {
    steady(c, "classic", |cap| ClassicBus::new(cap, WakeMode::Edge));
    steady(c, "soa", |cap| SoaBus::new(cap, WakeMode::Edge));
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = publish
}
criterion_main!(benches);
