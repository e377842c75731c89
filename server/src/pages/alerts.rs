//! A repository's alerts page: its channels, its commit-status target and the delivery log.

use askama::Template;
use axum::extract::{Path, State};
use kymo_core::db::AttemptRow;

use super::format::utc;
use super::{PageResult, render};
use crate::alerts::{AlertChannelView, StatusTargetView};
use crate::api::{LOG_LIMIT, target_view};
use crate::state::AppState;

/// One row of the log: an alert delivery or a commit-status post.
struct LogView {
    what: String,
    link: String,
    state: String,
    badge: &'static str,
    attempts: i64,
    created: String,
    /// When a pending row is tried next, or when it finished.
    when: String,
    log: Vec<String>,
}

#[derive(Template)]
#[template(path = "alerts.html")]
struct AlertsPage {
    repo: String,
    /// Each channel with the date it was added.
    channels: Vec<(AlertChannelView, String)>,
    target: Option<StatusTargetView>,
    /// The log's two tables: alert deliveries, then commit-status posts.
    logs: Vec<(&'static str, Vec<LogView>)>,
}

/// The badge style of an outbox state, in the colours the queue page uses.
fn badge(state: &str) -> &'static str {
    match state {
        "delivered" => "succeeded",
        "failed" => "failed",
        "pending" => "queued",
        _ => "",
    }
}

fn when(state: &str, next_attempt_at: i64, finished_at: Option<i64>) -> String {
    match (state, finished_at) {
        ("pending", _) => format!("next try {}", utc(next_attempt_at)),
        (_, Some(at)) => utc(at),
        _ => String::new(),
    }
}

fn log_lines(log: &[AttemptRow]) -> Vec<String> {
    log.iter()
        .map(|a| {
            let answer = a
                .http_status
                .map_or_else(|| "no answer".to_owned(), |s| format!("HTTP {s}"));
            match &a.error {
                Some(error) => format!("#{} {} · {answer} · {error}", a.attempt, utc(a.at)),
                None => format!("#{} {} · {answer}", a.attempt, utc(a.at)),
            }
        })
        .collect()
}

pub async fn alerts(State(state): State<AppState>, Path(repo_name): Path<String>) -> PageResult {
    let repo = state.db.repository(&repo_name).await?;
    let channels = state.db.alert_channels(repo.id).await?;
    let deliveries = state.db.alert_deliveries(repo.id, LOG_LIMIT).await?;
    let statuses = state.db.status_posts(repo.id, LOG_LIMIT).await?;
    render(&AlertsPage {
        channels: channels
            .into_iter()
            .map(|c| (AlertChannelView::from(c.clone()), utc(c.created_at)))
            .collect(),
        target: state
            .db
            .commit_status_target(repo.id)
            .await?
            .map(target_view),
        logs: vec![
            (
                "Alert deliveries",
                deliveries
                    .into_iter()
                    .map(|d| LogView {
                        what: format!(
                            "{} to {} channel {}",
                            d.benchmark, d.channel_kind, d.channel_id
                        ),
                        link: format!("/repos/{}/regressions/{}", repo.name, d.regression_id),
                        badge: badge(&d.state),
                        when: when(&d.state, d.next_attempt_at, d.finished_at),
                        state: d.state,
                        attempts: d.attempts,
                        created: utc(d.created_at),
                        log: log_lines(&d.log),
                    })
                    .collect(),
            ),
            (
                "Commit-status posts",
                statuses
                    .into_iter()
                    .map(|p| LogView {
                        what: format!(
                            "{} {}: {}",
                            &p.sha[..10.min(p.sha.len())],
                            p.commit_state,
                            p.description
                        ),
                        link: format!("/repos/{}/commits/{}", repo.name, p.sha),
                        badge: badge(&p.state),
                        when: when(&p.state, p.created_at, p.finished_at),
                        state: p.state,
                        attempts: p.attempts,
                        created: utc(p.created_at),
                        log: log_lines(&p.log),
                    })
                    .collect(),
            ),
        ],
        repo: repo.name,
    })
}
