//! Pull requests measured in CI (`kymo upload --pull-request N`): teams without benchmark
//! machines run their benchmarks in CI and upload the head's results. The head need not be in
//! the server's mirror (CI checked it out; it may live in a fork): it is recorded as a pull
//! request's head and never fetched. Its results are compared with the base's, uploaded by
//! the same job (measured on the same runner), or stored already from the same machine
//! fingerprint (the base branch measured in CI on every push), and the pull request gets the
//! same status and single comment as one measured by kymo's own workers.
//!
//! The verdict is the compare page's per-commit test, against the noise of the history that
//! runner's fingerprint has stored: one CI run of each side cannot show on its own how much
//! two runs of the same code differ.

use std::collections::{BTreeMap, HashMap};

use axum::http::StatusCode;
use kymo_core::db::{
    CommitRecord, ComparisonOrigin, ComparisonRow, MeasuredBy, NewComparison, PullRequestRecord,
    RepositoryRow, UploadedComparison,
};
use kymo_core::model::{CommitSha, Direction, MachineFingerprint};
use kymo_core::protocol::{ComparedRound, SuiteUpload};
use kymo_core::pull_upload::{PullUploadAccepted, PullUploadRequest};
use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};
use kymo_core::stats::{NoiseModel, Sensitivity, compare};
use kymo_core::webhook::Provider;

use crate::compare::CompareRow;
use crate::error::{AppError, AppResult};
use crate::git;
use crate::state::AppState;

/// How many first-parent commits before the base may stand for it when the base itself was
/// not measured on the uploader's machine: beyond, the comparison would mostly measure what
/// the base branch changed meanwhile.
pub const MAX_COMMITS_BEFORE_BASE: i64 = 20;

/// Stores a pull request's results uploaded from CI and lets its feedback fall due. Returns
/// 201 with the comparison, or 200 with the one an upload with the same key stored.
pub async fn store_upload(
    state: &AppState,
    repo: &RepositoryRow,
    number: i64,
    request: PullUploadRequest,
    key: Option<&str>,
) -> AppResult<(StatusCode, PullUploadAccepted)> {
    let checked = request.checked(number).map_err(AppError::BadRequest)?;
    if let Some(key) = key
        && let Some((comparison, number)) = state.db.uploaded_comparison(repo.id, key).await?
    {
        let row = state.db.comparison(repo.id, comparison).await?;
        return Ok((StatusCode::OK, accepted(state, repo, number, &row)?));
    }
    let (machine_id, machine) = crate::api::uploading_machine(
        state,
        &request.machine,
        &request.specs,
        &request.environment,
    )
    .await?;
    let provider = match checked.provider {
        Some(provider) => provider,
        None => repository_forge(state, repo).await?,
    };
    let branch = checked.base_branch.as_deref().unwrap_or(&repo.branch);
    let (base, measured, base_suites) =
        base_results(state, repo, &request, branch, (machine_id, &machine)).await?;
    let head_id = (state.db)
        .record_pull_head(
            repo.id,
            &CommitRecord {
                sha: request.head.clone(),
                parents: Vec::new(),
                author: checked.author.clone(),
                time: state.now(),
                message: checked.title.clone(),
            },
        )
        .await?;
    let round = [ComparedRound {
        base: base_suites,
        head: request.suites,
    }];
    let results = serde_json::to_string(&round).map_err(|e| AppError::Internal(e.into()))?;
    let label = format!("#{number} {}", checked.title);
    let comparison = (state.db)
        .store_pull_upload(
            &PullRequestRecord {
                repository_id: repo.id,
                provider: provider.as_str(),
                number,
                title: &checked.title,
                author: &checked.author,
                head_sha: request.head.as_str(),
            },
            &NewComparison {
                repository_id: repo.id,
                origin: ComparisonOrigin::Pull,
                label: label.trim(),
                base_id: base.id,
                head_id,
                baseline: &base.baseline,
                rounds: 1,
                head_ref: None,
            },
            &UploadedComparison {
                results: &results,
                machine_id,
                measured,
                upload_key: key,
            },
            state.now(),
        )
        .await?;
    tracing::info!(
        repo = repo.name,
        number,
        comparison,
        measured = measured.as_str(),
        "pull request results uploaded from CI"
    );
    let row = state.db.comparison(repo.id, comparison).await?;
    Ok((StatusCode::CREATED, accepted(state, repo, number, &row)?))
}

