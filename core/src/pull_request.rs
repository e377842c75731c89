//! Pull and merge request webhook payloads: GitHub and Gitea/Forgejo `pull_request`, GitLab
//! `Merge Request Hook`. Only what kymo acts on is read: the action, the request's number,
//! title and author, its head commit, and whether the head lives in the tracked repository.

use serde::Deserialize;

use crate::model::CommitSha;
use crate::webhook::{Provider, WebhookError};

/// What happened to a pull request, as far as kymo cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullAction {
    /// Opened or reopened: measure its head.
    Opened,
    /// New commits were pushed to it: measure the new head.
    Updated,
    /// Closed or merged: stop measuring it.
    Closed,
    /// Anything else (edited, labelled, reviewed ...): nothing to do.
    Other(String),
}

/// A pull or merge request event.
#[derive(Debug, Clone, PartialEq)]
pub struct PullRequestEvent {
    pub action: PullAction,
    pub number: i64,
    pub title: String,
    /// The forge login of the request's author.
    pub author: String,
    pub head: CommitSha,
    /// Whether the head lives in another repository than the one it asks to merge into.
    pub from_fork: bool,
}

const MAX_TITLE_CHARS: usize = 200;
const MAX_LOGIN_CHARS: usize = 100;

#[derive(Deserialize)]
struct HubPayload {
    action: String,
    number: i64,
    pull_request: HubPull,
}

#[derive(Deserialize)]
struct HubPull {
    #[serde(default)]
    title: String,
    user: HubUser,
    head: HubBranch,
    base: HubBranch,
}

#[derive(Deserialize)]
struct HubUser {
    login: String,
}

#[derive(Deserialize)]
struct HubBranch {
    sha: String,
    /// Absent when the fork was deleted.
    #[serde(default)]
    repo: Option<HubRepo>,
}

#[derive(Deserialize)]
struct HubRepo {
    /// GitHub and Gitea both give the numeric id; it survives renames, unlike the name.
    id: i64,
}

#[derive(Deserialize)]
struct LabPayload {
    #[serde(default)]
    user: Option<LabUser>,
    object_attributes: LabRequest,
}

#[derive(Deserialize)]
struct LabUser {
    #[serde(default)]
    id: Option<i64>,
    username: String,
}

#[derive(Deserialize)]
struct LabRequest {
    iid: i64,
    #[serde(default)]
    title: String,
    #[serde(default)]
    action: Option<String>,
    source_project_id: i64,
    target_project_id: i64,
    /// Who wrote the merge request; `user` is whoever caused this event (a reopen, an edit).
    #[serde(default)]
    author_id: Option<i64>,
    last_commit: LabCommit,
    /// Set on an `update` that pushed new commits (the head before them).
    #[serde(default)]
    oldrev: Option<String>,
}

#[derive(Deserialize)]
struct LabCommit {
    id: String,
}

/// Reads a pull or merge request event. A payload missing what kymo needs is refused whole.
pub fn parse_pull_request(
    provider: Provider,
    body: &[u8],
) -> Result<PullRequestEvent, WebhookError> {
    let bad = |reason: String| WebhookError::BadPayload {
        provider: provider.as_str(),
        what: "pull request",
        reason,
    };
    let sha = |s: &str| CommitSha::parse(s).map_err(|e| bad(format!("head {s:?}: {e}")));
    let clip = |s: &str, max: usize| -> String {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(max)
            .collect()
    };
    let event = match provider {
        Provider::GitHub | Provider::Gitea => {
            let p: HubPayload = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
            let action = match p.action.as_str() {
                "opened" | "reopened" => PullAction::Opened,
                // GitHub says synchronize, Gitea and Forgejo synchronized.
                "synchronize" | "synchronized" => PullAction::Updated,
                "closed" => PullAction::Closed,
                other => PullAction::Other(clip(other, 64)),
            };
            let same_repo = match (&p.pull_request.head.repo, &p.pull_request.base.repo) {
                (Some(head), Some(base)) => head.id == base.id,
                _ => false,
            };
            PullRequestEvent {
                action,
                number: p.number,
                title: clip(&p.pull_request.title, MAX_TITLE_CHARS),
                author: clip(&p.pull_request.user.login, MAX_LOGIN_CHARS),
                head: sha(&p.pull_request.head.sha)?,
                from_fork: !same_repo,
            }
        }
        Provider::GitLab => {
            let p: LabPayload = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
            let request = p.object_attributes;
            let action = match request.action.as_deref() {
                Some("open" | "reopen") => PullAction::Opened,
                Some("update") if request.oldrev.is_some() => PullAction::Updated,
                Some("close" | "merge") => PullAction::Closed,
                other => PullAction::Other(clip(other.unwrap_or("none"), 64)),
            };
            PullRequestEvent {
                action,
                number: request.iid,
                title: clip(&request.title, MAX_TITLE_CHARS),
                author: clip(&lab_author(p.user, request.author_id), MAX_LOGIN_CHARS),
                head: sha(&request.last_commit.id)?,
                from_fork: request.source_project_id != request.target_project_id,
            }
        }
    };
    if event.number <= 0 {
        return Err(bad(format!(
            "request number {} is not positive",
            event.number
        )));
    }
    Ok(event)
}

