//! The verdict of a comparison run: a head and its base measured alternately on one machine.
//!
//! Each benchmark × metric the two sides share is judged by the sequential test of
//! [`kymo_core::stats::sequential`] on the rounds themselves: each round's head/base ratio
//! carries the change and how much two runs minutes apart differ on this machine, so the
//! noise comes from this job, not from the tracked branch's history measured days earlier
//! and maybe elsewhere. An adaptive comparison (with a budget) was looked at after some rounds
//! by its worker, which stopped running what was decided; the same function judges its stored
//! rounds here, so the verdict shown is the one the worker stopped on. Instruction counts are
//! judged by whether they repeat.

use kymo_core::db::{ComparisonRow, MeasuredBy, RepositoryRow};
use kymo_core::interleaved::judge_comparison;
use kymo_core::protocol::{ComparedRound, SuiteSelection};
use kymo_core::results::validate_suites;
use kymo_core::stats::sequential::SequentialPlan;
use serde::Serialize;

use crate::compare::{CompareReport, CompareRow, summarise};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// A comparison with its verdict, once measured: what the API, the page and `kymo try` show.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ComparisonView {
    pub comparison: ComparisonRow,
    /// Both sides were measured alternately on one machine by a kymo worker; false for a
    /// pull request measured in CI (`comparison.measured` says how).
    pub interleaved: bool,
    /// Rounds measured (each: every suite of the base, then every suite of the head; after
    /// the first looks of an adaptive comparison, only its undecided benchmarks).
    pub rounds_run: usize,
    pub report: Option<CompareReport>,
}

/// How a comparison's rounds are judged: sequentially up to its most rounds when it has a
/// budget, once after exactly its rounds otherwise.
pub fn plan_of(rounds: i64, budget_seconds: Option<i64>) -> SequentialPlan {
    let rounds = rounds.max(1) as usize;
    match budget_seconds {
        Some(_) => SequentialPlan::adaptive(rounds),
        None => SequentialPlan::fixed(rounds),
    }
}

/// A comparison's rounds as stored, with the plan and selection they are judged by.
pub struct Stored {
    pub plan: SequentialPlan,
    /// What it measures, with the changes its confirmations claim.
    pub selection: Vec<SuiteSelection>,
    /// `None` until its worker sent them.
    pub rounds: Option<Vec<ComparedRound>>,
}

/// Reads a comparison's rounds, plan and selection in one query; `None` for an unknown id.
pub async fn stored(state: &AppState, id: i64) -> AppResult<Option<Stored>> {
    let Some(stored) = state.db.stored_comparison(id).await? else {
        return Ok(None);
    };
    let rounds = (stored.results.as_deref())
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("stored comparison is corrupt: {e}")))?;
    Ok(Some(Stored {
        plan: plan_of(stored.rounds, stored.budget_seconds),
        selection: stored.selection,
        rounds,
    }))
}

/// Checks a worker's rounds before they are stored: as many as were asked for (an adaptive
/// comparison may stop sooner, never later), each side's suites valid as a run's are.
pub fn validate_rounds(rounds: &[ComparedRound], asked: i64, adaptive: bool) -> Result<(), String> {
    let count = rounds.len() as i64;
    let fits = if adaptive {
        (1..=asked).contains(&count)
    } else {
        count == asked
    };
    if !fits {
        let expected = if adaptive {
            format!("1 to {asked} were allowed")
        } else {
            format!("{asked} were asked for")
        };
        return Err(format!("{count} rounds were sent; {expected}"));
    }
    for (index, round) in rounds.iter().enumerate() {
        for (side, suites) in [("base", &round.base), ("head", &round.head)] {
            validate_suites(suites).map_err(|e| format!("round {}, {side}: {e}", index + 1))?;
        }
    }
    Ok(())
}

/// Judges every benchmark × metric both sides measured, on `machine`, by `plan` (and the
/// changes `selection` claims, a confirmation's, by the plan that refutes them). Pure.
pub fn judge_rounds(
    rounds: &[ComparedRound],
    machine: &str,
    plan: &SequentialPlan,
    selection: &[SuiteSelection],
) -> Vec<CompareRow> {
    (judge_comparison(rounds, plan, selection, true).into_iter())
        .map(|m| CompareRow {
            benchmark: m.benchmark,
            metric: m.metric,
            unit: m.unit,
            direction: m.direction.as_str().to_owned(),
            machine: machine.to_owned(),
            verdict: m.judged.verdict,
        })
        .collect()
}

