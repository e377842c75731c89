//! Page handlers and the view models their templates render.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use kymo_core::credentials::redact_secrets;
use kymo_core::db::{HistoryStatus, MachineRow, RegressionFilter, RegressionRow};
use serde::Deserialize;

use super::access::Viewer;
use super::findings::{OpenFindings, RecentChangeView, group_open_regressions, recent_changes};
use super::format::{change, elapsed, summary, utc, value};
use super::summary::{
    LEVEL_COMMITS, SUMMARY_PAGE, SUMMARY_WINDOW, SeriesSummaryView, SummarySort, summarize,
};
use super::{PageResult, RowWindow, is_htmx, render};
use std::collections::HashMap;

use kymo_core::db::CommitRow;
use kymo_core::stats::{Verdict, VerdictKind};

use crate::api::load_commit;
use crate::compare::{Baseline, compare_commits};
use crate::state::AppState;

const HISTORY_PAGE: i64 = 50;

struct RepoView {
    name: String,
    url: String,
    branch: String,
    commits: i64,
    benchmarks: i64,
    last_run: String,
    open_regressions: i64,
}

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    repos: Vec<RepoView>,
}

pub async fn home(State(state): State<AppState>) -> PageResult {
    let repos = state
        .db
        .repository_summaries()
        .await?
        .into_iter()
        .map(|r| RepoView {
            last_run: r.last_run_at.map(utc).unwrap_or_else(|| "never".into()),
            name: r.name,
            url: redact_secrets(&r.url).into_owned(),
            branch: r.branch,
            commits: r.commits,
            benchmarks: r.benchmarks,
            open_regressions: r.open_regressions,
        })
        .collect();
    render(&HomePage { repos })
}

struct HistoryView {
    position: i64,
    sha: String,
    short: String,
    summary: String,
    author: String,
    date: String,
    statuses: Vec<HistoryStatus>,
}

#[derive(Template)]
#[template(path = "repo.html", blocks = ["history_rows"])]
struct RepoPage {
    name: String,
    url: String,
    branch: String,
    history: Vec<HistoryView>,
    next_offset: Option<i64>,
    /// The newest open regressions, and how many are open.
    open: OpenFindings,
    /// The newest change points either way.
    recent_changes: Vec<RecentChangeView>,
    /// Commits at each end of the summary's window whose median is compared.
    level_commits: usize,
    /// One page of the performance summary, its order, and where the next page starts.
    summary: Vec<SeriesSummaryView>,
    summary_rows: RowWindow,
    sort: SummarySort,
    window: i64,
    /// Whether a kymo.toml is kept on the server for commits without one.
    stored_suites: bool,
    /// The logged-in admin's anti-forgery token, for the backfill form.
    csrf: Option<String>,
    /// Open pull requests and the latest comparisons (try runs and pull requests).
    pulls: Vec<super::comparisons::PullItem>,
    comparisons: Vec<super::comparisons::ComparisonItem>,
    /// Series too noisy to see a 10 % change, with the reason.
    too_noisy: Vec<super::too_noisy::TooNoisyView>,
}

#[derive(Debug, Deserialize)]
pub struct Paging {
    offset: Option<i64>,
    /// First row of the performance summary shown.
    from: Option<usize>,
    #[serde(default)]
    sort: SummarySort,
}

pub async fn repository(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(paging): Query<Paging>,
    viewer: Viewer,
    headers: HeaderMap,
) -> PageResult {
    let repo = state.db.repository(&name).await?;
    let offset = paging.offset.unwrap_or(0).max(0);
    let rows = state.db.history(repo.id, HISTORY_PAGE + 1, offset).await?;
    let next_offset = (rows.len() as i64 > HISTORY_PAGE).then_some(offset + HISTORY_PAGE);
    let history = rows
        .into_iter()
        .take(HISTORY_PAGE as usize)
        .map(|c| HistoryView {
            position: c.position,
            short: c.sha[..10].to_owned(),
            sha: c.sha,
            summary: summary(&c.message),
            author: c.author,
            date: utc(c.committed_at),
            statuses: c.statuses,
        })
        .collect();
    // Every active change point, both ways (at most the store's limit): the open regressions
    // and the recent changes are two views of one read.
    let changes = (state.db)
        .regressions(repo.id, &RegressionFilter::default())
        .await?;
    let open: Vec<RegressionRow> = (changes.iter())
        .filter(|r| r.kind == "regression" && r.state == "open")
        .cloned()
        .collect();
    let recent = state.db.recent_values(repo.id, SUMMARY_WINDOW).await?;
    let series = state.db.series(repo.id, None, None, None).await?;
    let too_noisy = super::too_noisy::listed(&state, &name, &series).await?;
    let all = summarize(&name, series, &recent, paging.sort);
    let summary_rows = RowWindow::new(all.len(), paging.from, SUMMARY_PAGE);
    let summary = summary_rows
        .of(all)
        .map(SeriesSummaryView::with_sparkline)
        .collect();
    let (pulls, comparisons) = super::comparisons::listed(&state, repo.id).await?;
    let page = RepoPage {
        too_noisy,
        pulls,
        comparisons,
        open: group_open_regressions(&open),
        recent_changes: recent_changes(&changes),
        level_commits: LEVEL_COMMITS,
        summary,
        summary_rows,
        sort: paging.sort,
        window: SUMMARY_WINDOW,
        stored_suites: state.db.stored_suites(repo.id).await?.is_some(),
        csrf: viewer.csrf(),
        name: repo.name,
        url: redact_secrets(&repo.url).into_owned(),
        branch: repo.branch,
        history,
        next_offset,
    };
    if is_htmx(&headers) {
        return render(&page.as_history_rows());
    }
    render(&page)
}

