//! Whole responses to anonymous GET requests, kept while the database has not changed.
//!
//! A dashboard is read far more often than it is written: a benchmark page draws five
//! 1,000-point charts, a compare judges a thousand series, and sixty-four readers asking for
//! them at once would each redo that work. Each response is kept with the database's
//! [data version](kymo_core::db::Db::data_version) and is served again while the version is
//! the same, for at most [`MAX_AGE`] seconds (pages say "5 minutes ago").
//!
//! - **Only for anonymous readers.** A request with an `Authorization` header or the cookie of
//!   a live session (an admin, a token; every reader of a `--private` server) always gets a
//!   fresh response, so whoever changes something sees the change on their next page. Other
//!   cookies, and stale or forged sessions, change nothing on a page: they are served from
//!   the cache like anyone else, so that `Cookie: a=b` on every request does not make each
//!   one compute its page.
//! - **One computation at a time.** When a page must be recomputed, one request computes it.
//!   Readers that arrive meanwhile get the previous answer at once, marked `stale`, or wait
//!   for the new one when there is none. However fast the database changes (an upload's
//!   analysis writes for seconds), a page is never computed twice at once, and an answer is
//!   at most one computation behind; anonymous readers cannot have written anything since.
//! - **Bounded.** Answers of 200 with a body of up to [`MAX_ENTRY_BYTES`] (as sent: gzip
//!   to readers that take it), without `Set-Cookie` or `no-store`; at most
//!   [`MAX_TOTAL_BYTES`] in all, the oldest dropped first. A larger body goes to its reader
//!   as it comes, unkept. No route streams without end, which reading the body to its end
//!   before answering relies on.
//!
//! Every cached route's answer says how it was served in `x-kymo-cache`: `hit`, `stale` or
//! `miss`.

use std::collections::HashMap;
use std::future::ready;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, stream};
use http_body_util::BodyExt;
use tokio::sync::watch;

use crate::state::AppState;

/// Seconds a response is served while the database does not change.
pub const MAX_AGE: i64 = 5;
/// Largest body kept.
pub const MAX_ENTRY_BYTES: usize = 8 << 20;
/// All bodies kept, together.
pub const MAX_TOTAL_BYTES: usize = 64 << 20;
/// Most responses kept, however small (each costs its key too).
const MAX_ENTRIES: usize = 4_096;
/// The response header naming how a response was served.
pub const CACHE_HEADER: &str = "x-kymo-cache";

/// Paths never cached: live counters, health, and the pages that set cookies.
const UNCACHED: [&str; 4] = ["/metrics", "/healthz", "/login", "/logout"];

/// The responses kept, by request.
#[derive(Default)]
pub struct ResponseCache {
    inner: Mutex<Entries>,
    /// Responses served, by how: hit, stale, miss.
    served: [AtomicU64; 3],
}

/// How the cache has served, for `/metrics`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheStats {
    pub hits: u64,
    pub stale: u64,
    pub misses: u64,
    pub bytes: usize,
}

#[derive(Default)]
struct Entries {
    slots: HashMap<String, Slot>,
    bytes: usize,
}

#[derive(Default)]
struct Slot {
    ready: Option<Kept>,
    /// The version being computed and where its answer will be sent.
    computing: Option<(u64, watch::Receiver<Option<Kept>>)>,
}

