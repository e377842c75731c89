//! hyperfine's `--export-json` document: one result per command, with the wall-clock time of
//! every run in seconds.
//!
//! The benchmark name is the command as hyperfine reports it (its `--command-name`, if given),
//! and `--parameter-scan`/`--parameter-list` values become params. `time` keeps every run's
//! time (converted to ns) as samples, its value their median; `user_time` and `system_time`
//! are hyperfine's means, since it keeps no per-run CPU times. Exit codes are not checked:
//! hyperfine itself stops at a failing command unless told to ignore failures.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::input::{Entries, Found, List, Object, finish, from_json, metric, scaled, shown};
use super::kymo::{FormatError, MAX_BENCHMARKS, MAX_PARAMS_PER_BENCHMARK};
use crate::model::Direction;
use crate::results::{BenchmarkResult, MAX_SAMPLES_PER_METRIC, SuiteResults, median};

const NS_PER_SECOND: f64 = 1e9;

#[derive(Deserialize)]
struct RawDocument {
    results: List<Object<RawResult>, MAX_BENCHMARKS>,
}

#[derive(Deserialize)]
struct RawResult {
    command: String,
    mean: f64,
    user: Option<f64>,
    system: Option<f64>,
    times: Option<List<f64, MAX_SAMPLES_PER_METRIC>>,
    parameters: Option<Entries<String, MAX_PARAMS_PER_BENCHMARK>>,
}

