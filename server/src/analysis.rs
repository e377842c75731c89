//! Re-analysis of the series a run touched: change-point detection over each series'
//! history, stored as regressions and improvements with their evidence, and the noise models
//! a compare at the series' newest commits uses. Unchanged results write nothing. A new point
//! re-examines only the analysis windows it can change, when the history before them is
//! proved unchanged (see [`incremental`]).

mod incremental;

pub use incremental::changes_in;

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use kymo_core::db::{
    AnalysisPoint, FoundChange, SensitivityRule, SeriesToAnalyse, sensitivity_for,
};
use kymo_core::stats::{NoiseWindow, noise_windows};

use crate::error::AppResult;
use crate::state::AppState;

/// Re-analyses every series measured by `run_id`; returns the ids of regressions and
/// improvements found for the first time.
pub async fn analyse_run(state: &AppState, run_id: i64) -> AppResult<Vec<i64>> {
    let series = state.db.run_series(run_id).await?;
    analyse_series(state, &series).await
}

/// Analyses a run that is stored already and does what follows (bisections, alerts). Their
/// failing (a full disk, say) does not undo the store, so it must not be reported as if the run
/// were refused: a client would send it again and store it twice. The failure is logged; the
/// series' next run analyses them again.
pub async fn after_stored_run(state: &AppState, repository_id: i64, run_id: i64) {
    let done = async {
        // Judged first, so that what a disturbed run alone would file is held back.
        crate::disturbed::examine_run(state, run_id).await?;
        let created = analyse_run(state, run_id).await?;
        follow_up(state, repository_id, &created).await
    };
    if let Err(err) = done.await {
        tracing::warn!(
            run = run_id,
            error = %err,
            "the run is stored, but its analysis failed; the next run of its series redoes it"
        );
    }
}

/// What follows a cancelled job: a bisection or confirmation waiting for it moves on (a
/// confirmation is then announced unconfirmed). Logged, not returned: the cancel stands.
pub async fn after_cancelled_job(state: &AppState, job_id: i64) {
    let done = async {
        let job = state.db.job(job_id).await?;
        let repository = state.db.repository(&job.repository).await?;
        follow_up(state, repository.id, &[]).await
    };
    if let Err(err) = done.await {
        tracing::warn!(job = job_id, error = %err, "what waited for a cancelled job did not move on");
    }
}

/// What follows a stored run or a failed job: bisections start and move on, and regressions
/// whose culprit is known are confirmed (see [`crate::confirm`]), then announced. A new
/// regression whose range is one commit is ready at once; a wide one when its bisection ends,
/// so that confirmation re-measures the culprit pair, not the whole range.
pub async fn follow_up(state: &AppState, repository_id: i64, created: &[i64]) -> AppResult<()> {
    let mut settled = crate::bisect::advance(state, repository_id).await?;
    for id in created {
        let bisecting = state
            .db
            .bisection_of(*id)
            .await?
            .is_some_and(|b| b.state == "running");
        if !bisecting && !settled.contains(id) {
            settled.push(*id);
        }
    }
    let mut ready = crate::confirm::gate(state, &settled).await?;
    ready.extend(crate::confirm::sweep(state, repository_id).await?);
    ready.extend(crate::disturbed::settle_waiting(state, repository_id).await?);
    announce(state, &ready).await
}

/// Tells people about regressions whose culprit (or final range) is known and confirmed.
async fn announce(state: &AppState, regression_ids: &[i64]) -> AppResult<()> {
    if !regression_ids.is_empty() {
        tracing::info!(regressions = ?regression_ids, "regressions settled");
        crate::alerts::regressions_found(state, regression_ids).await?;
    }
    Ok(())
}

/// Re-analyses every series of a repository (after its sensitivity changed, or to settle the
/// analysis of the latest runs before reporting on them).
pub async fn analyse_repository(state: &AppState, repository_id: i64) -> AppResult<Vec<i64>> {
    let series: Vec<SeriesToAnalyse> = state
        .db
        .series(repository_id, None, None, None)
        .await?
        .into_iter()
        .map(|s| SeriesToAnalyse {
            id: s.id,
            repository_id,
            benchmark: s.benchmark,
            direction: s.direction,
        })
        .collect();
    analyse_series(state, &series).await
}

