//! `go test -bench` text: one line per run of a benchmark,
//! `BenchmarkCopy/size=64-8   2000   69.83 ns/op   916.46 MB/s   64 B/op   1 allocs/op`.
//!
//! The `-8` GOMAXPROCS suffix becomes the `procs` parameter and the `pkg:` line before a
//! benchmark its `pkg` parameter, so that `go test ./...` over packages with equally named
//! benchmarks keeps them apart. The lines of one benchmark (`-count N`) are its samples; each
//! metric's value is their median. Units map as `ns/op` → `time` ns, `B/op` → `alloc_bytes` B,
//! `allocs/op` → `allocs`, `MB/s` → `throughput` B/s (Go's MB are 10^6 bytes); a custom unit
//! from `b.ReportMetric` keeps its unit as its name, higher-is-better when it ends in `/s`.
//! Lines that are not results (configuration, `PASS`, log output) are skipped; a line with a
//! benchmark name and an iteration count that does not parse is refused.

use std::collections::{BTreeMap, HashMap};

use super::input::{Found, finish, invalid, metric, scaled, shown, text_of};
use super::kymo::{FormatError, MAX_BENCHMARKS};
use crate::model::Direction;
use crate::results::{BenchmarkResult, MAX_SAMPLES_PER_METRIC, SuiteResults, median};

/// A benchmark being collected: its first line, identity and each unit's samples in order.
struct Collected {
    place: String,
    name: String,
    params: BTreeMap<String, String>,
    units: Vec<(String, Vec<f64>)>,
}

/// Parses the stdout of `go test -bench` (with or without `-benchmem` and `-count`).
pub fn parse_go_bench(bytes: &[u8]) -> Result<SuiteResults, FormatError> {
    let text = text_of(bytes)?;
    let mut collected: Vec<Collected> = Vec::new();
    // By package, name and GOMAXPROCS: the benchmark's identity.
    let mut index_of: HashMap<(Option<&str>, &str, Option<&str>), usize> = HashMap::new();
    let mut pkg: Option<&str> = None;
    for (index, line) in text.lines().enumerate() {
        let place = format!("line {}", index + 1);
        if let Some(value) = line.strip_prefix("pkg:") {
            pkg = Some(value.trim());
            continue;
        }
        let Some((full_name, fields)) = result_line(line) else {
            continue;
        };
        let pairs = measurements(fields)
            .map_err(|reason| invalid(&place, format!("{reason} in {}", shown(line))))?;
        let (name, procs) = split_procs(full_name);
        let pkg = pkg.filter(|p| !p.is_empty());
        let at = match index_of.get(&(pkg, name, procs)) {
            Some(&at) => at,
            None if collected.len() == MAX_BENCHMARKS => {
                let reason = format!("more than {MAX_BENCHMARKS} benchmarks");
                return Err(invalid(place, reason));
            }
            None => {
                index_of.insert((pkg, name, procs), collected.len());
                let mut params = BTreeMap::new();
                if let Some(pkg) = pkg {
                    params.insert("pkg".to_string(), pkg.to_string());
                }
                if let Some(procs) = procs {
                    params.insert("procs".to_string(), procs.to_string());
                }
                collected.push(Collected {
                    place: place.clone(),
                    name: name.to_string(),
                    params,
                    units: Vec::new(),
                });
                collected.len() - 1
            }
        };
        let units = &mut collected[at].units;
        for (value, unit) in pairs {
            // A custom metric may be a signed difference; the standard ones cannot be negative.
            let (_, _, _, scale) = metric_of(unit);
            let value = if is_standard(unit) {
                scaled(&place, unit, value, scale)?
            } else {
                value * scale
            };
            let samples = match units.iter().position(|(u, _)| u == unit) {
                Some(i) => &mut units[i].1,
                None => {
                    units.push((unit.to_string(), Vec::new()));
                    &mut units.last_mut().expect("just pushed").1
                }
            };
            if samples.len() == MAX_SAMPLES_PER_METRIC {
                let reason = format!("more than {MAX_SAMPLES_PER_METRIC} samples of {unit}");
                return Err(invalid(place, reason));
            }
            samples.push(value);
        }
    }
    finish(collected.into_iter().map(into_benchmark).collect())
}

