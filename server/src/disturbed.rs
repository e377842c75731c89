//! Disturbed runs: a run in which most benchmarks moved together, the same way, the
//! benchmarks of code the commit did not touch too, was slowed (or sped up) by something
//! other than the code. A finding never rests on such a run alone:
//! - on a machine that runs a worker, the commit is measured again there at once (a job of
//!   the confirmation's kind), and what the disturbed run alone would file is held back until
//!   then; once the commit has a run that is not disturbed, the analysis leaves the disturbed
//!   one out (core's `points_from`), so only what moved in the new run too is filed, and then
//!   confirmed as any change is ([`crate::confirm`]);
//! - results uploaded from a machine that runs no worker are filed, marked as resting on a
//!   disturbed run (a confirmation waiting with the evidence `disturbed`), and not announced
//!   until another run of the commit is uploaded: still found then, it is confirmed and
//!   announced; gone, it is refuted.

use std::collections::{HashMap, HashSet};

use kymo_core::db::{ConfirmationTarget, JobReason};
use kymo_core::model::Direction;
use kymo_core::stats::disturbance::{MIN_SERIES, SeriesAtRun, disturbance};

use crate::error::AppResult;
use crate::state::AppState;

/// Commits before a run's commit whose values show how much each series usually moves.
const LOOKBACK: i64 = 32;

/// Judges a stored run against the commits before it. A disturbed run is remembered; when it
/// is its commit's only run on a machine that runs a worker, the commit is queued there again.
/// Returns whether the run is disturbed.
pub async fn examine_run(state: &AppState, run_id: i64) -> AppResult<bool> {
    let place = state.db.run_place(run_id).await?;
    let Some(position) = place.position else {
        return Ok(false);
    };
    let series = state.db.run_series_moved_by_load(run_id).await?;
    if series.len() < MIN_SERIES {
        return Ok(false);
    }
    let ids: Vec<i64> = series.iter().map(|s| s.id).collect();
    let values = (state.db)
        .series_values_between(place.repository_id, &ids, position - LOOKBACK, position + 1)
        .await?;
    let mut history: HashMap<i64, Vec<(i64, f64)>> = HashMap::new();
    for (series_id, at, value) in values {
        history.entry(series_id).or_default().push((at, value));
    }
    let at_run: Vec<SeriesAtRun> = (series.iter())
        .filter_map(|s| {
            let points = history.get(&s.id)?;
            let (&(at, value), before) = points.split_last()?;
            (at == position).then(|| SeriesAtRun {
                direction: Direction::parse(&s.direction).unwrap_or(Direction::Lower),
                before: before.iter().map(|p| p.1).collect(),
                value,
            })
        })
        .collect();
    let Some(found) = disturbance(&at_run) else {
        return Ok(false);
    };
    state.db.mark_disturbed(run_id, &found, state.now()).await?;
    let again = place.runs_worker && place.runs_of_commit == 1;
    tracing::info!(
        run = run_id,
        moved = found.moved,
        measured = found.measured,
        worse = found.worse,
        measured_again = again,
        "a disturbed run: most of its benchmarks moved together"
    );
    if again {
        (state.db)
            .enqueue_on_machine(
                place.repository_id,
                place.commit_id,
                place.machine_id,
                JobReason::Confirm,
                state.leases,
                state.now(),
            )
            .await?;
    }
    Ok(true)
}

/// The (series, commit) pairs of a repository whose findings are held back: the series of
/// every disturbed run that is still its commit's only run on a worker's machine.
pub async fn held_back(state: &AppState, repository_id: i64) -> AppResult<HashSet<(i64, i64)>> {
    let mut held = HashSet::new();
    for run in state.db.held_runs(repository_id).await? {
        for series in state.db.run_series(run.run_id).await? {
            held.insert((series.id, run.commit_id));
        }
    }
    Ok(held)
}

/// For a change on a machine that cannot measure again: when its commit's only run there is
/// disturbed, its confirmation waits for another run. Returns whether it waits.
pub async fn wait_if_disturbed(state: &AppState, target: &ConfirmationTarget) -> AppResult<bool> {
    let (commit, machine) = (target.commit_id, target.machine_id);
    if !state.db.rests_on_one_disturbed_run(commit, machine).await? {
        return Ok(false);
    }
    let note = "found on a disturbed run (most of its benchmarks moved together): not \
                announced until another run of this commit agrees";
    (state.db)
        .wait_for_another_run(target.regression_id, note, state.now())
        .await?;
    Ok(true)
}

/// The ids of findings that waited for another run of their disturbed commit and waited
/// long enough: confirmed (and returned, to announce) when the analysis still finds them,
/// refuted when it does not.
pub async fn settle_waiting(state: &AppState, repository_id: i64) -> AppResult<Vec<i64>> {
    let mut announce = Vec::new();
    for waiting in state.db.findings_waiting_for_a_run(repository_id).await? {
        if waiting.runs_of_commit < 2 {
            continue;
        }
        let Some(target) = state.db.confirmation_target(waiting.regression_id).await? else {
            continue;
        };
        if waiting.active {
            let note = "another run of this commit shows it too: confirmed";
            crate::confirm::decide(state, &target, "confirmed", "another-run", None, note).await?;
            announce.push(waiting.regression_id);
        } else {
            let note = "another run of this commit does not show it: it rested on a disturbed \
                        run, refuted";
            crate::confirm::decide(state, &target, "refuted", "another-run", None, note).await?;
        }
    }
    Ok(announce)
}

/// The ids of findings waiting for another run, which the confirmation sweep leaves alone.
pub async fn waiting_ids(state: &AppState, repository_id: i64) -> AppResult<HashSet<i64>> {
    Ok((state.db.findings_waiting_for_a_run(repository_id).await?)
        .into_iter()
        .map(|w| w.regression_id)
        .collect())
}
