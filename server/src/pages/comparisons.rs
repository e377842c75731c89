//! Comparison runs on the dashboard: the list of open pull requests and try runs on the
//! repository page, and one comparison's page (its state, then its compare table).

use askama::Template;
use axum::extract::{Path, State};
use kymo_core::db::{ComparisonRow, PullRequestRow};

use super::format::utc;
use super::verdicts::{CompareRowView, compare_rows, geomean};
use super::{PageError, PageResult, render};
use crate::interleaved::comparison_view;
use crate::state::AppState;

/// Try runs and pull requests the repository page lists.
const LISTED: i64 = 20;

/// A try run or pull request in the repository page's list.
pub(super) struct ComparisonItem {
    pub id: i64,
    pub origin: String,
    pub label: String,
    pub state: String,
    pub date: String,
}

/// An open pull request in the repository page's list.
pub(super) struct PullItem {
    pub number: i64,
    pub title: String,
    pub author: String,
    pub comparison: Option<i64>,
    pub state: String,
}

/// The repository page's open pull requests and latest comparisons (try runs included).
pub(super) async fn listed(
    state: &AppState,
    repository_id: i64,
) -> Result<(Vec<PullItem>, Vec<ComparisonItem>), PageError> {
    let pulls = (state.db.pull_requests(repository_id, LISTED).await?)
        .into_iter()
        .filter(|p| p.state == "open")
        .map(|p: PullRequestRow| PullItem {
            number: p.number,
            title: p.title,
            author: p.author,
            comparison: p.comparison,
            state: p.comparison_state.unwrap_or_else(|| "not measured".into()),
        })
        .collect();
    let comparisons = (state.db.comparisons(repository_id, LISTED).await?)
        .into_iter()
        .map(|c: ComparisonRow| ComparisonItem {
            id: c.id,
            origin: c.origin,
            label: c.label,
            state: c.state,
            date: utc(c.created_at),
        })
        .collect();
    Ok((pulls, comparisons))
}

#[derive(Template)]
#[template(path = "comparison.html")]
struct ComparisonPage {
    repo: String,
    c: ComparisonRow,
    rounds_run: usize,
    measured: bool,
    rows: Vec<CompareRowView>,
    regressed: usize,
    improved: usize,
    unchanged: usize,
    inconclusive: usize,
    geomean: String,
}

/// `/repos/{repo}/comparisons/{id}`: a try run's or pull request's comparison.
pub async fn comparison(
    State(state): State<AppState>,
    Path((repo_name, id)): Path<(String, i64)>,
) -> PageResult {
    let repo = state.db.repository(&repo_name).await?;
    let row = state.db.comparison(repo.id, id).await?;
    let view = comparison_view(&state, &repo, row).await?;
    let (rows, counts, mean) = match &view.report {
        Some(report) => (
            compare_rows(report, false, "change"),
            (
                report.regressed,
                report.improved,
                report.unchanged,
                report.inconclusive,
            ),
            geomean(report),
        ),
        None => (Vec::new(), (0, 0, 0, 0), "–".to_owned()),
    };
    render(&ComparisonPage {
        repo: repo.name,
        measured: view.report.is_some(),
        rounds_run: view.rounds_run,
        c: view.comparison,
        rows,
        regressed: counts.0,
        improved: counts.1,
        unchanged: counts.2,
        inconclusive: counts.3,
        geomean: mean,
    })
}
