//! Pull and merge requests: a webhook's request is measured against its merge base with the
//! tracked branch (a comparison, interleaved on one machine), and the verdict is published
//! where the review happens ([`feedback`]).
//!
//! A request whose head lives in a fork runs its author's code on the benchmark machines, so
//! nothing runs for one unless the repository names its author (`--fork-authors`).

pub mod ci;
pub mod ci_verdict;
mod comment;
pub mod feedback;

use kymo_core::db::{
    ADAPTIVE_ROUNDS, ComparisonOrigin, NewComparison, PullRequestRecord, RepositoryRow,
};
use kymo_core::pull_request::{PullAction, PullRequestEvent, author_allowed};
use kymo_core::webhook::Provider;

use crate::error::AppResult;
use crate::git;
use crate::state::AppState;

/// Why a pull request event runs nothing, or `None` when it is to be processed.
pub async fn refusal(
    state: &AppState,
    repo: &RepositoryRow,
    pull: &PullRequestEvent,
) -> AppResult<Option<String>> {
    if let PullAction::Other(action) = &pull.action {
        return Ok(Some(format!(
            "pull request #{} {action}: only opened, reopened, new commits and closed are used",
            pull.number
        )));
    }
    if pull.from_fork && pull.action != PullAction::Closed {
        let settings = state.db.pull_settings(repo.id).await?;
        if !author_allowed(&settings.fork_authors, &pull.author) {
            return Ok(Some(format!(
                "pull request #{} comes from a fork: its code would run on the benchmark \
                 machines, so nothing runs unless {} allows its author {:?} \
                 (kymo repo set {} --fork-authors LOGIN)",
                pull.number, repo.name, pull.author, repo.name
            )));
        }
    }
    Ok(None)
}

/// Acts on an accepted pull request event: queues the comparison of a new head (cancelling
/// the older one's waiting job), or cancels a closed request's waiting jobs. Returns what it
/// did and the jobs it queued.
pub async fn process(
    state: &AppState,
    repo: &RepositoryRow,
    provider: Provider,
    pull: &PullRequestEvent,
) -> AppResult<(String, Vec<i64>)> {
    let now = state.now();
    if pull.action == PullAction::Closed {
        let cancelled = (state.db)
            .close_pull_request(repo.id, provider.as_str(), pull.number, now)
            .await?;
        let detail = match cancelled {
            Some(n) => format!(
                "pull request #{} closed: {n} waiting job(s) cancelled",
                pull.number
            ),
            None => format!(
                "pull request #{} closed; it was never measured",
                pull.number
            ),
        };
        return Ok((detail, Vec::new()));
    }
    // Only the head's sha is taken from the payload: the commit itself comes from the
    // repository's own remote (a fork's head through the ref the forge keeps for it).
    let head_ref = pull.from_fork.then(|| match provider {
        Provider::GitLab => format!("refs/merge-requests/{}/head", pull.number),
        Provider::GitHub | Provider::Gitea => format!("refs/pull/{}/head", pull.number),
    });
    if let Some(reference) = &head_ref {
        git::fetch_pull_head(state, repo, reference).await?;
    }
    let (head, head_id) = git::resolve_commit(state, repo, Some(pull.head.as_str())).await?;
    let (base, base_id) = crate::api::merge_base(state, repo, &head).await?;
    let baseline = format!("merge-base of {}", repo.branch);
    let label = format!("#{} {}", pull.number, pull.title);
    let comparison = NewComparison {
        repository_id: repo.id,
        origin: ComparisonOrigin::Pull,
        label: &label,
        base_id,
        head_id,
        baseline: &baseline,
        rounds: ADAPTIVE_ROUNDS,
        budget_seconds: Some(state.db.comparison_budget(repo.id).await?),
        head_ref: head_ref.as_deref(),
    };
    let record = PullRequestRecord {
        repository_id: repo.id,
        provider: provider.as_str(),
        number: pull.number,
        title: &pull.title,
        author: &pull.author,
        head_sha: head.as_str(),
    };
    let (comparison, job) = (state.db)
        .start_pull_comparison(&record, &comparison, state.leases, now)
        .await?;
    tracing::info!(
        repo = repo.name,
        number = pull.number,
        comparison,
        job,
        "pull request queued"
    );
    Ok((
        format!(
            "pull request #{}: comparison {comparison} of {} against {} ({baseline}) queued",
            pull.number,
            head.short(),
            base.short()
        ),
        vec![job],
    ))
}
