//! The delivery loop: every tick, the outbox rows that are due are POSTed (in parallel, each
//! with a timeout), every attempt is logged, and failures are retried with exponential
//! back-off until they succeed or run out of attempts. Time is the injectable clock's, so
//! tests drive [`deliver_once`] with a `ManualClock` and never sleep.

use std::sync::Arc;
use std::time::Duration;

use kymo_core::db::{AttemptOutcome, NextStep, OutboxItem};
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};

use super::message::AlertFacts;
use super::{Outgoing, alert_facts, message, status};
use crate::error::AppResult;
use crate::pages::format::change_size;
use crate::state::AppState;

/// Attempts before a message is given up on.
pub const MAX_ATTEMPTS: i64 = 10;
/// The first retry's delay; each later one doubles it, up to [`MAX_BACKOFF_SECONDS`].
pub const FIRST_BACKOFF_SECONDS: i64 = 1;
pub const MAX_BACKOFF_SECONDS: i64 = 300;
/// How long one POST may take, connection included.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the loop looks for due rows: often enough that a new regression's message
/// leaves well within a second (two indexed reads per tick).
const TICK: Duration = Duration::from_millis(250);
/// Rows of each outbox sent per tick.
const BATCH: i64 = 32;
/// How much of a refusing answer the log keeps.
const MAX_LOGGED_ANSWER: usize = 300;

/// Outbox rows one request answers for, each with the number of this attempt at it.
type Rows = Vec<(OutboxItem, i64)>;
/// A request to send, or the reason its rows are no longer to be sent.
type Prepared = (Rows, Result<Outgoing, &'static str>);

/// Seconds to wait after failed attempt number `attempt` (1-based): 1, 2, 4, … capped.
pub fn backoff_seconds(attempt: i64) -> i64 {
    let doublings = (attempt - 1).clamp(0, 30) as u32;
    (FIRST_BACKOFF_SECONDS << doublings).min(MAX_BACKOFF_SECONDS)
}

/// What follows attempt number `attempt`: done on 2xx; given up on an answer that retrying
/// cannot change (a 4xx other than 408 and 429, or a redirect); otherwise retried later, up
/// to [`MAX_ATTEMPTS`].
pub fn next_step(outcome: &AttemptOutcome, attempt: i64, now: i64) -> NextStep {
    match outcome.http_status {
        Some(200..=299) => NextStep::Delivered,
        Some(408 | 429) | Some(500..) | None if attempt < MAX_ATTEMPTS => {
            NextStep::RetryAt(now + backoff_seconds(attempt))
        }
        _ => NextStep::Failed,
    }
}

/// The background loop, started by `kymo serve` and stopped on shutdown.
pub struct DeliveryLoop {
    stop: Arc<Notify>,
    task: JoinHandle<()>,
}

impl DeliveryLoop {
    pub fn spawn(state: AppState) -> Self {
        let stop = Arc::new(Notify::new());
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stopped.notified() => break,
                    () = tokio::time::sleep(TICK) => {
                        if let Err(err) = deliver_once(&state).await {
                            tracing::warn!(error = %err, "alert delivery failed");
                        }
                        if let Err(err) = crate::pulls::feedback::publish_due(&state).await {
                            tracing::warn!(error = %err, "pull request feedback failed");
                        }
                    }
                }
            }
        });
        Self { stop, task }
    }

    /// Lets a tick in progress finish its sends, then stops.
    pub async fn stop(self) {
        self.stop.notify_one();
        let _ = self.task.await;
    }
}

/// One tick: sends every due row of both outboxes and records the outcomes. Due alerts for the
/// same channel and culprit commit go out as one message (the worst regression, naming the
/// others), and its outcome is recorded on each of their rows. Returns how many rows were
/// attempted.
pub async fn deliver_once(state: &AppState) -> AppResult<usize> {
    let now = state.now();
    // Each request, with the rows it answers for, or the reason they are no longer to be sent.
    let mut prepared: Vec<Prepared> = Vec::new();
    let mut alerts: Vec<AlertGroup> = Vec::new();
    for due in state.db.due_alert_deliveries(now, BATCH).await? {
        let row = (OutboxItem::Alert(due.id), due.attempts + 1);
        match alert_facts(state, due.regression_id).await? {
            Some(facts) => AlertGroup::add(&mut alerts, due.url, due.kind, row, facts),
            None => prepared.push((
                vec![row],
                Err("not sent: the analysis no longer finds this regression"),
            )),
        }
    }
    prepared.extend(alerts.into_iter().map(AlertGroup::into_request));
    for due in state.db.due_status_posts(now, BATCH).await? {
        let target_url = format!(
            "{}/repos/{}/commits/{}",
            state.public_url, due.repository, due.sha
        );
        let request = due.target.map(|target| {
            status::status_request(
                &target,
                &due.sha,
                &due.commit_state,
                &due.description,
                &target_url,
            )
        });
        let request = request.ok_or("not sent: the repository has no commit-status target");
        prepared.push((
            vec![(OutboxItem::CommitStatus(due.id), due.attempts + 1)],
            request,
        ));
    }
    let agent = agent();
    let mut sends: JoinSet<(Rows, AttemptOutcome)> = JoinSet::new();
    for (rows, request) in prepared {
        match request {
            Ok(request) => {
                let agent = agent.clone();
                sends.spawn(async move { (rows, send(agent, request).await) });
            }
            Err(reason) => {
                let outcome = AttemptOutcome {
                    http_status: None,
                    error: Some(reason.to_owned()),
                };
                for (item, attempt) in rows {
                    state
                        .db
                        .record_attempt(item, attempt, &outcome, NextStep::Cancelled, now)
                        .await?;
                }
            }
        }
    }
    // Every outcome is recorded even when one cannot be: an unrecorded send is sent again.
    let mut attempts = 0;
    let mut first_error = None;
    while let Some(done) = sends.join_next().await {
        let (rows, outcome) = done.map_err(anyhow::Error::from)?;
        let now = state.now();
        for (item, attempt) in rows {
            let next = next_step(&outcome, attempt, now);
            if next == NextStep::Failed {
                tracing::warn!(?item, attempt, ?outcome, "alert given up");
            }
            match state
                .db
                .record_attempt(item, attempt, &outcome, next, now)
                .await
            {
                Ok(()) => attempts += 1,
                Err(err) => {
                    tracing::error!(?item, error = %err, "cannot record a delivery attempt");
                    first_error.get_or_insert(err);
                }
            }
        }
    }
    match first_error {
        Some(err) => Err(err.into()),
        None => Ok(attempts),
    }
}

