//! Series whose commits repeat their value: instruction counts.
//!
//! Change-point detection measures a series' noise from its commit-to-commit changes and asks a
//! rank test for significance. A series of counts has no noise to measure: per-benchmark counts
//! of unmodified criterion benchmarks repeat to the instruction (base64's decode: 24,480 per
//! iteration in five runs at load 8-14, then 25,548 from the commit that rewrote the decoder),
//! a whole program's to a few instructions in a million. Their robust spread is zero, so
//! segmentation sees nothing, and with one value a commit six commits on each side cannot reach
//! the rank test's significance (p ≥ 2/924), so a ±4 % change of the work done went unfiled.
//!
//! Here such a series is split into its levels (runs of commits within [`SAME_LEVEL`] of each
//! other), and the change between two neighbouring levels of [`MIN_LEVEL`] commits or more is
//! a step at the first commit of the later one. The series qualifies only when it is made of
//! such levels alone: a commit that differs from both neighbours (a spike), a change between
//! levels too small to tell from their spread, a value that is not a positive count or a run
//! with varying samples (timings) leaves it to change-point detection.

use crate::model::Direction;

use super::changepoint::ChangePoint;
use super::mann_whitney::exact_two_sided;
use super::noise::CommitObservation;
use super::robust::median;
use super::sensitivity::Sensitivity;
use super::verdict::VerdictKind;

/// Largest relative difference between two commits of one level: a whole program's counts
/// (the `hex` trial) vary by 2-5 instructions in a million between runs.
const SAME_LEVEL: f64 = 1e-4;

/// Smallest relative change between levels that is a step: ten times a level's widest spread,
/// so that a step is never a level's own variation.
const MIN_STEP: f64 = 10.0 * SAME_LEVEL;

/// Fewest commits a level needs on each side of a step: one commit at a new level could be a
/// commit that is later measured again differently; two agree.
const MIN_LEVEL: usize = 2;

/// The steps of a series whose commits repeat their value (see the module's text), or `None`
/// when `series` is not such a series. A step smaller than the sensitivity's `min_effect_pct`
/// is not reported, however certain. Positions index `series`.
pub fn detect_exact_steps(
    series: &[CommitObservation],
    direction: Direction,
    sensitivity: &Sensitivity,
) -> Option<Vec<ChangePoint>> {
    let min_effect = sensitivity.sanitized().min_effect_pct / 100.0;
    let repeats = |o: &CommitObservation| o.samples.iter().all(|s| *s == o.value);
    let countable = |o: &CommitObservation| o.value.is_finite() && o.value > 0.0 && repeats(o);
    if series.len() < 2 * MIN_LEVEL || !series.iter().all(countable) {
        return None;
    }
    let levels = levels(series);
    if levels.len() == 1 {
        return Some(Vec::new());
    }
    if levels[..levels.len() - 1]
        .iter()
        .any(|l| l.len() < MIN_LEVEL)
    {
        return None;
    }
    let spread = levels
        .iter()
        .map(|l| relative_spread(l))
        .fold(0.0, f64::max);
    let mut steps = Vec::new();
    let mut position = 0;
    for pair in levels.windows(2) {
        let (before, after) = (level_value(pair[0]), level_value(pair[1]));
        let change = (after - before) / before;
        if change.abs() < MIN_STEP {
            return None;
        }
        position += pair[0].len();
        // The newest commit alone at a new level waits for the next one.
        if pair[1].len() >= MIN_LEVEL && change.abs() >= min_effect {
            steps.push(step(pair, position, (before, after), spread, direction));
        }
    }
    Some(steps)
}

/// `series` cut where a commit differs from the one before by more than [`SAME_LEVEL`].
fn levels(series: &[CommitObservation]) -> Vec<&[CommitObservation]> {
    let mut levels = Vec::new();
    let mut start = 0;
    for i in 1..series.len() {
        let (a, b) = (series[i - 1].value, series[i].value);
        if ((b - a) / a).abs() > SAME_LEVEL {
            levels.push(&series[start..i]);
            start = i;
        }
    }
    levels.push(&series[start..]);
    levels
}

fn level_value(level: &[CommitObservation]) -> f64 {
    median(&level.iter().map(|o| o.value).collect::<Vec<_>>())
}

/// (max − min) / min of a level's values.
fn relative_spread(level: &[CommitObservation]) -> f64 {
    let (low, high) = (level.iter().map(|o| o.value))
        .fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    (high - low) / low
}

