//! Automatic bisection: a regression whose suspect range holds unmeasured commits (a push of
//! several commits, a sparse backfill) gets the commit in the middle measured on its machine,
//! and the range halves until two adjacent commits bracket the change. A probe between the
//! two levels is measured again (up to [`MAX_PROBE_RUNS`] runs) before it is decided.
//!
//! Each step only reads what is stored, so [`advance`] can be called after any run or failure
//! and picks up where the last call left off.

use kymo_core::db::{BisectionRow, BisectionUpdate, JobReason};
use kymo_core::stats::bisect::{ProbeDecision, classify_probe};

use crate::error::AppResult;
use crate::state::AppState;

/// The most runs of one probe commit before it goes to the nearer level.
pub const MAX_PROBE_RUNS: usize = 3;

/// Starts bisections for the repository's new wide regressions and moves every running one
/// on. Returns the regressions whose bisection ended (culprit found or given up), so that
/// they can be announced.
pub async fn advance(state: &AppState, repository_id: i64) -> AppResult<Vec<i64>> {
    for wide in state.db.wide_regressions(repository_id).await? {
        if let Some(id) = state.db.start_bisection(&wide, state.now()).await? {
            tracing::info!(
                bisection = id,
                regression = wide.regression_id,
                "bisection started"
            );
        }
    }
    let mut ended = Vec::new();
    for bisection in state.db.running_bisections(repository_id).await? {
        if step(state, &bisection).await? {
            ended.push(bisection.regression_id);
        }
    }
    Ok(ended)
}

/// Where a bisection stands while it is being stepped.
#[derive(Debug, Clone, Copy)]
struct Range {
    good: i64,
    good_position: i64,
    bad: i64,
    bad_position: i64,
    steps: i64,
    /// Runs of the current probe asked for.
    wanted_runs: i64,
}

/// Moves one bisection as far as stored measurements allow; returns whether it ended.
async fn step(state: &AppState, b: &BisectionRow) -> AppResult<bool> {
    let db = &state.db;
    let mut range = Range {
        good: b.good_id,
        good_position: b.good_position,
        bad: b.bad_id,
        bad_position: b.bad_position,
        steps: b.steps,
        wanted_runs: b.probe_runs,
    };
    let flatten = |runs: Vec<Vec<f64>>| runs.into_iter().flatten().collect::<Vec<f64>>();
    loop {
        if range.bad_position - range.good_position <= 1 {
            let note = format!("culprit found in {} step(s)", range.steps);
            save(state, b, &range, "found", None, &note).await?;
            tracing::info!(
                regression = b.regression_id,
                steps = range.steps,
                "bisection found the culprit"
            );
            return Ok(true);
        }
        let middle = range.good_position + (range.bad_position - range.good_position) / 2;
        let Some(probe) = db.commit_at_position(b.repository_id, middle).await? else {
            save(
                state,
                b,
                &range,
                "abandoned",
                None,
                "the branch's history changed",
            )
            .await?;
            return Ok(true);
        };
        range.wanted_runs = range.wanted_runs.max(1);
        let runs = db.samples_at(b.series_id, probe).await?;
        let measured = runs.len() as i64;
        if measured < range.wanted_runs {
            let jobs = db.probe_jobs(probe, b.machine_id).await?;
            if jobs.active {
                save(state, b, &range, "running", Some(probe), "").await?;
                return Ok(false);
            }
            if measured == 0 && jobs.failed > 0 {
                let note = "a probe commit failed to build or run; see the queue";
                save(state, b, &range, "abandoned", Some(probe), note).await?;
                return Ok(true);
            }
            if measured == 0 {
                queue_probe(state, b, probe).await?;
                save(state, b, &range, "running", Some(probe), "").await?;
                return Ok(false);
            }
            // A repeat failed: decide with the runs there are.
            range.wanted_runs = MAX_PROBE_RUNS as i64;
        }
        let good_samples = flatten(db.samples_at(b.series_id, range.good).await?);
        let bad_samples = flatten(db.samples_at(b.series_id, range.bad).await?);
        let decision = classify_probe(
            &good_samples,
            &bad_samples,
            &flatten(runs),
            measured.max(range.wanted_runs) as usize,
            MAX_PROBE_RUNS,
        );
        match decision {
            ProbeDecision::Good => (range.good, range.good_position) = (probe, middle),
            ProbeDecision::Bad => (range.bad, range.bad_position) = (probe, middle),
            ProbeDecision::Repeat => {
                queue_probe(state, b, probe).await?;
                range.wanted_runs = measured + 1;
                let note = format!("run {} of a probe between the two levels", measured + 1);
                save(state, b, &range, "running", Some(probe), &note).await?;
                return Ok(false);
            }
            ProbeDecision::Undecidable => {
                let note = "the two ends measure the same; nothing to bisect";
                save(state, b, &range, "abandoned", Some(probe), note).await?;
                return Ok(true);
            }
        }
        range.steps += 1;
        range.wanted_runs = 1;
    }
}

async fn save(
    state: &AppState,
    b: &BisectionRow,
    range: &Range,
    state_name: &str,
    probe: Option<i64>,
    note: &str,
) -> AppResult<()> {
    let update = BisectionUpdate {
        good_id: range.good,
        bad_id: range.bad,
        state: state_name,
        steps: range.steps,
        probe_id: probe,
        probe_runs: range.wanted_runs,
        note,
    };
    Ok(state.db.update_bisection(b, &update, state.now()).await?)
}

async fn queue_probe(state: &AppState, b: &BisectionRow, probe: i64) -> AppResult<()> {
    state
        .db
        .enqueue_on_machine(
            b.repository_id,
            probe,
            b.machine_id,
            JobReason::Bisect,
            state.leases,
            state.now(),
        )
        .await?;
    Ok(())
}
