//! kymo JSON: the document the runner prints, built and validated here.
//!
//! The structs are our own (this crate must stay independent of kymo-core); they follow the
//! "kymo JSON" section of the design. Variant choices are reported under `variant`, beside
//! `params`, because `params` is part of a benchmark's identity: a commit that switches a
//! variant must land in the same series so that the slowdown shows as a regression.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer as _, V2Serializer};
use serde::Serialize;

use crate::error::KernelError;

/// One kymo JSON document.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Every benchmark that ran, in run order.
    pub benchmarks: Vec<BenchmarkResult>,
}

/// Whether smaller or larger values of a metric are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Smaller is better (time, latency).
    Lower,
    /// Larger is better (throughput).
    Higher,
}

/// One benchmark's identity and measurements.
#[derive(Debug, Clone, Serialize)]
pub struct BenchmarkResult {
    /// `suite/scenario/case`, lowercase, `/` and `_` only as separators.
    pub name: String,
    /// Workload parameters that belong to the benchmark's identity.
    pub params: BTreeMap<String, String>,
    /// Implementation variants that ran (not part of the identity, see the module docs).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub variant: BTreeMap<String, String>,
    /// What was measured.
    pub metrics: Vec<Metric>,
}

/// One measured quantity: a value, raw samples, a latency histogram, or several of these.
#[derive(Debug, Clone, Serialize)]
pub struct Metric {
    /// What is measured, e.g. `time`.
    pub name: String,
    /// Its unit, e.g. `ns`.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// One figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Repetitions of the measurement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<Vec<f64>>,
    /// Base64 of the HdrHistogram V2 serialization.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hdr: Option<String>,
}

impl Metric {
    /// A single figure.
    pub fn value(name: &str, unit: &str, direction: Direction, value: f64) -> Self {
        Self {
            name: name.to_string(),
            unit: unit.to_string(),
            direction,
            value: Some(value),
            samples: None,
            hdr: None,
        }
    }

    /// Repetitions of one measurement; the reader derives the median and the noise.
    pub fn samples(name: &str, unit: &str, direction: Direction, samples: Vec<f64>) -> Self {
        Self {
            name: name.to_string(),
            unit: unit.to_string(),
            direction,
            value: None,
            samples: Some(samples),
            hdr: None,
        }
    }

    /// A distribution, kept whole so that percentiles can be re-derived and runs merged.
    pub fn histogram(
        name: &str,
        unit: &str,
        direction: Direction,
        histogram: &Histogram<u64>,
    ) -> Result<Self, KernelError> {
        Ok(Self {
            name: name.to_string(),
            unit: unit.to_string(),
            direction,
            value: None,
            samples: None,
            hdr: Some(encode_histogram(histogram)?),
        })
    }

    /// The figure a human table shows: the value, else the median sample.
    pub fn headline(&self) -> Option<f64> {
        self.value
            .or_else(|| self.samples.as_deref().map(crate::measure::median))
    }
}

impl BenchmarkResult {
    /// An empty result named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            params: BTreeMap::new(),
            variant: BTreeMap::new(),
            metrics: Vec::new(),
        }
    }

    /// Adds an identity parameter.
    pub fn param(mut self, key: &str, value: impl ToString) -> Self {
        self.params.insert(key.to_string(), value.to_string());
        self
    }

    /// Records which implementation variant ran.
    pub fn variant(mut self, key: &str, value: impl ToString) -> Self {
        self.variant.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds a metric.
    pub fn metric(mut self, metric: Metric) -> Self {
        self.metrics.push(metric);
        self
    }

    /// Checks the kymo JSON contract: name shape, finite numbers, every metric carries data.
    pub fn validate(&self) -> Result<(), KernelError> {
        if !is_valid_name(&self.name) {
            return Err(KernelError::InvalidResult(format!(
                "benchmark name {:?} is not lowercase suite/scenario/case",
                self.name
            )));
        }
        if self.metrics.is_empty() {
            return Err(KernelError::InvalidResult(format!(
                "{} has no metrics",
                self.name
            )));
        }
        for metric in &self.metrics {
            let numbers = metric.value.iter().chain(metric.samples.iter().flatten());
            if let Some(bad) = numbers.clone().find(|v| !v.is_finite()) {
                return Err(KernelError::InvalidResult(format!(
                    "{}: metric {} has the non-finite number {bad}",
                    self.name, metric.name
                )));
            }
            let has_data = metric.value.is_some()
                || metric.samples.as_ref().is_some_and(|s| !s.is_empty())
                || metric.hdr.is_some();
            if !has_data {
                return Err(KernelError::InvalidResult(format!(
                    "{}: metric {} has neither value, samples nor hdr",
                    self.name, metric.name
                )));
            }
        }
        Ok(())
    }
}

