//! Bencher Metric Format (BMF) JSON: `{"benchmark": {"measure": {"value": 88.0,
//! "lower_value": 87.4, "upper_value": 88.9}}}`.
//!
//! BMF carries no units or directions: Bencher keeps them with each measure on its server. Its
//! built-in measures map to kymo's as
//!
//! | measure | unit | direction |
//! |---|---|---|
//! | `latency` | `ns` | lower |
//! | `throughput` | `ops/s` | higher |
//! | `build-time` | `s` | lower |
//! | `file-size` | `B` | lower |
//!
//! and these cannot be negative. Any other measure keeps its name, has no unit, and is
//! higher-is-better only when its name says it is a rate (`throughput` in it, or ending in
//! `/s` or `per-second`/`per_second`); otherwise lower. The optional bounds are read (they must
//! be numbers) and dropped: BMF has no samples, and kymo's statistics do not use a tool's
//! interval.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::input::{Entries, Found, Object, finish, from_json, invalid, metric, scaled, shown};
use super::kymo::{FormatError, MAX_BENCHMARKS, MAX_METRICS_PER_BENCHMARK};
use crate::model::Direction;
use crate::results::{BenchmarkResult, SuiteResults};

type RawDocument =
    Entries<Object<Entries<Object<RawMetric>, MAX_METRICS_PER_BENCHMARK>>, MAX_BENCHMARKS>;

#[derive(Deserialize)]
struct RawMetric {
    value: f64,
    #[expect(dead_code, reason = "read to check its type; kymo keeps no bounds")]
    lower_value: Option<f64>,
    #[expect(dead_code, reason = "read to check its type; kymo keeps no bounds")]
    upper_value: Option<f64>,
}

/// Parses a BMF JSON document.
pub fn parse_bmf(bytes: &[u8]) -> Result<SuiteResults, FormatError> {
    let Entries(benchmarks) = from_json::<RawDocument>(bytes)?;
    let mut found = Vec::with_capacity(benchmarks.len());
    for (name, Object(Entries(measures))) in benchmarks {
        let place = format!("[{}]", shown(&name));
        if measures.is_empty() {
            return Err(invalid(place, "has no measures"));
        }
        let mut metrics = Vec::with_capacity(measures.len());
        for (measure, Object(raw)) in measures {
            let (unit, direction, known) = unit_and_direction(&measure);
            let value = if known {
                let place = format!("{place}.{}", shown(&measure));
                scaled(&place, "value", raw.value, 1.0)?
            } else {
                raw.value
            };
            metrics.push(metric(&measure, unit, direction, value, Vec::new()));
        }
        let benchmark = BenchmarkResult {
            name,
            params: BTreeMap::new(),
            metrics,
        };
        found.push(Found { place, benchmark });
    }
    finish(found)
}

