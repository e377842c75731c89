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

/// Which benchmarks a run selects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Names containing any of these (none: every name).
    pub filters: Vec<String>,
    /// Of those, only these exact names (none: no further limit). kymo names the benchmarks
    /// a comparison needs this way, so that confirming one change re-runs one kernel.
    pub only: Vec<String>,
}

impl Selection {
    /// Whether a benchmark of this name runs.
    pub fn selects(&self, name: &str) -> bool {
        let filtered =
            self.filters.is_empty() || self.filters.iter().any(|f| name.contains(f.as_str()));
        filtered && (self.only.is_empty() || self.only.iter().any(|o| o == name))
    }
}

/// The benchmarks of a suite that `selection` selects, in the suite's order.
pub fn selected_names(suite: &dyn Suite, quick: bool, selection: &Selection) -> Vec<String> {
    suite
        .benchmarks(quick)
        .into_iter()
        .filter(|name| selection.selects(name))
        .collect()
}

/// Runs every selected benchmark of every suite.
pub fn run_selected(context: &RunContext, selection: &Selection) -> Result<Report, KernelError> {
    let mut benchmarks = Vec::new();
    for suite in all_suites() {
        let names = selected_names(suite.as_ref(), context.quick, selection);
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
    selection: &Selection,
) -> Result<Vec<RegionTally>, KernelError> {
    let mut tallies = Vec::new();
    for suite in all_suites().into_iter().filter(|s| s.counts_instructions()) {
        for name in selected_names(suite.as_ref(), context.quick, selection) {
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

    fn filtered(filters: &[&str], only: &[&str]) -> Selection {
        Selection {
            filters: filters.iter().map(|f| f.to_string()).collect(),
            only: only.iter().map(|o| o.to_string()).collect(),
        }
    }

    #[test]
    fn filters_are_substrings() {
        let suite = crate::bus::BusSuite;
        let names = selected_names(&suite, false, &filtered(&["lagged"], &[]));
        assert_eq!(names, vec!["bus/steady/lagged_subscriber_cap1".to_string()]);
        assert!(selected_names(&suite, false, &filtered(&["nothing-matches"], &[])).is_empty());
    }

    #[test]
    fn only_names_exact_benchmarks_within_the_filters() {
        let suite = crate::bus::BusSuite;
        let one = filtered(&[], &["bus/steady/one_subscriber"]);
        assert_eq!(
            selected_names(&suite, false, &one),
            vec!["bus/steady/one_subscriber"]
        );
        // A prefix is not a name.
        assert!(selected_names(&suite, false, &filtered(&[], &["bus/steady"])).is_empty());
        let both = filtered(&["lagged"], &["bus/steady/one_subscriber"]);
        assert!(
            selected_names(&suite, false, &both).is_empty(),
            "and, not or"
        );
        assert_eq!(selected_names(&suite, false, &filtered(&[], &[])).len(), 4);
    }
}
