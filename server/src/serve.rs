//! `kymo serve`: the HTTP server, the lease reaper and, by default, an embedded worker.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use kymo_core::clock::{SharedClock, SystemClock};
use kymo_core::db::{Db, LeaseSettings, TokenScope};
use kymo_worker::{Worker, WorkerConfig};
use tokio::net::TcpListener;

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
}

const EMBEDDED_WORKER: &str = "embedded-worker";

/// Runs the service until SIGINT or SIGTERM.
pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let db = Db::open(&options.db)
        .await
        .with_context(|| format!("cannot open the database {}", options.db.display()))?;
    let clock: SharedClock = Arc::new(SystemClock);
    let state = AppState {
        db: db.clone(),
        clock: clock.clone(),
        leases: options.leases,
        data_dir: Arc::new(options.data_dir.clone()),
    };
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let address = listener.local_addr()?;
    // The first line on stdout is the address: scripts and tests read it when port 0 was asked.
    println!("kymo is serving http://{address} (database {})", options.db.display());

    let reaper = tokio::spawn(reap_leases(db.clone(), clock.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    if options.embedded_worker {
        let now = clock.now();
        db.revoke_tokens_named(EMBEDDED_WORKER, now).await?;
        let token = db.create_token(EMBEDDED_WORKER, TokenScope::Worker, now).await?;
        let config = WorkerConfig {
            server: format!("http://{address}"),
            token,
            cache_dir: options.data_dir.join("worker"),
            poll_interval: Duration::from_secs(1),
            limits: Default::default(),
        };
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("embedded-worker".into())
            .spawn(move || Worker::new(config).run_until(&stop))?;
    }

    axum::serve(listener, crate::app(state))
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    stop.store(true, Ordering::Relaxed);
    reaper.abort();
    db.close().await;
    tracing::info!("kymo stopped");
    Ok(())
}

/// Returns expired leases to the queue every few seconds, so that a dead worker's job is
/// picked up by the next claim of any machine's worker.
async fn reap_leases(db: Db, clock: SharedClock) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        match db.expire_leases(clock.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(jobs = n, "expired leases returned to the queue"),
            Err(err) => tracing::warn!(error = %err, "lease reaper failed"),
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
