//! The evidence behind one candidate change point: the rank test between the commits on
//! either side, the samples beside a step in a short history, the smallest step, and the
//! ramp that tells a drift from a step.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::model::Direction;
use crate::stats::compare::compare;
use crate::stats::mann_whitney::mann_whitney;
use crate::stats::noise::{CommitObservation, noise_model, tail_matched_sd};
use crate::stats::robust::{PercentBase, median_in_place};
use crate::stats::sensitivity::Sensitivity;

use super::MIN_STEP_IN_NOISE;
use super::autocorrelation::{for_autocorrelation, lag_one_correlation, significant_correlation};
use super::ramp::{LogScale, Ramp, RampFitter, drift_around};
use super::shape::step_beats_line;

/// The test of one candidate against its neighbourhood.
#[derive(Debug, Clone)]
pub(super) struct Evidence {
    pub(super) before: f64,
    pub(super) after: f64,
    pub(super) p_value: f64,
    /// The commits the test used: `[window.0, position)` and `[position, window.1)`.
    pub(super) window: (usize, usize),
    pub(super) confirmed: bool,
    /// The samples of the commits beside the step gave the p-value (a short history).
    pub(super) by_samples: bool,
    /// The ramp that fits the change clearly better than any step, when it is gradual; None
    /// until every candidate is confirmed (the fit is O(window²), so only survivors get it).
    pub(super) drift: Option<Option<Ramp>>,
}

pub(super) struct Confirmation<'a> {
    pub(super) values: &'a [f64],
    /// The observations behind `values`, with their samples.
    pub(super) observations: &'a [&'a CommitObservation],
    pub(super) direction: Direction,
    /// The values in units of their noise, short excursions suppressed.
    pub(super) standardized: &'a [f64],
    /// Fits of a ramp to `standardized`, which tell a gradual change from a step.
    pub(super) ramps: &'a RampFitter,
    /// How much better (in squared noise units) a step must fit than a straight line.
    pub(super) steppiness: f64,
    /// The smallest change of level: [`MIN_STEP_IN_NOISE`] × the commit-to-commit noise.
    pub(super) smallest_step: SmallestStep,
    pub(super) settings: &'a Sensitivity,
    /// The drifts fitted so far, by (previous split, split, next split).
    pub(super) drifts: RefCell<HashMap<(usize, usize, usize), Option<Ramp>>>,
}

impl Confirmation<'_> {
    pub(super) fn evidence(&self, splits: &[usize], i: usize) -> Evidence {
        let s = self.settings;
        let at = splits[i];
        let previous = if i == 0 { 0 } else { splits[i - 1] };
        let next = splits.get(i + 1).copied().unwrap_or(self.values.len());
        let (left_start, right_end) = (
            previous.max(at.saturating_sub(s.window)),
            next.min(at + s.window),
        );
        let left = &self.values[left_start..at];
        let right = &self.values[at..right_end];
        let before = median_in_place(&mut left.to_vec());
        let after = median_in_place(&mut right.to_vec());
        let delta = (after - before).clamp(-f64::MAX, f64::MAX);
        let change_pct = PercentBase::new(before, after).percent(delta);
        let mut p_value = for_autocorrelation(
            mann_whitney(right, left).p_value,
            significant_correlation(lag_one_correlation(left, right), left, right),
        );
        let mut by_samples = false;
        if p_value >= s.change_point_alpha && fully_separated(left, right) {
            // Too few commits for the rank test of their values to reach `alpha`, however
            // clear the step: the samples of the two commits beside it decide.
            if let Some(p) = self.samples_across(left_start, at).filter(|&p| p < p_value) {
                p_value = p;
                by_samples = true;
            }
        }
        // Judged between the neighbours, however far: a drift between two long flat
        // stretches is a step at that scale, a trend that never settles is not.
        let steppy =
            step_beats_line(&self.standardized[previous..next], at - previous) > self.steppiness;
        let confirmed = delta != 0.0
            && p_value < s.change_point_alpha
            && change_pct.abs() >= s.min_effect_pct
            && self.smallest_step.is_reached(before, after)
            && steppy;
        Evidence {
            before,
            after,
            p_value,
            window: (left_start, right_end),
            confirmed,
            by_samples,
            drift: None,
        }
    }
}

impl Confirmation<'_> {
    /// The ramp of candidate `i` between its neighbours, when it is gradual.
    /// It depends only on the candidate and its neighbours, so it is fitted once for each
    /// (thousands of ramps each) however often a dropped neighbour elsewhere resets it.
    pub(super) fn drift(&self, splits: &[usize], i: usize) -> Option<Ramp> {
        let previous = if i == 0 { 0 } else { splits[i - 1] };
        let next = splits.get(i + 1).copied().unwrap_or(self.values.len());
        let reach = self.settings.window;
        *(self.drifts.borrow_mut())
            .entry((previous, splits[i], next))
            .or_insert_with(|| {
                drift_around(
                    self.ramps,
                    previous,
                    next,
                    splits[i],
                    reach,
                    self.steppiness,
                )
            })
    }

    /// The p-value of the per-commit test (rank test on samples, minimum effect against the
    /// noise of the commits before) between the commits on either side of `at`, when it calls
    /// a change: the evidence of a short history whose every commit already sits on its side.
    fn samples_across(&self, left_start: usize, at: usize) -> Option<f64> {
        let (before, after) = (self.observations[at - 1], self.observations[at]);
        let history: Vec<CommitObservation> = self.observations[left_start..at]
            .iter()
            .map(|o| CommitObservation::new(o.position, o.value))
            .collect();
        let verdict = compare(
            &before.samples,
            &after.samples,
            self.direction,
            &noise_model(&history),
            self.settings,
        );
        (verdict.kind.is_change() && verdict.method == "mann-whitney")
            .then_some(verdict.p_value)
            .flatten()
    }
}

/// The smallest change of level reported, on the scale of the series' noise.
#[derive(Debug, Clone, Copy)]
pub(super) enum SmallestStep {
    /// Between positive values, of the logarithm of after / before: the noise of a timing
    /// series grows with its level, and after a 50× step its commits differ by thousands of
    /// nanoseconds where they differed by a few.
    Ratio(f64),
    /// Otherwise in the values' unit.
    Absolute(f64),
}

impl SmallestStep {
    fn is_reached(self, before: f64, after: f64) -> bool {
        match self {
            SmallestStep::Ratio(log) => (after / before).ln().abs() >= log,
            SmallestStep::Absolute(size) => (after - before).abs() >= size,
        }
    }
}

/// [`MIN_STEP_IN_NOISE`] × the commit-to-commit noise of the series (`noise_abs` in the
/// values' unit), measured like the reported noise (see [`tail_matched_sd`]); on the ratio
/// scale when the series is positive (`logs`).
pub(super) fn smallest_step(logs: Option<LogScale>, noise_abs: f64) -> SmallestStep {
    match logs {
        Some(mut logs) => {
            SmallestStep::Ratio(MIN_STEP_IN_NOISE * tail_matched_sd(&mut logs.changes))
        }
        None => SmallestStep::Absolute(MIN_STEP_IN_NOISE * noise_abs),
    }
}

/// Whether every value of one side lies beyond every value of the other.
fn fully_separated(left: &[f64], right: &[f64]) -> bool {
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    max(left) < min(right) || max(right) < min(left)
}
