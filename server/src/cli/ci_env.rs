//! What a CI job's environment says of the pull request it runs for: GitHub Actions (and
//! Gitea/Forgejo Actions, which speak its language) and GitLab CI merge request pipelines.
//! `kymo upload --pull-request` fills in from it what its flags leave out.

use std::path::Path;

use serde_json::Value;

/// Largest event file read (GitHub's payloads are tens of kilobytes).
const MAX_EVENT_BYTES: u64 = 8 * 1024 * 1024;

/// A pull request as a CI job's environment describes it; every part may be missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CiPull {
    /// `GitHub Actions`, `Gitea Actions` or `GitLab CI`, for messages.
    pub ci: Option<&'static str>,
    /// The forge: `github`, `gitea` or `gitlab`.
    pub forge: Option<&'static str>,
    pub number: Option<i64>,
    /// The head commit (not the merge commit GitHub checks out by default).
    pub head: Option<String>,
    pub base_branch: Option<String>,
    /// The merge base, where the CI says it (GitLab).
    pub merge_base: Option<String>,
    pub title: Option<String>,
    pub author: Option<String>,
}

/// Reads the pull request from the environment `var` gives (`std::env::var` in use).
pub fn detect(var: &dyn Fn(&str) -> Option<String>) -> CiPull {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let is_true = |name: &str| set(name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if is_true("GITLAB_CI") {
        return CiPull {
            ci: Some("GitLab CI"),
            forge: Some("gitlab"),
            number: set("CI_MERGE_REQUEST_IID").and_then(|n| n.parse().ok()),
            // In a merged results pipeline CI_COMMIT_SHA is the merge; the source sha is the head.
            head: set("CI_MERGE_REQUEST_SOURCE_BRANCH_SHA").or_else(|| set("CI_COMMIT_SHA")),
            base_branch: set("CI_MERGE_REQUEST_TARGET_BRANCH_NAME"),
            merge_base: set("CI_MERGE_REQUEST_DIFF_BASE_SHA"),
            title: set("CI_MERGE_REQUEST_TITLE"),
            author: set("GITLAB_USER_LOGIN"),
        };
    }
    if !is_true("GITHUB_ACTIONS") {
        return CiPull::default();
    }
    let gitea = is_true("GITEA_ACTIONS") || is_true("FORGEJO_ACTIONS");
    let event = set("GITHUB_EVENT_PATH")
        .and_then(|path| read_event(Path::new(&path)))
        .unwrap_or(Value::Null);
    let pull = &event["pull_request"];
    let text = |value: &Value| value.as_str().map(str::to_owned);
    // `refs/pull/7/merge` names the request when the event file does not.
    let from_ref = set("GITHUB_REF").and_then(|r| {
        r.strip_prefix("refs/pull/")?
            .split('/')
            .next()?
            .parse()
            .ok()
    });
    CiPull {
        ci: Some(if gitea {
            "Gitea Actions"
        } else {
            "GitHub Actions"
        }),
        forge: Some(if gitea { "gitea" } else { "github" }),
        number: pull["number"].as_i64().or(from_ref),
        head: text(&pull["head"]["sha"]),
        base_branch: set("GITHUB_BASE_REF").or_else(|| text(&pull["base"]["ref"])),
        merge_base: None,
        title: text(&pull["title"]),
        author: text(&pull["user"]["login"]),
    }
}

fn read_event(path: &Path) -> Option<Value> {
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.len() > MAX_EVENT_BYTES {
        return None;
    }
    serde_json::from_reader(std::io::BufReader::new(file)).ok()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn a_github_actions_pull_request_is_read_from_its_event_file() {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("event.json");
        std::fs::write(
            &event,
            r#"{"action": "synchronize", "number": 7, "pull_request": {"number": 7,
                "title": "Parse in one pass", "user": {"login": "ada"},
                "head": {"sha": "1111111111111111111111111111111111111111", "ref": "one-pass"},
                "base": {"sha": "2222222222222222222222222222222222222222", "ref": "main"}}}"#,
        )
        .unwrap();
        let path = event.to_str().unwrap();
        let pull = detect(&env(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_EVENT_PATH", path),
            ("GITHUB_BASE_REF", "main"),
            ("GITHUB_HEAD_REF", "one-pass"),
            ("GITHUB_REF", "refs/pull/7/merge"),
            ("GITHUB_SHA", "3333333333333333333333333333333333333333"),
        ]));
        assert_eq!(pull.forge, Some("github"));
        assert_eq!(pull.number, Some(7));
        assert_eq!(
            pull.head.as_deref(),
            Some("1111111111111111111111111111111111111111"),
            "the head, not the merge commit GITHUB_SHA names"
        );
        assert_eq!(pull.base_branch.as_deref(), Some("main"));
        assert_eq!(pull.title.as_deref(), Some("Parse in one pass"));
        assert_eq!(pull.author.as_deref(), Some("ada"));
        assert_eq!(pull.merge_base, None);

        // Gitea and Forgejo Actions set the same variables, and say who they are.
        let gitea = detect(&env(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITEA_ACTIONS", "true"),
            ("GITHUB_REF", "refs/pull/12/head"),
        ]));
        assert_eq!((gitea.forge, gitea.number), (Some("gitea"), Some(12)));
    }

    #[test]
    fn a_gitlab_merge_request_pipeline_gives_its_merge_base_too() {
        let pull = detect(&env(&[
            ("GITLAB_CI", "true"),
            ("CI_MERGE_REQUEST_IID", "42"),
            ("CI_COMMIT_SHA", "4444444444444444444444444444444444444444"),
            ("CI_MERGE_REQUEST_SOURCE_BRANCH_SHA", ""),
            ("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "develop"),
            (
                "CI_MERGE_REQUEST_DIFF_BASE_SHA",
                "5555555555555555555555555555555555555555",
            ),
            ("CI_MERGE_REQUEST_TITLE", "Faster parse"),
            ("GITLAB_USER_LOGIN", "grace"),
        ]));
        assert_eq!(pull.forge, Some("gitlab"));
        assert_eq!(pull.number, Some(42));
        assert_eq!(
            pull.head.as_deref(),
            Some("4444444444444444444444444444444444444444")
        );
        assert_eq!(pull.base_branch.as_deref(), Some("develop"));
        assert_eq!(
            pull.merge_base.as_deref(),
            Some("5555555555555555555555555555555555555555")
        );
        let merged_results = detect(&env(&[
            ("GITLAB_CI", "true"),
            ("CI_COMMIT_SHA", "6666666666666666666666666666666666666666"),
            (
                "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA",
                "7777777777777777777777777777777777777777",
            ),
        ]));
        assert_eq!(
            merged_results.head.as_deref(),
            Some("7777777777777777777777777777777777777777")
        );
    }

    #[test]
    fn outside_ci_or_with_a_broken_event_file_nothing_is_made_up() {
        assert_eq!(detect(&env(&[])), CiPull::default());
        assert_eq!(
            detect(&env(&[("GITHUB_ACTIONS", "false")])),
            CiPull::default()
        );
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("event.json");
        std::fs::write(&event, "{not json").unwrap();
        let pull = detect(&env(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_EVENT_PATH", event.to_str().unwrap()),
            ("GITHUB_REF", "refs/heads/main"),
        ]));
        assert_eq!((pull.number, pull.head), (None, None));
        let bad_number = detect(&env(&[
            ("GITLAB_CI", "true"),
            ("CI_MERGE_REQUEST_IID", "4x"),
        ]));
        assert_eq!(bad_number.number, None);
    }
}
