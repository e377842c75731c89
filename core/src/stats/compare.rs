//! The per-commit test: a commit's values against a baseline's (its parent, a pinned commit,
//! a merge base).
//!
//! A change is reported only when it is both significant and large: significant by a
//! Mann-Whitney test when both sides have samples (or against the series' commit-to-commit
//! noise when a side has few), and larger than min_effect_pct and than noise_multiplier ×
//! every honest estimate of how much two runs of the same code differ, each at its 90 %
//! upper confidence bound: the history's commit-to-commit noise (measured within its
//! segments) and, while the history is short, √2 × the samples' within-run spread. Between
//! positive values sizes are compared on the logarithmic scale, so that a slowdown and the
//! matching fall in throughput get the same verdict. A series without any history (no two
//! runs of the same code yet) gets `Inconclusive`, never a regression, for a large shift;
//! from one commit-to-commit change on, a change large against its (wide) margin is called.

use std::cell::RefCell;

use crate::model::Direction;

use super::distribution::{students_t_quantile, students_t_sf};
use super::location::{FAST_END_MIN_SAMPLES, fast_end_fraction, fast_end_spread, run_location};
use super::mann_whitney::{mann_whitney, shift_interval};
use super::noise::{NoiseModel, within_run_sd};
use super::quantile_interval::quantile_difference_interval;
use super::robust::{PercentBase, median};
use super::sensitivity::Sensitivity;
use super::threshold::{Scale, explain, history_df, upper_bound_multiplier};
use super::verdict::{Verdict, VerdictKind};
use super::within_segments::YOUNG_CHANGES;

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
    // Each run stands for its location: the fast end of many samples, the median of few.
    let baseline = run_location(&base, direction);
    let value = run_location(&head, direction);
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
        detectable_pct: None,
        base_samples: base.len(),
        head_samples: head.len(),
        method: "no-data",
        note: String::new(),
    };
    if base.is_empty() || head.is_empty() {
        return verdict;
    }

    let delta = (value - baseline).clamp(-f64::MAX, f64::MAX);
    verdict.change_pct = reference.percent(delta);
    let history = noise
        .between_commit_sd_at(baseline)
        .map(|sd| NoiseEstimate {
            sd,
            df: history_df(noise.changes),
        });
    let young = noise.changes < YOUNG_CHANGES;
    let samples_estimate = (base.len() >= 2 && head.len() >= 2 && (young || history.is_none()))
        .then(|| run_to_run_from_samples(&base, &head, direction));
    // The change must be large against every honest estimate of how much two runs of the
    // same code differ: the history's (when there is one) and, while the history is short,
    // the samples' too. Each is taken at its upper confidence bound.
    let scale = Scale::new(baseline, value);
    let mut threshold = scale.floor(s.min_effect_pct);
    // The largest estimate itself, not at its bound: what a short history can tell apart.
    let mut typical = threshold;
    let mut widest = f64::NEG_INFINITY;
    for estimate in [history, samples_estimate].into_iter().flatten() {
        typical = typical.max(scale.margin(estimate.sd));
        let k = upper_bound_multiplier(s.noise_multiplier, estimate.df);
        let margin = scale.margin(k * estimate.sd);
        if margin > widest {
            widest = margin;
            verdict.noise_pct = reference.percent(estimate.sd).abs();
        }
        threshold = threshold.max(margin);
    }
    verdict.threshold_pct = scale.threshold_pct(threshold, delta);
    verdict.note = explain(noise, history.is_some(), samples_estimate.is_some());

    let both_sampled = base.len() >= MIN_RANK_SAMPLES && head.len() >= MIN_RANK_SAMPLES;
    if both_sampled || (history.is_none() && samples_estimate.is_some()) {
        let test = mann_whitney(&head, &base);
        // The interval is about the number shown: the difference of the runs' fast ends when
        // they stand for them, else the shift of the whole samples.
        let fast_ends = base.len().min(head.len()) >= FAST_END_MIN_SAMPLES;
        let (low, high) = fast_ends
            .then(|| {
                let fraction = fast_end_fraction(direction);
                quantile_difference_interval(&base, &head, fraction, 1.0 - s.alpha, delta)
            })
            .flatten()
            .unwrap_or_else(|| shift_interval(&base, &head, 1.0 - s.alpha));
        verdict.p_value = Some(test.p_value);
        verdict.ci_low_pct = reference.percent(low);
        verdict.ci_high_pct = reference.percent(high);
        verdict.method = "mann-whitney";
    } else if let Some(NoiseEstimate { sd, df }) = history {
        // One value on a side: the difference of two commits, judged by the spread of
        // differences between consecutive commits, with t quantiles for the estimated spread.
        let (p, half_width) = if sd > 0.0 {
            let t = delta / sd;
            let half_width = t_quantile(1.0 - s.alpha / 2.0, df) * sd;
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

    // An interval in the metric's unit can reach below zero when the noise is wide; a level
    // measured only in non-negative values (times, rates, counts) cannot fall by more than all
    // of it, so the interval stops at -100 %.
    if baseline > 0.0 && base.iter().chain(&head).all(|v| *v >= 0.0) {
        verdict.ci_low_pct = verdict.ci_low_pct.max(-100.0);
        verdict.ci_high_pct = verdict.ci_high_pct.max(-100.0);
    }

    let size = scale.size(delta);
    let large = delta != 0.0 && size >= threshold;
    // A short history's threshold is its noise at a wide upper bound. A change that is
    // significant and larger than the noise itself, but not than that bound, is one the history
    // cannot yet tell from noise: "no change" would claim more than the data shows.
    let undecided = young
        && !large
        && delta != 0.0
        && size >= typical
        && verdict.p_value.is_some_and(|p| p < s.alpha);
    if undecided {
        verdict.note = format!(
            "{}; the change is larger than that noise and significant, but the history is too \
             short to tell it from noise: more history, or an interleaved re-measure \
             (`kymo try`), decides",
            verdict.note
        );
    }
    verdict.kind = match verdict.p_value {
        _ if undecided => VerdictKind::Inconclusive,
        _ if !large => VerdictKind::NoChange,
        // Samples of one run cannot show how much runs differ; until the history can, a
        // large shift between two runs is not enough to call a change.
        _ if history.is_none() => VerdictKind::Inconclusive,
        Some(p) if p < s.alpha => VerdictKind::of_change(delta, direction),
        _ => VerdictKind::Inconclusive,
    };
    // The power: the smallest slowdown that would have counted. Without any estimate of how
    // much runs differ, none would have.
    if history.is_some() || samples_estimate.is_some() {
        let detectable = scale.threshold_pct(threshold, 1.0);
        verdict.detectable_pct = Some(detectable);
        if verdict.kind == VerdictKind::NoChange && detectable > CANNOT_TELL_PCT {
            verdict.kind = VerdictKind::Inconclusive;
            verdict.note = cannot_tell(&verdict, noise, history, scale, &s);
        }
    }
    verdict
}

/// Beyond this power (the smallest change that would have counted, in percent) a verdict
/// without a change is "cannot tell yet", not `no_change`: a benchmark that could have missed a
/// 1.5× slowdown has not shown that nothing changed. Short histories set thresholds of
/// hundreds of percent (one real series: 8·10¹⁰ %).
pub const CANNOT_TELL_PCT: f64 = 50.0;

/// Why a verdict cannot tell yet, and what would decide it: more history while the history
/// is short and its noise would allow, otherwise an interleaved re-measure or counts.
fn cannot_tell(
    verdict: &Verdict,
    noise: &NoiseModel,
    history: Option<NoiseEstimate>,
    scale: Scale,
    s: &Sensitivity,
) -> String {
    let seen = format!(
        "cannot tell yet: only a change above {:.0} % would have been seen (run-to-run noise \
         {:.1} %)",
        verdict.detectable_pct.unwrap_or(f64::MAX),
        verdict.noise_pct
    );
    let cap = scale.floor(CANNOT_TELL_PCT);
    let enough = history.and_then(|h| {
        (noise.changes + 1..=noise.changes + 200).find(|&changes| {
            let k = upper_bound_multiplier(s.noise_multiplier, history_df(changes));
            scale.margin(k * h.sd) <= cap
        })
    });
    match enough {
        _ if history.is_none() => format!(
            "{seen}; no history yet: a few measured commits of history, or an interleaved \
             re-measure (`kymo try`), would decide"
        ),
        Some(changes) if noise.changes < YOUNG_CHANGES => format!(
            "{seen}; about {} more measured commit{} of history, or an interleaved re-measure \
             (`kymo try`), would decide",
            changes - noise.changes,
            if changes - noise.changes == 1 {
                ""
            } else {
                "s"
            }
        ),
        _ => format!(
            "{seen}; two runs of the same code differ too much here for history to decide: an \
             interleaved re-measure (`kymo try`) or instruction counts would"
        ),
    }
}

/// A spread of the difference between two commits, in the metric's unit, with the degrees
/// of freedom that say how well it is known.
#[derive(Debug, Clone, Copy)]
struct NoiseEstimate {
    sd: f64,
    df: f64,
}

/// How many t quantiles each thread remembers.
const REMEMBERED_QUANTILES: usize = 4;

thread_local! {
    /// The t quantiles this thread computed last, as (p, df) bits and value. A compare of
    /// a thousand series asks for the same two or three again and again (one multiplier,
    /// one confidence, histories of the same length), and each costs a root search over
    /// the incomplete beta function: about 2.5 µs, nine tenths of a verdict of single
    /// values (`cargo bench -p kymo-server --bench scale`).
    static QUANTILES: RefCell<[(u64, u64, f64); REMEMBERED_QUANTILES]> =
        const { RefCell::new([(u64::MAX, u64::MAX, f64::NAN); REMEMBERED_QUANTILES]) };
}

/// [`students_t_quantile`], remembered for the last few (p, df) pairs asked on this thread.
fn t_quantile(p: f64, df: f64) -> f64 {
    let key = (p.to_bits(), df.to_bits());
    QUANTILES.with_borrow_mut(|remembered| {
        if let Some(&(_, _, value)) = remembered.iter().find(|e| (e.0, e.1) == key) {
            return value;
        }
        let value = students_t_quantile(p, df);
        remembered.rotate_right(1);
        remembered[0] = (key.0, key.1, value);
        value
    })
}

/// Without history, the run-to-run spread is unknown; samples only show the spread within
/// one run. Two runs are assumed to differ by about as much as two single samples (√2 × the
/// pooled within-run standard deviation), a cautious guess reported as evidence. Between
/// positive samples each run's spread is taken relative to its own median and pooled as such
/// (sizes are compared on the ratio scale): otherwise a run 2.5× slower, whose spread in
/// nanoseconds is 2.5× wider too, would set a threshold in the baseline's units that hides its
/// own change.
///
/// Runs of many samples stand for their fast end, and so does their spread: the spread near
/// the fast end of the quieter of the two runs. Other work slows some of a run's samples and
/// widens its spread around the median (to 17-32 % in a loaded `hex` run whose fastest
/// samples lay within 1 %), so neither that spread nor the louder run says how the code
/// varies.
fn run_to_run_from_samples(base: &[f64], head: &[f64], direction: Direction) -> NoiseEstimate {
    let (nb, nh) = (base.len() as f64, head.len() as f64);
    if let (Some(b), Some(h)) = (
        fast_end_spread(base, direction),
        fast_end_spread(head, direction),
    ) {
        return NoiseEstimate {
            sd: (std::f64::consts::SQRT_2 * b.min(h) * run_location(base, direction)).min(f64::MAX),
            df: nb.min(nh) - 1.0,
        };
    }
    let positive = base.iter().chain(head).all(|&v| v > 0.0);
    let (base_center, head_center) = (median(base), median(head));
    let spread = |side: &[f64], center: f64| {
        if positive {
            within_run_sd(side) / center
        } else {
            within_run_sd(side)
        }
    };
    let pooled = ((spread(base, base_center).powi(2) * (nb - 1.0)
        + spread(head, head_center).powi(2) * (nh - 1.0))
        / (nb + nh - 2.0))
        .sqrt();
    let unit = if positive { base_center } else { 1.0 };
    NoiseEstimate {
        sd: (std::f64::consts::SQRT_2 * pooled * unit).min(f64::MAX),
        df: nb + nh - 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::noise::{CommitObservation, noise_model};
    use crate::stats::synthetic::{Rng, noisy};

    fn samples(rng: &mut Rng, n: usize, level: f64, cv: f64) -> Vec<f64> {
        (0..n).map(|_| level * (1.0 + cv * rng.normal())).collect()
    }

    #[test]
    fn remembered_t_quantiles_are_the_computed_ones() {
        let asked = [
            (0.975, 3.0),
            (0.9, 10.0),
            (0.975, 3.0),
            (0.99, 1.5),
            (0.6, 7.0),
        ];
        for _ in 0..3 {
            for (p, df) in asked.into_iter().chain([(0.8, 2.0), (0.975, 3.0)]) {
                assert_eq!(
                    t_quantile(p, df),
                    students_t_quantile(p, df),
                    "p {p} df {df}"
                );
            }
        }
        assert!(t_quantile(2.0, 3.0).is_nan());
    }

    /// A long, very quiet history at level 100 (0.1 % noise).
    fn quiet_history() -> NoiseModel {
        noise_model(&noisy(&mut Rng::new(99), 60, 100.0, 0.001))
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
    fn the_interval_of_a_fall_in_non_negative_values_stops_at_minus_100_percent() {
        // Throughput that fell 99 % against a history that moves 40 % from commit to commit:
        // the interval in the unit reaches below zero, which no rate can.
        let mut rng = Rng::new(4);
        let noise = history(&mut rng, 0.4);
        let s = Sensitivity::default();
        let v = compare(&[100.0], &[1.0], Direction::Higher, &noise, &s);
        assert_eq!(v.method, "history-noise");
        assert!(
            v.ci_low_pct >= -100.0 && v.ci_low_pct < v.change_pct,
            "{v:?}"
        );
        // Values that may be negative (a gain, a difference) keep the interval as computed.
        let v = compare(&[100.0], &[-50.0], Direction::Higher, &noise, &s);
        assert!(v.ci_low_pct < -150.0, "{v:?}");
    }

    #[test]
    fn a_short_history_that_cannot_tell_a_significant_change_from_noise_says_so() {
        // The hex trial at load 10-15: four runs of the old code whose fast ends were 80.9k,
        // 69.7k, 84.7k and 63.4k ns (22 % apart), then a head 64 % slower, p = 3e-10.
        let history: Vec<CommitObservation> = [80_900.0, 69_700.0, 84_700.0, 63_400.0]
            .iter()
            .enumerate()
            .map(|(i, v)| CommitObservation::new(i, *v))
            .collect();
        let noise = noise_model(&history);
        let mut rng = Rng::new(7);
        let base = samples(&mut rng, 30, 63_400.0, 0.02);
        let head = samples(&mut rng, 30, 104_200.0, 0.02);
        let v = compare(
            &base,
            &head,
            Direction::Lower,
            &noise,
            &Sensitivity::default(),
        );
        assert!(v.p_value.unwrap() < 1e-6);
        assert!(v.threshold_pct > v.change_pct, "{v:?}");
        assert_eq!(v.kind, VerdictKind::Inconclusive, "{v:?}");
        assert!(
            v.note.contains("too short to tell it from noise"),
            "{}",
            v.note
        );
        // A change within the noise itself is not called either, but a verdict that could
        // only have seen a change above 629 % cannot say "no change": it cannot tell yet, and
        // says what would decide it (here not more history: the noise itself is too wide).
        let head = samples(&mut rng, 30, 66_000.0, 0.02);
        let v = compare(
            &base,
            &head,
            Direction::Lower,
            &noise,
            &Sensitivity::default(),
        );
        assert_eq!(v.kind, VerdictKind::Inconclusive, "{v:?}");
        assert!(v.detectable_pct.unwrap() > 600.0, "{v:?}");
        assert!(v.note.starts_with("cannot tell yet"), "{}", v.note);
        assert!(v.note.contains("`kymo try`"), "{}", v.note);
    }

    #[test]
    fn a_no_change_that_could_not_have_seen_half_the_level_cannot_tell_yet() {
        // Four commits 8 % apart: the threshold is 9 × 8 % at its upper bound, 70 % or so.
        let history: Vec<CommitObservation> = [100.0, 108.0, 100.0, 108.0]
            .iter()
            .enumerate()
            .map(|(i, v)| CommitObservation::new(i, *v))
            .collect();
        let s = Sensitivity::default();
        let v = compare(
            &[100.0],
            &[101.0],
            Direction::Lower,
            &noise_model(&history),
            &s,
        );
        assert_eq!(v.kind, VerdictKind::Inconclusive, "{v:?}");
        assert!(v.detectable_pct.unwrap() > CANNOT_TELL_PCT, "{v:?}");
        // More history would bound that noise: the note says about how much.
        assert!(
            v.note.contains("more measured commits of history"),
            "{}",
            v.note
        );
        // The same noise known from a long history allows a no-change with its power.
        let long: Vec<CommitObservation> = (0..60)
            .map(|i| CommitObservation::new(i, if i % 2 == 0 { 100.0 } else { 103.0 }))
            .collect();
        let v = compare(
            &[100.0],
            &[101.0],
            Direction::Lower,
            &noise_model(&long),
            &s,
        );
        assert_eq!(v.kind, VerdictKind::NoChange, "{v:?}");
        let power = v.detectable_pct.unwrap();
        assert!(power > 5.0 && power < CANNOT_TELL_PCT, "{v:?}");
        // Without history or samples, nothing could have been seen.
        let v = compare(
            &[100.0],
            &[100.0],
            Direction::Lower,
            &NoiseModel::unknown(),
            &s,
        );
        assert_eq!(v.detectable_pct, None, "{v:?}");
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
        // Identical samples within each run: a certain shift, but without history nobody
        // knows whether runs of the same code differ like this.
        let v = compare(&[5.0; 8], &[6.0; 8], Direction::Lower, &unknown, &s);
        assert_eq!(v.kind, VerdictKind::Inconclusive, "{v:?}");
        let quiet = quiet_history();
        let v = compare(&[5.0; 8], &[6.0; 8], Direction::Lower, &quiet, &s);
        assert_eq!(v.kind, VerdictKind::Regression, "{v:?}");
        let v = compare(&[0.0; 6], &[3.0; 6], Direction::Lower, &quiet, &s);
        assert_eq!((v.kind, v.change_pct), (VerdictKind::Regression, 100.0));
        let v = compare(&[0.0; 6], &[0.0; 6], Direction::Lower, &quiet, &s);
        assert_eq!((v.kind, v.change_pct), (VerdictKind::NoChange, 0.0));
    }

    #[test]
    fn extreme_and_negative_magnitudes_stay_finite() {
        let s = Sensitivity::default();
        let quiet = quiet_history();
        let v = compare(&[1e300; 6], &[2e300; 6], Direction::Lower, &quiet, &s);
        assert_eq!((v.kind, v.change_pct), (VerdictKind::Regression, 100.0));
        let v = compare(&[-1e308; 6], &[1e308; 6], Direction::Lower, &quiet, &s);
        assert!(v.change_pct.is_finite() && v.ci_low_pct.is_finite() && v.ci_high_pct.is_finite());
        assert!(v.threshold_pct.is_finite() && v.noise_pct.is_finite());
        // Negative metric, higher is better: −100 → −110 got worse.
        let v = compare(&[-100.0; 6], &[-110.0; 6], Direction::Higher, &quiet, &s);
        assert_eq!((v.kind, v.change_pct), (VerdictKind::Regression, -10.0));
        let tiny = compare(&[1e-300; 6], &[1.1e-300; 6], Direction::Lower, &quiet, &s);
        assert!((tiny.change_pct - 10.0).abs() < 1e-6, "{tiny:?}");
    }

    #[test]
    fn short_histories_get_wider_but_finite_thresholds() {
        let mut rng = Rng::new(5);
        let long = noise_model(&noisy(&mut rng, 200, 100.0, 0.01));
        let short = noise_model(&noisy(&mut rng, 12, 100.0, 0.01));
        let s = Sensitivity::default();
        let at_long = compare(&[100.0], &[110.0], Direction::Lower, &long, &s);
        let at_short = compare(&[100.0], &[110.0], Direction::Lower, &short, &s);
        // The threshold is exp(k·noise) − 1 on the ratio scale.
        let k = |v: &Verdict| (1.0 + v.threshold_pct / 100.0).ln() / (v.noise_pct / 100.0);
        let (k_long, k_short) = (k(&at_long), k(&at_short));
        assert!(k_long > 4.2 && k_long < 4.8, "{k_long} {at_long:?}");
        assert!(
            k_short > 1.1 * k_long && k_short < 3.0 * k_long,
            "{k_short} {at_short:?}"
        );
        assert!(
            at_short.note.starts_with("short history (11 "),
            "{at_short:?}"
        );
        assert!(at_long.note.is_empty());
        // The margin widens as the history shrinks, and never without bound.
        let ks: Vec<f64> = [1.0, 2.0, 4.0, 9.0, 37.0, 1e7]
            .iter()
            .map(|&df| upper_bound_multiplier(4.0, df))
            .collect();
        assert!(ks.windows(2).all(|w| w[0] > w[1]), "{ks:?}");
        assert!(ks[0] < 60.0 && (ks[5] - 4.0).abs() < 1e-9, "{ks:?}");
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
