//! The repository page's pointer at benchmarks too noisy to see a 10 % change at their next
//! commit, each with the reason (two levels its runs jump between, a heavy tail, a short history, few samples,
//! or plain run-to-run noise) and what would help. Self-contained: the stored noise of every
//! series picks the few, and only those few read their recent values.

use kymo_core::db::BenchmarkSeriesRow;
use kymo_core::stats::power::{NoiseReason, noise_reason, per_commit_power_pct};
use kymo_core::stats::{NOISE_HISTORY, Sensitivity};

use super::PageError;
use super::format::benchmark_href;
use crate::state::AppState;

/// The change a benchmark should be able to see at its next commit, in percent.
pub const SEE_PCT: f64 = 10.0;

/// Most series the pointer names: the noisiest.
const LISTED: usize = 10;

/// A series too noisy to see [`SEE_PCT`].
pub(super) struct TooNoisyView {
    pub benchmark: String,
    pub href: String,
    pub metric: String,
    pub machine: String,
    /// The smallest change its next commit's verdict would call, e.g. `38 %`.
    pub power: String,
    pub reason: String,
    /// What would make it see more.
    pub remedy: &'static str,
}

/// The repository's series whose next per-commit verdict could not see [`SEE_PCT`], noisiest
/// first, at most [`LISTED`].
pub(super) async fn listed(
    state: &AppState,
    repo: &str,
    series: &[BenchmarkSeriesRow],
) -> Result<Vec<TooNoisyView>, PageError> {
    let ids: Vec<i64> = series.iter().map(|s| s.id).collect();
    let sensitivity = Sensitivity::default();
    let mut noisy: Vec<(f64, i64, _)> = (state.db.noise_windows(&ids).await?.into_iter())
        .filter(|(_, window)| window.before_position.is_none())
        .filter_map(|(id, window)| {
            let power = per_commit_power_pct(&window.model, &sensitivity)?;
            (power > SEE_PCT).then_some((power, id, window.model))
        })
        .collect();
    noisy.sort_by(|a, b| b.0.total_cmp(&a.0));
    noisy.truncate(LISTED);
    let mut out = Vec::with_capacity(noisy.len());
    for (power, id, model) in noisy {
        let Some(row) = series.iter().find(|s| s.id == id) else {
            continue;
        };
        let recent = state
            .db
            .series_values_before(id, None, NOISE_HISTORY as i64)
            .await?;
        let values: Vec<f64> = recent.into_iter().map(|(_, v)| v).collect();
        let reason = noise_reason(&model, &values);
        out.push(TooNoisyView {
            benchmark: row.benchmark.clone(),
            href: benchmark_href(repo, &row.benchmark),
            metric: row.metric.clone(),
            machine: row.machine.clone(),
            power: format!("{power:.0} %"),
            remedy: remedy(&reason),
            reason: reason.describe(),
        });
    }
    Ok(out)
}

/// What helps each kind of noise.
fn remedy(reason: &NoiseReason) -> &'static str {
    match reason {
        NoiseReason::Bimodal { .. } => {
            "pin the benchmark's threads and memory, or measure instruction counts"
        }
        NoiseReason::HeavyTail { .. } => {
            "a quieter machine, or `kymo try`, whose interleaved rounds share the load"
        }
        NoiseReason::ShortHistory { .. } => "more measured commits (`kymo run REPO --last 50`)",
        NoiseReason::FewSamples { .. } => "more samples a run (`repeat` in kymo.toml)",
        NoiseReason::RunToRun { .. } => {
            "instruction counts (`instructions = true`), or interleaved rounds (`kymo try`)"
        }
    }
}
