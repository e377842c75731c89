//! Feedback where the review happens: a status on the pull request's head (pending while its
//! comparison runs, failure on a regression, success otherwise) and one comment per request,
//! created with the first result and edited in place afterwards.
//!
//! Like alerts, nothing is sent from a request handler: a request's feedback falls due in the
//! database, and the delivery loop publishes it (retrying with back-off), so a forge that is
//! down delays feedback and loses none.

use kymo_core::db::DuePullFeedback;
use serde_json::Value;

use crate::alerts::{backoff_seconds, status_request};
use crate::compare::CompareReport;
use crate::error::AppResult;
use crate::forge::{ForgeRequest, comment_request, created_comment_id};
use crate::interleaved::{ComparisonView, comparison_view};
use crate::pulls::comment::comment_text;
use crate::state::AppState;

/// Requests whose feedback is published per tick.
const BATCH: i64 = 16;
/// Attempts before a request's feedback is given up on (until its next result).
const MAX_ATTEMPTS: i64 = 8;
/// How long one call to a forge may take.
const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The status a comparison gives its head, with a one-line description; `None` once it was
/// cancelled (a newer head replaced it, or the request closed).
pub fn head_status(view: &ComparisonView) -> Option<(&'static str, String)> {
    let c = &view.comparison;
    Some(match (c.state.as_str(), &view.report) {
        ("queued" | "running", _) => (
            "pending",
            match c.budget_seconds {
                Some(_) => format!(
                    "measuring head and {} interleaved until decided, at most {} rounds",
                    c.baseline, c.rounds
                ),
                None => format!(
                    "measuring head and {} interleaved, {} rounds",
                    c.baseline, c.rounds
                ),
            },
        ),
        ("succeeded", Some(report)) if report.regressed > 0 => (
            "failure",
            format!(
                "{}, {}",
                plural(report.regressed, "regression"),
                summary(report)
            ),
        ),
        ("succeeded", Some(report)) => ("success", format!("no regressions, {}", summary(report))),
        ("failed", _) => ("error", "the comparison failed".to_owned()),
        _ => return None,
    })
}

