//! How sensitive verdicts are: the knobs, their defaults, and the per-repository and
//! per-benchmark overrides layered on top of them.
//!
//! The defaults were chosen with the evaluation harness (`cargo bench -p kymo-core --bench
//! verdicts`, see docs/VERDICTS.md) to keep false alarms under one per thousand clean commits
//! while finding steps of three noise standard deviations.

use serde::{Deserialize, Serialize};

/// The knobs behind every verdict. Build one with `Sensitivity::default()` and
/// [`Sensitivity::overridden_by`]; [`Sensitivity::validate`] rejects nonsense values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sensitivity {
    /// Smallest change worth reporting, in percent, however quiet the series (default 0.5).
    /// Very stable metrics such as instruction counts may want it lower.
    pub min_effect_pct: f64,
    /// A per-commit change must exceed this many times the series' commit-to-commit noise
    /// (default 4), because samples from one run hide the noise between runs.
    pub noise_multiplier: f64,
    /// Significance level of the per-commit test (default 0.01). Intervals are reported at
    /// confidence 1 − alpha, so a significant change is one whose interval excludes zero.
    pub alpha: f64,
    /// Significance level a change point must reach (default 1e-4). It is far smaller than
    /// `alpha` because every position of a history is a candidate. The harness found 1e-4 and
    /// 1e-5 equally quick to report a step (0.03 against 0.00 false alarms per 1,000 clean
    /// commits), but with 1e-5 a level that lasts ten commits between two changes can never
    /// be significant (the smallest two-sided Mann-Whitney p-value of 10 against 10 values is
    /// 1.1e-5), and real histories have such levels.
    pub change_point_alpha: f64,
    /// Fewest commits that make a segment (default 5). A shift that reverts sooner is an
    /// outlier, not a change; a new change needs this many commits before it is reported.
    pub min_segment_len: usize,
    /// Most commits on each side of a change point used as its evidence (default 50), so a
    /// change is judged against the recent level, not the distant past.
    pub window: usize,
}

impl Default for Sensitivity {
    fn default() -> Self {
        Self {
            min_effect_pct: 0.5,
            noise_multiplier: 4.0,
            alpha: 0.01,
            change_point_alpha: 1e-4,
            min_segment_len: 5,
            window: 50,
        }
    }
}

/// Optional replacements for some [`Sensitivity`] fields, as read from configuration (for
/// example a repository's settings, then a benchmark's). Unknown keys are rejected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SensitivityOverrides {
    pub min_effect_pct: Option<f64>,
    pub noise_multiplier: Option<f64>,
    pub alpha: Option<f64>,
    pub change_point_alpha: Option<f64>,
    pub min_segment_len: Option<usize>,
    pub window: Option<usize>,
}

/// Why a sensitivity setting is unusable; the message names the key and its valid range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SensitivityError {
    #[error("{key} must be a number between {min} and {max}, got {value}")]
    OutOfRange {
        key: &'static str,
        value: f64,
        min: f64,
        max: f64,
    },
}

impl Sensitivity {
    /// These settings with every field that `overrides` sets replaced, validated. Apply the
    /// repository's overrides first and the benchmark's second, so the narrower one wins.
    pub fn overridden_by(self, overrides: &SensitivityOverrides) -> Result<Self, SensitivityError> {
        let merged = Self {
            min_effect_pct: overrides.min_effect_pct.unwrap_or(self.min_effect_pct),
            noise_multiplier: overrides.noise_multiplier.unwrap_or(self.noise_multiplier),
            alpha: overrides.alpha.unwrap_or(self.alpha),
            change_point_alpha: overrides
                .change_point_alpha
                .unwrap_or(self.change_point_alpha),
            min_segment_len: overrides.min_segment_len.unwrap_or(self.min_segment_len),
            window: overrides.window.unwrap_or(self.window),
        };
        merged.validate()?;
        Ok(merged)
    }

