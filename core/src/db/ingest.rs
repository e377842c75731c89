//! Storing a run and its measurements. A whole upload is one transaction of set-based
//! statements, each fed one JSON array through `jsonb_each`, so that ingest cost does not
//! grow with a round trip per measurement: the measurements of series that exist, then, only
//! when some were new, the benchmarks and series and the measurements left. `CROSS JOIN`
//! keeps `jsonb_each` as the outer loop (SQLite does not reorder it), so each row is one
//! index lookup instead of a scan of the whole batch per benchmark.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::jobs::lease_lost;
use super::{Db, DbError, to_hex};
use crate::model::Environment;
use crate::protocol::{ConfigUsed, SuiteUpload};
use crate::results::BenchmarkResult;

/// Where a run comes from and what it holds.
#[derive(Debug)]
pub struct RunRecord<'a> {
    pub repository_id: i64,
    pub commit_id: i64,
    pub machine_id: i64,
    /// The job (and the lease its worker holds) that this run completes, for worker runs.
    pub job: Option<(i64, &'a str)>,
    pub environment: &'a Environment,
    pub log: &'a str,
    pub suites: &'a [SuiteUpload],
    /// Which `kymo.toml` a worker's run used.
    pub config: Option<&'a ConfigUsed>,
    /// An upload's idempotency key: a second upload with the same key stores nothing and gets
    /// the first one's run.
    pub upload_key: Option<&'a str>,
}

/// What a stored run added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestSummary {
    pub run_id: i64,
    pub measurements: usize,
}

/// An upload's measurements as one JSON array, and how many.
struct Batches {
    measurements: String,
    count: usize,
}

// The rows of the JSON arrays, serialized straight from borrowed data: building
// `serde_json::Value`s first cost an allocation per field and was a fifth of ingest time.
#[derive(Serialize)]
struct BenchmarkRow<'a> {
    n: &'a str,
    s: &'a str,
}

#[derive(Serialize)]
struct SeriesRow<'a> {
    b: &'a str,
    m: &'a str,
    u: &'a str,
    d: &'static str,
}

/// A benchmark's measurements, `[name, [[metric, value, samples, hdr], ...]]`: the insert finds
/// the benchmark once for all its metrics, and reads each measurement's fields by position. The
/// samples are their stored encoding in hex (JSON has no bytes; SQL `unhex` restores them).
#[derive(Serialize)]
struct BenchmarkMeasurements<'a>(&'a str, Vec<(&'a str, f64, String, Option<&'a str>)>);

/// Every benchmark of `suites` with its suite and key.
fn keyed(suites: &[SuiteUpload]) -> Vec<(&str, &BenchmarkResult, String)> {
    (suites.iter())
        .flat_map(|suite| {
            (suite.results.benchmarks.iter())
                .map(|bench| (suite.suite.as_str(), bench, bench.key()))
        })
        .collect()
}

fn batches(suites: &[SuiteUpload]) -> Batches {
    let keyed = keyed(suites);
    let mut measurements = Vec::with_capacity(keyed.len());
    let mut count = 0;
    for (_, bench, key) in &keyed {
        let metrics: Vec<_> = (bench.metrics.iter())
            .map(|metric| {
                (
                    metric.name.as_str(),
                    metric.value,
                    to_hex(&crate::samples::encode(&metric.samples)),
                    metric.hdr.as_deref(),
                )
            })
            .collect();
        count += metrics.len();
        measurements.push(BenchmarkMeasurements(key, metrics));
    }
    Batches {
        count,
        measurements: to_json(&measurements),
    }
}

/// The benchmarks and the series of `suites`, as two JSON arrays: only an upload with new
/// series needs them, so they are spelled then.
fn new_series(suites: &[SuiteUpload]) -> (String, String) {
    let keyed = keyed(suites);
    let benchmarks: Vec<BenchmarkRow> = (keyed.iter())
        .map(|(suite, _, key)| BenchmarkRow { n: key, s: suite })
        .collect();
    let series: Vec<SeriesRow> = (keyed.iter())
        .flat_map(|(_, bench, key)| {
            bench.metrics.iter().map(move |metric| SeriesRow {
                b: key,
                m: &metric.name,
                u: &metric.unit,
                d: metric.direction.as_str(),
            })
        })
        .collect();
    (to_json(&benchmarks), to_json(&series))
}

