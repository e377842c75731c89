//! Benchmark results as every format parser produces them and as the server stores them.

use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::model::{Direction, Environment};

/// The results of one suite run (one kymo JSON document, or one file of another format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SuiteResults {
    pub benchmarks: Vec<BenchmarkResult>,
}

/// One benchmark: a name, optional parameters that belong to its identity, and its metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BenchmarkResult {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    pub metrics: Vec<MetricResult>,
}

/// One metric of a benchmark. `value` is always set: given directly, or derived (median of
/// `samples`, or the p50 of `hdr`). `samples` keeps the raw samples statistics need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
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

impl MetricResult {
    /// A wall time in nanoseconds, lower is better: the metric that tests, benches and
    /// examples build by hand.
    pub fn time_ns(value: f64, samples: Vec<f64>) -> Self {
        MetricResult {
            name: "time".into(),
            unit: "ns".into(),
            direction: Direction::Lower,
            value,
            samples,
            hdr: None,
        }
    }
}

impl BenchmarkResult {
    /// The benchmark's identity as one string: `name` alone, or `name{k=v,k2=v2}` with the
    /// parameters in key order.
    pub fn key(&self) -> String {
        if self.params.is_empty() {
            return self.name.clone();
        }
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{}{{{}}}", self.name, params.join(","))
    }
}

/// Limits on what one run may hold, so that a hostile or broken upload is refused whole.
pub const MAX_MEASUREMENTS_PER_RUN: usize = 1_000_000;
/// Most benchmarks one suite of a run may hold: what every parser accepts from one document,
/// so that an upload through the API holds no more than `kymo upload` or a worker can send.
pub const MAX_BENCHMARKS_PER_SUITE: usize = crate::format::kymo::MAX_BENCHMARKS;
pub const MAX_SAMPLES_PER_METRIC: usize = 100_000;
pub const MAX_HDR_BASE64_BYTES: usize = 1_400_000;

/// Units that measure elapsed time. A negative value in one is a broken measurement (a clock
/// read backwards, a subtraction the wrong way round), never a result to store.
pub fn is_duration_unit(unit: &str) -> bool {
    // Harnesses spell them many ways: `NS`, `nanoseconds`, `Sec`.
    let unit = unit.trim().to_lowercase();
    let singular = unit
        .strip_suffix('s')
        .filter(|u| u.len() > 2)
        .unwrap_or(&unit);
    matches!(
        singular,
        "ps" | "ns"
            | "us"
            | "\u{b5}s"
            | "\u{3bc}s"
            | "ms"
            | "s"
            | "sec"
            | "min"
            | "h"
            | "hr"
            | "picosecond"
            | "nanosecond"
            | "microsecond"
            | "millisecond"
            | "second"
            | "minute"
            | "hour"
    )
}

/// Why a metric in `unit` cannot hold these numbers, when it holds a negative duration.
pub fn negative_duration(unit: &str, value: f64, samples: &[f64]) -> Option<String> {
    let negative = value < 0.0 || samples.iter().any(|s| *s < 0.0);
    (negative && is_duration_unit(unit))
        .then(|| format!("a duration in {unit:?} cannot be negative"))
}

fn check_name(what: &str, name: &str, max: usize) -> Result<(), String> {
    if name.is_empty()
        || name.len() > max
        || name.chars().any(|c| c.is_control() || is_bidi_control(c))
    {
        return Err(format!(
            "{what} {:?} must be 1-{max} bytes without control or text-direction characters",
            name.chars().take(80).collect::<String>()
        ));
    }
    Ok(())
}

/// Characters that reorder the text around them (U+202E turns `evil.exe` shown as `exe.live`):
/// a name shown in pages and alerts must read as it is.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Longest fact of a run's environment (kernel, toolchain, governor, hostname).
pub const MAX_ENVIRONMENT_FIELD_BYTES: usize = 256;

/// Checks the environment a run records: short facts without control characters, so that an
/// upload cannot store megabytes of text beside its results.
pub fn validate_environment(env: &Environment) -> Result<(), String> {
    let facts = [
        ("kernel", &env.kernel),
        ("toolchain", &env.toolchain),
        ("governor", &env.governor),
        ("hostname", &env.hostname),
    ];
    for (what, text) in facts {
        if text.len() > MAX_ENVIRONMENT_FIELD_BYTES || text.chars().any(char::is_control) {
            return Err(format!(
                "environment {what} must be at most {MAX_ENVIRONMENT_FIELD_BYTES} bytes without control characters"
            ));
        }
    }
    Ok(())
}

