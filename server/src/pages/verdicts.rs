//! The regressions list, a regression's page with its triage, and the compare page.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use kymo_core::db::{
    BisectionView, ConfirmationView, RegressionFilter, RegressionRow, TRIAGE_STATES,
};
use kymo_core::protocol::query_value;
use serde::Deserialize;

use super::access::Viewer;
use super::format::{summary, utc, value};
use super::{PageError, PageResult, RowWindow, render};
use crate::api::{csv_response, load_regression};
use crate::auth::AdminForm;
use crate::chart::{ChangeMarker, MarkerKind, TrendChart, TrendPoint, render_trend_svg};
use crate::compare::{Baseline, CompareReport, compare_commits};
use crate::error::AppError;
use crate::state::AppState;

/// Commits shown on each side of a regression on its trend graph.
const AROUND: i64 = 40;

struct RegressionView {
    id: i64,
    benchmark: String,
    metric: String,
    machine: String,
    sha: String,
    short: String,
    summary: String,
    kind: String,
    change: String,
    baseline: String,
    value: String,
    state: String,
    /// confirming, confirmed, refuted, unconfirmed, or empty (none asked for).
    confirmation: String,
}

impl From<&RegressionRow> for RegressionView {
    fn from(r: &RegressionRow) -> Self {
        RegressionView {
            id: r.id,
            benchmark: r.benchmark.clone(),
            metric: r.metric.clone(),
            machine: r.machine.clone(),
            short: r.sha[..10].to_owned(),
            sha: r.sha.clone(),
            summary: summary(&r.message),
            kind: r.kind.clone(),
            change: format!("{:+.1} %", r.change_pct),
            baseline: value(r.baseline, &r.unit),
            value: value(r.value, &r.unit),
            state: r.state.clone(),
            confirmation: r.confirmation.clone().unwrap_or_default(),
        }
    }
}

