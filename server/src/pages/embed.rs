//! What other sites embed: an image of a benchmark's recent trend, for READMEs and pull
//! requests (a standalone SVG without stylesheet or script, cached for a few minutes), and the
//! server's public address that absolute links to it (and feeds) need.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use kymo_core::db::{BenchmarkSeriesRow, RegressionFilter};
use kymo_core::protocol::query_value;
use serde::Deserialize;

use super::trend::{Window, load_series_trend};
use crate::api::ApiQuery;
use crate::chart::YScale;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Commits an image shows by default, and at most.
const DEFAULT_LAST: i64 = 30;
const MAX_LAST: i64 = 1_000;
/// Default pixel size of an image, and the largest side accepted.
const DEFAULT_SIZE: (u32, u32) = (600, 200);
const MAX_IMAGE_SIDE: u32 = 2_000;
/// How long clients and proxies may reuse an image.
const CACHE_CONTROL: &str = "public, max-age=300";

/// Which series to draw, and how.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrendQuery {
    benchmark: String,
    /// Needed when the benchmark has several metrics.
    metric: Option<String>,
    /// A machine fingerprint; needed when several machines measure the metric.
    machine: Option<String>,
    /// The newest this many commits.
    last: Option<i64>,
    width: Option<u32>,
    height: Option<u32>,
    /// `linear` (the default) or `log`.
    scale: Option<YScale>,
}

/// The image's path (relative to the server) for one series.
pub fn trend_svg_path(repo: &str, benchmark: &str, metric: &str, machine: &str) -> String {
    format!(
        "/repos/{repo}/trend.svg?benchmark={}&metric={}&machine={}",
        query_value(benchmark),
        query_value(metric),
        query_value(machine)
    )
}

/// The server's address as the client reached it, for absolute links in feeds and embed
/// snippets; a missing or odd `Host` falls back to `http://localhost`.
pub fn public_base(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.len() <= 255
                && h.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
                })
        })
        .unwrap_or("localhost");
    let https = headers
        .get("x-forwarded-proto")
        .is_some_and(|p| p.as_bytes().eq_ignore_ascii_case(b"https"));
    format!("{}://{host}", if https { "https" } else { "http" })
}

pub async fn trend_svg(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    ApiQuery(query): ApiQuery<TrendQuery>,
) -> AppResult<Response> {
    let last = query.last.unwrap_or(DEFAULT_LAST);
    if !(2..=MAX_LAST).contains(&last) {
        return Err(AppError::BadRequest(format!(
            "last must be between 2 and {MAX_LAST} commits, not {last}"
        )));
    }
    let width = query.width.unwrap_or(DEFAULT_SIZE.0);
    let height = query.height.unwrap_or(DEFAULT_SIZE.1);
    let (min_w, min_h) = (crate::chart::MIN_WIDTH, crate::chart::MIN_HEIGHT);
    if !(min_w..=MAX_IMAGE_SIDE).contains(&width) || !(min_h..=MAX_IMAGE_SIDE).contains(&height) {
        return Err(AppError::BadRequest(format!(
            "width must be {min_w} to {MAX_IMAGE_SIDE} and height {min_h} to {MAX_IMAGE_SIDE} pixels, not {width} × {height}"
        )));
    }
    let repo = state.db.repository(&repo).await?;
    let benchmark = query.benchmark.as_str();
    let matching = state
        .db
        .series(
            repo.id,
            Some(benchmark),
            query.metric.as_deref(),
            query.machine.as_deref(),
        )
        .await?;
    let series = match matching.as_slice() {
        [one] => one,
        many if query.metric.is_none() && primary_metric(many).is_some() => {
            primary_metric(many).expect("checked in the guard")
        }
        [] if state
            .db
            .series(repo.id, Some(benchmark), None, None)
            .await?
            .is_empty() =>
        {
            return Err(AppError::NotFound(format!(
                "benchmark {benchmark:?} not found"
            )));
        }
        [] => {
            return Err(AppError::NotFound(format!(
                "benchmark {benchmark:?} has no series with that metric and machine"
            )));
        }
        many => {
            let choices: Vec<String> = many
                .iter()
                .map(|s| format!("metric={} machine={}", s.metric, s.machine))
                .collect();
            return Err(AppError::BadRequest(format!(
                "{} series match; choose one with metric and machine: {}",
                many.len(),
                choices.join(", ")
            )));
        }
    };
    let filter = RegressionFilter {
        benchmark: Some(benchmark.to_owned()),
        ..RegressionFilter::default()
    };
    let regressions = state.db.regressions(repo.id, &filter).await?;
    let mut trend = load_series_trend(
        &state,
        &repo.name,
        series,
        Window { last, until: None },
        &regressions,
    )
    .await?;
    // Outside the dashboard the image must say what it shows.
    trend.title = format!("{benchmark} · {}", trend.title);
    trend.y_scale = query.scale.unwrap_or_default();
    let svg = trend.standalone_svg(&series.unit, width, height)?;
    Ok((
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, CACHE_CONTROL),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'",
            ),
        ],
        svg,
    )
        .into_response())
}

/// Without a `metric`, a benchmark measured on one machine shows its time (or, without one,
/// its first metric by name); several machines stay a choice the caller must make.
fn primary_metric(many: &[BenchmarkSeriesRow]) -> Option<&BenchmarkSeriesRow> {
    let machine = &many.first()?.machine;
    if many.iter().any(|s| &s.machine != machine) {
        return None;
    }
    many.iter()
        .find(|s| s.metric == "time")
        .or_else(|| many.iter().min_by(|a, b| a.metric.cmp(&b.metric)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_base_comes_from_host_and_refuses_odd_ones() {
        let mut headers = HeaderMap::new();
        assert_eq!(public_base(&headers), "http://localhost");
        headers.insert(header::HOST, "bench.example:8080".parse().unwrap());
        assert_eq!(public_base(&headers), "http://bench.example:8080");
        headers.insert("x-forwarded-proto", "https".parse().unwrap());
        assert_eq!(public_base(&headers), "https://bench.example:8080");
        headers.insert(header::HOST, "evil\"><x".parse().unwrap());
        assert_eq!(public_base(&headers), "https://localhost");
    }
}