/// A comparison and, once its rounds are in, their verdict.
pub async fn comparison_view(
    state: &AppState,
    repo: &RepositoryRow,
    comparison: ComparisonRow,
) -> AppResult<ComparisonView> {
    // Measured in CI: one run of each side, judged against the runner's stored history.
    let interleaved = comparison.measured == MeasuredBy::Interleaved.as_str();
    let Some(Stored {
        plan,
        selection,
        rounds: Some(rounds),
    }) = stored(state, comparison.id).await?
    else {
        return Ok(ComparisonView {
            comparison,
            interleaved,
            rounds_run: 0,
            report: None,
        });
    };
    let machine = comparison.machine.clone().unwrap_or_default();
    let (rows, label) = match rounds.first() {
        Some(round) if !interleaved => (
            crate::pulls::ci_verdict::judge_uploaded(state, repo, &comparison, round).await?,
            format!("{}, measured in CI", comparison.baseline),
        ),
        _ => {
            let label = format!(
                "{}, interleaved over {} rounds",
                comparison.baseline,
                rounds.len()
            );
            (judge_rounds(&rounds, &machine, &plan, &selection), label)
        }
    };
    let report = summarise(
        repo,
        comparison.base.clone(),
        comparison.head.clone(),
        label,
        rows,
    );
    Ok(ComparisonView {
        rounds_run: rounds.len(),
        comparison,
        interleaved,
        report: Some(report),
    })
}

#[cfg(test)]
mod tests {
    use kymo_core::protocol::SuiteUpload;
    use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};
    use kymo_core::stats::VerdictKind;

    use super::*;

    fn suite(samples: &[f64]) -> Vec<SuiteUpload> {
        vec![SuiteUpload {
            suite: "demo".into(),
            results: SuiteResults {
                benchmarks: vec![BenchmarkResult {
                    name: "parse".into(),
                    params: Default::default(),
                    metrics: vec![MetricResult::time_ns(samples[2], samples.to_vec())],
                }],
            },
        }]
    }

    /// Three rounds whose levels drift by `drift` per round on both sides alike.
    fn rounds(base: f64, head: f64, drift: f64) -> Vec<ComparedRound> {
        (0..3)
            .map(|i| {
                let d = 1.0 + drift * i as f64;
                let wobble = [0.99, 1.0, 1.01, 1.005, 0.995];
                let jitter = 1.0 + 0.01 * (i % 2) as f64;
                let side = |level: f64, j: f64| suite(&wobble.map(|w| level * d * w * j));
                ComparedRound {
                    base: side(base, 1.0),
                    head: side(head, jitter),
                }
            })
            .collect()
    }

    #[test]
    fn a_head_thirty_percent_slower_is_a_regression_and_the_same_code_is_not() {
        let plan = plan_of(3, None);
        let slower = judge_rounds(&rounds(100.0, 130.0, 0.02), "m", &plan, &[]);
        assert_eq!(slower.len(), 1);
        assert_eq!(
            slower[0].verdict.kind,
            VerdictKind::Regression,
            "{slower:?}"
        );
        assert!((slower[0].verdict.change_pct - 30.0).abs() < 1.0);
        let same = judge_rounds(&rounds(100.0, 100.0, 0.02), "m", &plan, &[]);
        assert_ne!(same[0].verdict.kind, VerdictKind::Regression, "{same:?}");
        assert!(same[0].verdict.detectable_pct.is_some(), "{same:?}");
    }

    #[test]
    fn the_note_speaks_of_the_comparisons_rounds_not_of_a_commit_history() {
        // `kymo try` once said "short history (5 commit-to-commit changes)" of a repository
        // with 23 measured commits: a comparison's noise comes from its own rounds.
        let rows = judge_rounds(&rounds(100.0, 100.4, 0.0), "m", &plan_of(3, None), &[]);
        let note = &rows[0].verdict.note;
        assert!(
            !note.contains("commit-to-commit") && !note.contains("short history"),
            "{note}"
        );
    }

    #[test]
    fn only_what_both_sides_measured_is_judged() {
        let mut rounds = rounds(100.0, 100.0, 0.0);
        for round in &mut rounds {
            round.head[0].results.benchmarks[0].name = "renamed".into();
        }
        assert!(judge_rounds(&rounds, "m", &plan_of(3, None), &[]).is_empty());
    }

    #[test]
    fn rounds_are_refused_when_their_count_or_contents_are_wrong() {
        let good = rounds(100.0, 100.0, 0.0);
        assert!(validate_rounds(&good, 3, false).is_ok());
        assert!(
            validate_rounds(&good, 2, false)
                .unwrap_err()
                .contains("3 rounds")
        );
        // An adaptive comparison may stop before its most rounds, never after.
        assert!(validate_rounds(&good, 20, true).is_ok());
        let error = validate_rounds(&good, 2, true).unwrap_err();
        assert!(error.contains("1 to 2"), "{error}");
        assert!(validate_rounds(&[], 20, true).is_err());
        let mut empty = good.clone();
        empty[1].head.clear();
        let error = validate_rounds(&empty, 3, false).unwrap_err();
        assert!(error.starts_with("round 2, head"), "{error}");
        let mut nan = good;
        nan[0].base[0].results.benchmarks[0].metrics[0].value = f64::NAN;
        assert!(
            validate_rounds(&nan, 3, false)
                .unwrap_err()
                .contains("finite")
        );
    }
}
