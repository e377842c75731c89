//! Ranks and residuals that follow each other (a seasonal swing, a wandering level) carry less
//! information than as many independent values: the corrections for that.

use crate::stats::distribution::{normal_quantile, normal_sf};

/// The lag-1 autocorrelation of the ranks of the values within each side, pairs taken within
/// each side. Ranks, so that a few wild values under load do not pass for autocorrelation.
/// Noise is about 0; a seasonal swing, a random-walk drift or a trend leaves it well above.
pub(super) fn lag_one_correlation(left: &[f64], right: &[f64]) -> f64 {
    let (mut product, mut square) = (0.0, 0.0);
    for side in [left, right] {
        let mut order: Vec<usize> = (0..side.len()).collect();
        order.sort_by(|&a, &b| side[a].total_cmp(&side[b]));
        let center = (side.len() as f64 - 1.0) / 2.0;
        // Tied values share their mean rank, so a constant side has none to correlate.
        let mut ranks = vec![0.0; side.len()];
        let mut start = 0;
        while start < order.len() {
            let mut end = start + 1;
            while end < order.len() && side[order[end]] == side[order[start]] {
                end += 1;
            }
            let mean_rank = (start + end - 1) as f64 / 2.0 - center;
            for &i in &order[start..end] {
                ranks[i] = mean_rank;
            }
            start = end;
        }
        product += ranks.windows(2).map(|w| w[0] * w[1]).sum::<f64>();
        square += ranks.iter().map(|r| r * r).sum::<f64>();
    }
    if square > 0.0 { product / square } else { 0.0 }
}

/// `rho` when it is above what white noise shows by chance (1.96/√pairs, the 95 % bound of a
/// lag-1 autocorrelation of independent values), else 0. Short segments of plain noise give
/// rank autocorrelations of ±0.3 by chance; shrinking their step's evidence by that lost a 50 %
/// step between twelve and eight quiet commits about one time in two. A seasonal swing or a
/// wandering level stays far above the bound.
pub(super) fn significant_correlation(rho: f64, left: &[f64], right: &[f64]) -> f64 {
    let pairs = (left.len().saturating_sub(1) + right.len().saturating_sub(1)).max(1) as f64;
    if rho > 1.96 / pairs.sqrt() { rho } else { 0.0 }
}

/// A two-sided p-value of a test that assumed independent values, corrected for a positive
/// lag-1 autocorrelation `rho` as for an AR(1) series: its z-score shrinks by
/// √((1 − ρ)/(1 + ρ)), the square root of the effective share of independent values. Ranks
/// of a seasonal or drifting series look far more certain than they are.
pub(super) fn for_autocorrelation(p_value: f64, rho: f64) -> f64 {
    if rho.is_nan() || rho <= 0.0 || p_value >= 1.0 {
        return p_value;
    }
    let rho = rho.min(0.99);
    let z = -normal_quantile(p_value / 2.0);
    if !z.is_finite() {
        return p_value;
    }
    (2.0 * normal_sf(z * ((1.0 - rho) / (1.0 + rho)).sqrt())).min(1.0)
}