fn to_json<T: Serialize>(rows: &[T]) -> String {
    serde_json::to_string(rows).expect("rows of strings and finite numbers always serialize")
}

impl Db {
    /// Stores a run with all its measurements atomically. For a worker run the job must still
    /// be leased to that worker; it is marked succeeded in the same transaction, so a result
    /// is stored exactly once even when a lease expired and the job ran twice.
    pub async fn store_run(
        &self,
        record: RunRecord<'_>,
        now: i64,
    ) -> Result<IngestSummary, DbError> {
        crate::results::validate_suites(record.suites).map_err(DbError::Invalid)?;
        crate::results::validate_environment(record.environment).map_err(DbError::Invalid)?;
        let batches = batches(record.suites);
        let env = record.environment;
        let (job_id, source) = match record.job {
            Some((id, _)) => (Some(id), "worker"),
            None => (None, "upload"),
        };
        let config_source = record.config.map(|c| c.source.as_str());
        let config_hash = record.config.map(|c| c.sha256.as_str());
        let digest = record.upload_key.map(|_| upload_digest(&record));
        let mut tx = self.begin_write().await?;
        if let (Some(key), Some(digest)) = (record.upload_key, &digest) {
            // Under the write lock: two attempts with one key cannot both get past this.
            if let Some(stored) = upload_by_key(&mut tx, record.repository_id, key, digest).await? {
                return Ok(stored);
            }
        }
        if let Some((id, lease)) = record.job {
            // A succeeded job keeps its log tail too, for the queue page and `kymo jobs`.
            let updated = sqlx::query!(
                r#"UPDATE jobs SET state = 'succeeded', finished_at = ?, lease_id = NULL,
                                   lease_expires_at = NULL, error = NULL, log_tail = ?, phase = NULL
                   WHERE id = ? AND state = 'running' AND lease_id = ?"#,
                now,
                record.log,
                id,
                lease
            )
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 0 {
                return Err(lease_lost(id));
            }
        }
        let run_id = sqlx::query_scalar!(
            r#"INSERT INTO runs (commit_id, machine_id, job_id, source, kernel, toolchain, governor,
                                 hostname, log, created_at, config_source, config_hash)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id AS "id!" "#,
            record.commit_id,
            record.machine_id,
            job_id,
            source,
            env.kernel,
            env.toolchain,
            env.governor,
            env.hostname,
            record.log,
            now,
            config_source,
            config_hash
        )
        .fetch_one(&mut *tx)
        .await?;
        // The home page's "last run", kept here so that it never reads the runs (one row,
        // the same page every upload).
        sqlx::query!(
            "UPDATE repositories SET last_run_at = max(coalesce(last_run_at, ?1), ?1) WHERE id = ?2",
            now,
            record.repository_id
        )
        .execute(&mut *tx)
        .await?;
        // Once a repository's benchmarks have run, every series of an upload exists: its
        // measurements go in first, and only an upload with new series pays for the two
        // upserts (a fifth of ingest time) and a second pass for the rest.
        let mut inserted = insert_measurements(&mut tx, &record, run_id, &batches).await?;
        if inserted < batches.count {
            insert_series(&mut tx, &record).await?;
            inserted += insert_measurements(&mut tx, &record, run_id, &batches).await?;
        }
        if inserted != batches.count {
            // Dropping the transaction rolls it back: nothing partial is stored.
            return Err(DbError::Invalid(format!(
                "stored {inserted} of {} measurements; refusing a partial run",
                batches.count
            )));
        }
        if let Some(key) = record.upload_key {
            let measurements = i64::try_from(batches.count).unwrap_or(i64::MAX);
            sqlx::query!(
                r#"INSERT INTO upload_keys (repository_id, key, run_id, measurements, created_at,
                                            digest)
                   VALUES (?, ?, ?, ?, ?, ?)"#,
                record.repository_id,
                key,
                run_id,
                measurements,
                now,
                digest
            )
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        self.merge_when_due(batches.count).await;
        Ok(IngestSummary {
            run_id,
            measurements: batches.count,
        })
    }
}

impl Db {
    /// The run an earlier upload with idempotency key `key` stored in the repository, if any.
    /// Refuses (a conflict) when that upload held other results than `record`'s.
    pub async fn upload_with_key(
        &self,
        record: &RunRecord<'_>,
    ) -> Result<Option<IngestSummary>, DbError> {
        let Some(key) = record.upload_key else {
            return Ok(None);
        };
        let mut connection = self.reader.acquire().await?;
        upload_by_key(
            &mut connection,
            record.repository_id,
            key,
            &upload_digest(record),
        )
        .await
    }
}

