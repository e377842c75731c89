//! Pages of continuous operation: the webhook deliveries, the queue's cancel and retry
//! buttons, and the repository page's backfill form.

use askama::Template;
use axum::extract::{Path, State};
use axum::response::Redirect;

use super::format::utc;
use super::{PageError, PageResult, render};
use kymo_core::protocol::BackfillRequest;

use crate::auth::{AdminForm, NoFields};
use crate::backfill::Backfill;
use crate::error::AppError;
use crate::state::AppState;

/// The repository page's "measure history" form: the last N commits, or a range `A..B`,
/// thinned by `every`. Empty fields count as not given.
#[derive(Debug, serde::Deserialize)]
pub struct BackfillForm {
    #[serde(default)]
    last: String,
    #[serde(default)]
    range: String,
    #[serde(default)]
    every: String,
}

impl BackfillForm {
    fn request(&self) -> Result<BackfillRequest, AppError> {
        let number = |field: &str, text: &str| -> Result<Option<u32>, AppError> {
            let text = text.trim();
            if text.is_empty() {
                return Ok(None);
            }
            text.parse().map(Some).map_err(|_| {
                AppError::BadRequest(format!("{field} must be a whole number, not {text:?}"))
            })
        };
        let (from, to) = match self.range.trim() {
            "" => (None, None),
            range => match range.split_once("..") {
                Some((from, to)) => (Some(from.to_owned()), Some(to.to_owned())),
                None => {
                    return Err(AppError::BadRequest(format!(
                        "the range {range:?} is not of the form A..B"
                    )));
                }
            },
        };
        Ok(BackfillRequest {
            last: number("last", &self.last)?,
            from,
            to,
            every: number("every", &self.every)?,
        })
    }
}

pub async fn backfill(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    form: AdminForm<BackfillForm>,
) -> Result<Redirect, PageError> {
    let repo = state.db.repository(&repo).await?;
    let backfill = Backfill::from_request(&form.form.request()?)?;
    crate::backfill::backfill(&state, &repo, backfill).await?;
    Ok(Redirect::to("/queue"))
}

/// The queue page's cancel button.
pub async fn cancel_job(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    _: AdminForm<NoFields>,
) -> Result<Redirect, PageError> {
    state.db.cancel_job(id, state.now()).await?;
    crate::analysis::after_cancelled_job(&state, id).await;
    Ok(Redirect::to(&format!("/queue#job-{id}")))
}

/// The queue page's retry button.
pub async fn retry_job(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    _: AdminForm<NoFields>,
) -> Result<Redirect, PageError> {
    let new = state.db.retry_job(id, state.leases, state.now()).await?;
    Ok(Redirect::to(&format!("/queue#job-{new}")))
}

struct DeliveryView {
    provider: String,
    delivery: String,
    event: String,
    repository: Option<String>,
    outcome: String,
    status: i64,
    detail: String,
    received: String,
}

#[derive(Template)]
#[template(path = "deliveries.html")]
struct DeliveriesPage {
    deliveries: Vec<DeliveryView>,
}

pub async fn deliveries(State(state): State<AppState>) -> PageResult {
    let deliveries = state
        .db
        .deliveries(200)
        .await?
        .into_iter()
        .map(|d| DeliveryView {
            provider: d.provider,
            delivery: d.delivery,
            event: d.event,
            repository: d.repository,
            outcome: d.outcome,
            status: d.status,
            detail: d.detail,
            received: utc(d.received_at),
        })
        .collect();
    render(&DeliveriesPage { deliveries })
}
