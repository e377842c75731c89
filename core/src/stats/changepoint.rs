//! Change points over a series' history: where its level shifted and stayed shifted.
//!
//! 1. The values are standardized by the series' robust commit-to-commit noise.
//! 2. Excursions shorter than `min_segment_len` are replaced by the local median, so a spike
//!    that reverts is an outlier, never a change point.
//! 3. Seeded binary segmentation proposes candidates whose CUSUM statistic clears the
//!    threshold implied by `change_point_alpha` (see [`super::segmentation`]).
//! 4. Each candidate is moved to the best split between its neighbours, then confirmed by a
//!    Mann-Whitney test between the commits on either side (at most `window` each), its
//!    z-score shrunk for the values' lag-1 autocorrelation, by the minimum effect, and by
//!    steppiness: a line with a step must fit clearly better than the line alone, so that a
//!    smooth trend is no run of steps. The weakest failing candidate is dropped and its neighbours re-examined
//!    until all pass (bottom-up merging), so a slow drift between two flat stretches shows
//!    up as one change while noise and smooth trends do not.
//!
//! The rank test is exact for any noise distribution, which keeps false alarms rare on
//! bimodal or skewed series where a normal model would be too confident.

use std::cell::RefCell;
use std::collections::HashMap;

use serde::Serialize;

use crate::model::Direction;

use super::distribution::normal_quantile;
use super::early::{detect_close_change, detect_early_change};
use super::exact_steps::detect_exact_steps;
use super::mann_whitney::shift_interval;
use super::noise::{CommitObservation, robust_sd, tail_matched_sd};
use super::robust::{PercentBase, median};
use super::segmentation::{PrefixSums, seeded_candidates, suppress_short_excursions};
use super::sensitivity::Sensitivity;
use super::verdict::{Verdict, VerdictKind};
use edges::StepEdges;
use evidence::{Confirmation, Evidence, smallest_step};
use ramp::{LogScale, RampFitter, shape_scale};
use shape::swings;

/// Standardized distance from the local median beyond which a short excursion is replaced.
const EXCURSION_THRESHOLD: f64 = 3.0;

/// The smallest change of level reported, in units of the series' commit-to-commit noise. A
/// rank test over dozens of commits finds shifts far smaller than the noise between two
/// neighbouring commits (the demo's first commits, measured while the machine settled, sit
/// 26 % below the rest of a throughput whose commits differ by 20 %), and such a shift cannot
/// be told from a slow change of the machine. A step of 3 σ of a commit's value is 2.1 of
/// these units.
const MIN_STEP_IN_NOISE: f64 = 1.5;

/// A confirmed change of level, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangePoint {
    /// First commit of the new segment, as an index into the analysed slice; for a drift,
    /// the first commit whose level moved.
    pub position: usize,
    /// Commits over which the level moved: 1 for a step; for a drift, the length of its ramp,
    /// whose last commit (`position + span − 1`) is the first at the new level.
    pub span: usize,
    /// Regression or improvement.
    pub kind: VerdictKind,
    /// Median of the commits before the change (at most `window` of them).
    pub before: f64,
    /// Median of the commits from the new level on (at most `window` of them).
    pub after: f64,
    /// (after − before) / |before|, in percent.
    pub change_pct: f64,
    /// Confidence interval of the change at 1 − alpha, in percent.
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    /// Two-sided Mann-Whitney p-value between the two sides.
    pub p_value: f64,
    /// Commit-to-commit noise of the series (as in [`super::NoiseModel`]), in percent of
    /// `before`.
    pub noise_pct: f64,
    /// Length of the segment ending just before the change.
    pub segment_before: usize,
    /// Length of the segment starting at the change.
    pub segment_after: usize,
    /// Commits on each side that the test used.
    pub evidence_before: usize,
    pub evidence_after: usize,
    /// How the change was found: `seeded-segmentation+mann-whitney`.
    pub method: &'static str,
}

impl ChangePoint {
    /// A step at `position` called by the per-commit test, with the commits of each side's
    /// segment (`segments`) and those the test used (`evidence`), before and after.
    pub(crate) fn from_verdict(
        verdict: &Verdict,
        position: usize,
        segments: (usize, usize),
        evidence: (usize, usize),
        method: &'static str,
    ) -> Self {
        ChangePoint {
            position,
            span: 1,
            kind: verdict.kind,
            before: verdict.baseline,
            after: verdict.value,
            change_pct: verdict.change_pct,
            ci_low_pct: verdict.ci_low_pct,
            ci_high_pct: verdict.ci_high_pct,
            p_value: verdict.p_value.unwrap_or(1.0),
            noise_pct: verdict.noise_pct,
            segment_before: segments.0,
            segment_after: segments.1,
            evidence_before: evidence.0,
            evidence_after: evidence.1,
            method,
        }
    }
}