/// A merge request's author as far as a GitLab payload tells: it names only the user who
/// caused the event, and the author by number. When they are one user, that user's login;
/// otherwise (a maintainer reopened someone else's request) the author's number, which is no
/// login and so never among the allowed fork authors.
fn lab_author(user: Option<LabUser>, author_id: Option<i64>) -> String {
    match (user, author_id) {
        (Some(user), Some(author)) if user.id == Some(author) => user.username,
        (_, Some(author)) => format!("GitLab user #{author}"),
        (_, None) => "an unknown GitLab user".to_owned(),
    }
}

/// Whether `author` is among `allowed` (comma-separated logins, compared without case, as
/// forges compare them).
pub fn author_allowed(allowed: &str, author: &str) -> bool {
    !author.is_empty()
        && allowed
            .split(',')
            .map(str::trim)
            .any(|login| !login.is_empty() && login.eq_ignore_ascii_case(author))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";

    fn hub(action: &str, head_repo: i64) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "action": action,
            "number": 7,
            "pull_request": {
                "title": "Faster\nparse",
                "user": { "login": "ada" },
                "head": { "sha": HEAD, "ref": "fast", "repo": { "id": head_repo, "full_name": "x/app" } },
                "base": { "sha": HEAD, "ref": "main", "repo": { "id": 1, "full_name": "acme/app" } },
            },
            "repository": { "id": 1, "full_name": "acme/app" },
        }))
        .unwrap()
    }

    #[test]
    fn github_and_gitea_requests_are_read_with_their_action_and_origin() {
        for provider in [Provider::GitHub, Provider::Gitea] {
            let event = parse_pull_request(provider, &hub("opened", 1)).unwrap();
            assert_eq!(event.action, PullAction::Opened);
            assert_eq!(event.number, 7);
            assert_eq!(event.title, "Faster parse");
            assert_eq!(event.author, "ada");
            assert_eq!(event.head.as_str(), HEAD);
            assert!(!event.from_fork);
            let fork = parse_pull_request(provider, &hub("synchronized", 99)).unwrap();
            assert_eq!(fork.action, PullAction::Updated);
            assert!(fork.from_fork);
        }
        let github = |action| parse_pull_request(Provider::GitHub, &hub(action, 1)).unwrap();
        assert_eq!(github("synchronize").action, PullAction::Updated);
        assert_eq!(github("reopened").action, PullAction::Opened);
        assert_eq!(github("closed").action, PullAction::Closed);
        assert_eq!(
            github("labeled").action,
            PullAction::Other("labeled".into())
        );
    }

    #[test]
    fn a_request_whose_fork_was_deleted_counts_as_a_fork() {
        let mut body: serde_json::Value = serde_json::from_slice(&hub("opened", 1)).unwrap();
        body["pull_request"]["head"]["repo"] = serde_json::Value::Null;
        let event = parse_pull_request(Provider::GitHub, &serde_json::to_vec(&body).unwrap());
        assert!(event.unwrap().from_fork);
    }

    fn lab(action: &str, source: i64, oldrev: Option<&str>) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "object_kind": "merge_request",
            "user": { "id": 7, "username": "ada" },
            "project": { "id": 1, "path_with_namespace": "acme/app" },
            "object_attributes": {
                "iid": 3, "title": "Faster", "action": action, "author_id": 7,
                "source_project_id": source, "target_project_id": 1,
                "last_commit": { "id": HEAD }, "oldrev": oldrev,
            },
        }))
        .unwrap()
    }

    #[test]
    fn gitlab_merge_requests_are_read_and_an_update_without_new_commits_is_nothing() {
        let open = parse_pull_request(Provider::GitLab, &lab("open", 1, None)).unwrap();
        assert_eq!(
            (open.action, open.number, open.from_fork),
            (PullAction::Opened, 3, false)
        );
        let pushed = parse_pull_request(Provider::GitLab, &lab("update", 2, Some(HEAD))).unwrap();
        assert_eq!(
            (pushed.action, pushed.from_fork),
            (PullAction::Updated, true)
        );
        let edited = parse_pull_request(Provider::GitLab, &lab("update", 1, None)).unwrap();
        assert_eq!(edited.action, PullAction::Other("update".into()));
        let merged = parse_pull_request(Provider::GitLab, &lab("merge", 1, None)).unwrap();
        assert_eq!(merged.action, PullAction::Closed);
    }

    #[test]
    fn a_gitlab_request_reopened_by_another_user_is_not_theirs() {
        let own = parse_pull_request(Provider::GitLab, &lab("reopen", 2, None)).unwrap();
        assert_eq!(own.author, "ada");
        let mut reopened: serde_json::Value =
            serde_json::from_slice(&lab("reopen", 2, None)).unwrap();
        reopened["user"] = serde_json::json!({ "id": 1, "username": "maintainer" });
        reopened["object_attributes"]["author_id"] = 99.into();
        let event =
            parse_pull_request(Provider::GitLab, &serde_json::to_vec(&reopened).unwrap()).unwrap();
        assert_eq!(event.author, "GitLab user #99");
        assert!(!author_allowed("maintainer,ada", &event.author));
        // A payload that does not say who wrote the request names nobody.
        reopened["object_attributes"]
            .as_object_mut()
            .unwrap()
            .remove("author_id");
        reopened["user"] = serde_json::json!({ "id": 99, "username": "maintainer" });
        let event =
            parse_pull_request(Provider::GitLab, &serde_json::to_vec(&reopened).unwrap()).unwrap();
        assert!(
            !author_allowed("maintainer", &event.author),
            "{}",
            event.author
        );
    }

    #[test]
    fn malformed_or_hostile_payloads_are_refused() {
        let refused = |provider, body: &[u8]| parse_pull_request(provider, body).is_err();
        assert!(refused(Provider::GitHub, b"not json"));
        assert!(refused(Provider::GitHub, b"{}"));
        assert!(refused(Provider::GitLab, &hub("opened", 1)));
        let mut bad_sha: serde_json::Value = serde_json::from_slice(&hub("opened", 1)).unwrap();
        bad_sha["pull_request"]["head"]["sha"] = "../../etc/passwd".into();
        assert!(refused(
            Provider::GitHub,
            &serde_json::to_vec(&bad_sha).unwrap()
        ));
        let mut negative: serde_json::Value = serde_json::from_slice(&hub("opened", 1)).unwrap();
        negative["number"] = (-1).into();
        assert!(refused(
            Provider::GitHub,
            &serde_json::to_vec(&negative).unwrap()
        ));
        let mut long: serde_json::Value = serde_json::from_slice(&hub("opened", 1)).unwrap();
        long["pull_request"]["title"] = "t".repeat(100_000).into();
        let event = parse_pull_request(Provider::GitHub, &serde_json::to_vec(&long).unwrap());
        assert_eq!(event.unwrap().title.len(), MAX_TITLE_CHARS);
    }

    #[test]
    fn fork_authors_are_matched_by_login_without_case() {
        assert!(author_allowed("ada, Grace", "grace"));
        assert!(!author_allowed("ada,grace", "mallory"));
        assert!(!author_allowed("", "ada"));
        assert!(!author_allowed(",,", ""));
    }
}
