//! The repository page as a performance summary: open regressions first, then every series with
//! its latest value, a sparkline and its change over the newest commits, biggest change first;
//! and the form that compares any two commits.

use axum::extract::{Path, Query};
use axum::response::Redirect;
use kymo_core::db::{BenchmarkSeriesRow, RecentValue};
use kymo_core::protocol::query_value;
use serde::Deserialize;

use super::format::{benchmark_href, change, value};
use crate::chart::render_sparkline;

/// Commits of history the summary looks back over.
pub const SUMMARY_WINDOW: i64 = 30;
/// Series shown per page of the summary: the page's cost stays bounded however many exist.
pub const SUMMARY_PAGE: usize = 50;

/// One series in the summary.
pub struct SeriesSummaryView {
    pub benchmark: String,
    pub href: String,
    pub metric: String,
    pub machine: String,
    pub latest: String,
    pub change: String,
    pub change_class: &'static str,
    pub spark: String,
    /// The change in percent, signed so that larger is worse; sorts the table. `None` with
    /// fewer than two values in the window.
    badness: Option<f64>,
    values: Vec<f64>,
}

/// How the summary is ordered: by change (worst first, the default) or by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SummarySort {
    #[default]
    Change,
    Name,
}

/// The series of a repository with their recent values (as [`kymo_core::db::Db::recent_values`]
/// gives them), sorted by `sort`; a series without values in the window sorts last.
pub fn summarize(
    repo: &str,
    series: Vec<BenchmarkSeriesRow>,
    recent: &[RecentValue],
    sort: SummarySort,
) -> Vec<SeriesSummaryView> {
    let mut views: Vec<SeriesSummaryView> = series
        .into_iter()
        .map(|s| {
            let values = latest_per_commit(recent, s.id);
            let (latest, change_text, class, badness) = match (values.first(), values.last()) {
                (Some(first), Some(last)) if values.len() > 1 => {
                    let (text, class) = change(*first, *last, &s.direction);
                    let pct = (last - first) / first.abs() * 100.0;
                    let worse = if s.direction == "higher" { -pct } else { pct };
                    (
                        value(*last, &s.unit),
                        text,
                        class,
                        worse.is_finite().then_some(worse),
                    )
                }
                (Some(only), _) => (value(*only, &s.unit), "–".into(), "", None),
                _ => ("–".into(), "–".into(), "", None),
            };
            SeriesSummaryView {
                href: benchmark_href(repo, &s.benchmark),
                benchmark: s.benchmark,
                metric: s.metric,
                machine: s.machine,
                latest,
                change: change_text,
                change_class: class,
                spark: String::new(),
                badness,
                values,
            }
        })
        .collect();
    match sort {
        // Changed series first, biggest change first; then those measured once; then the rest.
        SummarySort::Change => views.sort_by(|a, b| {
            let rank = |v: &SeriesSummaryView| match (v.badness, v.values.is_empty()) {
                (Some(_), _) => 0,
                (None, false) => 1,
                (None, true) => 2,
            };
            let size = |v: &SeriesSummaryView| v.badness.map_or(0.0, f64::abs);
            rank(a)
                .cmp(&rank(b))
                .then_with(|| size(b).total_cmp(&size(a)))
                .then_with(|| name_key(a).cmp(&name_key(b)))
        }),
        SummarySort::Name => views.sort_by(|a, b| name_key(a).cmp(&name_key(b))),
    }
    views
}

impl SeriesSummaryView {
    /// Draws the sparkline; done only for the rows a page shows.
    pub fn with_sparkline(mut self) -> Self {
        self.spark = render_sparkline(&self.values, &format!("{} {}", self.benchmark, self.metric));
        self
    }
}

/// What a series is called, for ordering by name without copying it.
fn name_key(v: &SeriesSummaryView) -> (&str, &str, &str) {
    (&v.benchmark, &v.metric, &v.machine)
}

