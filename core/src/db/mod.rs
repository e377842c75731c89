//! All of kymo's SQL. SQLite in WAL mode with foreign keys on; reads go through a pool of
//! readers, writes through a single writer connection in `BEGIN IMMEDIATE` transactions, so
//! that a read-then-write transaction never fails to upgrade its lock.

mod access;
mod alerts;
mod analysis_state;
mod bisections;
mod census;
mod checkpoints;
mod commit_status;
mod comparisons;
mod confirmations;
mod counts;
mod credentials;
mod disturbed;
mod history;
mod ingest;
mod jobs;
mod json_text;
mod machines;
mod pages;
mod pull_uploads;
mod pulls;
mod regressions;
mod repos;
mod samples_conversion;
mod sensitivity;
mod sql_functions;
mod staging;
mod summaries;
mod summary_reads;
mod version;
mod webhooks;
mod window_lines;
mod windows;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

pub use access::{Credential, Session, TokenRow, validate_token_name};
pub use alerts::{
    ALERT_KINDS, AlertChannelRow, AttemptOutcome, AttemptRow, DeliveryRow, DueDelivery,
    MAX_URL_LEN, NextStep, OutboxItem, OutboxProgress, validate_outbound_url,
};
pub use analysis_state::{
    AnalysisCounts, AnalysisInput, AnalysisPath, AnalysisSnapshot, AnalysisState, InputRow,
    StoredChange,
};
pub use bisections::{BisectionRow, BisectionUpdate, BisectionView, ProbeJobs, WideRegression};
pub use census::RowCounts;
pub use commit_status::{
    CommitStatusTarget, DueStatusPost, STATUS_KINDS, StatusCommit, StatusPostRow,
};
pub use comparisons::{
    ADAPTIVE_ROUNDS, BUDGET_SECONDS, COMPARISON_ROUNDS, ComparisonJob, ComparisonOrigin,
    ComparisonRow, DEFAULT_BUDGET_SECONDS, DEFAULT_ROUNDS, MeasuredBy, NewComparison,
    StoredComparison, checked_budget,
};
pub use confirmations::{
    ConfirmationDecision, ConfirmationTarget, ConfirmationView, PendingConfirmation, REFUTED_BY,
};
pub use counts::{JOB_STATES, ServerCounts};
pub use disturbed::{HeldRun, RunPlace, RunSeries, WaitingFinding};
pub use history::RecentValue;
pub use ingest::{IngestSummary, RunRecord};
pub use jobs::{
    Enqueued, JobReason, JobRow, JobTarget, LeaseSettings, labels_satisfy, normalize_labels,
};
pub use machines::{MachineRow, TokenScope};
pub use pages::{
    BenchmarkSeriesRow, CommitMeasurementRow, CommitRow, CommitRunRow, EnvironmentPoint,
    HistoryRow, HistoryStatus, MIN_SHA_PREFIX, RepositorySummary, SeriesPoint,
};
pub use pull_uploads::{MeasuredBase, UploadedComparison};
pub use pulls::{DuePullFeedback, PullRequestRecord, PullRequestRow, PullSettings};
pub use regressions::{
    AnalysisPoint, FoundChange, RegressionFilter, RegressionRow, SeriesToAnalyse, TRIAGE_STATES,
};
pub use repos::{CommitRecord, RepositoryRow, RepositorySettings, validate_repository};
pub use sensitivity::{SensitivityRule, sensitivity_for};
pub use staging::{MERGE_ROWS, MergeSummary};
pub use summary_reads::SummaryWindow;
pub use webhooks::{ChainCommit, NewDelivery, RepositoryRemote, WebhookDeliveryRow};
pub use windows::WindowPoint;

/// A failure of the storage layer, or a request it refuses.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    #[error(transparent)]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
}

impl DbError {
    /// Whether SQLite could not write its files: the disk is full (`SQLITE_FULL`) or refused
    /// the write (`SQLITE_IOERR` and its extended codes, which a file size limit also gives).
    /// The transaction was rolled back, so nothing partial was stored; the caller may retry
    /// once there is room.
    pub fn is_storage_failure(&self) -> bool {
        const SQLITE_IOERR: i64 = 10;
        const SQLITE_FULL: i64 = 13;
        let DbError::Sqlx(sqlx::Error::Database(err)) = self else {
            return false;
        };
        let code = err.code().and_then(|c| c.parse::<i64>().ok()).unwrap_or(0);
        matches!(code & 0xff, SQLITE_IOERR | SQLITE_FULL)
    }
}