/// The step between the two levels of `pair`, whose later one starts at `position`.
fn step(
    pair: &[&[CommitObservation]],
    position: usize,
    (before, after): (f64, f64),
    spread: f64,
    direction: Direction,
) -> ChangePoint {
    let change_pct = (after - before) / before * 100.0;
    let worse = match direction {
        Direction::Lower => after > before,
        Direction::Higher => after < before,
    };
    let (n, m) = (pair[0].len(), pair[1].len());
    ChangePoint {
        position,
        span: 1,
        kind: if worse {
            VerdictKind::Regression
        } else {
            VerdictKind::Improvement
        },
        before,
        after,
        change_pct,
        // Every commit of a level repeats its value: the change is known exactly.
        ci_low_pct: change_pct,
        ci_high_pct: change_pct,
        // All of one level on one side of the other: the rank test's U is 0.
        p_value: exact_two_sided(0, n, m),
        noise_pct: spread * 100.0,
        segment_before: n,
        segment_after: m,
        evidence_before: n,
        evidence_after: m,
        method: "repeating-values",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(values: &[f64]) -> Vec<CommitObservation> {
        (values.iter().enumerate())
            .map(|(i, v)| CommitObservation::new(i, *v))
            .collect()
    }

    #[test]
    fn a_four_percent_step_between_six_and_six_repeated_counts_is_filed_at_its_commit() {
        // base64 0.21.5-0.22.1, decode/3072: 24,480 instructions per iteration, then 25,548.
        let mut values = vec![24_480.0; 6];
        values.extend([25_548.0; 6]);
        let steps = detect_exact_steps(&counts(&values), Direction::Lower, &Sensitivity::default())
            .unwrap();
        let [step] = steps.as_slice() else {
            panic!("{steps:?}")
        };
        assert_eq!(step.position, 6);
        assert_eq!(step.kind, VerdictKind::Regression);
        assert!((step.change_pct - 4.3627).abs() < 1e-3, "{step:?}");
        assert_eq!((step.segment_before, step.segment_after), (6, 6));
        assert!((step.p_value - 2.0 / 924.0).abs() < 1e-12, "{step:?}");
        let fewer: Vec<f64> = values.iter().map(|v| 50_000.0 - v).collect();
        let steps =
            detect_exact_steps(&counts(&fewer), Direction::Lower, &Sensitivity::default()).unwrap();
        assert_eq!(steps[0].kind, VerdictKind::Improvement);
    }

    #[test]
    fn counts_that_vary_by_a_few_in_a_million_keep_their_levels() {
        // hex: a whole program's counts, 0.3.1 and its docs commit, then 0.3.2 (-5.6 %).
        let values = [
            1_745_663_864.0,
            1_745_668_632.0,
            1_647_296_141.0,
            1_647_282_242.0,
            1_647_290_000.0,
        ];
        let steps = detect_exact_steps(&counts(&values), Direction::Lower, &Sensitivity::default())
            .unwrap();
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(steps[0].position, 2);
        assert_eq!(steps[0].kind, VerdictKind::Improvement);
        assert!(steps[0].noise_pct < 0.001, "{:?}", steps[0]);
    }

    #[test]
    fn the_newest_commit_alone_at_a_new_level_waits_and_two_steps_are_both_filed() {
        let waiting = counts(&[100.0, 100.0, 100.0, 103.0]);
        assert_eq!(
            detect_exact_steps(&waiting, Direction::Lower, &Sensitivity::default()),
            Some(vec![])
        );
        let two = counts(&[100.0, 100.0, 103.0, 103.0, 101.0, 101.0, 101.0]);
        let steps = detect_exact_steps(&two, Direction::Lower, &Sensitivity::default()).unwrap();
        let at: Vec<usize> = steps.iter().map(|s| s.position).collect();
        assert_eq!(at, [2, 4]);
        assert_eq!(
            detect_exact_steps(
                &counts(&[7.0; 8]),
                Direction::Lower,
                &Sensitivity::default()
            ),
            Some(vec![])
        );
        // Below min_effect_pct (0.5 %): certain, but not reported.
        let small = counts(&[1000.0, 1000.0, 1000.0, 1003.0, 1003.0]);
        assert_eq!(
            detect_exact_steps(&small, Direction::Lower, &Sensitivity::default()),
            Some(vec![])
        );
    }

    #[test]
    fn timings_spikes_tiny_steps_and_bad_values_are_left_to_change_point_detection() {
        let cases: [&[f64]; 6] = [
            // Wall times: every commit differs from the last.
            &[100.0, 101.3, 99.2, 100.4, 130.2, 131.0, 129.7],
            // A spike: one commit differs from both neighbours.
            &[100.0, 100.0, 120.0, 100.0, 100.0],
            // A change between levels too small to tell from their spread.
            &[100.0, 100.0, 100.0, 100.05, 100.05, 100.05],
            &[100.0, 100.0, f64::NAN, 100.0],
            &[0.0, 0.0, 0.0, 0.0],
            &[100.0, 100.0, 120.0],
        ];
        for values in cases {
            assert_eq!(
                detect_exact_steps(&counts(values), Direction::Lower, &Sensitivity::default()),
                None,
                "{values:?}"
            );
        }
        let mut timed = counts(&[100.0, 100.0, 120.0, 120.0]);
        timed[0].samples = vec![99.0, 100.0, 101.0];
        assert_eq!(
            detect_exact_steps(&timed, Direction::Lower, &Sensitivity::default()),
            None
        );
    }
}