/// Finds the changes of level in `series` (oldest first). Observations with a non-finite
/// value are skipped; positions still index `series`. Deterministic and O(n log n).
///
/// A step with fewer than `min_segment_len` commits before it, at the start of the history,
/// is judged as in [`detect_early_change`]: a history measured after the fact may hold one
/// that was never the newest commit. So is a step two to four commits after another one
/// ([`detect_close_change`]). A series whose commits repeat their value (instruction counts)
/// has no noise to measure: its steps are the changes between its levels
/// ([`detect_exact_steps`]).
pub fn detect_change_points(
    series: &[CommitObservation],
    direction: Direction,
    sensitivity: &Sensitivity,
) -> Vec<ChangePoint> {
    if let Some(steps) = detect_exact_steps(series, direction, sensitivity) {
        return steps;
    }
    let mut found = segmented_changes(series, direction, sensitivity);
    let first = found.first().map_or(series.len(), |c| c.position);
    if let Some(early) = detect_early_change(&series[..first], direction, sensitivity) {
        if let Some(next) = found.first_mut() {
            next.segment_before = next.position - early.position;
        }
        found.insert(0, early);
    }
    let mut i = 0;
    while i < found.len() {
        let start = found[i].position;
        let end = found.get(i + 1).map_or(series.len(), |c| c.position);
        let previous = i
            .checked_sub(1)
            .map_or(0, |j| found[j].position + found[j].span - 1);
        let close = (found[i].span == 1)
            .then(|| detect_close_change(series, (previous, start, end), direction, sensitivity))
            .flatten();
        if let Some(close) = close {
            found[i].segment_after = close.position - start;
            if let Some(next) = found.get_mut(i + 1) {
                next.segment_before = next.position - close.position;
            }
            found.insert(i + 1, close);
        }
        i += 1;
    }
    found
}

