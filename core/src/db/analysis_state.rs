//! What a series' last change-point analysis decided and which input it read, so that the next
//! analysis can prove the earlier input unchanged and re-examine only the windows still open
//! (see [`crate::stats::Windows`]); and the reads that analysis needs.

use serde::{Deserialize, Serialize};
use sqlx::SqliteConnection;

use crate::model::Direction;
use crate::samples::Samples;
use crate::stats::{ChangePoint, VerdictKind, run_value};

use super::regressions::AnalysisPoint;
use super::{Db, DbError};

/// One stored measurement of a series as the analysis input's digest sees it: which commit,
/// where in history, which run (a series has one measurement per run). Measurements are never
/// changed in place, so these identify the values and samples too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputRow {
    pub commit_id: i64,
    pub position: i64,
    pub run_id: i64,
}

/// The analysis input of a series, light: its rows in history order (position, then
/// measurement), without values or samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalysisInput(pub Vec<InputRow>);

impl AnalysisInput {
    /// How many points (commits) the rows make.
    pub fn points(&self) -> usize {
        self.0
            .windows(2)
            .filter(|w| w[0].commit_id != w[1].commit_id)
            .count()
            + usize::from(!self.0.is_empty())
    }

    /// The position of each point, oldest first.
    pub fn positions(&self) -> Vec<i64> {
        let mut positions: Vec<i64> = self.0.iter().map(|r| r.position).collect();
        positions.dedup();
        positions
    }

    /// A digest (FNV-1a, 64 bits) of the rows at positions up to `through`: equal digests mean
    /// the same measurements of the same commits in the same order, but for a chance of 2⁻⁶⁴.
    pub fn digest_through(&self, through: i64) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for row in self.0.iter().take_while(|r| r.position <= through) {
            for part in [row.commit_id, row.position, row.run_id] {
                for byte in part.to_le_bytes() {
                    hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
                }
            }
        }
        hash
    }
}

/// A confirmed change point as stored with the analysis: the detector's answer and the commits
/// it names, so that a later analysis can keep it without reading those commits again. Its
/// numbers are stored as their bits: JSON's decimal text, read back by serde_json, may come
/// back one unit in the last place away, and then the kept decision is no longer the one a full
/// analysis makes (the integration test caught exactly that).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredChange {
    pub position: usize,
    pub span: usize,
    pub kind: VerdictKind,
    #[serde(with = "exact_f64")]
    pub before: f64,
    #[serde(with = "exact_f64")]
    pub after: f64,
    #[serde(with = "exact_f64")]
    pub change_pct: f64,
    #[serde(with = "exact_f64")]
    pub ci_low_pct: f64,
    #[serde(with = "exact_f64")]
    pub ci_high_pct: f64,
    #[serde(with = "exact_f64")]
    pub p_value: f64,
    #[serde(with = "exact_f64")]
    pub noise_pct: f64,
    pub segment_before: usize,
    pub segment_after: usize,
    pub evidence_before: usize,
    pub evidence_after: usize,
    pub method: String,
    pub commit_id: i64,
    pub previous_id: Option<i64>,
    pub commit_position: i64,
}

/// The methods a change point may name; a stored one naming another is not trusted.
const METHODS: [&str; 4] = [
    "seeded-segmentation+mann-whitney",
    "seeded-segmentation+mann-whitney+ramp",
    "seeded-segmentation+samples-beside-the-step",
    "recent-commits+per-commit-test",
];

impl StoredChange {
    /// `change` at the commit `commit_id` (history position `commit_position`), after
    /// `previous_id`.
    pub fn new(
        change: &ChangePoint,
        commit_id: i64,
        previous_id: Option<i64>,
        commit_position: i64,
    ) -> Self {
        Self {
            position: change.position,
            span: change.span,
            kind: change.kind,
            before: change.before,
            after: change.after,
            change_pct: change.change_pct,
            ci_low_pct: change.ci_low_pct,
            ci_high_pct: change.ci_high_pct,
            p_value: change.p_value,
            noise_pct: change.noise_pct,
            segment_before: change.segment_before,
            segment_after: change.segment_after,
            evidence_before: change.evidence_before,
            evidence_after: change.evidence_after,
            method: change.method.to_string(),
            commit_id,
            previous_id,
            commit_position,
        }
    }