/// A value the database returned that does not read as what was stored (a query that returns
/// its rows as one JSON text, for instance).
fn decode_error(err: impl std::error::Error + Send + Sync + 'static) -> DbError {
    DbError::Sqlx(sqlx::Error::Decode(Box::new(err)))
}

/// `bytes` in upper-case hexadecimal, as SQLite's `unhex()` reads them: a plain loop, where the
/// `hex` crate's encoder (a `char` at a time) was a few percent of ingest.
fn to_hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    push_hex(&mut text, bytes);
    text
}

/// Writes `bytes` in upper-case hexadecimal at the end of `text`.
fn push_hex(text: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    text.reserve(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 0x0f)] as char);
    }
}

/// Each byte's value as a hexadecimal digit (either case), 0xff where it is none.
const NIBBLES: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut digit = 0;
    while digit < 16 {
        table[b"0123456789ABCDEF"[digit] as usize] = digit as u8;
        table[b"0123456789abcdef"[digit] as usize] = digit as u8;
        digit += 1;
    }
    table
};

/// The bytes that SQLite's `hex()` spelled (upper-case; lower-case is read too). A table
/// lookup a digit: a window of 1,000 points' samples is 70,000 digits, and a branch a digit
/// (is it 0–9 or A–F?) was a tenth of the series API. Written into `bytes` (cleared first),
/// which a window's points take turns to use.
fn unhex_into(text: &str, bytes: &mut Vec<u8>) -> Result<(), DbError> {
    let digits = text.as_bytes();
    let mut invalid = 0;
    bytes.clear();
    bytes.extend(digits.chunks_exact(2).map(|pair| {
        let (high, low) = (NIBBLES[usize::from(pair[0])], NIBBLES[usize::from(pair[1])]);
        invalid |= high | low;
        (high << 4) | (low & 0x0f)
    }));
    if digits.len() % 2 == 1 || invalid > 0x0f {
        return Err(decode_error(std::io::Error::other(format!(
            "not hexadecimal bytes: {:?}",
            text.chars().take(40).collect::<String>()
        ))));
    }
    Ok(())
}

/// The writer's page cache, in KiB (negative, as SQLite takes it). A merge of staged rows
/// changes pages scattered over the clustered table and the summaries: at 100 M stored some
/// 22,000 (88 MiB) a merge, under interior pages that every merge reads again. At 32 MiB they
/// did not fit, and each merge re-read them from the file and wrote some out before its end;
/// at 128 MiB a merge took about a fifth less (RELIABILITY.md). A cache fills only as pages
/// are read: a small database keeps a small one.
const WRITER_CACHE_SIZE: &str = "-131072";

/// WAL pages written before the writer copies them back into the database itself (SQLite's
/// default is 1,000, 4 MiB): a backstop, since each merge has the WAL copied in the
/// background (`checkpoints.rs`). Before staging, an upload of 1,000 measurements touched up to
/// 1,000 pages, so the default checkpointed (and synced) after nearly every upload, and 16,384
/// took ingest into a 400,000-measurement database from 27k to 48k measurements/s. A merge
/// at 100 M stored writes some 22,000 pages: the backstop is above that and the uploads
/// between two merges, so that it does not run in a merge's commit.
const WAL_CHECKPOINT_PAGES: &str = "65536";

/// Where the writer keeps its temporary files. Each INSERT of an upload's measurements keeps
/// a statement journal (a copy of every page it changes, to undo that statement alone if a row
/// fails); in a temporary file, writing it cost about as much as writing the WAL (perf of a
/// 10-M fill, RELIABILITY.md). In memory it holds at most the pages of one upload.
const WRITER_TEMP_STORE: &str = "memory";

/// The database: one writer, several readers.
#[derive(Clone, Debug)]
pub struct Db {
    reader: SqlitePool,
    writer: SqlitePool,
    version: Arc<version::DataVersion>,
    staging: Arc<staging::Staging>,
    checkpoints: checkpoints::Checkpoints,
}

