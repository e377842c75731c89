//! A comparison job: the base and the head checked out side by side, each built once, then
//! measured alternately (base, head, then head, base, ...) so that drift and background load
//! over the job, and whatever favours one place in a round, fall on both sides alike; each
//! side's programs are read afresh into memory before it runs (`placement`). An adaptive one
//! (with a budget) looks at its verdicts after the rounds of
//! [`kymo_core::stats::sequential::LOOKS`], runs only the undecided benchmarks after that, and
//! stops when every benchmark is decided or the budget would be overrun.

use std::time::{Duration, Instant};

use kymo_core::interleaved::{judge_comparison, undecided};
use kymo_core::protocol::{
    ClaimedJob, ComparedRound, ComparisonSpec, JobOutcome, SuiteSelection, log_tail,
};
use kymo_core::stats::sequential::{LOOKS, SequentialPlan};

use super::{JobControl, MAX_LOG, Worker};
use crate::config::Suite;
use crate::mirror::{Mirror, mirror_dir_name};
use crate::suite::{SuiteContext, SuiteFailure, build_suite, measure_suite, measure_suites};

/// Most rounds a worker runs, whatever the server asks: the server allows no more either.
const MAX_ROUNDS: u32 = kymo_core::db::ADAPTIVE_ROUNDS as u32;

impl Worker {
    pub(super) fn run_comparison(
        &self,
        job: &ClaimedJob,
        spec: &ComparisonSpec,
        mirror: &Mirror,
        control: &JobControl,
    ) -> anyhow::Result<JobOutcome> {
        let most = spec.rounds.clamp(1, MAX_ROUNDS);
        let plan = match spec.budget_seconds {
            Some(_) => SequentialPlan::adaptive(most as usize),
            None => SequentialPlan::fixed(most as usize),
        };
        let dir_name = mirror_dir_name(&job.repository)?;
        let mut sides = Vec::with_capacity(2);
        for (sha, side) in [(spec.base.as_str(), "base"), (job.commit.as_str(), "head")] {
            match self.check_out(job, mirror, sha, &format!("{dir_name}@{side}"), control)? {
                Ok(checked_out) => sides.push((side, checked_out)),
                Err(JobOutcome::Failed { error, log_tail }) => {
                    return Ok(failed(side, SuiteFailure { error, log_tail }));
                }
                Err(other) => return Ok(other),
            }
        }
        let mut log = String::new();
        for (side, checked_out) in &sides {
            for (suite, _) in selected(&checked_out.config.suites, &spec.selection) {
                let progress = |what: String| control.phase(&format!("{side}: {what}"));
                let ctx = self.suite_context(checked_out, control, &progress);
                if let Err(failure) = build_suite(&ctx, suite, &mut log) {
                    return Ok(failed(side, failure));
                }
            }
        }
        // What each side's rounds read afresh: the programs its builds left (see `placement`).
        let mut programs = Vec::with_capacity(2);
        for (side, checked_out) in &sides {
            programs.push(match crate::placement::programs(&checked_out.dirs.target) {
                Ok(found) => found,
                Err(err) => {
                    log.push_str(&format!("# {side}: programs not refreshed: {err}\n"));
                    Vec::new()
                }
            });
        }
        let started = Instant::now();
        let mut selection = spec.selection.clone();
        let mut measured: Vec<ComparedRound> = Vec::with_capacity(most as usize);
        for round in 1..=most {
            let of = if plan.adaptive {
                format!("round {round}, at most {most}")
            } else {
                format!("round {round} of {most}")
            };
            let mut both = [Vec::new(), Vec::new()];
            for index in round_order(round) {
                let (side, checked_out) = &sides[index];
                // Its programs from pages of their own this round (see `placement`).
                match crate::placement::refresh(&programs[index]) {
                    Ok(done) if round == 1 && done.files > 0 => log.push_str(&format!(
                        "# {side}: {} programs ({} KiB) read afresh into memory each round\n",
                        done.files,
                        done.bytes / 1024
                    )),
                    Ok(_) => {}
                    Err(err) => log.push_str(&format!("# {side}: programs not refreshed: {err}\n")),
                }
                let suites: Vec<_> = selected(&checked_out.config.suites, &selection).collect();
                let measured = measure_suites(&suites, &mut log, |suite, only_benchmarks, log| {
                    let progress = |what: String| control.phase(&format!("{of}, {side}: {what}"));
                    let ctx = SuiteContext {
                        only_benchmarks,
                        ..self.suite_context(checked_out, control, &progress)
                    };
                    measure_suite(&ctx, suite, log)
                });
                match measured {
                    Ok(uploads) => both[index] = uploads,
                    Err(failure) => return Ok(failed(side, failure)),
                }
            }
            let [base, head] = both;
            measured.push(ComparedRound { base, head });
            // Time is decided only at the plan's looks; instruction counts from two rounds on.
            if plan.adaptive {
                let judged = judge_comparison(&measured, &plan, &spec.selection, false);
                let open = undecided(&judged, &spec.selection);
                match narrowed(&spec.selection, open) {
                    Some(open) => selection = open,
                    None => {
                        log.push_str(&format!("# every benchmark decided after {round} rounds\n"));
                        break;
                    }
                }
            }
            if let Some(budget) = spec.budget_seconds {
                let spent = started.elapsed();
                let next = spent + spent / round;
                // Fewer rounds than the first look are too few to tell a change: the budget
                // ends the rounds from the first look on, however long a round takes.
                if round as usize >= LOOKS[0] && next > Duration::from_secs(budget.into()) {
                    log.push_str(&format!(
                        "# the budget of {budget}s ends the rounds after {round} ({:.0}s)\n",
                        spent.as_secs_f64()
                    ));
                    break;
                }
            }
        }
        Ok(JobOutcome::Compared {
            rounds: measured,
            log: log_tail(&log, MAX_LOG).to_owned(),
        })
    }
}

