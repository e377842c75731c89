//! Confirmation of a change point before it is announced: what instruction counts say, and
//! what a re-measurement of the suspect against its baseline (interleaved on one machine)
//! says, and when to measure more rounds.

use crate::model::Direction;

use super::VerdictKind;

/// How far instruction counts may move (in percent) and still count as unchanged. Counts of
/// the same code are deterministic up to a few hundred instructions of start-up (ASLR,
/// environment size), far below this on any benchmark worth timing.
pub const INSTRUCTIONS_TOLERANCE_PCT: f64 = 0.5;

/// Rounds of the first re-measurement, then of each escalation while it stays undecided.
/// Bounded: after these, a change still not significant is not confirmed.
pub const CONFIRMATION_ROUNDS: [i64; 2] = [3, 6];

/// What the re-measurement said about a change point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The same change, significant again.
    Confirmed,
    /// No change, or one the other way: the change point was noise.
    Refuted,
    /// Not significant yet: measure more rounds.
    MoreRounds(i64),
    /// Still not significant after every round allowed: not confirmed.
    NotSignificant,
}

/// Judges a change point (`expected`: regression or improvement) by the verdict of its
/// re-measurement after `rounds_run` rounds.
pub fn judge_remeasurement(expected: VerdictKind, found: VerdictKind, rounds_run: i64) -> Outcome {
    match found {
        kind if kind == expected => Outcome::Confirmed,
        VerdictKind::Inconclusive => match rounds_to_add(rounds_run) {
            Some(more) => Outcome::MoreRounds(more),
            None => Outcome::NotSignificant,
        },
        _ => Outcome::Refuted,
    }
}

/// The rounds of the next escalation after `rounds_run`, if one is left.
fn rounds_to_add(rounds_run: i64) -> Option<i64> {
    let mut planned = 0;
    for rounds in CONFIRMATION_ROUNDS {
        planned += rounds;
        if planned > rounds_run {
            return Some(planned - rounds_run);
        }
    }
    None
}

/// The change of instruction counts from `base` to `suspect`, in percent, when it is large
/// enough to be evidence by itself and goes the same way as the change of time (`time_change_pct`;
/// both metrics are lower-is-better). `None`: no counts on one side, counts unchanged, or a
/// change the other way — then only a re-measurement of time can tell.
pub fn instructions_evidence(
    base: &[f64],
    suspect: &[f64],
    time_change_pct: f64,
    time_direction: Direction,
) -> Option<f64> {
    let base = crate::results::median(base)?;
    let suspect = crate::results::median(suspect)?;
    if base <= 0.0 || !suspect.is_finite() {
        return None;
    }
    let change_pct = (suspect - base) / base * 100.0;
    // More time is a slowdown; for a higher-is-better metric (throughput) a fall is.
    let slower = match time_direction {
        Direction::Lower => time_change_pct > 0.0,
        Direction::Higher => time_change_pct < 0.0,
    };
    let same_way = (change_pct > 0.0) == slower;
    (change_pct.abs() > INSTRUCTIONS_TOLERANCE_PCT && same_way).then_some(change_pct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_change_again_confirms_and_none_or_the_opposite_refutes() {
        let r = VerdictKind::Regression;
        assert_eq!(judge_remeasurement(r, r, 3), Outcome::Confirmed);
        assert_eq!(
            judge_remeasurement(r, VerdictKind::NoChange, 3),
            Outcome::Refuted
        );
        assert_eq!(
            judge_remeasurement(r, VerdictKind::Improvement, 3),
            Outcome::Refuted
        );
        let i = VerdictKind::Improvement;
        assert_eq!(judge_remeasurement(i, i, 9), Outcome::Confirmed);
    }

    #[test]
    fn an_undecided_remeasurement_gets_more_rounds_up_to_the_bound() {
        let r = VerdictKind::Regression;
        let undecided = VerdictKind::Inconclusive;
        assert_eq!(judge_remeasurement(r, undecided, 3), Outcome::MoreRounds(6));
        // A first comparison that ran fewer rounds (a failed repeat) still ends at the bound.
        assert_eq!(judge_remeasurement(r, undecided, 2), Outcome::MoreRounds(1));
        assert_eq!(
            judge_remeasurement(r, undecided, 9),
            Outcome::NotSignificant
        );
        assert_eq!(
            judge_remeasurement(r, undecided, 40),
            Outcome::NotSignificant
        );
    }

    #[test]
    fn instruction_counts_that_moved_with_the_time_are_evidence() {
        let base = [1_000_000.0, 1_000_000.0];
        let more = [1_300_000.0, 1_300_001.0];
        let change = instructions_evidence(&base, &more, 25.0, Direction::Lower).unwrap();
        assert!((change - 30.0).abs() < 0.01, "{change}");
        // Throughput fell while instructions rose: the same slowdown.
        assert!(instructions_evidence(&base, &more, -20.0, Direction::Higher).is_some());
        // Fewer instructions and less time: an improvement, confirmed.
        let fewer = [700_000.0];
        assert!(instructions_evidence(&base, &fewer, -20.0, Direction::Lower).is_some());
    }

    #[test]
    fn unchanged_missing_or_contrary_counts_say_nothing() {
        let base = [1_000_000.0];
        let same = [1_002_000.0]; // 0.2 %: start-up jitter
        assert_eq!(
            instructions_evidence(&base, &same, 30.0, Direction::Lower),
            None
        );
        assert_eq!(
            instructions_evidence(&[], &same, 30.0, Direction::Lower),
            None
        );
        assert_eq!(
            instructions_evidence(&base, &[], 30.0, Direction::Lower),
            None
        );
        // Time up, instructions down: the counts do not explain the time.
        assert_eq!(
            instructions_evidence(&base, &[800_000.0], 30.0, Direction::Lower),
            None
        );
        assert_eq!(
            instructions_evidence(&[0.0], &[5.0], 30.0, Direction::Lower),
            None
        );
        assert_eq!(
            instructions_evidence(&base, &[f64::NAN], 30.0, Direction::Lower),
            None
        );
    }
}
