//! A pull request measured in CI (`kymo upload --pull-request N`): the head's results, sent
//! from the CI job with what the forge says of the request, and checked here before anything
//! is stored. The head need not be in the server's mirror: CI measured it, and the server
//! only keeps its results apart from the tracked branch's series.

use serde::{Deserialize, Serialize};

use crate::model::{CommitSha, Environment, MachineFingerprint, MachineSpecs};
use crate::protocol::SuiteUpload;
use crate::results::{validate_environment, validate_suites};
use crate::webhook::Provider;

/// Longest title kept (as a webhook's).
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest forge login kept.
pub const MAX_AUTHOR_CHARS: usize = 100;
/// Largest pull or merge request number accepted (forges count from 1).
pub const MAX_PULL_NUMBER: i64 = 1 << 40;

/// `POST /api/v1/repos/{repo}/pulls/{number}/results`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PullUploadRequest {
    /// `github`, `gitlab` or `gitea`; the forge of the repository's commit statuses when
    /// absent.
    #[serde(default)]
    pub provider: Option<String>,
    /// The head commit: the full sha CI measured (the server need not have it).
    pub head: CommitSha,
    /// The branch the request merges into; the tracked branch when absent.
    #[serde(default)]
    pub base_branch: Option<String>,
    /// The merge base of the head with the base branch; the base branch's head when absent.
    #[serde(default)]
    pub merge_base: Option<CommitSha>,
    #[serde(default)]
    pub title: Option<String>,
    /// The request's author (a forge login).
    #[serde(default)]
    pub author: Option<String>,
    /// Attribute the results to this registered machine instead of the uploader's.
    #[serde(default)]
    pub machine: Option<MachineFingerprint>,
    /// The uploading machine's specs; required when `machine` is absent.
    #[serde(default)]
    pub specs: Option<MachineSpecs>,
    #[serde(default)]
    pub environment: Environment,
    /// The head's results.
    pub suites: Vec<SuiteUpload>,
    /// The base's results, measured by the same job on the same runner; when absent the
    /// head is compared with the base's stored results on the same machine fingerprint.
    #[serde(default)]
    pub base_suites: Option<Vec<SuiteUpload>>,
}

/// The answer to a pull request's upload.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PullUploadAccepted {
    pub pull_request: i64,
    pub comparison: i64,
    /// The commit whose results the head was compared with.
    pub base: CommitSha,
    /// How that base was chosen, in words.
    pub baseline: String,
    pub machine: MachineFingerprint,
    /// The comparison's page.
    pub url: String,
}

/// A checked pull request upload: what the server stores.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedPullUpload {
    pub number: i64,
    pub provider: Option<Provider>,
    pub base_branch: Option<String>,
    pub title: String,
    pub author: String,
}

impl PullUploadRequest {
    /// Checks everything the request says besides the results' commits: the number, the
    /// forge, the branch, and the results of both sides (as a run's are checked).
    pub fn checked(&self, number: i64) -> Result<CheckedPullUpload, String> {
        if !(1..=MAX_PULL_NUMBER).contains(&number) {
            return Err(format!(
                "pull request number {number}: forges number them from 1"
            ));
        }
        let provider = match self.provider.as_deref() {
            None => None,
            Some(name) => Some(Provider::parse(name).ok_or_else(|| {
                format!("provider {:?}: use github, gitlab or gitea", clip(name, 40))
            })?),
        };
        let base_branch = match self.base_branch.as_deref() {
            Some(branch) => Some(checked_branch(branch)?.to_owned()),
            None => None,
        };
        validate_suites(&self.suites).map_err(|e| format!("head: {e}"))?;
        if let Some(base) = &self.base_suites {
            validate_suites(base).map_err(|e| format!("base: {e}"))?;
        }
        validate_environment(&self.environment)?;
        Ok(CheckedPullUpload {
            number,
            provider,
            base_branch,
            title: one_line(self.title.as_deref().unwrap_or(""), MAX_TITLE_CHARS),
            author: one_line(self.author.as_deref().unwrap_or(""), MAX_AUTHOR_CHARS),
        })
    }
}

