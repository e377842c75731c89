//! kymo JSON, the native result format: parsing and validating one suite run.
//!
//! Documents come from outside (benchmark binaries, CI uploads), so every limit is checked and
//! every error names its place: a JSON path such as `benchmarks[3].metrics[1]`, plus the line and
//! column when the JSON itself is at fault. Lists are capped while they are read, so a hostile
//! document cannot make the parser hold much more than the document itself.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::hdr::DocumentHistograms;
use super::input::{
    Echo, MAX_BENCHMARK_NAME_BYTES, MAX_METRIC_NAME_BYTES, MAX_PARAM_NAME_BYTES,
    MAX_PARAM_VALUE_BYTES, MAX_UNIT_BYTES, Object, ParamValue, check_text, invalid, shown, text_of,
};
use super::json_place::{PathStyle, from_json_text};
use crate::model::Direction;
use crate::results::{
    BenchmarkResult, MAX_SAMPLES_PER_METRIC, MetricResult, SuiteResults, median, negative_duration,
};

/// The largest document accepted.
pub const MAX_DOCUMENT_BYTES: usize = 32 * 1024 * 1024;
/// The deepest nesting of JSON arrays and objects accepted (the format itself needs 5).
pub const MAX_NESTING_DEPTH: usize = 64;
/// The most benchmarks one document may hold.
pub const MAX_BENCHMARKS: usize = 10_000;
/// The most metrics one benchmark may hold.
pub const MAX_METRICS_PER_BENCHMARK: usize = 64;
/// The most parameters one benchmark may have.
pub const MAX_PARAMS_PER_BENCHMARK: usize = 32;

/// Why a result document was refused. Shared by every format parser; each message names the
/// place in the document.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The document is larger than any parser accepts.
    #[error("the document is {size} bytes; at most {max} bytes are accepted")]
    TooLarge { size: usize, max: usize },
    /// The document is not UTF-8 text.
    #[error("the document is not UTF-8: invalid byte at line {line}, column {column}")]
    NotUtf8 { line: usize, column: usize },
    /// The text is not JSON, or a JSON value has the wrong type.
    #[error("{place} (line {line}, column {column}): {reason}")]
    Json {
        place: String,
        line: usize,
        column: usize,
        reason: String,
    },
    /// The JSON is well formed but breaks a rule of the format.
    #[error("{place}: {reason}")]
    Invalid { place: String, reason: String },
}

/// Parses and validates one kymo JSON document. A metric without `value` gets the median of its
/// `samples`, or else the p50 of its `hdr` histogram.
pub fn parse_kymo_json(bytes: &[u8]) -> Result<SuiteResults, FormatError> {
    let text = text_of(bytes)?;
    let Object(raw) = from_json_text::<Object<RawDocument>>(text, PathStyle::Dotted)?;
    validate(raw)
}

#[derive(Deserialize)]
struct RawDocument {
    benchmarks: Option<Capped<Object<RawBenchmark>, MAX_BENCHMARKS>>,
}

#[derive(Deserialize)]
struct RawBenchmark {
    name: Option<String>,
    params: Option<RawParams>,
    metrics: Option<Capped<Object<RawMetric>, MAX_METRICS_PER_BENCHMARK>>,
}

#[derive(Deserialize)]
struct RawMetric {
    name: Option<String>,
    unit: Option<String>,
    direction: Option<String>,
    value: Option<f64>,
    samples: Option<Capped<f64, MAX_SAMPLES_PER_METRIC>>,
    hdr: Option<String>,
}

/// A JSON list of which at most `N` items are kept; the rest are only counted, so that an
/// oversized list is reported with its length without being held in memory.
struct Capped<T, const N: usize> {
    items: Vec<T>,
    total: usize,
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Capped<T, N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CappedVisitor<T, const N: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for CappedVisitor<T, N> {
            type Value = Capped<T, N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let (mut items, mut total) = (Vec::new(), 0);
                while total < N {
                    let Some(item) = seq.next_element()? else {
                        break;
                    };
                    items.push(item);
                    total += 1;
                }
                while total == N && seq.next_element::<IgnoredAny>()?.is_some() {
                    total += 1;
                }
                Ok(Capped { items, total })
            }
        }
        deserializer.deserialize_seq(CappedVisitor(PhantomData))
    }
}

