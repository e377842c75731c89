//! Robust summaries (median, median absolute deviation, relative change) that a few wild
//! values cannot move, plus the one rule for turning a difference into a percentage.

/// Scales a median absolute deviation to a standard deviation for normal data.
pub(crate) const MAD_TO_SD: f64 = 1.482_602_218_505_602;

/// Median of `values` (mean of the two middle values for an even count); 0 when empty.
/// Reorders `values`.
pub(crate) fn median_in_place(values: &mut [f64]) -> f64 {
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    let (_, upper, _) = values.select_nth_unstable_by(n / 2, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        return upper;
    }
    let lower = values[..n / 2]
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    midpoint(lower, upper)
}

/// Median of `values` without reordering them; 0 when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    median_in_place(&mut values.to_vec())
}

/// Median absolute deviation from the median (unscaled); 0 when empty. Reorders `values`.
pub(crate) fn mad_in_place(values: &mut [f64]) -> f64 {
    let center = median_in_place(values);
    for v in values.iter_mut() {
        *v = (*v - center).abs();
    }
    median_in_place(values)
}

/// The midpoint of two finite numbers without overflowing near f64::MAX.
pub(crate) fn midpoint(a: f64, b: f64) -> f64 {
    a / 2.0 + b / 2.0
}

/// Sample standard deviation (n − 1), computed around the mean in two passes so that huge
/// magnitudes neither overflow nor lose the spread; 0 for fewer than two values.
pub(crate) fn sample_sd(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().map(|v| v / n).sum::<f64>();
    // Scaling by the largest deviation keeps the squares finite for values near f64::MAX.
    let largest = values.iter().map(|v| (v - mean).abs()).fold(0.0, f64::max);
    if largest == 0.0 || !largest.is_finite() {
        return 0.0;
    }
    let sum_sq = values
        .iter()
        .map(|v| ((v - mean) / largest).powi(2))
        .sum::<f64>();
    largest * (sum_sq / (n - 1.0)).sqrt()
}

/// The magnitude that percentages of a change from `baseline` are expressed against.
///
/// Normally |baseline|. A change away from zero has no finite relative size, so when the
/// baseline is zero (or so close that the ratio overflows) the larger magnitude of the two is
/// used instead, which reports a change from 0 to anything as ±100 %.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PercentBase(f64);

impl PercentBase {
    pub(crate) fn new(baseline: f64, value: f64) -> Self {
        let b = baseline.abs();
        let delta = value - baseline;
        if b > 0.0 && (delta / b).is_finite() && (100.0 * delta / b).is_finite() {
            return Self(b);
        }
        let larger = b.max(value.abs());
        Self(if larger > 0.0 { larger } else { 1.0 })
    }

    /// `delta` (in the metric's unit) as a percentage, clamped to a finite number.
    pub(crate) fn percent(self, delta: f64) -> f64 {
        let pct = 100.0 * (delta / self.0);
        if pct.is_finite() {
            pct
        } else if pct.is_nan() {
            0.0
        } else {
            pct.signum() * f64::MAX
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_handles_odd_even_and_empty_input() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[f64::MAX, f64::MAX]), f64::MAX);
    }

    #[test]
    fn mad_ignores_a_wild_value() {
        let mut values = vec![10.0, 11.0, 9.0, 10.0, 1e9];
        assert_eq!(mad_in_place(&mut values), 1.0);
    }

    #[test]
    fn sample_sd_survives_extreme_magnitudes() {
        assert!((sample_sd(&[1.0, 2.0, 3.0, 4.0]) - 1.2909944487358056).abs() < 1e-12);
        let huge = sample_sd(&[1e307, 3e307, 5e307]);
        assert!((huge / 2e307 - 1.0).abs() < 1e-12, "{huge}");
        assert_eq!(sample_sd(&[5.0, 5.0, 5.0]), 0.0);
        assert_eq!(sample_sd(&[5.0]), 0.0);
    }

    #[test]
    fn percentages_of_zero_or_tiny_baselines_stay_finite() {
        assert_eq!(PercentBase::new(200.0, 210.0).percent(10.0), 5.0);
        assert_eq!(PercentBase::new(-200.0, -210.0).percent(-10.0), -5.0);
        assert_eq!(PercentBase::new(0.0, 5.0).percent(5.0), 100.0);
        assert_eq!(PercentBase::new(0.0, -5.0).percent(-5.0), -100.0);
        assert_eq!(PercentBase::new(0.0, 0.0).percent(0.0), 0.0);
        let tiny = PercentBase::new(1e-310, 1e10).percent(1e10);
        assert!(tiny.is_finite() && tiny > 99.0, "{tiny}");
    }
}
