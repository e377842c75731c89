//! Pages of continuous operation: the webhook deliveries, and the queue's cancel and retry
//! buttons.

use askama::Template;
use axum::extract::{Path, State};
use axum::response::Redirect;

use super::format::utc;
use super::{PageError, PageResult, render};
use crate::auth::{AdminForm, NoFields};
use crate::state::AppState;

/// The queue page's cancel button.
pub async fn cancel_job(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    _: AdminForm<NoFields>,
) -> Result<Redirect, PageError> {
    state.db.cancel_job(id, state.now()).await?;
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