/// The benchmark name and the fields after the iteration count, for a result line.
fn result_line(line: &str) -> Option<(&str, Vec<&str>)> {
    let mut fields = line.split_whitespace();
    let name = fields.next()?;
    let rest = name.strip_prefix("Benchmark")?;
    // `Benchmarking...` is prose; Go requires the name not to go on in lower case.
    if rest.starts_with(|c: char| c.is_lowercase()) {
        return None;
    }
    // A benchmark's own output can follow its name on the same line: without an iteration
    // count this is not a result.
    let iterations = fields.next()?;
    if iterations.is_empty() || !iterations.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, fields.collect()))
}

/// The `value unit` pairs of a result line.
fn measurements(fields: Vec<&str>) -> Result<Vec<(f64, &str)>, String> {
    if fields.is_empty() || !fields.len().is_multiple_of(2) {
        return Err("expected `value unit` pairs after the iteration count".to_string());
    }
    fields
        .chunks(2)
        .map(|pair| {
            let value = pair[0]
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && !pair[0].starts_with(['+', 'i', 'I', 'n', 'N']))
                .ok_or_else(|| format!("{} is not a number", shown(pair[0])))?;
            Ok((value, pair[1]))
        })
        .collect()
}

/// `BenchmarkX/y-8` → (`BenchmarkX/y`, Some("8")); Go adds the suffix when GOMAXPROCS > 1.
fn split_procs(name: &str) -> (&str, Option<&str>) {
    match name.rsplit_once('-') {
        Some((base, procs))
            if !base.is_empty()
                && !procs.is_empty()
                && procs.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (base, Some(procs))
        }
        _ => (name, None),
    }
}

/// Whether Go itself reports `unit` (rather than `b.ReportMetric`).
fn is_standard(unit: &str) -> bool {
    matches!(unit, "ns/op" | "B/op" | "allocs/op" | "MB/s")
}

/// kymo's name, unit, direction and scale for a Go unit.
fn metric_of(unit: &str) -> (&str, &str, Direction, f64) {
    match unit {
        "ns/op" => ("time", "ns", Direction::Lower, 1.0),
        "B/op" => ("alloc_bytes", "B", Direction::Lower, 1.0),
        "allocs/op" => ("allocs", "allocs", Direction::Lower, 1.0),
        "MB/s" => ("throughput", "B/s", Direction::Higher, 1e6),
        _ if unit.ends_with("/s") => (unit, unit, Direction::Higher, 1.0),
        _ => (unit, unit, Direction::Lower, 1.0),
    }
}