/// A branch name as git allows it, enough to refuse what could be read as an option or a
/// path out of the repository.
fn checked_branch(branch: &str) -> Result<&str, String> {
    let ok = !branch.is_empty()
        && branch.len() <= 250
        && !branch.starts_with(['-', '/'])
        && !branch.ends_with(['/', '.'])
        && !branch.contains("..")
        && !branch.contains("//")
        && !branch
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c));
    if ok {
        Ok(branch)
    } else {
        Err(format!(
            "base branch {:?} is not a branch name",
            clip(branch, 60)
        ))
    }
}

/// `text` on one line, without control characters, cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect::<String>()
        .trim()
        .to_owned()
}

fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{BenchmarkResult, MetricResult, SuiteResults};

    fn suites(value: f64) -> Vec<SuiteUpload> {
        vec![SuiteUpload {
            suite: "s".into(),
            results: SuiteResults {
                benchmarks: vec![BenchmarkResult {
                    name: "parse".into(),
                    params: Default::default(),
                    metrics: vec![MetricResult::time_ns(value, vec![])],
                }],
            },
        }]
    }

    fn request() -> PullUploadRequest {
        PullUploadRequest {
            provider: Some("github".into()),
            head: CommitSha::parse(&"a".repeat(40)).unwrap(),
            base_branch: Some("main".into()),
            merge_base: None,
            title: Some("Parse\nin one pass\u{7}".into()),
            author: Some("ada".into()),
            machine: None,
            specs: None,
            environment: Environment::default(),
            suites: suites(1.0),
            base_suites: None,
        }
    }

    #[test]
    fn a_good_request_is_kept_on_one_line() {
        let checked = request().checked(7).unwrap();
        assert_eq!(checked.number, 7);
        assert_eq!(checked.provider, Some(Provider::GitHub));
        assert_eq!(checked.title, "Parse in one pass");
        let long = PullUploadRequest {
            title: Some("x".repeat(10_000)),
            ..request()
        };
        assert_eq!(long.checked(7).unwrap().title.len(), MAX_TITLE_CHARS);
    }

    #[test]
    fn bad_numbers_forges_branches_and_results_are_refused() {
        for number in [0, -3, MAX_PULL_NUMBER + 1] {
            assert!(request().checked(number).unwrap_err().contains("number"));
        }
        let bad = |change: fn(&mut PullUploadRequest)| {
            let mut r = request();
            change(&mut r);
            r.checked(7).unwrap_err()
        };
        assert!(bad(|r| r.provider = Some("bitbucket".into())).contains("provider"));
        for branch in [
            "",
            "--upload-pack=x",
            "a..b",
            "a b",
            "/etc",
            "x\u{0}",
            "refs/",
        ] {
            let mut r = request();
            r.base_branch = Some(branch.into());
            assert!(r.checked(7).unwrap_err().contains("branch"), "{branch:?}");
        }
        assert!(bad(|r| r.suites.clear()).starts_with("head:"));
        assert!(bad(|r| r.base_suites = Some(vec![])).starts_with("base:"));
        assert!(
            bad(|r| r.suites[0].results.benchmarks[0].metrics[0].value = f64::NAN)
                .contains("finite")
        );
    }

    #[test]
    fn unknown_fields_and_short_heads_are_refused_by_the_parser() {
        let mut body = serde_json::to_value(request()).unwrap();
        body["head"] = "abc1234".into();
        assert!(serde_json::from_value::<PullUploadRequest>(body.clone()).is_err());
        body["head"] = "a".repeat(40).into();
        body["surprise"] = true.into();
        assert!(serde_json::from_value::<PullUploadRequest>(body).is_err());
    }
}
