//! What a comparison concludes, and the evidence it keeps.

use serde::{Deserialize, Serialize};

use crate::model::Direction;

/// The conclusion of a comparison or a change point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// Significantly worse, by more than the threshold.
    Regression,
    /// Significantly better, by more than the threshold.
    Improvement,
    /// No change worth reporting: below the threshold, or not distinguishable from noise.
    NoChange,
    /// The data cannot decide: nothing to compare, or a change above the threshold that is
    /// not significant (more samples would settle it).
    Inconclusive,
}

impl VerdictKind {
    /// Regression or improvement, according to the sign of `delta` and what is better.
    pub(crate) fn of_change(delta: f64, direction: Direction) -> Self {
        let worse = match direction {
            Direction::Lower => delta > 0.0,
            Direction::Higher => delta < 0.0,
        };
        if worse {
            Self::Regression
        } else {
            Self::Improvement
        }
    }

    /// The stable lowercase name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Regression => "regression",
            Self::Improvement => "improvement",
            Self::NoChange => "no_change",
            Self::Inconclusive => "inconclusive",
        }
    }

    /// Whether this is a regression or an improvement.
    pub fn is_change(self) -> bool {
        matches!(self, Self::Regression | Self::Improvement)
    }
}

/// The verdict of one per-commit comparison, with its evidence. Percentages are relative to
/// the baseline (see the module documentation for baselines of zero) and always finite.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Verdict {
    pub kind: VerdictKind,
    /// Median of the baseline's values.
    pub baseline: f64,
    /// Median of the compared commit's values.
    pub value: f64,
    /// (value − baseline) / |baseline|, in percent.
    pub change_pct: f64,
    /// Confidence interval of the change at 1 − alpha, in percent.
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    /// Two-sided p-value of the test in `method`; `None` when no test was possible.
    pub p_value: Option<f64>,
    /// The noise behind the threshold, in percent of the baseline: the series'
    /// commit-to-commit noise at this baseline, or, while the history is short and the
    /// samples say more, √2 × the samples' within-run spread (0 if unknown).
    pub noise_pct: f64,
    /// Smallest change that counts, in the direction of the change: min_effect_pct, or k ×
    /// the noise at its 90 % upper confidence bound, whichever is larger (k is
    /// `noise_multiplier`; short histories get wider, still finite, margins). Between positive
    /// values it is applied on the logarithmic scale, so that a slowdown and the matching fall
    /// in throughput are judged alike.
    pub threshold_pct: f64,
    /// The power of the verdict: the smallest change (in percent, positive) this measurement
    /// would have found, at its noise, samples and rounds. A `no_change` says "a change above
    /// this would have been seen"; `None` when nothing could have been found (no data, no
    /// history).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detectable_pct: Option<f64>,
    pub base_samples: usize,
    pub head_samples: usize,
    /// How the decision was made: `mann-whitney` (samples on both sides), `history-noise`
    /// (single values, judged against the series' noise), `effect-only` (no way to test), or
    /// `no-data`.
    pub method: &'static str,
    /// What the evidence rests on when that is not a long history (a short history, no
    /// history yet), in words for the pages; empty otherwise.
    pub note: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direction_decides_what_is_a_regression() {
        assert_eq!(
            VerdictKind::of_change(1.0, Direction::Lower),
            VerdictKind::Regression
        );
        assert_eq!(
            VerdictKind::of_change(1.0, Direction::Higher),
            VerdictKind::Improvement
        );
        assert_eq!(
            VerdictKind::of_change(-1.0, Direction::Higher),
            VerdictKind::Regression
        );
        assert_eq!(
            VerdictKind::of_change(-1.0, Direction::Lower),
            VerdictKind::Improvement
        );
    }

    #[test]
    fn kinds_serialize_as_their_names() {
        for kind in [
            VerdictKind::Regression,
            VerdictKind::Improvement,
            VerdictKind::NoChange,
            VerdictKind::Inconclusive,
        ] {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
    }
}
