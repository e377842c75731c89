//! Statistics behind kymo's verdicts: pure functions, no I/O, no randomness.
//!
//! A series is one repository × benchmark × metric × machine fingerprint, in first-parent
//! history order. Three questions are answered about it:
//!
//! - **How noisy is it?** [`noise_model`] measures the spread within runs and, robustly, the
//!   spread between consecutive commits. [`noise_windows`] picks the history a verdict
//!   measures it over, so that it can be stored at analysis time.
//! - **Did this commit change anything?** [`compare()`] tests a commit against a baseline:
//!   Mann-Whitney on samples (or the history's noise for single values), plus a minimum
//!   effect of `noise_multiplier` × the commit-to-commit noise.
//! - **Where did the history change?** [`detect_change_points`] finds shifts of level that
//!   last at least `min_segment_len` commits, so spikes that revert are ignored and slow
//!   drifts are still found. [`detect_tail_change`] answers the same question early, for
//!   the newest commits, provisionally.
//! - **Did this head change anything, measured interleaved with its base?**
//!   [`sequential::judge_rounds`] judges the rounds of a try run, pull request or confirmation
//!   as they come, spending its false-alarm rate over its looks so that stopping early when
//!   decided does not inflate it; [`power`] says what a series' history lets a verdict see.
//! - **Which commit in an unmeasured range did it?** [`bisect::classify_probe`] decides each
//!   step of a bisection, asking for repeats when a probe sits between the levels.
//!
//! Every answer carries its evidence (baseline, change, interval, p-value, noise, counts,
//! method). Percentages are relative to |baseline|; a change away from a baseline of zero is
//! reported as ±100 %. Results are deterministic and finite for any finite input.
//!
//! The methods are compared with those of Bencher, rustc-perf, conbench and a fixed
//! threshold by the harness in `core/benches/verdicts` (results in docs/VERDICTS.md).

pub mod bisect;
mod changepoint;
mod compare;
pub mod confirmation;
pub mod distribution;
pub mod disturbance;
mod early;
mod exact_steps;
mod incremental;
#[cfg(test)]
mod issue_cases;
mod location;
mod mann_whitney;
mod noise;
mod noise_window;
pub mod power;
#[cfg(test)]
mod properties;
mod quantile_interval;
mod robust;
mod segmentation;
mod sensitivity;
pub mod sequential;
#[cfg(test)]
mod synthetic;
mod tail;
mod threshold;
mod verdict;
mod within_segments;

pub use crate::model::Direction;
pub use changepoint::{ChangePoint, detect_change_points};
pub use compare::{CANNOT_TELL_PCT, compare};
pub use early::{detect_close_change, detect_early_change};
pub use incremental::{ANALYSIS_WINDOW, Analysis, Windows};
pub use location::{FAST_END_MIN_SAMPLES, run_location, run_value};
pub use noise::{CommitObservation, MIN_HISTORY_CHANGES, NoiseModel, noise_model};
pub use noise_window::{NOISE_HISTORY, NoiseWindow, noise_of_values, noise_windows};
pub use sensitivity::{Sensitivity, SensitivityError, SensitivityOverrides};
pub use tail::detect_tail_change;
pub use verdict::{Verdict, VerdictKind};
pub use within_segments::YOUNG_CHANGES;