/// A series' value at each commit of the window, the latest run of a commit winning.
fn latest_per_commit(recent: &[RecentValue], series_id: i64) -> Vec<f64> {
    let start = recent.partition_point(|r| r.series_id < series_id);
    let mut values: Vec<(i64, f64)> = Vec::new();
    for r in recent[start..]
        .iter()
        .take_while(|r| r.series_id == series_id)
    {
        match values.last_mut() {
            Some((position, latest)) if *position == r.position => *latest = r.value,
            _ => values.push((r.position, r.value)),
        }
    }
    values.into_iter().map(|(_, v)| v).collect()
}

/// The compare form's fields.
#[derive(Debug, Deserialize)]
pub struct CompareForm {
    base: Option<String>,
    head: Option<String>,
}

/// `GET /repos/{repo}/compare?base=..&head=..`: the compare form, answered with the compare
/// page's address (`base` may be `parent`, `merge-base:BRANCH`, a commit, tag or branch).
pub async fn compare_form(Path(repo): Path<String>, Query(form): Query<CompareForm>) -> Redirect {
    let field = |f: Option<String>, default: &str| {
        f.map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_owned())
    };
    // A branch name may hold `/`: encoded, it stays inside the one path segment of the spec.
    let segment = |v: &str| query_value(v).replace('/', "%2F");
    let base = field(form.base, "parent");
    let head = field(form.head, "HEAD");
    let target = if base == "parent" {
        format!("/repos/{}/compare/{}", query_value(&repo), segment(&head))
    } else {
        format!(
            "/repos/{}/compare/{}...{}",
            query_value(&repo),
            segment(&base),
            segment(&head)
        )
    };
    Redirect::to(&target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(id: i64, name: &str, direction: &str) -> BenchmarkSeriesRow {
        BenchmarkSeriesRow {
            id,
            benchmark: name.into(),
            metric: "time".into(),
            unit: "ns".into(),
            direction: direction.into(),
            machine: "m".into(),
        }
    }

    fn recent(points: &[(i64, i64, f64)]) -> Vec<RecentValue> {
        points
            .iter()
            .map(|&(series_id, position, value)| RecentValue {
                series_id,
                position,
                value,
            })
            .collect()
    }

    #[test]
    fn the_biggest_change_comes_first_and_unmeasured_series_last() {
        let rows = recent(&[
            (1, 1, 100.0),
            (1, 2, 101.0),
            (2, 1, 100.0),
            (2, 2, 150.0),
            (2, 2, 140.0), // a later run of the same commit wins
            (4, 2, 7.0),
        ]);
        let all = vec![
            series(1, "a/quiet", "lower"),
            series(2, "b/slower", "lower"),
            series(3, "c/never", "lower"),
            series(4, "d/once", "lower"),
        ];
        let views = summarize("r", all, &rows, SummarySort::Change);
        let order: Vec<&str> = views.iter().map(|v| v.benchmark.as_str()).collect();
        assert_eq!(order, ["b/slower", "a/quiet", "d/once", "c/never"]);
        assert_eq!(views[0].change, "+40.0 %");
        assert_eq!(views[0].change_class, "worse");
        assert_eq!(views[0].latest, "140 ns");
        assert_eq!(views[3].latest, "–");
        let by_name = summarize(
            "r",
            vec![series(2, "b", "lower"), series(1, "a", "lower")],
            &rows,
            SummarySort::Name,
        );
        assert_eq!(by_name[0].benchmark, "a");
    }

    #[test]
    fn a_higher_is_better_series_that_rose_is_an_improvement() {
        let rows = recent(&[(1, 1, 100.0), (1, 2, 200.0)]);
        let views = summarize(
            "r",
            vec![series(1, "rate", "higher")],
            &rows,
            SummarySort::Change,
        );
        assert_eq!(views[0].change_class, "better");
        assert!(views[0].badness.is_some_and(|b| b < 0.0));
        assert!(
            views
                .into_iter()
                .next()
                .unwrap()
                .with_sparkline()
                .spark
                .contains("<polyline")
        );
    }
}
