//! rondo's criterion groups for the `record()` hot path.

use std::hint::black_box;
use std::time::Duration;

use bench_kernels::ring::{DEFAULT_TIERS, MetricsStore, SeriesHandle};
use bench_kernels::variants::StoreKind;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const T0: u64 = 1_699_999_200_000_000_000;

fn store(dir: &tempfile::TempDir, series: usize) -> (MetricsStore, Vec<SeriesHandle>) {
    let mut store = MetricsStore::create(
        &dir.path().join(format!("s{series}")),
        series,
        &DEFAULT_TIERS,
        StoreKind::Mmap,
    )
    .expect("store");
    let handles = (0..series)
        .map(|i| store.register(&format!("s{i}")).expect("register"))
        .collect();
    (store, handles)
}

fn record(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut single, handles) = store(&dir, 1);
    let mut ts = T0;
    c.bench_function("record/single_series", |b| {
        b.iter(|| {
            ts += 1_000;
            single
                .record(handles[0], black_box(ts), 1.0)
                .expect("record");
        })
    });

    let mut group = c.benchmark_group("record/series_count");
    for n in [1usize, 10, 30, 100] {
        let (mut s, handles) = store(&dir, n);
        let mut i = 0usize;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| {
                i += 1;
                s.record(handles[i % n], T0 + i as u64 * 1_000, 2.0)
                    .expect("record");
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("record_batch/series_count");
    for n in [1usize, 10, 30, 100] {
        let (mut s, handles) = store(&dir, n);
        let points: Vec<(SeriesHandle, f64)> = handles.iter().map(|&h| (h, 3.0)).collect();
        let mut tick = 0u64;
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                tick += 1;
                s.record_batch(T0 + tick * 1_000_000, black_box(&points))
                    .expect("batch");
            })
        });
    }
    group.finish();

    let (mut s, handles) = store(&dir, 30);
    let points: Vec<(SeriesHandle, f64)> = handles.iter().map(|&h| (h, 4.0)).collect();
    let mut group = c.benchmark_group("record");
    group.throughput(Throughput::Elements(30));
    let mut tick = 0u64;
    group.bench_function("30_series_throughput", |b| {
        b.iter(|| {
            tick += 1;
            s.record_batch(T0 + tick * 1_000_000, &points)
                .expect("batch");
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = record
}
criterion_main!(benches);
