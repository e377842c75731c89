//! Instruction counts: each kernel's fixed amount of work counted by valgrind's callgrind,
//! reported as the metric `instructions` beside the kernel's wall time.
//!
//! Wall time on a shared machine moves with the load; the number of instructions a
//! single-threaded kernel executes does not. The runner re-executes itself under callgrind
//! with `--counting`: in that process every timed loop does a fixed amount of work once,
//! inside a counted region ([`region`]), and callgrind dumps its counters on entering and on
//! leaving each region. The dumps taken on leaving are the regions' counts; the count run
//! prints how many regions each benchmark entered, so that the dumps can be handed back to
//! their benchmarks in order.

pub mod callgrind;
pub mod client;
pub mod region;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use self::callgrind::{Dump, parse_dump};
use self::region::REGION_SYMBOL;
use crate::report::{BenchmarkResult, Direction, Metric, Report};

/// The metric's name and unit, as kymo stores it.
pub const METRIC: &str = "instructions";

/// What the count run prints for each benchmark: how many counted regions its work entered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionTally {
    /// The benchmark's name.
    pub name: String,
    /// Its parameters, part of its identity: a report of counts alone needs them.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Regions entered while it ran, in order.
    pub regions: usize,
}

/// How to start this program again: its executable and the subcommands that reach the
/// kernels' command line (`kymo kernels` is reached through `["kernels"]`).
#[derive(Debug, Clone)]
pub struct SelfCommand {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the kernels' own.
    pub prefix: Vec<String>,
}

/// Runs the kernels selected by `args` under callgrind and returns each counted benchmark
/// with its count.
pub fn count(itself: &SelfCommand, args: &[String]) -> anyhow::Result<Vec<Counted>> {
    let dir = tempfile::Builder::new()
        .prefix("kymo-kernels-callgrind-")
        .tempdir()
        .context("creating a directory for callgrind's output")?;
    let out_file = dir.path().join("callgrind.out");
    let log_file = dir.path().join("valgrind.log");
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        // Only the counted regions are instrumented: they switch it on and off themselves.
        .arg(format!(
            "--instr-atstart={}",
            if client::INSTRUMENTED_FROM_START {
                "yes"
            } else {
                "no"
            }
        ))
        .arg(format!("--dump-before={REGION_SYMBOL}"))
        .arg(format!("--dump-after={REGION_SYMBOL}"))
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(format!("--log-file={}", log_file.display()))
        .arg(&itself.program)
        .args(&itself.prefix)
        .args(args)
        .arg("--counting")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("--instructions runs valgrind, which could not be started (is it installed?)")?;
    if !output.status.success() {
        let log = std::fs::read_to_string(&log_file).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        anyhow::bail!(
            "the count run under valgrind failed ({}):\n{}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let tallies: Vec<RegionTally> = serde_json::from_slice(&output.stdout)
        .context("the count run did not print its region tally")?;
    let dumps = read_dumps(dir.path())?;
    assign(&tallies, &dumps)
}

fn read_dumps(dir: &Path) -> anyhow::Result<Vec<Dump>> {
    let mut dumps = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let is_dump = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("callgrind.out"));
        if is_dump {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            dumps.push(parse_dump(&text).with_context(|| format!("{}", path.display()))?);
        }
    }
    dumps.sort_by_key(|d| d.part);
    Ok(dumps)
}

/// A benchmark and the instructions its counted regions executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    /// The benchmark's name.
    pub name: String,
    /// Its parameters.
    pub params: BTreeMap<String, String>,
    /// Instructions, summed over its regions.
    pub instructions: u64,
}

