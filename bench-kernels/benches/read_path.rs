//! RustLog's `read_path` groups: a 10 MB segment read in 1 MB fetches, sealed (mmap)
//! against active (file reads), and single-record random fetches.

use std::hint::black_box;
use std::time::Duration;

use bench_kernels::log_read::{RECORD_BYTES, RECORD_HEADER_BYTES, Segment};
use bench_kernels::variants::SealedReader;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const SEGMENT_BYTES: u64 = 10_000_000;

fn segment(dir: &std::path::Path, sealed: Option<SealedReader>) -> Segment {
    let mut s = Segment::create(dir, 0).expect("segment");
    let payload = [b'r'; RECORD_BYTES - RECORD_HEADER_BYTES];
    for _ in 0..SEGMENT_BYTES / RECORD_BYTES as u64 {
        s.append(&payload).expect("append");
    }
    s.flush().expect("flush");
    if let Some(reader) = sealed {
        s.seal(reader).expect("seal");
    }
    s
}

fn scan(s: &Segment, out: &mut Vec<u8>) -> usize {
    let (mut offset, mut bytes) = (0, 0);
    loop {
        let fetched = s.read(offset, 1_000_000, out).expect("read");
        if fetched.records == 0 {
            return bytes;
        }
        bytes += black_box(fetched.bytes).len();
        offset += fetched.records;
    }
}

fn read_path(c: &mut Criterion) {
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let sealed = segment(dirs[0].path(), Some(SealedReader::Mmap));
    let sealed_read = segment(dirs[1].path(), Some(SealedReader::Read));
    let active = segment(dirs[2].path(), None);
    let mut out = Vec::with_capacity(2_000_000);
    let mut group = c.benchmark_group("sealed_vs_active_10mb_1mb_chunks");
    group.throughput(Throughput::Bytes(SEGMENT_BYTES));
    group.bench_function("sealed_mmap", |b| {
        b.iter(|| black_box(scan(&sealed, &mut out)))
    });
    group.bench_function("sealed_read", |b| {
        b.iter(|| black_box(scan(&sealed_read, &mut out)))
    });
    group.bench_function("active_read", |b| {
        b.iter(|| black_box(scan(&active, &mut out)))
    });
    group.finish();

    let mut group = c.benchmark_group("sealed_10mb_access");
    group.throughput(Throughput::Bytes(RECORD_BYTES as u64));
    let records = SEGMENT_BYTES / RECORD_BYTES as u64;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    group.bench_function("random_record", |b| {
        b.iter(|| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            black_box(
                sealed
                    .read(state % records, RECORD_BYTES, &mut out)
                    .expect("read")
                    .records,
            )
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = read_path
}
criterion_main!(benches);