fn accepted(
    state: &AppState,
    repo: &RepositoryRow,
    number: i64,
    row: &ComparisonRow,
) -> AppResult<PullUploadAccepted> {
    let internal = |e: kymo_core::model::IdError| AppError::Internal(e.into());
    Ok(PullUploadAccepted {
        pull_request: number,
        comparison: row.id,
        base: CommitSha::parse(&row.base).map_err(internal)?,
        baseline: row.baseline.clone(),
        machine: MachineFingerprint::parse(row.machine.as_deref().unwrap_or_default())
            .map_err(internal)?,
        url: format!(
            "{}/repos/{}/comparisons/{}",
            state.public_url, repo.name, row.id
        ),
    })
}

/// The forge of the repository's commit statuses (where the feedback goes), GitHub when none
/// is set: the upload did not say.
async fn repository_forge(state: &AppState, repo: &RepositoryRow) -> AppResult<Provider> {
    let target = state.db.commit_status_target(repo.id).await?;
    Ok(target
        .and_then(|t| Provider::parse(&t.kind))
        .unwrap_or(Provider::GitHub))
}

/// The commit a head is compared with, and how it was chosen.
struct Base {
    id: i64,
    baseline: String,
}

/// The base's results: those the same job uploaded, or the base's stored results from this
/// machine (of the nearest commit before it this machine measured, within
/// [`MAX_COMMITS_BEFORE_BASE`]).
async fn base_results(
    state: &AppState,
    repo: &RepositoryRow,
    request: &PullUploadRequest,
    branch: &str,
    (machine_id, machine): (i64, &MachineFingerprint),
) -> AppResult<(Base, MeasuredBy, Vec<SuiteUpload>)> {
    // The base is in the repository (unlike the head): fetched if the mirror is behind.
    let (asked, what) = match &request.merge_base {
        Some(sha) => (sha.as_str(), format!("merge base with {branch}")),
        None => (branch, format!("head of {branch}")),
    };
    let (sha, id) = match request.merge_base.as_ref() {
        Some(sha) => match state.db.commit_id(repo.id, sha).await? {
            Some(id) => (sha.clone(), id),
            None => git::resolve_commit(state, repo, Some(asked)).await?,
        },
        None => git::resolve_commit(state, repo, Some(asked)).await?,
    };
    if let Some(suites) = &request.base_suites {
        let baseline = format!("{what} {}, measured in the same CI job", sha.short());
        return Ok((Base { id, baseline }, MeasuredBy::SameJob, suites.clone()));
    }
    let found = (state.db)
        .measured_base(repo.id, id, machine_id, MAX_COMMITS_BEFORE_BASE)
        .await?;
    let no_results = || {
        AppError::BadRequest(format!(
            "no results of {} (the {what}) or of the {MAX_COMMITS_BEFORE_BASE} commits before \
             it are stored from machine {machine}: upload the base branch's results from CI \
             on every push (`kymo upload --commit SHA`), or measure the base in the same job \
             and send it with `--base-results DIR`",
            sha.short()
        ))
    };
    let found = found.ok_or_else(no_results)?;
    let suites = stored_suites(state, found.commit_id, machine).await?;
    if suites.is_empty() {
        return Err(no_results());
    }
    let stored = CommitSha::parse(&found.sha).map_err(|e| AppError::Internal(e.into()))?;
    let baseline = match found.commits_before {
        0 => format!("{what} {}, results stored from this machine", sha.short()),
        n => format!(
            "{what} {}: results of {}, {n} commit(s) before it, the nearest stored from this \
             machine",
            sha.short(),
            stored.short()
        ),
    };
    let base = Base {
        id: found.commit_id,
        baseline,
    };
    Ok((base, MeasuredBy::StoredBase, suites))
}

