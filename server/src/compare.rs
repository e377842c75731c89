//! Comparing two commits: every benchmark × metric × machine they share, judged by the
//! per-commit test against the series' noise.

use std::collections::HashMap;

use kymo_core::db::{CommitMeasurementRow, RepositoryRow};
use kymo_core::model::Direction;
use kymo_core::stats::{
    NOISE_HISTORY, NoiseModel, Sensitivity, Verdict, VerdictKind, compare, noise_of_values,
};
use serde::Serialize;

use crate::error::{AppError, AppResult};
use crate::export::{csv_field, csv_line};
use crate::git;
use crate::state::AppState;

/// One row of a comparison.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CompareRow {
    pub benchmark: String,
    pub metric: String,
    pub unit: String,
    pub direction: String,
    pub machine: String,
    pub verdict: Verdict,
}

/// A whole comparison with its summary.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CompareReport {
    pub repository: String,
    pub base: String,
    pub head: String,
    /// How the base was chosen: `parent`, `commit`, or `merge-base of BRANCH`.
    pub baseline: String,
    pub rows: Vec<CompareRow>,
    pub regressed: usize,
    pub improved: usize,
    /// Rows whose verdict is `no_change`.
    pub unchanged: usize,
    /// Rows the data could not decide (no history yet, or a large change that is not
    /// significant): counted apart from `unchanged`, because nobody knows they did not change.
    pub inconclusive: usize,
    /// Geometric mean over rows with positive values on both sides of head/base for
    /// lower-is-better metrics and base/head for higher-is-better ones: above 1 is worse, so
    /// a slowdown and the matching fall in throughput add up instead of cancelling.
    pub geomean_ratio: Option<f64>,
}

/// What the base of a comparison is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    Parent,
    Commit(String),
    MergeBase(String),
}

impl Baseline {
    /// `parent` (or nothing), `merge-base:BRANCH`, or a commit, branch or tag name.
    pub fn parse(spec: Option<&str>) -> Self {
        match spec.map(str::trim) {
            None | Some("") | Some("parent") => Baseline::Parent,
            Some(s) => match s.strip_prefix("merge-base:") {
                Some(branch) => Baseline::MergeBase(branch.to_owned()),
                None => Baseline::Commit(s.to_owned()),
            },
        }
    }
}

/// Compares `head` with its baseline in `repo`.
pub async fn compare_commits(
    state: &AppState,
    repo: &RepositoryRow,
    baseline: &Baseline,
    head: &str,
) -> AppResult<CompareReport> {
    let head = find_commit(state, repo, head).await?;
    let (base, label) = match baseline {
        Baseline::Parent => {
            let parent = head
                .parents
                .split_whitespace()
                .next()
                .ok_or_else(|| AppError::BadRequest(format!("commit {} has no parent", head.sha)))?
                .to_owned();
            (
                find_commit(state, repo, &parent).await?,
                "parent".to_owned(),
            )
        }
        Baseline::Commit(spec) => (find_commit(state, repo, spec).await?, "commit".to_owned()),
        Baseline::MergeBase(branch) => {
            let sha = git::merge_base(state, repo, &head.sha, branch).await?;
            (
                find_commit(state, repo, &sha).await?,
                format!("merge-base of {branch}"),
            )
        }
    };
    let base_rows = state.db.commit_measurements(base.id, None).await?;
    let head_rows = state.db.commit_measurements(head.id, None).await?;
    let by_series: HashMap<i64, &CommitMeasurementRow> =
        base_rows.iter().map(|r| (r.series_id, r)).collect();
    let shared: Vec<i64> = (head_rows.iter())
        .filter(|h| by_series.contains_key(&h.series_id))
        .map(|h| h.series_id)
        .collect();
    let noise = noise_models(state, repo.id, head.position, &shared).await?;
    let sensitivity = Sensitivity::default();
    let mut rows = Vec::new();
    for h in &head_rows {
        let Some(b) = by_series.get(&h.series_id) else {
            continue;
        };
        let direction = Direction::parse(&h.direction).unwrap_or(Direction::Lower);
        let noise = noise.get(&h.series_id).copied().unwrap_or_default();
        let verdict = compare(
            &samples_or_value(b),
            &samples_or_value(h),
            direction,
            &noise,
            &sensitivity,
        );
        rows.push(CompareRow {
            benchmark: h.benchmark.clone(),
            metric: h.metric.clone(),
            unit: h.unit.clone(),
            direction: h.direction.clone(),
            machine: h.machine.clone(),
            verdict,
        });
    }
    Ok(summarise(repo, base.sha, head.sha, label, rows))
}

