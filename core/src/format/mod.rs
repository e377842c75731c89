//! Result-format parsers: each turns one tool's output into [`crate::results::SuiteResults`].
//!
//! Every parser caps its input at [`kymo::MAX_DOCUMENT_BYTES`], refuses text that is not UTF-8,
//! reports empty output as "no benchmark results found", and names the place of anything it
//! refuses (a line, or a JSON path with line and column). What every parser produces passes
//! `results::validate_suites`.
//!
//! Units and directions are the same whatever the tool:
//!
//! | metric | unit | direction | from |
//! |---|---|---|---|
//! | `time` | `ns` | lower | every format but BMF: the time of one iteration (or one run, for hyperfine) |
//! | `cpu_time` | `ns` | lower | Google Benchmark |
//! | `user_time`, `system_time` | `ns` | lower | hyperfine (means; it keeps no per-run values) |
//! | `throughput` | `B/s`, `bit/s` or `elem/s` | higher | criterion throughput; go `MB/s` and libtest `MB/s` (both as B/s) |
//! | `byte_throughput` | `B/s` | higher | criterion `ElementsAndBytes` (its `throughput` counts elements) |
//! | `bytes_per_second`, `items_per_second` | `B/s`, `items/s` | higher | Google Benchmark |
//! | `alloc_bytes`, `allocs` | `B`, `allocs` | lower | go `B/op`, `allocs/op` |
//! | go custom units (`words/op`) | the unit itself | higher if it ends in `/s` | go `b.ReportMetric` |
//! | BMF measures | by measure, see [`bmf`] | by measure | Bencher Metric Format |
//! | `instructions`, `estimated_cycles` | `instructions`, `cycles` | lower | gungraun (callgrind's `Ir`, its estimate of cycles) |
//!
//! Samples are kept where the tool gives them: criterion's per-iteration times, hyperfine's
//! `times`, Google Benchmark repetitions, `go test -count` repeats, pytest-benchmark
//! `stats.data`. A metric's `value` is the tool's own headline figure where it has one
//! (criterion's slope or mean estimate, libtest's median, BMF `value`), and otherwise the median
//! of the samples.

pub mod bmf;
pub mod criterion;
pub mod go_bench;
pub mod google_benchmark;
pub mod gungraun;
pub mod hdr;
pub mod hyperfine;
mod input;
mod json_place;
pub mod kymo;
pub mod libtest;
#[cfg(test)]
mod properties;
pub mod pytest_benchmark;

pub use criterion::{parse_criterion_dir, parse_criterion_files};
pub use kymo::FormatError;

use crate::results::SuiteResults;

/// A result format, as named in `kymo.toml` (`format = "go-bench"`) and by `kymo upload --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FormatName {
    Kymo,
    Criterion,
    Bmf,
    Hyperfine,
    GoogleBenchmark,
    GoBench,
    Libtest,
    PytestBenchmark,
    Gungraun,
}

impl FormatName {
    /// Every format, in documentation order.
    pub const ALL: [FormatName; 9] = [
        FormatName::Kymo,
        FormatName::Criterion,
        FormatName::Bmf,
        FormatName::Hyperfine,
        FormatName::GoogleBenchmark,
        FormatName::GoBench,
        FormatName::Libtest,
        FormatName::PytestBenchmark,
        FormatName::Gungraun,
    ];

    /// The format's name in `kymo.toml` and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            FormatName::Kymo => "kymo",
            FormatName::Criterion => "criterion",
            FormatName::Bmf => "bmf",
            FormatName::Hyperfine => "hyperfine",
            FormatName::GoogleBenchmark => "google-benchmark",
            FormatName::GoBench => "go-bench",
            FormatName::Libtest => "libtest",
            FormatName::PytestBenchmark => "pytest-benchmark",
            FormatName::Gungraun => "gungraun",
        }
    }

    /// The format named `s`, exactly as [`FormatName::as_str`] spells it.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