/// A commit's stored results from one machine, as an upload would send them: one suite, each
/// benchmark under its stored name (its parameters written into it).
async fn stored_suites(
    state: &AppState,
    commit_id: i64,
    machine: &MachineFingerprint,
) -> AppResult<Vec<SuiteUpload>> {
    let rows = state.db.commit_measurements(commit_id, None).await?;
    let mut benchmarks: BTreeMap<String, Vec<MetricResult>> = BTreeMap::new();
    for row in rows.into_iter().filter(|r| r.machine == machine.as_str()) {
        benchmarks
            .entry(row.benchmark)
            .or_default()
            .push(MetricResult {
                name: row.metric,
                unit: row.unit,
                direction: Direction::parse(&row.direction).unwrap_or(Direction::Lower),
                value: row.value,
                samples: row.samples.clone().or_value(row.value),
                hdr: None,
            });
    }
    if benchmarks.is_empty() {
        return Ok(Vec::new());
    }
    let benchmarks = benchmarks
        .into_iter()
        .map(|(name, metrics)| BenchmarkResult {
            name,
            params: Default::default(),
            metrics,
        })
        .collect();
    Ok(vec![SuiteUpload {
        suite: "stored".into(),
        results: SuiteResults { benchmarks },
    }])
}

/// One benchmark × metric both sides of an uploaded comparison measured.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredPair {
    pub benchmark: String,
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
    pub base: Vec<f64>,
    pub head: Vec<f64>,
}

/// Pairs what both sides measured, by benchmark (with its parameters) and metric. Pure.
pub fn measured_pairs(round: &ComparedRound) -> Vec<MeasuredPair> {
    let values = |m: &MetricResult| {
        if m.samples.is_empty() {
            vec![m.value]
        } else {
            m.samples.clone()
        }
    };
    let mut base: HashMap<(String, String), Vec<f64>> = HashMap::new();
    for bench in round.base.iter().flat_map(|s| &s.results.benchmarks) {
        for metric in &bench.metrics {
            base.insert((bench.key(), metric.name.clone()), values(metric));
        }
    }
    let mut pairs = Vec::new();
    for bench in round.head.iter().flat_map(|s| &s.results.benchmarks) {
        for metric in &bench.metrics {
            let key = (bench.key(), metric.name.clone());
            if let Some(base) = base.get(&key) {
                pairs.push(MeasuredPair {
                    benchmark: key.0,
                    metric: key.1,
                    unit: metric.unit.clone(),
                    direction: metric.direction,
                    base: base.clone(),
                    head: values(metric),
                });
            }
        }
    }
    pairs.sort_by(|a, b| (&a.benchmark, &a.metric).cmp(&(&b.benchmark, &b.metric)));
    pairs
}

/// Judges each pair by the per-commit test against its series' noise on `machine` (unknown
/// without a history: then no change is called from one run of each side). Pure.
pub fn judge_pairs(
    pairs: Vec<MeasuredPair>,
    noise: &HashMap<(String, String), NoiseModel>,
    machine: &str,
) -> Vec<CompareRow> {
    let sensitivity = Sensitivity::default();
    pairs
        .into_iter()
        .map(|pair| {
            let model = (noise.get(&(pair.benchmark.clone(), pair.metric.clone())))
                .copied()
                .unwrap_or_else(NoiseModel::unknown);
            let verdict = compare(&pair.base, &pair.head, pair.direction, &model, &sensitivity);
            CompareRow {
                benchmark: pair.benchmark,
                metric: pair.metric,
                unit: pair.unit,
                direction: pair.direction.as_str().to_owned(),
                machine: machine.to_owned(),
                verdict,
            }
        })
        .collect()
}

