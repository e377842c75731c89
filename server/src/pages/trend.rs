//! One series as a trend graph with its overlays: what the benchmark page shows per series
//! and what the embeddable `trend.svg` image draws.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use kymo_core::db::{BenchmarkSeriesRow, EnvironmentPoint, RegressionRow};
use kymo_core::results::quartiles;

use super::overlays::{Overlays, overlays};
use crate::chart::{
    DEFAULT_WIDTH, TrendChart, TrendPoint, YScale, drawn_whole, render_standalone_svg,
    render_trend_svg,
};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Which stretch of history a chart shows: the newest `last` measured commits up to position
/// `until` (the newest commit when `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub last: i64,
    pub until: Option<i64>,
}

/// A series' newest points and what is drawn over them.
pub struct SeriesTrend {
    pub title: String,
    pub points: Vec<TrendPoint>,
    pub overlays: Overlays,
    /// How the chart maps values to heights; linear unless the reader asks for log.
    pub y_scale: YScale,
}

/// Machines' environments, loaded once per page however many series share a machine.
pub type EnvironmentCache = HashMap<String, Vec<EnvironmentPoint>>;

/// Loads the points of `series` in `window` and builds its overlays from `regressions` (the
/// benchmark's; those of other series are ignored). Samples are read only when the chart draws
/// each point with its spread: a thinned chart of 10,000 commits does not need them.
pub async fn load_series_trend(
    state: &AppState,
    repo: (&str, i64),
    series: &BenchmarkSeriesRow,
    window: Window,
    regressions: &[RegressionRow],
    environments: &mut EnvironmentCache,
) -> AppResult<SeriesTrend> {
    let (repo_name, repo_id) = repo;
    let rows = state
        .db
        .series_points(series.id, window.last, window.until)
        .await?;
    let with_spread = drawn_whole(rows.len(), DEFAULT_WIDTH);
    let points = rows
        .iter()
        .map(|p| {
            let middle_half = if with_spread {
                quartiles(&p.samples)
            } else {
                None
            };
            TrendPoint {
                position: p.position as usize,
                sha: p.sha.clone(),
                value: p.value,
                low: middle_half.map(|(q1, _)| q1),
                high: middle_half.map(|(_, q3)| q3),
                href: format!("/repos/{repo_name}/commits/{}", p.sha),
                committed_at: Some(p.committed_at),
            }
        })
        .collect();
    let machine_environments = match environments.entry(series.machine.clone()) {
        Entry::Occupied(known) => known.into_mut(),
        Entry::Vacant(slot) => slot.insert(state.db.environments(repo_id, &series.machine).await?),
    };
    let own: Vec<&RegressionRow> = regressions
        .iter()
        .filter(|r| r.series_id == series.id)
        .collect();
    Ok(SeriesTrend {
        title: format!("{} · {}", series.metric, series.machine),
        points,
        overlays: overlays(repo_name, &rows, &own, machine_environments),
        y_scale: YScale::Linear,
    })
}

impl SeriesTrend {
    /// The chart of this trend in `unit`.
    pub fn chart<'a>(&'a self, unit: &'a str) -> TrendChart<'a> {
        TrendChart::new(&self.title, unit, &self.points)
            .with_changes(&self.overlays.changes)
            .with_segments(&self.overlays.segments)
            .with_band(&self.overlays.band)
            .with_annotations(&self.overlays.annotations)
            .with_y_scale(self.y_scale)
    }

    /// Inline SVG for a page, scaling with its container.
    pub fn inline_svg(&self, unit: &str) -> AppResult<String> {
        render_trend_svg(&self.chart(unit)).map_err(chart_error)
    }

    /// A standalone SVG document of `width` × `height` pixels, for `<img>` embeds.
    pub fn standalone_svg(&self, unit: &str, width: u32, height: u32) -> AppResult<String> {
        render_standalone_svg(&self.chart(unit).with_size(width, height)).map_err(chart_error)
    }
}

fn chart_error(err: crate::chart::ChartError) -> AppError {
    AppError::Internal(anyhow::anyhow!("trend chart: {err}"))
}
