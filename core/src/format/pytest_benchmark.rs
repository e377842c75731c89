//! pytest-benchmark's JSON (`--benchmark-json`, or a file saved by `--benchmark-save`): one
//! entry per test, its statistics in seconds.
//!
//! The name is the test's `fullname` (`tests/test_x.py::test_sum[64]`). When the test is
//! parametrized with plain values, the `[64]` id moves into params from `params`
//! (`tests/test_x.py::test_sum{n=64}`); ids of other values stay in the name. `time` is the
//! per-iteration time in ns: its value pytest-benchmark's median, its samples the per-round
//! `stats.data` when the file has them (always with `--benchmark-json`; with `--benchmark-save`
//! only given `--benchmark-save-data`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::input::{
    Entries, Found, List, Object, ParamValue, finish, from_json, metric, scaled, shown,
};
use super::kymo::{FormatError, MAX_BENCHMARKS, MAX_PARAMS_PER_BENCHMARK};
use crate::model::Direction;
use crate::results::{BenchmarkResult, MAX_SAMPLES_PER_METRIC, SuiteResults};

const NS_PER_SECOND: f64 = 1e9;

#[derive(Deserialize)]
struct RawDocument {
    benchmarks: List<Object<RawBenchmark>, MAX_BENCHMARKS>,
}

#[derive(Deserialize)]
struct RawBenchmark {
    name: String,
    fullname: Option<String>,
    params: Option<Entries<ParamValue, MAX_PARAMS_PER_BENCHMARK>>,
    param: Option<String>,
    stats: Object<RawStats>,
}

#[derive(Deserialize)]
struct RawStats {
    median: f64,
    data: Option<List<f64, MAX_SAMPLES_PER_METRIC>>,
}

/// Parses a pytest-benchmark JSON document.
pub fn parse_pytest_benchmark(bytes: &[u8]) -> Result<SuiteResults, FormatError> {
    let Object(raw) = from_json::<Object<RawDocument>>(bytes)?;
    let mut found = Vec::with_capacity(raw.benchmarks.0.len());
    for (index, Object(bench)) in raw.benchmarks.0.into_iter().enumerate() {
        let place = format!("benchmarks[{index}]");
        let Object(stats) = bench.stats;
        let per_round = |what: &str, t: f64| scaled(&place, what, t, NS_PER_SECOND);
        let value = per_round("stats.median", stats.median)?;
        let samples = match stats.data {
            Some(List(data)) => (data.into_iter())
                .map(|t| per_round("a value of stats.data", t))
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        let fullname = bench.fullname.unwrap_or(bench.name);
        let (name, params) = split_params(fullname, bench.param, bench.params);
        let place = format!("{place} ({})", shown(&name));
        let benchmark = BenchmarkResult {
            name,
            params,
            metrics: vec![metric("time", "ns", Direction::Lower, value, samples)],
        };
        found.push(Found { place, benchmark });
    }
    finish(found)
}

/// `test_x.py::test_sum[64]` with params `{"n": 64}` → `test_x.py::test_sum`, `{n=64}`, when
/// the name ends with the id and every value is plain; otherwise the name as it is.
fn split_params(
    fullname: String,
    id: Option<String>,
    params: Option<Entries<ParamValue, MAX_PARAMS_PER_BENCHMARK>>,
) -> (String, BTreeMap<String, String>) {
    let (Some(id), Some(Entries(entries))) = (id, params) else {
        return (fullname, BTreeMap::new());
    };
    let suffix = format!("[{id}]");
    let base = match fullname.strip_suffix(&suffix) {
        Some(base) if !entries.is_empty() && !base.is_empty() => base,
        _ => return (fullname, BTreeMap::new()),
    };
    let mut params = BTreeMap::new();
    for (key, value) in entries {
        match value {
            ParamValue::Text(value) if !value.trim().is_empty() => params.insert(key, value),
            _ => return (fullname, BTreeMap::new()),
        };
    }
    (base.to_string(), params)
}

#[cfg(test)]
mod tests;
