//! Backfill: measuring the history a repository had before kymo watched it. The commits are
//! the tracked branch's first-parent chain (`--last N`, or `A..B` as git reads it on that
//! chain), thinned by `--every K`, and queued below pushed heads and bisection.

use kymo_core::db::{CommitRecord, JobReason, RepositoryRow};
use kymo_core::model::CommitSha;
use kymo_core::protocol::{BackfillQueued, BackfillRequest};
use kymo_worker::mirror::{CommitInfo, Mirror};

use crate::error::{AppError, AppResult};
use crate::git::{Remote, to_record};
use crate::state::AppState;

/// Most commits one backfill may queue (after thinning).
pub const MAX_BACKFILL: usize = 10_000;

/// Which commits a backfill asked for, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Range {
    /// The last N first-parent commits of `to` (the tracked branch by default).
    Last { count: usize, to: Option<String> },
    /// The first-parent commits after `from`, up to and including `to`.
    Between { from: String, to: Option<String> },
}

/// A checked backfill request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backfill {
    pub range: Range,
    pub every: usize,
}

impl Backfill {
    /// Checks a request: exactly one of `last` and `from`, within limits.
    pub fn from_request(request: &BackfillRequest) -> AppResult<Self> {
        let bad = |msg: &str| Err(AppError::BadRequest(msg.to_owned()));
        let every = request.every.unwrap_or(1) as usize;
        if every == 0 || every > MAX_BACKFILL {
            return bad("`every` is 1 to 10000");
        }
        let to = request.to.clone().filter(|t| !t.trim().is_empty());
        let range = match (request.last, &request.from) {
            (Some(_), Some(_)) => return bad("give `last` or `from`, not both"),
            (None, None) => return bad("give `last` (a count) or `from` (where the range starts)"),
            (Some(0), None) => return bad("`last` is at least 1"),
            (Some(count), None) => Range::Last {
                count: count as usize,
                to,
            },
            (None, Some(from)) if from.trim().is_empty() => return bad("`from` is empty"),
            (None, Some(from)) => Range::Between {
                from: from.clone(),
                to,
            },
        };
        if let Range::Last { count, .. } = range
            && count / every > MAX_BACKFILL
        {
            return bad("at most 10000 commits at once: use `every` to thin the range");
        }
        Ok(Backfill { range, every })
    }
}

/// Keeps every `every`-th commit of a newest-first chain (the newest always), then orders
/// them so that a trend fills in evenly while the queue drains: the newest, the oldest, then
/// the middles of the gaps left, level by level (as bisection would probe them).
pub fn thin_and_order<T: Clone>(newest_first: &[T], every: usize) -> Vec<T> {
    let kept: Vec<&T> = newest_first.iter().step_by(every.max(1)).collect();
    let n = kept.len();
    if n == 0 {
        return Vec::new();
    }
    let mut order = vec![0];
    if n > 1 {
        order.push(n - 1);
    }
    let mut gaps = vec![(0, n - 1)];
    while !gaps.is_empty() {
        let mut next = Vec::new();
        for (low, high) in gaps {
            if high - low < 2 {
                continue;
            }
            let middle = low + (high - low) / 2;
            order.push(middle);
            next.push((low, middle));
            next.push((middle, high));
        }
        gaps = next;
    }
    order.into_iter().map(|i| kept[i].clone()).collect()
}

/// Fetches the repository, then resolves the range on its mirror and queues its commits on
/// every machine, skipping what a machine has measured or is about to; a commit whose jobs
/// on a machine all failed is queued again there.
pub async fn backfill(
    state: &AppState,
    repo: &RepositoryRow,
    backfill: Backfill,
) -> AppResult<BackfillQueued> {
    crate::git::sync_history(state, repo).await?;
    backfill_synced(state, repo, backfill).await
}

