//! The y axis as plotters sees it: linear, or logarithmic with labels on round values.
//!
//! plotters' own logarithmic axis puts labels only on powers of ten and their multiples, so a
//! series that stays within one decade (40 µs to 90 µs) would get no label at all. This axis
//! labels 1-2-5 multiples of powers of ten when the range spans enough of them, every multiple
//! when it spans fewer, and falls back to linear labels inside a narrow range, where a
//! logarithmic axis looks linear anyway.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use serde::Deserialize;

/// Multiples of each power of ten tried as label positions, sparsest first.
const MULTIPLES: [&[f64]; 3] = [
    &[1.0],
    &[1.0, 2.0, 5.0],
    &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
];

/// How values map to heights; `scale=linear` or `scale=log` in a page's query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum YScale {
    /// Equal differences are equal heights.
    #[default]
    Linear,
    /// Equal ratios are equal heights; only positive values can be drawn.
    Log,
}

impl YScale {
    /// Where `value` sits on the axis: itself, or its logarithm. Non-positive values on a
    /// logarithmic axis map far below any drawable value, so plotters cuts them at the frame.
    pub(super) fn axis_at(self, value: f64) -> f64 {
        match self {
            Self::Linear => value,
            Self::Log if value > 0.0 => value.log10(),
            Self::Log => f64::MIN_POSITIVE.log10(),
        }
    }

    /// The value at a place on the axis: the inverse of [`YScale::axis_at`].
    pub(super) fn value_at(self, at: f64) -> f64 {
        match self {
            Self::Linear => at,
            Self::Log => 10f64.powf(at),
        }
    }

    /// Whether a value can be drawn on this axis.
    pub(super) fn accepts(self, value: f64) -> bool {
        match self {
            Self::Linear => true,
            Self::Log => value > 0.0,
        }
    }
}

/// The y coordinate: a linear range over the values or over their logarithms.
pub(super) struct YAxis {
    scale: YScale,
    /// The range in the values' own terms.
    values: Range<f64>,
    /// The same range in axis terms ([`YScale::axis_at`]).
    axis: RangedCoordf64,
}

impl YAxis {
    pub(super) fn new(scale: YScale, lo: f64, hi: f64) -> Self {
        Self {
            scale,
            values: lo..hi,
            axis: (scale.axis_at(lo)..scale.axis_at(hi)).into(),
        }
    }
}

impl Ranged for YAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.axis.map(&self.scale.axis_at(*value), limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        let wanted = hint.max_num_points();
        match self.scale {
            YScale::Linear => self.axis.key_points(wanted),
            YScale::Log => log_key_points(&self.values, wanted)
                .unwrap_or_else(|| linear_key_points(&self.values, wanted)),
        }
    }

    fn range(&self) -> Range<f64> {
        self.values.clone()
    }
}

/// Round values for labels between `range`'s ends, at most `wanted` of them: powers of ten
/// (every k-th when there are too many), else their 1-2-5 or 1…9 multiples; `None` when even
/// every multiple gives fewer than two labels.
fn log_key_points(range: &Range<f64>, wanted: usize) -> Option<Vec<f64>> {
    let (lo, hi) = (range.start, range.end);
    if !(lo > 0.0 && hi > lo && hi.is_finite()) || wanted == 0 {
        return None;
    }
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mut best = None;
    for multiples in MULTIPLES {
        let points: Vec<f64> = (first..=last)
            .flat_map(|exp| multiples.iter().map(move |m| m * 10f64.powi(exp)))
            .filter(|v| (lo..=hi).contains(v))
            .collect();
        if points.len() > wanted {
            break;
        }
        best = Some(points);
    }
    match best {
        Some(points) if points.len() >= 2 => Some(points),
        Some(_) => None,
        None => {
            // Even the powers of ten alone are too many: keep every k-th.
            let powers: Vec<f64> = (first..=last)
                .map(|exp| 10f64.powi(exp))
                .filter(|v| (lo..=hi).contains(v))
                .collect();
            let every = powers.len().div_ceil(wanted);
            Some(powers.into_iter().step_by(every).collect())
        }
    }
}

fn linear_key_points(range: &Range<f64>, wanted: usize) -> Vec<f64> {
    RangedCoordf64::from(range.clone()).key_points(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_over_decades_is_labelled_on_powers_of_ten_or_their_1_2_5_multiples() {
        assert_eq!(
            log_key_points(&(0.5..2000.0), 4),
            Some(vec![1.0, 10.0, 100.0, 1000.0])
        );
        assert_eq!(
            log_key_points(&(3.0..120.0), 6),
            Some(vec![5.0, 10.0, 20.0, 50.0, 100.0])
        );
        // Too many decades for the labels wanted: every other power.
        let sparse = log_key_points(&(1e-3..1e6), 5).unwrap();
        assert!(sparse.len() <= 5, "{sparse:?}");
        assert_eq!(sparse.first(), Some(&1e-3));
    }

    #[test]
    fn a_range_within_one_decade_gets_every_multiple_or_linear_labels() {
        assert_eq!(
            log_key_points(&(35.0..95.0), 8),
            Some(vec![40.0, 50.0, 60.0, 70.0, 80.0, 90.0])
        );
        assert_eq!(log_key_points(&(41.0..48.0), 8), None);
        let axis = YAxis::new(YScale::Log, 41.0, 48.0);
        let points = axis.key_points(5);
        assert!(points.len() >= 2, "{points:?}");
        assert!(points.iter().all(|v| (41.0..=48.0).contains(v)));
    }

    #[test]
    fn the_log_axis_puts_equal_ratios_at_equal_heights_and_cuts_non_positive_values() {
        let axis = YAxis::new(YScale::Log, 1.0, 1000.0);
        let limit = (300, 0);
        assert_eq!(axis.map(&1.0, limit), 300);
        assert_eq!(axis.map(&10.0, limit), 200);
        assert_eq!(axis.map(&100.0, limit), 100);
        assert_eq!(axis.map(&1000.0, limit), 0);
        assert!(axis.map(&0.0, limit) > 10_000);
        assert!(axis.map(&-5.0, limit) > 10_000);
        let linear = YAxis::new(YScale::Linear, 0.0, 1000.0);
        assert_eq!(linear.map(&500.0, limit), 150);
    }
}