/// The noise model of each of `series` at a head at position `head` (`None`: off the tracked
/// branch): measured over the last NOISE_HISTORY values before the head (all of history
/// when the head is not on the tracked branch). The verdict uses the noise between commits,
/// which comes from the values alone, so the samples of history are never read.
///
/// The analysis stores the models of the windows a head at a series' newest commit (or off
/// the branch) measures; only series without one that holds for this head, an older head
/// for instance, read their history.
pub(crate) async fn noise_models(
    state: &AppState,
    repository_id: i64,
    head: Option<i64>,
    series: &[i64],
) -> AppResult<HashMap<i64, NoiseModel>> {
    let mut models: HashMap<i64, NoiseModel> = (state.db.noise_windows(series).await?)
        .into_iter()
        .filter(|(_, window)| window.holds_for(head))
        .map(|(id, window)| (id, window.model))
        .collect();
    let unknown: Vec<i64> = (series.iter())
        .copied()
        .filter(|id| !models.contains_key(id))
        .collect();
    if unknown.is_empty() {
        return Ok(models);
    }
    let recent = recent_history(state, repository_id, head, &unknown).await?;
    // Positions count from 0: a window reaching below it holds all of the head's history.
    let whole_history = head.is_some_and(|p| p <= NOISE_HISTORY as i64);
    for id in unknown {
        let history = match recent.get(&id) {
            Some(values) if values.len() == NOISE_HISTORY || whole_history => values.clone(),
            None if whole_history => Vec::new(),
            // A gap in the window (or no window): read this series' history on its own.
            _ => {
                (state.db)
                    .series_values_before(id, head, NOISE_HISTORY as i64)
                    .await?
            }
        };
        models.insert(id, noise_of_values(&history));
    }
    Ok(models)
}

/// The values of the NOISE_HISTORY positions before `head` for every one of `ids`, in
/// one query. A series measured at each of those commits has exactly its last NOISE_HISTORY
/// points here; one with gaps has fewer and is read again on its own by the caller.
async fn recent_history(
    state: &AppState,
    repository_id: i64,
    head: Option<i64>,
    ids: &[i64],
) -> AppResult<HashMap<i64, Vec<(i64, f64)>>> {
    let mut by_series: HashMap<i64, Vec<(i64, f64)>> = HashMap::new();
    let Some(head) = head else {
        return Ok(by_series);
    };
    let from = head - NOISE_HISTORY as i64;
    let values = (state.db)
        .series_values_between(repository_id, ids, from, head)
        .await?;
    for (series, position, value) in values {
        by_series.entry(series).or_default().push((position, value));
    }
    Ok(by_series)
}

fn samples_or_value(row: &CommitMeasurementRow) -> Vec<f64> {
    row.samples.clone().or_value(row.value)
}

/// Counts and the geometric mean of ratios; pure, so it is tested on its own.
pub fn summarise(
    repo: &RepositoryRow,
    base: String,
    head: String,
    baseline: String,
    rows: Vec<CompareRow>,
) -> CompareReport {
    let count = |kind| rows.iter().filter(|r| r.verdict.kind == kind).count();
    let ratios: Vec<f64> = rows
        .iter()
        .filter(|r| r.verdict.baseline > 0.0 && r.verdict.value > 0.0)
        .map(|r| {
            let ratio = (r.verdict.value / r.verdict.baseline).ln();
            match Direction::parse(&r.direction) {
                Some(Direction::Higher) => -ratio,
                _ => ratio,
            }
        })
        .collect();
    let geomean_ratio =
        (!ratios.is_empty()).then(|| (ratios.iter().sum::<f64>() / ratios.len() as f64).exp());
    CompareReport {
        repository: repo.name.clone(),
        regressed: count(VerdictKind::Regression),
        improved: count(VerdictKind::Improvement),
        unchanged: count(VerdictKind::NoChange),
        inconclusive: count(VerdictKind::Inconclusive),
        base,
        head,
        baseline,
        rows,
        geomean_ratio,
    }
}

