//! Access: reading is public unless the server is private; changing anything takes an admin.
//!
//! An admin proves it with an admin token: as `Authorization: Bearer` (the CLI, scripts), or
//! by logging in with it in the browser, which opens a session (an HttpOnly, SameSite=Strict
//! cookie). A session's unsafe requests are checked twice against forgery: they must come
//! from this origin (`Origin` or `Sec-Fetch-Site`), and carry the session's anti-forgery
//! token (a form field, or `X-CSRF-Token`). Failed logins, bad tokens and bad webhook
//! signatures are counted per client address; too many in a minute are refused for a while.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;

use axum::extract::{ConnectInfo, Form, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use kymo_core::db::{Credential, Session, TokenScope};
use serde::de::DeserializeOwned;

use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "kymo_session";
/// How long a browser session lasts.
pub const SESSION_SECONDS: i64 = 12 * 3600;
/// Failures per client address and minute before it is refused.
const MAX_FAILURES_PER_MINUTE: u32 = 10;

/// How the server guards itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct AccessSettings {
    /// Reading needs a token or a session too.
    pub private: bool,
    /// Session cookies are marked `Secure` (the server is reached over TLS).
    pub secure_cookies: bool,
    /// A reverse proxy whose `X-Forwarded-For` names the client: requests from it are
    /// counted against the address it forwards for, not against the proxy.
    pub trusted_proxy: Option<IpAddr>,
}

/// Counts failed attempts per client address in one-minute windows.
#[derive(Debug, Default)]
pub struct FailureLimiter {
    windows: Mutex<HashMap<IpAddr, (i64, u32)>>,
}

impl FailureLimiter {
    /// Refuses a client that failed too often in the current minute.
    pub fn check(&self, client: IpAddr, now: i64) -> AppResult<()> {
        let windows = self.windows.lock().expect("limiter lock");
        match windows.get(&client) {
            Some((minute, count)) if *minute == now / 60 && *count >= MAX_FAILURES_PER_MINUTE => {
                Err(AppError::TooManyRequests)
            }
            _ => Ok(()),
        }
    }

    /// Counts a failure of `client`.
    pub fn fail(&self, client: IpAddr, now: i64) {
        let mut windows = self.windows.lock().expect("limiter lock");
        if windows.len() > 100_000 {
            windows.retain(|_, (minute, _)| *minute == now / 60);
        }
        let entry = windows.entry(client).or_insert((now / 60, 0));
        if entry.0 != now / 60 {
            *entry = (now / 60, 0);
        }
        entry.1 += 1;
    }
}

/// The client's address: the peer's (unknown in tests that drive the router directly), or,
/// when the peer is the trusted proxy, the last address of its `X-Forwarded-For` (the one it
/// appended; earlier ones are whatever the client claimed).
pub fn client_address(parts: &Parts, access: &AccessSettings) -> IpAddr {
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| {
            c.0.ip().to_canonical()
        });
    if access.trusted_proxy.map(|p| p.to_canonical()) == Some(peer)
        && let Some(client) = forwarded_client(&parts.headers)
    {
        return client;
    }
    peer
}