/// Hands the dumps taken on leaving a region to the benchmarks that entered them, in order,
/// summing a benchmark's regions. Any mismatch means the dumps cannot be trusted.
pub fn assign(tallies: &[RegionTally], dumps: &[Dump]) -> anyhow::Result<Vec<Counted>> {
    let leaving = format!("--dump-after={REGION_SYMBOL}");
    let mut counts = dumps
        .iter()
        .filter(|d| d.trigger == leaving)
        .map(|d| d.instructions);
    let expected: usize = tallies.iter().map(|t| t.regions).sum();
    let found = counts.clone().count();
    anyhow::ensure!(
        found == expected,
        "callgrind wrote {found} region dumps where the count run entered {expected} regions"
    );
    let mut out: Vec<Counted> = Vec::new();
    for tally in tallies.iter().filter(|t| t.regions > 0) {
        anyhow::ensure!(
            out.iter().all(|c| c.name != tally.name),
            "benchmark {} was counted twice",
            tally.name
        );
        out.push(Counted {
            name: tally.name.clone(),
            params: tally.params.clone(),
            instructions: counts.by_ref().take(tally.regions).sum(),
        });
    }
    Ok(out)
}

fn metric(count: &Counted) -> Metric {
    Metric::value(METRIC, METRIC, Direction::Lower, count.instructions as f64)
}

/// Adds each count to its benchmark (same name and parameters) as the metric `instructions`.
pub fn attach(report: &mut Report, counts: &[Counted]) {
    for benchmark in &mut report.benchmarks {
        let own = counts
            .iter()
            .find(|c| c.name == benchmark.name && c.params == benchmark.params);
        if let Some(count) = own {
            benchmark.metrics.push(metric(count));
        }
    }
}

/// A report of the counts alone, for a suite that counts once per commit beside a suite that
/// times with repeats: kymo files both under the same benchmarks.
pub fn report_of(counts: &[Counted]) -> Report {
    let benchmarks = counts
        .iter()
        .map(|count| {
            let mut result = BenchmarkResult::new(count.name.clone()).metric(metric(count));
            result.params = count.params.clone();
            result
        })
        .collect();
    Report { benchmarks }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(part: u64, trigger: &str, instructions: u64) -> Dump {
        Dump {
            part,
            trigger: format!("--dump-{trigger}={REGION_SYMBOL}"),
            instructions,
        }
    }

    fn tally(name: &str, regions: usize) -> RegionTally {
        RegionTally {
            name: name.to_string(),
            params: BTreeMap::from([("size".to_string(), "1".to_string())]),
            regions,
        }
    }

    #[test]
    fn dumps_on_leaving_go_to_their_benchmarks_in_order() {
        let dumps = [
            dump(1, "before", 9_000_000),
            dump(2, "after", 100),
            dump(3, "before", 50),
            dump(4, "after", 20),
            dump(5, "before", 50),
            dump(6, "after", 3),
        ];
        let counts = assign(&[tally("a", 1), tally("none", 0), tally("b", 2)], &dumps).unwrap();
        let got: Vec<(&str, u64)> = counts
            .iter()
            .map(|c| (c.name.as_str(), c.instructions))
            .collect();
        assert_eq!(got, vec![("a", 100), ("b", 23)]);
    }

    #[test]
    fn a_missing_or_extra_dump_is_an_error() {
        let dumps = [dump(1, "after", 100)];
        assert!(assign(&[tally("a", 2)], &dumps).is_err());
        assert!(assign(&[], &dumps).is_err());
        assert!(assign(&[tally("a", 1), tally("a", 0), tally("a", 0)], &dumps).is_ok());
        let twice = [dump(1, "after", 1), dump(2, "after", 2)];
        assert!(assign(&[tally("a", 1), tally("a", 1)], &twice).is_err());
    }

    #[test]
    fn counts_join_the_benchmark_with_the_same_name_and_parameters() {
        let counts = assign(&[tally("ring/count/a", 1)], &[dump(1, "after", 42)]).unwrap();
        let mut report = Report {
            benchmarks: vec![
                BenchmarkResult::new("ring/count/a").param("size", 1),
                BenchmarkResult::new("ring/count/a").param("size", 2),
            ],
        };
        attach(&mut report, &counts);
        assert_eq!(report.benchmarks[0].metrics[0].value, Some(42.0));
        assert!(report.benchmarks[1].metrics.is_empty());
        let alone = report_of(&counts);
        assert_eq!(alone.benchmarks[0].params, report.benchmarks[0].params);
        alone.benchmarks[0].validate().unwrap();
    }
}
