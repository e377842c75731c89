//! Stored change points (regressions and improvements) and their triage.

use sqlx::SqliteConnection;

use super::{Db, DbError};

/// A point of a series as the analysis reads it: every commit on the tracked branch.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisPoint {
    pub commit_id: i64,
    pub position: i64,
    /// The commit's value as verdicts see it ([`run_value`](crate::stats::run_value)): the fast end of its samples when
    /// there are enough, else the stored value (the median of all samples for a commit measured
    /// several times).
    pub value: f64,
    pub samples: Vec<f64>,
    /// The value of the commit's latest run alone (its fast end too, with samples enough):
    /// what a verdict's noise model reads.
    pub latest_value: f64,
}

/// A series the analysis is to look at.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesToAnalyse {
    pub id: i64,
    pub repository_id: i64,
    pub benchmark: String,
    pub direction: String,
}

/// A change point the analysis found, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundChange {
    pub commit_id: i64,
    pub previous_id: Option<i64>,
    pub position: i64,
    pub kind: &'static str,
    pub baseline: f64,
    pub value: f64,
    pub change_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    pub p_value: f64,
    pub noise_pct: f64,
    pub segment_before: i64,
    pub segment_after: i64,
    /// Commits over which the level moved: 1 for a step, the ramp's length for a drift.
    pub span: i64,
    pub method: &'static str,
}

/// A regression (or improvement) as pages and the API show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RegressionRow {
    pub id: i64,
    pub repository: String,
    pub series_id: i64,
    pub benchmark: String,
    pub metric: String,
    pub unit: String,
    pub direction: String,
    pub machine: String,
    pub sha: String,
    pub message: String,
    pub position: Option<i64>,
    pub previous_sha: Option<String>,
    pub kind: String,
    pub baseline: f64,
    pub value: f64,
    pub change_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    pub p_value: f64,
    pub noise_pct: f64,
    pub segment_before: i64,
    pub segment_after: i64,
    /// Commits over which the level moved: 1 for a step at `sha`; for a slow drift, the
    /// length of its ramp from `sha` on.
    pub span: i64,
    pub method: String,
    pub active: bool,
    pub state: String,
    pub state_by: Option<String>,
    pub state_at: Option<i64>,
    pub note: String,
    pub detected_at: i64,
    /// Its confirmation's state (confirming, confirmed, refuted, unconfirmed); `None` when
    /// none was asked for (confirmation off, or found before it existed).
    pub confirmation: Option<String>,
}

/// Filters of the regressions list.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RegressionFilter {
    /// A triage state (`open`, `acknowledged`, `fixed`, `false_positive`), `closed` (fixed
    /// or false positive), `refuted` (a re-measurement did not confirm it, whatever its
    /// triage state) or `all`. The API lists `open` ones when absent.
    pub state: Option<String>,
    /// `regression` or `improvement`.
    pub kind: Option<String>,
    /// A machine's fingerprint.
    pub machine: Option<String>,
    /// Part of the benchmark's name.
    pub benchmark: Option<String>,
    /// Smallest absolute change, in percent.
    pub min_change: Option<f64>,
}

/// The triage states a regression may be moved to.
pub const TRIAGE_STATES: [&str; 4] = ["open", "acknowledged", "fixed", "false_positive"];

/// The values `state` may take besides the triage states.
pub const STATE_GROUPS: [&str; 3] = ["closed", "refuted", "all"];

/// Which regressions a `state` filter selects.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StateSelection {
    /// Triage states, as `,a,b,` for a lookup in SQL; `None`: any.
    triage: Option<String>,
    /// Only those a re-measurement refuted.
    refuted: bool,
}

impl RegressionFilter {
    /// Checks every filter, so that a misspelt one is refused instead of listing nothing (or
    /// everything).
    pub fn validated(self) -> Result<Self, DbError> {
        if let Some(state) = &self.state {
            state_selection(Some(state))?;
        }
        if let Some(kind) = &self.kind
            && !matches!(kind.as_str(), "regression" | "improvement")
        {
            return Err(DbError::Invalid(format!(
                "kind {:?}: use regression or improvement",
                cut(kind)
            )));
        }
        for (name, text) in [("machine", &self.machine), ("benchmark", &self.benchmark)] {
            if let Some(text) = text
                && (text.len() > 500 || text.chars().any(char::is_control))
            {
                return Err(DbError::Invalid(format!(
                    "{name}: at most 500 bytes, no control characters"
                )));
            }
        }
        if let Some(min) = self.min_change
            && !(min.is_finite() && min >= 0.0)
        {
            return Err(DbError::Invalid(
                "min_change is a percentage of 0 or more".into(),
            ));
        }
        Ok(self)
    }
}

