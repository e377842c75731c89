//! The shape of a confirmed change: a step at one commit, or a drift (a ramp) over several.
//!
//! Between its neighbours, a change is fitted by a level, a linear ramp over `length`
//! commits starting at `start`, and a level again (a step is a ramp of one commit). A slow
//! drift fitted by a step puts the step in the middle of the ramp, where neither side's level
//! holds; people who mark change points (TCPD's annotators, a performance engineer reading a
//! trend page) mark where the level started to move, and a drift is one change over a range,
//! not a run of steps.

use crate::stats::noise::robust_sd;

/// Least-squares fits of "level, ramp, level" to a stretch of standardized values.
pub(super) struct RampFitter {
    /// Prefix sums of the values, of their squares, and of the values times their index.
    sums: Vec<f64>,
    squares: Vec<f64>,
    weighted: Vec<f64>,
}

/// The best ramp found for a change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ramp {
    /// First commit whose level moved.
    pub start: usize,
    /// Commits over which the level moved (1: a step).
    pub length: usize,
    /// Residual sum of squares of the fit.
    pub rss: f64,
}

impl Ramp {
    /// Whether the two ramps share a commit or touch.
    pub(super) fn overlaps(&self, other: &Ramp) -> bool {
        self.start <= other.start + other.length && other.start <= self.start + self.length
    }
}

impl RampFitter {
    pub(super) fn new(values: &[f64]) -> Self {
        let prefix = |term: &dyn Fn(usize, f64) -> f64| {
            let mut total = 0.0;
            std::iter::once(0.0)
                .chain(values.iter().enumerate().map(|(i, &v)| {
                    total += term(i, v);
                    total
                }))
                .collect()
        };
        Self {
            sums: prefix(&|_, v| v),
            squares: prefix(&|_, v| v * v),
            weighted: prefix(&|i, v| i as f64 * v),
        }
    }

    /// The residual sum of squares over `[low, high)` of the best fit of a straight line plus
    /// a ramp: nothing before `start`, a linear rise over `[start, start + length)`, the full
    /// height from its last commit on. The line is there so that a step on a trend is still a
    /// step (the line takes the trend) and a trend alone is no ramp. None when the ramp does
    /// not leave a value on each side. (The fits go through [`Self::stretch`].)
    #[cfg(test)]
    fn rss(&self, low: usize, high: usize, start: usize, length: usize) -> Option<f64> {
        self.stretch(low, high).fit(start, length, true)
    }

    /// The sums over `[low, high)` that every fit of a ramp there shares, computed once for
    /// the hundreds of ramps tried over one stretch.
    fn stretch(&self, low: usize, high: usize) -> Stretch<'_> {
        // An empty stretch fits no ramp (`Stretch::fit` says None before using `n`).
        let n = high.saturating_sub(low) as f64;
        let v = self.sums[high] - self.sums[low];
        let vv = self.squares[high] - self.squares[low];
        let xv = self.weighted[high] - self.weighted[low] - low as f64 * v;
        let x = n * (n - 1.0) / 2.0;
        let xx = (n - 1.0) * n * (2.0 * n - 1.0) / 6.0;
        let centred = |a: f64, b: f64, ab: f64| ab - a * b / n;
        Stretch {
            fitter: self,
            low,
            high,
            n,
            v,
            x,
            c_xx: centred(x, x, xx),
            c_xv: centred(x, v, xv),
            c_vv: centred(v, v, vv),
        }
    }

    /// The best ramp over `[low, high)` that contains the change at `at` (starts at or before
    /// it and reaches the new level after it), at most `reach` commits from it either way,
    /// and the best step (a ramp of one commit) within the same reach.
    pub(super) fn best_around(
        &self,
        low: usize,
        high: usize,
        at: usize,
        reach: usize,
    ) -> (Option<Ramp>, Option<Ramp>) {
        let first = at.saturating_sub(reach).max(low + 1);
        let last_end = (at + reach).min(high).saturating_sub(1);
        let mut step: Option<Ramp> = None;
        let mut ramp: Option<Ramp> = None;
        let better = |best: &Option<Ramp>, rss: f64| best.is_none_or(|b| rss < b.rss);
        let stretch = self.stretch(low, high);
        // Steps after the change point are candidates too (a step placed a commit or two
        // early by noise is still a step); a ramp starts at the change point or before it.
        for start in first..=last_end {
            if let Some(rss) = stretch.fit(start, 1, true)
                && better(&step, rss)
            {
                step = Some(Ramp {
                    start,
                    length: 1,
                    rss,
                });
            }
            if start > at {
                continue;
            }
            for end in (at + 1).max(start + MIN_DRIFT_LENGTH)..=last_end {
                let length = end - start;
                if let Some(rss) = stretch.fit(start, length, true)
                    && better(&ramp, rss)
                {
                    ramp = Some(Ramp { start, length, rss });
                }
            }
        }
        (step, ramp)
    }
}

