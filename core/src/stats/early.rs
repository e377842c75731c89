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
//!
//! The same holds after a step: a step two to four commits after an earlier one (a speed-up
//! soon followed by a partial give-back) leaves a segment too short for change-point
//! detection between them. [`detect_close_change`] judges it the same way, once at least two
//! commits confirm its new level, against the noise of the whole history up to there.

use crate::model::Direction;

use super::changepoint::ChangePoint;
use super::compare::compare;
use super::noise::{CommitObservation, NoiseModel, noise_model};
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

/// Fewest commits between an earlier step and a close one: the earlier step's own commit and
/// one more, so that the level between them is seen twice.
pub const MIN_COMMITS_AFTER_STEP: usize = 2;

/// Fewest commits at a close step's new level: one alone could be a spike, or a run slowed by
/// load, which the next commit would contradict.
const MIN_CLOSE_LEVEL: usize = 2;

/// Finds a step after the first few commits of `segment` (a history from its first commit up
/// to its first change point, oldest first). Positions of the result index `segment`.
pub fn detect_early_change(
    segment: &[CommitObservation],
    direction: Direction,
    sensitivity: &Sensitivity,
) -> Option<ChangePoint> {
    let s = sensitivity.sanitized();
    let last_split = s.min_segment_len.min(segment.len());
    let noise = |end: usize| (end >= MIN_NOISE_COMMITS).then(|| noise_model(&segment[..end]));
    (MIN_COMMITS_BEFORE..last_split)
        .find_map(|split| step_at(segment, split, 1, (direction, &s), &noise))
}

/// Finds a step two to `min_segment_len − 1` commits after the step at `bounds.1` of `series`,
/// before `bounds.2` (the next change point, or the end of the history); `bounds.0` is where
/// the level before that step began. The new level needs two commits or more. The noise is
/// that of the three levels' commits, each level scaled to the one between the steps, so that
/// neither step counts as noise. Positions of the result index `series`.
pub fn detect_close_change(
    series: &[CommitObservation],
    bounds: (usize, usize, usize),
    direction: Direction,
    sensitivity: &Sensitivity,
) -> Option<ChangePoint> {
    let s = sensitivity.sanitized();
    let (previous, start) = (bounds.0.min(bounds.1), bounds.1);
    let end = bounds.2.min(series.len());
    let segment = series.get(start..end)?;
    let last_split = s.min_segment_len.min(segment.len());
    (MIN_COMMITS_AFTER_STEP..last_split).find_map(|split| {
        let levels = |level_end: usize| {
            let stretches = [
                &series[previous..start],
                &segment[..split],
                &segment[split..level_end],
            ];
            let commits: usize = stretches.iter().map(|l| l.len()).sum();
            (commits >= MIN_NOISE_COMMITS).then(|| noise_model(&leveled(&stretches)))
        };
        let mut change = step_at(segment, split, MIN_CLOSE_LEVEL, (direction, &s), &levels)?;
        change.position += start;
        change.method = "after-a-step+per-commit-test";
        Some(change)
    })
}

/// The commits of `stretches` (levels of a history, each without a step), each level moved
/// onto the second one's median: by ratio when every value is positive, by difference
/// otherwise. Their noise is then the noise within the levels.
fn leveled(stretches: &[&[CommitObservation]; 3]) -> Vec<CommitObservation> {
    let target = median(&stretches[1].iter().map(|o| o.value).collect::<Vec<_>>());
    let positive = (stretches.iter().flat_map(|l| l.iter()))
        .all(|o| o.value > 0.0 && o.samples.iter().all(|v| *v > 0.0));
    let mut out = Vec::new();
    for level in stretches {
        let at = median(&level.iter().map(|o| o.value).collect::<Vec<_>>());
        let moved = |v: f64| {
            if positive {
                v * (target / at)
            } else {
                v + (target - at)
            }
        };
        out.extend(level.iter().map(|o| CommitObservation {
            position: o.position,
            value: moved(o.value),
            samples: o.samples.iter().map(|v| moved(*v)).collect(),
        }));
    }
    out
}

/// The step between `segment[..split]` and the commits from `split` on that share its new
/// level, of which there must be `min_level` or more (one will do only at the newest commit
/// of `segment`). `noise` gives the noise model for a new level that ends at an index of
/// `segment`, or none when too few commits measure it.
fn step_at(
    segment: &[CommitObservation],
    split: usize,
    min_level: usize,
    (direction, s): (Direction, &Sensitivity),
    noise: &dyn Fn(usize) -> Option<NoiseModel>,
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
    if level_len < min_level.max(1) || (level_len == 1 && end < segment.len()) {
        return None;
    }
    let head = &segment[split..end];
    let verdict = compare(
        &pooled_samples(base),
        &pooled_samples(head),
        direction,
        &noise(end)?,
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
