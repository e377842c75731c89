//! One series as a trend graph with its overlays: what the benchmark page shows per series
//! and what the embeddable `trend.svg` image draws.

use kymo_core::db::{
    BenchmarkSeriesRow, EnvironmentPoint, RegressionRow, SummaryWindow, WindowPoint,
};
use kymo_core::results::quartiles;
use kymo_core::series_summary::level_for;

use super::overlays::{Overlays, overlays};
use crate::chart::{
    DEFAULT_WIDTH, TrendChart, TrendPoint, YScale, drawn_whole, pixel_buckets,
    render_standalone_svg, render_trend_svg,
};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Which stretch of history a chart shows: the newest `last` measured commits up to position
/// `until` (the newest commit when `None`); a window too wide to draw point by point (see
/// [`level_for`]) is the newest `last` commits of history up to the series' newest point
/// (all of them when the history is shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub last: i64,
    pub until: Option<i64>,
}

/// A series' newest points and what is drawn over them.
pub struct SeriesTrend {
    pub title: String,
    pub points: Vec<TrendPoint>,
    /// Where the points link ([`TrendChart::commit_links`]).
    pub commit_links: String,
    /// Commits measured in the window (more than the points drawn, from summaries).
    pub measured: usize,
    pub overlays: Overlays,
    /// How the chart maps values to heights; linear unless the reader asks for log.
    pub y_scale: YScale,
    /// Whether the points are the extremes of the window's buckets, read from summaries.
    pub summarized: bool,
}

/// Loads `series` in `window` and builds its overlays from `regressions` (the benchmark's;
/// those of other series are ignored): point by point, or from the series' summaries when the
/// window holds more commits than the chart has pixel buckets at the finest summary level.
/// Either way what is read follows the pixels drawn, not the history.
pub async fn load_series_trend(
    state: &AppState,
    repo_name: &str,
    series: &BenchmarkSeriesRow,
    window: Window,
    regressions: &[RegressionRow],
) -> AppResult<SeriesTrend> {
    let trends = load_series_trends(state, std::slice::from_ref(series), window);
    let mut trends = trends.await?.into_iter();
    let drawn = trends
        .next()
        .ok_or_else(|| AppError::Internal(anyhow::anyhow!("no trend")))?;
    Ok(drawn.into_trend(repo_name, series, regressions))
}

/// [`load_series_trend`] for several series of one benchmark over the same window: a window
/// drawn point by point is read for all of them in one walk down the branch.
pub async fn load_series_trends(
    state: &AppState,
    series: &[BenchmarkSeriesRow],
    window: Window,
) -> AppResult<Vec<Drawn>> {
    let buckets = pixel_buckets(DEFAULT_WIDTH) as i64;
    // Only a window wide enough for summaries asks how much history it holds.
    if level_for(window.last, buckets).is_some() {
        // The charts' reads at once: each waits on its own reader connection more than it works.
        let each = series.iter().map(|one| async move {
            let summary = (state.db)
                .series_summary_window(one.id, window.last, window.until, buckets)
                .await?;
            match summary {
                Some(summary) => summarized_points(state, one.id, summary).await,
                None => Ok(window_points(state, &[one.id], window).await?.remove(0)),
            }
        });
        return futures_util::future::try_join_all(each).await;
    }
    let ids: Vec<i64> = series.iter().map(|s| s.id).collect();
    window_points(state, &ids, window).await
}

/// What a chart draws of a window: its points, the commits measured, the environments of
/// their runs, the noise the band shows (a fraction; `None`: from the points), and whether
/// the points come from summaries.
pub struct Drawn {
    points: Vec<TrendPoint>,
    measured: usize,
    environments: Vec<EnvironmentPoint>,
    noise: Option<f64>,
    summarized: bool,
}

impl Drawn {
    /// The trend of `series` with its overlays from `regressions` (those of other series are
    /// ignored).
    pub fn into_trend(
        self,
        repo_name: &str,
        series: &BenchmarkSeriesRow,
        regressions: &[RegressionRow],
    ) -> SeriesTrend {
        let own: Vec<&RegressionRow> = regressions
            .iter()
            .filter(|r| r.series_id == series.id)
            .collect();
        SeriesTrend {
            title: format!("{} · {}", series.metric, series.machine),
            overlays: overlays(
                repo_name,
                &self.points,
                &own,
                &self.environments,
                self.noise,
            ),
            points: self.points,
            commit_links: format!("/repos/{repo_name}/commits/"),
            measured: self.measured,
            y_scale: YScale::Linear,
            summarized: self.summarized,
        }
    }
}

