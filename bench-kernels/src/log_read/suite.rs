//! The read-path benchmarks of RustLog's `read_path` bench: sealed against active,
//! `max_bytes` scaling, segment size, cold against warm page cache, concurrent readers,
//! and random against sequential access. Throughput counts the record bytes fetched.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use super::segment::{RECORD_BYTES, RECORD_HEADER_BYTES, Segment};
use crate::error::KernelError;
use crate::instructions::region::{counted, counting};
use crate::measure::median;
use crate::report::{BenchmarkResult, Direction, Metric};
use crate::runner::{RunContext, Suite, unknown};
use crate::variants::SealedReader;

/// The log-read suite.
pub struct LogReadSuite;

const MB: u64 = 1_000_000;
const GIB: f64 = (1u64 << 30) as f64;
const MAX_BYTES: [(&str, usize); 5] = [
    ("1kb", 1_000),
    ("10kb", 10_000),
    ("100kb", 100_000),
    ("1mb", 1_000_000),
    ("10mb", 10_000_000),
];

impl Suite for LogReadSuite {
    fn name(&self) -> &'static str {
        "log_read"
    }

    fn benchmarks(&self, quick: bool) -> Vec<String> {
        let mut names = vec![
            "log_read/sealed_vs_active/sealed_10mb".to_string(),
            "log_read/sealed_vs_active/active_10mb".to_string(),
            "log_read/access/random".to_string(),
        ];
        if quick {
            return names;
        }
        names.push("log_read/access/sequential".to_string());
        names.extend(
            MAX_BYTES
                .iter()
                .map(|(l, _)| format!("log_read/max_bytes/{l}")),
        );
        for size in ["1mb", "10mb", "100mb"] {
            names.push(format!("log_read/segment_size/{size}_sealed"));
            names.push(format!("log_read/segment_size/{size}_active"));
        }
        names.push("log_read/cache/cold".to_string());
        names.push("log_read/cache/warm".to_string());
        names.extend((1..=4).map(|n| format!("log_read/concurrent/{n}_readers")));
        names
    }

    fn run(
        &self,
        selected: &[String],
        context: &RunContext,
    ) -> Result<Vec<BenchmarkResult>, KernelError> {
        let reader = context.variants.log_read.sealed_reader;
        let dir = context.scratch.join("log_read");
        std::fs::create_dir_all(&dir).map_err(|source| KernelError::Io {
            context: "creating the log directory".to_string(),
            source,
        })?;
        let mut fixtures = Fixtures::default();
        selected
            .iter()
            .map(|name| {
                context.progress(name);
                let result = run_one(name, context, &dir, &mut fixtures)?;
                Ok(result.variant("sealed_reader", reader))
            })
            .collect()
    }
}

/// Segments built once per run and shared by the benchmarks that read them.
#[derive(Default)]
struct Fixtures {
    sealed: Vec<(u64, Segment)>,
    active: Vec<(u64, Segment)>,
}

impl Fixtures {
    fn get(
        &mut self,
        dir: &Path,
        bytes: u64,
        sealed: Option<SealedReader>,
    ) -> Result<&mut Segment, KernelError> {
        let list = if sealed.is_some() {
            &mut self.sealed
        } else {
            &mut self.active
        };
        if let Some(i) = list.iter().position(|(b, _)| *b == bytes) {
            return Ok(&mut list[i].1);
        }
        let sub = dir.join(format!(
            "{}_{bytes}",
            if sealed.is_some() { "sealed" } else { "active" }
        ));
        std::fs::create_dir_all(&sub).map_err(|source| KernelError::Io {
            context: "creating a segment directory".to_string(),
            source,
        })?;
        let mut segment = Segment::create(&sub, 0)?;
        let mut payload = [b'r'; RECORD_BYTES - RECORD_HEADER_BYTES];
        for i in 0..bytes / RECORD_BYTES as u64 {
            payload[..8].copy_from_slice(&i.to_le_bytes());
            segment.append(&payload)?;
        }
        segment.flush()?;
        if let Some(reader) = sealed {
            segment.seal(reader)?;
        }
        list.push((bytes, segment));
        Ok(&mut list.last_mut().expect("just pushed").1)
    }
}

