//! `kymo serve`: the HTTP server, the lease reaper and, by default, an embedded worker.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use kymo_core::clock::{SharedClock, SystemClock};
use kymo_core::db::{Db, LeaseSettings, TokenScope};
use kymo_worker::{Worker, WorkerConfig};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::auth::AccessSettings;
use crate::connections::ConnectionLimits;
use crate::state::AppState;

/// Everything `kymo serve` needs to start.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub db: PathBuf,
    pub listen: SocketAddr,
    pub embedded_worker: bool,
    pub leases: LeaseSettings,
    /// Mirrors and the embedded worker's work trees; beside the database by default.
    pub data_dir: PathBuf,
    /// Labels the embedded worker offers.
    pub worker_labels: Vec<String>,
    pub access: AccessSettings,
    /// The base of links in alerts; `http://` and the listen address by default.
    pub public_url: Option<String>,
    /// Let the embedded worker run suites where the kernel cannot confine them.
    pub allow_unconfined_suites: bool,
    /// The admin's ceilings on what the embedded worker's suites may ask for.
    pub suite_maximums: kymo_worker::sandbox::maximums::MaximumSettings,
    /// How long a client may take to send a request's header (and may stay idle between
    /// requests) before its connection is closed.
    pub header_read_timeout: Duration,
    /// How long nothing is staged (no upload stores measurements) before the staged
    /// measurements are merged; `None`: only when enough are staged.
    pub merge_when_idle: Option<Duration>,
}

/// The default of [`ServeOptions::merge_when_idle`].
pub const MERGE_WHEN_IDLE: Duration = Duration::from_secs(30);

/// The default of [`ServeOptions::header_read_timeout`]: ample for a browser or a worker on a
/// slow link, short enough that a flood of silent sockets drains quickly.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

const EMBEDDED_WORKER: &str = "embedded-worker";

/// A started service: its address and state, until it is stopped.
pub struct RunningServer {
    pub address: SocketAddr,
    pub state: AppState,
    stop_worker: Arc<AtomicBool>,
    shutdown: Arc<Notify>,
    server: JoinHandle<std::io::Result<()>>,
    reaper: JoinHandle<()>,
    poller: JoinHandle<()>,
    alerts: crate::alerts::DeliveryLoop,
}

/// Runs the service until SIGINT or SIGTERM.
pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let db = options.db.clone();
    let running = start(options).await?;
    // The first line on stdout is the address: scripts and tests read it when port 0 was asked.
    println!(
        "kymo is serving http://{} (database {})",
        running.address,
        db.display()
    );
    running.run_until_signal().await
}

/// Opens the database, binds the listener and starts serving, the reaper and the worker.
pub async fn start(options: ServeOptions) -> anyhow::Result<RunningServer> {
    if let Some(parent) = options.db.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let db = Db::open(&options.db)
        .await
        .with_context(|| format!("cannot open the database {}", options.db.display()))?;
    let clock: SharedClock = Arc::new(SystemClock);
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let address = listener.local_addr()?;
    let public_url = crate::alerts::public_url(options.public_url.as_deref(), address)
        .context("--public-url")?;
    let mut state = AppState::new(
        db.clone(),
        clock.clone(),
        options.leases,
        options.data_dir.clone(),
        public_url.into(),
    );
    state.access = options.access;

    write_admin_token(&db, &options.db, clock.now()).await?;
    remember_this_server(address, &options.db);
    let reaper = tokio::spawn(reap_leases_and_merge(
        db.clone(),
        clock.clone(),
        options.merge_when_idle,
    ));
    let poller = tokio::spawn(crate::push::poll_repositories(state.clone()));
    let alerts = crate::alerts::DeliveryLoop::spawn(state.clone());
    let stop_worker = Arc::new(AtomicBool::new(false));
    if options.embedded_worker {
        let now = clock.now();
        db.revoke_tokens_named(EMBEDDED_WORKER, now).await?;
        let token = db
            .create_worker_token(EMBEDDED_WORKER, &options.worker_labels.join(","), now)
            .await
            .context("--label")?;
        let config = WorkerConfig {
            server: format!("http://{address}"),
            token,
            cache_dir: options.data_dir.clone(),
            poll_interval: Duration::from_millis(500),
            limits: Default::default(),
            labels: options.worker_labels.clone(),
            sandbox: worker_sandbox(&options),
        };
        let stop = stop_worker.clone();
        std::thread::Builder::new()
            .name("embedded-worker".into())
            .spawn(move || Worker::new(config).run_until(&stop))?;
    }

    let shutdown = Arc::new(Notify::new());
    let notified = shutdown.clone();
    let app = crate::app(state.clone());
    let limits = ConnectionLimits::for_this_process(options.header_read_timeout);
    let server = tokio::spawn(crate::connections::serve(
        listener,
        app,
        limits,
        async move { notified.notified().await },
    ));
    Ok(RunningServer {
        address,
        state,
        stop_worker,
        shutdown,
        server,
        reaper,
        poller,
        alerts,
    })
}

