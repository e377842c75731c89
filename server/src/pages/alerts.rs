//! A repository's alerts page: its channels, its commit-status target and the delivery log.

use askama::Template;
use axum::extract::{Path, State};
use kymo_core::db::OutboxProgress;

use super::access::Viewer;
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

impl LogView {
    /// A row saying `what`, linking to `link`, with the outbox row's progress.
    fn new(what: String, link: String, progress: OutboxProgress) -> Self {
        let badge = match progress.state.as_str() {
            // The queue page's colours.
            "delivered" => "succeeded",
            "failed" => "failed",
            "pending" => "queued",
            _ => "",
        };
        let when = match (progress.state.as_str(), progress.finished_at) {
            ("pending", _) => format!("next try {}", utc(progress.next_attempt_at)),
            (_, Some(at)) => utc(at),
            _ => String::new(),
        };
        let log = progress
            .log
            .iter()
            .map(|a| {
                let answer = a
                    .http_status
                    .map_or_else(|| "no answer".to_owned(), |s| format!("HTTP {s}"));
                let error = a.error.as_deref().map(|e| format!(" · {e}"));
                format!(
                    "#{} {} · {answer}{}",
                    a.attempt,
                    utc(a.at),
                    error.unwrap_or_default()
                )
            })
            .collect();
        LogView {
            what,
            link,
            badge,
            when,
            created: utc(progress.created_at),
            state: progress.state,
            attempts: progress.attempts,
            log,
        }
    }
}

pub async fn alerts(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(repo_name): Path<String>,
) -> PageResult {
    let repo = state.db.repository(&repo_name).await?;
    let channels = state.db.alert_channels(repo.id).await?;
    let mut deliveries = state.db.alert_deliveries(repo.id, LOG_LIMIT).await?;
    let mut statuses = state.db.status_posts(repo.id, LOG_LIMIT).await?;
    if !viewer.caller.is_admin() {
        deliveries
            .iter_mut()
            .for_each(|d| d.progress.hide_answers());
        statuses.iter_mut().for_each(|s| s.progress.hide_answers());
    }
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
                    .map(|d| {
                        let what = format!(
                            "{} to {} channel {}",
                            d.benchmark, d.channel_kind, d.channel_id
                        );
                        let link = format!("/repos/{}/regressions/{}", repo.name, d.regression_id);
                        LogView::new(what, link, d.progress)
                    })
                    .collect(),
            ),
            (
                "Commit-status posts",
                statuses
                    .into_iter()
                    .map(|p| {
                        let short = &p.sha[..10.min(p.sha.len())];
                        let what = format!("{short} {}: {}", p.commit_state, p.description);
                        let link = format!("/repos/{}/commits/{}", repo.name, p.sha);
                        LogView::new(what, link, p.progress)
                    })
                    .collect(),
            ),
        ],
        repo: repo.name,
    })
}
