//! libtest's `cargo bench` text: `#[bench]` functions reported one line each, as
//! `test NAME ... bench:   1,234.56 ns/iter (+/- 78.90) = 345 MB/s`.
//!
//! libtest prints one summary per benchmark (the median of its own samples), so `time` has a
//! value and no samples; the `+/-` spread (max − min) is not a sample either, and is dropped.
//! Other lines (`running 5 tests`, `test x ... ignored`, the result line, anything the code
//! printed) are not results and are skipped; a `bench:` line that does not parse is refused.

use std::collections::BTreeMap;

use super::input::{Found, finish, invalid, metric, scaled, shown, text_of};
use super::kymo::{FormatError, MAX_BENCHMARKS};
use crate::model::Direction;
use crate::results::{BenchmarkResult, SuiteResults};

/// Parses the stdout of `cargo bench` for libtest `#[bench]` functions.
pub fn parse_libtest(bytes: &[u8]) -> Result<SuiteResults, FormatError> {
    let text = text_of(bytes)?;
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let place = format!("line {}", index + 1);
        let Some((name, result)) = bench_line(line) else {
            continue;
        };
        if found.len() == MAX_BENCHMARKS {
            let reason = format!("more than {MAX_BENCHMARKS} benchmarks");
            return Err(invalid(place, reason));
        }
        let metrics = parse_result(result).map_err(|reason| {
            invalid(&place, format!("{reason} in the result of {}", shown(name)))
        })?;
        let benchmark = BenchmarkResult {
            name: name.to_string(),
            params: BTreeMap::new(),
            metrics: metrics
                .into_iter()
                .map(|(name, unit, direction, value)| {
                    let value = scaled(&place, name, value, 1.0)?;
                    Ok(metric(name, unit, direction, value, Vec::new()))
                })
                .collect::<Result<_, FormatError>>()?,
        };
        found.push(Found { place, benchmark });
    }
    finish(found)
}

/// The name and the text after `bench:` of a benchmark line, or `None` for any other line.
fn bench_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("test ")?;
    let (name, outcome) = rest.split_once(" ... ")?;
    let result = outcome.trim_start().strip_prefix("bench:")?;
    Some((name.trim(), result))
}

type Parsed = (&'static str, &'static str, Direction, f64);

/// `1,234.56 ns/iter (+/- 78.90)` with an optional ` = 345 MB/s`: the time, and the byte
/// throughput in B/s (libtest's MB are 10^6 bytes).
fn parse_result(result: &str) -> Result<Vec<Parsed>, String> {
    let words: Vec<&str> = result.split_whitespace().collect();
    let (time, rest) = match &words[..] {
        [time, "ns/iter", "(+/-", spread, rest @ ..] if spread.ends_with(')') => {
            number(spread.trim_end_matches(')')).map_err(|e| format!("{e} as the spread"))?;
            (*time, rest)
        }
        _ => return Err("expected `N ns/iter (+/- N)`".to_string()),
    };
    let mut metrics = vec![("time", "ns", Direction::Lower, number(time)?)];
    match rest {
        [] => {}
        ["=", rate, "MB/s"] => {
            let bytes_per_second = number(rate)? * 1e6;
            metrics.push(("throughput", "B/s", Direction::Higher, bytes_per_second));
        }
        _ => return Err("expected nothing or `= N MB/s` after the spread".to_string()),
    }
    Ok(metrics)
}