/// Due alerts of one channel about one culprit: they leave as one message.
struct AlertGroup {
    url: String,
    kind: String,
    rows: Rows,
    facts: Vec<AlertFacts>,
}

impl AlertGroup {
    /// Puts a due row into the group of its channel and culprit, or starts one.
    fn add(
        groups: &mut Vec<AlertGroup>,
        url: String,
        kind: String,
        row: (OutboxItem, i64),
        facts: AlertFacts,
    ) {
        let same = |g: &&mut AlertGroup| {
            g.url == url
                && g.kind == kind
                && g.facts[0].repository == facts.repository
                && g.facts[0].culprit == facts.culprit
        };
        match groups.iter_mut().find(same) {
            Some(group) => {
                group.rows.push(row);
                group.facts.push(facts);
            }
            None => groups.push(AlertGroup {
                url,
                kind,
                rows: vec![row],
                facts: vec![facts],
            }),
        }
    }

    /// The message: about the biggest change (a throughput that fell 99 % before a time that
    /// rose 200 %), naming the others, biggest first.
    fn into_request(mut self) -> Prepared {
        self.facts
            .sort_by(|a, b| change_size(b.change_pct).total_cmp(&change_size(a.change_pct)));
        let request = Outgoing {
            url: self.url,
            headers: Vec::new(),
            body: message::alert_body(&self.kind, &self.facts[0], &self.facts[1..]),
        };
        (self.rows, Ok(request))
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(SEND_TIMEOUT))
        .http_status_as_error(false)
        // A webhook that moved is a configuration to fix, not a place to send tokens to.
        .max_redirects(0)
        .user_agent(concat!("kymo/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// POSTs one request off the async runtime; never fails, the outcome says what happened.
async fn send(agent: ureq::Agent, request: Outgoing) -> AttemptOutcome {
    let url = request.url.clone();
    let sent = tokio::task::spawn_blocking(move || {
        let mut post = agent.post(&request.url);
        for (name, value) in &request.headers {
            post = post.header(*name, value);
        }
        match post.send_json(&request.body) {
            Ok(mut response) => {
                let status = response.status().as_u16();
                let error = (!response.status().is_success()).then(|| {
                    let answer = response
                        .body_mut()
                        .with_config()
                        .limit(64 * 1024)
                        .read_to_string()
                        .unwrap_or_default();
                    let answer: String = answer.chars().take(MAX_LOGGED_ANSWER).collect();
                    format!("answered {status}: {answer}")
                });
                AttemptOutcome {
                    http_status: Some(i64::from(status)),
                    error,
                }
            }
            Err(err) => AttemptOutcome {
                http_status: None,
                error: Some(err.to_string()),
            },
        }
    })
    .await;
    sent.unwrap_or_else(|err| AttemptOutcome {
        http_status: None,
        error: Some(format!("sending to {url} panicked: {err}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: Option<i64>) -> AttemptOutcome {
        AttemptOutcome {
            http_status: status,
            error: None,
        }
    }

    #[test]
    fn back_off_doubles_from_one_second_up_to_the_cap() {
        let delays: Vec<i64> = (1..=10).map(backoff_seconds).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        assert_eq!(backoff_seconds(1000), MAX_BACKOFF_SECONDS);
    }

    #[test]
    fn transient_failures_are_retried_and_permanent_ones_are_not() {
        assert_eq!(next_step(&answered(Some(204)), 1, 100), NextStep::Delivered);
        assert_eq!(
            next_step(&answered(Some(500)), 1, 100),
            NextStep::RetryAt(101)
        );
        assert_eq!(next_step(&answered(None), 3, 100), NextStep::RetryAt(104));
        assert_eq!(
            next_step(&answered(Some(429)), 2, 100),
            NextStep::RetryAt(102)
        );
        assert_eq!(next_step(&answered(Some(404)), 1, 100), NextStep::Failed);
        assert_eq!(next_step(&answered(Some(301)), 1, 100), NextStep::Failed);
        assert_eq!(
            next_step(&answered(Some(503)), MAX_ATTEMPTS, 100),
            NextStep::Failed
        );
    }
}