/// Parses a hyperfine `--export-json` document.
pub fn parse_hyperfine(bytes: &[u8]) -> Result<SuiteResults, FormatError> {
    let Object(raw) = from_json::<Object<RawDocument>>(bytes)?;
    let mut found = Vec::with_capacity(raw.results.0.len());
    for (index, Object(result)) in raw.results.0.into_iter().enumerate() {
        let place = format!("results[{index}]");
        let seconds = |what: &str, value: f64| scaled(&place, what, value, NS_PER_SECOND);
        let samples = match result.times {
            Some(List(times)) => times
                .into_iter()
                .map(|t| seconds("a time", t))
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        let value = match median(&samples) {
            Some(value) => value,
            None => seconds("mean", result.mean)?,
        };
        let mut metrics = vec![metric("time", "ns", Direction::Lower, value, samples)];
        for (name, mean) in [("user_time", result.user), ("system_time", result.system)] {
            if let Some(mean) = mean {
                let value = seconds(name.trim_end_matches("_time"), mean)?;
                metrics.push(metric(name, "ns", Direction::Lower, value, Vec::new()));
            }
        }
        let params: BTreeMap<String, String> = result
            .parameters
            .map(|Entries(entries)| entries.into_iter().collect())
            .unwrap_or_default();
        let place = format!("{place} ({})", shown(&result.command));
        let benchmark = BenchmarkResult {
            name: result.command,
            params,
            metrics,
        };
        found.push(Found { place, benchmark });
    }
    finish(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::{assert_valid, metric_shapes};

    fn refused(doc: &str) -> String {
        parse_hyperfine(doc.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn golden_commands_with_a_command_name() {
        let doc = include_bytes!("../../tests/data/hyperfine/commands.json");
        let suite = parse_hyperfine(doc).unwrap();
        assert_valid(&suite);
        let names: Vec<_> = suite.benchmarks.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["sleep", "seq 1000"]);
        let sleep = &suite.benchmarks[0];
        let metrics = metric_shapes(sleep);
        assert_eq!(
            metrics,
            [
                ("time", "ns", Direction::Lower, 5),
                ("user_time", "ns", Direction::Lower, 0),
                ("system_time", "ns", Direction::Lower, 0),
            ]
        );
        // hyperfine's own median, 0.01494087478 s.
        assert!((sleep.metrics[0].value - 14_940_874.78).abs() < 1e-3);
        assert!((sleep.metrics[0].samples[3] - 9_007_213.78).abs() < 1e-3);
        assert_eq!(sleep.metrics[2].value, 0.0);
    }

    #[test]
    fn golden_parameter_list() {
        let doc = include_bytes!("../../tests/data/hyperfine/parameters.json");
        let suite = parse_hyperfine(doc).unwrap();
        assert_valid(&suite);
        let keys: Vec<_> = suite.benchmarks.iter().map(|b| b.key()).collect();
        assert_eq!(keys, ["seq 1000{n=1000}", "seq 100000{n=100000}"]);
        assert_eq!(suite.benchmarks[1].metrics[0].samples.len(), 3);
    }

    #[test]
    fn a_result_without_times_keeps_the_mean() {
        let suite = parse_hyperfine(br#"{"results":[{"command":"x","mean":0.5}]}"#).unwrap();
        assert_valid(&suite);
        let time = &suite.benchmarks[0].metrics[0];
        assert_eq!((time.value, time.samples.len()), (5e8, 0));
    }

    #[test]
    fn malformed_documents_name_their_place() {
        let cases = [
            (
                r#"{"results":[]}"#,
                "the output: no benchmark results found",
            ),
            (
                r#"{"results":{}}"#,
                "results (line 1, column 11): invalid type: map, expected a list",
            ),
            (
                r#"{"results":[{"command":"x","mean":"1"}]}"#,
                "results[0].mean (line 1, column 37): invalid type: string \"1\", expected f64",
            ),
            (
                r#"{"results":[{"command":"x","mean":1,"times":[1,NaN]}]}"#,
                "results[0].times[1] (line 1, column 48): NaN is not a JSON number; \
                 values must be finite",
            ),
            (
                r#"{"results":[{"command":"x","mean":1,"times":[0.1,-2]}]}"#,
                "results[0]: a time is -2; it must be a finite number, not negative",
            ),
            (
                r#"{"results":[{"mean":1}]}"#,
                "results[0] (line 1, column 22): missing field `command`",
            ),
            (
                r#"{"results":[["x",1]]}"#,
                "results[0] (line 1, column 12): invalid type: sequence, expected an object",
            ),
            (
                r#"{"results":[{"command":"x","mean":1,"parameters":{"n":1}}]}"#,
                "results[0].parameters.n (line 1, column 55): invalid type: integer `1`, \
                 expected a string",
            ),
            (
                r#"{"results":[{"command":"x","mean":1},{"command":"x","mean":2}]}"#,
                "results[1] (\"x\"): benchmark \"x\" was already found at results[0] (\"x\")",
            ),
            (
                r#"{"results":[{"command":"x","mean":1}"#,
                "results[0] (line 1, column 36): not valid JSON: EOF while parsing a list",
            ),
            (
                "garbage",
                "the document (line 1, column 1): not valid JSON: expected value",
            ),
            (
                r#"{"results":[{"command":"","mean":1}]}"#,
                "results[0] (\"\"): the benchmark name is empty",
            ),
        ];
        for (doc, expected) in cases {
            assert_eq!(refused(doc), expected, "for {doc}");
        }
    }

    #[test]
    fn hostile_documents_are_refused_early() {
        let deep = format!(
            r#"{{"results":[{{"command":"x","mean":1,"x":{}"#,
            "[".repeat(200)
        );
        let message = refused(&deep);
        assert!(
            message.ends_with("nested deeper than 64 levels"),
            "{message}"
        );
        let times = vec!["1"; MAX_SAMPLES_PER_METRIC + 1].join(",");
        let many = format!(r#"{{"results":[{{"command":"x","mean":1,"times":[{times}]}}]}}"#);
        let message = refused(&many);
        assert_eq!(
            message,
            "results[0].times (line 1, column 200047): the list holds 100001 items; \
             at most 100000 are accepted"
        );
        let long = format!(
            r#"{{"results":[{{"command":"x","mean":"{}"}}]}}"#,
            "y".repeat(1 << 20)
        );
        assert!(refused(&long).len() < 500);
        let huge_line = format!(
            r#"{{"results":[{{"command":"{}","mean":1}}]}}"#,
            "z".repeat(1 << 20)
        );
        assert!(refused(&huge_line).contains("is 1048576 bytes; at most 200 are accepted"));
    }
}