fn plural(n: usize, one: &str) -> String {
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

fn summary(report: &CompareReport) -> String {
    let geomean = report
        .geomean_ratio
        .map(|g| format!(", geometric mean {:+.1} %", (g - 1.0) * 100.0))
        .unwrap_or_default();
    format!(
        "{} improved, {} unchanged{geomean}",
        report.improved, report.unchanged
    )
}

/// Whether a comparison found anything to say in a comment of a repository that comments
/// only on changes.
fn changed(view: &ComparisonView) -> bool {
    view.report
        .as_ref()
        .is_some_and(|r| r.regressed + r.improved > 0)
}

/// Publishes the feedback of every pull request whose feedback is due. Returns how many it
/// published.
pub async fn publish_due(state: &AppState) -> AppResult<usize> {
    let due = state.db.due_pull_feedback(state.now(), BATCH).await?;
    let mut published = 0;
    for pull in due {
        let outcome = publish(state, &pull).await;
        let now = state.now();
        match &outcome {
            Ok(comment_id) => {
                (state.db)
                    .record_pull_feedback(pull.id, pull.due_at, Ok(comment_id.as_deref()))
                    .await?;
                published += 1;
            }
            Err(error) => {
                let attempt = pull.attempts + 1;
                let retry = (attempt < MAX_ATTEMPTS).then(|| now + backoff_seconds(attempt));
                tracing::warn!(
                    pull = pull.number,
                    repo = pull.repository,
                    error,
                    "pull request feedback failed"
                );
                (state.db)
                    .record_pull_feedback(pull.id, pull.due_at, Err((error.as_str(), retry)))
                    .await?;
            }
        }
    }
    Ok(published)
}

/// Posts the status and creates or edits the comment; the comment's id when one was created.
async fn publish(state: &AppState, pull: &DuePullFeedback) -> Result<Option<String>, String> {
    let internal = |e: crate::error::AppError| e.to_string();
    let target = (state.db)
        .commit_status_target(pull.repository_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the repository has no forge credentials: set them with `kymo status set`")?;
    if target.kind != pull.provider {
        return Err(format!(
            "the pull request is on {}, but the repository's forge credentials are for {}",
            pull.provider, target.kind
        ));
    }
    let Some(comparison) = pull.comparison else {
        return Ok(None);
    };
    let repo = state
        .db
        .repository(&pull.repository)
        .await
        .map_err(|e| e.to_string())?;
    let row = (state.db)
        .comparison(repo.id, comparison)
        .await
        .map_err(|e| e.to_string())?;
    let view = comparison_view(state, &repo, row).await.map_err(internal)?;
    let link = format!(
        "{}/repos/{}/comparisons/{comparison}",
        state.public_url, pull.repository
    );
    if let Some((status, description)) = head_status(&view) {
        let post = status_request(&target, &view.comparison.head, status, &description, &link);
        send(ForgeRequest {
            method: "POST",
            url: post.url,
            headers: post.headers,
            body: post.body,
        })
        .await?;
    }
    let finished = matches!(view.comparison.state.as_str(), "succeeded" | "failed");
    let first = pull.comment_id.is_none();
    let wanted =
        view.comparison.state == "succeeded" && (pull.pull_comments == "always" || changed(&view));
    if !finished || (first && !wanted) {
        return Ok(None);
    }
    let text = comment_text(&view, &link);
    let request = comment_request(&target, pull.number, pull.comment_id.as_deref(), &text);
    let answer = send(request).await?;
    if first {
        return created_comment_id(&answer)
            .map(Some)
            .ok_or_else(|| "the forge's answer to a new comment names no comment id".to_owned());
    }
    Ok(None)
}

/// Sends one request to a forge; its JSON answer, or why it failed.
async fn send(request: ForgeRequest) -> Result<Value, String> {
    let sent = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(SEND_TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("kymo/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        let mut call = match request.method {
            "PATCH" => agent.patch(&request.url),
            "PUT" => agent.put(&request.url),
            _ => agent.post(&request.url),
        };
        for (name, value) in &request.headers {
            call = call.header(*name, value);
        }
        let mut response = call
            .send_json(&request.body)
            .map_err(|e| format!("{} {}: {e}", request.method, request.url))?;
        let status = response.status();
        let text = (response.body_mut().with_config().limit(256 * 1024))
            .read_to_string()
            .unwrap_or_default();
        if !status.is_success() {
            let answer: String = text.chars().take(300).collect();
            return Err(format!(
                "{} {} answered {status}: {answer}",
                request.method, request.url
            ));
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    })
    .await;
    sent.map_err(|e| format!("sending panicked: {e}"))?
}

#[cfg(test)]
pub(crate) mod tests {
    use kymo_core::db::{ComparisonRow, RepositoryRow};
    use kymo_core::model::Direction;
    use kymo_core::stats::{NoiseModel, Sensitivity, VerdictKind, compare};

    use super::*;
    use crate::compare::{CompareRow, summarise};

    pub(crate) fn row(benchmark: &str, base: f64, head: f64, kind: VerdictKind) -> CompareRow {
        let mut verdict = compare(
            &[base, base * 1.01, base * 0.99, base, base],
            &[head, head * 1.01, head * 0.99, head, head],
            Direction::Lower,
            &NoiseModel::unknown(),
            &Sensitivity::default(),
        );
        verdict.kind = kind;
        CompareRow {
            benchmark: benchmark.into(),
            metric: "time".into(),
            unit: "ns".into(),
            direction: "lower".into(),
            machine: "m".into(),
            verdict,
        }
    }

    pub(crate) fn view(state: &str, rows: Option<Vec<CompareRow>>) -> ComparisonView {
        let repo = RepositoryRow {
            id: 1,
            name: "app".into(),
            url: String::new(),
            branch: "main".into(),
            created_at: 0,
            poll_seconds: None,
            machine_labels: String::new(),
        };
        let (base, head) = ("a".repeat(40), "b".repeat(40));
        ComparisonView {
            comparison: ComparisonRow {
                id: 4,
                repository: "app".into(),
                origin: "pull".into(),
                label: "#7 faster".into(),
                base: base.clone(),
                head: head.clone(),
                baseline: "merge-base of main".into(),
                rounds: 3,
                budget_seconds: None,
                state: state.into(),
                phase: None,
                error: (state == "failed").then(|| "head: suite \"s\" failed".into()),
                machine: Some("m".into()),
                created_at: 0,
                finished_at: None,
                measured: "interleaved".into(),
            },
            interleaved: true,
            rounds_run: if rows.is_some() { 3 } else { 0 },
            report: rows.map(|rows| summarise(&repo, base, head, "merge-base".into(), rows)),
        }
    }

    #[test]
    fn the_heads_status_follows_the_comparison() {
        let status = |v: &ComparisonView| head_status(v).map(|s| s.0);
        assert_eq!(status(&view("queued", None)), Some("pending"));
        assert_eq!(status(&view("running", None)), Some("pending"));
        let slower = view(
            "succeeded",
            Some(vec![row("parse", 100.0, 130.0, VerdictKind::Regression)]),
        );
        assert_eq!(status(&slower), Some("failure"));
        assert!(head_status(&slower).unwrap().1.starts_with("1 regression,"));
        let same = view(
            "succeeded",
            Some(vec![row("parse", 100.0, 100.0, VerdictKind::NoChange)]),
        );
        assert_eq!(status(&same), Some("success"));
        assert_eq!(status(&view("failed", None)), Some("error"));
        assert_eq!(status(&view("cancelled", None)), None);
        assert!(changed(&slower));
        assert!(!changed(&same));
    }
}