/// What an upload holds, as one digest: its commit, machine, environment and results. The
/// same results sent again (a retry) give the same digest however their JSON was spelled.
pub fn upload_digest(record: &RunRecord<'_>) -> String {
    let mut hasher = Sha256::new();
    for id in [record.commit_id, record.machine_id] {
        hasher.update(id.to_le_bytes());
    }
    let content = (record.environment, record.suites);
    serde_json::to_writer(DigestWriter(&mut hasher), &content)
        .expect("an environment and validated suites always serialize");
    hex::encode(hasher.finalize())
}

/// Feeds what serde writes straight into the hasher, without a copy of a large upload.
struct DigestWriter<'a>(&'a mut Sha256);

impl std::io::Write for DigestWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn upload_by_key(
    connection: &mut sqlx::SqliteConnection,
    repository_id: i64,
    key: &str,
    digest: &str,
) -> Result<Option<IngestSummary>, DbError> {
    let row = sqlx::query!(
        "SELECT run_id, measurements, digest FROM upload_keys WHERE repository_id = ? AND key = ?",
        repository_id,
        key
    )
    .fetch_optional(&mut *connection)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    if row.digest.as_deref().is_some_and(|stored| stored != digest) {
        return Err(DbError::Conflict(format!(
            "Idempotency-Key {key:?} was sent before with other results (stored as run {}); \
             these were not stored: send them under a key of their own",
            row.run_id
        )));
    }
    Ok(Some(IngestSummary {
        run_id: row.run_id,
        measurements: usize::try_from(row.measurements).unwrap_or(0),
    }))
}

/// Adds the benchmarks and series of `record` that its repository and machine lack.
async fn insert_series(
    tx: &mut sqlx::SqliteConnection,
    record: &RunRecord<'_>,
) -> Result<(), DbError> {
    let (benchmarks, series) = new_series(record.suites);
    sqlx::query!(
        r#"INSERT INTO benchmarks (repository_id, name, suite)
           SELECT ?, j.value ->> '$.n', j.value ->> '$.s' FROM jsonb_each(?) AS j WHERE true
           ON CONFLICT (repository_id, name) DO NOTHING"#,
        record.repository_id,
        benchmarks
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        r#"INSERT INTO series (benchmark_id, metric, unit, direction, machine_id)
           SELECT b.id, j.value ->> '$.m', j.value ->> '$.u', j.value ->> '$.d', ?
           FROM jsonb_each(?) AS j
           CROSS JOIN benchmarks b ON b.repository_id = ? AND b.name = j.value ->> '$.b'
           WHERE true
           ON CONFLICT (benchmark_id, metric, machine_id) DO NOTHING"#,
        record.machine_id,
        series,
        record.repository_id
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Stages the measurements of `batches` whose series exist and that `run_id` does not hold
/// yet; returns how many. They go to `measurements_staged` (arrival order, a few pages per
/// upload) until a merge moves them into the clustered table. That table checks no foreign
/// keys: the run was inserted above for this commit, and the series come from the join.
async fn insert_measurements(
    tx: &mut sqlx::SqliteConnection,
    record: &RunRecord<'_>,
    run_id: i64,
    batches: &Batches,
) -> Result<usize, DbError> {
    let inserted = sqlx::query!(
        r#"INSERT INTO measurements_staged (run_id, series_id, commit_id, value, samples, hdr)
           SELECT ?, s.id, ?, m.value ->> 1, unhex(m.value ->> 2), m.value ->> 3
           FROM jsonb_each(?) AS j
           CROSS JOIN benchmarks b ON b.repository_id = ? AND b.name = j.value ->> 0
           CROSS JOIN jsonb_each(j.value, '$[1]') AS m
           CROSS JOIN series s ON s.benchmark_id = b.id AND s.metric = m.value ->> 0
                        AND s.machine_id = ?
           WHERE true
           ON CONFLICT (commit_id, series_id, run_id) DO NOTHING"#,
        run_id,
        record.commit_id,
        batches.measurements,
        record.repository_id,
        record.machine_id
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(inserted as usize)
}