fn forwarded_client(headers: &HeaderMap) -> Option<IpAddr> {
    let last = headers.get_all("x-forwarded-for").iter().next_back()?;
    let address = last.to_str().ok()?.rsplit(',').next()?.trim();
    address.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

/// Paths anyone may read on a private server: what logging in and checking health need.
fn always_public(path: &str) -> bool {
    path == "/healthz" || path == "/login" || path.starts_with("/static/")
}

/// On a private server, reading needs a token or a session: pages send the anonymous to the
/// login page, the API answers 401. Unsafe methods are left to each handler's own check.
pub async fn require_reader(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if !state.access.private || !is_safe(request.method()) || always_public(request.uri().path()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    match identify(&parts, &state).await {
        Ok(Caller::Anonymous) => {
            let path = parts.uri.path();
            if path.starts_with("/api/") {
                AppError::Unauthorized.into_response()
            } else {
                let next = kymo_core::protocol::query_value(path);
                axum::response::Redirect::to(&format!("/login?next={next}")).into_response()
            }
        }
        Ok(_) => next.run(Request::from_parts(parts, body)).await,
        Err(err) => err.into_response(),
    }
}

/// The client's address, as an extractor.
pub struct ClientAddress(pub IpAddr);

impl FromRequestParts<AppState> for ClientAddress {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(ClientAddress(client_address(parts, &state.access)))
    }
}

/// Who is asking.
#[derive(Debug, Clone)]
pub enum Caller {
    Anonymous,
    Token(Credential),
    Session(Session),
}

impl Caller {
    /// An admin token, or a browser session (only admins open one).
    pub fn is_admin(&self) -> bool {
        match self {
            Caller::Token(credential) => credential.allows(TokenScope::Admin),
            Caller::Session(_) => true,
            Caller::Anonymous => false,
        }
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// The value of a cookie.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Whether the request carries the cookie of a live session: only then is a page computed
/// for it rather than served from the cache (a database error counts as live, to be safe).
pub async fn has_live_session(headers: &HeaderMap, state: &AppState) -> bool {
    let Some(secret) = cookie(headers, SESSION_COOKIE) else {
        return false;
    };
    !matches!(state.db.session(secret, state.now()).await, Ok(None))
}

/// Identifies the caller. A bearer token that is not a live token is refused (and counted),
/// a stale session cookie is simply anonymous.
///
/// A live token is never refused for its address's failures: the embedded worker and every
/// client behind a same-host proxy share 127.0.0.1 with whoever sends bad tokens from there.
/// That tells a locked-out guesser nothing useful: tokens are 32 random bytes.
pub async fn identify(parts: &Parts, state: &AppState) -> AppResult<Caller> {
    let now = state.now();
    if let Some(token) = bearer(&parts.headers) {
        if let Some(credential) = state.db.credential(token).await? {
            state.db.record_token_use(&credential, now).await?;
            return Ok(Caller::Token(credential));
        }
        let client = client_address(parts, &state.access);
        state.limiter.check(client, now)?;
        state.limiter.fail(client, now);
        return Err(AppError::Unauthorized);
    }
    if let Some(secret) = cookie(&parts.headers, SESSION_COOKIE)
        && let Some(session) = state.db.session(secret, now).await?
    {
        return Ok(Caller::Session(session));
    }
    Ok(Caller::Anonymous)
}

/// Whether a browser request comes from a page of this server: `Sec-Fetch-Site` when the
/// browser sends it, else an `Origin` naming the `Host`.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = value("sec-fetch-site") {
        return site == "same-origin" || site == "none";
    }
    match (value("origin"), value("host")) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority == host),
        _ => false,
    }
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// An admin, for the JSON API: a bearer admin token, or a session whose unsafe requests come
/// from this origin and carry `X-CSRF-Token`.
#[derive(Debug, Clone)]
pub struct Admin {
    pub name: String,
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> AppResult<Self> {
        let name = require_scope(parts, state, TokenScope::Admin).await?;
        Ok(Admin { name })
    }
}

/// Whether whoever reads is an admin (an admin token or a browser session), for what only
/// admins may read: the words a forge or an alert channel answered with.
pub struct ReaderIsAdmin(pub bool);

impl FromRequestParts<AppState> for ReaderIsAdmin {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> AppResult<Self> {
        Ok(ReaderIsAdmin(identify(parts, state).await?.is_admin()))
    }
}

/// Why a token of another scope is refused.
fn wrong_scope(credential: &Credential, scope: TokenScope) -> AppError {
    let needed = match scope {
        TokenScope::Admin => "an admin token".to_owned(),
        other => format!("a {} or admin token", other.as_str()),
    };
    AppError::Forbidden(format!(
        "token {:?} has the {} scope; this needs {needed}",
        credential.name, credential.scope
    ))
}

/// The bearer token of `scope` (an admin token holds every scope); browser sessions are
/// refused. For what must be tied to one token, such as a worker's lease.
pub async fn require_token(
    parts: &Parts,
    state: &AppState,
    scope: TokenScope,
) -> AppResult<Credential> {
    match identify(parts, state).await? {
        Caller::Token(credential) if credential.allows(scope) => Ok(credential),
        Caller::Token(credential) => Err(wrong_scope(&credential, scope)),
        Caller::Session(_) => Err(AppError::Forbidden(format!(
            "this needs a {} token, not a browser session",
            scope.as_str()
        ))),
        Caller::Anonymous => Err(AppError::Unauthorized),
    }
}

