//! The commit-to-commit spread of a series measured within its segments, so that the
//! series' own steps do not count as noise.
//!
//! A step is a change from one commit to the next that stands [`STEP_SDS`] robust standard
//! deviations out *and after which the level stays moved* (the medians of up to
//! [`PERSISTENCE`] commits on either side differ by at least half of it). A spike that
//! reverts is not a step: it is noise, and stays in. After a 5× speed-up the old level's
//! differences no longer inflate the new level's noise, because positive series are measured
//! in relative terms (differences of logarithms) and the step itself is left out.

use super::noise::{robust_sd, tail_matched_sd};
use super::robust::median;

/// A change this many robust standard deviations out (at least 0.35 × the root mean square of
/// all changes), after which the level stays moved, is one of the series' own steps.
const STEP_SDS: f64 = 5.0;

/// Fewest changes among which one can be told to be a step: in fewer, every change is noise.
const MIN_CHANGES_FOR_STEPS: usize = 5;

/// How many times the median change a change must be to be a step among a few changes.
const FAR_BEYOND: f64 = 1000.0;

/// Commits on each side of a change whose medians decide whether the level stayed moved.
const PERSISTENCE: usize = 5;

/// Below this many changes the spread is their root mean square (every change counts, with
/// as many degrees of freedom); from it on, the robust estimate that shrugs off spikes.
pub const YOUNG_CHANGES: usize = 20;

/// The spread of the commit-to-commit changes of `values` (finite, oldest first), leaving
/// out the series' own steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SegmentSpread {
    /// Standard deviation of one change: relative (a fraction of the level) when
    /// `relative`, in the metric's unit otherwise.
    pub sd: f64,
    /// Whether the values are all positive and the spread is relative.
    pub relative: bool,
    /// Changes measured (within segments).
    pub changes: usize,
}

/// Measures the spread of `values` within its segments. Positive series are measured in
/// relative terms; others (zero, negative, mixed) in the metric's unit, with halved
/// differences so that nothing overflows near f64::MAX.
pub(crate) fn segment_spread(values: &[f64]) -> SegmentSpread {
    let relative = !values.is_empty() && values.iter().all(|v| *v > 0.0);
    let levels: Vec<f64> = if relative {
        values.iter().map(|v| v.ln()).collect()
    } else {
        values.iter().map(|v| v / 2.0).collect()
    };
    let changes: Vec<f64> = levels.windows(2).map(|w| w[1] - w[0]).collect();
    let steps = own_steps(&levels, &changes);
    let mut within: Vec<f64> = (changes.iter().zip(&steps))
        .filter(|(_, step)| !**step)
        .map(|(c, _)| *c)
        .collect();
    let count = within.len();
    let sd = if count < YOUNG_CHANGES {
        root_mean_square(&within)
    } else {
        tail_matched_sd(&mut within)
    };
    let sd = if relative {
        sd
    } else {
        (2.0 * sd).min(f64::MAX)
    };
    SegmentSpread {
        sd,
        relative,
        changes: count,
    }
}

/// For each change (between `levels[i]` and `levels[i + 1]`), whether it is a step.
fn own_steps(levels: &[f64], changes: &[f64]) -> Vec<bool> {
    if changes.len() < MIN_CHANGES_FOR_STEPS {
        return far_beyond_the_rest(changes);
    }
    let center = median(changes);
    // In a short history the MAD of a handful of changes can be tiny by luck; the root mean
    // square of all of them (steps included) keeps an ordinary change from looking like one.
    let deviations: Vec<f64> = changes.iter().map(|c| c - center).collect();
    let sd = robust_sd(&mut changes.to_vec()).max(0.35 * root_mean_square(&deviations));
    (0..changes.len())
        .map(|i| {
            let size = (changes[i] - center).abs();
            if sd == 0.0 || size.is_nan() || size <= STEP_SDS * sd {
                return false;
            }
            let before = median(&levels[(i + 1).saturating_sub(PERSISTENCE)..=i]);
            let after = median(&levels[i + 1..(i + 1 + PERSISTENCE).min(levels.len())]);
            (after / 2.0 - before / 2.0).abs() >= size / 4.0
        })
        .collect()
}

