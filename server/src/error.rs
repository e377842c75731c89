//! One error type for every handler: it picks the status code, shows users a clear message,
//! and logs internals without exposing them.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kymo_core::db::DbError;
use kymo_core::protocol::ApiErrorBody;

/// An error a handler returns.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The database could not be written (disk full or failing); nothing was stored.
    #[error("{0}")]
    InsufficientStorage(String),
    #[error("a valid token is required: send `Authorization: Bearer <token>`")]
    Unauthorized,
    /// The caller is known but may not do this.
    #[error("{0}")]
    Forbidden(String),
    #[error("too many failed attempts from this address; wait a minute")]
    TooManyRequests,
    /// A webhook delivery whose signature does not check out, with the reason.
    #[error("{0}")]
    WebhookUnauthorized(String),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::BadRequest(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::Unauthorized | AppError::WebhookUnauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
            AppError::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<DbError> for AppError {
    fn from(err: DbError) -> Self {
        match err {
            DbError::NotFound(what) => AppError::NotFound(format!("{what} not found")),
            DbError::Conflict(msg) => AppError::Conflict(msg),
            DbError::Invalid(msg) => AppError::BadRequest(msg),
            other if other.is_storage_failure() => {
                tracing::warn!(error = %other, "the database could not be written");
                AppError::InsufficientStorage(
                    "the server could not write to its disk (it may be full); nothing was stored: retry later".into(),
                )
            }
            other => AppError::Internal(other.into()),
        }
    }
}

impl From<anyhow::Error> for AppError {
    fn from(err: anyhow::Error) -> Self {
        AppError::Internal(err)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let AppError::Internal(err) = &self {
            tracing::error!(error = ?err, "request failed");
        }
        let body = ApiErrorBody {
            error: self.to_string(),
        };
        (self.status(), Json(body)).into_response()
    }
}

/// The result type of handlers.
pub type AppResult<T> = Result<T, AppError>;
