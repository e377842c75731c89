//! Push webhooks from GitHub, GitLab and Gitea/Forgejo: signature checks and the few fields
//! of a push that kymo needs. Pure: the server reads headers and the body and passes them here.
//!
//! kymo trusts nothing in a payload but the branch and the new head: the commits themselves
//! are fetched from the repository's remote, so a payload's commit list is never read.

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use crate::model::CommitSha;

/// Where a webhook comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    GitHub,
    GitLab,
    /// Gitea and Forgejo (same payloads, signatures under either name).
    Gitea,
}

impl Provider {
    /// Reads a provider's name as it appears in the hook's URL.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "github" => Some(Provider::GitHub),
            "gitlab" => Some(Provider::GitLab),
            "gitea" => Some(Provider::Gitea),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::GitHub => "github",
            Provider::GitLab => "gitlab",
            Provider::Gitea => "gitea",
        }
    }
}

/// Why a delivery is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WebhookError {
    #[error("the delivery has no {0} header")]
    MissingHeader(&'static str),
    #[error("the signature does not match the repository's webhook secret")]
    BadSignature,
    #[error("the payload is not a {provider} {what}: {reason}")]
    BadPayload {
        provider: &'static str,
        /// push, pull request ...
        what: &'static str,
        reason: String,
    },
}

/// What kind of event a delivery carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Push,
    /// GitHub's and Gitea's hook test.
    Ping,
    /// A pull request (GitHub, Gitea, Forgejo) or merge request (GitLab) event.
    PullRequest,
    /// Anything else: acknowledged and ignored.
    Other(String),
}

impl Event {
    /// Reads `X-GitHub-Event`, `X-Gitlab-Event` or `X-Gitea-Event`.
    pub fn parse(provider: Provider, header: &str) -> Event {
        match (provider, header) {
            (Provider::GitHub | Provider::Gitea, "push") | (Provider::GitLab, "Push Hook") => {
                Event::Push
            }
            (Provider::GitHub | Provider::Gitea, "ping") => Event::Ping,
            (Provider::GitHub | Provider::Gitea, "pull_request")
            | (Provider::GitLab, "Merge Request Hook") => Event::PullRequest,
            (_, other) => Event::Other(other.chars().take(64).collect()),
        }
    }
}

/// Checks an HMAC-SHA256 signature of `body` in constant time. `signature` is hex, with or
/// without GitHub's `sha256=` prefix.
pub fn verify_hmac_sha256(secret: &str, body: &[u8], signature: &str) -> Result<(), WebhookError> {
    let hex_digest = signature.strip_prefix("sha256=").unwrap_or(signature);
    let expected = hex::decode(hex_digest.trim()).map_err(|_| WebhookError::BadSignature)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .expect("HMAC accepts a key of any length");
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| WebhookError::BadSignature)
}

/// Checks GitLab's `X-Gitlab-Token` (the secret itself) in constant time, by comparing the
/// MACs of both under a fixed key: equal-length digests whatever the token's length.
pub fn verify_token(secret: &str, token: &str) -> Result<(), WebhookError> {
    let digest = |s: &str| {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(b"kymo-token-compare").expect("any key length");
        mac.update(s.as_bytes());
        mac
    };
    digest(token)
        .verify(&digest(secret).finalize().into_bytes())
        .map_err(|_| WebhookError::BadSignature)
}

/// Hex HMAC-SHA256 of `body` under `secret`, as GitHub's `X-Hub-Signature-256` carries it
/// (without the prefix).
pub fn sign_hmac_sha256(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// The repository a payload speaks of: its names and addresses, to match a tracked one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteIdentity {
    /// `owner/name` (GitHub, Gitea) or `group/project` (GitLab).
    pub full_name: Option<String>,
    pub urls: Vec<String>,
}

impl RemoteIdentity {
    /// Whether a tracked repository's URL (or path) names this remote.
    pub fn matches(&self, tracked_url: &str) -> bool {
        let tracked = normalize_remote(tracked_url);
        if tracked.is_empty() {
            return false;
        }
        if self.urls.iter().any(|u| normalize_remote(u) == tracked) {
            return true;
        }
        self.full_name.as_deref().is_some_and(|full| {
            let full = full.trim_matches('/').to_ascii_lowercase();
            !full.is_empty()
                && (tracked.ends_with(&format!("/{full}"))
                    || tracked.ends_with(&format!(":{full}")))
        })
    }
}

