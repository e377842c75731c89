//! gungraun's (formerly iai-callgrind) machine-readable summaries: `cargo bench --
//! --output-format=json` prints one JSON summary per benchmark, one per line.
//!
//! The name is the benchmark's `module_path` (`sums::sums::bench_sum`) and its `#[bench::id]`,
//! when it has one, the `id` parameter, so that `#[bench::short(100)]` and `#[bench::long(..)]`
//! are two benchmarks. From each callgrind (or cachegrind) profile's total, `Ir` becomes
//! `instructions` (unit `instructions`, lower is better, as kymo's own counts) and
//! `EstimatedCycles` becomes `estimated_cycles` (unit `cycles`); only the `new` values are read,
//! since kymo keeps its own history. Profiles of other tools (DHAT, memcheck, perf) are skipped;
//! a summary with no instruction count is refused. Read against summaries of gungraun 0.20
//! (schema version 7), recorded in `core/tests/data/gungraun/`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::input::{Entries, Found, List, Object, finish, invalid, metric, scaled, shown, text_of};
use super::json_place::{PathStyle, from_json_text};
use super::kymo::{FormatError, MAX_BENCHMARKS, MAX_METRICS_PER_BENCHMARK};
use crate::model::Direction;
use crate::results::{BenchmarkResult, SuiteResults};

/// Profiles of one benchmark: one per tool it ran under.
const MAX_PROFILES: usize = 16;

#[derive(Deserialize)]
struct RawSummary {
    module_path: String,
    id: Option<String>,
    profiles: List<Object<RawProfile>, MAX_PROFILES>,
}

#[derive(Deserialize)]
struct RawProfile {
    tool: String,
    data: Object<RawData>,
}

#[derive(Deserialize)]
struct RawData {
    total: Object<RawTotal>,
}

#[derive(Deserialize)]
struct RawTotal {
    metrics: Entries<Object<RawMetric>, MAX_METRICS_PER_BENCHMARK>,
}

#[derive(Deserialize)]
struct RawMetric {
    values: Object<RawValues>,
}

#[derive(Deserialize)]
struct RawValues {
    new: Option<f64>,
}

/// gungraun's event names that kymo stores, with kymo's name and unit for each.
const KEPT: [(&str, &str, &str); 2] = [
    ("Ir", "instructions", "instructions"),
    ("EstimatedCycles", "estimated_cycles", "cycles"),
];

/// Parses gungraun's `--output-format=json` output: one summary per line.
pub fn parse_gungraun(bytes: &[u8]) -> Result<SuiteResults, FormatError> {
    let text = text_of(bytes)?;
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let number = index + 1;
        if found.len() == MAX_BENCHMARKS {
            let reason = format!("more than {MAX_BENCHMARKS} benchmarks");
            return Err(invalid(format!("line {number}"), reason));
        }
        let summary = from_json_text::<Object<RawSummary>>(line, PathStyle::Quoted)
            .map_err(|e| on_line(e, number))?
            .0;
        found.push(benchmark(summary, number)?);
    }
    finish(found)
}

/// A document's errors name its line of the output, not line 1 of the one-line document.
fn on_line(error: FormatError, number: usize) -> FormatError {
    match error {
        FormatError::Json {
            place,
            column,
            reason,
            ..
        } => FormatError::Json {
            place,
            line: number,
            column,
            reason,
        },
        other => other,
    }
}