/// `suite/scenario/case`: at least two `/`-separated parts of `[a-z0-9_]`.
fn is_valid_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    parts.len() >= 2
        && parts.iter().all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
}

/// Serializes a histogram as HdrHistogram V2 and encodes it as standard base64.
pub fn encode_histogram(histogram: &Histogram<u64>) -> Result<String, KernelError> {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(histogram, &mut bytes)
        .map_err(|e| KernelError::Histogram(format!("{e:?}")))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

impl Report {
    /// Validates every benchmark and renders the document as one line of JSON.
    pub fn to_json(&self) -> Result<String, KernelError> {
        for benchmark in &self.benchmarks {
            benchmark.validate()?;
        }
        serde_json::to_string(self).map_err(|e| KernelError::InvalidResult(e.to_string()))
    }

    /// A table for people: one line per metric with its headline figure.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for benchmark in &self.benchmarks {
            let params: Vec<String> = benchmark
                .params
                .iter()
                .chain(&benchmark.variant)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            out.push_str(&format!("{}  [{}]\n", benchmark.name, params.join(" ")));
            for metric in &benchmark.metrics {
                match metric.headline() {
                    Some(v) => out.push_str(&format!(
                        "    {:<22} {:>16.3} {}\n",
                        metric.name, v, metric.unit
                    )),
                    None => out.push_str(&format!(
                        "    {:<22} {:>16} {} (histogram)\n",
                        metric.name, "", metric.unit
                    )),
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use hdrhistogram::serialization::Deserializer;

    use super::*;

    #[test]
    fn histogram_round_trips_through_base64_v2() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [10, 20, 30, 1_000, 50_000] {
            h.record(v).unwrap();
        }
        let encoded = encode_histogram(&h).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap();
        let back: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
        assert_eq!(back.len(), 5);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }

    #[test]
    fn names_must_be_lowercase_paths() {
        assert!(is_valid_name("bus/steady/one_subscriber"));
        assert!(is_valid_name("ring/series_count/100"));
        assert!(!is_valid_name("bus"));
        assert!(!is_valid_name("Bus/steady"));
        assert!(!is_valid_name("bus//steady"));
        assert!(!is_valid_name("bus/steady-state"));
    }

    #[test]
    fn non_finite_numbers_are_rejected() {
        let result = BenchmarkResult::new("ring/write_path/record").metric(Metric::value(
            "throughput",
            "ops/s",
            Direction::Higher,
            f64::INFINITY,
        ));
        assert!(result.validate().is_err());
        let ok = BenchmarkResult::new("ring/write_path/record").metric(Metric::samples(
            "time",
            "ns",
            Direction::Lower,
            vec![1.0, 2.0],
        ));
        ok.validate().unwrap();
    }

    #[test]
    fn json_omits_absent_fields_and_keeps_params() {
        let report = Report {
            benchmarks: vec![
                BenchmarkResult::new("bus/steady/one_subscriber")
                    .param("capacity", 2048)
                    .variant("backend", "soa")
                    .metric(Metric::value(
                        "throughput",
                        "elem/s",
                        Direction::Higher,
                        1e7,
                    )),
            ],
        };
        let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
        let bench = &json["benchmarks"][0];
        assert_eq!(bench["params"]["capacity"], "2048");
        assert_eq!(bench["variant"]["backend"], "soa");
        assert_eq!(bench["metrics"][0]["direction"], "higher");
        assert!(bench["metrics"][0].get("samples").is_none());
    }
}
