//! The benchmark page: one trend graph per series of a benchmark, over a window of history the
//! reader moves through (older, newer, zoom in and out) with plain links that htmx turns into
//! swaps of the charts alone.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use kymo_core::clock::utc_date;
use kymo_core::db::RegressionFilter;
use kymo_core::protocol::query_value;
use serde::Deserialize;

use super::embed::{public_base, trend_svg_path};
use super::trend::{Window, load_series_trends};
use super::{PageResult, is_htmx, render};
use crate::chart::YScale;
use crate::error::AppError;
use crate::state::AppState;

/// Points a chart shows unless the reader asks for another window.
const TREND_POINTS: i64 = 1_000;
/// The most points one chart reads; a wider window is a zoom out of what the page can show.
const MAX_POINTS: i64 = 100_000;
/// The zoom choices of a trend graph: how many of the newest commits it shows.
const RANGES: [i64; 4] = [20, 100, 1_000, 10_000];

struct ChartView {
    metric: String,
    metric_query: String,
    unit: String,
    direction: String,
    machine: String,
    points: usize,
    svg: String,
    /// Absolute address of the series' embeddable image.
    embed: String,
}

/// A link that moves the window: its label and query string.
struct Move {
    label: &'static str,
    query: String,
}

#[derive(Template)]
#[template(path = "benchmark.html", blocks = ["charts"])]
struct BenchmarkPage {
    repo: String,
    benchmark: String,
    benchmark_query: String,
    charts: Vec<ChartView>,
    ranges: [i64; 4],
    last: i64,
    /// Whether the window ends before the newest commit.
    pinned: bool,
    /// Commits on the fullest chart.
    shown: usize,
    /// What the charts span: "abc1234 (2026-10-01) to def5678 (2026-11-24)".
    span: String,
    moves: Vec<Move>,
    /// Appended to every link that moves the window, so that the scale stays as chosen.
    scale_query: &'static str,
    /// The same window on the other scale.
    other_scale: Move,
}

/// The benchmark page's window (the newest `last` measured commits up to position `to`) and
/// the charts' scale.
#[derive(Debug, Deserialize)]
pub struct Zoom {
    last: Option<i64>,
    to: Option<i64>,
    scale: Option<YScale>,
}

pub async fn benchmark(
    State(state): State<AppState>,
    Path((repo_name, benchmark)): Path<(String, String)>,
    Query(zoom): Query<Zoom>,
    headers: HeaderMap,
) -> PageResult {
    let window = Window {
        last: zoom.last.unwrap_or(TREND_POINTS).clamp(2, MAX_POINTS),
        until: zoom.to.filter(|to| *to >= 0),
    };
    let y_scale = zoom.scale.unwrap_or_default();
    let repo = state.db.repository(&repo_name).await?;
    let all = state
        .db
        .series(repo.id, Some(&benchmark), None, None)
        .await?;
    if all.is_empty() {
        return Err(AppError::NotFound(format!("benchmark {benchmark:?} not found")).into());
    }
    let regressions = state
        .db
        .regressions(
            repo.id,
            &RegressionFilter {
                benchmark: Some(benchmark.clone()),
                ..RegressionFilter::default()
            },
        )
        .await?;
    let base = public_base(&headers);
    let mut charts = Vec::with_capacity(all.len());
    // The oldest and newest commit shown on any chart: (position, sha, time).
    let mut oldest: Option<(usize, String, Option<i64>)> = None;
    let mut newest: Option<(usize, String, Option<i64>)> = None;
    let drawn = load_series_trends(&state, &all, window).await?;
    for (series, drawn) in all.into_iter().zip(drawn) {
        let mut trend = drawn.into_trend(&repo_name, &series, &regressions);
        trend.y_scale = y_scale;
        if let (Some(first), Some(last)) = (trend.points.first(), trend.points.last()) {
            if oldest.as_ref().is_none_or(|o| first.position < o.0) {
                oldest = Some((first.position, first.sha.clone(), first.committed_at));
            }
            if newest.as_ref().is_none_or(|n| last.position > n.0) {
                newest = Some((last.position, last.sha.clone(), last.committed_at));
            }
        }
        charts.push(ChartView {
            svg: trend.inline_svg(&series.unit)?,
            embed: format!(
                "{base}{}",
                trend_svg_path(&repo_name, &benchmark, &series.metric, &series.machine)
            ),
            points: trend.measured,
            metric_query: query_value(&series.metric),
            metric: series.metric,
            unit: series.unit,
            direction: series.direction,
            machine: series.machine,
        });
    }
    let page = BenchmarkPage {
        shown: charts.iter().map(|c| c.points).max().unwrap_or(0),
        repo: repo_name,
        benchmark_query: query_value(&benchmark),
        benchmark,
        charts,
        ranges: RANGES,
        last: window.last,
        pinned: window.until.is_some(),
        span: match (&oldest, &newest) {
            (Some(o), Some(n)) => format!("{} to {}", commit_label(o), commit_label(n)),
            _ => String::new(),
        },
        moves: moves(window, oldest.map(|o| o.0), newest.map(|n| n.0), y_scale),
        scale_query: scale_query(y_scale),
        other_scale: other_scale(window, y_scale),
    };
    if is_htmx(&headers) {
        return render(&page.as_charts());
    }
    render(&page)
}