    /// The detector's answer again; `None` for a method this build does not know.
    pub fn change_point(&self) -> Option<ChangePoint> {
        let method = METHODS.into_iter().find(|m| *m == self.method)?;
        Some(ChangePoint {
            position: self.position,
            span: self.span,
            kind: self.kind,
            before: self.before,
            after: self.after,
            change_pct: self.change_pct,
            ci_low_pct: self.ci_low_pct,
            ci_high_pct: self.ci_high_pct,
            p_value: self.p_value,
            noise_pct: self.noise_pct,
            segment_before: self.segment_before,
            segment_after: self.segment_after,
            evidence_before: self.evidence_before,
            evidence_after: self.evidence_after,
            method,
        })
    }
}

/// What a series' last analysis read and decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnalysisState {
    /// Points per analysis window.
    pub window_len: usize,
    /// The sensitivity it used, as JSON.
    pub sensitivity: String,
    pub direction: String,
    /// Points analysed, and the position of the last.
    pub points: usize,
    pub last_position: i64,
    /// [`AnalysisInput::digest_through`] the last position.
    pub input_digest: u64,
    /// Its confirmed change points (not the recent change, which every analysis redoes).
    pub detected: Vec<StoredChange>,
}

/// How a series was analysed, for the counts kept with its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnalysisPath {
    /// Only the windows still open were re-examined.
    Incremental,
    /// The whole history, and why.
    Full(String),
}

/// How a series' analyses went: how many were incremental, how many full, and why the last
/// full one was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalysisCounts {
    pub incremental: i64,
    pub full: i64,
    pub full_reason: Option<String>,
}

/// What an analysis of a series reads, from one snapshot of the database: its light input,
/// the state of its last analysis, and its points from the position the caller chose.
#[derive(Debug, Clone)]
pub struct AnalysisSnapshot {
    pub input: AnalysisInput,
    pub state: Option<AnalysisState>,
    pub points: Vec<AnalysisPoint>,
}

impl Db {
    /// Reads what an analysis of a series needs in one read transaction, so that the points
    /// are exactly those the input describes: `from` picks, given the input and the last
    /// state, the history position from which points are read.
    pub async fn analysis_snapshot(
        &self,
        series_id: i64,
        from: impl FnOnce(&AnalysisInput, Option<&AnalysisState>) -> i64,
    ) -> Result<AnalysisSnapshot, DbError> {
        let mut tx = self.reader.begin().await?;
        let state = sqlx::query_scalar!(
            "SELECT state FROM series_analysis WHERE series_id = ?",
            series_id
        )
        .fetch_optional(&mut *tx)
        .await?
        // A state this build cannot read only makes the next analysis a full one.
        .and_then(|s| serde_json::from_str::<AnalysisState>(&s).ok());
        let rows = sqlx::query_as!(
            InputRow,
            r#"SELECT c.id AS "commit_id!", c.position AS "position!", x.run_id AS "run_id!"
               FROM measurements x JOIN commits c ON c.id = x.commit_id
               WHERE x.series_id = ?1 AND c.position IS NOT NULL
               UNION ALL
               SELECT c.id, c.position, x.run_id
               FROM staged_commits k
               CROSS JOIN measurements_staged x ON x.commit_id = k.commit_id AND x.series_id = ?1
               JOIN commits c ON c.id = x.commit_id
               WHERE c.position IS NOT NULL
               ORDER BY 2, 3"#,
            series_id
        )
        .fetch_all(&mut *tx)
        .await?;
        let input = AnalysisInput(rows);
        let position = from(&input, state.as_ref());
        let points = points_from(&mut tx, series_id, position).await?;
        tx.commit().await?;
        Ok(AnalysisSnapshot {
            input,
            state,
            points,
        })
    }

    /// The points of a series on the tracked branch from history position `from` on, oldest
    /// first (see [`Db::analysis_points`]).
    pub async fn analysis_points_from(
        &self,
        series_id: i64,
        from: i64,
    ) -> Result<Vec<AnalysisPoint>, DbError> {
        points_from(&mut *self.reader.acquire().await?, series_id, from).await
    }