/// The shared sums of one stretch `[low, high)` (see [`RampFitter::stretch`]).
struct Stretch<'a> {
    fitter: &'a RampFitter,
    low: usize,
    high: usize,
    n: f64,
    v: f64,
    x: f64,
    c_xx: f64,
    c_xv: f64,
    c_vv: f64,
}

impl Stretch<'_> {
    /// The residual sum of squares of the best fit over the stretch of a straight line
    /// (`with_line`, else a level) plus a ramp: nothing before `start`, a linear rise over
    /// `[start, start + length)`, the full height from its last commit on. The line is there
    /// so that a step on a trend is still a step (the line takes the trend) and a trend alone
    /// is no ramp. None when the ramp does not leave a value on each side.
    fn fit(&self, start: usize, length: usize, with_line: bool) -> Option<f64> {
        let (low, high, n) = (self.low, self.high, self.n);
        let end = start + length;
        if start <= low || end >= high || length == 0 {
            return None;
        }
        let f = self.fitter;
        let m = length as f64;
        let sum = |a: usize, b: usize| f.sums[b] - f.sums[a];
        // x counts from `low`, so that the sums stay small and exact.
        let x_of = |t: usize| (t - low) as f64;
        // The regressor h: 0 before the ramp, k/m on its k-th commit (k = 1..m), 1 after it.
        let after = (high - end) as f64;
        let h = (m + 1.0) / 2.0 + after;
        let hh = (m + 1.0) * (2.0 * m + 1.0) / (6.0 * m) + after;
        let ramp_weighted = f.weighted[end] - f.weighted[start];
        let hv = (ramp_weighted - (start as f64 - 1.0) * sum(start, end)) / m + sum(end, high);
        // Σ x·h: on the ramp x = x(start) − 1 + k; after it, the x of [end, high).
        let hx = (x_of(start) - 1.0) * (m + 1.0) / 2.0
            + (m + 1.0) * (2.0 * m + 1.0) / 6.0
            + (x_of(end) + x_of(high) - 1.0) * after / 2.0;
        let centred = |a: f64, b: f64, ab: f64| ab - a * b / n;
        let (c_hh, c_hx, c_hv) = (
            centred(h, h, hh),
            centred(h, self.x, hx),
            centred(h, self.v, hv),
        );
        let (c_xx, c_xv, c_vv) = (self.c_xx, self.c_xv, self.c_vv);
        if !with_line {
            return Some((c_vv - c_hv * c_hv / c_hh.max(f64::MIN_POSITIVE)).max(0.0));
        }
        let det = c_hh * c_xx - c_hx * c_hx;
        if det <= 1e-9 * c_hh * c_xx || c_xx <= 0.0 {
            return Some(c_vv);
        }
        let explained = (c_xx * c_hv * c_hv - 2.0 * c_hx * c_hv * c_xv + c_hh * c_xv * c_xv) / det;
        Some((c_vv - explained).max(0.0))
    }
}

impl RampFitter {
    /// Whether one ramp over `[low, high)`, starting at or before `first` and reaching its
    /// level after `second`, fits at least as well as two steps at `first` and `second` (each
    /// level flat): then the two are one drift, cut in two by segmentation.
    pub(super) fn one_ramp_fits_two_steps(
        &self,
        low: usize,
        first: usize,
        second: usize,
        high: usize,
        reach: usize,
    ) -> bool {
        let level = |a: usize, b: usize| {
            let sum = self.sums[b] - self.sums[a];
            sum * sum / (b - a).max(1) as f64
        };
        let squares = self.squares[high] - self.squares[low];
        let two_steps = squares - level(low, first) - level(first, second) - level(second, high);
        let starts = first.saturating_sub(reach).max(low + 1)..=first;
        let stretch = self.stretch(low, high);
        starts.into_iter().any(|start| {
            (second + 1..=(second + reach).min(high.saturating_sub(1))).any(|end| {
                stretch
                    .fit(start, end - start, false)
                    .is_some_and(|rss| rss <= two_steps)
            })
        })
    }
}

/// Fewest commits a drift moves over: a level that moved over two commits is a step measured
/// half-way.
pub(super) const MIN_DRIFT_LENGTH: usize = 3;

/// The shape of the change at `at` between its neighbours `[low, high)` of the standardized
/// `values`: a drift when a ramp fits better than any step by more than `penalty` (in squared
/// noise units), else None (a step, where it was found).
pub(super) fn drift_around(
    fitter: &RampFitter,
    low: usize,
    high: usize,
    at: usize,
    reach: usize,
    penalty: f64,
) -> Option<Ramp> {
    let (step, ramp) = fitter.best_around(low, high, at, reach);
    let ramp = ramp?;
    let step_rss = step.map_or(f64::INFINITY, |s| s.rss);
    (step_rss - ramp.rss > penalty).then_some(ramp)
}