impl Db {
    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    pub async fn open(path: &Path) -> Result<Db, DbError> {
        owner_only(path)?;
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let version = Arc::default();
        // Both pools' connections get the SQL functions kymo's queries call.
        let writer = version::DataVersion::watch(&version, SqlitePoolOptions::new(), |conn| {
            Box::pin(sql_functions::register(conn))
        })
        .max_connections(1)
        .connect_with(
            (options.clone())
                .pragma("cache_size", WRITER_CACHE_SIZE)
                .pragma("wal_autocheckpoint", WAL_CHECKPOINT_PAGES)
                .pragma("temp_store", WRITER_TEMP_STORE),
        )
        .await?;
        sqlx::migrate!("../migrations").run(&writer).await?;
        samples_conversion::convert_text_samples(&writer).await?;
        summaries::build_pending(&writer).await?;
        let staged =
            sqlx::query_scalar!(r#"SELECT count(*) AS "n!: i64" FROM measurements_staged"#)
                .fetch_one(&writer)
                .await?;
        let staging = Arc::new(staging::Staging::new(u64::try_from(staged).unwrap_or(0)));
        // Its connection opens at the first merge, not at start-up.
        let checkpoints = checkpoints::Checkpoints::new(
            SqlitePoolOptions::new()
                .max_connections(1)
                .connect_lazy_with(options.clone()),
        );
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .after_connect(|conn, _| Box::pin(sql_functions::register(conn)))
            .connect_with(options.read_only(true))
            .await?;
        Ok(Db {
            reader,
            writer,
            version,
            staging,
            checkpoints,
        })
    }

    /// A number that moves after every committed write that changed a row (and only then):
    /// what was computed from the database at one version is current while it stays.
    pub fn data_version(&self) -> u64 {
        self.version.current()
    }

    /// Starts a write transaction holding the write lock from its first statement.
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, DbError> {
        match self.writer.begin_with("BEGIN IMMEDIATE").await {
            // A COMMIT that failed on a full disk is rolled back by SQLite, whereupon sqlx's own
            // ROLLBACK fails and it goes on counting an open transaction: that connection can
            // never begin again. It is closed, and the pool opens a fresh one.
            Err(sqlx::Error::InvalidSavePointStatement) => {
                let poisoned = self.writer.acquire().await?;
                let _ = sqlx::Connection::close(poisoned.detach()).await;
                Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
            }
            begun => Ok(begun?),
        }
    }

    /// `PRAGMA integrity_check`: `ok` when the file is sound.
    pub async fn integrity_check(&self) -> Result<String, DbError> {
        let row: (String,) = sqlx::query_as("PRAGMA integrity_check")
            .fetch_one(&self.reader)
            .await?;
        Ok(row.0)
    }

    /// Closes both pools, checkpointing the WAL.
    pub async fn close(&self) {
        self.reader.close().await;
        self.checkpoints.close().await;
        self.writer.close().await;
    }
}

/// Makes the database file readable by its owner only (mode 0600), creating it so if it is
/// new: it holds webhook secrets, forge tokens and git credentials. SQLite gives its `-wal`
/// and `-shm` files the database's mode; an older database's are tightened here too.
fn owner_only(path: &Path) -> Result<(), DbError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let io = |err: std::io::Error| {
        DbError::Invalid(format!(
            "cannot secure the database {}: {err}",
            path.display()
        ))
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = std::path::PathBuf::from(name);
        match std::fs::metadata(&file) {
            Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
                    .map_err(io)?;
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{DbError, to_hex, unhex_into};

    fn unhex(text: &str) -> Result<Vec<u8>, DbError> {
        let mut bytes = vec![7; 3];
        unhex_into(text, &mut bytes).map(|()| bytes)
    }

    #[test]
    fn bytes_go_to_hexadecimal_and_back_and_anything_else_is_refused() {
        assert_eq!(unhex("").unwrap(), Vec::<u8>::new());
        assert_eq!(unhex("00FF7fA0").unwrap(), [0x00, 0xff, 0x7f, 0xa0]);
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(to_hex(&all), hex::encode_upper(&all));
        assert_eq!(unhex(&to_hex(&all)).unwrap(), all);
        assert_eq!(unhex(&hex::encode(&all)).unwrap(), all);
        for bad in ["0", "ABC", "0G", "G0", "zz", "é0", " 0", "0x12"] {
            assert!(unhex(bad).is_err(), "{bad:?} was read");
        }
    }
}
