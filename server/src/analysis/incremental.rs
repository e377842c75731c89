//! One series' change-point analysis: incremental when the points before the analysis windows
//! still open are provably those the last analysis read, whole otherwise. Either way the
//! result is that of [`Windows::analyse`] over the whole history (see
//! [`kymo_core::stats::Windows`]).

use std::collections::HashMap;

use kymo_core::db::{
    AnalysisInput, AnalysisPath, AnalysisPoint, AnalysisState, Db, FoundChange, SeriesToAnalyse,
    StoredChange,
};
use kymo_core::model::Direction;
use kymo_core::stats::{
    Analysis, ChangePoint, CommitObservation, NOISE_HISTORY, NoiseWindow, Sensitivity, VerdictKind,
    Windows,
};

use crate::error::{AppError, AppResult};
use crate::low_priority;

/// What the analysis of one series found, and what to keep for the next one.
pub struct SeriesAnalysis {
    pub found: Vec<FoundChange>,
    /// The commit of the series' last point and the noise windows up to it.
    pub noise: Option<(i64, Vec<NoiseWindow>)>,
    pub state: AnalysisState,
    pub path: AnalysisPath,
    /// Whether the state is the one stored already (nothing new was read): then nothing is
    /// written, so that re-analysing unchanged history changes no row.
    pub unchanged: bool,
}

/// Which windows to re-examine, from which point on, keeping which earlier decisions.
struct Plan {
    first: usize,
    offset: usize,
    known: Vec<StoredChange>,
    path: AnalysisPath,
}

/// Analyses one series with `windows`, re-examining only what a new point can change when the
/// last analysis's input is proved unchanged.
pub async fn analyse_series(
    db: &Db,
    series: &SeriesToAnalyse,
    sensitivity: Sensitivity,
    windows: Windows,
) -> AppResult<SeriesAnalysis> {
    let direction = Direction::parse(&series.direction).unwrap_or(Direction::Lower);
    let settings = serde_json::to_string(&sensitivity).map_err(anyhow::Error::from)?;
    let mut plan = None;
    let snapshot = db
        .analysis_snapshot(series.id, |input, state| {
            let chosen = choose(
                input,
                state,
                windows,
                &settings,
                &series.direction,
                &sensitivity,
            );
            let positions = input.positions();
            let from = positions.get(chosen.offset).copied().unwrap_or(i64::MAX);
            plan = Some(chosen);
            from
        })
        .await?;
    let plan = plan.expect("the snapshot asks for its plan");
    let positions = snapshot.input.positions();
    let points = snapshot.points;
    if points.len() != positions.len() - plan.offset.min(positions.len()) {
        return Err(AppError::Internal(anyhow::anyhow!(
            "series {}: {} points read where its input has {}",
            series.id,
            points.len(),
            positions.len() - plan.offset
        )));
    }
    let known: Vec<ChangePoint> = (plan.known.iter())
        .filter_map(StoredChange::change_point)
        .collect();
    let observations = observations(&points);
    let (offset, first) = (plan.offset, plan.first);
    // The analysis's CPU work, kept off the threads that answer pages.
    let (analysis, points) = low_priority::run(move || {
        let analysis = windows.analyse_since(
            &known,
            &observations,
            offset,
            first,
            direction,
            &sensitivity,
        );
        (analysis, points)
    })
    .await
    .ok_or_else(|| {
        AppError::Internal(anyhow::anyhow!(
            "the analysis of series {} failed",
            series.id
        ))
    })?;
    let commits = Commits {
        points: &points,
        offset,
        known: (plan.known.iter()).map(|c| (c.position, c)).collect(),
    };
    let detected: Vec<StoredChange> = (analysis.detected.iter())
        .map(|c| commits.stored(c))
        .collect::<Option<_>>()
        .ok_or_else(|| missing_commit(series.id))?;
    let found = found_changes(&analysis, &commits).ok_or_else(|| missing_commit(series.id))?;
    let last_position = positions.last().copied().unwrap_or(i64::MIN);
    let state = AnalysisState {
        window_len: windows.points(),
        sensitivity: settings,
        direction: series.direction.clone(),
        points: positions.len(),
        last_position,
        input_digest: snapshot.input.digest_through(last_position),
        detected,
    };
    let noise = (points.last()).map(|last| (last.commit_id, super::noise_in(&points)));
    Ok(SeriesAnalysis {
        found,
        noise,
        unchanged: snapshot.state.as_ref() == Some(&state),
        state,
        path: plan.path,
    })
}

fn missing_commit(series_id: i64) -> AppError {
    AppError::Internal(anyhow::anyhow!(
        "series {series_id}: a change point names a commit the analysis did not read"
    ))
}

/// The plan for a series: incremental from the windows still open when `state` is proved to
/// describe the start of `input`, whole otherwise.
fn choose(
    input: &AnalysisInput,
    state: Option<&AnalysisState>,
    windows: Windows,
    settings: &str,
    direction: &str,
    sensitivity: &Sensitivity,
) -> Plan {
    let n = input.points();
    let full = |reason: &str| Plan {
        first: 0,
        offset: 0,
        known: Vec::new(),
        path: AnalysisPath::Full(reason.to_string()),
    };
    let Some(state) = state else {
        return full("no earlier analysis");
    };
    if let Err(reason) = proven_unchanged(input, state, windows, settings, direction) {
        return full(reason);
    }
    let first = windows.first_open(state.points);
    // The noise windows stored with the analysis read the last NOISE_HISTORY + 1 points.
    let offset = windows
        .read_from(first, n, sensitivity)
        .min(n.saturating_sub(NOISE_HISTORY + 1));
    Plan {
        first,
        offset,
        known: state.detected.clone(),
        path: AnalysisPath::Incremental,
    }
}