#[derive(Template)]
#[template(path = "regressions.html")]
struct RegressionsPage {
    repo: String,
    rows: Vec<RegressionView>,
    state: String,
    kind: String,
    machine: String,
    benchmark: String,
    min_change: String,
    states: [&'static str; 4],
}

/// The filter form's fields; empty fields mean "any".
#[derive(Debug, Deserialize, Default)]
pub struct FilterForm {
    state: Option<String>,
    kind: Option<String>,
    machine: Option<String>,
    benchmark: Option<String>,
    min_change: Option<String>,
}

fn non_empty(s: &Option<String>) -> Option<String> {
    s.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

pub async fn regressions(
    State(state): State<AppState>,
    Path(repo_name): Path<String>,
    Query(form): Query<FilterForm>,
) -> PageResult {
    let repo = state.db.repository(&repo_name).await?;
    let min_change = match non_empty(&form.min_change) {
        Some(text) => Some(text.parse::<f64>().map_err(|_| {
            AppError::BadRequest(format!("minimum change {text:?} is not a number"))
        })?),
        None => None,
    };
    let filter = RegressionFilter {
        state: non_empty(&form.state),
        kind: non_empty(&form.kind),
        machine: non_empty(&form.machine),
        benchmark: non_empty(&form.benchmark),
        min_change,
    };
    let rows = state.db.regressions(repo.id, &filter).await?;
    render(&RegressionsPage {
        repo: repo_name,
        rows: rows.iter().map(Into::into).collect(),
        state: filter.state.unwrap_or_default(),
        kind: filter.kind.unwrap_or_default(),
        machine: filter.machine.unwrap_or_default(),
        benchmark: filter.benchmark.unwrap_or_default(),
        min_change: form.min_change.unwrap_or_default(),
        states: TRIAGE_STATES,
    })
}

#[derive(Template)]
#[template(path = "regression.html")]
struct RegressionPage {
    repo: String,
    r: RegressionView,
    previous_sha: Option<String>,
    direction: String,
    ci: String,
    p_value: String,
    noise: String,
    segments: String,
    /// A step at the culprit, or a drift over a range of commits from it.
    shape: String,
    method: String,
    state_by: String,
    state_at: String,
    note: String,
    detected: String,
    svg: String,
    states: [&'static str; 4],
    bisection: Option<BisectionView>,
    confirmation: Option<ConfirmationView>,
    /// The logged-in admin's anti-forgery token; without one, the triage form is not shown.
    csrf: Option<String>,
}

pub async fn regression(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((repo, id)): Path<(String, i64)>,
) -> PageResult {
    let r = load_regression(&state, &repo, id).await?;
    // The commits around the change only: read down from AROUND after it, not the history.
    let points = match r.position {
        Some(at) => {
            (state.db)
                .series_points(r.series_id, 2 * AROUND + 1, Some(at + AROUND))
                .await?
        }
        None => state.db.series_points(r.series_id, 10_000, None).await?,
    };
    let at = r.position.unwrap_or(i64::MAX);
    let trend: Vec<TrendPoint> = points
        .iter()
        .filter(|p| (p.position - at).abs() <= AROUND || r.position.is_none())
        .map(|p| TrendPoint {
            position: p.position as usize,
            sha: p.sha.clone(),
            value: p.value,
            low: None,
            high: None,
            committed_at: Some(p.committed_at),
        })
        .collect();
    let title = format!("{} · {}", r.metric, r.machine);
    let marker = [ChangeMarker {
        position: r.position.unwrap_or_default() as usize,
        kind: if r.kind == "regression" {
            MarkerKind::Regression
        } else {
            MarkerKind::Improvement
        },
        label: format!("{:+.1} % {}", r.change_pct, r.kind),
        href: None,
    }];
    let commit_links = format!("/repos/{repo}/commits/");
    let chart = TrendChart::new(&title, &r.unit, &trend)
        .with_commit_links(&commit_links)
        .with_size(960, 300)
        .with_changes(if r.position.is_some() { &marker } else { &[] })
        .with_baseline(r.baseline, "level before");
    let svg = render_trend_svg(&chart)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("trend chart: {e}")))?;
    render(&RegressionPage {
        repo,
        previous_sha: r.previous_sha.clone(),
        direction: r.direction.clone(),
        ci: format!("{:+.1} % to {:+.1} %", r.ci_low_pct, r.ci_high_pct),
        p_value: format!("{:.2e}", r.p_value),
        noise: format!("{:.2} %", r.noise_pct),
        segments: format!(
            "{} commits before, {} after",
            r.segment_before, r.segment_after
        ),
        shape: if r.span > 1 {
            format!(
                "a drift over {} commits from this one on (a ramp, not one step)",
                r.span
            )
        } else {
            "a step at this commit".to_owned()
        },
        method: r.method.clone(),
        state_by: r.state_by.clone().unwrap_or_default(),
        state_at: r.state_at.map(utc).unwrap_or_default(),
        note: r.note.clone(),
        detected: utc(r.detected_at),
        svg,
        states: TRIAGE_STATES,
        bisection: state.db.bisection_of(r.id).await?,
        confirmation: state.db.confirmation_of(r.id).await?,
        csrf: viewer.csrf(),
        r: (&r).into(),
    })
}

/// The triage form.
#[derive(Debug, Deserialize)]
pub struct TriageForm {
    state: String,
    #[serde(default)]
    by: String,
    #[serde(default)]
    note: String,
}

pub async fn triage(
    State(state): State<AppState>,
    Path((repo, id)): Path<(String, i64)>,
    AdminForm { admin, form }: AdminForm<TriageForm>,
) -> Result<Redirect, PageError> {
    load_regression(&state, &repo, id).await?;
    let by = match form.by.trim() {
        "" => admin.name.as_str(),
        named => named,
    };
    state
        .db
        .triage(id, &form.state, by, &form.note, state.now())
        .await?;
    Ok(Redirect::to(&format!("/repos/{repo}/regressions/{id}")))
}

/// One row of a compare table (`compare_table.html`).
pub(super) struct CompareRowView {
    pub(super) benchmark: String,
    pub(super) metric: String,
    pub(super) machine: String,
    pub(super) base: String,
    pub(super) head: String,
    pub(super) change: String,
    pub(super) change_value: f64,
    pub(super) interval: String,
    /// The smallest change the verdict would have found (`≥ 3.1 %`), or a dash.
    pub(super) power: String,
    pub(super) verdict: &'static str,
    /// Why the verdict rests on little (a short history, none yet); empty otherwise.
    pub(super) note: String,
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage {
    repo: String,
    spec: String,
    base: String,
    head: String,
    baseline: String,
    rows: Vec<CompareRowView>,
    total: usize,
    /// Which of the (filtered, sorted) rows this page shows.
    shown: RowWindow,
    /// The query of this page's view (sort and filter), to which a row offset is appended.
    view_query: String,
    regressed: usize,
    improved: usize,
    unchanged: usize,
    inconclusive: usize,
    geomean: String,
    significant: bool,
    sort: String,
}

/// Options of the compare page.
#[derive(Debug, Deserialize, Default)]
pub struct CompareOptions {
    baseline: Option<String>,
    sort: Option<String>,
    significant: Option<String>,
    format: Option<String>,
    /// First row shown.
    from: Option<usize>,
}

/// `/repos/{repo}/compare/{base}...{head}` or `/repos/{repo}/compare/{head}` (against the
/// baseline named by `?baseline=`, the parent by default).
pub async fn compare(
    State(state): State<AppState>,
    Path((repo_name, spec)): Path<(String, String)>,
    Query(options): Query<CompareOptions>,
) -> Result<Response, PageError> {
    let repo = state.db.repository(&repo_name).await?;
    let (baseline, head) = match spec.split_once("...") {
        Some((base, head)) => (Baseline::parse(Some(base)), head.to_owned()),
        None => (Baseline::parse(options.baseline.as_deref()), spec.clone()),
    };
    let report = compare_commits(&state, &repo, &baseline, &head).await?;
    if options.format.as_deref() == Some("csv") {
        return Ok(csv_response(&report));
    }
    let significant = options.significant.as_deref() == Some("1");
    let sort = options.sort.clone().unwrap_or_else(|| "change".into());
    let page = compare_page(repo_name, spec, report, (significant, sort), options.from);
    Ok(render(&page)?.into_response())
}

/// Rows of a compare page: the rest are a click away, so that the page's size stays bounded
/// however many series two commits share.
const COMPARE_PAGE: usize = 200;

fn compare_page(
    repo: String,
    spec: String,
    report: CompareReport,
    (significant, sort): (bool, String),
    from: Option<usize>,
) -> ComparePage {
    let total = report.rows.len();
    let all = compare_rows(&report, significant, &sort);
    let shown = RowWindow::new(all.len(), from, COMPARE_PAGE);
    let view_query = format!(
        "?sort={}{}",
        query_value(&sort),
        if significant { "&significant=1" } else { "" }
    );
    ComparePage {
        repo,
        base: report.base.clone(),
        head: report.head.clone(),
        baseline: report.baseline.clone(),
        rows: shown.of(all).collect(),
        total,
        shown,
        view_query,
        regressed: report.regressed,
        improved: report.improved,
        unchanged: report.unchanged,
        inconclusive: report.inconclusive,
        geomean: geomean(&report),
        significant,
        sort,
        spec,
    }
}

/// The geometric mean of a report's ratios as a signed percentage, or a dash.
pub(super) fn geomean(report: &CompareReport) -> String {
    report
        .geomean_ratio
        .map(|g| format!("{:+.2} %", (g - 1.0) * 100.0))
        .unwrap_or_else(|| "–".into())
}

/// A report's rows for the compare table (only the changes when `significant`), sorted by
/// `sort`: change (the largest first), benchmark or verdict.
pub(super) fn compare_rows(
    report: &CompareReport,
    significant: bool,
    sort: &str,
) -> Vec<CompareRowView> {
    let mut rows: Vec<CompareRowView> = report
        .rows
        .iter()
        .filter(|r| !significant || r.verdict.kind.is_change())
        .map(|r| {
            let v = &r.verdict;
            CompareRowView {
                benchmark: r.benchmark.clone(),
                metric: r.metric.clone(),
                machine: r.machine.clone(),
                base: value(v.baseline, &r.unit),
                head: value(v.value, &r.unit),
                change: format!("{:+.1} %", v.change_pct),
                change_value: v.change_pct,
                interval: format!("{:+.1} … {:+.1} %", v.ci_low_pct, v.ci_high_pct),
                power: v
                    .detectable_pct
                    .map_or("–".to_owned(), |p| format!("≥ {p:.1} %")),
                verdict: v.kind.as_str(),
                note: v.note.clone(),
            }
        })
        .collect();
    match sort {
        "benchmark" => {
            rows.sort_by(|a, b| a.benchmark.cmp(&b.benchmark).then(a.metric.cmp(&b.metric)))
        }
        "verdict" => rows.sort_by(|a, b| {
            a.verdict
                .cmp(b.verdict)
                .then(b.change_value.abs().total_cmp(&a.change_value.abs()))
        }),
        _ => rows.sort_by(|a, b| b.change_value.abs().total_cmp(&a.change_value.abs())),
    }
    rows
}
