//! The y axis: which values it spans and how its labels are written.

use super::yaxis::YScale;
use super::{TrendPoint, whisker};

/// The y range never spans less than this fraction of the values' magnitude, so that sub-percent
/// jitter does not fill the chart like a step, while a 5 % step still fills most of it.
const MIN_RELATIVE_SPAN: f64 = 0.01;
/// Fraction of the data span added above and below, so points never sit on the frame.
const Y_PADDING: f64 = 0.08;

/// The y range: the data (values, and whiskers when drawn) padded on both sides, never zero-based.
///
/// The reference values (the band's edges and the baseline) may widen it by at most half the
/// data's span each way, so that the data always fills at least half of the plot: a band edge
/// beyond that is cut at the frame, and a baseline beyond that is left out of the range (and
/// drawn as an off-scale label) rather than drawn at a misleading place.
///
/// On a logarithmic axis the same is done with the logarithms of the values, so the padding
/// and the least span are ratios; values it cannot draw (zero or below) are left out.
pub(super) fn y_range(
    points: &[&TrendPoint],
    with_whiskers: bool,
    band: Option<(f64, f64)>,
    baseline: Option<f64>,
    y: YScale,
) -> (f64, f64) {
    let on_axis = |v: f64| y.accepts(v).then(|| y.axis_at(v));
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for point in points {
        let Some(value) = on_axis(point.value) else {
            continue;
        };
        let (a, b) = whisker(point)
            .filter(|_| with_whiskers)
            .map_or((value, value), |(a, b)| {
                (on_axis(a).unwrap_or(value), on_axis(b).unwrap_or(value))
            });
        lo = lo.min(a.min(value));
        hi = hi.max(b.max(value));
    }
    let mid = lo / 2.0 + hi / 2.0;
    let min_span = match y {
        YScale::Log => (1.0 + MIN_RELATIVE_SPAN).log10(),
        YScale::Linear if mid == 0.0 => 1.0,
        YScale::Linear => mid.abs() * MIN_RELATIVE_SPAN,
    };
    let span = (hi - lo).max(min_span);
    let (reach_lo, reach_hi) = (mid - span, mid + span);
    let band = band.and_then(|(a, b)| Some((on_axis(a)?, on_axis(b)?)));
    let baseline = baseline
        .and_then(on_axis)
        .filter(|b| (reach_lo..=reach_hi).contains(b))
        .map(|b| (b, b));
    for (a, b) in band.into_iter().chain(baseline) {
        lo = lo.min(a.max(reach_lo));
        hi = hi.max(b.min(reach_hi));
    }
    let mid = lo / 2.0 + hi / 2.0;
    let half = (hi - lo).max(min_span) * (0.5 + Y_PADDING);
    (y.value_at(mid - half), y.value_at(mid + half))
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
        let text = if self.scientific {
            format!("{value:.decimals$e}")
        } else {
            format!("{value:.decimals$}")
        };
        // A tick a hair below zero rounds to "-0.0", which reads as a different number.
        match text.strip_prefix('-') {
            Some(unsigned) if unsigned.chars().all(|c| matches!(c, '0' | '.')) => {
                unsigned.to_owned()
            }
            _ => text,
        }
    }
}