/// The unit and direction of a measure, and whether it is one of Bencher's built-in ones.
fn unit_and_direction(measure: &str) -> (&'static str, Direction, bool) {
    match measure {
        "latency" => ("ns", Direction::Lower, true),
        "throughput" => ("ops/s", Direction::Higher, true),
        "build-time" => ("s", Direction::Lower, true),
        "file-size" => ("B", Direction::Lower, true),
        _ => {
            let lower = measure.to_lowercase();
            let rate = lower.contains("throughput")
                || lower.ends_with("/s")
                || lower.ends_with("per-second")
                || lower.ends_with("per_second");
            let direction = if rate {
                Direction::Higher
            } else {
                Direction::Lower
            };
            ("", direction, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::assert_valid;

    fn refused(doc: &str) -> String {
        parse_bmf(doc.as_bytes()).unwrap_err().to_string()
    }

    /// Written from Bencher's BMF reference (no Bencher CLI runs here): see regenerate.sh.
    const GOLDEN: &[u8] = include_bytes!("../../tests/data/bmf/documented.json");

    #[test]
    fn golden_document_from_the_bmf_reference() {
        let suite = parse_bmf(GOLDEN).unwrap();
        assert_valid(&suite);
        let names: Vec<_> = suite.benchmarks.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "bench_fib_10",
                "bench_fib_20",
                "/bin/sh -c ./my_build_script.sh",
                "my_binary"
            ]
        );
        let metrics: Vec<_> = (suite.benchmarks.iter().flat_map(|b| &b.metrics))
            .map(|m| (m.name.as_str(), m.unit.as_str(), m.direction, m.value))
            .collect();
        assert_eq!(
            metrics,
            [
                ("latency", "ns", Direction::Lower, 88.0),
                ("latency", "ns", Direction::Lower, 1216.0),
                ("throughput", "ops/s", Direction::Higher, 822_368.0),
                ("build-time", "s", Direction::Lower, 87.0),
                ("file-size", "B", Direction::Lower, 42.0),
                ("instructions", "", Direction::Lower, 4013.0),
            ]
        );
        assert!(
            suite
                .benchmarks
                .iter()
                .flat_map(|b| &b.metrics)
                .all(|m| m.samples.is_empty())
        );
    }

    #[test]
    fn custom_measures_guess_their_direction_from_their_name() {
        let doc = r#"{"b":{"Requests-Per-Second":{"value":5},"rx/s":{"value":1},
            "p99 throughput":{"value":2},"score-delta":{"value":-3}}}"#;
        let suite = parse_bmf(doc.as_bytes()).unwrap();
        assert_valid(&suite);
        let directions: Vec<_> = suite.benchmarks[0]
            .metrics
            .iter()
            .map(|m| m.direction)
            .collect();
        let higher = Direction::Higher;
        assert_eq!(directions, [higher, higher, higher, Direction::Lower]);
        assert_eq!(suite.benchmarks[0].metrics[3].value, -3.0);
    }

    #[test]
    fn malformed_documents_name_their_place() {
        let cases = [
            ("{}", "the output: no benchmark results found"),
            (
                "[]",
                "the document (line 1, column 0): invalid type: sequence, expected an object",
            ),
            (r#"{"b":{}}"#, "[\"b\"]: has no measures"),
            (
                r#"{"b":{"latency":{}}}"#,
                "b.latency (line 1, column 18): missing field `value`",
            ),
            (
                r#"{"b":{"latency":{"value":"1"}}}"#,
                "b.latency.value (line 1, column 28): invalid type: string \"1\", expected f64",
            ),
            (
                r#"{"b":{"latency":{"value":1,"lower_value":"0"}}}"#,
                "b.latency.lower_value (line 1, column 44): invalid type: string \"0\", \
                 expected f64",
            ),
            (
                r#"{"b":{"latency":{"value":-1}}}"#,
                "[\"b\"].\"latency\": value is -1; it must be a finite number, not negative",
            ),
            (
                r#"{"b":{"latency":{"value":NaN}}}"#,
                "b.latency.value (line 1, column 26): NaN is not a JSON number; \
                 values must be finite",
            ),
            (
                r#"{"b.x":{"latency":{"value":1}},"b.x":{}}"#,
                "[\"b.x\"] (line 1, column 36): the key \"b.x\" appears twice",
            ),
            (
                r#"{"b":{"latency":{"value":1}}"#,
                "b (line 1, column 28): not valid JSON: EOF while parsing an object",
            ),
            (
                r#"{"b":{"latency":[1]}}"#,
                "b.latency (line 1, column 16): invalid type: sequence, expected an object",
            ),
        ];
        for (doc, expected) in cases {
            assert_eq!(refused(doc), expected, "for {doc}");
        }
    }

    #[test]
    fn hostile_documents_are_refused_early() {
        let deep = format!(r#"{{"b":{{"latency":{{"value":1,"x":{}"#, "[".repeat(100));
        assert!(refused(&deep).ends_with("nested deeper than 64 levels"));
        let measures: Vec<_> = (0..=MAX_METRICS_PER_BENCHMARK)
            .map(|i| format!(r#""m{i}":{{"value":1}}"#))
            .collect();
        let message = refused(&format!(r#"{{"b":{{{}}}}}"#, measures.join(",")));
        assert_eq!(
            message,
            "b (line 1, column 1166): the object holds 65 entries; at most 64 are accepted"
        );
        let long = format!(
            r#"{{"{}":{{"latency":{{"value":1}}}}}}"#,
            "n".repeat(1 << 20)
        );
        let message = refused(&long);
        assert!(
            message.len() < 400 && message.contains("at most 200"),
            "{message}"
        );
        let control = refused(r#"{"a\u0000b":{"latency":{"value":1}}}"#);
        assert!(
            control.ends_with("contains the control character U+0000"),
            "{control}"
        );
    }
}
