//! The noise model of one series (repository × benchmark × metric × machine fingerprint):
//! how much a commit's value moves when nothing changed.
//!
//! Two sources are measured separately because they differ: the spread of samples within one
//! run, and the spread between commits, which adds everything that changes from one run to
//! the next (process layout, frequency, the machine's other work). Thresholds use the second;
//! tests that looked only at within-run samples would raise alarms on run-to-run noise.

use serde::Serialize;

use crate::model::Direction;

use super::location::run_location;
use super::robust::{MAD_TO_SD, mad_in_place, median, median_in_place, sample_sd};
use super::within_segments::segment_spread;

/// Fewest commit-to-commit changes (within segments) from which the between-commit spread is
/// used at all: one change is two runs of the same code. How little such a short history
/// says is accounted for by the verdict's threshold, which uses the spread's upper
/// confidence bound.
pub const MIN_HISTORY_CHANGES: usize = 1;

/// One commit of a series, in first-parent history order (oldest first).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitObservation {
    /// The caller's position of the commit in history; carried along, never interpreted.
    pub position: usize,
    /// The commit's value (for example the median of its samples).
    pub value: f64,
    /// The raw samples of the commit's run, when the benchmark reported them.
    pub samples: Vec<f64>,
}

impl CommitObservation {
    /// An observation with a single value and no samples.
    pub fn new(position: usize, value: f64) -> Self {
        Self {
            position,
            value,
            samples: Vec::new(),
        }
    }

    /// An observation whose value is the median of its (finite) samples.
    pub fn from_samples(position: usize, samples: Vec<f64>) -> Self {
        let finite: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
        Self {
            position,
            value: median(&finite),
            samples,
        }
    }

    /// An observation of a run's samples standing for their location as verdicts see it
    /// ([`run_location`]): the fast end of many samples, the median of few.
    pub fn from_run(position: usize, samples: Vec<f64>, direction: Direction) -> Self {
        Self {
            position,
            value: run_location(&samples, direction),
            samples,
        }
    }
}

/// How noisy a series is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NoiseModel {
    /// Typical magnitude of the series (median of |value|), the reference for percentages.
    pub level: f64,
    /// Standard deviation of the change from one commit to the next, in the metric's unit
    /// at `level`, measured within the series' segments (its own steps left out, see
    /// `within_segments`) and, for positive series, in relative terms so that the spread of
    /// an old level does not leak into a new one. Short histories (fewer than
    /// [`YOUNG_CHANGES`](super::YOUNG_CHANGES) changes) use the root mean square of the
    /// changes; longer ones the larger of two normal-matched robust estimates, one at the
    /// median of their absolute deviations (1.4826 × MAD) and one at the 90th percentile, so
    /// that bimodal or heavy-tailed noise is not underestimated.
    pub between_commit_sd: f64,
    /// `between_commit_sd` as a percentage of `level` (0 when the level is 0).
    pub between_commit_pct: f64,
    /// Median coefficient of variation of the samples within one run, in percent; `None`
    /// when no commit has two or more samples.
    pub within_run_cv_pct: Option<f64>,
    /// Number of commit-to-commit changes measured (within segments).
    pub changes: usize,
    /// Median number of samples per commit (0 without samples).
    pub samples_per_commit: usize,
}

impl NoiseModel {
    /// The model of a series with no history: nothing is known.
    pub fn unknown() -> Self {
        Self {
            level: 0.0,
            between_commit_sd: 0.0,
            between_commit_pct: 0.0,
            within_run_cv_pct: None,
            changes: 0,
            samples_per_commit: 0,
        }
    }

    /// Whether enough history was seen to trust the between-commit spread.
    pub fn has_history(&self) -> bool {
        self.changes >= MIN_HISTORY_CHANGES
    }

    /// The commit-to-commit standard deviation expected around `baseline`, in the metric's
    /// unit, or `None` without enough history.
    ///
    /// Benchmark noise is mostly proportional to the value, so when the series sits clearly
    /// away from zero the relative spread is applied to `baseline` (a 2× slower benchmark
    /// is about 2× noisier); near zero the absolute spread is used.
    pub fn between_commit_sd_at(&self, baseline: f64) -> Option<f64> {
        if !self.has_history() {
            return None;
        }
        let proportional = self.level > 3.0 * self.between_commit_sd && self.level > 0.0;
        let sd = if proportional {
            self.between_commit_sd * (baseline.abs() / self.level)
        } else {
            self.between_commit_sd
        };
        sd.is_finite().then_some(sd)
    }
}