fn into_benchmark(collected: Collected) -> Found {
    let place = collected.place;
    let mut metrics = Vec::with_capacity(collected.units.len());
    for (unit, samples) in &collected.units {
        let (name, kymo_unit, direction, _) = metric_of(unit);
        let value = median(samples).expect("a unit is collected with its first sample");
        metrics.push(metric(name, kymo_unit, direction, value, samples.clone()));
    }
    let benchmark = BenchmarkResult {
        name: collected.name,
        params: collected.params,
        metrics,
    };
    Found { place, benchmark }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::{assert_valid, metric_shapes};

    const GOLDEN: &[u8] = include_bytes!("../../tests/data/go-bench/bench.txt");

    fn refused(text: &str) -> String {
        parse_go_bench(text.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn golden_go_test_output() {
        let suite = parse_go_bench(GOLDEN).unwrap();
        assert_valid(&suite);
        let keys: Vec<_> = suite.benchmarks.iter().map(|b| b.key()).collect();
        let pkg = "pkg=kymo.example/golden";
        assert_eq!(
            keys,
            [
                format!("BenchmarkSum{{{pkg}}}"),
                format!("BenchmarkSum{{{pkg},procs=2}}"),
                format!("BenchmarkCopy/size=64{{{pkg}}}"),
                format!("BenchmarkCopy/size=64{{{pkg},procs=2}}"),
                format!("BenchmarkCopy/size=1024{{{pkg}}}"),
                format!("BenchmarkCopy/size=1024{{{pkg},procs=2}}"),
            ]
        );
        let sum = &suite.benchmarks[0];
        let names: Vec<_> = sum.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["time", "alloc_bytes", "allocs"]);
        assert_eq!(sum.metrics[0].samples, [48.54, 62.94, 62.63]);
        assert_eq!(sum.metrics[0].value, 62.63);
        assert_eq!(sum.metrics[0].unit, "ns");
        let copy = &suite.benchmarks[3];
        let units = metric_shapes(copy);
        assert_eq!(
            units,
            [
                ("time", "ns", Direction::Lower, 3),
                ("throughput", "B/s", Direction::Higher, 3),
                ("words/op", "words/op", Direction::Lower, 3),
                ("alloc_bytes", "B", Direction::Lower, 3),
                ("allocs", "allocs", Direction::Lower, 3),
            ]
        );
        assert_eq!(copy.metrics[1].value, 793.79e6);
        assert_eq!(copy.metrics[3].value, 64.0);
    }

    #[test]
    fn log_output_and_prose_are_not_results() {
        let text = "goos: linux\nBenchmarkLogs-2   \thello from the benchmark\n\
                    Benchmarking is fun\n--- BENCH: BenchmarkLogs-2\n    x_test.go:9: log\n\
                    BenchmarkLogs-2   \t 100\t 12.5 ns/op\t 3.0 widgets/s\nPASS\n";
        let suite = parse_go_bench(text.as_bytes()).unwrap();
        assert_valid(&suite);
        let [bench] = &suite.benchmarks[..] else {
            panic!("one benchmark")
        };
        assert_eq!(bench.key(), "BenchmarkLogs{procs=2}");
        assert_eq!(bench.metrics[1].direction, Direction::Higher);
        assert_eq!(bench.metrics[1].name, "widgets/s");
    }

    #[test]
    fn packages_keep_equally_named_benchmarks_apart() {
        let text = "pkg: example/a\nBenchmarkX-2 10 5 ns/op\nok  \texample/a\t0.1s\n\
                    pkg: example/b\nBenchmarkX-2 10 7 ns/op\nBenchmarkX-2 10 9 ns/op\n";
        let suite = parse_go_bench(text.as_bytes()).unwrap();
        assert_valid(&suite);
        let keys: Vec<_> = suite.benchmarks.iter().map(|b| b.key()).collect();
        assert_eq!(
            keys,
            [
                "BenchmarkX{pkg=example/a,procs=2}",
                "BenchmarkX{pkg=example/b,procs=2}"
            ]
        );
        assert_eq!(suite.benchmarks[1].metrics[0].samples, [7.0, 9.0]);
        assert_eq!(suite.benchmarks[1].metrics[0].value, 8.0);
    }

    #[test]
    fn output_without_results_is_refused() {
        for text in [
            "",
            "PASS\nok  \tpkg\t0.1s\n",
            "goos: linux\n",
            "BenchmarkX\n",
        ] {
            assert_eq!(refused(text), "the output: no benchmark results found");
        }
    }

    #[test]
    fn malformed_result_lines_name_their_line() {
        let ok = "BenchmarkA 10 1 ns/op\n";
        let cases = [
            (
                "BenchmarkB 10",
                "expected `value unit` pairs after the iteration count",
            ),
            (
                "BenchmarkB 10 5 ns/op 7",
                "expected `value unit` pairs after the iteration count",
            ),
            ("BenchmarkB 10 NaN ns/op", "\"NaN\" is not a number"),
            ("BenchmarkB 10 inf ns/op", "\"inf\" is not a number"),
            ("BenchmarkB 10 1e999 ns/op", "\"1e999\" is not a number"),
            ("BenchmarkB 10 fast ns/op", "\"fast\" is not a number"),
        ];
        for (line, reason) in cases {
            let message = refused(&format!("{ok}{line}\n"));
            assert_eq!(message, format!("line 2: {reason} in {line:?}"));
        }
        let negative = refused(&format!("{ok}BenchmarkA 10 -4 ns/op\n"));
        assert_eq!(
            negative,
            "line 2: ns/op is -4; it must be a finite number, not negative"
        );
        let signed = parse_go_bench(b"BenchmarkA 10 1 ns/op -2.5 delta/op\n").unwrap();
        assert_eq!(signed.benchmarks[0].metrics[1].value, -2.5);
        let long_unit = format!("BenchmarkB 10 1 {}/op\n", "u".repeat(100));
        assert!(refused(&long_unit).starts_with("line 1: a metric name \"uuu"));
    }

    #[test]
    fn hostile_output_is_refused_without_echoing_it() {
        let huge = format!("BenchmarkA 1 {} ns/op\n", "9".repeat(1 << 20));
        let message = refused(&huge);
        assert!(message.len() < 300, "{message}");
        let many: String = (0..=MAX_BENCHMARKS)
            .map(|i| format!("BenchmarkB{i} 1 1 ns/op\n"))
            .collect();
        assert_eq!(refused(&many), "line 10001: more than 10000 benchmarks");
        let repeats = "BenchmarkA 1 1 ns/op\n".repeat(MAX_SAMPLES_PER_METRIC + 1);
        assert_eq!(
            refused(&repeats),
            "line 100001: more than 100000 samples of ns/op"
        );
    }
}