    /// Checks every field against its usable range.
    pub fn validate(&self) -> Result<(), SensitivityError> {
        let check = |key: &'static str, value: f64, min: f64, max: f64| {
            // Written so that NaN fails too.
            if value >= min && value <= max {
                Ok(())
            } else {
                Err(SensitivityError::OutOfRange {
                    key,
                    value,
                    min,
                    max,
                })
            }
        };
        check("min_effect_pct", self.min_effect_pct, 0.0, 1000.0)?;
        check("noise_multiplier", self.noise_multiplier, 0.0, 100.0)?;
        check("alpha", self.alpha, 1e-12, 0.5)?;
        check("change_point_alpha", self.change_point_alpha, 1e-15, 0.5)?;
        check("min_segment_len", self.min_segment_len as f64, 2.0, 1000.0)?;
        check(
            "window",
            self.window as f64,
            self.min_segment_len as f64,
            100_000.0,
        )?;
        Ok(())
    }

    /// The fields clamped into their valid ranges, so that the analyses never misbehave on
    /// settings that bypassed [`Sensitivity::validate`].
    pub(crate) fn sanitized(&self) -> Self {
        let finite_or = |v: f64, default: f64| if v.is_nan() { default } else { v };
        let defaults = Self::default();
        let min_segment_len = self.min_segment_len.clamp(2, 1000);
        Self {
            min_effect_pct: finite_or(self.min_effect_pct, defaults.min_effect_pct)
                .clamp(0.0, 1000.0),
            noise_multiplier: finite_or(self.noise_multiplier, defaults.noise_multiplier)
                .clamp(0.0, 100.0),
            alpha: finite_or(self.alpha, defaults.alpha).clamp(1e-12, 0.5),
            change_point_alpha: finite_or(self.change_point_alpha, defaults.change_point_alpha)
                .clamp(1e-15, 0.5),
            min_segment_len,
            window: self.window.clamp(min_segment_len, 100_000),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Sensitivity::default().validate().unwrap();
    }

    #[test]
    fn benchmark_overrides_win_over_repository_overrides() {
        let repository = SensitivityOverrides {
            min_effect_pct: Some(2.0),
            window: Some(30),
            ..Default::default()
        };
        let benchmark = SensitivityOverrides {
            min_effect_pct: Some(0.1),
            ..Default::default()
        };
        let s = Sensitivity::default()
            .overridden_by(&repository)
            .and_then(|s| s.overridden_by(&benchmark))
            .unwrap();
        assert_eq!(s.min_effect_pct, 0.1);
        assert_eq!(s.window, 30);
        assert_eq!(s.alpha, Sensitivity::default().alpha);
    }

    #[test]
    fn nonsense_values_are_rejected_with_the_key_named() {
        let bad = SensitivityOverrides {
            alpha: Some(f64::NAN),
            ..Default::default()
        };
        let err = Sensitivity::default().overridden_by(&bad).unwrap_err();
        assert!(err.to_string().starts_with("alpha must be"), "{err}");
        let bad = SensitivityOverrides {
            min_segment_len: Some(1),
            ..Default::default()
        };
        assert!(Sensitivity::default().overridden_by(&bad).is_err());
    }

    #[test]
    fn overrides_parse_from_json_and_reject_unknown_keys() {
        let parsed: SensitivityOverrides =
            serde_json::from_str(r#"{"min_effect_pct": 2.5, "min_segment_len": 3}"#).unwrap();
        assert_eq!(parsed.min_effect_pct, Some(2.5));
        assert_eq!(parsed.min_segment_len, Some(3));
        assert!(serde_json::from_str::<SensitivityOverrides>(r#"{"alfa": 0.1}"#).is_err());
    }

    #[test]
    fn sanitizing_repairs_settings_that_skipped_validation() {
        let s = Sensitivity {
            alpha: f64::NAN,
            min_segment_len: 0,
            window: 1,
            ..Default::default()
        }
        .sanitized();
        assert_eq!(s.alpha, 0.01);
        assert_eq!(s.min_segment_len, 2);
        assert_eq!(s.window, 2);
    }
}