/// A number as libtest prints it: digits with `,` between thousands, and maybe decimals.
fn number(word: &str) -> Result<f64, String> {
    let digits: String = word.chars().filter(|&c| c != ',').collect();
    let plain = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.chars().next().is_some_and(|c| c.is_ascii_digit());
    match digits.parse::<f64>() {
        Ok(value) if plain => Ok(value),
        _ => Err(format!("{} is not a number", shown(word))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::assert_valid;

    const GOLDEN: &[u8] = include_bytes!("../../tests/data/libtest/cargo_bench.txt");

    fn refused(text: &str) -> String {
        parse_libtest(text.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn golden_cargo_bench_output() {
        let suite = parse_libtest(GOLDEN).unwrap();
        assert_valid(&suite);
        let names: Vec<_> = suite.benchmarks.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["alloc_small", "copy_4k", "sum_100"]);
        let copy = &suite.benchmarks[1];
        let [time, throughput] = &copy.metrics[..] else {
            panic!("time and throughput: {copy:?}")
        };
        assert_eq!((time.name.as_str(), time.unit.as_str()), ("time", "ns"));
        assert_eq!((time.direction, time.value), (Direction::Lower, 119.88));
        assert!(time.samples.is_empty());
        assert_eq!(throughput.unit, "B/s");
        assert_eq!(
            (throughput.direction, throughput.value),
            (Direction::Higher, 34_420e6)
        );
        assert_eq!(suite.benchmarks[2].metrics[0].value, 3.80);
        assert_eq!(suite.benchmarks[2].metrics.len(), 1);
    }

    #[test]
    fn older_integer_output_with_thousands_and_module_paths() {
        let text = "test parse::tests::big   ... bench:   1,234,567 ns/iter (+/- 8,910)\n\
                    test parse::tests::small ... bench:          12 ns/iter (+/- 0) = 100 MB/s\n";
        let suite = parse_libtest(text.as_bytes()).unwrap();
        assert_valid(&suite);
        assert_eq!(suite.benchmarks[0].name, "parse::tests::big");
        assert_eq!(suite.benchmarks[0].metrics[0].value, 1_234_567.0);
        assert_eq!(suite.benchmarks[1].metrics[1].value, 1e8);
    }

    #[test]
    fn output_without_bench_lines_has_no_results() {
        for text in [
            "",
            "running 0 tests\n\ntest result: ok.",
            "test a ... ok\n",
            "\n\n",
        ] {
            assert_eq!(refused(text), "the output: no benchmark results found");
        }
    }

    #[test]
    fn malformed_bench_lines_name_their_line() {
        let ok = "test a ... bench: 1 ns/iter (+/- 0)\n";
        let cases = [
            (
                "test b ... bench: NaN ns/iter (+/- 0)",
                "\"NaN\" is not a number",
            ),
            (
                "test b ... bench: -5 ns/iter (+/- 0)",
                "\"-5\" is not a number",
            ),
            (
                "test b ... bench: 5 ms/iter (+/- 0)",
                "expected `N ns/iter (+/- N)`",
            ),
            (
                "test b ... bench: 5 ns/iter (+/- x)",
                "\"x\" is not a number as the spread",
            ),
            (
                "test b ... bench: 5 ns/iter (+/- 1) = fast",
                "expected nothing or `= N MB/s` after the spread",
            ),
            (
                "test b ... bench: 1e400 ns/iter (+/- 1)",
                "\"1e400\" is not a number",
            ),
            ("test b ... bench:", "expected `N ns/iter (+/- N)`"),
        ];
        for (line, reason) in cases {
            let message = refused(&format!("{ok}{line}\n"));
            assert_eq!(message, format!("line 2: {reason} in the result of \"b\""));
        }
        let twice = refused(&format!("{ok}{ok}"));
        assert_eq!(twice, "line 2: benchmark \"a\" was already found at line 1");
    }

    #[test]
    fn hostile_lines_are_refused_without_echoing_them() {
        let huge = format!(
            "test {} ... bench: 1 ns/iter (+/- 0)\n",
            "x".repeat(1 << 20)
        );
        let message = refused(&huge);
        assert!(message.len() < 300, "{message}");
        assert!(
            message.starts_with("line 1: the benchmark name \"xxx"),
            "{message}"
        );
        let control = refused("test a\u{7}b ... bench: 1 ns/iter (+/- 0)\n");
        assert!(control.ends_with("contains the control character U+0007"));
        let huge_value = format!("test a ... bench: 1{} ns/iter (+/- 0)", "0".repeat(400));
        assert!(
            refused(&huge_value).ends_with("time is inf; it must be a finite number, not negative")
        );
        let many: String = (0..=MAX_BENCHMARKS)
            .map(|i| format!("test b{i} ... bench: 1 ns/iter (+/- 0)\n"))
            .collect();
        assert_eq!(refused(&many), "line 10001: more than 10000 benchmarks");
    }
}