/// What `state` selects; `None` (no filter) selects every state.
fn state_selection(state: Option<&str>) -> Result<StateSelection, DbError> {
    let triage = |states: &[&str]| Some(format!(",{},", states.join(",")));
    Ok(match state {
        None | Some("all") => StateSelection {
            triage: None,
            refuted: false,
        },
        Some("closed") => StateSelection {
            triage: triage(&["fixed", "false_positive"]),
            refuted: false,
        },
        Some("refuted") => StateSelection {
            triage: None,
            refuted: true,
        },
        Some(state) if TRIAGE_STATES.contains(&state) => StateSelection {
            triage: triage(&[state]),
            refuted: false,
        },
        Some(other) => {
            return Err(DbError::Invalid(format!(
                "state {:?}: use {} or {}",
                cut(other),
                TRIAGE_STATES.join(", "),
                STATE_GROUPS.join(", ")
            )));
        }
    })
}

/// A filter's text as an error message quotes it: short.
fn cut(text: &str) -> String {
    text.chars().take(40).collect()
}

/// How far (in commits) a re-analysed change point may move and still be the same one.
const SAME_CHANGE_MARGIN: i64 = 3;

impl Db {
    /// Every point of a series on the tracked branch, oldest first. A commit measured more than
    /// once (a retry, a bisection's repeats) is one point: the samples of all its runs pooled,
    /// valued at their median.
    pub async fn analysis_points(&self, series_id: i64) -> Result<Vec<AnalysisPoint>, DbError> {
        self.analysis_points_from(series_id, i64::MIN).await
    }

