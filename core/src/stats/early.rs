//! The first commits of a series: a step too early for change-point detection.
//!
//! [`detect_change_points`](super::detect_change_points) needs `min_segment_len` commits on
//! each side of a change, and [`detect_tail_change`](super::detect_tail_change) needs as many
//! before the newest commits. A history measured after the fact (a backfill of published
//! versions) can hold a step with only three or four commits before it that was never the
//! newest commit, so neither would ever report it, although every run's samples show it.
//!
//! Here a step after the first [`MIN_COMMITS_BEFORE`] to `min_segment_len − 1` commits is
//! judged by the per-commit test ([`compare()`]) between the samples of the commits before it
//! and those of the commits at the new level, against the noise of that young history measured
//! within its segments (so the step itself is not counted as noise). As for the newest
//! commits, every commit before must sit on the old side of the midpoint between the two
//! levels and every commit of the new level past it; a new level of one commit is a spike
//! unless it is the newest commit (then the finding is provisional, as at the tail).

use crate::model::Direction;

use super::changepoint::ChangePoint;
use super::compare::compare;
use super::noise::{CommitObservation, noise_model};
use super::robust::median;
use super::sensitivity::Sensitivity;
use super::threshold::upper_bound_multiplier;

/// Fewest commits before a step for it to be judged: two runs of the same code give one
/// commit-to-commit change, three give two, the fewest a spread can be told from.
pub const MIN_COMMITS_BEFORE: usize = 3;

/// Fewest commits the noise is measured over, before and at the new level together. The
/// step being tested is the largest change among them by selection, so it is told from noise
/// (and left out of it) only among five changes or more; among four, three small changes by
/// luck would make any change of a quiet history look like a step.
const MIN_NOISE_COMMITS: usize = 6;

/// Finds a step after the first few commits of `segment` (a history from its first commit up
/// to its first change point, oldest first). Positions of the result index `segment`.
pub fn detect_early_change(
    segment: &[CommitObservation],
    direction: Direction,
    sensitivity: &Sensitivity,
) -> Option<ChangePoint> {
    let s = sensitivity.sanitized();
    let last_split = s.min_segment_len.min(segment.len());
    (MIN_COMMITS_BEFORE..last_split).find_map(|split| step_at(segment, split, direction, &s))
}

/// The step between `segment[..split]` and the commits from `split` on that share its new level.
fn step_at(
    segment: &[CommitObservation],
    split: usize,
    direction: Direction,
    s: &Sensitivity,
) -> Option<ChangePoint> {
    let base = &segment[..split];
    let old_level = median(&base.iter().map(|o| o.value).collect::<Vec<_>>());
    let new_level = segment[split].value;
    let level_len = segment[split..]
        .iter()
        .take(s.window)
        .take_while(|o| on_side_of(o.value, new_level, old_level))
        .count();
    let end = split + level_len;
    if level_len == 0 || (level_len == 1 && end < segment.len()) || end < MIN_NOISE_COMMITS {
        return None;
    }
    let head = &segment[split..end];
    let verdict = compare(
        &pooled_samples(base),
        &pooled_samples(head),
        direction,
        &noise_model(&segment[..end]),
        s,
    );
    // One commit's value alone cannot tell a spike from a step: a new level of one commit
    // needs samples enough for the rank test (five or more on each side). Two or more commits
    // at the new level are a step however they were measured (instruction counts, for one,
    // come one value a commit and do not vary).
    let sampled = verdict.method == "mann-whitney";
    if !verdict.kind.is_change() || !(sampled || level_len >= 2 && outstanding(base, head, s)) {
        return None;
    }
    let (before, after) = (verdict.baseline, verdict.value);
    let separated = base.iter().all(|o| on_side_of(o.value, before, after))
        && head.iter().all(|o| on_side_of(o.value, after, before));
    separated.then(|| {
        let method = "first-commits+per-commit-test";
        ChangePoint::from_verdict(
            &verdict,
            split,
            (split, level_len),
            (split, level_len),
            method,
        )
    })
}

/// Without samples, whether the step between `base` and `head` (positive values) is larger than
/// every change between neighbouring commits on either side of it, times `noise_multiplier` at
/// its upper confidence bound for that many changes. The noise of a few changes is otherwise
/// known only from those few, and the tested step was chosen as the largest: values within
/// ±0.5 % made a +0.5 % "step" after three commits whose five other changes happened to be
/// small.
fn outstanding(base: &[CommitObservation], head: &[CommitObservation], s: &Sensitivity) -> bool {
    let logs = |side: &[CommitObservation]| -> Option<Vec<f64>> {
        side.iter()
            .map(|o| (o.value > 0.0).then(|| o.value.ln()))
            .collect()
    };
    let (Some(before), Some(after)) = (logs(base), logs(head)) else {
        return false;
    };
    let changes: Vec<f64> = (before.windows(2).chain(after.windows(2)))
        .map(|w| (w[1] - w[0]).abs())
        .collect();
    let largest = changes.iter().copied().fold(0.0, f64::max);
    let step = (median(&after) - median(&before)).abs();
    step > upper_bound_multiplier(s.noise_multiplier, changes.len() as f64) * largest
}

/// Whether `value` lies on `level`'s side of the midpoint between `level` and `other`.
pub(super) fn on_side_of(value: f64, level: f64, other: f64) -> bool {
    let midpoint = (level + other) / 2.0;
    (value - midpoint) * (level - midpoint) > 0.0
}

/// Every sample of `commits`, or the value of a commit that reported none.
pub(super) fn pooled_samples(commits: &[CommitObservation]) -> Vec<f64> {
    commits
        .iter()
        .flat_map(|o| {
            if o.samples.is_empty() {
                vec![o.value]
            } else {
                o.samples.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