impl Default for NoiseModel {
    fn default() -> Self {
        Self::unknown()
    }
}

/// Measures the noise of a series from its history: the spread between consecutive commits
/// and the spread of samples within each run. Non-finite values and samples are ignored.
/// Pass recent history (for example the last 100 first-parent commits) so that the model
/// follows the machine as it is today.
pub fn noise_model(series: &[CommitObservation]) -> NoiseModel {
    let values: Vec<f64> = series
        .iter()
        .map(|o| o.value)
        .filter(|v| v.is_finite())
        .collect();
    let mut magnitudes: Vec<f64> = values.iter().map(|v| v.abs()).collect();
    let level = median_in_place(&mut magnitudes);
    let spread = segment_spread(&values);
    let between_commit_sd = if spread.relative {
        (spread.sd * level).min(f64::MAX)
    } else {
        spread.sd
    };

    let mut within_cvs = Vec::new();
    let mut sample_counts = Vec::with_capacity(series.len());
    for observation in series {
        let samples: Vec<f64> = observation
            .samples
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        sample_counts.push(samples.len() as f64);
        if samples.len() >= 2 {
            let center = median(&samples).abs();
            if center > 0.0 {
                let cv = 100.0 * (within_run_sd(&samples) / center);
                if cv.is_finite() {
                    within_cvs.push(cv);
                }
            }
        }
    }
    let between_commit_pct = if spread.relative {
        (100.0 * spread.sd).min(f64::MAX)
    } else if level > 0.0 {
        let pct = 100.0 * (between_commit_sd / level);
        if pct.is_finite() { pct } else { f64::MAX }
    } else {
        0.0
    };
    NoiseModel {
        level,
        between_commit_sd,
        between_commit_pct,
        within_run_cv_pct: (!within_cvs.is_empty()).then(|| median_in_place(&mut within_cvs)),
        changes: spread.changes,
        samples_per_commit: median_in_place(&mut sample_counts).round() as usize,
    }
}

/// Robust standard deviation of `values`: 1.4826 × MAD. Deterministic metrics (instruction
/// counts) often repeat one value, making the MAD zero; then the mean absolute deviation
/// still sees the few values that differ. Reorders `values`.
pub(crate) fn robust_sd(values: &mut [f64]) -> f64 {
    // Working in units of the largest magnitude keeps deviations finite near f64::MAX.
    let scale = values.iter().fold(0.0, |m: f64, v| m.max(v.abs()));
    if values.is_empty() || scale == 0.0 || !scale.is_finite() {
        return 0.0;
    }
    for v in values.iter_mut() {
        *v /= scale;
    }
    let n = values.len() as f64;
    let center = median_in_place(values);
    let mean_abs = values.iter().map(|v| (v - center).abs() / n).sum::<f64>();
    let mad = mad_in_place(values);
    let sd = if mad > 0.0 {
        MAD_TO_SD * mad
    } else {
        // For normal data the mean absolute deviation is √(2/π) σ.
        mean_abs * (std::f64::consts::PI / 2.0).sqrt()
    };
    (sd * scale).min(f64::MAX)
}

/// The larger of 1.4826 × MAD and the 90th percentile of absolute deviations from the
/// median over 1.6449 (both equal σ for normal data). Reorders `values`.
pub(crate) fn tail_matched_sd(values: &mut [f64]) -> f64 {
    let scale = values.iter().fold(0.0, |m: f64, v| m.max(v.abs()));
    if values.len() < 2 || scale == 0.0 || !scale.is_finite() {
        return robust_sd(values);
    }
    let center = median(values);
    let mut deviations: Vec<f64> = values
        .iter()
        .map(|v| (v / scale - center / scale).abs())
        .collect();
    let rank = ((deviations.len() - 1) as f64 * 0.9).round() as usize;
    let (_, q90, _) = deviations.select_nth_unstable_by(rank, f64::total_cmp);
    let tail_based = (*q90 / 1.644_853_626_951_472 * scale).min(f64::MAX);
    robust_sd(values).max(tail_based)
}