/// `abc1234 (2026-11-24)`.
fn commit_label((_, sha, time): &(usize, String, Option<i64>)) -> String {
    let short = sha.get(..7).unwrap_or(sha);
    match time {
        Some(seconds) => format!("{short} ({})", utc_date(*seconds)),
        None => short.to_owned(),
    }
}

/// The query of a window on a scale.
fn window_query(last: i64, to: Option<i64>, y_scale: YScale) -> String {
    let scale = scale_query(y_scale);
    match to {
        Some(to) => format!("?last={last}&to={to}{scale}"),
        None => format!("?last={last}{scale}"),
    }
}

fn scale_query(y_scale: YScale) -> &'static str {
    match y_scale {
        YScale::Linear => "",
        YScale::Log => "&scale=log",
    }
}

/// The link to the same window drawn on the other scale.
fn other_scale(window: Window, y_scale: YScale) -> Move {
    let (label, other) = match y_scale {
        YScale::Linear => ("log scale", YScale::Log),
        YScale::Log => ("linear scale", YScale::Linear),
    };
    Move {
        label,
        query: window_query(window.last, window.until, other),
    }
}

/// The links that move the window over history: older and newer by a whole window, and zoom
/// in (the newer half) and out (twice as many, ending at the same commit).
fn moves(
    window: Window,
    oldest: Option<usize>,
    newest: Option<usize>,
    y_scale: YScale,
) -> Vec<Move> {
    let (Some(oldest), Some(newest)) = (oldest, newest) else {
        return Vec::new();
    };
    let (oldest, newest) = (oldest as i64, newest as i64);
    let last = window.last;
    let query = |last: i64, to: Option<i64>| window_query(last, to, y_scale);
    let mut moves = Vec::new();
    if oldest > 0 {
        moves.push(Move {
            label: "← older",
            query: query(last, Some(oldest - 1)),
        });
    }
    if let Some(to) = window.until {
        moves.push(Move {
            label: "newer →",
            query: query(last, Some(to + (newest - oldest + 1))),
        });
        moves.push(Move {
            label: "newest",
            query: query(last, None),
        });
    }
    if last > 2 {
        moves.push(Move {
            label: "zoom in",
            query: query((last / 2).max(2), Some(newest - (newest - oldest) / 4)),
        });
    }
    if last < MAX_POINTS && oldest > 0 {
        moves.push(Move {
            label: "zoom out",
            query: query((last * 2).min(MAX_POINTS), window.until.map(|_| newest)),
        });
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queries(window: Window, oldest: usize, newest: usize) -> Vec<(&'static str, String)> {
        moves(window, Some(oldest), Some(newest), YScale::Linear)
            .into_iter()
            .map(|m| (m.label, m.query))
            .collect()
    }

    #[test]
    fn the_newest_window_moves_older_and_zooms() {
        let window = Window {
            last: 100,
            until: None,
        };
        assert_eq!(
            queries(window, 900, 999),
            [
                ("← older", "?last=100&to=899".to_owned()),
                ("zoom in", "?last=50&to=975".to_owned()),
                ("zoom out", "?last=200".to_owned()),
            ]
        );
    }

    #[test]
    fn a_pinned_window_moves_both_ways_and_stops_at_the_root() {
        let window = Window {
            last: 100,
            until: Some(99),
        };
        let links = queries(window, 0, 99);
        assert!(!links.iter().any(|(label, _)| *label == "← older"));
        assert!(links.contains(&("newer →", "?last=100&to=199".to_owned())));
        assert!(links.contains(&("newest", "?last=100".to_owned())));
        assert!(!links.iter().any(|(label, _)| *label == "zoom out"));
        assert!(moves(window, None, None, YScale::Linear).is_empty());
    }

    #[test]
    fn every_link_keeps_the_log_scale_and_the_toggle_keeps_the_window() {
        let window = Window {
            last: 100,
            until: Some(500),
        };
        let links = moves(window, Some(401), Some(500), YScale::Log);
        assert!(!links.is_empty());
        assert!(links.iter().all(|m| m.query.ends_with("&scale=log")));
        let toggle = other_scale(window, YScale::Log);
        assert_eq!(
            (toggle.label, toggle.query.as_str()),
            ("linear scale", "?last=100&to=500")
        );
        let toggle = other_scale(window, YScale::Linear);
        assert_eq!(toggle.query, "?last=100&to=500&scale=log");
    }
}