    /// Stores the analysis states of many series in one transaction, counting each analysis as
    /// incremental or full.
    pub async fn store_analysis_states(
        &self,
        states: &[(i64, AnalysisState, AnalysisPath)],
    ) -> Result<(), DbError> {
        let mut tx = self.begin_write().await?;
        for (series_id, state, path) in states {
            let (incremental, full, reason) = match path {
                AnalysisPath::Incremental => (1, 0, None),
                AnalysisPath::Full(reason) => (0, 1, Some(reason.as_str())),
            };
            let json = serde_json::to_string(state)
                .map_err(|err| DbError::Conflict(format!("analysis state: {err}")))?;
            sqlx::query!(
                r#"INSERT INTO series_analysis (series_id, state, incremental, full, full_reason)
                   VALUES (?1, ?2, ?3, ?4, ?5)
                   ON CONFLICT (series_id) DO UPDATE SET state = excluded.state,
                       incremental = series_analysis.incremental + ?3,
                       full = series_analysis.full + ?4,
                       full_reason = coalesce(?5, series_analysis.full_reason)"#,
                series_id,
                json,
                incremental,
                full,
                reason
            )
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// How a series' analyses went (zero counts before its first).
    pub async fn analysis_counts(&self, series_id: i64) -> Result<AnalysisCounts, DbError> {
        let row = sqlx::query!(
            "SELECT incremental, full, full_reason FROM series_analysis WHERE series_id = ?",
            series_id
        )
        .fetch_optional(&self.reader)
        .await?;
        Ok(row.map_or(
            AnalysisCounts {
                incremental: 0,
                full: 0,
                full_reason: None,
            },
            |r| AnalysisCounts {
                incremental: r.incremental,
                full: r.full,
                full_reason: r.full_reason,
            },
        ))
    }
}

/// The points of a series from history position `from` on: a commit measured more than once
/// (a retry, a bisection's repeats) is one point, the samples of all its runs pooled, valued at
/// their median. A disturbed run (see `disturbed_runs`) is left out once its commit has a run
/// that is not.
async fn points_from(
    conn: &mut SqliteConnection,
    series_id: i64,
    from: i64,
) -> Result<Vec<AnalysisPoint>, DbError> {
    let rows = sqlx::query!(
        r#"SELECT c.id AS "commit_id!", c.position AS "position!", x.value,
                  x.samples AS "samples: Samples", s.direction, x.run_id,
                  EXISTS (SELECT 1 FROM disturbed_runs d WHERE d.run_id = x.run_id) AS "disturbed!: bool"
           FROM measurements x JOIN commits c ON c.id = x.commit_id
           JOIN series s ON s.id = x.series_id
           WHERE x.series_id = ?1 AND c.position IS NOT NULL AND c.position >= ?2
           UNION ALL
           SELECT c.id, c.position, x.value, x.samples, s.direction, x.run_id,
                  EXISTS (SELECT 1 FROM disturbed_runs d WHERE d.run_id = x.run_id)
           FROM staged_commits k
           CROSS JOIN measurements_staged x ON x.commit_id = k.commit_id AND x.series_id = ?1
           JOIN commits c ON c.id = x.commit_id
           JOIN series s ON s.id = x.series_id
           WHERE c.position IS NOT NULL AND c.position >= ?2
           ORDER BY 2, 6"#,
        series_id,
        from
    )
    .fetch_all(&mut *conn)
    .await?;
    let undisturbed: std::collections::HashSet<i64> = (rows.iter())
        .filter(|r| !r.disturbed)
        .map(|r| r.commit_id)
        .collect();
    let mut points: Vec<AnalysisPoint> = Vec::with_capacity(rows.len());
    let mut values: Vec<f64> = Vec::new();
    for r in rows {
        if r.disturbed && undisturbed.contains(&r.commit_id) {
            continue;
        }
        let samples = r.samples.0;
        let direction = Direction::parse(&r.direction).unwrap_or(Direction::Lower);
        // A run of many samples stands for their fast end, as in a verdict.
        let latest = run_value(r.value, &samples, direction);
        match points.last_mut() {
            Some(last) if last.commit_id == r.commit_id => {
                values.push(r.value);
                last.samples.extend(samples);
                let pooled = pooled_value(&last.samples, &values);
                last.value = run_value(pooled, &last.samples, direction);
                last.latest_value = latest;
            }
            _ => {
                values.clear();
                values.push(r.value);
                points.push(AnalysisPoint {
                    commit_id: r.commit_id,
                    position: r.position,
                    value: latest,
                    samples,
                    latest_value: latest,
                });
            }
        }
    }
    Ok(points)
}

/// The value of a commit measured several times: the median of all samples, or of the runs'
/// values when no run kept samples.
fn pooled_value(samples: &[f64], values: &[f64]) -> f64 {
    crate::results::median(if samples.is_empty() { values } else { samples }).unwrap_or(f64::NAN)
}

/// An `f64` as its bits, so that every value (NaN and infinities too) comes back exactly.
mod exact_f64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(value.to_bits())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        u64::deserialize(deserializer).map(f64::from_bits)
    }
}
