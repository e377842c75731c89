//! What a candidate change looks like against the alternatives that are no change points: a
//! straight line (a smooth trend) and an oscillation (a seasonal swing).

use crate::stats::robust::median;

/// Which of the changes at `splits` belong to an oscillation: three or more changes in a row
/// after each of which the level comes back to where it was two segments before (low, high,
/// low, high). A seasonal swing or a level that flips between two states is no change point;
/// a regression fixed later is one return, and stays. Only levels of at most `longest`
/// commits between the changes make a swing: steps hundreds of commits apart that happen to
/// go up and down are separate changes.
pub(super) fn swings(values: &[f64], splits: &[usize], longest: usize) -> Vec<bool> {
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(splits.iter().copied())
        .chain(std::iter::once(values.len()))
        .collect();
    let levels: Vec<f64> = bounds
        .windows(2)
        .map(|w| median(&values[w[0]..w[1]]))
        .collect();
    // returns[c]: after change c (between levels c and c + 1), change c + 1 takes the level
    // back by more than a quarter of change c.
    let returns: Vec<bool> = (0..splits.len())
        .map(|c| {
            c + 2 < levels.len()
                && (levels[c + 2] - levels[c]).abs() < 0.75 * (levels[c + 1] - levels[c]).abs()
        })
        .collect();
    let mut swinging = vec![false; splits.len()];
    for c in 0..splits.len().saturating_sub(2) {
        let short = |k: usize| splits[k + 1] - splits[k] <= longest;
        if returns[c] && returns[c + 1] && short(c) && short(c + 1) {
            swinging[c..=c + 2].iter_mut().for_each(|s| *s = true);
        }
    }
    swinging
}

/// How much better (in the values' squared units) a straight line with a step at `at` fits
/// `values` than the straight line alone. A slow drift or a smooth trend is fitted by the
/// line about as well, so its candidates are dropped and the neighbours re-examined: a trend
/// that never settles is no change point, a drift between two flat stretches is still one
/// change between them, and a step on a trend is still a step.
pub(super) fn step_beats_line(values: &[f64], at: usize) -> f64 {
    let n = values.len();
    if at == 0 || at >= n {
        return 0.0;
    }
    let x_mean = (n - 1) as f64 / 2.0;
    let y_mean = values.iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in values.iter().enumerate() {
        let dx = i as f64 - x_mean;
        sxy += dx * (y - y_mean);
        sxx += dx * dx;
    }
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    // The step's indicator, with what the line explains of it taken out; the line's
    // residuals are orthogonal to the line, so their product with it is their sum past `at`.
    let z_mean = (n - at) as f64 / n as f64;
    let z_slope = (at..n).map(|i| i as f64 - x_mean).sum::<f64>() / sxx.max(f64::MIN_POSITIVE);
    let (mut product, mut norm) = (0.0, 0.0);
    for (i, y) in values.iter().enumerate() {
        let dx = i as f64 - x_mean;
        let z = if i >= at { 1.0 } else { 0.0 };
        let z_perp = z - z_mean - z_slope * dx;
        product += (y - y_mean - slope * dx) * z_perp;
        norm += z_perp * z_perp;
    }
    if norm <= 0.0 {
        return 0.0;
    }
    let improvement = product * product / norm;
    // Residuals that still follow each other (a seasonal swing, a wandering level) carry
    // less information than as many independent values: the improvement shrinks by the
    // AR(1) share (1 − ρ)/(1 + ρ) of their lag-1 autocorrelation ρ.
    let beta = product / norm;
    let residual = |i: usize| {
        let dx = i as f64 - x_mean;
        let z = if i >= at { 1.0 } else { 0.0 };
        values[i] - y_mean - slope * dx - beta * (z - z_mean - z_slope * dx)
    };
    let (mut lagged, mut squares) = (0.0, 0.0);
    let mut previous = residual(0);
    squares += previous * previous;
    for i in 1..n {
        let r = residual(i);
        lagged += previous * r;
        squares += r * r;
        previous = r;
    }
    let rho = if squares > 0.0 {
        (lagged / squares).clamp(0.0, 0.99)
    } else {
        0.0
    };
    improvement * (1.0 - rho) / (1.0 + rho)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels(levels: &[(f64, usize)]) -> (Vec<f64>, Vec<usize>) {
        let mut values = Vec::new();
        let mut splits = Vec::new();
        for &(level, length) in levels {
            if !values.is_empty() {
                splits.push(values.len());
            }
            values.extend(std::iter::repeat_n(level, length));
        }
        (values, splits)
    }

    #[test]
    fn a_level_that_flips_back_and_forth_is_a_swing() {
        let (values, splits) = levels(&[(0.0, 30), (3.0, 30), (0.2, 30), (2.9, 30), (0.0, 30)]);
        assert_eq!(swings(&values, &splits, 100), vec![true; 4]);
    }

    #[test]
    fn a_regression_fixed_later_and_a_staircase_are_no_swing() {
        let (values, splits) = levels(&[(0.0, 30), (3.0, 10), (0.0, 30)]);
        assert_eq!(swings(&values, &splits, 100), vec![false; 2]);
        let (values, splits) = levels(&[(0.0, 30), (3.0, 30), (6.0, 30), (4.0, 30)]);
        assert_eq!(swings(&values, &splits, 100), vec![false; 3]);
        let (values, splits) = levels(&[(0.0, 300), (3.0, 300), (0.2, 300), (2.9, 300)]);
        assert_eq!(swings(&values, &splits, 100), vec![false; 3]);
    }
}
