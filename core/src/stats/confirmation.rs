//! Confirmation of a change point before it is announced: what instruction counts say, and
//! what a re-measurement of the suspect against its baseline (interleaved on one machine)
//! says, and when to measure more rounds.

use crate::model::Direction;

use super::VerdictKind;

/// How far instruction counts may move (in percent) and still count as unchanged, when the
/// series has too little history to say how far its own counts move. Counts of the same code
/// are deterministic up to a few hundred instructions of start-up (ASLR, environment size),
/// far below this on any benchmark worth timing.
pub const INSTRUCTIONS_TOLERANCE_PCT: f64 = 0.5;

/// The least tolerance, for counts that never moved on the old level: a change of one
/// instruction per operation of a 20 000-operation kernel (+0.48 %, the demo's bus backends)
/// is a real change of the code that ran.
pub const INSTRUCTIONS_FLOOR_PCT: f64 = 0.05;

/// How many times the widest move of the old level's counts (from their median) a change of
/// counts must exceed to count: counts of threads that wait for each other move a little.
pub const INSTRUCTIONS_SPREAD_MULTIPLIER: f64 = 4.0;

/// Fewest counts of the old level whose spread is trusted; with fewer, the fixed tolerance.
pub const INSTRUCTIONS_HISTORY: usize = 5;

/// The tolerance (percent) for a change of instruction counts, from the counts of the commits
/// before the suspect: four times their widest move from their median, at least
/// [`INSTRUCTIONS_FLOOR_PCT`]; [`INSTRUCTIONS_TOLERANCE_PCT`] with too little history.
pub fn instructions_tolerance_pct(history: &[f64]) -> f64 {
    let Some(mid) = crate::results::median(history) else {
        return INSTRUCTIONS_TOLERANCE_PCT;
    };
    if history.len() < INSTRUCTIONS_HISTORY || mid <= 0.0 || !mid.is_finite() {
        return INSTRUCTIONS_TOLERANCE_PCT;
    }
    let widest = (history.iter())
        .map(|v| ((v - mid) / mid).abs() * 100.0)
        .fold(0.0, f64::max);
    if !widest.is_finite() {
        return INSTRUCTIONS_TOLERANCE_PCT;
    }
    (INSTRUCTIONS_SPREAD_MULTIPLIER * widest).max(INSTRUCTIONS_FLOOR_PCT)
}

/// Most rounds of a re-measurement. It is adaptive (see [`super::sequential`]): it looks after
/// 3, 4, 6 and 8 rounds and stops as soon as the change is significant again (confirmed) or
/// the change lies within the equivalence margin (refuted); still undecided after these, the
/// change is not confirmed.
pub const CONFIRMATION_ROUNDS: i64 = 9;

/// How long a re-measurement's rounds may take, in seconds. However long a round takes, the
/// budget never ends the rounds before the first look.
pub const CONFIRMATION_BUDGET_SECONDS: i64 = 300;

/// What the re-measurement said about a change point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The same change, significant again.
    Confirmed,
    /// No change, or one the other way: the change point was noise.
    Refuted,
    /// Still not significant after every round the re-measurement could run: not confirmed.
    NotSignificant,
}

/// Judges a change point (`expected`: regression or improvement) by the sequential verdict of
/// its re-measurement.
pub fn judge_remeasurement(expected: VerdictKind, found: VerdictKind) -> Outcome {
    match found {
        kind if kind == expected => Outcome::Confirmed,
        VerdictKind::Inconclusive => Outcome::NotSignificant,
        _ => Outcome::Refuted,
    }
}

