//! What a series' history lets a verdict see: the smallest change the per-commit test would
//! call at the next commit, and, for a series too noisy to see a given change, why (few runs or
//! samples, a heavy tail, two levels the runs jump between, or plain run-to-run noise).

use super::noise::NoiseModel;
use super::robust::{median, sample_sd};
use super::sensitivity::Sensitivity;
use super::threshold::{history_df, upper_bound_multiplier};
use super::within_segments::YOUNG_CHANGES;

/// The smallest slowdown (percent) the per-commit test would call at the next commit of a
/// series with this noise, as `compare` sets its threshold from the history; `None` without
/// any history (nothing can be called).
pub fn per_commit_power_pct(model: &NoiseModel, sensitivity: &Sensitivity) -> Option<f64> {
    if model.changes == 0 || !model.between_commit_pct.is_finite() {
        return None;
    }
    let s = sensitivity.sanitized();
    let k = upper_bound_multiplier(s.noise_multiplier, history_df(model.changes));
    let ratio = (k * model.between_commit_pct / 100.0).min(700.0);
    Some((100.0 * ratio.exp_m1()).max(s.min_effect_pct))
}

/// Why a series is noisy.
#[derive(Debug, Clone, PartialEq)]
pub enum NoiseReason {
    /// Its runs sit at two levels and jump between them.
    Bimodal { low: f64, high: f64 },
    /// A few runs lie far from the rest.
    HeavyTail { worst_pct: f64, typical_pct: f64 },
    /// Too little history to bound the noise tightly.
    ShortHistory { changes: usize },
    /// Too few samples a run to bound the noise tightly (known only where the model saw the
    /// runs' samples; a model of values alone says nothing about them).
    FewSamples { samples: usize },
    /// Runs of the same code simply differ this much.
    RunToRun { pct: f64 },
}

impl NoiseReason {
    /// The reason in words, for the repository page.
    pub fn describe(&self) -> String {
        match self {
            NoiseReason::Bimodal { low, high } => format!(
                "bimodal: its runs jump between two levels ({low:.4} and {high:.4}), {:+.0} % apart",
                (high / low - 1.0) * 100.0
            ),
            NoiseReason::HeavyTail {
                worst_pct,
                typical_pct,
            } => format!(
                "heavy tail: most commits move by about {typical_pct:.1} %, some by \
                 {worst_pct:.0} %"
            ),
            NoiseReason::ShortHistory { changes } => format!(
                "short history: {changes} commit-to-commit change{} bound its noise only loosely",
                if *changes == 1 { "" } else { "s" }
            ),
            NoiseReason::FewSamples { samples } => format!(
                "few samples: {samples} sample{} a run bound its noise only loosely",
                if *samples == 1 { "" } else { "s" }
            ),
            NoiseReason::RunToRun { pct } => {
                format!("runs of the same code differ by about {pct:.1} % from commit to commit")
            }
        }
    }
}

/// Fewest runs whose shape (two levels, a tail) is judged.
const SHAPE_RUNS: usize = 8;

/// Why a series with this noise `model` and these recent run values (oldest first) is noisy.
pub fn noise_reason(model: &NoiseModel, values: &[f64]) -> NoiseReason {
    let values: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if values.len() >= SHAPE_RUNS {
        if let Some((low, high)) = two_levels(&values) {
            return NoiseReason::Bimodal { low, high };
        }
        if let Some((worst_pct, typical_pct)) = heavy_tail(&values) {
            return NoiseReason::HeavyTail {
                worst_pct,
                typical_pct,
            };
        }
    }
    if model.changes < YOUNG_CHANGES {
        return NoiseReason::ShortHistory {
            changes: model.changes,
        };
    }
    // 0: the model was measured from values alone, and knows nothing of the samples.
    if (1..5).contains(&model.samples_per_commit) {
        return NoiseReason::FewSamples {
            samples: model.samples_per_commit,
        };
    }
    NoiseReason::RunToRun {
        pct: model.between_commit_pct,
    }
}

/// The two levels of values that split at one gap into groups of at least a fifth each, the
/// gap at least three times the wider group's spread and 5 % of the lower level.
fn two_levels(values: &[f64]) -> Option<(f64, f64)> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let least = sorted.len().div_ceil(5).max(2);
    let (split, gap) = (least..=sorted.len() - least)
        .map(|i| (i, sorted[i] - sorted[i - 1]))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let (low, high) = sorted.split_at(split);
    let spread = sample_sd(low).max(sample_sd(high));
    let (low, high) = (median(low), median(high));
    (gap > 3.0 * spread && low > 0.0 && gap > 0.05 * low).then_some((low, high))
}