    /// The series a run measured.
    pub async fn run_series(&self, run_id: i64) -> Result<Vec<SeriesToAnalyse>, DbError> {
        Ok(sqlx::query_as!(
            SeriesToAnalyse,
            r#"SELECT s.id, b.repository_id, b.name AS benchmark, s.direction
               FROM runs r JOIN commits c ON c.id = r.commit_id
               JOIN benchmarks b ON b.repository_id = c.repository_id
               JOIN series s ON s.benchmark_id = b.id AND s.machine_id = r.machine_id
               WHERE r.id = ?1
                 AND (EXISTS (SELECT 1 FROM measurements_staged x WHERE x.commit_id = r.commit_id
                              AND x.series_id = s.id AND x.run_id = r.id)
                      OR EXISTS (SELECT 1 FROM measurements x WHERE x.series_id = s.id
                                 AND x.commit_id = r.commit_id AND x.run_id = r.id))"#,
            run_id
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Stores the change points of one series' latest analysis. A change point within a few
    /// commits of a stored one of the same kind updates that record (keeping its triage), so
    /// that more commits arriving never duplicate a regression; stored ones no longer found are
    /// marked inactive. A record the analysis finds unchanged is not written at all, so that
    /// re-analysing unchanged history changes no row. Returns the ids of records created now and
    /// of records moved to another commit (their confirmation forgotten): both are news to follow
    /// up, confirm and announce.
    pub async fn record_changes(
        &self,
        series_id: i64,
        found: &[FoundChange],
        now: i64,
    ) -> Result<Vec<i64>, DbError> {
        self.record_analysis(&[(series_id, found)], now).await
    }

    /// [`Db::record_changes`] for many series in one transaction: what an analysis found
    /// appears at once, and moves the data version (and the pages cached on it) once.
    pub async fn record_analysis(
        &self,
        analysed: &[(i64, &[FoundChange])],
        now: i64,
    ) -> Result<Vec<i64>, DbError> {
        let mut tx = self.begin_write().await?;
        let mut created = Vec::new();
        for (series_id, found) in analysed {
            created.extend(record_series_changes(&mut tx, *series_id, found, now).await?);
        }
        tx.commit().await?;
        Ok(created)
    }

    /// Regressions and improvements of a repository that the latest analysis still finds,
    /// newest commit first.
    pub async fn regressions(
        &self,
        repository_id: i64,
        filter: &RegressionFilter,
    ) -> Result<Vec<RegressionRow>, DbError> {
        self.regression_rows(Some(repository_id), None, filter)
            .await
    }

    /// One regression, active or not.
    pub async fn regression(&self, id: i64) -> Result<RegressionRow, DbError> {
        self.regression_rows(None, Some(id), &RegressionFilter::default())
            .await?
            .pop()
            .ok_or_else(|| DbError::NotFound(format!("regression {id}")))
    }

    /// The active regressions of a repository matching `filter`, or the one with `id`.
    async fn regression_rows(
        &self,
        repository_id: Option<i64>,
        id: Option<i64>,
        filter: &RegressionFilter,
    ) -> Result<Vec<RegressionRow>, DbError> {
        let min_change = filter.min_change.unwrap_or(0.0);
        let states = state_selection(filter.state.as_deref())?;
        Ok(sqlx::query_as!(
            RegressionRow,
            r#"SELECT g.id, r.name AS repository, g.series_id, b.name AS benchmark, s.metric, s.unit,
                      s.direction, m.fingerprint AS machine, c.sha, c.message, c.position,
                      p.sha AS "previous_sha?", g.kind, g.baseline, g.value, g.change_pct, g.ci_low_pct,
                      g.ci_high_pct, g.p_value, g.noise_pct, g.segment_before, g.segment_after, g.span, g.method,
                      g.active AS "active: bool", g.state, g.state_by, g.state_at, g.note, g.detected_at,
                      (SELECT f.state FROM confirmations f WHERE f.regression_id = g.id) AS "confirmation?: String"
               FROM regressions g
               JOIN series s ON s.id = g.series_id
               JOIN benchmarks b ON b.id = s.benchmark_id
               JOIN repositories r ON r.id = b.repository_id
               JOIN machines m ON m.id = s.machine_id
               JOIN commits c ON c.id = g.commit_id
               LEFT JOIN commits p ON p.id = g.previous_id
               WHERE (?7 IS NOT NULL AND g.id = ?7)
                  OR (?7 IS NULL AND r.id = ?1 AND g.active = 1
                      AND (?2 IS NULL OR instr(?2, ',' || g.state || ',') > 0)
                      AND (?8 = 0 OR EXISTS (SELECT 1 FROM confirmations f
                                             WHERE f.regression_id = g.id AND f.state = 'refuted'))
                      AND (?3 IS NULL OR g.kind = ?3)
                      AND (?4 IS NULL OR m.fingerprint = ?4) AND (?5 IS NULL OR instr(b.name, ?5) > 0)
                      AND abs(g.change_pct) >= ?6)
               ORDER BY c.position DESC, abs(g.change_pct) DESC
               LIMIT 1000"#,
            repository_id,
            states.triage,
            filter.kind,
            filter.machine,
            filter.benchmark,
            min_change,
            id,
            states.refuted
        )
        .fetch_all(&self.reader)
        .await?)
    }

    /// Moves a regression to a triage state, recording who did it and when, with a note.
    pub async fn triage(
        &self,
        id: i64,
        state: &str,
        by: &str,
        note: &str,
        now: i64,
    ) -> Result<(), DbError> {
        if !TRIAGE_STATES.contains(&state) {
            return Err(DbError::Invalid(format!(
                "triage state {state:?} is not one of {}",
                TRIAGE_STATES.join(", ")
            )));
        }
        if by.trim().is_empty() || by.len() > 100 || by.chars().any(char::is_control) {
            return Err(DbError::Invalid(
                "say who triaged it: 1-100 characters".into(),
            ));
        }
        if note.len() > 4000 {
            return Err(DbError::Invalid("the note is limited to 4000 bytes".into()));
        }
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query!(
            "UPDATE regressions SET state = ?, state_by = ?, state_at = ?, note = ? WHERE id = ?",
            state,
            by,
            now,
            note,
            id
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if updated == 0 {
            return Err(DbError::NotFound(format!("regression {id}")));
        }
        Ok(())
    }
}

/// The records of one series' change points, written on `conn` (see [`Db::record_changes`]).
async fn record_series_changes(
    conn: &mut SqliteConnection,
    series_id: i64,
    found: &[FoundChange],
    now: i64,
) -> Result<Vec<i64>, DbError> {
    let existing = sqlx::query!(
        r#"SELECT r.id, r.kind, r.commit_id, r.active AS "active: bool", c.position,
                  p.position AS previous_position
           FROM regressions r JOIN commits c ON c.id = r.commit_id
                              LEFT JOIN commits p ON p.id = r.previous_id
           WHERE r.series_id = ?"#,
        series_id
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut matched = Vec::new();
    let mut created = Vec::new();
    for change in found {
        // The record at this very commit if there is one, else the nearest one: near the
        // stored change point, or inside its suspect range (a bisection narrowing the range
        // moves the change point by more than the margin). A record is never moved onto a
        // commit another record holds: (series, commit) is unique, and results that arrive
        // out of history order do move change points about.
        let distance = |position: Option<i64>| position.map(|p| (p - change.position).abs());
        let inside = |previous: Option<i64>, position: Option<i64>| {
            previous.is_some_and(|prev| prev < change.position)
                && position.is_some_and(|p| change.position <= p)
        };
        let taken = existing.iter().any(|o| o.commit_id == change.commit_id);
        let same = (existing.iter())
            .filter(|e| e.kind == change.kind && !matched.contains(&e.id))
            .filter(|e| {
                distance(e.position).is_some_and(|d| d <= SAME_CHANGE_MARGIN)
                    || inside(e.previous_position, e.position)
            })
            .min_by_key(|e| (e.commit_id != change.commit_id, distance(e.position)))
            .filter(|e| e.commit_id == change.commit_id || !taken);
        let id = match same {
            Some(e) => {
                sqlx::query!(
                    r#"UPDATE regressions SET commit_id = ?1, previous_id = ?2, baseline = ?3, value = ?4,
                           change_pct = ?5, ci_low_pct = ?6, ci_high_pct = ?7, p_value = ?8, noise_pct = ?9,
                           segment_before = ?10, segment_after = ?11, method = ?12, active = 1, updated_at = ?13,
                           span = ?15
                       WHERE id = ?14
                         AND (commit_id, previous_id, baseline, value, change_pct, ci_low_pct, ci_high_pct,
                              p_value, noise_pct, segment_before, segment_after, method, active, span)
                             IS NOT (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 1, ?15)"#,
                    change.commit_id, change.previous_id, change.baseline, change.value,
                    change.change_pct, change.ci_low_pct, change.ci_high_pct, change.p_value,
                    change.noise_pct, change.segment_before, change.segment_after, change.method,
                    now, e.id, change.span
                )
                .execute(&mut *conn)
                .await?;
                if e.commit_id != change.commit_id {
                    // Moved to another commit: what confirmed it (instruction counts, an
                    // interleaved re-measure of the old pair) said nothing about the new one.
                    super::confirmations::forget_confirmation(&mut *conn, e.id, now).await?;
                    created.push(e.id);
                }
                e.id
            }
            None => {
                // A record of the other kind at this commit is revived, not replaced.
                let inserted = sqlx::query_scalar!(
                    r#"INSERT INTO regressions (series_id, commit_id, previous_id, kind, baseline, value,
                           change_pct, ci_low_pct, ci_high_pct, p_value, noise_pct, segment_before,
                           segment_after, span, method, detected_at, updated_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (series_id, commit_id) DO UPDATE SET active = 1, updated_at = excluded.updated_at
                       WHERE regressions.active = 0
                       RETURNING id AS "id!" "#,
                    series_id, change.commit_id, change.previous_id, change.kind, change.baseline,
                    change.value, change.change_pct, change.ci_low_pct, change.ci_high_pct,
                    change.p_value, change.noise_pct, change.segment_before, change.segment_after,
                    change.span, change.method, now, now
                )
                .fetch_optional(&mut *conn)
                .await?;
                // Nothing returned: an active record holds this commit and was left alone.
                let held = existing.iter().find(|e| e.commit_id == change.commit_id);
                let id = inserted.or(held.map(|e| e.id)).ok_or_else(|| {
                    DbError::Conflict(format!(
                        "no record of the change at commit {}",
                        change.commit_id
                    ))
                })?;
                if !existing.iter().any(|e| e.id == id) {
                    created.push(id);
                }
                id
            }
        };
        matched.push(id);
    }
    for e in (existing.iter()).filter(|e| e.active && !matched.contains(&e.id)) {
        sqlx::query!(
            "UPDATE regressions SET active = 0, updated_at = ? WHERE id = ?",
            now,
            e.id
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(created)
}
