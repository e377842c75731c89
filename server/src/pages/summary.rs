//! The repository page as a performance summary: open regressions first, then every series with
//! its latest value, a sparkline and its change over the newest commits, biggest change first;
//! and the form that compares any two commits.

use axum::extract::{Path, Query};
use axum::response::Redirect;
use kymo_core::db::{BenchmarkSeriesRow, RecentValue};
use kymo_core::protocol::query_value;
use kymo_core::results::median;
use serde::Deserialize;

use super::format::{benchmark_href, change, value};
use crate::chart::render_sparkline;

/// Commits of history the summary looks back over.
pub const SUMMARY_WINDOW: i64 = 30;
/// Commits at each end of the window whose median is the level compared: one run slowed by a
/// loaded machine moves a median of five by nothing, where it moved the change from the
/// window's first point to its last by its whole slowdown.
pub const LEVEL_COMMITS: usize = 5;
/// The fewest commits a level is taken from: below it a level would be one or two runs.
const MIN_LEVEL_COMMITS: usize = 3;
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
            let (latest, change_text, class, badness) = match (values.last(), levels(&values)) {
                (Some(last), Some((before, after))) => {
                    let (text, class) = change(before, after, &s.direction);
                    let pct = (after - before) / before.abs() * 100.0;
                    let worse = if s.direction == "higher" { -pct } else { pct };
                    (
                        value(*last, &s.unit),
                        text,
                        class,
                        worse.is_finite().then_some(worse),
                    )
                }
                (Some(last), None) => (value(*last, &s.unit), "–".into(), "", None),
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

/// The levels a series' change is measured between: the medians of the oldest and of the
/// newest [`LEVEL_COMMITS`] commits of the window (of each half, when the window holds fewer
/// than twice that), or `None` when a level would rest on fewer than [`MIN_LEVEL_COMMITS`].
fn levels(values: &[f64]) -> Option<(f64, f64)> {
    let side = (values.len() / 2).min(LEVEL_COMMITS);
    if side < MIN_LEVEL_COMMITS {
        return None;
    }
    let before = median(&values[..side])?;
    let after = median(&values[values.len() - side..])?;
    Some((before, after))
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

    /// Six commits of one series: `before` at the first three, `after` at the last three.
    fn steps(series_id: i64, before: f64, after: f64) -> Vec<(i64, i64, f64)> {
        (0..6)
            .map(|p| (series_id, p, if p < 3 { before } else { after }))
            .collect()
    }

    #[test]
    fn the_biggest_change_comes_first_and_unmeasured_series_last() {
        let mut points = steps(1, 100.0, 101.0);
        points.extend(steps(2, 100.0, 150.0));
        points.push((2, 5, 140.0)); // a later run of the same commit wins
        points.extend([(4, 2, 7.0), (5, 1, 7.0), (5, 2, 8.0)]);
        let rows = recent(&points);
        let all = vec![
            series(1, "a/quiet", "lower"),
            series(2, "b/slower", "lower"),
            series(3, "c/never", "lower"),
            series(4, "d/once", "lower"),
            series(5, "e/twice", "lower"),
        ];
        let views = summarize("r", all, &rows, SummarySort::Change);
        let order: Vec<&str> = views.iter().map(|v| v.benchmark.as_str()).collect();
        assert_eq!(
            order,
            ["b/slower", "a/quiet", "d/once", "e/twice", "c/never"]
        );
        assert_eq!(views[0].change, "+50.0 %");
        assert_eq!(views[0].change_class, "worse");
        assert_eq!(views[0].latest, "140 ns");
        assert_eq!(views[3].change, "–", "two commits are no level to compare");
        assert_eq!(views[3].latest, "8 ns");
        assert_eq!(views[4].latest, "–");
        let by_name = summarize(
            "r",
            vec![series(2, "b", "lower"), series(1, "a", "lower")],
            &rows,
            SummarySort::Name,
        );
        assert_eq!(by_name[0].benchmark, "a");
    }

    #[test]
    fn one_slow_first_run_is_no_improvement() {
        // The first run of each series on a loaded machine, 1.5 to 2.5 times slower, then a
        // steady level; the second series got 1.3 times slower half-way.
        let mut values: Vec<(i64, i64, f64)> = (0..30).map(|p| (1, p, 100.0)).collect();
        values[0].2 = 250.0;
        values.extend((0..30).map(|p| (2, p, if p < 15 { 100.0 } else { 130.0 })));
        values[30].2 = 150.0;
        let views = summarize(
            "r",
            vec![series(1, "steady", "lower"), series(2, "slower", "lower")],
            &recent(&values),
            SummarySort::Change,
        );
        assert_eq!(views[0].benchmark, "slower");
        assert_eq!(
            (views[0].change.as_str(), views[0].change_class),
            ("+30.0 %", "worse")
        );
        assert_eq!(
            (views[1].change.as_str(), views[1].change_class),
            ("+0.0 %", "")
        );
    }

    #[test]
    fn a_higher_is_better_series_that_rose_is_an_improvement() {
        let rows = recent(&steps(1, 100.0, 200.0));
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