impl RunningServer {
    /// Serves until SIGINT or SIGTERM, then stops gracefully.
    pub async fn run_until_signal(self) -> anyhow::Result<()> {
        shutdown_signal().await;
        self.stop().await
    }

    /// Stops accepting requests, lets running ones finish, stops the worker, closes the database.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.stop_worker.store(true, Ordering::Relaxed);
        self.shutdown.notify_one();
        self.server.await??;
        self.reaper.abort();
        self.poller.abort();
        self.alerts.stop().await;
        self.state.db.close().await;
        tracing::info!("kymo stopped");
        Ok(())
    }
}

/// The embedded worker's suites must not reach the database, its journals or the admin token.
fn worker_sandbox(options: &ServeOptions) -> kymo_worker::sandbox::SandboxConfig {
    let db = std::path::absolute(&options.db).unwrap_or_else(|_| options.db.clone());
    let mut protected: Vec<PathBuf> = ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        })
        .collect();
    protected.push(admin_token_path(&db));
    kymo_worker::sandbox::SandboxConfig {
        protected,
        allow_unconfined: options.allow_unconfined_suites,
        maximums: options.suite_maximums,
    }
}

const LOCAL_ADMIN: &str = "local-admin";

/// Where `kymo serve` leaves an admin token for the CLI on its machine: beside the database,
/// readable by its owner only.
pub fn admin_token_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_owned();
    name.push(".admin-token");
    db.with_file_name(name)
}

/// Replaces the local admin token of an earlier start and writes the new one (mode 0600).
async fn write_admin_token(db: &Db, db_path: &Path, now: i64) -> anyhow::Result<()> {
    db.revoke_tokens_named(LOCAL_ADMIN, now).await?;
    let token = db.create_token(LOCAL_ADMIN, TokenScope::Admin, now).await?;
    let path = admin_token_path(db_path);
    let _ = std::fs::remove_file(&path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot write the admin token file {}", path.display()))?;
    file.write_all(token.as_bytes())?;
    Ok(())
}

/// Records this server and its admin token file for the CLI of this user, wherever it runs.
/// A machine whose home cannot be written still serves: the CLI then needs `KYMO_DB` or
/// `--token`.
fn remember_this_server(address: SocketAddr, db_path: &Path) {
    let Some(file) = crate::local_servers::servers_file() else {
        return;
    };
    let token_file = std::path::absolute(admin_token_path(db_path))
        .unwrap_or_else(|_| admin_token_path(db_path));
    let server = crate::local_servers::LocalServer {
        url: format!("http://{address}"),
        token_file,
    };
    if let Err(error) = crate::local_servers::remember(&file, server) {
        tracing::warn!(file = %file.display(), error = format!("{error:#}"),
            "cannot record this server for the CLI");
    }
}

/// Returns expired leases to the queue every few seconds, so that a dead worker's job is
/// picked up by the next claim of any machine's worker; and merges the staged measurements
/// once nothing was staged for `merge_when_idle` (fewer than a merge's worth wait then, but
/// a quiet server's readers read one table). Quiet means no upload, not no write: a worker
/// writes that its machine was seen every few seconds, and counting those, a server with a
/// worker never merged its small repositories' rows.
async fn reap_leases_and_merge(db: Db, clock: SharedClock, merge_when_idle: Option<Duration>) {
    const TICK: Duration = Duration::from_secs(2);
    let mut tick = tokio::time::interval(TICK);
    let quiet_ticks_before_merge = merge_when_idle.map_or(u32::MAX, |idle| {
        u32::try_from(idle.as_secs().div_ceil(TICK.as_secs())).unwrap_or(u32::MAX)
    });
    let (mut staged, mut quiet_ticks) = (db.staged_pending(), 0u32);
    loop {
        tick.tick().await;
        match db.expire_leases(clock.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(jobs = n, "expired leases returned to the queue"),
            Err(err) => tracing::warn!(error = %err, "lease reaper failed"),
        }
        let now = db.staged_pending();
        quiet_ticks = if now == staged {
            quiet_ticks.saturating_add(1)
        } else {
            0
        };
        staged = now;
        if quiet_ticks >= quiet_ticks_before_merge && db.staged_pending() > 0 {
            // A merge that failed is tried again after another quiet spell, not every tick.
            quiet_ticks = 0;
            match db.merge_staged().await {
                Ok(merged) => tracing::info!(rows = merged.rows, "merged staged measurements"),
                Err(err) => tracing::warn!(error = %err, "merging staged measurements failed"),
            }
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}
