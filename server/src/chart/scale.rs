//! The y axis: which values it spans and how its labels are written.

use super::{BandPoint, Baseline, Segment, TrendChart, TrendPoint, plottable, whisker};
use crate::units::shown_unit;

/// The y range never spans less than this fraction of the values' magnitude, so that sub-percent
/// jitter does not fill the chart like a step, while a 5 % step still fills most of it.
const MIN_RELATIVE_SPAN: f64 = 0.01;
/// Fraction of the data span added above and below, so points never sit on the frame.
const Y_PADDING: f64 = 0.08;

/// The y range: the data (values and whiskers) padded on both sides, never zero-based.
///
/// The reference values (the band's edges and the baseline) may widen it by at most half the
/// data's span each way, so that the data always fills at least half of the plot: a band edge
/// beyond that is cut at the frame, and a baseline beyond that is left out of the range (and
/// drawn as an off-scale label) rather than drawn at a misleading place.
pub(super) fn y_range(
    points: &[&TrendPoint],
    band: Option<(f64, f64)>,
    baseline: Option<f64>,
) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for point in points {
        let (a, b) = whisker(point).unwrap_or((point.value, point.value));
        lo = lo.min(a.min(point.value));
        hi = hi.max(b.max(point.value));
    }
    let mid = lo / 2.0 + hi / 2.0;
    let min_span = if mid == 0.0 {
        1.0
    } else {
        mid.abs() * MIN_RELATIVE_SPAN
    };
    let span = (hi - lo).max(min_span);
    let (reach_lo, reach_hi) = (mid - span, mid + span);
    let baseline = baseline
        .filter(|b| (reach_lo..=reach_hi).contains(b))
        .map(|b| (b, b));
    for (a, b) in band.into_iter().chain(baseline) {
        lo = lo.min(a.max(reach_lo));
        hi = hi.max(b.min(reach_hi));
    }
    let mid = lo / 2.0 + hi / 2.0;
    let half = (hi - lo).max(min_span) * (0.5 + Y_PADDING);
    (mid - half, mid + half)
}

/// How the y-axis labels are written: enough decimals to tell neighbouring ticks apart.
#[derive(Debug, Clone, Copy)]
pub(super) struct AxisFormat {
    scientific: bool,
    decimals: usize,
}

impl AxisFormat {
    pub(super) fn for_range(lo: f64, hi: f64, labels: usize) -> Self {
        let step_exp = ((hi - lo) / labels as f64).log10().floor() as i32;
        let magnitude = lo.abs().max(hi.abs());
        let scientific = !(1e-3..1e7).contains(&magnitude);
        let decimals = if scientific {
            magnitude.log10().floor() as i32 - step_exp
        } else {
            -step_exp
        };
        Self {
            scientific,
            decimals: decimals.clamp(0, 12) as usize,
        }
    }

    pub(super) fn format(self, value: f64) -> String {
        let decimals = self.decimals;
        if self.scientific {
            format!("{value:.decimals$e}")
        } else {
            format!("{value:.decimals$}")
        }
    }
}

/// A chart's values in the unit they are shown in (sizes in a readable binary prefix): the
/// points, the band, the levels and the baseline scaled alike, so that everything drawn and
/// every tooltip agrees with the axis.
pub(super) struct ShownValues {
    unit: String,
    points: Vec<TrendPoint>,
    band: Vec<BandPoint>,
    segments: Vec<Segment>,
    baseline: Option<f64>,
}

impl ShownValues {
    /// The chart's values rescaled, or `None` when they are shown as they are.
    pub(super) fn of(chart: &TrendChart) -> Option<Self> {
        let magnitude = chart
            .points
            .iter()
            .map(|p| p.value)
            .filter(|v| plottable(*v))
            .fold(0.0_f64, |m, v| m.max(v.abs()));
        let shown = shown_unit(chart.unit, magnitude);
        if shown.factor == 1.0 && shown.unit == chart.unit {
            return None;
        }
        let scale = |v: f64| shown.scale(v);
        Some(Self {
            points: chart
                .points
                .iter()
                .map(|p| TrendPoint {
                    value: scale(p.value),
                    low: p.low.map(scale),
                    high: p.high.map(scale),
                    ..p.clone()
                })
                .collect(),
            band: chart
                .band
                .iter()
                .map(|b| BandPoint {
                    low: scale(b.low),
                    high: scale(b.high),
                    ..*b
                })
                .collect(),
            segments: chart
                .segments
                .iter()
                .map(|s| Segment {
                    level: scale(s.level),
                    ..*s
                })
                .collect(),
            baseline: chart.baseline.map(|b| scale(b.value)),
            unit: shown.unit,
        })
    }

    /// `chart` drawing these values.
    pub(super) fn chart<'a>(&'a self, chart: &TrendChart<'a>) -> TrendChart<'a> {
        TrendChart {
            unit: &self.unit,
            points: &self.points,
            band: &self.band,
            segments: &self.segments,
            baseline: chart
                .baseline
                .zip(self.baseline)
                .map(|(b, value)| Baseline {
                    value,
                    label: b.label,
                }),
            ..*chart
        }
    }
}
