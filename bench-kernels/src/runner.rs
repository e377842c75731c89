//! The suite registry: which benchmarks exist, which ones `--quick` and `--filter` select,
//! and running them into one [`Report`].

use std::path::PathBuf;

use crate::error::KernelError;
use crate::instructions::RegionTally;
use crate::instructions::region::regions_entered;
use crate::report::{BenchmarkResult, Report};
use crate::variants::Variants;

/// The bursty bus workload; the write-up reads these from environment knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusWorkload {
    /// Messages per burst.
    pub burst: usize,
    /// Subscribers receiving every message.
    pub fanout: usize,
    /// Ring capacity in messages.
    pub capacity: usize,
}

impl Default for BusWorkload {
    fn default() -> Self {
        Self {
            burst: 256,
            fanout: 4,
            capacity: 2048,
        }
    }
}

/// Everything a suite needs to run.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// Reduced sizes, for the demo and CI.
    pub quick: bool,
    /// Which implementation of each kernel runs.
    pub variants: Variants,
    /// The bursty bus workload.
    pub bus: BusWorkload,
    /// Where kernels put their files (segments, slabs); removed after the run.
    pub scratch: PathBuf,
}

impl RunContext {
    /// Tells the person watching what is running; stdout stays reserved for the report.
    pub fn progress(&self, message: &str) {
        eprintln!("kymo-kernels: {message}");
    }

    /// Picks the quick or the full size of a workload parameter.
    pub fn sized<T>(&self, quick: T, full: T) -> T {
        if self.quick { quick } else { full }
    }
}

/// One benchmark suite: a family of benchmarks that share fixtures.
pub trait Suite {
    /// The first part of every benchmark name in this suite.
    fn name(&self) -> &'static str;

    /// Whether its benchmarks run their work in counted regions (see
    /// [`crate::instructions`]); the count run skips the suites that do not.
    fn counts_instructions(&self) -> bool {
        true
    }

    /// Every benchmark name of this suite; with `quick`, the reduced set.
    fn benchmarks(&self, quick: bool) -> Vec<String>;

    /// Runs the named benchmarks (a subset of [`Suite::benchmarks`]) in the given order.
    fn run(
        &self,
        selected: &[String],
        context: &RunContext,
    ) -> Result<Vec<BenchmarkResult>, KernelError>;
}

/// Every suite the runner knows, in run order.
pub fn all_suites() -> Vec<Box<dyn Suite>> {
    vec![
        Box::new(crate::ring::RingSuite),
        Box::new(crate::capture::CaptureSuite),
        Box::new(crate::bus::BusSuite),
        Box::new(crate::fair_queue::FairQueueSuite),
        Box::new(crate::log_read::LogReadSuite),
        Box::new(crate::produce::ProduceSuite),
    ]
}

/// The benchmarks `filters` select (any filter a substring of the name; none selects all).
pub fn selected_names(suite: &dyn Suite, quick: bool, filters: &[String]) -> Vec<String> {
    suite
        .benchmarks(quick)
        .into_iter()
        .filter(|name| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect()
}

/// Runs every selected benchmark of every suite.
pub fn run_selected(context: &RunContext, filters: &[String]) -> Result<Report, KernelError> {
    let mut benchmarks = Vec::new();
    for suite in all_suites() {
        let names = selected_names(suite.as_ref(), context.quick, filters);
        if names.is_empty() {
            continue;
        }
        context.progress(&format!("{} ({} benchmarks)", suite.name(), names.len()));
        let results = suite.run(&names, context)?;
        for result in &results {
            result.validate()?;
        }
        benchmarks.extend(results);
    }
    Ok(Report { benchmarks })
}

/// The count run (see [`crate::instructions`]): runs every selected benchmark on its own and
/// tallies the counted regions each one entered. Results are discarded: under callgrind
/// their times mean nothing.
pub fn tally_regions(
    context: &RunContext,
    filters: &[String],
) -> Result<Vec<RegionTally>, KernelError> {
    let mut tallies = Vec::new();
    for suite in all_suites().into_iter().filter(|s| s.counts_instructions()) {
        for name in selected_names(suite.as_ref(), context.quick, filters) {
            let before = regions_entered();
            let results = suite.run(std::slice::from_ref(&name), context)?;
            let params = results
                .into_iter()
                .next()
                .map(|r| r.params)
                .unwrap_or_default();
            tallies.push(RegionTally {
                name,
                params,
                regions: regions_entered() - before,
            });
        }
    }
    Ok(tallies)
}

/// Rejects a name a suite was handed but does not know; a suite's `run` ends its `match`
/// with this so that the registry and the dispatch cannot drift apart silently.
pub fn unknown(name: &str) -> KernelError {
    KernelError::UnknownBenchmark(name.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_suite_has_a_quick_benchmark_and_unique_names() {
        let mut seen = HashSet::new();
        for suite in all_suites() {
            let quick = suite.benchmarks(true);
            assert!(!quick.is_empty(), "{} has no quick benchmark", suite.name());
            let full = suite.benchmarks(false);
            for name in &full {
                assert!(name.starts_with(&format!("{}/", suite.name())), "{name}");
                assert!(seen.insert(name.clone()), "duplicate {name}");
                let probe = BenchmarkResult::new(name.clone()).metric(
                    crate::report::Metric::value("x", "x", crate::report::Direction::Lower, 1.0),
                );
                probe.validate().unwrap();
            }
        }
    }

    #[test]
    fn filters_are_substrings() {
        let suite = crate::bus::BusSuite;
        let names = selected_names(&suite, false, &["lagged".to_string()]);
        assert_eq!(names, vec!["bus/steady/lagged_subscriber_cap1".to_string()]);
        assert!(selected_names(&suite, false, &["nothing-matches".to_string()]).is_empty());
    }
}