/// Spread of the samples of one run: the robust estimate when there are enough samples for
/// it to be stable, the ordinary one otherwise (a MAD of three values is mostly luck).
pub(crate) fn within_run_sd(samples: &[f64]) -> f64 {
    if samples.len() >= 10 {
        let sd = robust_sd(&mut samples.to_vec());
        if sd > 0.0 {
            return sd;
        }
    }
    sample_sd(samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::synthetic::Rng;

    fn series(values: &[f64]) -> Vec<CommitObservation> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| CommitObservation::new(i, v))
            .collect()
    }

    #[test]
    fn between_commit_noise_recovers_the_generating_sigma() {
        let mut rng = Rng::new(7);
        let values: Vec<f64> = (0..2000).map(|_| 1000.0 + 20.0 * rng.normal()).collect();
        let model = noise_model(&series(&values));
        // Consecutive differences have σ·√2 = 28.3.
        assert!(
            (model.between_commit_sd / 28.28 - 1.0).abs() < 0.1,
            "{model:?}"
        );
        assert!((model.between_commit_pct - 2.828).abs() < 0.3);
        assert!(model.has_history());
        assert_eq!(model.within_run_cv_pct, None);
    }

    #[test]
    fn steps_and_spikes_barely_move_the_noise() {
        let mut rng = Rng::new(8);
        let mut values: Vec<f64> = (0..300).map(|_| 100.0 + rng.normal()).collect();
        for v in &mut values[150..] {
            *v += 50.0;
        }
        values[40] += 200.0;
        let model = noise_model(&series(&values));
        // Relative noise is 1.41 % at 100 and 0.94 % at 150; the step is left out.
        assert!(
            model.between_commit_pct > 0.9 && model.between_commit_pct < 1.5,
            "{model:?}"
        );
        assert_eq!(model.changes, 298);
    }

    #[test]
    fn bimodal_noise_is_not_underestimated() {
        // 30 % of commits land in a second mode 5σ away: consecutive differences have a
        // standard deviation of √(2 + 2·0.21·25)·σ = 3.55σ. The MAD alone says about 3.2σ;
        // the 90th-percentile match sees the tails.
        let mut rng = Rng::new(11);
        let values: Vec<f64> = (0..3000)
            .map(|_| 100.0 + rng.normal() + if rng.uniform() < 0.3 { 5.0 } else { 0.0 })
            .collect();
        let model = noise_model(&series(&values));
        let mut changes: Vec<f64> = values.windows(2).map(|w| w[1] - w[0]).collect();
        let mad_based = robust_sd(&mut changes);
        assert!(
            model.between_commit_sd > 1.1 * mad_based,
            "{model:?} vs {mad_based}"
        );
        assert!(
            (model.between_commit_sd / 3.55 - 1.0).abs() < 0.1,
            "{model:?}"
        );
    }

    #[test]
    fn within_run_spread_comes_from_the_samples() {
        let mut rng = Rng::new(9);
        let observations: Vec<CommitObservation> = (0..50)
            .map(|i| {
                let samples = (0..20)
                    .map(|_| 200.0 * (1.0 + 0.03 * rng.normal()))
                    .collect();
                CommitObservation::from_samples(i, samples)
            })
            .collect();
        let model = noise_model(&observations);
        let cv = model.within_run_cv_pct.unwrap();
        assert!((cv - 3.0).abs() < 0.6, "{cv}");
        assert_eq!(model.samples_per_commit, 20);
    }

    #[test]
    fn degenerate_histories_are_handled() {
        assert_eq!(noise_model(&[]), NoiseModel::unknown());
        let one = noise_model(&series(&[5.0]));
        assert_eq!(one.changes, 0);
        assert!(!one.has_history());
        let constant = noise_model(&series(&[7.0; 40]));
        assert_eq!(constant.between_commit_sd, 0.0);
        assert_eq!(constant.between_commit_sd_at(7.0), Some(0.0));
        // Mostly identical values with rare differences: the MAD is 0, the noise is not.
        let mut values = vec![1000.0; 100];
        values[10] = 1001.0;
        values[60] = 999.0;
        assert!(noise_model(&series(&values)).between_commit_sd > 0.0);
        let zeros = noise_model(&series(&[0.0; 20]));
        assert_eq!(zeros.between_commit_pct, 0.0);
        let huge = noise_model(&series(&[1e308, -1e308, 1e308, -1e308, f64::NAN]));
        assert!(huge.between_commit_sd.is_finite() && huge.between_commit_sd > 1e308);
        assert!(huge.between_commit_pct.is_finite());
        assert_eq!(huge.changes, 3);
    }

    #[test]
    fn noise_scales_with_the_baseline_when_away_from_zero() {
        let mut rng = Rng::new(10);
        let values: Vec<f64> = (0..100).map(|_| 100.0 + rng.normal()).collect();
        let model = noise_model(&series(&values));
        let at_double = model.between_commit_sd_at(200.0).unwrap();
        assert!((at_double / model.between_commit_sd - 2.0).abs() < 0.05);
        assert_eq!(NoiseModel::unknown().between_commit_sd_at(100.0), None);
    }
}