/// Checks every suite of a run before anything is stored: names, sizes, finite numbers, and
/// that no benchmark × metric appears twice (it would be two values for one point).
pub fn validate_suites(suites: &[crate::protocol::SuiteUpload]) -> Result<(), String> {
    if suites.is_empty() {
        return Err("a run must hold at least one suite".into());
    }
    // The (benchmark, metric) pairs seen: the benchmark's key shared by its metrics.
    let mut seen: HashSet<(Rc<str>, &str)> = HashSet::new();
    for suite in suites {
        check_name("suite name", &suite.suite, 64)?;
        if suite.results.benchmarks.is_empty() {
            return Err(format!("suite {:?} has no benchmarks", suite.suite));
        }
        if suite.results.benchmarks.len() > MAX_BENCHMARKS_PER_SUITE {
            return Err(format!(
                "suite {:?} holds {} benchmarks; at most {MAX_BENCHMARKS_PER_SUITE} are accepted",
                suite.suite,
                suite.results.benchmarks.len()
            ));
        }
        for bench in &suite.results.benchmarks {
            check_name("benchmark name", &bench.name, 200)?;
            // Its page is /benchmarks/NAME. Links encode the slashes of a name with a `.` or
            // `..` part, but a name that is only `.` or `..` reads as one to every browser.
            if bench.name == "." || bench.name == ".." {
                return Err(format!(
                    "benchmark name {:?} names a directory, not a benchmark",
                    bench.name
                ));
            }
            for (k, v) in &bench.params {
                check_name("parameter name", k, 64)?;
                check_name("parameter value", v, 200)?;
            }
            let key: Rc<str> = bench.key().into();
            if bench.metrics.is_empty() || bench.metrics.len() > 64 {
                return Err(format!("benchmark {key:?} must have 1-64 metrics"));
            }
            for metric in &bench.metrics {
                // Spelled only for an error: formatting it for every metric was a sixth of ingest.
                let place = || format!("benchmark {key:?} metric {:?}", metric.name);
                check_name("metric name", &metric.name, 64)?;
                if metric.unit.len() > 32 || metric.unit.chars().any(char::is_control) {
                    return Err(format!("{}: unit must be at most 32 bytes", place()));
                }
                if !metric.value.is_finite() {
                    return Err(format!("{}: value must be a finite number", place()));
                }
                if let Some(reason) = negative_duration(&metric.unit, metric.value, &metric.samples)
                {
                    return Err(format!("{}: {reason}", place()));
                }
                if metric.samples.len() > MAX_SAMPLES_PER_METRIC {
                    return Err(format!(
                        "{}: {} samples; at most {MAX_SAMPLES_PER_METRIC} are kept",
                        place(),
                        metric.samples.len()
                    ));
                }
                if metric.samples.iter().any(|s| !s.is_finite()) {
                    return Err(format!("{}: every sample must be a finite number", place()));
                }
                if let Some(hdr) = &metric.hdr {
                    if hdr.len() > MAX_HDR_BASE64_BYTES {
                        return Err(format!("{}: hdr histogram is too large", place()));
                    }
                    // Stored, it would be decoded only when a page shows it: decode it now.
                    crate::format::hdr::hdr_percentiles(hdr).map_err(|e| {
                        format!("{}: hdr is not a base64 HdrHistogram V2: {e}", place())
                    })?;
                }
                if !seen.insert((Rc::clone(&key), &metric.name)) {
                    return Err(format!("{} appears twice in one run", place()));
                }
                if seen.len() > MAX_MEASUREMENTS_PER_RUN {
                    return Err(format!(
                        "a run may hold at most {MAX_MEASUREMENTS_PER_RUN} measurements"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The median of a non-empty slice of finite numbers.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// The first and third quartiles of a non-empty slice of finite numbers (linear interpolation
/// between order statistics): the middle half of a run's samples, which a few slow samples
/// under load do not stretch the way they stretch the minimum and maximum.
pub fn quartiles(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let rank = q * (sorted.len() - 1) as f64;
        let (below, fraction) = (rank.floor() as usize, rank.fract());
        let above = (below + 1).min(sorted.len() - 1);
        sorted[below] + (sorted[above] - sorted[below]) * fraction
    };
    Some((at(0.25), at(0.75)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quartiles_ignore_a_slow_tail() {
        assert_eq!(quartiles(&[]), None);
        assert_eq!(quartiles(&[7.0]), Some((7.0, 7.0)));
        assert_eq!(quartiles(&[1.0, 2.0, 3.0, 4.0, 5.0]), Some((2.0, 4.0)));
        let (q1, q3) = quartiles(&[42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 420.0]).unwrap();
        assert!(
            (43.0..=44.0).contains(&q1) && (46.0..=48.0).contains(&q3),
            "{q1} {q3}"
        );
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    fn upload(value: f64) -> Vec<crate::protocol::SuiteUpload> {
        vec![crate::protocol::SuiteUpload {
            suite: "s".into(),
            results: SuiteResults {
                benchmarks: vec![BenchmarkResult {
                    name: "b".into(),
                    params: BTreeMap::new(),
                    metrics: vec![MetricResult::time_ns(value, vec![value])],
                }],
            },
        }]
    }

    #[test]
    fn validation_refuses_non_finite_values_and_duplicates() {
        assert!(validate_suites(&upload(1.0)).is_ok());
        assert!(validate_suites(&upload(f64::NAN)).is_err());
        assert!(validate_suites(&upload(f64::INFINITY)).is_err());
        assert!(validate_suites(&[]).is_err());
        let mut twice = upload(1.0);
        twice.push(twice[0].clone());
        let err = validate_suites(&twice).unwrap_err();
        assert!(err.contains("appears twice"), "{err}");
        let mut bad_name = upload(1.0);
        bad_name[0].results.benchmarks[0].name = "a\u{0}b".into();
        assert!(validate_suites(&bad_name).is_err());
    }

    #[test]
    fn a_suite_holds_at_most_as_many_benchmarks_as_a_parser_accepts() {
        let mut full = upload(1.0);
        let one = full[0].results.benchmarks[0].clone();
        full[0].results.benchmarks = (0..MAX_BENCHMARKS_PER_SUITE)
            .map(|i| BenchmarkResult {
                name: format!("b{i}"),
                ..one.clone()
            })
            .collect();
        assert!(validate_suites(&full).is_ok());
        let mut over = full.clone();
        over[0].results.benchmarks.push(BenchmarkResult {
            name: "one more".into(),
            ..one
        });
        let err = validate_suites(&over).unwrap_err();
        assert!(err.contains("10001 benchmarks; at most 10000"), "{err}");
        // Split in two suites, the same benchmarks are two documents' worth, and accepted.
        let mut split = over.clone();
        let second = split[0].results.benchmarks.split_off(5_000);
        split.push(crate::protocol::SuiteUpload {
            suite: "second".into(),
            results: SuiteResults { benchmarks: second },
        });
        assert!(validate_suites(&split).is_ok());
    }

    #[test]
    fn environment_facts_are_short_single_lines() {
        let mut env = Environment::default();
        assert!(validate_environment(&env).is_ok());
        env.kernel = "k".repeat(MAX_ENVIRONMENT_FIELD_BYTES + 1);
        assert!(validate_environment(&env).unwrap_err().contains("kernel"));
        env.kernel = "6.1".into();
        env.hostname = "a\nb".into();
        assert!(validate_environment(&env).unwrap_err().contains("hostname"));
    }

    #[test]
    fn negative_durations_are_refused_but_other_negative_metrics_are_not() {
        let err = validate_suites(&upload(-1.0)).unwrap_err();
        assert!(err.contains("cannot be negative"), "{err}");
        let mut sample = upload(1.0);
        sample[0].results.benchmarks[0].metrics[0].samples = vec![1.0, -0.5];
        assert!(validate_suites(&sample).is_err());
        let mut delta = upload(-1.0);
        delta[0].results.benchmarks[0].metrics[0].unit = "%".into();
        assert!(
            validate_suites(&delta).is_ok(),
            "a change in % may be negative"
        );
    }

    #[test]
    fn durations_are_known_however_their_unit_is_spelled() {
        for unit in [
            "ns",
            "NS",
            "nanoseconds",
            "Nanosecond",
            " ms ",
            "Sec",
            "seconds",
            "µs",
        ] {
            assert!(is_duration_unit(unit), "{unit:?}");
            let mut upload = upload(-5.0);
            upload[0].results.benchmarks[0].metrics[0].unit = unit.into();
            assert!(
                validate_suites(&upload).is_err(),
                "-5 {unit:?} was accepted"
            );
        }
        for unit in ["%", "B/s", "ops", "instructions", "x", "bytes"] {
            assert!(!is_duration_unit(unit), "{unit:?}");
        }
    }

    #[test]
    fn names_with_text_direction_characters_and_broken_histograms_are_refused() {
        let mut named = upload(1.0);
        named[0].results.benchmarks[0].name = "parse/\u{202e}exe.live".into();
        assert!(
            validate_suites(&named)
                .unwrap_err()
                .contains("text-direction")
        );
        for dots in ["..", "."] {
            let mut dotted = upload(1.0);
            dotted[0].results.benchmarks[0].name = dots.into();
            let err = validate_suites(&dotted).unwrap_err();
            assert!(err.contains("directory"), "{dots}: {err}");
        }
        let mut dotted = upload(1.0);
        dotted[0].results.benchmarks[0].name = "a/../b".into();
        assert!(
            validate_suites(&dotted).is_ok(),
            "its link encodes the slashes"
        );
        let mut broken = upload(1.0);
        broken[0].results.benchmarks[0].metrics[0].hdr = Some("not base64 at all!".into());
        assert!(validate_suites(&broken).unwrap_err().contains("hdr"));
    }

    #[test]
    fn key_includes_params_in_order() {
        let b = BenchmarkResult {
            name: "bus/steady".into(),
            params: [
                ("z".to_string(), "1".to_string()),
                ("a".to_string(), "x".to_string()),
            ]
            .into_iter()
            .collect(),
            metrics: vec![],
        };
        assert_eq!(b.key(), "bus/steady{a=x,z=1}");
    }
}