/// The values on the scale that decides a change's shape (a step or a drift): the logarithms
/// of a positive series in units of their robust commit-to-commit noise; None when that noise
/// is zero. Not filtered for short excursions: the filter takes the first
/// commits of a new level that dips later for outliers, and a step with its edge replaced by
/// the old level looks like a ramp. Timing series are
/// heteroscedastic: after a 50× step a run's p99.9 wanders by thousands of nanoseconds where
/// it wandered by a few before, and on the linear scale a ramp that bends through that
/// wandering fits better than the step itself. On the ratio scale one huge step is a step.
pub(super) fn shape_scale(logs: &LogScale) -> Option<Vec<f64>> {
    let sd = robust_sd(&mut logs.changes.clone()) / std::f64::consts::SQRT_2;
    if !(sd > 0.0 && sd.is_finite()) {
        return None;
    }
    // The fits have an intercept, so any centre will do: the mean costs one pass.
    let center = logs.values.iter().sum::<f64>() / logs.values.len().max(1) as f64;
    Some(logs.values.iter().map(|v| (v - center) / sd).collect())
}

/// The logarithms of a positive series and their commit-to-commit changes, computed once for
/// the shape of changes and for the smallest change reported.
pub(super) struct LogScale {
    pub(super) values: Vec<f64>,
    pub(super) changes: Vec<f64>,
}

impl LogScale {
    /// None when a value is not positive.
    pub(super) fn new(values: &[f64]) -> Option<Self> {
        if values.iter().any(|&v| v <= 0.0) {
            return None;
        }
        let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        let changes = logs.windows(2).map(|w| w[1] - w[0]).collect();
        Some(Self {
            values: logs,
            changes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::synthetic::Rng;

    fn brute_rss(values: &[f64], low: usize, high: usize, start: usize, length: usize) -> f64 {
        let h: Vec<f64> = (low..high)
            .map(|t| {
                if t < start {
                    0.0
                } else {
                    (((t - start + 1) as f64) / length as f64).min(1.0)
                }
            })
            .collect();
        let v = &values[low..high];
        let x: Vec<f64> = (0..v.len()).map(|i| i as f64).collect();
        // Least squares on (1, x, h) through the normal equations, solved by Cramer's rule.
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
        let one = vec![1.0; v.len()];
        let columns = [&one[..], &x[..], &h[..]];
        let mut gram = [[0.0; 3]; 3];
        let mut rhs = [0.0; 3];
        for i in 0..3 {
            for j in 0..3 {
                gram[i][j] = dot(columns[i], columns[j]);
            }
            rhs[i] = dot(columns[i], v);
        }
        let det3 = |m: [[f64; 3]; 3]| {
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
                - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        };
        let d = det3(gram);
        let coefficients: Vec<f64> = (0..3)
            .map(|k| {
                let mut m = gram;
                for i in 0..3 {
                    m[i][k] = rhs[i];
                }
                det3(m) / d
            })
            .collect();
        (0..v.len())
            .map(|i| {
                let fit: f64 = (0..3).map(|k| coefficients[k] * columns[k][i]).sum();
                (v[i] - fit).powi(2)
            })
            .sum()
    }

    #[test]
    fn the_closed_form_fit_matches_a_direct_regression() {
        let mut rng = Rng::new(7);
        let values: Vec<f64> = (0..80).map(|_| rng.normal()).collect();
        let fitter = RampFitter::new(&values);
        for (low, high, start, length) in [(0, 80, 30, 1), (5, 70, 20, 12), (10, 40, 11, 28)] {
            let fast = fitter.rss(low, high, start, length).unwrap();
            let slow = brute_rss(&values, low, high, start, length);
            assert!(
                (fast - slow).abs() < 1e-7 * slow.max(1.0),
                "{fast} vs {slow}"
            );
        }
        assert_eq!(fitter.rss(0, 80, 0, 5), None);
        assert_eq!(fitter.rss(0, 80, 70, 10), None);
    }

    #[test]
    fn a_ramp_is_found_from_its_start_and_a_step_is_left_a_step() {
        let mut rng = Rng::new(8);
        let ramp: Vec<f64> = (0..120)
            .map(|t| 8.0 * ((t as f64 - 40.0) / 30.0).clamp(0.0, 1.0) + rng.normal())
            .collect();
        let fitter = RampFitter::new(&ramp);
        let drift = drift_around(&fitter, 0, 120, 55, 50, 10.0).expect("a drift");
        assert!(drift.start.abs_diff(40) <= 3, "{drift:?}");
        assert!(drift.length.abs_diff(30) <= 6, "{drift:?}");

        let step: Vec<f64> = (0..120)
            .map(|t| if t >= 60 { 8.0 } else { 0.0 } + rng.normal())
            .collect();
        let fitter = RampFitter::new(&step);
        assert_eq!(drift_around(&fitter, 0, 120, 60, 50, 10.0), None);
        let (best_step, _) = fitter.best_around(0, 120, 59, 50);
        assert_eq!(best_step.unwrap().start, 60);

        // A step on a trend is a step: the line takes the trend.
        let trending: Vec<f64> = step
            .iter()
            .enumerate()
            .map(|(t, v)| v + 0.1 * t as f64)
            .collect();
        let fitter = RampFitter::new(&trending);
        assert_eq!(drift_around(&fitter, 0, 120, 60, 50, 10.0), None);
    }
}