/// A response as kept: cheap to clone (the body is shared).
#[derive(Clone)]
struct Kept {
    version: u64,
    at: i64,
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Kept {
    fn weight(&self, key: &str) -> usize {
        self.body.len() + key.len()
    }

    fn response(&self, cache: &ResponseCache, how: &'static str) -> Response {
        cache.count(how);
        let mut response = (self.status, self.headers.clone(), self.body.clone()).into_response();
        (response.headers_mut()).insert(CACHE_HEADER, HeaderValue::from_static(how));
        response
    }
}

/// What a request should do, decided under the lock.
enum Plan {
    Serve(Kept, &'static str),
    Wait(watch::Receiver<Option<Kept>>),
    Compute(watch::Sender<Option<Kept>>),
}

impl ResponseCache {
    fn plan(&self, key: &str, version: u64, now: i64) -> Plan {
        let mut entries = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // Looked up before inserting, so that a hit does not copy the key.
        if !entries.slots.contains_key(key) {
            entries.slots.insert(key.to_owned(), Slot::default());
        }
        let slot = entries.slots.get_mut(key).expect("inserted above");
        let ready = slot.ready.as_ref();
        if let Some(kept) = ready.filter(|k| k.version == version && now - k.at < MAX_AGE) {
            return Plan::Serve(kept.clone(), "hit");
        }
        match &slot.computing {
            // A computation whose request went away (its sender is gone) counts for nothing.
            Some((_, waiting)) if waiting.has_changed().is_ok() => match ready {
                Some(previous) => Plan::Serve(previous.clone(), "stale"),
                None => Plan::Wait(waiting.clone()),
            },
            _ => {
                let (sender, receiver) = watch::channel(None);
                slot.computing = Some((version, receiver));
                Plan::Compute(sender)
            }
        }
    }

    /// Keeps `kept` unless something newer is kept already, and ends its computation.
    fn keep(&self, key: &str, kept: Option<&Kept>, version: u64) {
        let mut entries = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Entries { slots, bytes } = &mut *entries;
        let Some(slot) = slots.get_mut(key) else {
            return;
        };
        if slot.computing.as_ref().is_some_and(|(v, _)| *v == version) {
            slot.computing = None;
        }
        if let Some(kept) =
            kept.filter(|k| slot.ready.as_ref().is_none_or(|r| r.version <= k.version))
        {
            *bytes += kept.weight(key);
            if let Some(old) = slot.ready.replace(kept.clone()) {
                *bytes -= old.weight(key);
            }
        }
        if slot.ready.is_none() && slot.computing.is_none() {
            slots.remove(key);
        }
        entries.evict();
    }

    /// How many bytes are kept.
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }

    /// Counts of responses served and the bytes kept.
    pub fn stats(&self) -> CacheStats {
        let [hits, stale, misses] = self.served.each_ref().map(|n| n.load(Ordering::Relaxed));
        CacheStats {
            hits,
            stale,
            misses,
            bytes: self.bytes(),
        }
    }

