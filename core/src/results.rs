//! Benchmark results as every format parser produces them and as the server stores them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Direction;

/// The results of one suite run (one kymo JSON document, or one file of another format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteResults {
    pub benchmarks: Vec<BenchmarkResult>,
}

/// One benchmark: a name, optional parameters that belong to its identity, and its metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkResult {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    pub metrics: Vec<MetricResult>,
}

/// One metric of a benchmark. `value` is always set: given directly, or derived (median of
/// `samples`, or the p50 of `hdr`). `samples` keeps the raw samples statistics need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricResult {
    pub name: String,
    pub unit: String,
    pub direction: Direction,
    pub value: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<f64>,
    /// A base64 HdrHistogram V2 serialization, when the benchmark measured a distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdr: Option<String>,
}

impl BenchmarkResult {
    /// The benchmark's identity as one string: `name` alone, or `name{k=v,k2=v2}` with the
    /// parameters in key order.
    pub fn key(&self) -> String {
        if self.params.is_empty() {
            return self.name.clone();
        }
        let params: Vec<String> = self.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{}{{{}}}", self.name, params.join(","))
    }
}

/// The median of a non-empty slice of finite numbers.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 0 {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn key_includes_params_in_order() {
        let b = BenchmarkResult {
            name: "bus/steady".into(),
            params: [("z".to_string(), "1".to_string()), ("a".to_string(), "x".to_string())]
                .into_iter()
                .collect(),
            metrics: vec![],
        };
        assert_eq!(b.key(), "bus/steady{a=x,z=1}");
    }
}