/// Among fewer changes than a step can be told from by its spread, the changes at least
/// [`FAR_BEYOND`] × the median change (from three changes on, and a median above zero).
/// Instruction counts of the same code move by a few parts in a million and a code change
/// moves them by percents: the hex trial's counts moved by 5 · 10⁻⁶ at its docs-only commits
/// and by −5.6 % and +18.9 % at two versions, and taking those for noise made a threshold of
/// +150 %. Three changes of normal noise are that far apart about once in 220,000 histories
/// (9 in 2 million simulated).
fn far_beyond_the_rest(changes: &[f64]) -> Vec<bool> {
    let sizes: Vec<f64> = changes.iter().map(|c| c.abs()).collect();
    let typical = median(&sizes);
    (sizes.iter())
        .map(|&size| changes.len() >= 3 && typical > 0.0 && size >= FAR_BEYOND * typical)
        .collect()
}

/// √(mean of squares), scaled by the largest magnitude so that it cannot overflow. Changes of
/// a level series have mean zero, so this is the spread with one degree of freedom each.
fn root_mean_square(values: &[f64]) -> f64 {
    let scale = values.iter().fold(0.0, |m: f64, v| m.max(v.abs()));
    if values.is_empty() || scale == 0.0 || !scale.is_finite() {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean_square = values.iter().map(|v| (v / scale).powi(2) / n).sum::<f64>();
    (scale * mean_square.sqrt()).min(f64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::synthetic::Rng;

    fn noisy(rng: &mut Rng, levels: &[(usize, f64)], cv: f64) -> Vec<f64> {
        (levels.iter())
            .flat_map(|&(n, level)| vec![level; n])
            .map(|level| level * (1.0 + cv * rng.normal()))
            .collect()
    }

    #[test]
    fn a_five_fold_step_does_not_count_as_noise() {
        let mut rng = Rng::new(21);
        // Three commits at 5,000, six at 1,000, 2 % noise: a difference has σ ≈ 2.8 %.
        let values = noisy(&mut rng, &[(3, 5000.0), (6, 1000.0)], 0.02);
        let spread = segment_spread(&values);
        assert!(spread.relative);
        assert_eq!(spread.changes, 7, "{spread:?}");
        assert!(spread.sd < 0.06, "{spread:?}");
    }

    #[test]
    fn a_spike_that_reverts_stays_in_the_noise() {
        let mut values = vec![100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1];
        values[4] = 150.0;
        let spread = segment_spread(&values);
        assert_eq!(spread.changes, 8);
        assert!(spread.sd > 0.1, "{spread:?}");
    }

    #[test]
    fn a_step_at_the_newest_commit_is_left_out() {
        let mut values = vec![100.0, 101.0, 99.0, 100.5, 99.5, 100.0];
        values.push(200.0);
        let spread = segment_spread(&values);
        assert_eq!(spread.changes, 5);
        assert!(spread.sd < 0.02, "{spread:?}");
    }

    #[test]
    fn among_few_changes_only_one_far_beyond_the_rest_is_a_step() {
        // The hex trial's instruction counts (0.3.1, docs, 0.3.2, docs, 0.4.0): the code
        // changes are steps, the docs-only commits' moves the noise.
        let counts = [
            1_745_663_864.0,
            1_745_668_632.0,
            1_647_296_141.0,
            1_647_282_242.0,
        ];
        let spread = segment_spread(&counts);
        assert_eq!(spread.changes, 2, "{spread:?}");
        assert!(spread.sd < 1e-5, "{spread:?}");
        // Timings whose changes differ by less stay noise, and so do all-equal neighbours.
        assert_eq!(segment_spread(&[100.0, 100.1, 93.0, 93.05]).changes, 3);
        assert_eq!(segment_spread(&[100.0, 100.0, 93.0, 93.0]).changes, 3);
        assert_eq!(segment_spread(&[100.0, 100.001, 93.0]).changes, 2);
    }

    #[test]
    fn long_series_use_the_robust_spread_and_odd_ones_stay_finite() {
        let mut rng = Rng::new(22);
        let values = noisy(&mut rng, &[(200, 100.0), (200, 130.0)], 0.01);
        let spread = segment_spread(&values);
        assert_eq!(spread.changes, 398);
        assert!((spread.sd / 0.01414 - 1.0).abs() < 0.15, "{spread:?}");
        let mixed = segment_spread(&[-1e308, 1e308, -1e308, 1e308]);
        assert!(!mixed.relative && mixed.sd.is_finite() && mixed.sd > 1e308);
        assert_eq!(segment_spread(&[]).changes, 0);
        assert_eq!(segment_spread(&[5.0; 10]).sd, 0.0);
    }
}