/// The changes of level that binary segmentation finds and the rank test confirms, each with
/// at least `min_segment_len` commits on either side.
fn segmented_changes(
    series: &[CommitObservation],
    direction: Direction,
    sensitivity: &Sensitivity,
) -> Vec<ChangePoint> {
    let s = sensitivity.sanitized();
    let min_len = s.min_segment_len;
    let (indices, values): (Vec<usize>, Vec<f64>) = series
        .iter()
        .enumerate()
        .filter(|(_, o)| o.value.is_finite())
        .map(|(i, o)| (i, o.value))
        .unzip();
    let n = values.len();
    if n < 2 * min_len {
        return Vec::new();
    }

    // Work in units of the largest magnitude so that nothing overflows near f64::MAX.
    let magnitude = values.iter().fold(0.0, |m: f64, v| m.max(v.abs()));
    if magnitude == 0.0 {
        return Vec::new();
    }
    let scaled: Vec<f64> = values.iter().map(|v| v / magnitude).collect();
    let mut changes: Vec<f64> = scaled.windows(2).map(|w| w[1] - w[0]).collect();
    // The spread of one value is that of a difference of two, over √2.
    let sd = robust_sd(&mut changes.clone()) / std::f64::consts::SQRT_2;
    if sd == 0.0 {
        return Vec::new();
    }
    let sd = sd.max(1e-300);
    let center = median(&scaled);
    let standardized: Vec<f64> = scaled.iter().map(|v| (v - center) / sd).collect();
    let filtered = suppress_short_excursions(&standardized, min_len, EXCURSION_THRESHOLD);

    let threshold = normal_quantile(1.0 - s.change_point_alpha / 2.0);
    let sums = PrefixSums::new(&filtered);
    let mut splits = seeded_candidates(&filtered, min_len, threshold);
    let kept: Vec<&CommitObservation> = indices.iter().map(|&i| &series[i]).collect();
    let edges = StepEdges {
        sums: &sums,
        standardized: &standardized,
        filtered: &filtered,
        observations: &kept,
        direction,
    };
    for i in 0..splits.len() {
        splits[i] = edges.refined(&splits, i, &s);
    }

    // Reported like the noise model's commit-to-commit spread, so the numbers agree.
    let noise_abs = (tail_matched_sd(&mut changes) * magnitude).min(f64::MAX);
    let logs = LogScale::new(&values);
    let shape_values = (logs.as_ref())
        .and_then(shape_scale)
        .unwrap_or_else(|| filtered.clone());
    let ramps = RampFitter::new(&shape_values);
    let confirm = Confirmation {
        values: &values,
        observations: &kept,
        direction,
        standardized: &filtered,
        ramps: &ramps,
        steppiness: threshold * threshold,
        smallest_step: smallest_step(logs, noise_abs),
        settings: &s,
        drifts: RefCell::default(),
    };
    let mut evidence: Vec<Option<Evidence>> = vec![None; splits.len()];
    // Whether one ramp fits two neighbouring steps as well as they do depends only on the
    // stretch, and each pair is asked from both sides and again on every pass: thousands of
    // fits each, computed once.
    let one_ramp: RefCell<HashMap<(usize, usize, usize, usize), bool>> = RefCell::default();
    loop {
        for (i, slot) in evidence.iter_mut().enumerate() {
            if slot.is_none() {
                *slot = Some(confirm.evidence(&splits, i));
            }
        }
        if evidence.iter().flatten().all(|e| e.confirmed) {
            for (i, e) in evidence.iter_mut().flatten().enumerate() {
                if e.drift.is_none() {
                    e.drift = Some(confirm.drift(&splits, i));
                }
            }
        }
        let evidence_of = |i: usize| evidence[i].as_ref().expect("filled above");
        let weakest = |doubtful: &dyn Fn(usize) -> bool| {
            (0..evidence.len())
                .filter(|&i| doubtful(i))
                .map(|i| (i, evidence_of(i).p_value))
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        };
        // A gradual change next to a gradual change the other way is part of a swing (a
        // seasonal or wandering level), not a change. A change next to one the same way is
        // part of the same drift when their ramps overlap, or when one ramp fits the stretch
        // as well as the two steps. Either is dropped once every other doubt is settled, the
        // weakest first, and its neighbour re-examined over the longer stretch.
        let not_alone = |i: usize| {
            let e = evidence_of(i);
            let rise = e.after - e.before;
            [i.checked_sub(1), Some(i + 1)]
                .into_iter()
                .flatten()
                .filter(|&j| j < evidence.len())
                .any(|j| {
                    let other = evidence_of(j);
                    if (other.after - other.before) * rise < 0.0 {
                        return e.drift.flatten().is_some() && other.drift.flatten().is_some();
                    }
                    if let (Some(a), Some(b)) = (e.drift.flatten(), other.drift.flatten())
                        && a.overlaps(&b)
                    {
                        return true;
                    }
                    let (first, second) = (i.min(j), i.max(j));
                    let low = first.checked_sub(1).map_or(0, |k| splits[k]);
                    let high = splits.get(second + 1).copied().unwrap_or(n);
                    let stretch = (low, splits[first], splits[second], high);
                    *(one_ramp.borrow_mut().entry(stretch)).or_insert_with(|| {
                        ramps.one_ramp_fits_two_steps(
                            low,
                            splits[first],
                            splits[second],
                            high,
                            s.window,
                        )
                    })
                })
        };
        let swinging = || {
            let swings = swings(&filtered, &splits, 2 * s.window);
            weakest(&|i| swings[i])
        };
        let Some((dropped, _)) = weakest(&|i| !evidence_of(i).confirmed)
            .or_else(|| weakest(&not_alone))
            .or_else(swinging)
        else {
            break;
        };
        splits.remove(dropped);
        evidence.remove(dropped);
        // The neighbours now border longer segments: move them to their best split there and
        // re-examine them and whoever borders them.
        for neighbour in [
            dropped.checked_sub(1),
            (dropped < splits.len()).then_some(dropped),
        ]
        .into_iter()
        .flatten()
        {
            splits[neighbour] = edges.refined(&splits, neighbour, &s);
        }
        let low = dropped.saturating_sub(2);
        let high = (dropped + 2).min(splits.len());
        for slot in &mut evidence[low..high] {
            *slot = None;
        }
    }

    splits
        .iter()
        .zip(evidence)
        .enumerate()
        .map(|(i, (&at, e))| {
            let e = e.expect("every remaining split has evidence");
            let previous = if i == 0 { 0 } else { splits[i - 1] };
            let next = splits.get(i + 1).copied().unwrap_or(n);
            // A drift is reported from where the level started to move, with the levels of
            // the stretches either side of its ramp.
            let drift = e.drift.flatten();
            let (start, span) = drift.map_or((at, 1), |r| (r.start, r.length));
            let (left, right) = (
                &values[e.window.0.min(start - 1)..start],
                &values[(start + span - 1).min(e.window.1 - 1)..e.window.1],
            );
            let (before, after) = if drift.is_some() {
                (median(left), median(right))
            } else {
                (e.before, e.after)
            };
            let reference = PercentBase::new(before, after);
            // Only the survivors need an interval, so it is computed here, once.
            let (low, high) = shift_interval(left, right, 1.0 - s.alpha);
            ChangePoint {
                position: indices[start],
                span: indices[start + span - 1] + 1 - indices[start],
                kind: VerdictKind::of_change(after - before, direction),
                before,
                after,
                change_pct: reference.percent((after - before).clamp(-f64::MAX, f64::MAX)),
                ci_low_pct: reference.percent(low),
                ci_high_pct: reference.percent(high),
                p_value: e.p_value,
                noise_pct: reference.percent(noise_abs).abs(),
                segment_before: start - previous,
                segment_after: next - start,
                evidence_before: left.len(),
                evidence_after: right.len(),
                method: match (e.by_samples, drift.is_some()) {
                    (true, _) => "seeded-segmentation+samples-beside-the-step",
                    (false, true) => "seeded-segmentation+mann-whitney+ramp",
                    (false, false) => "seeded-segmentation+mann-whitney",
                },
            }
        })
        .collect()
}

mod autocorrelation;
mod edges;
mod evidence;
mod ramp;
#[cfg(test)]
mod recorded;
mod shape;
#[cfg(test)]
mod tests;
