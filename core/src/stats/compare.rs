//! The per-commit test: a commit's values against a baseline's (its parent, a pinned commit,
//! a merge base).
//!
//! A change is reported only when it is both significant and large: significant by a
//! Mann-Whitney test when both sides have samples (or against the series' commit-to-commit
//! noise when a side has a single value), and larger than max(min_effect_pct,
//! noise_multiplier × commit-to-commit noise). The second condition is what samples from a
//! single run cannot provide: two runs of the same code differ by more than the samples
//! within one run suggest, so a significant 1 % shift on a series that moves 2 % from
//! commit to commit is not evidence of a regression.

use crate::model::Direction;

use super::distribution::{students_t_quantile, students_t_sf};
use super::mann_whitney::{mann_whitney, shift_interval};
use super::noise::{NoiseModel, within_run_sd};
use super::robust::{PercentBase, median};
use super::sensitivity::Sensitivity;
use super::verdict::{Verdict, VerdictKind};

/// Fewest samples on each side for the rank test to take precedence over history: five
/// against five is the smallest design whose exact p-value can go below 0.01.
const MIN_RANK_SAMPLES: usize = 5;

/// Compares `head` (the commit's samples, or its single value) with `base` (the baseline's).
///
/// `noise` is the model of the series' history before `head`. Non-finite values are ignored.
/// Deterministic: the same input always gives the same verdict.
pub fn compare(
    base: &[f64],
    head: &[f64],
    direction: Direction,
    noise: &NoiseModel,
    sensitivity: &Sensitivity,
) -> Verdict {
    let s = sensitivity.sanitized();
    let base: Vec<f64> = base.iter().copied().filter(|v| v.is_finite()).collect();
    let head: Vec<f64> = head.iter().copied().filter(|v| v.is_finite()).collect();
    let baseline = median(&base);
    let value = median(&head);
    let reference = PercentBase::new(baseline, value);
    let mut verdict = Verdict {
        kind: VerdictKind::Inconclusive,
        baseline,
        value,
        change_pct: 0.0,
        ci_low_pct: 0.0,
        ci_high_pct: 0.0,
        p_value: None,
        noise_pct: 0.0,
        threshold_pct: s.min_effect_pct,
        base_samples: base.len(),
        head_samples: head.len(),
        method: "no-data",
    };
    if base.is_empty() || head.is_empty() {
        return verdict;
    }

    let delta = (value - baseline).clamp(-f64::MAX, f64::MAX);
    verdict.change_pct = reference.percent(delta);
    let history_sd = noise.between_commit_sd_at(baseline);
    let samples_sd =
        (base.len() >= 2 && head.len() >= 2).then(|| median_difference_sd(&base, &head));
    if let Some(sd) = history_sd.or(samples_sd) {
        verdict.noise_pct = reference.percent(sd).abs();
    }
    verdict.threshold_pct = s
        .min_effect_pct
        .max(s.noise_multiplier * verdict.noise_pct)
        .min(f64::MAX);

    let both_sampled = base.len() >= MIN_RANK_SAMPLES && head.len() >= MIN_RANK_SAMPLES;
    let some_samples = base.len() >= 2 && head.len() >= 2;
    if both_sampled || (history_sd.is_none() && some_samples) {
        let test = mann_whitney(&head, &base);
        let (low, high) = shift_interval(&base, &head, 1.0 - s.alpha);
        verdict.p_value = Some(test.p_value);
        verdict.ci_low_pct = reference.percent(low);
        verdict.ci_high_pct = reference.percent(high);
        verdict.method = "mann-whitney";
    } else if let Some(sd) = history_sd {
        // One value on a side: the difference of two commits, judged by the spread of
        // differences between consecutive commits, with t quantiles for the estimated spread.
        let df = noise.changes.saturating_sub(1).max(1) as f64;
        let (p, half_width) = if sd > 0.0 {
            let t = delta / sd;
            let half_width = students_t_quantile(1.0 - s.alpha / 2.0, df) * sd;
            ((2.0 * students_t_sf(t.abs(), df)).min(1.0), half_width)
        } else {
            (if delta == 0.0 { 1.0 } else { 0.0 }, 0.0)
        };
        verdict.p_value = Some(p);
        verdict.ci_low_pct = reference.percent(delta - half_width);
        verdict.ci_high_pct = reference.percent(delta + half_width);
        verdict.method = "history-noise";
    } else {
        verdict.ci_low_pct = verdict.change_pct;
        verdict.ci_high_pct = verdict.change_pct;
        verdict.method = "effect-only";
    }

    let large = delta != 0.0 && verdict.change_pct.abs() >= verdict.threshold_pct;
    verdict.kind = match verdict.p_value {
        _ if !large => VerdictKind::NoChange,
        Some(p) if p < s.alpha => VerdictKind::of_change(delta, direction),
        _ => VerdictKind::Inconclusive,
    };
    verdict
}