async fn analyse_series(state: &AppState, series: &[SeriesToAnalyse]) -> AppResult<Vec<i64>> {
    let mut rules: HashMap<i64, Vec<SensitivityRule>> = HashMap::new();
    let mut held: HashMap<i64, HashSet<(i64, i64)>> = HashMap::new();
    let mut noise = Vec::with_capacity(series.len());
    let mut changes = Vec::with_capacity(series.len());
    let mut states = Vec::with_capacity(series.len());
    for s in series {
        let repository_rules = match rules.entry(s.repository_id) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(slot) => slot.insert(state.db.sensitivity_rules(s.repository_id).await?),
        };
        let sensitivity = sensitivity_for(repository_rules, &s.benchmark);
        let mut analysed =
            incremental::analyse_series(&state.db, s, sensitivity, state.analysis_windows).await?;
        let held = match held.entry(s.repository_id) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(slot) => {
                slot.insert(crate::disturbed::held_back(state, s.repository_id).await?)
            }
        };
        // What a disturbed run alone shows waits for its commit to be measured again.
        (analysed.found).retain(|change| !held.contains(&(s.id, change.commit_id)));
        changes.push((s.id, analysed.found));
        if let Some((last_commit, windows)) = analysed.noise {
            noise.push((s.id, last_commit, windows));
        }
        if !analysed.unchanged {
            states.push((s.id, analysed.state, analysed.path));
        }
    }
    // One transaction each for all series: a thousand series measured by one run are three
    // writes, and the pages cached on the data version are recomputed once, not a thousand times.
    let changes: Vec<(i64, &[FoundChange])> = (changes.iter())
        .map(|(id, found)| (*id, found.as_slice()))
        .collect();
    let created = state.db.record_analysis(&changes, state.now()).await?;
    state.db.store_noise_windows(&noise, state.now()).await?;
    // Stored last: a state describes what an analysis decided, whether or not its records
    // were written, so a failure above leaves the next analysis correct.
    state.db.store_analysis_states(&states).await?;
    if !created.is_empty() {
        tracing::info!(new = created.len(), "change points found");
    }
    Ok(created)
}

/// The noise models of a series' history that compares at its newest commits use: measured,
/// as a verdict measures them, from the value of each commit's latest run.
pub fn noise_in(points: &[AnalysisPoint]) -> Vec<NoiseWindow> {
    let history: Vec<(i64, f64)> = (points.iter())
        .map(|p| (p.position, p.latest_value))
        .collect();
    noise_windows(&history)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kymo_core::model::Direction;
    use kymo_core::stats::{Sensitivity, Windows};

    fn series(values: &[f64]) -> Vec<AnalysisPoint> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| AnalysisPoint {
                commit_id: 100 + i as i64,
                position: i as i64,
                value: *v,
                samples: vec![*v * 0.999, *v, *v * 1.001],
                latest_value: *v,
            })
            .collect()
    }

    #[test]
    fn a_lasting_step_becomes_one_regression_at_its_first_commit() {
        let mut values: Vec<f64> = (0..20).map(|i| 100.0 + (i % 3) as f64 * 0.2).collect();
        values.extend((0..20).map(|i| 120.0 + (i % 3) as f64 * 0.2));
        let found = changes_in(
            &series(&values),
            Direction::Lower,
            &Sensitivity::default(),
            Windows::default(),
        );
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].kind, "regression");
        assert_eq!(found[0].commit_id, 120);
        assert_eq!(found[0].previous_id, Some(119));
        assert!((found[0].change_pct - 20.0).abs() < 1.0, "{found:#?}");

        let found = changes_in(
            &series(&values),
            Direction::Higher,
            &Sensitivity::default(),
            Windows::default(),
        );
        assert_eq!(found[0].kind, "improvement");
    }

    #[test]
    fn a_spike_that_reverts_is_not_a_change() {
        let mut values: Vec<f64> = (0..30).map(|i| 100.0 + (i % 3) as f64 * 0.2).collect();
        values[15] = 150.0;
        assert!(
            changes_in(
                &series(&values),
                Direction::Lower,
                &Sensitivity::default(),
                Windows::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn the_noise_models_read_the_latest_run_of_each_commit() {
        let mut points = series(&[100.0, 101.0, 99.0, 100.5, 100.2]);
        points[3].value = 150.0; // the median of two runs pooled
        let windows = noise_in(&points);
        let latest: Vec<(i64, f64)> = (points.iter())
            .map(|p| (p.position, p.latest_value))
            .collect();
        assert_eq!(windows, noise_windows(&latest));
        assert_eq!(windows[0].before_position, Some(4));
        assert!(noise_in(&[]).is_empty());
    }
}
