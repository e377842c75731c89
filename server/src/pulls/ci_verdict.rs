//! The verdict of a pull request measured in CI: one run of each side, judged by the compare
//! page's per-commit test against the noise of the history that the runner's machine
//! fingerprint has stored (one CI run of each side cannot show on its own how much two runs of
//! the same code differ).

use std::collections::HashMap;

use kymo_core::db::{ComparisonRow, RepositoryRow};
use kymo_core::model::Direction;
use kymo_core::protocol::ComparedRound;
use kymo_core::results::MetricResult;
use kymo_core::stats::{NoiseModel, Sensitivity, compare};

use crate::compare::CompareRow;
use crate::error::AppResult;
use crate::state::AppState;

/// One benchmark × metric both sides of an uploaded comparison measured.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredPair {
    pub benchmark: String,
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
    pub base: Vec<f64>,
    pub head: Vec<f64>,
}

/// Pairs what both sides measured, by benchmark (with its parameters) and metric. Pure.
pub fn measured_pairs(round: &ComparedRound) -> Vec<MeasuredPair> {
    let values = |m: &MetricResult| {
        if m.samples.is_empty() {
            vec![m.value]
        } else {
            m.samples.clone()
        }
    };
    let mut base: HashMap<(String, String), Vec<f64>> = HashMap::new();
    for bench in round.base.iter().flat_map(|s| &s.results.benchmarks) {
        for metric in &bench.metrics {
            base.insert((bench.key(), metric.name.clone()), values(metric));
        }
    }
    let mut pairs = Vec::new();
    for bench in round.head.iter().flat_map(|s| &s.results.benchmarks) {
        for metric in &bench.metrics {
            let key = (bench.key(), metric.name.clone());
            if let Some(base) = base.get(&key) {
                pairs.push(MeasuredPair {
                    benchmark: key.0,
                    metric: key.1,
                    unit: metric.unit.clone(),
                    direction: metric.direction,
                    base: base.clone(),
                    head: values(metric),
                });
            }
        }
    }
    pairs.sort_by(|a, b| (&a.benchmark, &a.metric).cmp(&(&b.benchmark, &b.metric)));
    pairs
}

/// Judges each pair by the per-commit test against its series' noise on `machine` (unknown
/// without a history: then no change is called from one run of each side). Pure.
pub fn judge_pairs(
    pairs: Vec<MeasuredPair>,
    noise: &HashMap<(String, String), NoiseModel>,
    machine: &str,
) -> Vec<CompareRow> {
    let sensitivity = Sensitivity::default();
    pairs
        .into_iter()
        .map(|pair| {
            let model = (noise.get(&(pair.benchmark.clone(), pair.metric.clone())))
                .copied()
                .unwrap_or_else(NoiseModel::unknown);
            let verdict = compare(&pair.base, &pair.head, pair.direction, &model, &sensitivity);
            CompareRow {
                benchmark: pair.benchmark,
                metric: pair.metric,
                unit: pair.unit,
                direction: pair.direction.as_str().to_owned(),
                machine: machine.to_owned(),
                verdict,
            }
        })
        .collect()
}

/// The rows of an uploaded comparison: its pairs judged against the noise of the history
/// its machine stored, up to its base.
pub async fn judge_uploaded(
    state: &AppState,
    repo: &RepositoryRow,
    comparison: &ComparisonRow,
    round: &ComparedRound,
) -> AppResult<Vec<CompareRow>> {
    let machine = comparison.machine.clone().unwrap_or_default();
    let pairs = measured_pairs(round);
    let series = (state.db)
        .series(repo.id, None, None, Some(machine.as_str()))
        .await?;
    let wanted: HashMap<(String, String), i64> = series
        .into_iter()
        .map(|s| ((s.benchmark, s.metric), s.id))
        .filter(|(key, _)| {
            pairs
                .iter()
                .any(|p| (&p.benchmark, &p.metric) == (&key.0, &key.1))
        })
        .collect();
    let ids: Vec<i64> = wanted.values().copied().collect();
    let base_position = state.db.commit(repo.id, &comparison.base).await?.position;
    let models =
        crate::compare::noise_models(state, repo.id, base_position.map(|p| p + 1), &ids).await?;
    let noise = wanted
        .into_iter()
        .filter_map(|(key, id)| models.get(&id).map(|model| (key, *model)))
        .collect();
    Ok(judge_pairs(pairs, &noise, &machine))
}

#[cfg(test)]
mod tests {
    use kymo_core::protocol::SuiteUpload;
    use kymo_core::results::{BenchmarkResult, SuiteResults};
    use kymo_core::stats::{VerdictKind, noise_of_values};

    use super::*;

    fn side(benchmarks: &[(&str, &str, f64)]) -> Vec<SuiteUpload> {
        let benchmarks = benchmarks
            .iter()
            .map(|(name, size, level)| BenchmarkResult {
                name: (*name).into(),
                params: [("size".to_owned(), (*size).to_owned())].into(),
                metrics: vec![MetricResult::time_ns(
                    *level,
                    [0.99, 1.0, 1.01, 1.005, 0.995].map(|w| level * w).to_vec(),
                )],
            })
            .collect();
        vec![SuiteUpload {
            suite: "s".into(),
            results: SuiteResults { benchmarks },
        }]
    }

    /// A history of 30 commits at 100 with 1 % noise.
    fn history() -> NoiseModel {
        let values: Vec<(i64, f64)> = (0..30)
            .map(|i| (i, 100.0 * (1.0 + ((i * 7) % 5) as f64 / 200.0 - 0.01)))
            .collect();
        noise_of_values(&values)
    }

    #[test]
    fn pairs_are_what_both_sides_measured_by_name_and_parameters() {
        let round = ComparedRound {
            base: side(&[("parse", "16", 100.0), ("gone", "16", 5.0)]),
            head: side(&[
                ("parse", "16", 130.0),
                ("new", "16", 5.0),
                ("parse", "32", 1.0),
            ]),
        };
        let pairs = measured_pairs(&round);
        assert_eq!(pairs.len(), 1, "{pairs:?}");
        assert_eq!(pairs[0].benchmark, "parse{size=16}");
        assert_eq!(pairs[0].head.len(), 5);
    }

    #[test]
    fn a_thirty_percent_slower_head_regresses_against_a_runners_history_and_a_fix_does_not() {
        let noise: HashMap<_, _> =
            [(("parse{size=16}".to_owned(), "time".to_owned()), history())].into();
        let judge = |head: f64| {
            let round = ComparedRound {
                base: side(&[("parse", "16", 100.0)]),
                head: side(&[("parse", "16", head)]),
            };
            judge_pairs(measured_pairs(&round), &noise, "m")[0]
                .verdict
                .kind
        };
        assert_eq!(judge(130.0), VerdictKind::Regression);
        assert_eq!(judge(100.2), VerdictKind::NoChange);
        assert_eq!(judge(70.0), VerdictKind::Improvement);
    }

    #[test]
    fn without_a_history_of_the_runner_one_run_of_each_side_calls_no_change() {
        let round = ComparedRound {
            base: side(&[("parse", "16", 100.0)]),
            head: side(&[("parse", "16", 130.0)]),
        };
        let rows = judge_pairs(measured_pairs(&round), &HashMap::new(), "m");
        assert_eq!(rows[0].verdict.kind, VerdictKind::Inconclusive);
        assert!(
            rows[0].verdict.note.contains("no history"),
            "{:?}",
            rows[0].verdict
        );
    }
}
