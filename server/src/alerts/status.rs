//! Commit statuses on GitHub (and GitHub Enterprise) and Gitea (and Forgejo): a commit's
//! state follows from its jobs and regressions, and a change of state is queued for posting.

use kymo_core::db::{CommitStatusTarget, StatusCommit};

use super::Outgoing;
use crate::error::AppResult;
use crate::forge;
use crate::state::AppState;

/// The label kymo's statuses carry on the forge.
pub const STATUS_CONTEXT: &str = "kymo";

/// GitHub cuts descriptions longer than this.
const MAX_DESCRIPTION_CHARS: usize = 140;

/// Computes a commit's state from its jobs and regressions and, when it differs from the
/// state last queued for the commit, queues it for posting to the repository's forge. Does
/// nothing when the repository has no commit-status target.
///
/// Call it whenever a job of the commit is queued, claimed, finished or failed, and after its
/// regressions are recorded or triaged.
pub async fn commit_status_changed(state: &AppState, commit_id: i64) -> AppResult<()> {
    let commit = state.db.status_commit(commit_id).await?;
    if state
        .db
        .commit_status_target(commit.repository_id)
        .await?
        .is_none()
    {
        return Ok(());
    }
    let Some((commit_state, description)) = commit_state(&commit) else {
        return Ok(());
    };
    if let Some(id) = state
        .db
        .enqueue_status_post(commit_id, commit_state, &description, state.now())
        .await?
    {
        tracing::info!(
            commit = commit.sha,
            state = commit_state,
            post = id,
            "commit status queued"
        );
    }
    Ok(())
}

/// The state to show for a commit and a short description, or `None` when nothing is known
/// (no jobs and no regressions). Waiting or running jobs make it `pending`; once all finished,
/// standing regressions make it `failure`, else a failed job makes it `error`, else `success`.
pub fn commit_state(commit: &StatusCommit) -> Option<(&'static str, String)> {
    let jobs = commit.job_states.len();
    let count = |wanted: &[&str]| {
        commit
            .job_states
            .iter()
            .filter(|s| wanted.contains(&s.as_str()))
            .count()
    };
    let plural = |n: usize, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    let waiting = count(&["queued", "running"]);
    let failed = count(&["failed"]);
    let found = usize::try_from(commit.regressions).unwrap_or(0);
    let confirming = usize::try_from(commit.confirming).unwrap_or(0);
    if jobs == 0 && found == 0 && confirming == 0 {
        return None;
    }
    Some(if waiting > 0 {
        (
            "pending",
            format!(
                "benchmarking: {waiting} of {} waiting or running",
                plural(jobs, "job")
            ),
        )
    } else if found > 0 {
        ("failure", format!("{} found", plural(found, "regression")))
    } else if confirming > 0 {
        (
            "pending",
            format!(
                "confirming {} by measuring again",
                plural(confirming, "possible regression")
            ),
        )
    } else if failed > 0 {
        (
            "error",
            format!("{} of {jobs} failed", plural(failed, "job")),
        )
    } else {
        (
            "success",
            format!("no regressions ({} benchmarked)", plural(jobs, "job")),
        )
    })
}

/// The request that posts `commit_state` for `sha` to `target`.
pub fn status_request(
    target: &CommitStatusTarget,
    sha: &str,
    commit_state: &str,
    description: &str,
    target_url: &str,
) -> Outgoing {
    let description: String = description.chars().take(MAX_DESCRIPTION_CHARS).collect();
    Outgoing {
        url: forge::status_url(target, sha),
        headers: forge::auth_headers(target),
        body: forge::status_body(
            target,
            commit_state,
            &description,
            target_url,
            STATUS_CONTEXT,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(jobs: &[&str], regressions: i64) -> StatusCommit {
        StatusCommit {
            repository_id: 1,
            repository: "r".into(),
            sha: "a".repeat(40),
            job_states: jobs.iter().map(|s| s.to_string()).collect(),
            regressions,
            confirming: 0,
        }
    }

    #[test]
    fn a_regression_being_confirmed_keeps_the_commit_pending() {
        let confirming = StatusCommit {
            confirming: 2,
            ..commit(&["succeeded"], 0)
        };
        let (state, description) = commit_state(&confirming).unwrap();
        assert_eq!(state, "pending");
        assert_eq!(
            description,
            "confirming 2 possible regressions by measuring again"
        );
        // Once one is confirmed, the commit fails whatever the others still wait for.
        let found = StatusCommit {
            regressions: 1,
            ..confirming
        };
        assert_eq!(commit_state(&found).unwrap().0, "failure");
    }

    #[test]
    fn a_commits_state_follows_its_jobs_then_its_regressions() {
        let state = |jobs: &[&str], found| commit_state(&commit(jobs, found)).map(|s| s.0);
        assert_eq!(state(&[], 0), None);
        assert_eq!(state(&["queued"], 0), Some("pending"));
        assert_eq!(state(&["succeeded", "running"], 1), Some("pending"));
        assert_eq!(state(&["succeeded", "succeeded"], 0), Some("success"));
        assert_eq!(state(&["succeeded", "failed"], 0), Some("error"));
        assert_eq!(state(&["succeeded", "failed"], 2), Some("failure"));
        assert_eq!(state(&["succeeded"], 1), Some("failure"));
        assert_eq!(
            commit_state(&commit(&["succeeded"], 2)).unwrap().1,
            "2 regressions found"
        );
    }

    #[test]
    fn github_and_gitea_differ_only_in_how_the_token_is_sent() {
        let mut target = CommitStatusTarget {
            kind: "github".into(),
            api_url: "https://ghe.example/api/v3/".into(),
            slug: "ada/kymo".into(),
            token: "T0K".into(),
        };
        let long = "d".repeat(500);
        let request = status_request(&target, "abc", "success", &long, "https://k/x");
        assert_eq!(
            request.url,
            "https://ghe.example/api/v3/repos/ada/kymo/statuses/abc"
        );
        assert!(
            request
                .headers
                .contains(&("Authorization", "Bearer T0K".into()))
        );
        assert_eq!(request.body["state"], "success");
        assert_eq!(request.body["context"], "kymo");
        assert_eq!(request.body["target_url"], "https://k/x");
        assert_eq!(request.body["description"].as_str().unwrap().len(), 140);

        target.kind = "gitea".into();
        let request = status_request(&target, "abc", "pending", "x", "https://k/x");
        assert!(
            request
                .headers
                .contains(&("Authorization", "token T0K".into()))
        );
    }
}