impl std::fmt::Display for FormatName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a tool's output given as bytes (its stdout, or a file it wrote). Criterion writes a
/// directory rather than one document: read it with [`parse_criterion_dir`].
pub fn parse_output(format: FormatName, bytes: &[u8]) -> Result<SuiteResults, FormatError> {
    match format {
        FormatName::Kymo => kymo::parse_kymo_json(bytes),
        FormatName::Criterion => Err(input::invalid(
            "the output",
            "criterion results are a directory (target/criterion), not one document; \
             read them with parse_criterion_dir",
        )),
        FormatName::Bmf => bmf::parse_bmf(bytes),
        FormatName::Hyperfine => hyperfine::parse_hyperfine(bytes),
        FormatName::GoogleBenchmark => google_benchmark::parse_google_benchmark(bytes),
        FormatName::GoBench => go_bench::parse_go_bench(bytes),
        FormatName::Libtest => libtest::parse_libtest(bytes),
        FormatName::PytestBenchmark => pytest_benchmark::parse_pytest_benchmark(bytes),
        FormatName::Gungraun => gungraun::parse_gungraun(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wraps a parser's results as one suite of a run, as the server receives them.
    pub(crate) fn assert_valid(results: &SuiteResults) {
        let upload = crate::protocol::SuiteUpload {
            suite: "golden".into(),
            results: results.clone(),
        };
        if let Err(e) = crate::results::validate_suites(&[upload]) {
            panic!("the server would refuse these results: {e}");
        }
    }

    /// Each metric of a benchmark as (name, unit, direction, number of samples), the shape a
    /// golden file is checked against.
    pub(crate) fn metric_shapes(
        bench: &crate::results::BenchmarkResult,
    ) -> Vec<(&str, &str, crate::model::Direction, usize)> {
        (bench.metrics.iter())
            .map(|m| {
                (
                    m.name.as_str(),
                    m.unit.as_str(),
                    m.direction,
                    m.samples.len(),
                )
            })
            .collect()
    }

    /// Floats read from JSON equal the written ones to within an ulp or two: serde_json's fast
    /// float parser does not always round correctly.
    #[track_caller]
    pub(crate) fn assert_close(actual: f64, expected: f64) {
        let tolerance = expected.abs() * 1e-14;
        assert!(
            (actual - expected).abs() <= tolerance,
            "{actual} is not {expected}"
        );
    }

    #[test]
    fn names_round_trip_through_text_and_serde() {
        for format in FormatName::ALL {
            assert_eq!(FormatName::parse(format.as_str()), Some(format));
            let json = serde_json::to_string(&format).unwrap();
            assert_eq!(json, format!("\"{format}\""));
        }
        assert_eq!(FormatName::parse("Kymo"), None);
        assert_eq!(FormatName::parse("go_bench"), None);
    }

    #[test]
    fn every_format_refuses_empty_output_the_same_way() {
        for format in FormatName::ALL {
            let refused = parse_output(format, b"").unwrap_err().to_string();
            match format {
                // kymo JSON is the native format; its own parser words this differently.
                FormatName::Kymo => assert!(refused.contains("line 1"), "{refused}"),
                FormatName::Criterion => assert!(refused.contains("directory"), "{refused}"),
                _ => assert_eq!(
                    refused, "the output: no benchmark results found",
                    "{format}"
                ),
            }
        }
    }

    #[test]
    fn every_format_refuses_oversized_and_non_utf8_output() {
        let big = vec![b' '; kymo::MAX_DOCUMENT_BYTES + 1];
        for format in FormatName::ALL
            .into_iter()
            .filter(|f| *f != FormatName::Criterion)
        {
            let refused = parse_output(format, &big).unwrap_err();
            assert!(matches!(refused, FormatError::TooLarge { .. }), "{format}");
            let latin1 = parse_output(format, b"{\n \"caf\xe9\": 1}").unwrap_err();
            assert!(
                matches!(latin1, FormatError::NotUtf8 { line: 2, column: 6 }),
                "{format}: {latin1}"
            );
        }
    }
}