/// [`backfill`] of a repository whose mirror was fetched and history recorded just now (a
/// repository being added): no second fetch.
pub async fn backfill_synced(
    state: &AppState,
    repo: &RepositoryRow,
    backfill: Backfill,
) -> AppResult<BackfillQueued> {
    let remote = Remote::of(state, repo).await?;
    let branch = repo.branch.clone();
    let range = backfill.range.clone();
    let chain = tokio::task::spawn_blocking(move || -> AppResult<Vec<CommitInfo>> {
        let mirror = remote.open()?;
        chain_of(&mirror, &branch, &range).map_err(|e| remote.error(e))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    if chain.is_empty() {
        return Err(AppError::BadRequest(
            "the range holds no commits: its start is not older than its end".into(),
        ));
    }
    let chosen = thin_and_order(&chain, backfill.every);
    if chosen.len() > MAX_BACKFILL {
        return Err(AppError::BadRequest(format!(
            "the range holds {} commits; at most {MAX_BACKFILL} at once: use `every` to thin it",
            chosen.len()
        )));
    }
    let mut commits = Vec::with_capacity(chosen.len());
    let mut ids = Vec::with_capacity(chosen.len());
    for info in chosen {
        let record: CommitRecord = to_record(info)?;
        let id = match state.db.commit_id(repo.id, &record.sha).await? {
            Some(id) => id,
            None => state.db.record_commit(repo.id, &record).await?,
        };
        commits.push(record.sha);
        ids.push(id);
    }
    let queued = state
        .db
        .enqueue_commits(repo.id, &ids, JobReason::History, state.leases, state.now())
        .await?;
    tracing::info!(
        repo = repo.name,
        commits = commits.len(),
        jobs = queued.jobs.len(),
        skipped = queued.skipped,
        requeued = queued.requeued,
        "backfill queued"
    );
    Ok(BackfillQueued {
        commits: newest_first(commits, &chain),
        jobs: queued.jobs,
        skipped: queued.skipped,
        requeued: queued.requeued,
    })
}

/// The chosen commits back in history order (newest first), as people read a list.
fn newest_first(mut commits: Vec<CommitSha>, chain: &[CommitInfo]) -> Vec<CommitSha> {
    let rank: std::collections::HashMap<&str, usize> = (chain.iter().enumerate())
        .map(|(i, c)| (c.sha.as_str(), i))
        .collect();
    commits.sort_by_key(|sha| rank.get(sha.as_str()).copied());
    commits
}

/// The first-parent chain a range names, newest first.
fn chain_of(mirror: &Mirror, branch: &str, range: &Range) -> Result<Vec<CommitInfo>, String> {
    let resolve = |spec: &str| mirror.resolve(spec).map_err(|e| e.to_string());
    match range {
        Range::Last { count, to } => {
            let tip = resolve(to.as_deref().unwrap_or(branch))?;
            mirror
                .first_parent_history(&tip, *count)
                .map_err(|e| e.to_string())
        }
        Range::Between { from, to } => {
            let start = resolve(from)?;
            let tip = resolve(to.as_deref().unwrap_or(branch))?;
            let chain = mirror
                .first_parent_history(&tip, crate::git::HISTORY_LIMIT)
                .map_err(|e| e.to_string())?;
            // As git reads A..B: the commits of B's chain that A does not reach. When A is on
            // the chain (the usual case) that is the stretch above it, found without walking
            // the graph once per commit.
            if let Some(end) = chain.iter().position(|info| info.sha == start) {
                return Ok(chain.into_iter().take(end).collect());
            }
            let mut out = Vec::new();
            for info in chain {
                if mirror.is_ancestor(&info.sha, &start) {
                    return Ok(out);
                }
                out.push(info);
            }
            Err(format!(
                "{from:?} is not an ancestor of {:?}: nothing connects the range",
                to.as_deref().unwrap_or(branch)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_the_newest_and_every_kth_commit() {
        let chain: Vec<u32> = (0..10).collect();
        let mut kept = thin_and_order(&chain, 3);
        kept.sort();
        assert_eq!(kept, vec![0, 3, 6, 9]);
        assert_eq!(thin_and_order(&chain, 100), vec![0]);
        assert!(thin_and_order::<u32>(&[], 2).is_empty());
    }

    #[test]
    fn the_order_fills_the_trend_evenly_and_queues_each_commit_once() {
        let chain: Vec<u32> = (0..9).collect();
        let order = thin_and_order(&chain, 1);
        assert_eq!(&order[..3], &[0, 8, 4]);
        assert_eq!(&order[3..5], &[2, 6]);
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, chain);
        assert_eq!(thin_and_order(&[7u32, 8], 1), vec![7, 8]);
    }

    #[test]
    fn requests_need_one_range_within_limits() {
        let ok = |r: BackfillRequest| Backfill::from_request(&r).unwrap();
        let bad = |r: BackfillRequest| Backfill::from_request(&r).unwrap_err().to_string();
        assert_eq!(
            ok(BackfillRequest {
                last: Some(5),
                ..Default::default()
            }),
            Backfill {
                range: Range::Last { count: 5, to: None },
                every: 1
            }
        );
        assert!(bad(BackfillRequest::default()).contains("give `last`"));
        assert!(
            bad(BackfillRequest {
                last: Some(5),
                from: Some("a".into()),
                ..Default::default()
            })
            .contains("not both")
        );
        for every in [0, 10_001] {
            assert!(
                bad(BackfillRequest {
                    last: Some(5),
                    every: Some(every),
                    ..Default::default()
                })
                .contains("every")
            );
        }
        assert!(
            bad(BackfillRequest {
                last: Some(u32::MAX),
                ..Default::default()
            })
            .contains("at most")
        );
        assert!(
            bad(BackfillRequest {
                from: Some("  ".into()),
                ..Default::default()
            })
            .contains("empty")
        );
    }
}