/// Reads every record of the segment once, in fetches of `max_bytes`, starting at `start`
/// and wrapping around at the end; returns the bytes read.
fn scan(
    segment: &Segment,
    start: u64,
    max_bytes: usize,
    out: &mut Vec<u8>,
) -> Result<u64, KernelError> {
    let (base, end) = (segment.base_offset(), segment.next_offset());
    let total = end - base;
    let (mut offset, mut read, mut bytes) = (start, 0u64, 0u64);
    while read < total {
        let remaining = ((total - read) as usize).saturating_mul(RECORD_BYTES);
        let fetched = segment.read(offset, max_bytes.min(remaining), out)?;
        let records = fetched.records;
        if records == 0 {
            return Err(KernelError::Corrupt(format!(
                "no record at offset {offset}"
            )));
        }
        bytes += fetched.bytes.len() as u64;
        black_box(fetched.bytes);
        read += records;
        offset += records;
        if offset == end {
            offset = base;
        }
    }
    Ok(bytes)
}

/// One-record fetches at pseudo-random offsets, as many records as the segment holds.
fn random_reads(segment: &Segment, out: &mut Vec<u8>) -> Result<u64, KernelError> {
    let records = segment.next_offset() - segment.base_offset();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut bytes = 0;
    for _ in 0..records {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let fetched = segment.read(segment.base_offset() + state % records, RECORD_BYTES, out)?;
        bytes += fetched.bytes.len() as u64;
        black_box(fetched.bytes);
    }
    Ok(bytes)
}

struct Throughput {
    samples_ns: Vec<f64>,
    bytes: u64,
}

fn repeat(
    repetitions: usize,
    mut pass: impl FnMut() -> Result<u64, KernelError>,
) -> Result<Throughput, KernelError> {
    let repetitions = if counting() { 1 } else { repetitions };
    let mut samples_ns = Vec::with_capacity(repetitions);
    let mut bytes = 0;
    // The first pass warms up and is not kept.
    for rep in 0..=repetitions {
        let start = Instant::now();
        // In the count run, the one kept pass is the counted one.
        bytes = if rep > 0 {
            counted(&mut pass)?
        } else {
            pass()?
        };
        if rep > 0 {
            samples_ns.push(start.elapsed().as_nanos() as f64);
        }
    }
    Ok(Throughput { samples_ns, bytes })
}

fn result(name: &str, t: Throughput) -> BenchmarkResult {
    let gib_s = t.bytes as f64 / GIB / (median(&t.samples_ns) / 1e9).max(1e-12);
    BenchmarkResult::new(name)
        .param("bytes", t.bytes)
        .metric(Metric::samples(
            "time",
            "ns",
            Direction::Lower,
            t.samples_ns,
        ))
        .metric(Metric::value(
            "throughput",
            "GiB/s",
            Direction::Higher,
            gib_s,
        ))
}

