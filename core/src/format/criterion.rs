//! criterion's output directory (`target/criterion`): for each benchmark, the JSON files
//! criterion writes under `<id>/new/` on every run, not the text it prints.
//!
//! `benchmark.json` gives the id (`group/function/value`, the benchmark's name) and the
//! throughput, `estimates.json` the value (criterion's headline estimate: the slope when
//! it sampled linearly, else the mean), and `sample.json` the measured iterations and total
//! times, from which each sample's per-iteration time comes. A throughput setting adds a
//! `throughput` metric (`B/s`, `bit/s` or `elem/s`, higher is better) computed from the same
//! times. Times are read as ns, the unit of criterion's default wall-clock measurement.
//!
//! The directory is walked without following symbolic links, to a bounded depth and size, and
//! every error names the file, relative to the directory, and the place in it.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::input::{Found, List, Object, finish, from_json, invalid, metric, scaled};
use super::kymo::{FormatError, MAX_BENCHMARKS, MAX_DOCUMENT_BYTES};
use crate::model::Direction;
use crate::results::{BenchmarkResult, MAX_SAMPLES_PER_METRIC, MetricResult, SuiteResults};

/// How deep below the given directory benchmarks are looked for: criterion ids have at most
/// three parts, and the directory may be `target` rather than `target/criterion`.
const MAX_DEPTH: usize = 6;
/// The most directory entries looked at, so a huge tree is refused rather than walked for long.
const MAX_ENTRIES: usize = 1_000_000;
/// The most bytes of JSON read from one directory.
const MAX_TOTAL_BYTES: usize = 8 * MAX_DOCUMENT_BYTES;

#[derive(Deserialize)]
struct RawId {
    group_id: String,
    function_id: Option<String>,
    value_str: Option<String>,
    throughput: Option<RawThroughput>,
}

/// criterion's `Throughput`, as serde writes it: `{"Bytes": 64}`.
#[derive(Deserialize)]
enum RawThroughput {
    Bits(u64),
    Bytes(u64),
    BytesDecimal(u64),
    Elements(u64),
    ElementsAndBytes { elements: u64, bytes: u64 },
}

#[derive(Deserialize)]
struct RawEstimates {
    mean: Object<RawEstimate>,
    slope: Option<Object<RawEstimate>>,
}

#[derive(Deserialize)]
struct RawEstimate {
    point_estimate: f64,
}

#[derive(Deserialize)]
struct RawSample {
    iters: List<f64, MAX_SAMPLES_PER_METRIC>,
    times: List<f64, MAX_SAMPLES_PER_METRIC>,
}

/// Reads a criterion output directory (`target/criterion`, or any directory below it), using
/// every benchmark's `new/benchmark.json`, `new/estimates.json` and `new/sample.json`.
pub fn parse_criterion_dir(dir: &Path) -> Result<SuiteResults, FormatError> {
    let benchmark_dirs = find_benchmarks(dir)?;
    if benchmark_dirs.is_empty() {
        let reason = "holds no criterion results (no <benchmark>/new/benchmark.json below it)";
        return Err(invalid(dir.display().to_string(), reason));
    }
    let mut budget = MAX_TOTAL_BYTES;
    let mut found = Vec::with_capacity(benchmark_dirs.len());
    for relative in benchmark_dirs {
        let new = relative.join("new");
        let mut read = |file: &str| read_file(dir, &new.join(file), &mut budget);
        let (id, estimates, sample) = (
            read("benchmark.json")?,
            read("estimates.json")?,
            read("sample.json")?,
        );
        found.push(parse_benchmark(&new, &id, &estimates, &sample)?);
    }
    finish(found)
}

/// One benchmark from the contents of its three files (`benchmark.json`, `estimates.json`,
/// `sample.json`), with the checks [`parse_criterion_dir`] applies to each: the entry point for
/// callers that hold the files' contents rather than a directory, such as the fuzz targets.
pub fn parse_criterion_files(
    id: &[u8],
    estimates: &[u8],
    sample: &[u8],
) -> Result<SuiteResults, FormatError> {
    finish(vec![parse_benchmark(
        Path::new("new"),
        id,
        estimates,
        sample,
    )?])
}

/// One benchmark from the contents of its three files; `new` names their directory.
fn parse_benchmark(
    new: &Path,
    id: &[u8],
    estimates: &[u8],
    sample: &[u8],
) -> Result<Found, FormatError> {
    let file = |name: &str| new.join(name).display().to_string();
    let Object(id) =
        from_json::<Object<RawId>>(id).map_err(|e| in_file(&file("benchmark.json"), e))?;
    let Object(estimates) = from_json::<Object<RawEstimates>>(estimates)
        .map_err(|e| in_file(&file("estimates.json"), e))?;
    let Object(sample) =
        from_json::<Object<RawSample>>(sample).map_err(|e| in_file(&file("sample.json"), e))?;

    let Object(typical) = estimates.slope.unwrap_or(estimates.mean);
    let place = file("estimates.json");
    let value = scaled(&place, "the estimate", typical.point_estimate, 1.0)?;
    let place = file("sample.json");
    let (List(iters), List(times)) = (sample.iters, sample.times);
    if iters.len() != times.len() {
        let reason = format!("has {} iters but {} times", iters.len(), times.len());
        return Err(invalid(place, reason));
    }
    let mut samples = Vec::with_capacity(times.len());
    for (i, (&n, &t)) in iters.iter().zip(&times).enumerate() {
        if !(n.is_finite() && n >= 1.0) {
            return Err(invalid(
                &place,
                format!("iters[{i}] is {n}; it must be at least 1"),
            ));
        }
        samples.push(scaled(&place, &format!("times[{i}]"), t, 1.0)? / n);
    }

    let mut metrics = Vec::new();
    if let Some(throughput) = &id.throughput {
        metrics.extend(throughput_metrics(throughput, value, &samples));
    }
    metrics.insert(0, metric("time", "ns", Direction::Lower, value, samples));
    let name = [Some(id.group_id), id.function_id, id.value_str]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("/");
    let benchmark = BenchmarkResult {
        name,
        params: BTreeMap::new(),
        metrics,
    };
    Ok(Found {
        place: new.display().to_string(),
        benchmark,
    })
}