/// A holder of a token of `scope` (an admin token holds every scope), or an admin's browser
/// session whose unsafe requests come from this origin and carry `X-CSRF-Token`. Returns the
/// name recorded for what the caller changes.
pub async fn require_scope(
    parts: &Parts,
    state: &AppState,
    scope: TokenScope,
) -> AppResult<String> {
    Ok(authorize(parts, state, scope).await?.name)
}

/// Who [`require_scope`] let in.
struct Authorized {
    name: String,
    /// The one repository the token is limited to, if it is.
    only_repository: Option<i64>,
}

async fn authorize(parts: &Parts, state: &AppState, scope: TokenScope) -> AppResult<Authorized> {
    match identify(parts, state).await? {
        Caller::Token(credential) if credential.allows(scope) => Ok(Authorized {
            name: credential.name,
            only_repository: credential.repository_id,
        }),
        Caller::Token(credential) => Err(wrong_scope(&credential, scope)),
        Caller::Session(session) => {
            let csrf = parts
                .headers
                .get("x-csrf-token")
                .and_then(|v| v.to_str().ok());
            if !is_safe(&parts.method)
                && (!same_origin(&parts.headers) || csrf != Some(session.csrf.as_str()))
            {
                return Err(AppError::Forbidden(
                    "a cross-site or unverified request: send X-CSRF-Token from this site".into(),
                ));
            }
            Ok(Authorized {
                name: session.name,
                only_repository: None,
            })
        }
        Caller::Anonymous => Err(AppError::Unauthorized),
    }
}

/// A holder of an upload token (or an admin): `kymo upload` from CI. An upload token may be
/// limited to one repository: check [`Uploader::may_upload_to`] once the repository is known.
pub struct Uploader {
    /// The token's name (an admin session's, for a browser).
    pub name: String,
    /// The one repository its token may upload to; any when `None`.
    only_repository: Option<i64>,
}

impl Uploader {
    /// Refuses an upload to a repository the token is not for.
    pub fn may_upload_to(&self, repository: &kymo_core::db::RepositoryRow) -> AppResult<()> {
        match self.only_repository {
            Some(only) if only != repository.id => Err(AppError::Forbidden(format!(
                "upload token {:?} is for another repository than {:?}",
                self.name, repository.name
            ))),
            _ => Ok(()),
        }
    }
}

impl FromRequestParts<AppState> for Uploader {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> AppResult<Self> {
        let caller = authorize(parts, state, TokenScope::Upload).await?;
        Ok(Uploader {
            name: caller.name,
            only_repository: caller.only_repository,
        })
    }
}

/// A form whose only field is its anti-forgery token (a button).
#[derive(Debug, serde::Deserialize)]
pub struct NoFields {}

/// A form posted by an admin's browser session: from this origin, with the session's
/// anti-forgery token in its `csrf` field. Carries the form's other fields.
pub struct AdminForm<T> {
    pub admin: Admin,
    pub form: T,
}

#[derive(serde::Deserialize)]
struct WithCsrf<T> {
    csrf: String,
    #[serde(flatten)]
    form: T,
}

impl<T: DeserializeOwned + Send + 'static> FromRequest<AppState> for AdminForm<T> {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &AppState) -> AppResult<Self> {
        let (parts, body) = request.into_parts();
        let caller = identify(&parts, state).await?;
        let Caller::Session(session) = caller else {
            return Err(AppError::Unauthorized);
        };
        if !same_origin(&parts.headers) {
            return Err(AppError::Forbidden("a cross-site form was refused".into()));
        }
        let request = Request::from_parts(parts, body);
        let Form(posted) = Form::<WithCsrf<T>>::from_request(request, state)
            .await
            .map_err(|e| AppError::BadRequest(e.body_text()))?;
        if posted.csrf != session.csrf {
            return Err(AppError::Forbidden(
                "the form is stale or forged: reload the page and try again".into(),
            ));
        }
        Ok(AdminForm {
            admin: Admin { name: session.name },
            form: posted.form,
        })
    }
}