/// A remote's address without the differences that do not change which repository it is: a
/// trailing `.git` or `/`, and the case of the whole (hosts and most forges ignore case).
fn normalize_remote(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    url.strip_suffix(".git").unwrap_or(url).to_ascii_lowercase()
}

/// A push, as far as kymo reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Push {
    /// The branch pushed to; `None` for tags and other refs.
    pub branch: Option<String>,
    /// The branch's head before the push; `None` for a new branch.
    pub before: Option<CommitSha>,
    /// The new head; `None` when the branch was deleted.
    pub after: Option<CommitSha>,
    pub remote: RemoteIdentity,
}

#[derive(Deserialize)]
struct PushPayload {
    #[serde(rename = "ref")]
    reference: String,
    #[serde(default)]
    before: Option<String>,
    after: String,
    #[serde(default)]
    repository: Option<RepositoryPayload>,
    /// GitLab names the repository `project`.
    #[serde(default)]
    project: Option<RepositoryPayload>,
}

#[derive(Deserialize, Default)]
struct RepositoryPayload {
    #[serde(default)]
    full_name: Option<String>,
    #[serde(default)]
    path_with_namespace: Option<String>,
    #[serde(default)]
    clone_url: Option<String>,
    #[serde(default)]
    ssh_url: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    git_http_url: Option<String>,
    #[serde(default)]
    git_ssh_url: Option<String>,
    #[serde(default)]
    web_url: Option<String>,
}

impl RepositoryPayload {
    fn identity(self) -> RemoteIdentity {
        let urls = [
            self.clone_url,
            self.ssh_url,
            self.html_url,
            self.git_http_url,
            self.git_ssh_url,
            self.web_url,
        ]
        .into_iter()
        .flatten()
        .filter(|u| !u.is_empty() && u.len() <= 2048)
        .collect();
        RemoteIdentity {
            full_name: self
                .full_name
                .or(self.path_with_namespace)
                .filter(|n| n.len() <= 512),
            urls,
        }
    }
}

#[derive(Deserialize)]
struct PingPayload {
    #[serde(default)]
    repository: Option<RepositoryPayload>,
}

/// Reads a push payload.
pub fn parse_push(provider: Provider, body: &[u8]) -> Result<Push, WebhookError> {
    let bad = |reason: String| WebhookError::BadPayload {
        provider: provider.as_str(),
        what: "push",
        reason,
    };
    let payload: PushPayload = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    let sha = |s: &str| -> Result<Option<CommitSha>, WebhookError> {
        if s.bytes().all(|b| b == b'0') {
            return Ok(None);
        }
        CommitSha::parse(s)
            .map(Some)
            .map_err(|e| bad(format!("{s:?}: {e}")))
    };
    let branch = payload
        .reference
        .strip_prefix("refs/heads/")
        .filter(|b| !b.is_empty() && b.len() <= 200)
        .map(str::to_owned);
    Ok(Push {
        branch,
        before: match payload.before.as_deref() {
            Some(before) => sha(before)?,
            None => None,
        },
        after: sha(&payload.after)?,
        remote: payload
            .repository
            .or(payload.project)
            .unwrap_or_default()
            .identity(),
    })
}

