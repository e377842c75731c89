//! What a push sets in motion, whether a webhook or a poll noticed it: fetch the repository,
//! record the tracked branch's new commits, and queue them, the new head first.

use std::time::Duration;

use kymo_core::db::{JobReason, RepositoryRow};
use kymo_core::model::CommitSha;
use serde::Serialize;

use crate::error::AppResult;
use crate::git;
use crate::state::AppState;

/// The most commits of one push that are queued; older ones are left to bisection.
const MAX_BACKFILL: usize = 200;

/// Pushes are processed one at a time: each one's new commits are those past the head the
/// previous one recorded.
static PUSHES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What a push added and queued.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PushOutcome {
    pub head: Option<String>,
    pub new_commits: usize,
    pub jobs: Vec<i64>,
}

impl PushOutcome {
    pub fn summary(&self) -> String {
        match &self.head {
            Some(head) if self.new_commits > 0 => format!(
                "{} new commit(s) up to {}, {} job(s) queued",
                self.new_commits,
                &head[..12.min(head.len())],
                self.jobs.len()
            ),
            _ => "no new commits on the tracked branch".into(),
        }
    }
}

/// Fetches `repo` and queues the commits its tracked branch gained since the last push
/// (or since `before`, the head the host says the branch had). A repository seen for the
/// first time queues its head only.
pub async fn process_push(
    state: &AppState,
    repo: &RepositoryRow,
    before: Option<&CommitSha>,
) -> AppResult<PushOutcome> {
    let _one_at_a_time = PUSHES.lock().await;
    let known_head = state.db.chain_head(repo.id).await?;
    let before_id = match before {
        Some(sha) => state.db.commit_id(repo.id, sha).await?,
        None => None,
    };
    git::sync_history(state, repo).await?;
    let Some(head) = state.db.chain_head(repo.id).await? else {
        return Ok(PushOutcome::default());
    };
    // Where the new commits start: the head before the push, if it is still on the chain
    // (a force-push may have dropped it).
    let mut from = None;
    for id in [before_id, known_head.map(|h| h.id)].into_iter().flatten() {
        if let Some(position) = state.db.chain_position(id).await? {
            from = Some(from.map_or(position, |f: i64| f.max(position)));
        }
    }
    let new = match from {
        Some(from) if from >= head.position => Vec::new(),
        Some(from) => state.db.chain_between(repo.id, from, head.position).await?,
        None => vec![head.clone()],
    };
    let now = state.now();
    let mut jobs = Vec::new();
    if !new.is_empty() {
        jobs.extend(
            state
                .db
                .enqueue_commit(repo.id, head.id, JobReason::Head, state.leases, now)
                .await?,
        );
        for commit in new.iter().rev().skip(1).take(MAX_BACKFILL) {
            jobs.extend(
                state
                    .db
                    .enqueue_commit(repo.id, commit.id, JobReason::Backfill, state.leases, now)
                    .await?,
            );
        }
    }
    for commit in &new {
        crate::alerts::commit_status_changed(state, commit.id).await?;
    }
    let outcome = PushOutcome {
        head: Some(head.sha),
        new_commits: new.len(),
        jobs,
    };
    tracing::info!(
        repo = repo.name,
        outcome = outcome.summary(),
        "push processed"
    );
    Ok(outcome)
}

/// Polls, every few seconds, the repositories whose hosts cannot send webhooks and whose
/// interval has passed.
pub async fn poll_repositories(state: AppState) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tick.tick().await;
        if let Err(err) = poll_due(&state).await {
            tracing::warn!(error = %err, "polling failed");
        }
    }
}

/// Polls every repository that is due now; returns how many were polled.
pub async fn poll_due(state: &AppState) -> AppResult<usize> {
    let due = state.db.repositories_due_for_poll(state.now()).await?;
    for name in &due {
        let repo = state.db.repository(name).await?;
        // A failed fetch is retried at the next interval, not at the next tick.
        state.db.mark_polled(repo.id, state.now()).await?;
        if let Err(err) = process_push(state, &repo, None).await {
            tracing::warn!(repo = repo.name, error = %err, "poll failed");
        }
    }
    Ok(due.len())
}