/// The largest commit-to-commit move (percent) when it is at least six robust standard
/// deviations of the moves, with that typical move.
fn heavy_tail(values: &[f64]) -> Option<(f64, f64)> {
    if values.iter().any(|v| *v <= 0.0) {
        return None;
    }
    let mut deviations: Vec<f64> = (values.windows(2))
        .map(|w| (w[1] / w[0]).ln().abs())
        .collect();
    let typical = 1.4826 * median(&deviations);
    deviations.sort_by(f64::total_cmp);
    let worst = *deviations.last()?;
    let pct = |d: f64| 100.0 * d.exp_m1();
    (typical > 0.0 && worst > 6.0 * typical).then(|| (pct(worst), pct(typical)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::noise::{CommitObservation, noise_model};

    fn model_of(values: &[f64]) -> NoiseModel {
        let history: Vec<CommitObservation> = (values.iter().enumerate())
            .map(|(i, v)| CommitObservation::new(i, *v))
            .collect();
        noise_model(&history)
    }

    #[test]
    fn the_power_follows_the_noise_and_the_length_of_the_history() {
        let s = Sensitivity::default();
        let quiet: Vec<f64> = (0..60)
            .map(|i| 100.0 * (1.0 + 0.002 * ((i % 3) as f64 - 1.0)))
            .collect();
        let long_quiet = per_commit_power_pct(&model_of(&quiet), &s).unwrap();
        assert!(long_quiet < 5.0, "{long_quiet}");
        let short = per_commit_power_pct(&model_of(&quiet[..5]), &s).unwrap();
        assert!(short > long_quiet, "{short} {long_quiet}");
        assert_eq!(per_commit_power_pct(&NoiseModel::unknown(), &s), None);
    }

    #[test]
    fn a_series_is_explained_by_its_shape_first() {
        let bimodal: Vec<f64> = (0..30)
            .map(|i| {
                if i % 3 == 0 {
                    4_300.0 + i as f64
                } else {
                    3_400.0 - i as f64
                }
            })
            .collect();
        let reason = noise_reason(&model_of(&bimodal), &bimodal);
        assert!(matches!(reason, NoiseReason::Bimodal { .. }), "{reason:?}");
        assert!(
            reason.describe().starts_with("bimodal"),
            "{}",
            reason.describe()
        );

        let mut tailed: Vec<f64> = (0..30).map(|i| 100.0 + (i % 2) as f64 * 0.5).collect();
        tailed[17] = 180.0;
        let reason = noise_reason(&model_of(&tailed), &tailed);
        assert!(
            matches!(reason, NoiseReason::HeavyTail { .. }),
            "{reason:?}"
        );

        let young = [100.0, 130.0, 90.0, 120.0];
        let reason = noise_reason(&model_of(&young), &young);
        assert!(
            matches!(reason, NoiseReason::ShortHistory { changes: 3 }),
            "{reason:?}"
        );
        assert_eq!(
            reason.describe(),
            "short history: 3 commit-to-commit changes bound its noise only loosely"
        );

        let steady: Vec<f64> = (0..40)
            .map(|i| 100.0 * (1.0 + 0.1 * ((i * 7 % 5) as f64 - 2.0) / 2.0))
            .collect();
        let mut model = model_of(&steady);
        // A model of values alone (as stored for every series) knows no samples: that is no
        // reason to call it few (it once read "0 samples a run").
        model.samples_per_commit = 0;
        let reason = noise_reason(&model, &steady);
        assert!(matches!(reason, NoiseReason::RunToRun { .. }), "{reason:?}");
        model.samples_per_commit = 3;
        let reason = noise_reason(&model, &steady);
        assert_eq!(reason, NoiseReason::FewSamples { samples: 3 });
        assert!(reason.describe().contains("3 samples a run"));
        model.samples_per_commit = 10;
        let reason = noise_reason(&model, &steady);
        assert!(matches!(reason, NoiseReason::RunToRun { .. }), "{reason:?}");
        // Nothing finite: the history decides alone.
        assert!(matches!(
            noise_reason(&model, &[f64::NAN; 3]),
            NoiseReason::RunToRun { .. }
        ));
    }
}
