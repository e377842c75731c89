//! The forge APIs kymo writes to: commit statuses, and the one comment it keeps on each pull
//! or merge request. GitHub (and GitHub Enterprise) and Gitea (and Forgejo) share paths and
//! differ in how the token is sent; GitLab has its own paths, names and states.

use kymo_core::db::CommitStatusTarget;
use kymo_core::protocol::query_value;
use serde_json::{Value, json};

/// A request to a forge's API.
#[derive(Debug, Clone, PartialEq)]
pub struct ForgeRequest {
    /// POST, PATCH or PUT.
    pub method: &'static str,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

/// The headers that authenticate to `target`'s forge.
pub fn auth_headers(target: &CommitStatusTarget) -> Vec<(&'static str, String)> {
    match target.kind.as_str() {
        "gitea" => vec![
            ("Authorization", format!("token {}", target.token)),
            ("Accept", "application/json".to_owned()),
        ],
        "gitlab" => vec![("PRIVATE-TOKEN", target.token.clone())],
        _ => vec![
            ("Authorization", format!("Bearer {}", target.token)),
            ("Accept", "application/vnd.github+json".to_owned()),
            ("X-GitHub-Api-Version", "2022-11-28".to_owned()),
        ],
    }
}

/// The API root of the repository (GitLab: project, by its URL-encoded path).
fn project_url(target: &CommitStatusTarget) -> String {
    let api = target.api_url.trim_end_matches('/');
    if target.kind == "gitlab" {
        format!(
            "{api}/projects/{}",
            query_value(&target.slug).replace('/', "%2F")
        )
    } else {
        format!("{api}/repos/{}", target.slug)
    }
}

/// Where a commit's status is posted.
pub fn status_url(target: &CommitStatusTarget, sha: &str) -> String {
    format!("{}/statuses/{sha}", project_url(target))
}

/// A status body: GitHub and Gitea take `context` and pending/success/failure/error; GitLab
/// takes `name` and pending/success/failed.
pub fn status_body(
    target: &CommitStatusTarget,
    state: &str,
    description: &str,
    target_url: &str,
    context: &str,
) -> Value {
    if target.kind == "gitlab" {
        let state = match state {
            "failure" | "error" => "failed",
            other => other,
        };
        json!({ "state": state, "target_url": target_url, "description": description, "name": context })
    } else {
        json!({ "state": state, "target_url": target_url, "description": description, "context": context })
    }
}

/// Creates kymo's comment on pull request `number` (`comment_id` = `None`), or edits it.
pub fn comment_request(
    target: &CommitStatusTarget,
    number: i64,
    comment_id: Option<&str>,
    text: &str,
) -> ForgeRequest {
    let root = project_url(target);
    let (method, url) = match (target.kind.as_str(), comment_id) {
        ("gitlab", None) => ("POST", format!("{root}/merge_requests/{number}/notes")),
        ("gitlab", Some(id)) => ("PUT", format!("{root}/merge_requests/{number}/notes/{id}")),
        (_, None) => ("POST", format!("{root}/issues/{number}/comments")),
        (_, Some(id)) => ("PATCH", format!("{root}/issues/comments/{id}")),
    };
    ForgeRequest {
        method,
        url,
        headers: auth_headers(target),
        body: json!({ "body": text }),
    }
}

/// The id of a created comment, from the forge's answer: a positive integer on every forge.
pub fn created_comment_id(answer: &Value) -> Option<String> {
    answer["id"]
        .as_i64()
        .filter(|id| *id > 0)
        .map(|id| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kind: &str, api: &str, slug: &str) -> CommitStatusTarget {
        CommitStatusTarget {
            kind: kind.into(),
            api_url: api.into(),
            slug: slug.into(),
            token: "T0K".into(),
        }
    }

    #[test]
    fn comments_are_created_once_then_edited_in_place_on_each_forge() {
        let github = target("github", "https://api.github.com/", "acme/app");
        let create = comment_request(&github, 7, None, "hi");
        assert_eq!(
            (create.method, create.url.as_str()),
            (
                "POST",
                "https://api.github.com/repos/acme/app/issues/7/comments"
            )
        );
        assert_eq!(create.body["body"], "hi");
        let edit = comment_request(&github, 7, Some("42"), "hi");
        assert_eq!(
            (edit.method, edit.url.as_str()),
            (
                "PATCH",
                "https://api.github.com/repos/acme/app/issues/comments/42"
            )
        );
        let gitea = target("gitea", "https://gitea.example/api/v1", "acme/app");
        let edit = comment_request(&gitea, 7, Some("42"), "hi");
        assert_eq!(
            edit.url,
            "https://gitea.example/api/v1/repos/acme/app/issues/comments/42"
        );
        assert!(
            edit.headers
                .contains(&("Authorization", "token T0K".into()))
        );
        let gitlab = target("gitlab", "https://gitlab.com/api/v4", "acme/sub/app");
        let create = comment_request(&gitlab, 3, None, "hi");
        assert_eq!(
            create.url,
            "https://gitlab.com/api/v4/projects/acme%2Fsub%2Fapp/merge_requests/3/notes"
        );
        let edit = comment_request(&gitlab, 3, Some("9"), "hi");
        assert_eq!(edit.method, "PUT");
        assert!(edit.url.ends_with("/merge_requests/3/notes/9"));
        assert_eq!(edit.headers, vec![("PRIVATE-TOKEN", "T0K".to_owned())]);
    }

    #[test]
    fn gitlab_statuses_use_its_own_names_and_states() {
        let gitlab = target("gitlab", "https://gitlab.com/api/v4", "acme/app");
        assert_eq!(
            status_url(&gitlab, "abc"),
            "https://gitlab.com/api/v4/projects/acme%2Fapp/statuses/abc"
        );
        let body = status_body(&gitlab, "failure", "1 regression", "https://k/x", "kymo");
        assert_eq!(body["state"], "failed");
        assert_eq!(body["name"], "kymo");
        let github = target("github", "https://api.github.com", "acme/app");
        let body = status_body(&github, "failure", "1 regression", "https://k/x", "kymo");
        assert_eq!(
            (body["state"].as_str(), body["context"].as_str()),
            (Some("failure"), Some("kymo"))
        );
    }

    #[test]
    fn only_a_positive_numeric_comment_id_is_kept() {
        assert_eq!(created_comment_id(&json!({"id": 42})), Some("42".into()));
        for answer in [
            json!({"id": "../x"}),
            json!({"id": -1}),
            json!({}),
            json!([1]),
        ] {
            assert_eq!(created_comment_id(&answer), None, "{answer}");
        }
    }
}