/// The rows of an uploaded comparison: its pairs judged against the noise of the history
/// its machine stored, up to its base.
pub async fn judge_uploaded(
    state: &AppState,
    repo: &RepositoryRow,
    comparison: &ComparisonRow,
    round: &ComparedRound,
) -> AppResult<Vec<CompareRow>> {
    let machine = comparison.machine.clone().unwrap_or_default();
    let pairs = measured_pairs(round);
    let series = (state.db)
        .series(repo.id, None, None, Some(machine.as_str()))
        .await?;
    let wanted: HashMap<(String, String), i64> = series
        .into_iter()
        .map(|s| ((s.benchmark, s.metric), s.id))
        .filter(|(key, _)| {
            pairs
                .iter()
                .any(|p| (&p.benchmark, &p.metric) == (&key.0, &key.1))
        })
        .collect();
    let ids: Vec<i64> = wanted.values().copied().collect();
    let base_position = state.db.commit(repo.id, &comparison.base).await?.position;
    let models =
        crate::compare::noise_models(state, repo.id, base_position.map(|p| p + 1), &ids).await?;
    let noise = wanted
        .into_iter()
        .filter_map(|(key, id)| models.get(&id).map(|model| (key, *model)))
        .collect();
    Ok(judge_pairs(pairs, &noise, &machine))
}

#[cfg(test)]
mod tests {
    use kymo_core::stats::{VerdictKind, noise_of_values};

    use super::*;

    fn side(benchmarks: &[(&str, &str, f64)]) -> Vec<SuiteUpload> {
        let benchmarks = benchmarks
            .iter()
            .map(|(name, size, level)| BenchmarkResult {
                name: (*name).into(),
                params: [("size".to_owned(), (*size).to_owned())].into(),
                metrics: vec![MetricResult {
                    name: "time".into(),
                    unit: "ns".into(),
                    direction: Direction::Lower,
                    value: *level,
                    samples: [0.99, 1.0, 1.01, 1.005, 0.995].map(|w| level * w).to_vec(),
                    hdr: None,
                }],
            })
            .collect();
        vec![SuiteUpload {
            suite: "s".into(),
            results: SuiteResults { benchmarks },
        }]
    }

    /// A history of 30 commits at 100 with 1 % noise.
    fn history() -> NoiseModel {
        let values: Vec<(i64, f64)> = (0..30)
            .map(|i| (i, 100.0 * (1.0 + ((i * 7) % 5) as f64 / 200.0 - 0.01)))
            .collect();
        noise_of_values(&values)
    }

    #[test]
    fn pairs_are_what_both_sides_measured_by_name_and_parameters() {
        let round = ComparedRound {
            base: side(&[("parse", "16", 100.0), ("gone", "16", 5.0)]),
            head: side(&[
                ("parse", "16", 130.0),
                ("new", "16", 5.0),
                ("parse", "32", 1.0),
            ]),
        };
        let pairs = measured_pairs(&round);
        assert_eq!(pairs.len(), 1, "{pairs:?}");
        assert_eq!(pairs[0].benchmark, "parse{size=16}");
        assert_eq!(pairs[0].head.len(), 5);
    }

    #[test]
    fn a_thirty_percent_slower_head_regresses_against_a_runners_history_and_a_fix_does_not() {
        let noise: HashMap<_, _> =
            [(("parse{size=16}".to_owned(), "time".to_owned()), history())].into();
        let judge = |head: f64| {
            let round = ComparedRound {
                base: side(&[("parse", "16", 100.0)]),
                head: side(&[("parse", "16", head)]),
            };
            judge_pairs(measured_pairs(&round), &noise, "m")[0]
                .verdict
                .kind
        };
        assert_eq!(judge(130.0), VerdictKind::Regression);
        assert_eq!(judge(100.2), VerdictKind::NoChange);
        assert_eq!(judge(70.0), VerdictKind::Improvement);
    }

    #[test]
    fn without_a_history_of_the_runner_one_run_of_each_side_calls_no_change() {
        let round = ComparedRound {
            base: side(&[("parse", "16", 100.0)]),
            head: side(&[("parse", "16", 130.0)]),
        };
        let rows = judge_pairs(measured_pairs(&round), &HashMap::new(), "m");
        assert_eq!(rows[0].verdict.kind, VerdictKind::Inconclusive);
        assert!(
            rows[0].verdict.note.contains("no history"),
            "{:?}",
            rows[0].verdict
        );
    }
}
