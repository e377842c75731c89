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

/// Longest `next` path followed after logging in.
const MAX_NEXT_BYTES: usize = 2048;

/// Only paths of this site are followed after logging in: `/` then anything but `/` or `\`,
/// printable ASCII only, also once percent-decoded (a browser reads `/%09/evil.example` or
/// `/\t/evil.example` as the host `evil.example`). Anything else goes to `/`.
fn local_path(next: Option<&str>) -> String {
    let relative = |path: &str| {
        path.starts_with('/')
            && !matches!(path.as_bytes().get(1), Some(b'/' | b'\\'))
            && !path.chars().any(char::is_control)
    };
    let printable = |path: &str| path.bytes().all(|b| b.is_ascii_graphic() && b != b'\\');
    match next {
        Some(path)
            if path.len() <= MAX_NEXT_BYTES
                && printable(path)
                && relative(path)
                && relative(&percent_decoded(path)) =>
        {
            path.to_owned()
        }
        _ => "/".into(),
    }
}

/// `text` with its `%XX` escapes decoded (bytes that are not UTF-8 become U+FFFD).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
    let next = local_path(form.next.as_deref());
    let credential = state.db.credential(form.token.trim()).await?;
    // A live admin token logs in even from an address that others locked out.
    let Some(credential) = credential.filter(|c| c.allows(TokenScope::Admin)) else {
        state.limiter.check(client, now)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_same_site_paths_are_followed_after_logging_in() {
        for good in ["/", "/repos/app?x=1#top", "/compare/a...b", "/a%20b"] {
            assert_eq!(local_path(Some(good)), good);
        }
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "/\t/evil.example/phish",
            "/%09/evil.example/phish",
            "/%2F/evil.example",
            "/%5Cevil.example",
            "/a\nb",
            "/a%0d%0aSet-Cookie:x=1",
            "/caf\u{e9}",
            "https://evil.example",
            "evil.example",
            "",
        ] {
            assert_eq!(local_path(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(local_path(Some(&format!("/{}", "a".repeat(5000)))), "/");
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn percent_decoding_keeps_what_is_not_an_escape() {
        assert_eq!(percent_decoded("/%41%zz%4"), "/A%zz%4");
        assert_eq!(percent_decoded("%ff"), "\u{fffd}");
    }
}
