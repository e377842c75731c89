//! The detectors under evaluation: kymo's two, and the competitors' methods written from their
//! published formulas (docs/VERDICTS.md and /work/shared/research give the sources).
//!
//! The competitors judge each new commit against the past, as they do in production: every
//! alert is one commit. Alerts on consecutive commits in the same direction are merged into
//! one detection at the first, which is kinder to them than their real alert lists (Bencher
//! keeps alerting after a step until its window has absorbed the new level).

use kymo_core::model::Direction;
use kymo_core::stats::distribution::students_t_quantile;
use kymo_core::stats::{
    CommitObservation, Sensitivity, compare, detect_change_points, noise_model,
};

/// One reported change: where, and whether the value went up.
#[derive(Debug, Clone, Copy)]
pub struct Detection {
    pub position: usize,
    pub rise: bool,
}

/// A detector of changes in a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// kymo: seeded segmentation confirmed by Mann-Whitney, over the whole history.
    KymoChangePoints,
    /// kymo: the per-commit test against the parent, with a 100-commit noise model.
    KymoPerCommit,
    /// Bencher's `t_test` threshold: 64-commit window, 0.99 boundaries, prediction interval.
    BencherTTest,
    /// rustc-perf: change vs parent against Q3 + 3·IQR of the last 30 commit-to-commit changes.
    RustcPerfIqr,
    /// conbench's lookback z-score: |z| > 5 against the last 100 commits.
    ConbenchZScore,
    /// A fixed 5 % threshold against the parent commit.
    FixedFivePercent,
}

impl Method {
    pub const ALL: [Method; 6] = [
        Method::KymoChangePoints,
        Method::KymoPerCommit,
        Method::BencherTTest,
        Method::RustcPerfIqr,
        Method::ConbenchZScore,
        Method::FixedFivePercent,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::KymoChangePoints => "kymo change points",
            Method::KymoPerCommit => "kymo per-commit test",
            Method::BencherTTest => "Bencher t-test (64, 0.99)",
            Method::RustcPerfIqr => "rustc-perf Q3+3·IQR",
            Method::ConbenchZScore => "conbench z > 5 (100)",
            Method::FixedFivePercent => "fixed 5 %",
        }
    }

    /// Whether the method decides about a commit from earlier commits only, so that the
    /// delay of a detection is simply its distance from the change.
    pub fn is_causal(self) -> bool {
        self != Method::KymoChangePoints
    }

    pub fn detect(self, series: &[CommitObservation]) -> Vec<Detection> {
        self.detect_in(series, Direction::Lower)
    }

    /// [`Self::detect`] on a series whose better values go `direction` (it decides which end
    /// of a run's samples kymo's per-commit test compares).
    pub fn detect_in(self, series: &[CommitObservation], direction: Direction) -> Vec<Detection> {
        let values: Vec<f64> = series.iter().map(|o| o.value).collect();
        let alerts: Vec<Option<bool>> = match self {
            Method::KymoChangePoints => {
                return kymo_detections(series, direction, &Sensitivity::default());
            }
            Method::KymoPerCommit => kymo_per_commit(series, direction),
            Method::BencherTTest => (0..values.len())
                .map(|t| bencher_t_test(&values, t))
                .collect(),
            Method::RustcPerfIqr => (0..values.len()).map(|t| rustc_perf(&values, t)).collect(),
            Method::ConbenchZScore => (0..values.len()).map(|t| conbench(&values, t)).collect(),
            Method::FixedFivePercent => (0..values.len())
                .map(|t| {
                    let change = relative_change(&values, t)?;
                    (change.abs() >= 0.05).then_some(change > 0.0)
                })
                .collect(),
        };
        episodes(&alerts)
    }
}

/// kymo's change points as detections.
pub fn kymo_detections(
    series: &[CommitObservation],
    direction: Direction,
    sensitivity: &Sensitivity,
) -> Vec<Detection> {
    detect_change_points(series, direction, sensitivity)
        .into_iter()
        .map(|c| Detection {
            position: c.position,
            rise: c.after > c.before,
        })
        .collect()
}