/// Which side runs first in a round (0: the base, 1: the head): the base in odd rounds, the
/// head in even ones, so that whatever favours the first or the second run of a round (caches
/// the other left warm, a clock that ramps up, a neighbour's rhythm) falls on both sides alike.
fn round_order(round: u32) -> [usize; 2] {
    if round % 2 == 1 { [0, 1] } else { [1, 0] }
}

/// What later rounds run: the undecided benchmarks `open`, within what the comparison asked
/// for (`asked`; empty: everything). `None` when nothing is left to decide.
fn narrowed(asked: &[SuiteSelection], open: Vec<SuiteSelection>) -> Option<Vec<SuiteSelection>> {
    let kept: Vec<SuiteSelection> = (open.into_iter())
        .filter_map(|mut open| {
            if asked.is_empty() {
                return Some(open);
            }
            let wanted = asked.iter().find(|a| a.suite == open.suite)?;
            if !wanted.benchmarks.is_empty() {
                open.benchmarks.retain(|b| wanted.benchmarks.contains(b));
            }
            (!open.benchmarks.is_empty()).then_some(open)
        })
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// The suites of a side that the comparison measures, each with the benchmarks it needs of
/// them (empty: all). A selected suite the side does not have is not measured there: the
/// verdict then has nothing to compare for its benchmarks, and says so.
fn selected<'a>(
    suites: &'a [Suite],
    selection: &'a [SuiteSelection],
) -> impl Iterator<Item = (&'a Suite, &'a [String])> {
    suites.iter().filter_map(move |suite| {
        if selection.is_empty() {
            return Some((suite, &[][..]));
        }
        (selection.iter())
            .find(|s| s.suite == suite.name)
            .map(|s| (suite, s.benchmarks.as_slice()))
    })
}

/// A suite of one side failed: the whole comparison fails, saying which side.
fn failed(side: &str, SuiteFailure { error, log_tail }: SuiteFailure) -> JobOutcome {
    JobOutcome::Failed {
        error: format!("{side}: {error}"),
        log_tail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_runs_only_its_suites_each_with_its_benchmarks() {
        let toml =
            "[[suite]]\nname = \"a\"\nrun = \"true\"\n\n[[suite]]\nname = \"b\"\nrun = \"true\"\n";
        let suites = crate::config::parse_kymo_toml(toml).unwrap().suites;
        let names = |selection: &[SuiteSelection]| -> Vec<(String, Vec<String>)> {
            (selected(&suites, selection))
                .map(|(suite, only)| (suite.name.clone(), only.to_vec()))
                .collect()
        };
        let everything = names(&[]);
        assert_eq!(
            everything,
            [("a".into(), vec![]), ("b".into(), vec![])],
            "no selection: every suite, all of it"
        );
        let one = SuiteSelection {
            suite: "b".into(),
            benchmarks: vec!["parse".into()],
            metrics: vec![],
            claims: vec![],
        };
        let missing = SuiteSelection {
            suite: "gone".into(),
            benchmarks: vec![],
            metrics: vec![],
            claims: vec![],
        };
        assert_eq!(
            names(&[one, missing]),
            [("b".into(), vec!["parse".to_string()])]
        );
    }

    #[test]
    fn each_side_runs_first_in_every_other_round() {
        let firsts: Vec<usize> = (1..=4).map(|round| round_order(round)[0]).collect();
        assert_eq!(firsts, [0, 1, 0, 1]);
        for round in 1..=4 {
            let mut both = round_order(round);
            both.sort();
            assert_eq!(both, [0, 1], "both sides run in round {round}");
        }
    }

    #[test]
    fn a_failure_names_the_side_it_happened_on() {
        let outcome = failed(
            "head",
            SuiteFailure {
                error: "suite \"demo\": the run command exited with status 1".into(),
                log_tail: "boom".into(),
            },
        );
        let JobOutcome::Failed { error, log_tail } = outcome else {
            panic!("not a failure");
        };
        assert!(error.starts_with("head: suite"), "{error}");
        assert_eq!(log_tail, "boom");
    }
}
