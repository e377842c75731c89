//! Scoring detections against the labeled changes: precision, recall, F1 within a margin of
//! a few commits, false alarms per 1,000 commits, and detection delay.

use kymo_core::stats::CommitObservation;

use crate::generator::{Event, Labeled};
use crate::methods::Detection;

/// A detection counts for a change if it is this many commits from it or closer (for a drift:
/// from anywhere in it) and goes the same way.
pub const MARGIN: usize = 5;

/// Longest delay searched for when replaying a history commit by commit.
pub const MAX_DELAY: usize = 60;

/// Counts for one method over some series.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub found: usize,
    pub false_alarms: usize,
    pub missed: usize,
    pub commits: usize,
    /// For each step found: commits after it that the method needed before reporting it.
    pub delays: Vec<usize>,
    /// Sum over series of TCPD's F1 (see `tcpd`), and the number of series.
    pub tcpd_sum: f64,
    pub series: usize,
}

impl Tally {
    pub fn add(&mut self, other: &Tally) {
        self.found += other.found;
        self.false_alarms += other.false_alarms;
        self.missed += other.missed;
        self.commits += other.commits;
        self.delays.extend_from_slice(&other.delays);
        self.tcpd_sum += other.tcpd_sum;
        self.series += other.series;
    }

    /// TCPD's F1 averaged over the series.
    pub fn tcpd(&self) -> Option<f64> {
        (self.series > 0).then(|| self.tcpd_sum / self.series as f64)
    }

    pub fn precision(&self) -> Option<f64> {
        let reported = self.found + self.false_alarms;
        (reported > 0).then(|| self.found as f64 / reported as f64)
    }

    pub fn recall(&self) -> Option<f64> {
        let changes = self.found + self.missed;
        (changes > 0).then(|| self.found as f64 / changes as f64)
    }

    /// F1; for series without changes (where it is undefined) `None`.
    pub fn f1(&self) -> Option<f64> {
        let changes = self.found + self.missed;
        (changes > 0).then(|| {
            2.0 * self.found as f64 / (2 * self.found + self.false_alarms + self.missed) as f64
        })
    }

    pub fn false_alarms_per_1000(&self) -> f64 {
        1000.0 * self.false_alarms as f64 / self.commits.max(1) as f64
    }

    pub fn median_delay(&self) -> Option<f64> {
        let mut delays = self.delays.clone();
        delays.sort_unstable();
        let n = delays.len();
        (n > 0).then(|| {
            if n % 2 == 1 {
                delays[n / 2] as f64
            } else {
                (delays[n / 2 - 1] + delays[n / 2]) as f64 / 2.0
            }
        })
    }
}

/// Whether `detection` would count for `event`.
pub fn matches(event: &Event, detection: &Detection) -> bool {
    detection.rise == event.rise
        && detection.position + MARGIN >= event.start
        && detection.position < event.end + MARGIN
}

/// Matches detections to events (each event at most once, the closest detection to its
/// start), and returns the tally without delays plus, per event, the matched detection.
///
/// Extra detections inside a found drift are neither credited nor counted as false alarms:
/// a method may describe a slow drift as a staircase of steps.
pub fn score(
    events: &[Event],
    detections: &[Detection],
    commits: usize,
) -> (Tally, Vec<Option<Detection>>) {
    let mut used = vec![false; detections.len()];
    let mut matched = Vec::with_capacity(events.len());
    for event in events {
        let best = detections
            .iter()
            .enumerate()
            .filter(|(i, d)| !used[*i] && matches(event, d))
            .min_by_key(|(_, d)| d.position.abs_diff(event.start));
        if let Some((i, d)) = best {
            used[i] = true;
            matched.push(Some(*d));
        } else {
            matched.push(None);
        }
    }
    let mut tally = Tally {
        commits,
        ..Tally::default()
    };
    tally.found = matched.iter().filter(|m| m.is_some()).count();
    tally.missed = events.len() - tally.found;
    for (d, _) in detections.iter().zip(&used).filter(|(_, used)| !**used) {
        let inside_found_drift = events
            .iter()
            .zip(&matched)
            .any(|(e, m)| !e.is_step && m.is_some() && matches(e, d));
        if !inside_found_drift {
            tally.false_alarms += 1;
        }
    }
    (tally, matched)
}

/// Replays history: the fewest commits after the change with which `detect`, given only
/// the history up to then, reports it.
pub fn replayed_delay(
    detect: impl Fn(&[CommitObservation]) -> Vec<Detection>,
    labeled: &Labeled,
    event: &Event,
) -> usize {
    (0..=MAX_DELAY)
        .find(|k| {
            let end = (event.start + k + 1).min(labeled.observations.len());
            detect(&labeled.observations[..end])
                .iter()
                .any(|d| matches(event, d))
        })
        .unwrap_or(MAX_DELAY)
}

/// Checks of the scorer itself, run before every evaluation (the bench has no test harness)
/// so that a broken scorer cannot produce a plausible table.
pub fn self_check() {
    let step = Event {
        start: 100,
        end: 101,
        rise: true,
        is_step: true,
    };
    let drift = Event {
        start: 200,
        end: 240,
        rise: false,
        is_step: false,
    };
    let d = |position, rise| Detection { position, rise };
    let (t, _) = score(
        &[step, drift],
        &[d(103, true), d(210, false), d(230, false)],
        500,
    );
    assert_eq!((t.found, t.false_alarms, t.missed), (2, 0, 0));
    let (t, _) = score(&[step], &[d(106, true), d(100, false), d(300, true)], 500);
    assert_eq!((t.found, t.false_alarms, t.missed), (0, 3, 1));
    let (t, _) = score(&[step], &[d(98, true), d(101, true)], 500);
    assert_eq!((t.found, t.false_alarms, t.missed), (1, 1, 0));
    assert_eq!(t.f1(), Some(2.0 / 3.0));
    assert_eq!(t.false_alarms_per_1000(), 2.0);
}
