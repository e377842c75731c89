//! Confirm before accusing: a change point whose culprit is known (after bisection, when the
//! range was wide) is announced only once it is confirmed. Instruction counts that moved with
//! the time confirm it at once; otherwise the suspect and the last commit of the old level are
//! measured again, alternately, on the machine that found the change, by the comparison job
//! that try runs and pull requests use (adaptive: rounds until the change is decided, up to a
//! bound). A change that does not show again is refuted: closed as a false positive, never
//! alerted, and kept on its page with what was re-run and what it found.
//!
//! Where nothing can be re-run (results uploaded from a machine that runs no worker, a change
//! at the first commit, a re-measurement that failed), the change is announced as before,
//! marked unconfirmed. A repository may turn confirmation off.

use kymo_core::db::{ConfirmationDecision, ConfirmationTarget};
use kymo_core::model::Direction;
use kymo_core::protocol::SuiteSelection;
use kymo_core::stats::VerdictKind;
use kymo_core::stats::confirmation::{
    CONFIRMATION_BUDGET_SECONDS, CONFIRMATION_ROUNDS, Outcome, instructions_evidence,
    instructions_tolerance_pct, judge_remeasurement,
};

use crate::compare::CompareRow;
use crate::error::AppResult;
use crate::interleaved::{Stored, judge_rounds, stored};
use crate::state::AppState;

/// How long a confirmation waits for its machine to take the job before the change is
/// announced unconfirmed: a machine that went away must not hold an alert back for ever.
pub const CONFIRMATION_PATIENCE_SECONDS: i64 = 6 * 3600;

/// The metric instruction counts are stored as, beside the time of the same benchmark.
const INSTRUCTIONS: &str = "instructions";

/// Commits before the suspect whose instruction counts set how far counts may move unchanged.
const INSTRUCTIONS_LOOKBACK: i64 = 8;

/// Of change points ready to announce, those that may be announced now; the others start
/// their confirmation (or wait for the one running, or were refuted).
pub async fn gate(state: &AppState, ready: &[i64]) -> AppResult<Vec<i64>> {
    let mut announce = Vec::new();
    for &id in ready {
        let Some(target) = state.db.confirmation_target(id).await? else {
            continue;
        };
        let go = match target.confirmation.as_deref() {
            Some("confirmed" | "unconfirmed") => true,
            Some(_) => false,
            None if !target.active => false,
            None if !target.confirm_changes => true,
            None => start(state, &target).await?,
        };
        if go {
            announce.push(id);
        }
    }
    Ok(announce)
}

/// Decides a new change point at once when it can be, or queues its re-measurement.
/// Returns whether it is decided (and so may be announced).
async fn start(state: &AppState, target: &ConfirmationTarget) -> AppResult<bool> {
    let Some(base) = target.previous_id else {
        let note = "no commit before it to measure against: announced unconfirmed";
        decide(state, target, "unconfirmed", "no-baseline", None, note).await?;
        return Ok(true);
    };
    if target.metric == INSTRUCTIONS {
        let note = "a change of instruction counts, which do not vary from run to run: \
                    confirmed without re-running";
        let evidence = Some((target.change_pct, None, 0));
        decide(state, target, "confirmed", "instructions", evidence, note).await?;
        return Ok(true);
    }
    let (db, bench, machine) = (&state.db, target.benchmark_id, target.machine_id);
    let before = db.instructions_at(bench, machine, base).await?;
    let after = db.instructions_at(bench, machine, target.commit_id).await?;
    let direction = Direction::parse(&target.direction).unwrap_or(Direction::Lower);
    let position = (db.commit(target.repository_id, &target.commit_sha).await?).position;
    let history = match position {
        Some(position) => {
            (db.instructions_before(bench, machine, position, INSTRUCTIONS_LOOKBACK)).await?
        }
        None => Vec::new(),
    };
    let tolerance = instructions_tolerance_pct(&history);
    let evidence = instructions_evidence(&before, &after, tolerance, target.change_pct, direction);
    if let Some(change) = evidence {
        let note = format!(
            "instruction counts changed by {change:+.2} % between the two commits, beyond \
             the ±{tolerance:.2} % that counts of unchanged code move here: confirmed without \
             re-running"
        );
        let evidence = Some((change, None, 0));
        decide(state, target, "confirmed", "instructions", evidence, &note).await?;
        return Ok(true);
    }
    if !target.runs_worker && crate::disturbed::wait_if_disturbed(state, target).await? {
        return Ok(false);
    }
    if !target.runs_worker {
        let note = "the machine that measured it runs no worker (its results were uploaded): \
                    nothing can re-measure it, so it is announced unconfirmed";
        decide(state, target, "unconfirmed", "no-worker", None, note).await?;
        return Ok(true);
    }
    let note = if before.is_empty() || after.is_empty() {
        ""
    } else {
        "instruction counts did not change: a change of time alone is measured again"
    };
    let (rounds, budget) = (CONFIRMATION_ROUNDS, CONFIRMATION_BUDGET_SECONDS);
    let (comparison, measured) = db
        .start_confirmation(
            target,
            base,
            rounds,
            budget,
            note,
            state.leases,
            state.now(),
        )
        .await?;
    tracing::info!(
        regression = target.regression_id,
        comparison,
        measured,
        "confirmation started"
    );
    if measured {
        // Another change of the same pair had it measured already: judged (and, confirmed,
        // announced) now, from those rounds.
        comparison_measured(state, comparison).await?;
    }
    Ok(false)
}

