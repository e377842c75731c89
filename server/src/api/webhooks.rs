//! Push and pull request webhooks: `POST /webhooks/{github,gitlab,gitea}`.
//!
//! A delivery is checked in this order, and every one is recorded with its outcome: the
//! repository (named by `?repo=NAME`, or matched by the payload's remote), its signature
//! under that repository's secret (constant-time), then its delivery id (processed once).
//! Only then is the payload read, and only its branch and new head are trusted: the commits
//! are fetched from the repository's own remote.

use std::net::IpAddr;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use kymo_core::db::{NewDelivery, RepositoryRow, WebhookDeliveryRow};
use kymo_core::pull_request::{PullRequestEvent, parse_pull_request};
use kymo_core::webhook::{
    Event, Provider, parse_push, parse_remote, verify_hmac_sha256, verify_token,
};
use serde::{Deserialize, Serialize};

use kymo_core::protocol::ApiErrorBody;

use crate::auth::ClientAddress;
use crate::error::{AppError, AppResult};
use crate::push::process_push;
use crate::state::AppState;

/// Webhook bodies are limited to this size: pushes of thousands of commits stay far below.
pub const WEBHOOK_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// `?repo=NAME` names the repository a hook belongs to.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookQuery {
    pub repo: Option<String>,
}

/// What came of a delivery.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeliveryOutcome {
    pub delivery: String,
    pub outcome: &'static str,
    pub detail: String,
    pub jobs: Vec<i64>,
}

#[utoipa::path(post, path = "/webhooks/{provider}", tag = "webhooks",
    params(("provider" = String, Path, description = "github, gitlab or gitea (Gitea and Forgejo)"),
        ("repo" = Option<String>, Query, description = "The tracked repository; without it the payload's repository must match exactly one")),
    request_body(content = String, description = "The provider's push, pull or merge request (or ping) payload, signed with the repository's webhook secret", content_type = "application/json"),
    responses((status = 202, description = "A push to the tracked branch (its new commits were queued), or a pull request opened, updated or closed (its comparison queued, or its waiting jobs cancelled)", body = DeliveryOutcome),
        (status = 200, description = "A ping, an ignored event or branch, or a duplicate delivery", body = DeliveryOutcome),
        (status = 401, description = "Missing or wrong signature", body = ApiErrorBody),
        (status = 404, description = "Unknown provider or repository", body = ApiErrorBody),
        (status = 413, description = "Body over 2 MiB", body = ApiErrorBody),
        (status = 422, description = "Malformed payload or missing event header", body = ApiErrorBody),
        (status = 429, description = "Too many bad signatures or unknown repositories from this address", body = ApiErrorBody)))]
/// `POST /webhooks/{github,gitlab,gitea}`.
pub async fn receive_push(
    state: State<AppState>,
    Path(provider): Path<String>,
    ClientAddress(client): ClientAddress,
    query: Query<WebhookQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> AppResult<(StatusCode, Json<DeliveryOutcome>)> {
    let provider = Provider::parse(&provider).ok_or_else(|| {
        AppError::NotFound(format!(
            "webhook provider {provider:?}: use github, gitlab or gitea"
        ))
    })?;
    let delivery = Delivery {
        provider,
        client,
        headers: &headers,
        body: &body,
    };
    receive(&state, &delivery, &query).await
}

#[utoipa::path(get, path = "/webhooks/deliveries", tag = "webhooks",
    responses((status = 200, description = "The latest 200 deliveries with their outcome, newest first", body = Vec<WebhookDeliveryRow>)))]
/// `GET /webhooks/deliveries`: the latest deliveries, newest first.
pub async fn deliveries(State(state): State<AppState>) -> AppResult<Json<Vec<WebhookDeliveryRow>>> {
    Ok(Json(state.db.deliveries(200).await?))
}

/// The headers each provider uses, in order of preference.
struct ProviderHeaders {
    event: &'static [&'static str],
    delivery: &'static [&'static str],
}

fn provider_headers(provider: Provider) -> ProviderHeaders {
    match provider {
        Provider::GitHub => ProviderHeaders {
            event: &["x-github-event"],
            delivery: &["x-github-delivery"],
        },
        Provider::GitLab => ProviderHeaders {
            event: &["x-gitlab-event"],
            delivery: &["x-gitlab-event-uuid", "x-gitlab-webhook-uuid"],
        },
        Provider::Gitea => ProviderHeaders {
            event: &["x-gitea-event", "x-forgejo-event", "x-gogs-event"],
            delivery: &["x-gitea-delivery", "x-forgejo-delivery", "x-gogs-delivery"],
        },
    }
}