/// Standard deviation of the difference of the two medians implied by the spread within
/// each run (a median of n normal values has about 1.2533·σ/√n).
fn median_difference_sd(base: &[f64], head: &[f64]) -> f64 {
    let term = |v: &[f64]| (within_run_sd(v) * 1.2533).powi(2) / v.len() as f64;
    (term(base) + term(head)).sqrt().min(f64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::noise::{CommitObservation, noise_model};
    use crate::stats::synthetic::{Rng, noisy};

    fn samples(rng: &mut Rng, n: usize, level: f64, cv: f64) -> Vec<f64> {
        (0..n).map(|_| level * (1.0 + cv * rng.normal())).collect()
    }

    fn history(rng: &mut Rng, cv: f64) -> NoiseModel {
        noise_model(&noisy(rng, 60, 100.0, cv))
    }

    #[test]
    fn a_clear_slowdown_is_a_regression_and_its_evidence_is_kept() {
        let mut rng = Rng::new(1);
        let noise = history(&mut rng, 0.01);
        let base = samples(&mut rng, 20, 100.0, 0.01);
        let head = samples(&mut rng, 20, 110.0, 0.01);
        let v = compare(
            &base,
            &head,
            Direction::Lower,
            &noise,
            &Sensitivity::default(),
        );
        assert_eq!(v.kind, VerdictKind::Regression, "{v:?}");
        assert_eq!(v.method, "mann-whitney");
        assert!((v.change_pct - 10.0).abs() < 1.5);
        assert!(v.ci_low_pct < v.change_pct && v.change_pct < v.ci_high_pct && v.ci_low_pct > 5.0);
        assert!(v.p_value.unwrap() < 1e-6);
        assert!((v.noise_pct - 1.41).abs() < 0.5, "{v:?}");
        assert_eq!((v.base_samples, v.head_samples), (20, 20));
        let better = compare(
            &base,
            &head,
            Direction::Higher,
            &noise,
            &Sensitivity::default(),
        );
        assert_eq!(better.kind, VerdictKind::Improvement);
    }

    #[test]
    fn run_to_run_noise_outweighs_tight_samples() {
        // Samples within each run agree to 0.1 %, but commits move 2 % from run to run: a
        // significant 2 % shift between two runs is noise, not a regression.
        let mut rng = Rng::new(2);
        let noise = history(&mut rng, 0.02);
        let base = samples(&mut rng, 30, 100.0, 0.001);
        let head = samples(&mut rng, 30, 102.0, 0.001);
        let v = compare(
            &base,
            &head,
            Direction::Lower,
            &noise,
            &Sensitivity::default(),
        );
        assert!(v.p_value.unwrap() < 1e-6);
        assert_eq!(v.kind, VerdictKind::NoChange, "{v:?}");
        assert!(v.threshold_pct > 8.0);
    }

    #[test]
    fn single_values_are_judged_against_history() {
        let mut rng = Rng::new(3);
        let noise = history(&mut rng, 0.01);
        let s = Sensitivity::default();
        let v = compare(&[100.0], &[120.0], Direction::Lower, &noise, &s);
        assert_eq!(v.kind, VerdictKind::Regression, "{v:?}");
        assert_eq!(v.method, "history-noise");
        assert!(v.ci_low_pct > 10.0 && v.ci_high_pct < 30.0);
        let v = compare(&[100.0], &[101.0], Direction::Lower, &noise, &s);
        assert_eq!(v.kind, VerdictKind::NoChange, "{v:?}");
    }

    #[test]
    fn without_history_or_samples_nothing_can_be_tested() {
        let s = Sensitivity::default();
        let unknown = NoiseModel::unknown();
        let v = compare(&[100.0], &[120.0], Direction::Lower, &unknown, &s);
        assert_eq!(
            (v.kind, v.method, v.p_value),
            (VerdictKind::Inconclusive, "effect-only", None)
        );
        let v = compare(&[100.0], &[100.1], Direction::Lower, &unknown, &s);
        assert_eq!(v.kind, VerdictKind::NoChange);
        let v = compare(&[], &[1.0], Direction::Lower, &unknown, &s);
        assert_eq!((v.kind, v.method), (VerdictKind::Inconclusive, "no-data"));
        let v = compare(&[f64::NAN], &[1.0], Direction::Lower, &unknown, &s);
        assert_eq!((v.kind, v.base_samples), (VerdictKind::Inconclusive, 0));
    }

    #[test]
    fn few_samples_without_history_stay_inconclusive() {
        let v = compare(
            &[100.0, 101.0],
            &[130.0, 131.0],
            Direction::Lower,
            &NoiseModel::unknown(),
            &Sensitivity::default(),
        );
        assert_eq!(
            (v.kind, v.method),
            (VerdictKind::Inconclusive, "mann-whitney"),
            "{v:?}"
        );
    }

    #[test]
    fn identical_samples_and_zero_baselines_behave() {
        let s = Sensitivity::default();
        let unknown = NoiseModel::unknown();
        let v = compare(&[5.0; 8], &[5.0; 8], Direction::Lower, &unknown, &s);
        assert_eq!(
            (v.kind, v.change_pct, v.p_value),
            (VerdictKind::NoChange, 0.0, Some(1.0))
        );
        let v = compare(&[5.0; 8], &[6.0; 8], Direction::Lower, &unknown, &s);
        assert_eq!(v.kind, VerdictKind::Regression, "{v:?}");
        let v = compare(&[0.0; 6], &[3.0; 6], Direction::Lower, &unknown, &s);
        assert_eq!((v.kind, v.change_pct), (VerdictKind::Regression, 100.0));
        let v = compare(&[0.0; 6], &[0.0; 6], Direction::Lower, &unknown, &s);
        assert_eq!((v.kind, v.change_pct), (VerdictKind::NoChange, 0.0));
    }

    #[test]
    fn extreme_and_negative_magnitudes_stay_finite() {
        let s = Sensitivity::default();
        let unknown = NoiseModel::unknown();
        let v = compare(&[1e300; 6], &[2e300; 6], Direction::Lower, &unknown, &s);
        assert_eq!((v.kind, v.change_pct), (VerdictKind::Regression, 100.0));
        let v = compare(&[-1e308; 6], &[1e308; 6], Direction::Lower, &unknown, &s);
        assert!(v.change_pct.is_finite() && v.ci_low_pct.is_finite() && v.ci_high_pct.is_finite());
        // Negative metric, higher is better: −100 → −110 got worse.
        let v = compare(&[-100.0; 6], &[-110.0; 6], Direction::Higher, &unknown, &s);
        assert_eq!((v.kind, v.change_pct), (VerdictKind::Regression, -10.0));
        let tiny = compare(&[1e-300; 6], &[1.1e-300; 6], Direction::Lower, &unknown, &s);
        assert!((tiny.change_pct - 10.0).abs() < 1e-6, "{tiny:?}");
    }

    #[test]
    fn false_alarms_stay_rare_on_unchanged_commits() {
        // 3,000 comparisons of unchanged code with history, alternating single values and
        // samples; at the default sensitivity expect well under 1 in 1,000.
        let mut rng = Rng::new(4);
        let s = Sensitivity::default();
        let mut alarms = 0;
        for trial in 0..3000 {
            let cv = rng.range(0.005, 0.1);
            let history: Vec<CommitObservation> = noisy(&mut rng, 40, 50.0, cv);
            let noise = noise_model(&history);
            let n = if trial % 2 == 0 { 1 } else { 10 };
            let base = samples(&mut rng, n, 50.0, cv);
            let head = samples(&mut rng, n, 50.0, cv);
            if compare(&base, &head, Direction::Lower, &noise, &s)
                .kind
                .is_change()
            {
                alarms += 1;
            }
        }
        assert!(alarms <= 3, "{alarms} false alarms in 3000");
    }
}