async fn find_commit(
    state: &AppState,
    repo: &RepositoryRow,
    spec: &str,
) -> AppResult<kymo_core::db::CommitRow> {
    // A read: the database, and names through the mirror as it is, never a fetch.
    git::recorded_commit(state, repo, spec).await
}

/// Renders a report as CSV, one row per benchmark × metric × machine.
pub fn to_csv(report: &CompareReport) -> String {
    let mut out = String::from(
        "benchmark,metric,machine,unit,direction,base,head,change_pct,ci_low_pct,ci_high_pct,p_value,verdict\n",
    );
    for r in &report.rows {
        let v = &r.verdict;
        let fields = [
            csv_field(&r.benchmark),
            csv_field(&r.metric),
            csv_field(&r.machine),
            csv_field(&r.unit),
            csv_field(&r.direction),
            v.baseline.to_string(),
            v.value.to_string(),
            format!("{:.4}", v.change_pct),
            format!("{:.4}", v.ci_low_pct),
            format!("{:.4}", v.ci_high_pct),
            v.p_value.map(|p| p.to_string()).unwrap_or_default(),
            v.kind.as_str().to_owned(),
        ];
        out.push_str(&csv_line(&fields));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        metric: &str,
        direction: Direction,
        base: f64,
        head: f64,
        kind: VerdictKind,
    ) -> CompareRow {
        let mut verdict = compare(
            &[base],
            &[head],
            direction,
            &NoiseModel::unknown(),
            &Sensitivity::default(),
        );
        verdict.kind = kind;
        CompareRow {
            benchmark: "encode/hex".into(),
            metric: metric.into(),
            unit: String::new(),
            direction: direction.as_str().into(),
            machine: "m".into(),
            verdict,
        }
    }

    #[test]
    fn the_summary_counts_each_kind_apart_and_a_slowdown_does_not_cancel_out() {
        let repo = RepositoryRow {
            id: 1,
            name: "r".into(),
            url: String::new(),
            branch: "main".into(),
            created_at: 0,
            poll_seconds: None,
            machine_labels: String::new(),
        };
        // A 2.4× slowdown seen as time and as throughput, one unchanged row, one undecided.
        let rows = vec![
            row(
                "time",
                Direction::Lower,
                100.0,
                240.0,
                VerdictKind::Regression,
            ),
            row(
                "throughput",
                Direction::Higher,
                10.0,
                10.0 / 2.4,
                VerdictKind::Regression,
            ),
            row("time2", Direction::Lower, 50.0, 50.0, VerdictKind::NoChange),
            row(
                "time3",
                Direction::Lower,
                50.0,
                80.0,
                VerdictKind::Inconclusive,
            ),
        ];
        let report = summarise(&repo, "a".into(), "b".into(), "parent".into(), rows);
        assert_eq!(
            (
                report.regressed,
                report.improved,
                report.unchanged,
                report.inconclusive
            ),
            (2, 0, 1, 1)
        );
        let expected = (2.4f64 * 2.4 * 1.0 * 1.6).powf(0.25);
        assert!(
            (report.geomean_ratio.unwrap() - expected).abs() < 1e-9,
            "{report:?}"
        );
    }

    #[test]
    fn baselines_parse_from_their_spelling() {
        assert_eq!(Baseline::parse(None), Baseline::Parent);
        assert_eq!(Baseline::parse(Some("parent")), Baseline::Parent);
        assert_eq!(
            Baseline::parse(Some("v1.0")),
            Baseline::Commit("v1.0".into())
        );
        assert_eq!(
            Baseline::parse(Some("merge-base:main")),
            Baseline::MergeBase("main".into())
        );
    }
}
