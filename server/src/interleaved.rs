//! The verdict of a comparison run: a head and its base measured alternately on one machine.
//!
//! Each benchmark × metric the two sides share is judged by the per-commit test of the
//! compare page, with every sample of every round on each side. The noise the test needs
//! (how much two runs of the same code differ) is measured from the rounds themselves: the
//! base's runs, and the head's scaled to the base's level, in the order they ran. They are
//! runs of the same code on the same machine minutes apart, which is what the verdict asks
//! about; the tracked branch's history, measured days apart and maybe elsewhere, is not used.

use std::collections::BTreeMap;

use kymo_core::db::{ComparisonRow, MeasuredBy, RepositoryRow};
use kymo_core::model::Direction;
use kymo_core::protocol::{ComparedRound, SuiteUpload};
use kymo_core::results::validate_suites;
use kymo_core::stats::{CommitObservation, Sensitivity, compare, noise_model};
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
    /// Rounds measured (each: every suite of the base, then every suite of the head).
    pub rounds_run: usize,
    pub report: Option<CompareReport>,
}

/// How many times the run-to-run noise a change must exceed (the compare page uses 4 against a
/// history's noise). Both sides ran under the same conditions in one job and the noise is
/// measured in that job, so the estimate is the right scale and its uncertainty is already in
/// the upper confidence bound taken of it; false alarms are held down by the test's alpha.
/// `scripts/pr-verdict-power.sh` measures what this gives on a machine.
const INTERLEAVED_NOISE_MULTIPLIER: f64 = 2.0;

/// Checks a worker's rounds before they are stored: as many as were asked for, each side's
/// suites valid as a run's are.
pub fn validate_rounds(rounds: &[ComparedRound], asked: i64) -> Result<(), String> {
    if rounds.len() as i64 != asked {
        return Err(format!(
            "{} rounds were sent; {asked} were asked for",
            rounds.len()
        ));
    }
    for (index, round) in rounds.iter().enumerate() {
        for (side, suites) in [("base", &round.base), ("head", &round.head)] {
            validate_suites(suites).map_err(|e| format!("round {}, {side}: {e}", index + 1))?;
        }
    }
    Ok(())
}

/// One benchmark × metric of one side: what it is and what each round measured.
#[derive(Debug, Default)]
struct SideSeries {
    unit: String,
    direction: String,
    /// Per round, the samples (or the single value) of that round's run.
    rounds: Vec<Vec<f64>>,
}

fn by_metric<'a>(
    rounds: impl Iterator<Item = &'a [SuiteUpload]>,
) -> BTreeMap<(String, String), SideSeries> {
    let mut out: BTreeMap<(String, String), SideSeries> = BTreeMap::new();
    for suites in rounds {
        for bench in suites.iter().flat_map(|s| &s.results.benchmarks) {
            for metric in &bench.metrics {
                let entry = out.entry((bench.key(), metric.name.clone())).or_default();
                entry.unit.clone_from(&metric.unit);
                entry.direction = metric.direction.as_str().to_owned();
                entry.rounds.push(if metric.samples.is_empty() {
                    vec![metric.value]
                } else {
                    metric.samples.clone()
                });
            }
        }
    }
    out
}

fn median(values: &[f64]) -> f64 {
    kymo_core::results::median(values).unwrap_or(f64::NAN)
}

/// Judges every benchmark × metric both sides measured, on `machine`. Pure.
pub fn judge_rounds(rounds: &[ComparedRound], machine: &str) -> Vec<CompareRow> {
    let base = by_metric(rounds.iter().map(|r| r.base.as_slice()));
    let head = by_metric(rounds.iter().map(|r| r.head.as_slice()));
    let sensitivity = Sensitivity {
        noise_multiplier: INTERLEAVED_NOISE_MULTIPLIER,
        ..Sensitivity::default()
    };
    let mut rows = Vec::new();
    for (key, b) in &base {
        let Some(h) = head.get(key) else { continue };
        let base_all: Vec<f64> = b.rounds.concat();
        let head_all: Vec<f64> = h.rounds.concat();
        let direction = Direction::parse(&h.direction).unwrap_or(Direction::Lower);
        let noise = noise_model(&round_observations(&b.rounds, &h.rounds));
        let mut verdict = compare(&base_all, &head_all, direction, &noise, &sensitivity);
        verdict.note = rounds_note(&verdict.note, rounds.len());
        rows.push(CompareRow {
            benchmark: key.0.clone(),
            metric: key.1.clone(),
            unit: h.unit.clone(),
            direction: h.direction.clone(),
            machine: machine.to_owned(),
            verdict,
        });
    }
    rows
}

/// A verdict's note in the words of a comparison: its noise comes from the rounds it ran
/// (each side's runs, in order), not from a history of commits, so "short history (5
/// commit-to-commit changes)" said of a repository with 23 measured commits was wrong twice.
fn rounds_note(note: &str, rounds: usize) -> String {
    let Some(rest) = note.strip_prefix("short history (") else {
        return note.to_owned();
    };
    let after = rest.split_once("):").map_or("", |(_, after)| after);
    let after = after.replace("the history's", "the runs'").replace(
        "the history is too short to tell it from noise: more history, or an interleaved \
             re-measure (`kymo try`), decides",
        "too few runs to tell it from noise: more rounds (`--rounds`) decide",
    );
    format!(
        "noise measured from this comparison's {} runs ({rounds} of each side, interleaved):{after}",
        2 * rounds
    )
}

