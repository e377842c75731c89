//! What every handler shares.

use std::path::PathBuf;
use std::sync::Arc;

use kymo_core::clock::SharedClock;
use kymo_core::db::{Db, LeaseSettings};

use crate::auth::{AccessSettings, FailureLimiter};
use crate::cache::ResponseCache;

/// Application state, cloned into every handler through axum's `State`.
#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub clock: SharedClock,
    pub leases: LeaseSettings,
    /// Where the server keeps its git mirrors.
    pub data_dir: Arc<PathBuf>,
    pub access: AccessSettings,
    pub limiter: Arc<FailureLimiter>,
    /// The base of absolute links in alerts and commit statuses (`--public-url`), no
    /// trailing slash.
    pub public_url: Arc<str>,
    /// Responses to anonymous readers, kept while the database does not change.
    pub responses: Arc<ResponseCache>,
    /// Permits for large request bodies being read and stored at once (see
    /// [`crate::limits::one_large_body_at_a_time`]).
    pub large_bodies: Arc<tokio::sync::Semaphore>,
    /// The windows series are analysed in (see [`kymo_core::stats::Windows`]); tests shrink
    /// them to cross window borders within a few dozen commits.
    pub analysis_windows: kymo_core::stats::Windows,
}

impl AppState {
    /// A state with public reading and no failures counted yet.
    pub fn new(
        db: Db,
        clock: SharedClock,
        leases: LeaseSettings,
        data_dir: PathBuf,
        public_url: Arc<str>,
    ) -> Self {
        Self {
            db,
            clock,
            leases,
            data_dir: Arc::new(data_dir),
            public_url,
            access: AccessSettings::default(),
            limiter: Arc::default(),
            responses: Arc::default(),
            large_bodies: Arc::new(tokio::sync::Semaphore::new(
                crate::limits::CONCURRENT_LARGE_BODIES,
            )),
            analysis_windows: kymo_core::stats::Windows::default(),
        }
    }

    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    /// The directory holding the git mirrors (to resolve commits and read history); the
    /// embedded worker shares it, so each repository is cloned once per machine.
    pub fn mirror_dir(&self) -> PathBuf {
        self.data_dir.as_ref().clone()
    }
}
