//! Alerts: messages to a repository's channels (generic JSON, Slack, Discord) when a new
//! regression is final, and commit statuses on GitHub or Gitea as a commit's jobs progress.
//!
//! Nothing is sent from a request handler: the two seams below only write outbox rows
//! (kymo-core's `db::alerts`), and [`DeliveryLoop`] sends them, retrying with back-off and
//! logging every attempt. This module must not know how regressions are found or how jobs
//! run; it reads their stored results.

mod delivery;
pub mod message;
mod status;

pub use delivery::{
    DeliveryLoop, FIRST_BACKOFF_SECONDS, MAX_ATTEMPTS, MAX_BACKOFF_SECONDS, backoff_seconds,
    deliver_once, next_step,
};
pub use status::{STATUS_CONTEXT, commit_state, commit_status_changed, status_request};

use std::net::SocketAddr;

use kymo_core::db::validate_outbound_url;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::alerts::message::{AlertFacts, Confidence, Culprit};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Queues one message per alert channel of each regression's repository. Improvements and
/// regressions the analysis no longer finds are skipped; a regression already queued for a
/// channel is never queued again, so calling this twice sends one message.
///
/// Call it once a regression is final (after bisection has pinned its culprit, when it will).
pub async fn regressions_found(state: &AppState, regression_ids: &[i64]) -> AppResult<()> {
    let added = state
        .db
        .enqueue_alert_deliveries(regression_ids, state.now())
        .await?;
    if added > 0 {
        tracing::info!(deliveries = added, "alerts queued");
    }
    Ok(())
}

/// A request to send: where, with which headers, and the JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

/// What a message says about a regression, read when it is sent (so a culprit found by
/// bisection meanwhile is named); `None` when the analysis no longer finds it.
async fn alert_facts(state: &AppState, regression_id: i64) -> AppResult<Option<AlertFacts>> {
    let r = state.db.regression(regression_id).await?;
    if !r.active {
        return Ok(None);
    }
    let span = state.db.regression_span(regression_id).await?;
    let culprit = match (&r.previous_sha, span) {
        (Some(last_good), Some(commits)) if commits > 1 => Culprit::Range {
            last_good: last_good.clone(),
            first_bad: r.sha.clone(),
            commits,
        },
        _ => Culprit::Commit {
            sha: r.sha.clone(),
            summary: r.message.lines().next().unwrap_or_default().to_owned(),
        },
    };
    let base = &state.public_url;
    let spec = match &r.previous_sha {
        Some(previous) => format!("{previous}...{}", r.sha),
        None => r.sha.clone(),
    };
    Ok(Some(AlertFacts {
        regression_url: format!("{base}/repos/{}/regressions/{}", r.repository, r.id),
        compare_url: format!("{base}/repos/{}/compare/{spec}", r.repository),
        regression_id: r.id,
        repository: r.repository,
        benchmark: r.benchmark,
        metric: r.metric,
        unit: r.unit,
        machine: r.machine,
        change_pct: r.change_pct,
        baseline: r.baseline,
        value: r.value,
        confidence: Confidence {
            p_value: r.p_value,
            ci_low_pct: r.ci_low_pct,
            ci_high_pct: r.ci_high_pct,
        },
        confirmation: r.confirmation,
        culprit,
    }))
}

/// `POST /api/v1/repos/{repo}/alerts`
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAlertChannel {
    pub url: String,
    /// `json` (default), `slack` or `discord`.
    #[serde(default)]
    pub kind: Option<String>,
}

/// A channel as the API and pages show it: the URL's secret part hidden.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AlertChannelView {
    pub id: i64,
    pub kind: String,
    pub url: String,
    pub created_at: i64,
}

/// `PUT /api/v1/repos/{repo}/commit-status`
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusTargetRequest {
    /// `github`, `gitea` (and Forgejo) or `gitlab`.
    pub kind: String,
    /// The forge's API root; `https://api.github.com` by default for GitHub.
    #[serde(default)]
    pub api_url: Option<String>,
    /// `owner/name` on the forge.
    pub slug: String,
    pub token: String,
}

/// A commit-status target as the API shows it: the token reduced to a hint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StatusTargetView {
    pub kind: String,
    pub api_url: String,
    pub slug: String,
    pub token_hint: String,
}

/// GitHub's API root, the default for kind `github`.
pub const GITHUB_API: &str = "https://api.github.com";

/// GitLab.com's API root, the default for kind `gitlab`.
pub const GITLAB_API: &str = "https://gitlab.com/api/v4";

/// `https://hooks.slack.com/services/T0/B0/secret` → `https://hooks.slack.com/…cret`:
/// channel URLs carry their secret in the path, so only the host and a hint are shown.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "…".into();
    };
    let (host, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let tail: String = {
        let chars: Vec<char> = path.chars().collect();
        if chars.len() > 8 {
            chars[chars.len() - 4..].iter().collect()
        } else {
            String::new()
        }
    };
    format!("{scheme}://{host}/…{tail}")
}

/// A token reduced to its last four characters, when it is long enough to spare them.
pub fn token_hint(token: &str) -> String {
    let chars: Vec<char> = token.chars().collect();
    if chars.len() >= 12 {
        format!("…{}", chars[chars.len() - 4..].iter().collect::<String>())
    } else {
        "…".into()
    }
}

/// The base of absolute links in alerts: `--public-url` without its trailing slash, checked,
/// or `http://ADDRESS` of the listener (with `localhost` for an unspecified address).
pub fn public_url(given: Option<&str>, listening: SocketAddr) -> AppResult<String> {
    match given {
        Some(url) => {
            let url = url.trim_end_matches('/');
            validate_outbound_url(url)?;
            // It is put into chat markup (`<url|text>`, `[text](url)`) as it is.
            if url.contains(['?', '#', '|', '<', '>', '"', '(', ')', '[', ']']) || url.len() > 512 {
                return Err(AppError::BadRequest(format!(
                    "public url {url:?} must be a plain http(s) base URL of at most 512 bytes"
                )));
            }
            Ok(url.to_owned())
        }
        None if listening.ip().is_unspecified() => {
            Ok(format!("http://localhost:{}", listening.port()))
        }
        None => Ok(format!("http://{listening}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_urls_and_tokens_are_shown_without_their_secret() {
        assert_eq!(
            redact_url("https://hooks.slack.com/services/T0/B0/abcdefgh1234"),
            "https://hooks.slack.com/…1234"
        );
        assert_eq!(redact_url("http://127.0.0.1:9/x"), "http://127.0.0.1:9/…");
        assert_eq!(token_hint("ghp_0123456789abcd"), "…abcd");
        assert_eq!(token_hint("short"), "…");
    }

    #[test]
    fn the_public_url_defaults_to_the_listener() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            public_url(None, at("127.0.0.1:8080")).unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            public_url(None, at("0.0.0.0:80")).unwrap(),
            "http://localhost:80"
        );
        assert_eq!(
            public_url(Some("https://kymo.example/"), at("0.0.0.0:80")).unwrap(),
            "https://kymo.example"
        );
        assert!(public_url(Some("kymo.example"), at("0.0.0.0:80")).is_err());
        assert!(public_url(Some("https://k.example/?x=1"), at("0.0.0.0:80")).is_err());
        assert!(public_url(Some("https://k.example/a|b"), at("0.0.0.0:80")).is_err());
    }
}
