//! Benchmarks run only to produce criterion's golden output files (see regenerate.sh):
//! a plain function, and a group with parameters and each kind of throughput.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn sum(n: u64) -> u64 {
    (0..n).fold(0, |acc, x| acc.wrapping_add(x * x))
}

fn benches(c: &mut Criterion) {
    c.bench_function("sum_100", |b| b.iter(|| sum(black_box(100))));

    let mut group = c.benchmark_group("checksum");
    for size in [64usize, 1024] {
        let data = vec![7u8; size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("bytes", size), &data, |b, d| {
            b.iter(|| d.iter().map(|&x| u64::from(x)).sum::<u64>())
        });
    }
    group.throughput(Throughput::Elements(256));
    group.bench_function("elements", |b| b.iter(|| sum(black_box(256))));
    group.finish();
}

criterion_group! {
    name = golden;
    // Few samples keep the golden files small; the numbers themselves do not matter.
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(200))
        .measurement_time(std::time::Duration::from_millis(500));
    targets = benches
}
criterion_main!(golden);