fn header<'a>(headers: &'a HeaderMap, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// Checks a delivery's signature under the repository's secret.
fn verify(
    provider: Provider,
    headers: &HeaderMap,
    body: &[u8],
    secret: &str,
) -> Result<(), String> {
    let result = match provider {
        Provider::GitHub => match header(headers, &["x-hub-signature-256"]) {
            Some(signature) => verify_hmac_sha256(secret, body, signature),
            None => return Err("the delivery is not signed: X-Hub-Signature-256 is missing".into()),
        },
        Provider::GitLab => match header(headers, &["x-gitlab-token"]) {
            Some(token) => verify_token(secret, token),
            None => return Err("the delivery carries no X-Gitlab-Token".into()),
        },
        Provider::Gitea => match header(
            headers,
            &[
                "x-gitea-signature",
                "x-forgejo-signature",
                "x-hub-signature-256",
            ],
        ) {
            Some(signature) => verify_hmac_sha256(secret, body, signature),
            None => return Err("the delivery is not signed: X-Gitea-Signature is missing".into()),
        },
    };
    result.map_err(|e| e.to_string())
}

/// A delivery as it arrived.
struct Delivery<'a> {
    provider: Provider,
    client: IpAddr,
    headers: &'a HeaderMap,
    body: &'a [u8],
}

async fn receive(
    state: &AppState,
    arrived: &Delivery<'_>,
    query: &WebhookQuery,
) -> AppResult<(StatusCode, Json<DeliveryOutcome>)> {
    let (provider, headers, body) = (arrived.provider, arrived.headers, arrived.body);
    // Senders of bad signatures or unknown repositories are slowed down before anything is
    // looked up.
    state.limiter.check(arrived.client, state.now())?;
    let names = provider_headers(provider);
    let event_name = header(headers, names.event)
        .ok_or_else(|| AppError::BadRequest(format!("missing {} header", names.event[0])))?;
    let event = Event::parse(provider, event_name);
    // Without an id header, the body's digest stands in: the same body is processed once.
    let delivery: String = match header(headers, names.delivery) {
        Some(id) => id.chars().take(128).collect(),
        None => format!("sha256:{}", kymo_core::webhook::sign_hmac_sha256("", body)),
    };
    let log = |outcome, status: StatusCode, detail: &str, repository_id| {
        let event: String = event_name.chars().take(64).collect();
        let delivery = delivery.clone();
        let detail = detail.to_owned();
        async move {
            state
                .db
                .record_delivery(
                    &NewDelivery {
                        provider: provider.as_str(),
                        delivery: &delivery,
                        event: &event,
                        repository_id,
                        outcome,
                        status: i64::from(status.as_u16()),
                        detail: &detail,
                    },
                    state.now(),
                )
                .await
        }
    };

    let repo = match find_repository(state, query, body).await {
        Ok(repo) => repo,
        Err(err) => {
            // Deliveries for no tracked repository are counted like bad signatures: a flood
            // of them is refused before it writes a row each and buries real deliveries.
            state.limiter.fail(arrived.client, state.now());
            log("rejected", err.status(), &err.to_string(), None).await?;
            return Err(err);
        }
    };
    let secret = state.db.webhook_secret(repo.id).await?;
    let verified = match &secret {
        Some(secret) => verify(provider, headers, body, secret),
        None => Err(format!(
            "repository {:?} has no webhook secret: set one with `kymo repo add ... --webhook-secret`",
            repo.name
        )),
    };
    if let Err(reason) = verified {
        state.limiter.fail(arrived.client, state.now());
        log("rejected", StatusCode::UNAUTHORIZED, &reason, Some(repo.id)).await?;
        tracing::warn!(
            repo = repo.name,
            provider = provider.as_str(),
            reason,
            "webhook refused"
        );
        return Err(AppError::WebhookUnauthorized(reason));
    }
    let (outcome, status, detail, work) = match event {
        Event::Ping => ("processed", StatusCode::OK, "ping".to_owned(), Work::None),
        Event::Other(other) => (
            "ignored",
            StatusCode::OK,
            format!("{other} events are not used"),
            Work::None,
        ),
        Event::PullRequest => match parse_pull_request(provider, body) {
            Err(err) => {
                let err = AppError::BadRequest(err.to_string());
                log("rejected", err.status(), &err.to_string(), Some(repo.id)).await?;
                return Err(err);
            }
            Ok(pull) => match crate::pulls::refusal(state, &repo, &pull).await? {
                Some(reason) => {
                    tracing::info!(
                        repo = repo.name,
                        number = pull.number,
                        reason,
                        "pull request not measured"
                    );
                    ("ignored", StatusCode::OK, reason, Work::None)
                }
                None => (
                    "processed",
                    StatusCode::ACCEPTED,
                    String::new(),
                    Work::Pull(pull),
                ),
            },
        },
        Event::Push => match parse_push(provider, body) {
            Err(err) => {
                let err = AppError::BadRequest(err.to_string());
                log("rejected", err.status(), &err.to_string(), Some(repo.id)).await?;
                return Err(err);
            }
            Ok(push) if push.branch.as_deref() != Some(repo.branch.as_str()) => (
                "ignored",
                StatusCode::OK,
                format!(
                    "a push to {}, not to the tracked branch {}",
                    push.branch.as_deref().unwrap_or("a tag or other ref"),
                    repo.branch
                ),
                Work::None,
            ),
            Ok(push) if push.after.is_none() => (
                "ignored",
                StatusCode::OK,
                "the tracked branch was deleted".to_owned(),
                Work::None,
            ),
            Ok(push) => (
                "processed",
                StatusCode::ACCEPTED,
                String::new(),
                Work::Push(push.before),
            ),
        },
    };
    // Claim the delivery id before working on it: a copy (replayed, or sent concurrently) is
    // refused here and answered as a duplicate.
    let id = match log(outcome, status, &detail, Some(repo.id)).await {
        Ok(id) => id,
        Err(kymo_core::db::DbError::Conflict(_)) => return Ok(duplicate(delivery)),
        Err(other) => return Err(other.into()),
    };
    let processed = match work {
        Work::None => {
            return Ok((
                status,
                Json(DeliveryOutcome {
                    delivery,
                    outcome,
                    detail,
                    jobs: Vec::new(),
                }),
            ));
        }
        Work::Push(before) => process_push(state, &repo, before.as_ref())
            .await
            .map(|pushed| (pushed.summary(), pushed.jobs)),
        Work::Pull(pull) => crate::pulls::process(state, &repo, provider, &pull).await,
    };
    match processed {
        Ok((detail, jobs)) => {
            state
                .db
                .finish_delivery(id, "processed", i64::from(status.as_u16()), &detail)
                .await?;
            Ok((
                status,
                Json(DeliveryOutcome {
                    delivery,
                    outcome: "processed",
                    detail,
                    jobs,
                }),
            ))
        }
        Err(err) => {
            // A failed fetch releases the delivery id, so the host's redelivery is processed.
            let code = i64::from(err.status().as_u16());
            state
                .db
                .finish_delivery(id, "rejected", code, &err.to_string())
                .await?;
            Err(err)
        }
    }
}