fn run_one(
    name: &str,
    context: &RunContext,
    dir: &Path,
    fixtures: &mut Fixtures,
) -> Result<BenchmarkResult, KernelError> {
    let reader = context.variants.log_read.sealed_reader;
    let reps = context.sized(11, 15);
    let mut out = Vec::with_capacity(11 * MB as usize);
    let case = name.rsplit('/').next().unwrap_or_default();
    let scenario = name.split('/').nth(1).unwrap_or_default();
    match (scenario, case) {
        ("sealed_vs_active", "sealed_10mb") | ("access", "sequential") | ("cache", "warm") => {
            let s = fixtures.get(dir, 10 * MB, Some(reader))?;
            let t = repeat(reps, || scan(s, 0, MB as usize, &mut out))?;
            Ok(result(name, t).param("max_bytes", MB))
        }
        ("sealed_vs_active", "active_10mb") => {
            let s = fixtures.get(dir, 10 * MB, None)?;
            let t = repeat(reps, || scan(s, 0, MB as usize, &mut out))?;
            Ok(result(name, t).param("max_bytes", MB))
        }
        ("access", "random") => {
            let s = fixtures.get(dir, context.sized(MB, 10 * MB), Some(reader))?;
            let t = repeat(reps, || random_reads(s, &mut out))?;
            Ok(result(name, t).param("max_bytes", RECORD_BYTES))
        }
        ("max_bytes", label) => {
            let (_, max_bytes) = MAX_BYTES
                .iter()
                .find(|(l, _)| *l == label)
                .ok_or_else(|| unknown(name))?;
            let s = fixtures.get(dir, 10 * MB, Some(reader))?;
            let t = repeat(reps, || scan(s, 0, *max_bytes, &mut out))?;
            Ok(result(name, t).param("max_bytes", max_bytes))
        }
        ("segment_size", label) => {
            let (size, kind) = label.split_once('_').ok_or_else(|| unknown(name))?;
            let bytes = match size {
                "1mb" => MB,
                "10mb" => 10 * MB,
                "100mb" => 100 * MB,
                _ => return Err(unknown(name)),
            };
            let sealed = (kind == "sealed").then_some(reader);
            let s = fixtures.get(dir, bytes, sealed)?;
            let reps = if bytes > 10 * MB { 5 } else { reps };
            let t = repeat(reps, || scan(s, 0, MB as usize, &mut out))?;
            Ok(result(name, t).param("max_bytes", MB))
        }
        ("cache", "cold") => {
            let s = fixtures.get(dir, 10 * MB, Some(reader))?;
            let (mut samples_ns, mut bytes) = (Vec::with_capacity(reps), 0);
            for _ in 0..reps {
                s.drop_page_cache()?;
                let start = Instant::now();
                bytes = scan(s, 0, MB as usize, &mut out)?;
                samples_ns.push(start.elapsed().as_nanos() as f64);
            }
            Ok(result(name, Throughput { samples_ns, bytes }).param("max_bytes", MB))
        }
        ("concurrent", label) => {
            let readers: usize = label
                .strip_suffix("_readers")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| unknown(name))?;
            let s = fixtures.get(dir, 10 * MB, Some(reader))?;
            let mut buffers: Vec<Vec<u8>> = (0..readers)
                .map(|_| Vec::with_capacity(MB as usize + RECORD_BYTES))
                .collect();
            let t = repeat(reps, || concurrent_scan(s, &mut buffers))?;
            Ok(result(name, t)
                .param("readers", readers)
                .param("max_bytes", MB))
        }
        _ => Err(unknown(name)),
    }
}

/// One thread per buffer, each reading the whole segment from evenly spaced offsets.
fn concurrent_scan(segment: &Segment, buffers: &mut [Vec<u8>]) -> Result<u64, KernelError> {
    let records = segment.next_offset() - segment.base_offset();
    let readers = buffers.len() as u64;
    std::thread::scope(|scope| {
        let handles: Vec<_> = buffers
            .iter_mut()
            .enumerate()
            .map(|(r, out)| {
                let start = segment.base_offset() + records * r as u64 / readers;
                scope.spawn(move || scan(segment, start, MB as usize, out))
            })
            .collect();
        handles.into_iter().try_fold(0u64, |total, h| {
            let bytes = h
                .join()
                .map_err(|_| KernelError::ThreadPanicked("log reader"))??;
            Ok(total + bytes)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scan_reads_the_whole_segment_from_any_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut fixtures = Fixtures::default();
        let s = fixtures
            .get(dir.path(), 100_000, Some(SealedReader::Mmap))
            .unwrap();
        let mut out = Vec::new();
        for start in [0, 1, 500, 999] {
            assert_eq!(
                scan(s, start, 4096, &mut out).unwrap(),
                100_000,
                "start {start}"
            );
        }
        assert_eq!(
            concurrent_scan(s, &mut [vec![], vec![], vec![]]).unwrap(),
            300_000
        );
        assert_eq!(random_reads(s, &mut out).unwrap(), 100_000);
    }
}