/// Whether the points `state` analysed are still the first points of `input`, under the same
/// settings: or why not.
fn proven_unchanged(
    input: &AnalysisInput,
    state: &AnalysisState,
    windows: Windows,
    settings: &str,
    direction: &str,
) -> Result<(), &'static str> {
    if state.window_len != windows.points() {
        return Err("the analysis window changed");
    }
    if state.sensitivity != settings {
        return Err("the sensitivity changed");
    }
    if state.direction != direction {
        return Err("the direction changed");
    }
    let analysed = (input.positions().iter())
        .take_while(|&&p| p <= state.last_position)
        .count();
    if analysed != state.points {
        return Err("commits were measured, or left the branch, inside the analysed history");
    }
    if input.digest_through(state.last_position) != state.input_digest {
        return Err("the measurements of the analysed history changed");
    }
    if state.detected.iter().any(|c| c.change_point().is_none()) {
        return Err("a stored change point names a method this build does not know");
    }
    Ok(())
}

/// The commits change points name: read points from `offset` on, and the stored decisions
/// kept from before.
struct Commits<'a> {
    points: &'a [AnalysisPoint],
    offset: usize,
    known: HashMap<usize, &'a StoredChange>,
}

impl Commits<'_> {
    /// The change point with its commit, its previous commit and its history position: those
    /// a stored decision at the same point named (the points before the last analysed one are
    /// proved unchanged), else those read.
    fn stored(&self, change: &ChangePoint) -> Option<StoredChange> {
        if let Some(kept) = self.known.get(&change.position) {
            return Some(StoredChange::new(
                change,
                kept.commit_id,
                kept.previous_id,
                kept.commit_position,
            ));
        }
        let point = |i: usize| i.checked_sub(self.offset).and_then(|i| self.points.get(i));
        let at = point(change.position)?;
        let previous = match change.position.checked_sub(1) {
            None => None,
            Some(i) => Some(point(i)?.commit_id),
        };
        Some(StoredChange::new(
            change,
            at.commit_id,
            previous,
            at.position,
        ))
    }
}

/// The regressions and improvements of an analysis, as records to store.
fn found_changes(analysis: &Analysis, commits: &Commits) -> Option<Vec<FoundChange>> {
    let mut found = Vec::new();
    for change in analysis.changes() {
        let kind = match change.kind {
            VerdictKind::Regression => "regression",
            VerdictKind::Improvement => "improvement",
            _ => continue,
        };
        let at = commits.stored(change)?;
        found.push(FoundChange {
            commit_id: at.commit_id,
            previous_id: at.previous_id,
            position: at.commit_position,
            kind,
            baseline: change.before,
            value: change.after,
            change_pct: change.change_pct,
            ci_low_pct: change.ci_low_pct,
            ci_high_pct: change.ci_high_pct,
            p_value: change.p_value,
            noise_pct: change.noise_pct,
            segment_before: change.segment_before as i64,
            segment_after: change.segment_after as i64,
            span: change.span as i64,
            method: change.method,
        });
    }
    Some(found)
}

/// The change points of a whole history analysed in `windows`, as records to store: what the
/// incremental analysis of the same points stores too.
pub fn changes_in(
    points: &[AnalysisPoint],
    direction: Direction,
    sensitivity: &Sensitivity,
    windows: Windows,
) -> Vec<FoundChange> {
    let observations = observations(points);
    let analysis = windows.analyse(&observations, direction, sensitivity);
    let commits = Commits {
        points,
        offset: 0,
        known: HashMap::new(),
    };
    found_changes(&analysis, &commits).expect("every point of the history was read")
}

/// The points as the detector reads them.
fn observations(points: &[AnalysisPoint]) -> Vec<CommitObservation> {
    (points.iter())
        .map(|p| CommitObservation {
            position: p.position as usize,
            value: p.value,
            samples: p.samples.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(index: usize) -> AnalysisPoint {
        AnalysisPoint {
            commit_id: 1000 + index as i64,
            position: 2 * index as i64,
            value: 1.0,
            samples: Vec::new(),
            latest_value: 1.0,
        }
    }

    fn change(position: usize) -> ChangePoint {
        ChangePoint {
            position,
            span: 1,
            kind: VerdictKind::Regression,
            before: 1.0,
            after: 2.0,
            change_pct: 100.0,
            ci_low_pct: 90.0,
            ci_high_pct: 110.0,
            p_value: 1e-6,
            noise_pct: 1.0,
            segment_before: 5,
            segment_after: 5,
            evidence_before: 5,
            evidence_after: 5,
            method: "seeded-segmentation+mann-whitney",
        }
    }

    #[test]
    fn a_change_point_names_the_commits_kept_with_it_or_those_read() {
        let points: Vec<AnalysisPoint> = (10..20).map(point).collect();
        let kept = StoredChange::new(&change(10), 1010, Some(1009), 20);
        let commits = Commits {
            points: &points,
            offset: 10,
            known: HashMap::from([(10, &kept)]),
        };
        // The first point read: its previous commit was not read, but was kept.
        let at_offset = commits.stored(&change(10)).unwrap();
        assert_eq!(
            (
                at_offset.commit_id,
                at_offset.previous_id,
                at_offset.commit_position
            ),
            (1010, Some(1009), 20)
        );
        let read = commits.stored(&change(12)).unwrap();
        assert_eq!(
            (read.commit_id, read.previous_id, read.commit_position),
            (1012, Some(1011), 24)
        );
        // Before what was read and not kept: nothing to name, so the analysis fails loudly.
        assert!(commits.stored(&change(5)).is_none());
        assert!(commits.stored(&change(20)).is_none());
    }
}