struct RunView {
    machine: String,
    source: String,
    /// Which kymo.toml ran, and a prefix of its SHA-256.
    config: String,
    kernel: String,
    toolchain: String,
    governor: String,
    hostname: String,
    date: String,
}

struct ResultView {
    benchmark: String,
    metric: String,
    direction: String,
    machine: String,
    parent: String,
    value: String,
    change: String,
    change_class: &'static str,
    samples: usize,
}

#[derive(Template)]
#[template(path = "commit.html")]
struct CommitPage {
    repo: String,
    sha: String,
    short: String,
    message: String,
    author: String,
    date: String,
    parents: Vec<String>,
    position: Option<i64>,
    runs: Vec<RunView>,
    results: Vec<ResultView>,
    shown: RowWindow,
}

/// Results a commit page shows at a time: the rest are a click away, so that the page stays a
/// size a browser can hold however many a run stored.
const COMMIT_PAGE: usize = 200;

/// Which of a commit's results its page shows.
#[derive(Debug, Deserialize)]
pub struct CommitPageQuery {
    from: Option<usize>,
}

pub async fn commit(
    State(state): State<AppState>,
    Path((repo, sha)): Path<(String, String)>,
    Query(query): Query<CommitPageQuery>,
) -> PageResult {
    let detail = load_commit(&state, &repo, &sha, None).await?;
    // The same verdicts as the compare page with the parent, so both show one number.
    let verdicts = parent_verdicts(&state, &repo, &detail.commit).await;
    let runs = detail
        .runs
        .into_iter()
        .map(|r| RunView {
            config: match (r.config_source.as_deref(), r.config_hash.as_deref()) {
                (Some("commit"), Some(hash)) => {
                    format!("its kymo.toml ({})", hash.get(..12).unwrap_or(hash))
                }
                (Some("server"), Some(hash)) => {
                    format!("kept on the server ({})", hash.get(..12).unwrap_or(hash))
                }
                _ => "–".into(),
            },
            machine: r.machine,
            source: r.source,
            kernel: r.kernel,
            toolchain: r.toolchain,
            governor: r.governor,
            hostname: r.hostname,
            date: utc(r.created_at),
        })
        .collect();
    let mut results: Vec<(f64, ResultView)> = detail
        .results
        .into_iter()
        .map(|r| {
            let key = (r.benchmark.clone(), r.metric.clone(), r.machine.clone());
            let verdict = verdicts.get(&key);
            let (parent, this, change_text, change_class, size) = match (verdict, r.parent_value) {
                (Some(v), _) => (
                    value(v.baseline, &r.unit),
                    value(v.value, &r.unit),
                    format!("{:+.1} %", v.change_pct),
                    match v.kind {
                        VerdictKind::Regression => "worse",
                        VerdictKind::Improvement => "better",
                        _ => "",
                    },
                    v.change_pct.abs(),
                ),
                (None, Some(parent)) => {
                    let (text, _) = change(parent, r.value, &r.direction);
                    (
                        value(parent, &r.unit),
                        value(r.value, &r.unit),
                        text,
                        "",
                        0.0,
                    )
                }
                (None, None) => ("–".into(), value(r.value, &r.unit), "–".into(), "", 0.0),
            };
            // A result stored without samples is one value (an instruction count, a figure).
            let samples = r.samples.len().max(1);
            let view = ResultView {
                parent,
                value: this,
                change: change_text,
                change_class,
                samples,
                benchmark: r.benchmark,
                metric: r.metric,
                direction: r.direction,
                machine: r.machine,
            };
            (size, view)
        })
        .collect();
    // The largest changes first.
    results.sort_by(|a, b| b.0.total_cmp(&a.0));
    let shown = RowWindow::new(results.len(), query.from, COMMIT_PAGE);
    let results = shown.of(results).map(|(_, view)| view).collect();
    let c = detail.commit;
    render(&CommitPage {
        repo,
        short: c.sha[..10].to_owned(),
        parents: c.parents.split_whitespace().map(str::to_owned).collect(),
        sha: c.sha,
        message: c.message,
        author: c.author,
        date: utc(c.committed_at),
        position: c.position,
        runs,
        results,
        shown,
    })
}

