//! How large a per-commit change must be: the noise estimates behind the threshold, taken at
//! their upper confidence bound, and the scale on which sizes are compared.

use super::noise::NoiseModel;
use super::robust::PercentBase;
use super::within_segments::YOUNG_CHANGES;

/// What the evidence rests on, in words, when that is not a long history.
pub(crate) fn explain(noise: &NoiseModel, history: bool, samples: bool) -> String {
    let changes = noise.changes;
    match (history, samples) {
        (false, _) => "no history yet: nobody has seen how much two runs of the same code \
                       differ, so no change is called"
            .to_owned(),
        (true, true) => format!(
            "short history ({changes} commit-to-commit change{}): the threshold is the larger \
             of the history's and the samples' noise, each at its upper confidence bound",
            if changes == 1 { "" } else { "s" }
        ),
        (true, false) if changes < YOUNG_CHANGES => format!(
            "short history ({changes} commit-to-commit change{}): the threshold uses the \
             noise at its upper confidence bound",
            if changes == 1 { "" } else { "s" }
        ),
        (true, false) => String::new(),
    }
}

/// How sizes of a change are compared with thresholds. Between two positive values, on the
/// logarithmic scale, so that a 2.3× slowdown is as large as the matching −57 % fall in
/// throughput; otherwise in the metric's unit.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scale {
    Ratio { baseline: f64 },
    Absolute { reference: PercentBase },
}

impl Scale {
    pub(crate) fn new(baseline: f64, value: f64) -> Self {
        if baseline > 0.0 && value > 0.0 {
            Scale::Ratio { baseline }
        } else {
            Scale::Absolute {
                reference: PercentBase::new(baseline, value),
            }
        }
    }

    /// The size of `delta` on this scale.
    pub(crate) fn size(self, delta: f64) -> f64 {
        match self {
            Scale::Ratio { baseline } => ((baseline + delta) / baseline).ln().abs(),
            Scale::Absolute { reference } => reference.percent(delta).abs(),
        }
    }

    /// `pct` percent of the baseline on this scale.
    pub(crate) fn floor(self, pct: f64) -> f64 {
        match self {
            Scale::Ratio { .. } => (1.0 + pct / 100.0).ln(),
            Scale::Absolute { .. } => pct,
        }
    }

    /// A margin of `sd_multiple` (in the metric's unit) on this scale.
    pub(crate) fn margin(self, sd_multiple: f64) -> f64 {
        match self {
            Scale::Ratio { baseline } => (sd_multiple / baseline).min(f64::MAX),
            Scale::Absolute { reference } => reference.percent(sd_multiple).abs(),
        }
    }

    /// `threshold` as a percentage, in the direction of `delta`.
    pub(crate) fn threshold_pct(self, threshold: f64, delta: f64) -> f64 {
        let pct = match self {
            Scale::Ratio { .. } if delta < 0.0 => 100.0 * -(-threshold).exp_m1(),
            Scale::Ratio { .. } => 100.0 * threshold.exp_m1(),
            Scale::Absolute { .. } => threshold,
        };
        pct.min(f64::MAX)
    }
}

/// Degrees of freedom of the spread measured from `changes` differences: one each for the
/// root mean square of a short history; for the robust estimate of a longer one, 37 % as
/// many (a median-based spread is about as precise as a standard deviation from 37 % as many
/// normal values).
pub(crate) fn history_df(changes: usize) -> f64 {
    if changes < YOUNG_CHANGES {
        (changes as f64).max(1.0)
    } else {
        0.37 * changes as f64
    }
}

/// `k` standard deviations, with the standard deviation taken at its one-sided 90 % upper
/// confidence bound for `df` degrees of freedom: σ̂·√(df / χ²₀.₁(df)). A long history keeps
/// k nearly as it is (4.7 at 100 commits); ten commits give about 5.9, four about 9, two
/// (one change) about 32. The
/// threshold widens with little history but stays finite.
pub(crate) fn upper_bound_multiplier(k: f64, df: f64) -> f64 {
    if k <= 0.0 || df > 1e6 {
        return k;
    }
    let df = df.max(1.0);
    k * (df / chi_square_decile(df)).sqrt()
}

/// χ² quantiles at 0.1 for 1 to 20 degrees of freedom, where short histories live.
const CHI_SQUARE_DECILES: [f64; 20] = [
    0.015_79, 0.210_7, 0.584_4, 1.063_6, 1.610_3, 2.204_1, 2.833_1, 3.489_5, 4.168_2, 4.865_2,
    5.577_8, 6.303_8, 7.041_5, 7.789_5, 8.546_8, 9.312_2, 10.085_2, 10.864_9, 11.650_9, 12.442_6,
];

/// The 0.1 quantile of χ² with `df` (≥ 1) degrees of freedom: from the table for whole
/// numbers up to 20, otherwise Wilson-Hilferty, χ²_p(ν) ≈ ν·(1 − 2/(9ν) + z_p·√(2/(9ν)))³
/// with z = −1.2816 (within 1 % from ν = 3 on).
fn chi_square_decile(df: f64) -> f64 {
    if df.fract() == 0.0 && df <= 20.0 {
        return CHI_SQUARE_DECILES[df as usize - 1];
    }
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a - 1.281_551_565_545 * a.sqrt()).max(0.05).powi(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_and_the_approximation_agree_where_they_meet() {
        assert!((chi_square_decile(20.0) / chi_square_decile(20.000_001) - 1.0).abs() < 0.01);
        assert!((chi_square_decile(3.0) - 0.5844).abs() < 1e-9);
        // One change: σ could be 8 times what it looked like.
        assert!((upper_bound_multiplier(1.0, 1.0) - 7.958).abs() < 0.01);
        assert!((upper_bound_multiplier(4.0, 37.0) - 4.73).abs() < 0.02);
    }
}