/// Merges alerts on consecutive commits in the same direction into one detection.
fn episodes(alerts: &[Option<bool>]) -> Vec<Detection> {
    let mut detections = Vec::new();
    let mut previous = None;
    for (position, &alert) in alerts.iter().enumerate() {
        if let Some(rise) = alert
            && previous != Some(rise)
        {
            detections.push(Detection { position, rise });
        }
        previous = alert;
    }
    detections
}

fn relative_change(values: &[f64], t: usize) -> Option<f64> {
    let parent = *values.get(t.checked_sub(1)?)?;
    Some((values[t] - parent) / parent)
}

fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, variance.sqrt())
}

/// Bencher `t_test`: history = the previous ≤ 64 values (min sample size 10); limits
/// μ ± t(0.99, n−1)·s·√(1 + 1/n); skipped when s = 0, as Bencher does.
fn bencher_t_test(values: &[f64], t: usize) -> Option<bool> {
    let history = &values[t.saturating_sub(64)..t];
    if history.len() < 10 {
        return None;
    }
    let (mean, sd) = mean_sd(history);
    if sd == 0.0 {
        return None;
    }
    let n = history.len() as f64;
    let half_width = students_t_quantile(0.99, n - 1.0) * sd * (1.0 + 1.0 / n).sqrt();
    let x = values[t];
    if x > mean + half_width {
        Some(true)
    } else if x < mean - half_width {
        Some(false)
    } else {
        None
    }
}

/// rustc-perf: relative change vs the parent; significant when |change| ≥ Q3 + 3·IQR of the
/// sorted |relative changes| between the 30 commits before the parent, or 0.2 % with less
/// history. Quartiles by linear interpolation.
fn rustc_perf(values: &[f64], t: usize) -> Option<bool> {
    let change = relative_change(values, t)?;
    let parent = t - 1;
    let threshold = if parent >= 30 {
        let window = &values[parent - 30..parent];
        let mut deltas: Vec<f64> = window
            .windows(2)
            .map(|w| ((w[0] - w[1]) / w[0]).abs())
            .collect();
        deltas.sort_by(f64::total_cmp);
        let quartile = |q: f64| {
            let rank = q * (deltas.len() - 1) as f64;
            let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
            deltas[low] + (deltas[high] - deltas[low]) * (rank - low as f64)
        };
        let (q1, q3) = (quartile(0.25), quartile(0.75));
        q3 + 3.0 * (q3 - q1)
    } else {
        0.002
    };
    (change.abs() >= threshold).then_some(change > 0.0)
}

/// conbench lookback z-score: z = (x − mean)/sd over the previous ≤ 100 commits (at least
/// 10), alert when |z| > 5.
fn conbench(values: &[f64], t: usize) -> Option<bool> {
    let history = &values[t.saturating_sub(100)..t];
    if history.len() < 10 {
        return None;
    }
    let (mean, sd) = mean_sd(history);
    if sd == 0.0 {
        return None;
    }
    let z = (values[t] - mean) / sd;
    (z.abs() > 5.0).then_some(z > 0.0)
}

/// kymo's per-commit test of every commit against its parent, with the noise model of the
/// previous ≤ 100 commits (values only: the test needs just their commit-to-commit spread).
fn kymo_per_commit(series: &[CommitObservation], direction: Direction) -> Vec<Option<bool>> {
    let history: Vec<CommitObservation> = series
        .iter()
        .map(|o| CommitObservation::new(o.position, o.value))
        .collect();
    let sensitivity = Sensitivity::default();
    let samples_of = |o: &CommitObservation| {
        if o.samples.is_empty() {
            vec![o.value]
        } else {
            o.samples.clone()
        }
    };
    (0..series.len())
        .map(|t| {
            let parent = t.checked_sub(1)?;
            let noise = noise_model(&history[t.saturating_sub(100)..t]);
            let verdict = compare(
                &samples_of(&series[parent]),
                &samples_of(&series[t]),
                direction,
                &noise,
                &sensitivity,
            );
            verdict.kind.is_change().then_some(verdict.change_pct > 0.0)
        })
        .collect()
}