/// What an accepted delivery asks kymo to do.
enum Work {
    None,
    /// A push to the tracked branch, with the head before it.
    Push(Option<kymo_core::model::CommitSha>),
    /// A pull request opened, updated or closed.
    Pull(PullRequestEvent),
}

fn duplicate(delivery: String) -> (StatusCode, Json<DeliveryOutcome>) {
    (
        StatusCode::OK,
        Json(DeliveryOutcome {
            delivery,
            outcome: "duplicate",
            detail: "this delivery was processed already".into(),
            jobs: Vec::new(),
        }),
    )
}

/// The repository a delivery is for: `?repo=NAME`, or the one tracked repository whose
/// remote the payload names.
async fn find_repository(
    state: &AppState,
    query: &WebhookQuery,
    body: &[u8],
) -> AppResult<RepositoryRow> {
    if let Some(name) = &query.repo {
        return Ok(state.db.repository(name).await?);
    }
    let remote = parse_remote(body);
    let remotes = state.db.repository_remotes().await?;
    let matching: Vec<_> = remotes.iter().filter(|r| remote.matches(&r.url)).collect();
    match matching.as_slice() {
        [one] => Ok(state.db.repository(&one.name).await?),
        [] => Err(AppError::NotFound(
            "no tracked repository matches the payload's repository; add ?repo=NAME to the hook URL"
                .into(),
        )),
        several => Err(AppError::Conflict(format!(
            "the payload's repository matches {} tracked repositories; add ?repo=NAME to the hook URL",
            several.len()
        ))),
    }
}
