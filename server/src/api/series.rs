//! Series in history order, as JSON or as a CSV download.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use kymo_core::db::{BenchmarkSeriesRow, SeriesPoint};
use kymo_core::protocol::ApiErrorBody;
use serde::{Deserialize, Serialize};

use super::ApiQuery;
use super::doc::RepoPath;
use crate::error::{AppError, AppResult};
use crate::export::{ExportFormat, csv_download, csv_field, csv_line};
use crate::state::AppState;

/// Newest commits a series answers with at most.
pub const MAX_SERIES_POINTS: i64 = 10_000;
/// Series one request may return; more means the query is too broad.
const MAX_SERIES: usize = 100;

/// Filters of the series endpoint.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SeriesQuery {
    /// The benchmark's full name (with its `{params}`).
    pub benchmark: Option<String>,
    pub metric: Option<String>,
    /// A machine fingerprint.
    pub machine: Option<String>,
    /// The newest this many commits (1 to 10000; default 1000).
    pub limit: Option<i64>,
    /// `json` (default) or `csv`.
    pub format: Option<String>,
}

/// A series with its points in history order.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SeriesWithPoints {
    #[serde(flatten)]
    pub series: BenchmarkSeriesRow,
    pub points: Vec<SeriesPoint>,
}

#[utoipa::path(get, path = "/repos/{repo}/series", tag = "repos", params(RepoPath, SeriesQuery),
    responses(
        (status = 200, description = "The matching series, points oldest first",
         content((Vec<SeriesWithPoints> = "application/json"), (String = "text/csv"))),
        (status = 404, description = "No such repository", body = ApiErrorBody),
        (status = 422, description = "Bad parameter, or more than 100 series match", body = ApiErrorBody)))]
pub async fn series(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    ApiQuery(query): ApiQuery<SeriesQuery>,
) -> AppResult<Response> {
    let format = ExportFormat::parse(query.format.as_deref())?;
    let limit = query.limit.unwrap_or(1_000);
    if !(1..=MAX_SERIES_POINTS).contains(&limit) {
        return Err(AppError::BadRequest(format!(
            "limit must be between 1 and {MAX_SERIES_POINTS}, not {limit}"
        )));
    }
    let repo = state.db.repository(&repo).await?;
    let all = state
        .db
        .series(
            repo.id,
            query.benchmark.as_deref(),
            query.metric.as_deref(),
            query.machine.as_deref(),
        )
        .await?;
    if all.len() > MAX_SERIES {
        return Err(AppError::BadRequest(format!(
            "{} series match; narrow the query with benchmark, metric or machine",
            all.len()
        )));
    }
    // Streamed a series at a time: a request may ask for 100 series of 10,000 points, and
    // only one series' points are held at once (an error half-way ends the answer short).
    let chunks =
        futures_util::stream::iter(all.into_iter().enumerate()).then(move |(i, series)| {
            let state = state.clone();
            async move {
                let points = (state.db.series_points(series.id, limit, None))
                    .await
                    .map_err(std::io::Error::other)?;
                let series = SeriesWithPoints { series, points };
                Ok::<_, std::io::Error>(match format {
                    ExportFormat::Json => {
                        let json = serde_json::to_string(&series).map_err(std::io::Error::other)?;
                        if i == 0 { json } else { format!(",{json}") }
                    }
                    ExportFormat::Csv => series_csv_lines(&series),
                })
            }
        });
    let (head, tail) = match format {
        ExportFormat::Json => ("[", "]"),
        ExportFormat::Csv => (CSV_HEADER, ""),
    };
    let body = futures_util::stream::once(async move { Ok(head.to_owned()) })
        .chain(chunks)
        .chain(futures_util::stream::once(
            async move { Ok(tail.to_owned()) },
        ));
    let body = Body::from_stream(body);
    Ok(match format {
        ExportFormat::Json => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        ExportFormat::Csv => csv_download(&format!("kymo-series-{}.csv", repo.id), body),
    })
}

/// The first line of a series export in CSV.
const CSV_HEADER: &str = "benchmark,metric,unit,direction,machine,position,commit,value,samples\n";

/// One line per point of a series: its identity, the commit, its value and its samples
/// (separated by `;`, as they were measured).
pub fn series_csv_lines(s: &SeriesWithPoints) -> String {
    let mut out = String::new();
    let identity = [
        csv_field(&s.series.benchmark),
        csv_field(&s.series.metric),
        csv_field(&s.series.unit),
        csv_field(&s.series.direction),
        csv_field(&s.series.machine),
    ];
    for p in &s.points {
        let samples: Vec<String> = p.samples.iter().map(f64::to_string).collect();
        let mut fields = identity.to_vec();
        fields.extend([
            p.position.to_string(),
            csv_field(&p.sha),
            p.value.to_string(),
            samples.join(";"),
        ]);
        out.push_str(&csv_line(&fields));
    }
    out
}

#[cfg(test)]
mod tests {
    use kymo_core::samples::Samples;

    use super::*;

    #[test]
    fn a_series_becomes_one_csv_line_per_point_with_hostile_names_quoted() {
        let series = SeriesWithPoints {
            series: BenchmarkSeriesRow {
                id: 1,
                benchmark: "parse,{size=16}".into(),
                metric: "=time".into(),
                unit: "ns".into(),
                direction: "lower".into(),
                machine: "abcd".into(),
            },
            points: vec![SeriesPoint {
                position: 3,
                sha: "f00".into(),
                committed_at: 0,
                value: 1.5,
                samples: Samples(vec![1.0, 1.5, 2.0]),
            }],
        };
        assert_eq!(
            format!("{CSV_HEADER}{}", series_csv_lines(&series)),
            "benchmark,metric,unit,direction,machine,position,commit,value,samples\n\
             \"parse,{size=16}\",'=time,ns,lower,abcd,3,f00,1.5,1;1.5;2\n"
        );
    }
}