/// Reads the repository a ping (or any other event) names, to attribute the delivery.
pub fn parse_remote(body: &[u8]) -> RemoteIdentity {
    serde_json::from_slice::<PingPayload>(body)
        .ok()
        .and_then(|p| p.repository)
        .unwrap_or_default()
        .identity()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn a_signature_made_with_the_secret_verifies_and_any_other_does_not() {
        let body = br#"{"ref":"refs/heads/main"}"#;
        let signature = sign_hmac_sha256("s3cret-key", body);
        assert!(verify_hmac_sha256("s3cret-key", body, &format!("sha256={signature}")).is_ok());
        assert!(verify_hmac_sha256("s3cret-key", body, &signature).is_ok());
        assert_eq!(
            verify_hmac_sha256("other-key", body, &signature),
            Err(WebhookError::BadSignature)
        );
        assert!(verify_hmac_sha256("s3cret-key", b"{}", &signature).is_err());
        for forged in ["", "sha256=", "zz", &signature[..10], &"0".repeat(64)] {
            assert!(
                verify_hmac_sha256("s3cret-key", body, forged).is_err(),
                "{forged:?}"
            );
        }
    }

    #[test]
    fn gitlab_tokens_compare_whole() {
        assert!(verify_token("s3cret-key", "s3cret-key").is_ok());
        for wrong in ["", "s3cret", "s3cret-key ", "S3CRET-KEY"] {
            assert!(verify_token("s3cret-key", wrong).is_err(), "{wrong:?}");
        }
    }

    #[test]
    fn a_github_push_gives_branch_heads_and_remote() {
        let body = format!(
            r#"{{"ref":"refs/heads/main","before":"{}","after":"{SHA}",
                "repository":{{"full_name":"acme/kymo","clone_url":"https://github.com/acme/kymo.git"}},
                "commits":[{{"id":"{SHA}"}}]}}"#,
            "0".repeat(40)
        );
        let push = parse_push(Provider::GitHub, body.as_bytes()).unwrap();
        assert_eq!(push.branch.as_deref(), Some("main"));
        assert_eq!(push.before, None);
        assert_eq!(push.after.unwrap().as_str(), SHA);
        assert!(push.remote.matches("https://github.com/acme/kymo"));
        assert!(push.remote.matches("git@github.com:acme/kymo.git"));
        assert!(!push.remote.matches("https://github.com/acme/kymo-fork"));
        assert!(!push.remote.matches(""));
    }

    #[test]
    fn a_gitlab_push_names_its_project() {
        let body = format!(
            r#"{{"object_kind":"push","ref":"refs/heads/dev","before":"{SHA}","after":"{}",
                "project":{{"path_with_namespace":"group/sub/proj","git_http_url":"https://gl.example/group/sub/proj.git"}}}}"#,
            "0".repeat(40)
        );
        let push = parse_push(Provider::GitLab, body.as_bytes()).unwrap();
        assert_eq!(push.branch.as_deref(), Some("dev"));
        assert_eq!(push.after, None, "a deleted branch has no new head");
        assert!(push.remote.matches("https://GL.example/group/sub/proj/"));
    }

    #[test]
    fn tags_are_not_branches_and_malformed_payloads_say_why() {
        let body = format!(r#"{{"ref":"refs/tags/v1","after":"{SHA}"}}"#);
        assert_eq!(
            parse_push(Provider::Gitea, body.as_bytes()).unwrap().branch,
            None
        );
        for bad in [
            &b"not json"[..],
            br#"{"ref":"refs/heads/main"}"#,
            br#"{"ref":"refs/heads/main","after":"xyz"}"#,
            br#"{"ref":7,"after":"0"}"#,
            &[0xff, 0xfe, 0x00][..],
        ] {
            let err = parse_push(Provider::GitHub, bad).unwrap_err();
            assert!(err.to_string().contains("github push"), "{err}");
        }
        let deep = "[".repeat(10_000);
        assert!(parse_push(Provider::GitHub, deep.as_bytes()).is_err());
    }

    #[test]
    fn events_are_read_per_provider() {
        assert_eq!(Event::parse(Provider::GitHub, "push"), Event::Push);
        assert_eq!(Event::parse(Provider::GitLab, "Push Hook"), Event::Push);
        assert_eq!(Event::parse(Provider::Gitea, "ping"), Event::Ping);
        assert_eq!(
            Event::parse(Provider::GitLab, "Merge Request Hook"),
            Event::PullRequest
        );
        assert_eq!(
            Event::parse(Provider::Gitea, "pull_request"),
            Event::PullRequest
        );
        assert_eq!(
            Event::parse(Provider::GitLab, "push"),
            Event::Other("push".into())
        );
    }
}