/// A benchmark's `params`, in document order, at most `MAX_PARAMS_PER_BENCHMARK` kept.
struct RawParams {
    entries: Vec<(String, ParamValue)>,
    total: usize,
}

impl<'de> Deserialize<'de> for RawParams {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ParamsVisitor;
        impl<'de> Visitor<'de> for ParamsVisitor {
            type Value = RawParams;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of parameters")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawParams, A::Error> {
                let mut params = RawParams {
                    entries: Vec::new(),
                    total: 0,
                };
                while let Some(key) = map.next_key::<String>()? {
                    params.total += 1;
                    if params.entries.len() < MAX_PARAMS_PER_BENCHMARK {
                        params.entries.push((key, map.next_value()?));
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(params)
            }
        }
        deserializer.deserialize_map(ParamsVisitor)
    }
}

fn validate(raw: RawDocument) -> Result<SuiteResults, FormatError> {
    let list = raw
        .benchmarks
        .ok_or_else(|| invalid("the document", "has no \"benchmarks\" list"))?;
    if list.total == 0 {
        let reason = "is empty; a document needs at least one benchmark";
        return Err(invalid("benchmarks", reason));
    }
    if list.total > MAX_BENCHMARKS {
        let reason = format!(
            "holds {} benchmarks; at most {MAX_BENCHMARKS} are accepted",
            list.total
        );
        return Err(invalid("benchmarks", reason));
    }
    let mut histograms = DocumentHistograms::default();
    let mut first_with_key = HashMap::new();
    let mut benchmarks = Vec::with_capacity(list.items.len());
    for (index, Object(raw)) in list.items.into_iter().enumerate() {
        let benchmark = validate_benchmark(index, raw, &mut histograms)?;
        // The key is what storage identifies a benchmark by, so it is what must be unique.
        let key = benchmark.key();
        if let Some(first) = first_with_key.insert(key.clone(), index) {
            let reason = format!("has the same name and params as benchmarks[{first}]");
            return Err(invalid(format!("benchmarks[{index}] ({key:?})"), reason));
        }
        benchmarks.push(benchmark);
    }
    Ok(SuiteResults { benchmarks })
}

fn validate_benchmark(
    index: usize,
    raw: RawBenchmark,
    histograms: &mut DocumentHistograms,
) -> Result<BenchmarkResult, FormatError> {
    let place = format!("benchmarks[{index}]");
    let name = raw.name.ok_or_else(|| invalid(&place, "has no \"name\""))?;
    check_text("name", &name, MAX_BENCHMARK_NAME_BYTES, Echo::Bare)
        .map_err(|r| invalid(&place, r))?;
    let named = format!("{place} ({name:?})");
    let params = validate_params(&named, raw.params)?;
    let list = raw
        .metrics
        .ok_or_else(|| invalid(&named, "has no \"metrics\" list"))?;
    if list.total == 0 {
        let reason = "has no metrics; a benchmark needs at least one";
        return Err(invalid(&named, reason));
    }
    if list.total > MAX_METRICS_PER_BENCHMARK {
        let reason = format!(
            "has {} metrics; at most {MAX_METRICS_PER_BENCHMARK} are accepted",
            list.total
        );
        return Err(invalid(&named, reason));
    }
    let mut seen = HashSet::new();
    let mut metrics = Vec::with_capacity(list.items.len());
    for (i, Object(raw)) in list.items.into_iter().enumerate() {
        let metric = validate_metric(&format!("{place}.metrics[{i}]"), raw, histograms)?;
        if !seen.insert(metric.name.clone()) {
            let place = format!("{place}.metrics[{i}] ({:?})", metric.name);
            let reason = "has the same name as an earlier metric of its benchmark";
            return Err(invalid(&place, reason));
        }
        metrics.push(metric);
    }
    Ok(BenchmarkResult {
        name,
        params,
        metrics,
    })
}