/// The verdicts of `commit` against its first parent by benchmark, metric and machine; empty
/// when it has no measured parent (the page then shows plain differences).
async fn parent_verdicts(
    state: &AppState,
    repo: &str,
    commit: &CommitRow,
) -> HashMap<(String, String, String), Verdict> {
    if commit.parents.trim().is_empty() {
        return HashMap::new();
    }
    let Ok(repository) = state.db.repository(repo).await else {
        return HashMap::new();
    };
    match compare_commits(state, &repository, &Baseline::Parent, &commit.sha).await {
        Ok(report) => (report.rows.into_iter())
            .map(|r| ((r.benchmark, r.metric, r.machine), r.verdict))
            .collect(),
        Err(_) => HashMap::new(),
    }
}

struct JobView {
    id: i64,
    state: String,
    reason: String,
    /// Waiting or running: it can be cancelled (otherwise retried).
    active: bool,
    repository: String,
    sha: String,
    short: String,
    summary: String,
    machine: String,
    attempts: i64,
    queued: String,
    elapsed: String,
    error: Option<String>,
    /// Why it failed, from its output (shown beside the error, not folded into the log).
    cause: Option<String>,
    log_tail: String,
    /// What a running job is doing.
    phase: Option<String>,
}

#[derive(Template)]
#[template(path = "queue.html", blocks = ["jobs"])]
struct QueuePage {
    jobs: Vec<JobView>,
    /// The logged-in admin's anti-forgery token, for the cancel and retry buttons.
    csrf: Option<String>,
}

pub async fn queue(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
) -> PageResult {
    let now = state.now();
    let jobs = state
        .db
        .jobs(200)
        .await?
        .into_iter()
        .map(|j| JobView {
            elapsed: match (j.started_at, j.finished_at, j.state.as_str()) {
                (Some(start), _, "running") => elapsed(now - start),
                (Some(start), Some(end), _) => elapsed(end - start),
                _ => "–".into(),
            },
            id: j.id,
            active: j.state == "queued" || j.state == "running",
            state: j.state,
            reason: j.reason,
            repository: j.repository,
            short: j.sha[..10].to_owned(),
            sha: j.sha,
            summary: summary(&j.message),
            machine: j.machine.unwrap_or_else(|| "any".into()),
            attempts: j.attempts,
            queued: utc(j.created_at),
            error: j.error,
            cause: j.cause,
            log_tail: j.log_tail.unwrap_or_default(),
            phase: j.phase,
        })
        .collect();
    let page = QueuePage {
        jobs,
        csrf: viewer.csrf(),
    };
    if is_htmx(&headers) {
        return render(&page.as_jobs());
    }
    render(&page)
}

struct MachineView {
    fingerprint: String,
    name: String,
    cpu_model: String,
    logical_cores: i64,
    physical_cores: i64,
    memory_gib: i64,
    arch: String,
    virtualization: String,
    last_seen: String,
    labels: String,
    current_job: Option<i64>,
}

impl From<MachineRow> for MachineView {
    fn from(m: MachineRow) -> Self {
        MachineView {
            last_seen: utc(m.last_seen_at),
            labels: m.labels,
            fingerprint: m.fingerprint,
            name: m.name,
            cpu_model: m.cpu_model,
            logical_cores: m.logical_cores,
            physical_cores: m.physical_cores,
            memory_gib: m.memory_gib,
            arch: m.arch,
            virtualization: m.virtualization,
            current_job: m.current_job,
        }
    }
}

#[derive(Template)]
#[template(path = "machines.html")]
struct MachinesPage {
    machines: Vec<MachineView>,
}

pub async fn machines(State(state): State<AppState>) -> PageResult {
    let machines = state
        .db
        .machines()
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    render(&MachinesPage { machines })
}