/// The windows of `series` point by point, read in one walk. Samples are read only when a
/// chart draws each point with its spread: a thinned chart does not need them. One point
/// more than the window is read, for the environment the first point's run changed from.
async fn window_points(state: &AppState, series: &[i64], window: Window) -> AppResult<Vec<Drawn>> {
    let whole_window = drawn_whole(window.last as usize, DEFAULT_WIDTH);
    let (limit, until) = (window.last + 1, window.until);
    let mut windows = (state.db)
        .series_windows(series, limit, until, whole_window)
        .await?;
    let mut drawn = Vec::with_capacity(series.len());
    for (id, rows) in series.iter().zip(windows.iter_mut()) {
        let shown = rows.len().min(window.last as usize);
        let with_spread = drawn_whole(shown, DEFAULT_WIDTH);
        if with_spread && !whole_window {
            // Fewer points than the window could hold: few enough to draw with their spread.
            *rows = state.db.series_window(*id, limit, until, true).await?;
        }
        drawn.push(window_drawn(std::mem::take(rows), window, with_spread));
    }
    Ok(drawn)
}

/// A window's points as drawn, each with its spread when `with_spread`.
fn window_drawn(rows: Vec<WindowPoint>, window: Window, with_spread: bool) -> Drawn {
    let shown = rows.len().min(window.last as usize);
    let before_window = rows.len() - shown;
    let mut environments = Vec::with_capacity(rows.len());
    let mut points = Vec::with_capacity(shown);
    for (
        i,
        WindowPoint {
            point: p,
            environment,
        },
    ) in rows.into_iter().enumerate()
    {
        environments.push(environment);
        if i < before_window {
            continue;
        }
        let middle_half = with_spread.then(|| quartiles(&p.samples)).flatten();
        points.push(TrendPoint {
            position: p.position as usize,
            value: p.value,
            low: middle_half.map(|(q1, _)| q1),
            high: middle_half.map(|(_, q3)| q3),
            sha: p.sha,
            committed_at: Some(p.committed_at),
        });
    }
    Drawn {
        points,
        measured: shown,
        environments,
        noise: None,
        summarized: false,
    }
}

/// The window from the series' summaries: each bucket drawn through its lowest and highest
/// point (the chart thins them further to its pixel columns), its environments where they
/// changed, and the band from the noise the analysis stored.
async fn summarized_points(
    state: &AppState,
    series_id: i64,
    summary: SummaryWindow,
) -> AppResult<Drawn> {
    let points: Vec<TrendPoint> = (summary.drawn.iter())
        .filter_map(|p| {
            let (sha, time) = summary.commits.get(&p.position)?;
            Some(TrendPoint {
                position: p.position as usize,
                sha: sha.clone(),
                value: p.value,
                low: None,
                high: None,
                committed_at: Some(*time),
            })
        })
        .collect();
    let environment = |position: i64, id: i64| {
        let (kernel, toolchain) = summary.environments.get(&id).cloned().unwrap_or_default();
        EnvironmentPoint {
            position,
            kernel,
            toolchain,
        }
    };
    let environments: Vec<EnvironmentPoint> = (summary.buckets.iter())
        .flat_map(|bucket| {
            let change = bucket.change.map(|c| environment(c.position, c.to));
            [environment(bucket.first.position, bucket.first_environment)]
                .into_iter()
                .chain(change)
                .chain([environment(bucket.last.position, bucket.last_environment)])
        })
        .collect();
    let measured = summary.buckets.iter().map(|b| b.points as usize).sum();
    let noise = (state.db.noise_windows(&[series_id]).await?)
        .into_iter()
        .find(|(_, w)| w.before_position.is_none())
        .map_or(0.0, |(_, w)| w.model.between_commit_pct / 100.0);
    Ok(Drawn {
        points,
        measured,
        environments,
        noise: Some(noise),
        summarized: true,
    })
}

impl SeriesTrend {
    /// The chart of this trend in `unit`.
    pub fn chart<'a>(&'a self, unit: &'a str) -> TrendChart<'a> {
        TrendChart::new(&self.title, unit, &self.points)
            .with_commit_links(&self.commit_links)
            .with_changes(&self.overlays.changes)
            .with_segments(&self.overlays.segments)
            .with_band(&self.overlays.band)
            .with_annotations(&self.overlays.annotations)
            .with_y_scale(self.y_scale)
            .drawn_from_summaries(self.summarized)
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