/// The change of instruction counts from `base` to `suspect`, in percent, when it exceeds
/// `tolerance_pct` (see [`instructions_tolerance_pct`]) and goes the same way as the change of
/// time (`time_change_pct`; both metrics are lower-is-better). `None`: no counts on one side,
/// counts unchanged, or a change the other way — then only a re-measurement of time can tell.
pub fn instructions_evidence(
    base: &[f64],
    suspect: &[f64],
    tolerance_pct: f64,
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
    (change_pct.abs() > tolerance_pct && same_way).then_some(change_pct)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: f64 = INSTRUCTIONS_TOLERANCE_PCT;

    #[test]
    fn the_tolerance_follows_the_spread_of_the_old_level() {
        // Counts that never moved: a change of one instruction per operation counts.
        let steady = [4_200_038.0; 8];
        assert_eq!(instructions_tolerance_pct(&steady), INSTRUCTIONS_FLOOR_PCT);
        let bus =
            instructions_evidence(&[4_200_038.0], &[4_220_038.0], 0.05, 10.0, Direction::Lower);
        assert!(bus.is_some_and(|c| (c - 0.476).abs() < 0.001), "{bus:?}");
        // Counts of threads that move by up to 0.2 %: a 0.5 % change is not enough.
        let threads = [1000.0, 1002.0, 998.0, 1001.0, 999.0, 1000.0];
        let tolerance = instructions_tolerance_pct(&threads);
        assert!((tolerance - 0.8).abs() < 1e-9, "{tolerance}");
        assert_eq!(
            instructions_evidence(&[1000.0], &[1005.0], tolerance, 10.0, Direction::Lower),
            None
        );
        // Too little history, or none that makes sense: the fixed tolerance.
        assert_eq!(instructions_tolerance_pct(&steady[..4]), T);
        assert_eq!(instructions_tolerance_pct(&[]), T);
        assert_eq!(instructions_tolerance_pct(&[0.0; 6]), T);
        assert_eq!(
            instructions_tolerance_pct(&[1.0, 1.0, 1.0, 1.0, f64::INFINITY]),
            T
        );
    }

    #[test]
    fn the_same_change_again_confirms_and_none_or_the_opposite_refutes() {
        let r = VerdictKind::Regression;
        assert_eq!(judge_remeasurement(r, r), Outcome::Confirmed);
        assert_eq!(
            judge_remeasurement(r, VerdictKind::NoChange),
            Outcome::Refuted
        );
        assert_eq!(
            judge_remeasurement(r, VerdictKind::Improvement),
            Outcome::Refuted
        );
        assert_eq!(
            judge_remeasurement(r, VerdictKind::Inconclusive),
            Outcome::NotSignificant
        );
        let i = VerdictKind::Improvement;
        assert_eq!(judge_remeasurement(i, i), Outcome::Confirmed);
    }

    #[test]
    fn instruction_counts_that_moved_with_the_time_are_evidence() {
        let base = [1_000_000.0, 1_000_000.0];
        let more = [1_300_000.0, 1_300_001.0];
        let change = instructions_evidence(&base, &more, T, 25.0, Direction::Lower).unwrap();
        assert!((change - 30.0).abs() < 0.01, "{change}");
        // Throughput fell while instructions rose: the same slowdown.
        assert!(instructions_evidence(&base, &more, T, -20.0, Direction::Higher).is_some());
        // Fewer instructions and less time: an improvement, confirmed.
        let fewer = [700_000.0];
        assert!(instructions_evidence(&base, &fewer, T, -20.0, Direction::Lower).is_some());
    }

    #[test]
    fn unchanged_missing_or_contrary_counts_say_nothing() {
        let base = [1_000_000.0];
        let same = [1_002_000.0]; // 0.2 %: start-up jitter
        assert_eq!(
            instructions_evidence(&base, &same, T, 30.0, Direction::Lower),
            None
        );
        assert_eq!(
            instructions_evidence(&[], &same, T, 30.0, Direction::Lower),
            None
        );
        assert_eq!(
            instructions_evidence(&base, &[], T, 30.0, Direction::Lower),
            None
        );
        // Time up, instructions down: the counts do not explain the time.
        assert_eq!(
            instructions_evidence(&base, &[800_000.0], T, 30.0, Direction::Lower),
            None
        );
        assert_eq!(
            instructions_evidence(&[0.0], &[5.0], T, 30.0, Direction::Lower),
            None
        );
        assert_eq!(
            instructions_evidence(&base, &[f64::NAN], T, 30.0, Direction::Lower),
            None
        );
    }
}
