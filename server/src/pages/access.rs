//! Logging in and out of the dashboard with an admin token.

use askama::Template;
use axum::extract::{Form, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use kymo_core::db::TokenScope;
use serde::Deserialize;

use super::{PageError, PageResult, render};
use crate::auth::{
    AdminForm, Caller, ClientAddress, NoFields, SESSION_COOKIE, SESSION_SECONDS, identify,
    same_origin,
};
use crate::error::AppError;
use crate::state::AppState;

/// Whoever views a page: the anti-forgery token its forms need, when an admin is logged in.
pub struct Viewer {
    pub caller: Caller,
}

impl Viewer {
    /// The session's anti-forgery token, for the forms of a page an admin views.
    pub fn csrf(&self) -> Option<String> {
        match &self.caller {
            Caller::Session(session) => Some(session.csrf.clone()),
            _ => None,
        }
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, PageError> {
        Ok(Viewer {
            caller: identify(parts, state).await?,
        })
    }
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    next: String,
    name: Option<String>,
    csrf: String,
    error: String,
}

#[derive(Debug, Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

/// Only paths of this site are followed after logging in.
fn local_path(next: Option<&str>) -> String {
    match next {
        Some(path) if path.starts_with('/') && !path.starts_with("//") && !path.contains('\\') => {
            path.chars().take(2048).collect()
        }
        _ => "/".into(),
    }
}

pub async fn login_page(viewer: Viewer, Query(query): Query<NextQuery>) -> PageResult {
    let (name, csrf) = match &viewer.caller {
        Caller::Session(session) => (Some(session.name.clone()), session.csrf.clone()),
        _ => (None, String::new()),
    };
    render(&LoginPage {
        next: local_path(query.next.as_deref()),
        name,
        csrf,
        error: String::new(),
    })
}

#[derive(Debug, Deserialize)]
pub struct LoginForm {
    token: String,
    #[serde(default)]
    next: Option<String>,
}

pub async fn login(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, PageError> {
    if !same_origin(&headers) {
        return Err(AppError::Forbidden("a cross-site login was refused".into()).into());
    }
    let now = state.now();
    state.limiter.check(client, now)?;
    let next = local_path(form.next.as_deref());
    let credential = state.db.credential(form.token.trim()).await?;
    let Some(credential) = credential.filter(|c| c.allows(TokenScope::Admin)) else {
        state.limiter.fail(client, now);
        tracing::warn!(client = %client, "failed login");
        let page = LoginPage {
            next,
            name: None,
            csrf: String::new(),
            error: "That is not a live admin token.".into(),
        };
        let mut response = render(&page)?.into_response();
        *response.status_mut() = axum::http::StatusCode::UNAUTHORIZED;
        return Ok(response);
    };
    let (secret, _) = state
        .db
        .create_session(&credential, SESSION_SECONDS, now)
        .await?;
    let secure = if state.access.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{SESSION_COOKIE}={secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECONDS}{secure}"
    );
    let mut response = Redirect::to(&next).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(|e| AppError::Internal(e.into()))?,
    );
    tracing::info!(admin = credential.name, "logged in");
    Ok(response)
}

pub async fn logout(
    State(state): State<AppState>,
    viewer: Viewer,
    AdminForm { .. }: AdminForm<NoFields>,
) -> Result<Response, PageError> {
    if let Caller::Session(session) = viewer.caller {
        state.db.end_session(session.id).await?;
    }
    let mut response = Redirect::to("/").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("kymo_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    Ok(response)
}
