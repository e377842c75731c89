//! Google Benchmark's JSON (`--benchmark_format=json` or `--benchmark_out`): one row per run,
//! plus aggregate rows (mean, median, stddev, cv, BigO, RMS) when runs are repeated.
//!
//! Rows are grouped by `run_name` (`BM_sum/64`, `BM_x/real_time/threads:2`), the benchmark's
//! name. Iteration rows are the samples, so `--benchmark_repetitions=N` gives N samples and the
//! aggregates are not counted again; when only aggregates were reported
//! (`--benchmark_report_aggregates_only`), the median row (else the mean row) is the value.
//! Rows with `error_occurred` (`state.SkipWithError`) are left out. Metrics: `real_time` →
//! `time` and `cpu_time` → `cpu_time`, both converted from `time_unit` to ns; and
//! `bytes_per_second` (B/s) and `items_per_second` (items/s), higher is better. User counters
//! carry no unit or direction in the JSON, so they are not kept.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::input::{Found, List, Object, finish, from_json, invalid, metric, scaled, shown};
use super::kymo::FormatError;
use crate::model::Direction;
use crate::results::{BenchmarkResult, MAX_SAMPLES_PER_METRIC, MetricResult, SuiteResults, median};

/// The most rows a document may hold: every repetition of every benchmark, and aggregates.
const MAX_ROWS: usize = MAX_SAMPLES_PER_METRIC;

#[derive(Deserialize)]
struct RawDocument {
    benchmarks: List<Object<RawRow>, MAX_ROWS>,
}

#[derive(Deserialize)]
struct RawRow {
    name: String,
    run_name: Option<String>,
    run_type: Option<String>,
    aggregate_name: Option<String>,
    #[serde(default)]
    error_occurred: bool,
    error_message: Option<String>,
    real_time: Option<f64>,
    cpu_time: Option<f64>,
    time_unit: Option<String>,
    bytes_per_second: Option<f64>,
    items_per_second: Option<f64>,
}

/// The rows of one benchmark, by their index in the document.
#[derive(Default)]
struct Group {
    first: usize,
    iterations: Vec<usize>,
    aggregates: HashMap<String, usize>,
}

/// Parses a Google Benchmark JSON document.
pub fn parse_google_benchmark(bytes: &[u8]) -> Result<SuiteResults, FormatError> {
    let Object(raw) = from_json::<Object<RawDocument>>(bytes)?;
    let rows: Vec<RawRow> = raw.benchmarks.0.into_iter().map(|Object(r)| r).collect();
    let mut groups: Vec<(String, Group)> = Vec::new();
    let mut group_of: HashMap<String, usize> = HashMap::new();
    let mut first_error = None;
    for (index, row) in rows.iter().enumerate() {
        if row.error_occurred {
            first_error.get_or_insert(index);
            continue;
        }
        let aggregate = match row.run_type.as_deref() {
            None | Some("iteration") => None,
            Some("aggregate") => Some(row.aggregate_name.clone().unwrap_or_default()),
            Some(other) => {
                let reason = format!(
                    "run_type is {}; expected iteration or aggregate",
                    shown(other)
                );
                return Err(invalid(format!("benchmarks[{index}]"), reason));
            }
        };
        let name = row.run_name.clone().unwrap_or_else(|| row.name.clone());
        let at = *group_of.entry(name.clone()).or_insert_with(|| {
            groups.push((
                name,
                Group {
                    first: index,
                    ..Group::default()
                },
            ));
            groups.len() - 1
        });
        let group = &mut groups[at].1;
        match aggregate {
            None => group.iterations.push(index),
            Some(kind) => {
                group.aggregates.entry(kind).or_insert(index);
            }
        }
    }
    let mut found = Vec::with_capacity(groups.len());
    for (name, group) in groups {
        // Aggregates count only when they are all there is; BigO and RMS alone are no time.
        let used = if group.iterations.is_empty() {
            match (group.aggregates.get("median"), group.aggregates.get("mean")) {
                (Some(&at), _) | (None, Some(&at)) => vec![at],
                (None, None) => continue,
            }
        } else {
            group.iterations
        };
        let metrics = metrics_of(&rows, &used)?;
        let place = format!("benchmarks[{}] ({})", group.first, shown(&name));
        let benchmark = BenchmarkResult {
            name,
            params: BTreeMap::new(),
            metrics,
        };
        found.push(Found { place, benchmark });
    }
    if let (true, Some(index)) = (found.is_empty(), first_error) {
        let message = rows[index].error_message.as_deref().unwrap_or("");
        let reason = format!("every benchmark failed, the first with {}", shown(message));
        return Err(invalid(format!("benchmarks[{index}]"), reason));
    }
    finish(found)
}

/// The metrics of a benchmark from its rows: each row one sample, the value their median.
fn metrics_of(rows: &[RawRow], used: &[usize]) -> Result<Vec<MetricResult>, FormatError> {
    type Field = fn(&RawRow) -> Option<f64>;
    let fields: [(&str, &str, Direction, bool, Field); 4] = [
        ("time", "ns", Direction::Lower, true, |r| r.real_time),
        ("cpu_time", "ns", Direction::Lower, true, |r| r.cpu_time),
        ("bytes_per_second", "B/s", Direction::Higher, false, |r| {
            r.bytes_per_second
        }),
        (
            "items_per_second",
            "items/s",
            Direction::Higher,
            false,
            |r| r.items_per_second,
        ),
    ];
    let mut metrics = Vec::new();
    for (name, unit, direction, is_time, field) in fields {
        let mut samples = Vec::with_capacity(used.len());
        for &index in used {
            let place = format!("benchmarks[{index}]");
            let row = &rows[index];
            match field(row) {
                Some(value) => {
                    let scale = if is_time { ns_per(&place, row)? } else { 1.0 };
                    samples.push(scaled(&place, name, value, scale)?);
                }
                // A time is what makes a row a result; a rate is there only when the
                // benchmark set the bytes or items it processed.
                None if is_time => {
                    let field = if name == "time" { "real_time" } else { name };
                    return Err(invalid(place, format!("has no {field}")));
                }
                None => {}
            }
        }
        if let Some(value) = median(&samples) {
            metrics.push(metric(name, unit, direction, value, samples));
        }
    }
    Ok(metrics)
}

/// How many ns one `time_unit` of the row is (Google Benchmark's default unit is ns).
fn ns_per(place: &str, row: &RawRow) -> Result<f64, FormatError> {
    match row.time_unit.as_deref() {
        None | Some("ns") => Ok(1.0),
        Some("us") => Ok(1e3),
        Some("ms") => Ok(1e6),
        Some("s") => Ok(1e9),
        Some(other) => {
            let reason = format!("time_unit is {}; expected ns, us, ms or s", shown(other));
            Err(invalid(place, reason))
        }
    }
}

#[cfg(test)]
mod tests;