fn validate_params(
    place: &str,
    raw: Option<RawParams>,
) -> Result<BTreeMap<String, String>, FormatError> {
    let mut params = BTreeMap::new();
    let Some(raw) = raw else { return Ok(params) };
    if raw.total > MAX_PARAMS_PER_BENCHMARK {
        let reason = format!(
            "has {} params; at most {MAX_PARAMS_PER_BENCHMARK} are accepted",
            raw.total
        );
        return Err(invalid(place, reason));
    }
    for (key, value) in raw.entries {
        let what = format!("parameter name {}", shown(&key));
        check_text(&what, &key, MAX_PARAM_NAME_BYTES, Echo::Bare).map_err(|r| invalid(place, r))?;
        let what = format!("parameter {key:?}");
        let text = match value {
            ParamValue::Text(text) => text,
            ParamValue::Refused(found) => {
                let reason =
                    format!("{what} is {found}; a parameter is a string, number or boolean");
                return Err(invalid(place, reason));
            }
        };
        check_text(&what, &text, MAX_PARAM_VALUE_BYTES, Echo::Bare)
            .map_err(|r| invalid(place, r))?;
        if params.insert(key, text).is_some() {
            return Err(invalid(place, format!("{what} appears twice")));
        }
    }
    Ok(params)
}