/// Stores a decision and moves the suspect's commit status. `measured` is the change found
/// again (percent), its p-value, and the rounds behind it.
pub(crate) async fn decide(
    state: &AppState,
    target: &ConfirmationTarget,
    outcome: &str,
    evidence: &str,
    measured: Option<(f64, Option<f64>, i64)>,
    note: &str,
) -> AppResult<()> {
    let decision = ConfirmationDecision {
        state: outcome,
        evidence,
        rounds_run: measured.map_or(0, |m| m.2),
        change_pct: measured.map(|m| m.0),
        p_value: measured.and_then(|m| m.1),
        note,
    };
    (state.db)
        .decide_confirmation(target.regression_id, &decision, state.now())
        .await?;
    tracing::info!(
        regression = target.regression_id,
        outcome,
        evidence,
        "confirmation decided"
    );
    crate::alerts::commit_status_changed(state, target.commit_id).await?;
    Ok(())
}

/// Judges the confirmations a comparison measured, now that its rounds are in; announces
/// the confirmed ones.
pub async fn comparison_measured(state: &AppState, comparison_id: i64) -> AppResult<()> {
    let pending = (state.db)
        .pending_confirmations(None, Some(comparison_id))
        .await?;
    if pending.is_empty() {
        return Ok(());
    }
    let Some(Stored {
        plan,
        mut selection,
        rounds,
    }) = stored(state, comparison_id).await?
    else {
        return Ok(());
    };
    let rounds = rounds.unwrap_or_default();
    let mut targets = Vec::new();
    for p in &pending {
        if let Some(target) = state.db.confirmation_target(p.regression_id).await? {
            // Each change by its own claim, also when it reuses rounds measured for another.
            SuiteSelection::widen(&mut selection, &target.selection());
            targets.push(target);
        }
    }
    let rows = judge_rounds(&rounds, "", &plan, &selection);
    let mut confirmed = Vec::new();
    for target in &targets {
        if judge(state, target, &rows, rounds.len() as i64).await? {
            confirmed.push(target.regression_id);
        }
    }
    if !confirmed.is_empty() {
        crate::alerts::regressions_found(state, &confirmed).await?;
    }
    Ok(())
}

/// Judges one confirmation by the re-measured rows; returns whether it was confirmed.
async fn judge(
    state: &AppState,
    target: &ConfirmationTarget,
    rows: &[CompareRow],
    rounds_run: i64,
) -> AppResult<bool> {
    let row = (rows.iter()).find(|r| r.benchmark == target.benchmark && r.metric == target.metric);
    let Some(row) = row else {
        let note = "the re-measurement did not measure this benchmark: announced unconfirmed";
        decide(state, target, "unconfirmed", "interleaved", None, note).await?;
        return Ok(true);
    };
    let v = &row.verdict;
    let expected = if target.kind == "improvement" {
        VerdictKind::Improvement
    } else {
        VerdictKind::Regression
    };
    let measured = Some((v.change_pct, v.p_value, rounds_run));
    let found = format!(
        "{rounds_run} interleaved rounds measured {:+.1} % (interval {:+.1} % to {:+.1} %, \
         p = {}; {})",
        v.change_pct,
        v.ci_low_pct,
        v.ci_high_pct,
        v.p_value.map_or("n/a".to_owned(), |p| format!("{p:.2e}")),
        v.note
    );
    match judge_remeasurement(expected, v.kind) {
        Outcome::Confirmed => {
            let note = format!("{found}: the same {}, confirmed", target.kind);
            decide(state, target, "confirmed", "interleaved", measured, &note).await?;
            Ok(true)
        }
        Outcome::Refuted => {
            let note = format!("{found}: no such {}, refuted", target.kind);
            decide(state, target, "refuted", "interleaved", measured, &note).await?;
            Ok(false)
        }
        Outcome::NotSignificant => {
            let note =
                format!("{found}: neither significant nor within the margin, so not confirmed");
            decide(state, target, "refuted", "interleaved", measured, &note).await?;
            Ok(false)
        }
    }
}

/// Settles the confirmations of a repository that cannot go on: their re-measurement failed,
/// was cancelled, or waited too long for its machine (announced unconfirmed), or finished
/// without being judged (a restart between the two). Returns the ids to announce.
pub async fn sweep(state: &AppState, repository_id: i64) -> AppResult<Vec<i64>> {
    let pending = state
        .db
        .pending_confirmations(Some(repository_id), None)
        .await?;
    let now = state.now();
    let mut announce = Vec::new();
    let mut measured = Vec::new();
    // Those wait for another run of their commit, not for a job (`crate::disturbed`).
    let waiting = crate::disturbed::waiting_ids(state, repository_id).await?;
    for p in pending
        .into_iter()
        .filter(|p| !waiting.contains(&p.regression_id))
    {
        let note = match p.job_state.as_deref() {
            Some("succeeded") => {
                measured.extend(p.comparison_id.filter(|id| !measured.contains(id)));
                continue;
            }
            Some("queued") if p.queued_at.unwrap_or(now) + CONFIRMATION_PATIENCE_SECONDS <= now => {
                "no machine took the re-measurement in time: announced unconfirmed"
            }
            Some("queued" | "running") => continue,
            _ => {
                "the re-measurement failed or was cancelled (see the queue): announced unconfirmed"
            }
        };
        let Some(target) = state.db.confirmation_target(p.regression_id).await? else {
            continue;
        };
        decide(state, &target, "unconfirmed", "failed", None, note).await?;
        announce.push(p.regression_id);
    }
    for comparison in measured {
        comparison_measured(state, comparison).await?;
    }
    Ok(announce)
}