    fn count(&self, how: &str) {
        let i = match how {
            "hit" => 0,
            "stale" => 1,
            _ => 2,
        };
        self.served[i].fetch_add(1, Ordering::Relaxed);
    }
}

impl Entries {
    /// Drops the oldest responses until the bounds hold.
    fn evict(&mut self) {
        while self.bytes > MAX_TOTAL_BYTES || self.slots.len() > MAX_ENTRIES {
            let oldest = (self.slots.iter())
                .filter(|(_, slot)| slot.computing.is_none())
                .min_by_key(|(_, slot)| slot.ready.as_ref().map_or(i64::MIN, |k| k.at))
                .map(|(key, _)| key.clone());
            let Some(key) = oldest else {
                return;
            };
            if let Some(kept) = self.slots.remove(&key).and_then(|slot| slot.ready) {
                self.bytes -= kept.weight(&key);
            }
        }
    }
}

/// The cache key of a request, or `None` when it must not be cached.
fn key(request: &Request) -> Option<String> {
    let headers = request.headers();
    let personal = headers.contains_key(header::AUTHORIZATION);
    let path = request.uri().path();
    if request.method() != Method::GET || personal || UNCACHED.contains(&path) {
        return None;
    }
    // What a page reads from the request besides its address: the host and scheme of its
    // absolute links, whether htmx asks for a fragment, and which compressions the reader
    // takes (the response kept is the compressed one).
    let header = |name: &str| headers.get(name).map_or(&b""[..], HeaderValue::as_bytes);
    let mut key = request.uri().to_string();
    for part in [
        header("host"),
        header("x-forwarded-proto"),
        header("hx-request"),
        header("accept-encoding"),
    ] {
        key.push('\n');
        key.push_str(&String::from_utf8_lossy(part));
    }
    Some(key)
}

/// Whether a response may be kept and served to others, as far as its head tells.
fn keepable(response: &Response) -> bool {
    let headers = response.headers();
    let no_store = (headers.get_all(header::CACHE_CONTROL).iter()).any(|v| {
        v.to_str()
            .is_ok_and(|v| v.contains("no-store") || v.contains("private"))
    });
    response.status() == StatusCode::OK && !headers.contains_key(header::SET_COOKIE) && !no_store
}

/// The whole of `body` when it is at most `limit` bytes; otherwise a body that gives what was
/// read and then the rest, for the reader to have in full although nobody keeps it. A
/// compressed body's size is known only once it is read.
async fn at_most(mut body: Body, limit: usize) -> Result<Bytes, Body> {
    let mut read = Vec::new();
    while let Some(frame) = body.frame().await {
        let data = match frame.map(|frame| frame.into_data()) {
            Ok(Ok(data)) => data,
            Ok(Err(_trailers)) => continue,
            // The reader gets the same failure; nothing is kept.
            Err(error) => {
                return Err(Body::from_stream(stream::once(ready(Err::<Bytes, _>(
                    error,
                )))));
            }
        };
        read.extend_from_slice(&data);
        if read.len() > limit {
            let head = stream::once(ready(Ok(Bytes::from(read))));
            return Err(Body::from_stream(head.chain(body.into_data_stream())));
        }
    }
    Ok(Bytes::from(read))
}

/// The middleware: serves kept responses and keeps new ones.
pub async fn cached(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(key) = key(&request) else {
        return next.run(request).await;
    };
    if crate::auth::has_live_session(request.headers(), &state).await {
        return next.run(request).await;
    }
    let version = state.db.data_version();
    let now = state.now();
    let sender = match state.responses.plan(&key, version, now) {
        Plan::Serve(kept, how) => return kept.response(&state.responses, how),
        Plan::Compute(sender) => sender,
        Plan::Wait(mut receiver) => {
            if let Ok(Some(kept)) = receiver.wait_for(Option::is_some).await.map(|k| k.clone()) {
                let how = if kept.version >= version {
                    "hit"
                } else {
                    "stale"
                };
                return kept.response(&state.responses, how);
            }
            // The computing request gave up or its answer cannot be kept: compute our own.
            return next.run(request).await;
        }
    };
    let response = next.run(request).await;
    if !keepable(&response) {
        state.responses.keep(&key, None, version);
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = match at_most(body, MAX_ENTRY_BYTES).await {
        Ok(body) => body,
        Err(unkept) => {
            state.responses.keep(&key, None, version);
            return Response::from_parts(parts, unkept);
        }
    };
    let kept = Kept {
        version,
        at: now,
        status: parts.status,
        headers: parts.headers,
        body,
    };
    state.responses.keep(&key, Some(&kept), version);
    let _ = sender.send(Some(kept.clone()));
    kept.response(&state.responses, "miss")
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;

    fn kept(version: u64, at: i64, size: usize) -> Kept {
        Kept {
            version,
            at,
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            body: Bytes::from(vec![b'x'; size]),
        }
    }

    fn is_compute(plan: &Plan) -> bool {
        matches!(plan, Plan::Compute(_))
    }

    #[test]
    fn a_response_is_served_while_the_version_and_its_age_allow() {
        let cache = ResponseCache::default();
        assert!(is_compute(&cache.plan("/a", 1, 100)));
        cache.keep("/a", Some(&kept(1, 100, 10)), 1);
        assert!(matches!(cache.plan("/a", 1, 104), Plan::Serve(_, "hit")));
        assert!(is_compute(&cache.plan("/a", 1, 105)), "too old");
        cache.keep("/a", Some(&kept(1, 105, 10)), 1);
        assert!(
            is_compute(&cache.plan("/a", 2, 105)),
            "the database changed"
        );
    }

    #[test]
    fn while_one_request_computes_others_wait_or_get_the_previous_answer() {
        let cache = ResponseCache::default();
        let first = cache.plan("/a", 1, 0);
        assert!(is_compute(&first));
        let waits = cache.plan("/a", 1, 0);
        assert!(matches!(waits, Plan::Wait(_)), "nothing to serve yet");
        cache.keep("/a", Some(&kept(1, 0, 10)), 1);
        let second = cache.plan("/a", 2, 0);
        assert!(is_compute(&second));
        assert!(matches!(cache.plan("/a", 2, 0), Plan::Serve(_, "stale")));
        // Newer versions do not start a second computation while one runs.
        assert!(matches!(cache.plan("/a", 3, 0), Plan::Serve(_, "stale")));
        // A computation whose request went away counts for nothing.
        drop(second);
        assert!(is_compute(&cache.plan("/a", 3, 0)));
    }

    #[test]
    fn an_older_answer_never_replaces_a_newer_one() {
        let cache = ResponseCache::default();
        cache.plan("/a", 2, 0);
        cache.keep("/a", Some(&kept(2, 0, 10)), 2);
        cache.keep("/a", Some(&kept(1, 0, 99)), 1);
        assert_eq!(cache.bytes(), 10 + 2);
    }

    #[test]
    fn the_oldest_responses_go_first_when_the_cache_is_full() {
        let cache = ResponseCache::default();
        let big = MAX_TOTAL_BYTES / 3;
        for (i, key) in ["/a", "/b", "/c", "/d"].iter().enumerate() {
            cache.plan(key, 1, i as i64);
            cache.keep(key, Some(&kept(1, i as i64, big)), 1);
        }
        assert!(cache.bytes() <= MAX_TOTAL_BYTES);
        assert!(
            is_compute(&cache.plan("/a", 1, 3)),
            "the oldest was dropped"
        );
        assert!(matches!(cache.plan("/d", 1, 3), Plan::Serve(_, "hit")));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_reaches_its_reader_whole_and_unkept() {
        let chunks =
            || stream::iter(["abc", "def", "gh"].map(|c| Ok::<_, axum::Error>(Bytes::from(c))));
        let kept = at_most(Body::from_stream(chunks()), 8).await;
        assert_eq!(kept.unwrap(), "abcdefgh");
        let Err(unkept) = at_most(Body::from_stream(chunks()), 5).await else {
            panic!("8 bytes are over a limit of 5");
        };
        assert_eq!(unkept.collect().await.unwrap().to_bytes(), "abcdefgh");

        let failing = stream::iter([
            Ok(Bytes::from("abc")),
            Err(axum::Error::new(std::io::Error::other("gone"))),
        ]);
        let Err(failed) = at_most(Body::from_stream(failing), 100).await else {
            panic!("a failed body is not kept");
        };
        assert!(
            failed.collect().await.is_err(),
            "the reader sees the failure"
        );
    }

    #[test]
    fn personal_unsafe_and_live_requests_are_not_cached() {
        let request = |method: Method, uri: &str, header: Option<(&str, &str)>| {
            let mut builder = Request::builder().method(method).uri(uri);
            if let Some((name, value)) = header {
                builder = builder.header(name, value);
            }
            builder.body(Body::empty()).unwrap()
        };
        assert!(key(&request(Method::GET, "/repos/a", None)).is_some());
        assert!(key(&request(Method::POST, "/repos/a", None)).is_none());
        assert!(
            key(&request(Method::GET, "/repos/a", Some(("cookie", "a=b")))).is_some(),
            "a cookie is checked by the middleware, not refused by the key"
        );
        assert!(
            key(&request(
                Method::GET,
                "/api/v1/jobs",
                Some(("authorization", "Bearer t"))
            ))
            .is_none()
        );
        assert!(key(&request(Method::GET, "/metrics", None)).is_none());
        let page = key(&request(Method::GET, "/repos/a?x=1", None));
        let fragment = key(&request(
            Method::GET,
            "/repos/a?x=1",
            Some(("hx-request", "true")),
        ));
        assert_ne!(page, fragment, "an htmx fragment is not the page");
    }
}