fn benchmark(summary: RawSummary, number: usize) -> Result<Found, FormatError> {
    let place = format!("line {number} ({})", shown(&summary.module_path));
    let mut metrics = Vec::new();
    for Object(profile) in summary.profiles.0 {
        if !matches!(profile.tool.as_str(), "Callgrind" | "Cachegrind") {
            continue;
        }
        let Entries(events) = profile.data.0.total.0.metrics;
        for (event, name, unit) in KEPT {
            let value = events
                .iter()
                .find(|(key, _)| key == event)
                .and_then(|(_, Object(m))| m.values.0.new);
            let Some(value) = value else { continue };
            if metrics
                .iter()
                .any(|m: &crate::results::MetricResult| m.name == name)
            {
                let reason = format!("{event} is reported by more than one profile");
                return Err(invalid(&place, reason));
            }
            let value = scaled(&place, event, value, 1.0)?;
            metrics.push(metric(name, unit, Direction::Lower, value, Vec::new()));
        }
    }
    if !metrics.iter().any(|m| m.name == "instructions") {
        let reason = "no callgrind or cachegrind profile with an Ir (instructions) total";
        return Err(invalid(&place, reason));
    }
    let params: BTreeMap<String, String> = summary
        .id
        .map(|id| BTreeMap::from([("id".to_string(), id)]))
        .unwrap_or_default();
    Ok(Found {
        place,
        benchmark: BenchmarkResult {
            name: summary.module_path,
            params,
            metrics,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::{assert_valid, metric_shapes};

    const FIRST: &[u8] = include_bytes!("../../tests/data/gungraun/first-run.jsonl");
    const SECOND: &[u8] = include_bytes!("../../tests/data/gungraun/second-run.jsonl");

    fn refused(doc: &str) -> String {
        parse_gungraun(doc.as_bytes()).unwrap_err().to_string()
    }

    fn counts(bytes: &[u8]) -> Vec<(String, f64, f64)> {
        let suite = parse_gungraun(bytes).unwrap();
        assert_valid(&suite);
        (suite.benchmarks.iter())
            .map(|b| (b.key(), b.metrics[0].value, b.metrics[1].value))
            .collect()
    }

    #[test]
    fn golden_summaries_of_a_first_and_a_second_run() {
        let suite = parse_gungraun(FIRST).unwrap();
        assert_eq!(
            metric_shapes(&suite.benchmarks[0]),
            [
                ("instructions", "instructions", Direction::Lower, 0),
                ("estimated_cycles", "cycles", Direction::Lower, 0),
            ]
        );
        let key = |id: &str| format!("sums::sums::bench_sum{{id={id}}}");
        assert_eq!(
            counts(FIRST),
            [(key("short"), 23.0, 99.0), (key("long"), 23.0, 99.0)]
        );
        // The second run changed the summed function; its summaries also hold the first run's
        // figures as `old`, which kymo leaves to its own history.
        assert_eq!(
            counts(SECOND),
            [
                (key("short"), 595.0, 739.0),
                (key("long"), 57_520.0, 57_664.0)
            ]
        );
    }

    fn one_summary(ir: &str, tool: &str) -> String {
        format!(
            r#"{{"module_path":"b::f","profiles":[{{"tool":"{tool}","data":{{"total":{{"metrics":{{"Ir":{{"values":{{"new":{ir}}}}}}}}}}}}}]}}"#
        )
    }

    #[test]
    fn a_minimal_summary_parses_and_blank_lines_are_skipped() {
        let doc = format!("\n{}\n\n", one_summary("12", "Cachegrind"));
        let suite = parse_gungraun(doc.as_bytes()).unwrap();
        assert_eq!(suite.benchmarks[0].key(), "b::f");
        assert_eq!(suite.benchmarks[0].metrics[0].value, 12.0);
    }

    #[test]
    fn malformed_summaries_are_refused_with_their_line() {
        let good = one_summary("12", "Callgrind");
        let cases = [
            (format!("{good}\n{{\"module_path\": 3}}"), "line 2"),
            (format!("{good}\nnot json"), "line 2"),
            (one_summary("-1", "Callgrind"), "Ir is -1"),
            (one_summary("12", "DHAT"), "no callgrind"),
            (good.replace("\"Ir\"", "\"Dr\""), "no callgrind"),
            (format!("{good}\n{good}"), "already found"),
            (good.replace(r#""module_path":"b::f","#, ""), "module_path"),
            (String::from("[]"), "line 1"),
        ];
        for (doc, expected) in cases {
            let error = refused(&doc);
            assert!(error.contains(expected), "{doc}: {error}");
        }
        assert_eq!(refused("\n  \n"), "the output: no benchmark results found");
    }

    #[test]
    fn hostile_input_is_refused_cleanly() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            parse_gungraun(deep.as_bytes()),
            Err(FormatError::Json { .. })
        ));
        let profile = r#"{"tool":"Callgrind","data":{"total":{"metrics":{}}}}"#;
        let many = format!(
            r#"{{"module_path":"b","profiles":[{}]}}"#,
            vec![profile; MAX_PROFILES + 1].join(",")
        );
        assert!(matches!(
            parse_gungraun(many.as_bytes()),
            Err(FormatError::Json { .. })
        ));
        let long = one_summary("1", "Callgrind").replace("b::f", &"x".repeat(10_000));
        assert!(parse_gungraun(long.as_bytes()).is_err());
    }
}