/// The throughput metrics at the estimated time and at each sample's time.
fn throughput_metrics(throughput: &RawThroughput, time: f64, samples: &[f64]) -> Vec<MetricResult> {
    let per_second = |name: &str, unit: &str, amount: u64| {
        let rate = |ns: f64| amount as f64 * 1e9 / ns;
        let samples = samples.iter().map(|&ns| rate(ns)).collect();
        metric(name, unit, Direction::Higher, rate(time), samples)
    };
    match *throughput {
        RawThroughput::Bits(n) => vec![per_second("throughput", "bit/s", n)],
        RawThroughput::Bytes(n) | RawThroughput::BytesDecimal(n) => {
            vec![per_second("throughput", "B/s", n)]
        }
        RawThroughput::Elements(n) => vec![per_second("throughput", "elem/s", n)],
        RawThroughput::ElementsAndBytes { elements, bytes } => vec![
            per_second("throughput", "elem/s", elements),
            per_second("byte_throughput", "B/s", bytes),
        ],
    }
}

/// Prefixes an error about a document with the file it came from.
fn in_file(file: &str, error: FormatError) -> FormatError {
    match error {
        FormatError::Json {
            place,
            line,
            column,
            reason,
        } => FormatError::Json {
            place: format!("{file}: {place}"),
            line,
            column,
            reason,
        },
        FormatError::NotUtf8 { line, column } => FormatError::Json {
            place: file.to_string(),
            line,
            column,
            reason: "the file is not UTF-8".to_string(),
        },
        FormatError::Invalid { place, reason } => invalid(format!("{file}: {place}"), reason),
        FormatError::TooLarge { size, max } => invalid(
            file,
            format!("is {size} bytes; at most {max} bytes are accepted"),
        ),
    }
}

/// The directories below `dir` (relative to it, sorted) that hold `new/benchmark.json`.
fn find_benchmarks(dir: &Path) -> Result<Vec<PathBuf>, FormatError> {
    let unreadable = |path: &Path, e: std::io::Error| {
        invalid(
            dir.join(path).display().to_string(),
            format!("cannot be read: {e}"),
        )
    };
    let mut found = Vec::new();
    let mut pending = vec![(PathBuf::new(), 0)];
    let mut entries_seen = 0;
    while let Some((relative, depth)) = pending.pop() {
        let mut children = Vec::new();
        for entry in fs::read_dir(dir.join(&relative)).map_err(|e| unreadable(&relative, e))? {
            let entry = entry.map_err(|e| unreadable(&relative, e))?;
            entries_seen += 1;
            if entries_seen > MAX_ENTRIES {
                let reason = format!("holds more than {MAX_ENTRIES} files and directories");
                return Err(invalid(dir.display().to_string(), reason));
            }
            // `file_type` does not follow symbolic links, so links are never walked into.
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && depth < MAX_DEPTH {
                children.push(relative.join(entry.file_name()));
            }
        }
        let is_benchmark = fs::symlink_metadata(dir.join(&relative).join("new/benchmark.json"))
            .is_ok_and(|m| m.is_file());
        if is_benchmark {
            found.push(relative.clone());
            if found.len() > MAX_BENCHMARKS {
                let reason = format!("holds more than {MAX_BENCHMARKS} benchmarks");
                return Err(invalid(dir.display().to_string(), reason));
            }
        }
        // Reverse order on the stack pops the children in name order.
        children.sort_by(|a, b| b.cmp(a));
        pending.extend(children.into_iter().map(|c| (c, depth + 1)));
    }
    found.sort();
    Ok(found)
}

/// Reads one regular file (not a link) below `dir`, within the size limits.
fn read_file(dir: &Path, relative: &Path, budget: &mut usize) -> Result<Vec<u8>, FormatError> {
    let shown = relative.display().to_string();
    let path = dir.join(relative);
    let meta =
        fs::symlink_metadata(&path).map_err(|e| invalid(&shown, format!("cannot be read: {e}")))?;
    if !meta.is_file() {
        return Err(invalid(&shown, "is not a regular file"));
    }
    let limit = MAX_DOCUMENT_BYTES.min(*budget);
    let mut bytes = Vec::new();
    fs::File::open(&path)
        .and_then(|f| f.take(limit as u64 + 1).read_to_end(&mut bytes))
        .map_err(|e| invalid(&shown, format!("cannot be read: {e}")))?;
    if bytes.len() > limit {
        let reason = if limit < MAX_DOCUMENT_BYTES {
            format!("goes past the {MAX_TOTAL_BYTES} bytes read from one directory")
        } else {
            format!("is more than {MAX_DOCUMENT_BYTES} bytes")
        };
        return Err(invalid(&shown, reason));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid(&shown, "is empty"));
    }
    *budget -= bytes.len();
    Ok(bytes)
}

#[cfg(test)]
mod tests;
