//! A comparison's rounds, benchmark by benchmark: what both sides measured in each round, the
//! sequential verdict of each benchmark × metric ([`crate::stats::sequential`]), and which
//! benchmarks are still undecided. The worker asks after each round which benchmarks to run
//! next (only the undecided) and whether it may stop; the server judges the stored rounds with
//! the same function, so the verdict shown is the one the worker stopped on.

use std::collections::BTreeMap;

use crate::model::Direction;
use crate::protocol::{ComparedRound, SuiteSelection, SuiteUpload};
use crate::stats::sequential::{RoundsVerdict, SequentialPlan, judge_rounds, judge_work_rounds};

/// The metric that counts work: instructions executed, judged by whether counts repeat.
pub const WORK_METRIC: &str = "instructions";

/// One benchmark × metric of a comparison, judged.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedMetric {
    pub suite: String,
    /// The benchmark's key (name and parameters).
    pub benchmark: String,
    /// Its name alone: what a suite's command is asked to run.
    pub name: String,
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
    pub judged: RoundsVerdict,
}

/// Samples of one benchmark × metric, per round in which both sides measured it.
#[derive(Debug, Default)]
struct MetricRounds {
    name: String,
    unit: String,
    direction: Option<Direction>,
    pairs: Vec<(Vec<f64>, Vec<f64>)>,
}

type MetricKey = (String, String, String);

fn side_metrics(
    suites: &[SuiteUpload],
) -> BTreeMap<MetricKey, (String, &str, Direction, Vec<f64>)> {
    let mut out = BTreeMap::new();
    for suite in suites {
        for bench in &suite.results.benchmarks {
            for metric in &bench.metrics {
                let samples = if metric.samples.is_empty() {
                    vec![metric.value]
                } else {
                    metric.samples.clone()
                };
                let key = (suite.suite.clone(), bench.key(), metric.name.clone());
                out.insert(
                    key,
                    (
                        bench.name.clone(),
                        metric.unit.as_str(),
                        metric.direction,
                        samples,
                    ),
                );
            }
        }
    }
    out
}

fn by_metric(rounds: &[ComparedRound]) -> BTreeMap<MetricKey, MetricRounds> {
    let mut out: BTreeMap<MetricKey, MetricRounds> = BTreeMap::new();
    for round in rounds {
        let mut base = side_metrics(&round.base);
        for (key, (name, unit, direction, head)) in side_metrics(&round.head) {
            let Some((_, _, _, base)) = base.remove(&key) else {
                continue;
            };
            let entry = out.entry(key).or_default();
            entry.name = name;
            entry.unit = unit.to_owned();
            entry.direction = Some(direction);
            entry.pairs.push((base, head));
        }
    }
    out
}

/// Judges every benchmark × metric both sides measured in `rounds` by `plan`, a change that
/// `selection` claims by the plan that refutes it ([`SequentialPlan::refuting`]); `finished`:
/// no more rounds follow (see [`judge_rounds`]). Pure.
pub fn judge_comparison(
    rounds: &[ComparedRound],
    plan: &SequentialPlan,
    selection: &[SuiteSelection],
    finished: bool,
) -> Vec<JudgedMetric> {
    (by_metric(rounds).into_iter())
        .map(|((suite, benchmark, metric), m)| {
            let direction = m.direction.unwrap_or(Direction::Lower);
            let judged = if metric == WORK_METRIC {
                judge_work_rounds(&m.pairs)
            } else {
                let plan = match SuiteSelection::claim(selection, &suite, &benchmark, &metric) {
                    Some(claimed) => plan.refuting(claimed),
                    None => *plan,
                };
                judge_rounds(&m.pairs, direction, &plan, finished)
            };
            JudgedMetric {
                suite,
                benchmark,
                name: m.name,
                metric,
                unit: m.unit,
                direction,
                judged,
            }
        })
        .collect()
}

/// The benchmarks (by suite and name) still undecided: those with a deciding metric undecided
/// (of `asked`, the comparison's selection: every metric unless it names some), unless their
/// instruction count already found a change (work decides before time). Suites with none are
/// left out: later rounds need not run them.
pub fn undecided(judged: &[JudgedMetric], asked: &[SuiteSelection]) -> Vec<SuiteSelection> {
    let deciding = |m: &JudgedMetric| {
        (asked.iter().find(|s| s.suite == m.suite)).is_none_or(|s| s.decides(&m.metric))
    };
    let mut by_benchmark: BTreeMap<(&str, &str), (bool, bool)> = BTreeMap::new();
    for m in judged {
        let entry = (by_benchmark.entry((&m.suite, &m.name))).or_insert((false, false));
        entry.0 |= deciding(m) && !m.judged.decided;
        entry.1 |= m.metric == WORK_METRIC && m.judged.verdict.kind.is_change();
    }
    let mut selection: Vec<SuiteSelection> = Vec::new();
    for ((suite, name), (open, work_changed)) in by_benchmark {
        if open && !work_changed {
            SuiteSelection::widen(
                &mut selection,
                &SuiteSelection {
                    suite: suite.to_owned(),
                    benchmarks: vec![name.to_owned()],
                    metrics: Vec::new(),
                    claims: Vec::new(),
                },
            );
        }
    }
    selection
}

#[cfg(test)]
#[path = "interleaved_tests.rs"]
mod tests;