/// The runs of the same code, in the order they ran: each base round, then each head round
/// scaled by base/head (the change under test taken out), so that what varies between them
/// is only how much runs of one piece of code differ on this machine during this job.
fn round_observations(base: &[Vec<f64>], head: &[Vec<f64>]) -> Vec<CommitObservation> {
    let base_level = median(&base.iter().map(|r| median(r)).collect::<Vec<_>>());
    let head_level = median(&head.iter().map(|r| median(r)).collect::<Vec<_>>());
    let scale = if head_level != 0.0 && (base_level / head_level).is_finite() {
        base_level / head_level
    } else {
        1.0
    };
    let mut observations = Vec::with_capacity(base.len() + head.len());
    for i in 0..base.len().max(head.len()) {
        if let Some(b) = base.get(i) {
            observations.push(CommitObservation::from_samples(
                observations.len(),
                b.clone(),
            ));
        }
        if let Some(h) = head.get(i) {
            let scaled = h.iter().map(|v| v * scale).collect();
            observations.push(CommitObservation::from_samples(observations.len(), scaled));
        }
    }
    observations
}

/// A comparison and, once its rounds are in, their verdict.
pub async fn comparison_view(
    state: &AppState,
    repo: &RepositoryRow,
    comparison: ComparisonRow,
) -> AppResult<ComparisonView> {
    // Measured in CI: one run of each side, judged against the runner's stored history.
    let interleaved = comparison.measured == MeasuredBy::Interleaved.as_str();
    let Some(results) = state.db.comparison_results(comparison.id).await? else {
        return Ok(ComparisonView {
            comparison,
            interleaved,
            rounds_run: 0,
            report: None,
        });
    };
    let rounds: Vec<ComparedRound> = serde_json::from_str(&results)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("stored comparison is corrupt: {e}")))?;
    let machine = comparison.machine.clone().unwrap_or_default();
    let (rows, label) = match rounds.first() {
        Some(round) if !interleaved => (
            crate::pulls::ci_verdict::judge_uploaded(state, repo, &comparison, round).await?,
            format!("{}, measured in CI", comparison.baseline),
        ),
        _ => (
            judge_rounds(&rounds, &machine),
            format!(
                "{}, interleaved over {} rounds",
                comparison.baseline,
                rounds.len()
            ),
        ),
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
                    metrics: vec![MetricResult {
                        name: "time".into(),
                        unit: "ns".into(),
                        direction: Direction::Lower,
                        value: median(samples),
                        samples: samples.to_vec(),
                        hdr: None,
                    }],
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
                let side = |level: f64| suite(&wobble.map(|w| level * d * w));
                ComparedRound {
                    base: side(base),
                    head: side(head),
                }
            })
            .collect()
    }

    #[test]
    fn a_head_thirty_percent_slower_is_a_regression_and_the_same_code_is_not() {
        let slower = judge_rounds(&rounds(100.0, 130.0, 0.02), "m");
        assert_eq!(slower.len(), 1);
        assert_eq!(
            slower[0].verdict.kind,
            VerdictKind::Regression,
            "{slower:?}"
        );
        assert!((slower[0].verdict.change_pct - 30.0).abs() < 1.0);
        let same = judge_rounds(&rounds(100.0, 100.0, 0.02), "m");
        assert_eq!(same[0].verdict.kind, VerdictKind::NoChange, "{same:?}");
    }

    #[test]
    fn the_note_speaks_of_the_comparisons_runs_not_of_a_commit_history() {
        let rows = judge_rounds(&rounds(100.0, 100.4, 0.0), "m");
        let note = &rows[0].verdict.note;
        assert!(!note.contains("commit-to-commit"), "{note}");
        assert!(
            note.starts_with("noise measured from this comparison's 6 runs (3 of each side"),
            "{note}"
        );
        let undecided = "short history (5 commit-to-commit changes): the threshold uses the \
                         noise at its upper confidence bound; the change is larger than that \
                         noise and significant, but the history is too short to tell it from \
                         noise: more history, or an interleaved re-measure (`kymo try`), decides";
        let said = rounds_note(undecided, 3);
        assert!(
            said.ends_with("too few runs to tell it from noise: more rounds (`--rounds`) decide"),
            "{said}"
        );
        assert_eq!(rounds_note("", 3), "");
        assert_eq!(rounds_note("no history yet: x", 1), "no history yet: x");
    }

    #[test]
    fn only_what_both_sides_measured_is_judged() {
        let mut rounds = rounds(100.0, 100.0, 0.0);
        for round in &mut rounds {
            round.head[0].results.benchmarks[0].name = "renamed".into();
        }
        assert!(judge_rounds(&rounds, "m").is_empty());
    }

    #[test]
    fn rounds_are_refused_when_their_count_or_contents_are_wrong() {
        let good = rounds(100.0, 100.0, 0.0);
        assert!(validate_rounds(&good, 3).is_ok());
        assert!(validate_rounds(&good, 2).unwrap_err().contains("3 rounds"));
        let mut empty = good.clone();
        empty[1].head.clear();
        let error = validate_rounds(&empty, 3).unwrap_err();
        assert!(error.starts_with("round 2, head"), "{error}");
        let mut nan = good;
        nan[0].base[0].results.benchmarks[0].metrics[0].value = f64::NAN;
        assert!(validate_rounds(&nan, 3).unwrap_err().contains("finite"));
    }
}
