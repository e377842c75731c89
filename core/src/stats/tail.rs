//! The newest commits of a series: a change too recent for change-point detection.
//!
//! [`detect_change_points`](super::detect_change_points) needs `min_segment_len` commits on
//! each side of a change, so a push that regresses the head would wait for several more
//! pushes before anyone hears of it. Here the newest 1 to `min_segment_len − 1` commits are
//! compared with the commits before them by the per-commit test ([`compare()`]): its rank test
//! on samples, and its minimum effect of `noise_multiplier` × the series' commit-to-commit
//! noise. Every commit of the tail must sit past the midpoint between the two levels, so a
//! spike followed by a commit back at the old level is no change, and the commit before the
//! tail must not be past it (the change would have started earlier). Commits without samples
//! enough for the rank test are left to change-point detection. The finding is provisional:
//! once enough commits follow, change-point detection confirms it (at the same commit) or
//! drops it.

use crate::model::Direction;

use super::changepoint::ChangePoint;
use super::compare::compare;
use super::early::{on_side_of, pooled_samples};
use super::noise::{CommitObservation, noise_model};
use super::sensitivity::Sensitivity;

/// Finds a change of level in the newest commits of `segment` (the commits since the last
/// confirmed change point, oldest first). Positions of the result index `segment`.
pub fn detect_tail_change(
    segment: &[CommitObservation],
    direction: Direction,
    sensitivity: &Sensitivity,
) -> Option<ChangePoint> {
    let s = sensitivity.sanitized();
    let min_len = s.min_segment_len;
    let m = segment.len();
    // The longest tail first: the earliest commit at which the level could have changed.
    for k in (1..min_len).rev() {
        if m < k + min_len {
            continue;
        }
        let split = m - k;
        let base = &segment[split.saturating_sub(s.window)..split];
        let head = &segment[split..];
        let base_values: Vec<f64> = base.iter().map(|o| o.value).collect();
        let head_samples = pooled_samples(head);
        let verdict = compare(
            &base_values,
            &head_samples,
            direction,
            &noise_model(base),
            &s,
        );
        // A commit's value alone cannot tell a spike from a step: only samples enough for
        // the rank test (five or more) make a recent change.
        if !verdict.kind.is_change() || verdict.method != "mann-whitney" {
            continue;
        }
        let past_midpoint = |v: f64| on_side_of(v, verdict.value, verdict.baseline);
        if !head.iter().all(|o| past_midpoint(o.value)) {
            continue;
        }
        // The commit before the split must still be at the old level: otherwise the change
        // happened earlier, and a finding here would repeat it one commit late.
        if split > 0 && past_midpoint(segment[split - 1].value) {
            continue;
        }
        let method = "recent-commits+per-commit-test";
        let evidence = (base.len(), head.len());
        return Some(ChangePoint::from_verdict(
            &verdict,
            split,
            (split, k),
            evidence,
            method,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::VerdictKind;

    /// A commit with five samples around `level`, alternating a little so the history has
    /// realistic (non-zero) noise.
    fn commit(position: usize, level: f64) -> CommitObservation {
        let wobble = [0.0, 0.3, -0.2, 0.1, -0.3][position % 5];
        let samples = (0..5)
            .map(|i| level + wobble + (i as f64 - 2.0) * 0.05)
            .collect();
        CommitObservation::from_samples(position, samples)
    }

    fn history(levels: &[f64]) -> Vec<CommitObservation> {
        levels
            .iter()
            .enumerate()
            .map(|(i, l)| commit(i, *l))
            .collect()
    }

    #[test]
    fn a_regressed_head_is_found_at_once() {
        let mut levels = vec![100.0; 20];
        levels.push(130.0);
        let change =
            detect_tail_change(&history(&levels), Direction::Lower, &Sensitivity::default())
                .expect("the head regressed by 30 %");
        assert_eq!(change.position, 20);
        assert_eq!(change.kind, VerdictKind::Regression);
        assert!((change.change_pct - 30.0).abs() < 2.0, "{change:?}");
    }

    #[test]
    fn the_change_is_placed_at_the_first_commit_of_the_new_level() {
        let mut levels = vec![100.0; 20];
        levels.extend([130.0, 130.0, 130.0]);
        let change =
            detect_tail_change(&history(&levels), Direction::Lower, &Sensitivity::default())
                .unwrap();
        assert_eq!(change.position, 20);
        assert_eq!(change.segment_after, 3);
    }

    #[test]
    fn a_spike_that_came_back_and_noise_are_no_change() {
        let mut levels = vec![100.0; 20];
        levels.extend([130.0, 100.0]);
        assert_eq!(
            detect_tail_change(&history(&levels), Direction::Lower, &Sensitivity::default()),
            None
        );
        let flat = vec![100.0; 30];
        assert_eq!(
            detect_tail_change(&history(&flat), Direction::Lower, &Sensitivity::default()),
            None
        );
    }

    #[test]
    fn a_small_shift_within_the_noise_is_no_change_and_short_histories_say_nothing() {
        let mut levels = vec![100.0; 20];
        levels.push(100.4);
        assert_eq!(
            detect_tail_change(&history(&levels), Direction::Lower, &Sensitivity::default()),
            None
        );
        assert_eq!(
            detect_tail_change(
                &history(&[100.0, 100.0, 150.0]),
                Direction::Lower,
                &Sensitivity::default()
            ),
            None
        );
    }

    #[test]
    fn a_head_without_samples_waits_for_change_point_detection() {
        let mut series = history(&[100.0; 20]);
        series.push(CommitObservation::new(20, 130.0));
        assert_eq!(
            detect_tail_change(&series, Direction::Lower, &Sensitivity::default()),
            None
        );
    }

    #[test]
    fn faster_is_an_improvement_when_lower_is_better() {
        let mut levels = vec![100.0; 20];
        levels.push(70.0);
        let change =
            detect_tail_change(&history(&levels), Direction::Lower, &Sensitivity::default())
                .unwrap();
        assert_eq!(change.kind, VerdictKind::Improvement);
    }
}
