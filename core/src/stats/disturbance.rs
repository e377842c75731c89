//! Disturbed runs: a run in which most benchmarks moved together, the same way, against the
//! commit measured before it. Code changes move the benchmarks that run the changed code;
//! other work on the machine (a build, a backup, a noisy neighbour) moves nearly all of them,
//! the benchmarks of code nobody touched too. Such a run is measured again before anything is
//! filed from it (the server's `disturbed.rs`).

use crate::model::Direction;

use super::robust::median;

/// Fewest series a run must have measured, with a commit before, to be judged: with two or
/// three, a change of shared code moves "most" of them.
pub const MIN_SERIES: usize = 4;

/// Smallest move of one series counted as moving with the others, as a ratio: wall time on a
/// shared machine wanders by a few percent from run to run.
const MIN_MOVE_RATIO: f64 = 1.10;

/// A series' move counts when it is also this many times its typical commit-to-commit change.
const NOISE_MULTIPLE: f64 = 3.0;

/// One series measured by the run: its values at the commits before (oldest first, one per
/// commit) and its value in this run.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesAtRun {
    pub direction: Direction,
    pub before: Vec<f64>,
    pub value: f64,
}

/// Why a run is disturbed: how many of the series it measured moved the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disturbance {
    /// Series that moved by more than their noise, all the same way.
    pub moved: usize,
    /// Series judged (with a positive value now and at the commit before).
    pub measured: usize,
    /// Whether they got worse (slower, less throughput), as load makes them; or better.
    pub worse: bool,
}

/// Whether a run whose series are `series` is disturbed: at least [`MIN_SERIES`] judged, and
/// more than half of them moved the same way by at least 10 % and three times their usual
/// commit-to-commit change.
pub fn disturbance(series: &[SeriesAtRun]) -> Option<Disturbance> {
    let (mut worse, mut better, mut measured) = (0, 0, 0);
    for s in series {
        let Some(&previous) = s.before.last() else {
            continue;
        };
        if !(previous > 0.0 && s.value > 0.0 && previous.is_finite() && s.value.is_finite()) {
            continue;
        }
        measured += 1;
        let change = (s.value / previous).ln();
        let logs: Vec<f64> = (s.before.iter())
            .filter(|v| **v > 0.0 && v.is_finite())
            .map(|v| v.ln())
            .collect();
        let steps: Vec<f64> = logs.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
        let usual = if steps.len() >= 3 {
            median(&steps)
        } else {
            0.0
        };
        if change.abs() < MIN_MOVE_RATIO.ln().max(NOISE_MULTIPLE * usual) {
            continue;
        }
        let up = change > 0.0;
        if up == (s.direction == Direction::Lower) {
            worse += 1;
        } else {
            better += 1;
        }
    }
    let moved = worse.max(better);
    (measured >= MIN_SERIES && 2 * moved > measured).then_some(Disturbance {
        moved,
        measured,
        worse: worse >= better,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(direction: Direction, before: &[f64], value: f64) -> SeriesAtRun {
        SeriesAtRun {
            direction,
            before: before.to_vec(),
            value,
        }
    }

    const QUIET: [f64; 6] = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0];

    #[test]
    fn most_benchmarks_slower_together_is_a_disturbed_run() {
        // Six benchmarks slowed by 20–50 %, one unchanged; a throughput fell with them.
        let mut run: Vec<SeriesAtRun> = [1.2, 1.5, 1.3, 1.45, 1.25]
            .iter()
            .map(|r| series(Direction::Lower, &QUIET, 100.0 * r))
            .collect();
        run.push(series(Direction::Lower, &QUIET, 100.3));
        run.push(series(Direction::Higher, &QUIET, 70.0));
        let found = disturbance(&run).expect("disturbed");
        assert_eq!((found.moved, found.measured, found.worse), (6, 7, true));
    }

    #[test]
    fn a_change_of_some_benchmarks_is_not_a_disturbance() {
        let mut run: Vec<SeriesAtRun> = (0..6)
            .map(|_| series(Direction::Lower, &QUIET, 100.4))
            .collect();
        run[0].value = 150.0;
        run[1].value = 140.0;
        run[2].value = 160.0;
        assert_eq!(disturbance(&run), None, "three of six: not most");
        // Half faster, half slower: not together.
        for (i, s) in run.iter_mut().enumerate() {
            s.value = if i % 2 == 0 { 140.0 } else { 70.0 };
        }
        assert_eq!(disturbance(&run), None);
    }

    #[test]
    fn moves_within_a_series_own_noise_and_small_runs_are_not_judged() {
        let noisy = [100.0, 130.0, 95.0, 125.0, 90.0, 120.0];
        let run: Vec<SeriesAtRun> = (0..6)
            .map(|_| series(Direction::Lower, &noisy, 150.0))
            .collect();
        assert_eq!(disturbance(&run), None, "a 25 % move where 30 % is usual");
        let few: Vec<SeriesAtRun> = (0..3)
            .map(|_| series(Direction::Lower, &QUIET, 150.0))
            .collect();
        assert_eq!(disturbance(&few), None);
        let first_runs: Vec<SeriesAtRun> = (0..6)
            .map(|_| series(Direction::Lower, &[], 150.0))
            .collect();
        assert_eq!(disturbance(&first_runs), None);
        let broken: Vec<SeriesAtRun> = (0..6)
            .map(|i| {
                series(
                    Direction::Lower,
                    &[0.0, -1.0, f64::NAN][i % 3..],
                    f64::INFINITY,
                )
            })
            .collect();
        assert_eq!(disturbance(&broken), None);
    }
}