fn validate_metric(
    place: &str,
    raw: RawMetric,
    histograms: &mut DocumentHistograms,
) -> Result<MetricResult, FormatError> {
    let name = raw.name.ok_or_else(|| invalid(place, "has no \"name\""))?;
    check_text("name", &name, MAX_METRIC_NAME_BYTES, Echo::Bare).map_err(|r| invalid(place, r))?;
    let place = format!("{place} ({name:?})");
    let unit = raw.unit.ok_or_else(|| invalid(&place, "has no \"unit\""))?;
    check_text("unit", &unit, MAX_UNIT_BYTES, Echo::BareMayBeEmpty)
        .map_err(|r| invalid(&place, r))?;
    let direction = raw
        .direction
        .ok_or_else(|| invalid(&place, "has no \"direction\""))?;
    let direction = Direction::parse(&direction).ok_or_else(|| {
        let reason = format!(
            "direction is {}; it must be \"lower\" or \"higher\"",
            shown(&direction)
        );
        invalid(&place, reason)
    })?;
    let samples = match raw.samples {
        Some(list) if list.total > MAX_SAMPLES_PER_METRIC => {
            let reason = format!(
                "has {} samples; at most {MAX_SAMPLES_PER_METRIC} are accepted",
                list.total
            );
            return Err(invalid(&place, reason));
        }
        Some(list) => list.items,
        None => Vec::new(),
    };
    let histogram = match &raw.hdr {
        Some(b64) => Some(histograms.decode(b64).map_err(|r| invalid(&place, r))?),
        None => None,
    };
    let value = raw
        .value
        .or_else(|| median(&samples))
        .or_else(|| histogram.map(|h| h.value_at_quantile(0.5) as f64))
        .ok_or("has no value, samples or hdr; a metric needs at least one")
        .map_err(|reason| invalid(&place, reason))?;
    if let Some(reason) = negative_duration(&unit, value, &samples) {
        return Err(invalid(&place, reason));
    }
    Ok(MetricResult {
        name,
        unit,
        direction,
        value,
        samples,
        hdr: raw.hdr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::hdr::tests::hdr_of;

    fn refused(doc: &str) -> String {
        parse_kymo_json(doc.as_bytes()).unwrap_err().to_string()
    }

    /// A document of one benchmark `b` holding the given metrics.
    fn with_metrics(metrics: &[String]) -> String {
        format!(
            r#"{{"benchmarks":[{{"name":"b","metrics":[{}]}}]}}"#,
            metrics.join(",")
        )
    }

    fn metric(name: &str, fields: &str) -> String {
        format!(r#"{{"name":"{name}","unit":"ns","direction":"lower",{fields}}}"#)
    }

    #[test]
    fn the_design_example_parses_with_derived_values() {
        let latency = hdr_of(&[820, 850, 870, 910, 1500]);
        let doc = format!(
            r#"{{"benchmarks":[{{"name":"bus/steady/one_subscriber","params":{{"backend":"soa"}},
              "metrics":[
                {{"name":"time","unit":"ns","direction":"lower","samples":[96.1,95.7,97.0]}},
                {{"name":"throughput","unit":"elem/s","direction":"higher","value":10340000.0}},
                {{"name":"latency","unit":"ns","direction":"lower","hdr":"{latency}"}}]}}]}}"#
        );
        let suite = parse_kymo_json(doc.as_bytes()).unwrap();
        let bench = &suite.benchmarks[0];
        assert_eq!(bench.key(), "bus/steady/one_subscriber{backend=soa}");
        let [time, throughput, hdr] = &bench.metrics[..] else {
            panic!("three metrics")
        };
        assert_eq!((time.value, time.samples.len()), (96.1, 3));
        assert_eq!(throughput.value, 10_340_000.0);
        assert_eq!(hdr.value, 870.0);
        assert_eq!(hdr.hdr.as_deref(), Some(latency.as_str()));
    }

    #[test]
    fn golden_documents() {
        let parsed = parse_kymo_json(include_bytes!("../../tests/data/kymo/bus_steady.json"));
        let expected = include_str!("../../tests/data/kymo/bus_steady.expected.json");
        assert_eq!(parsed.unwrap(), serde_json::from_str(expected).unwrap());
        let nan = parse_kymo_json(include_bytes!("../../tests/data/kymo/python_nan.json"));
        assert_eq!(
            nan.unwrap_err().to_string(),
            "benchmarks[0].metrics[1].samples[1] (line 3, column 77): \
             NaN is not a JSON number; values must be finite"
        );
        let latin1 = parse_kymo_json(include_bytes!("../../tests/data/kymo/latin1.json"));
        assert_eq!(
            latin1.unwrap_err().to_string(),
            "the document is not UTF-8: invalid byte at line 3, column 16"
        );
        let twice = include_bytes!("../../tests/data/kymo/duplicate_identity.json");
        assert_eq!(
            parse_kymo_json(twice).unwrap_err().to_string(),
            "benchmarks[2] (\"log/read/sealed{segment_bytes=1048576}\"): \
             has the same name and params as benchmarks[0]"
        );
    }

    #[test]
    fn golden_refusals_name_their_place() {
        let cases = include_str!("../../tests/data/kymo/refusals.txt");
        let mut checked = 0;
        for case in cases.split("\n\n") {
            let lines: Vec<&str> = case.lines().filter(|l| !l.starts_with('#')).collect();
            let [doc, expected] = lines[..] else {
                panic!("a document and a message: {case}")
            };
            assert_eq!(refused(doc), expected, "for {doc}");
            checked += 1;
        }
        assert!(checked > 30, "{checked}");
    }

    #[test]
    fn value_comes_first_then_samples_then_hdr() {
        let hdr = hdr_of(&[5, 6, 7]);
        let value_of = |fields: String| {
            let suite = parse_kymo_json(with_metrics(&[metric("t", &fields)]).as_bytes());
            suite.unwrap().benchmarks[0].metrics[0].value
        };
        assert_eq!(
            value_of(format!(r#""value":2.25,"samples":[1,2,3],"hdr":"{hdr}""#)),
            2.25
        );
        assert_eq!(
            value_of(format!(r#""samples":[1,4,2,3],"hdr":"{hdr}""#)),
            2.5
        );
        assert_eq!(value_of(format!(r#""samples":[],"hdr":"{hdr}""#)), 6.0);
    }

    #[test]
    fn params_keep_their_canonical_text() {
        let doc = format!(
            r#"{{"benchmarks":[{{"name":"b","metrics":[{}],
               "params":{{"n":64,"f":64.0,"r":0.5,"on":true,"s":"x"}}}}]}}"#,
            metric("t", r#""value":1"#)
        );
        let params = &parse_kymo_json(doc.as_bytes()).unwrap().benchmarks[0].params;
        let text: Vec<_> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(text, ["f=64", "n=64", "on=true", "r=0.5", "s=x"]);
    }

    #[test]
    fn refuses_oversized_documents() {
        let big = vec![b' '; MAX_DOCUMENT_BYTES + 1];
        assert_eq!(
            parse_kymo_json(&big).unwrap_err().to_string(),
            "the document is 33554433 bytes; at most 33554432 bytes are accepted"
        );
    }

    #[test]
    fn refuses_nesting_deeper_than_the_limit_without_overflowing_the_stack() {
        let deep = format!(r#"{{"benchmarks":[{{"extra":{}"#, "[".repeat(100));
        let message = refused(&deep);
        assert!(message.starts_with("benchmarks[0].extra[0][0]"));
        assert!(
            message.ends_with("… (line 1, column 86): nested deeper than 64 levels"),
            "{message}"
        );
        let hostile = "[".repeat(MAX_DOCUMENT_BYTES);
        assert!(refused(&hostile).ends_with("nested deeper than 64 levels"));
        // Brackets inside strings do not nest.
        let note = "[{\\\"".repeat(90);
        let quoted = metric("t", &format!(r#""value":1,"note":"{note}""#));
        assert!(parse_kymo_json(with_metrics(&[quoted]).as_bytes()).is_ok());
    }

    #[test]
    fn refuses_too_many_benchmarks_metrics_and_samples() {
        let one = r#"{"name":"b","metrics":[]}"#;
        let many = format!(
            r#"{{"benchmarks":[{}]}}"#,
            vec![one; MAX_BENCHMARKS + 1].join(",")
        );
        assert_eq!(
            refused(&many),
            "benchmarks: holds 10001 benchmarks; at most 10000 are accepted"
        );
        let metrics: Vec<String> = (0..=MAX_METRICS_PER_BENCHMARK)
            .map(|i| metric(&format!("m{i}"), r#""value":1"#))
            .collect();
        assert_eq!(
            refused(&with_metrics(&metrics)),
            r#"benchmarks[0] ("b"): has 65 metrics; at most 64 are accepted"#
        );
        let samples = |n| metric("t", &format!(r#""samples":[{}]"#, vec!["1"; n].join(",")));
        assert!(
            parse_kymo_json(with_metrics(&[samples(MAX_SAMPLES_PER_METRIC)]).as_bytes()).is_ok()
        );
        assert_eq!(
            refused(&with_metrics(&[samples(MAX_SAMPLES_PER_METRIC + 1)])),
            r#"benchmarks[0].metrics[0] ("t"): has 100001 samples; at most 100000 are accepted"#
        );
    }

    #[test]
    fn refuses_hostile_strings_without_echoing_them() {
        let long = "x".repeat(10_000);
        let name = format!(r#"{{"benchmarks":[{{"name":"{long}\u0000"}}]}}"#);
        assert_eq!(
            refused(&name),
            "benchmarks[0]: name is 10001 bytes; at most 200 are accepted"
        );
        let direction = metric("t", "\"value\":1").replace("lower", &"y".repeat(10_000));
        let message = refused(&with_metrics(&[direction]));
        assert!(
            message.ends_with(r#"yyy"…; it must be "lower" or "higher""#),
            "{message}"
        );
        let value = metric("t", &format!(r#""value":"{}""#, "x".repeat(100_000)));
        let message = refused(&with_metrics(&[value]));
        assert!(message.len() < 500 && message.ends_with('…'), "{message}");
    }

    #[test]
    fn negative_durations_are_refused_where_they_are() {
        let doc = with_metrics(&[metric("time", r#""samples":[3.0,-1.0]"#)]);
        let err = refused(&doc);
        assert!(err.contains("cannot be negative"), "{err}");
        let change = r#"{"name":"delta","unit":"%","direction":"lower","value":-3.5}"#;
        assert!(parse_kymo_json(with_metrics(&[change.into()]).as_bytes()).is_ok());
    }
}
