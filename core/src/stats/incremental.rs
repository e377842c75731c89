//! Change points of a history of any length, found so that a new point re-examines only the
//! newest stretch of it, and the answer is still exactly that of analysing everything again.
//!
//! [`detect_change_points`] judges a history by its whole: it standardizes by the noise of
//! every commit and seeds its search with intervals laid out over the whole length. One more
//! point moves both, so any of its decisions may move, and no check short of running it again
//! can prove that none did. Over a long history that is also wrong in itself: the noise of
//! commit 10,000 is not that of commit 1. So a history longer than one analysis window is
//! analysed in windows of `len` points anchored at multiples of `len / 2`; each window decides
//! the points of its middle half (the first window from the start, the last one to the end),
//! and a decision closer than `min_segment_len` to the end of an earlier window's last one
//! repeats it across the border and is dropped. A window's decisions depend on its points alone, and only the
//! last window has room for new points, so appending re-examines the windows that were not yet
//! full and keeps every earlier decision as it was. A history of at most `len` points is one
//! window: exactly [`detect_change_points`] over all of it.
//!
//! Whether the earlier points are still the ones analysed (no backfill, no re-measured commit,
//! no rewritten branch) is for the caller to prove; when it cannot, it calls [`Windows::analyse`].

use super::changepoint::{ChangePoint, detect_change_points};
use super::noise::CommitObservation;
use super::sensitivity::Sensitivity;
use super::tail::detect_tail_change;
use crate::model::Direction;

/// Points per analysis window of a series: histories up to this long are analysed whole.
pub const ANALYSIS_WINDOW: usize = 2048;

/// The analysis windows of a history: `len` points each, starting every `len / 2` points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    len: usize,
}

/// What the analysis of a series found.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// Confirmed change points, oldest first; positions index the whole history.
    pub detected: Vec<ChangePoint>,
    /// A change in the newest commits, too recent to confirm (see [`detect_tail_change`]).
    pub recent: Option<ChangePoint>,
}

impl Analysis {
    /// Every change found, the recent one last.
    pub fn changes(&self) -> impl Iterator<Item = &ChangePoint> {
        self.detected.iter().chain(&self.recent)
    }
}

impl Default for Windows {
    fn default() -> Self {
        Self::new(ANALYSIS_WINDOW)
    }
}

impl Windows {
    /// Windows of `len` points (rounded up to an even number of at least 4).
    pub fn new(len: usize) -> Self {
        Self {
            len: len.max(4).next_multiple_of(2),
        }
    }

    /// Points per window.
    pub fn points(self) -> usize {
        self.len
    }

    fn step(self) -> usize {
        self.len / 2
    }

    /// The first point of window `k`.
    pub fn start(self, k: usize) -> usize {
        k * self.step()
    }

    /// The index of the last window of a history of `n` points.
    pub fn last(self, n: usize) -> usize {
        n.saturating_sub(self.len).div_ceil(self.step())
    }

    /// The first window that does not lie wholly within the first `known` points: the windows
    /// before it are unchanged by points appended after those.
    pub fn first_open(self, known: usize) -> usize {
        if known < self.len {
            0
        } else {
            (known - self.len) / self.step() + 1
        }
    }

    /// The first point whose decision belongs to window `k`: the middle half of each window
    /// decides, the first window from the start.
    pub fn decides_from(self, k: usize) -> usize {
        if k == 0 {
            0
        } else {
            self.start(k) + self.step() / 2
        }
    }

    /// The first point an incremental analysis must read when windows from `first` on are
    /// re-examined in a history of `n` points: the start of that window, or earlier when the
    /// recent-change test and its baseline need more.
    pub fn read_from(self, first: usize, n: usize, sensitivity: &Sensitivity) -> usize {
        let s = sensitivity.sanitized();
        self.start(first)
            .min(n.saturating_sub(s.window + s.min_segment_len))
    }

    /// The analysis of a whole history (oldest first).
    pub fn analyse(
        self,
        series: &[CommitObservation],
        direction: Direction,
        sensitivity: &Sensitivity,
    ) -> Analysis {
        self.analyse_since(&[], series, 0, 0, direction, sensitivity)
    }

    /// The analysis of a history whose windows before `first` were analysed already and are
    /// unchanged: `known` holds their decisions (those at points before
    /// [`Windows::decides_from`]`(first)`), `recent` the points from `offset` on, which must be
    /// at most [`Windows::read_from`]. Equal to [`Windows::analyse`] of the whole history.
    pub fn analyse_since(
        self,
        known: &[ChangePoint],
        recent: &[CommitObservation],
        offset: usize,
        first: usize,
        direction: Direction,
        sensitivity: &Sensitivity,
    ) -> Analysis {
        debug_assert!(
            offset <= self.start(first),
            "the points of window {first} are read"
        );
        let s = sensitivity.sanitized();
        let n = offset + recent.len();
        let decided_from = self.decides_from(first);
        let mut detected: Vec<ChangePoint> = (known.iter())
            .filter(|c| c.position < decided_from)
            .cloned()
            .collect();
        let last = self.last(n);
        for k in first..=last {
            // Only a decision of an earlier window can be repeated across a border; within
            // one window two changes may be close (a drift reported from its ramp's start).
            let earlier = detected.last().map(|c| c.position + c.span.max(1) - 1);
            let start = self.start(k);
            let end = (start + self.len).min(n);
            let decides = self.decides_from(k)..if k == last {
                n
            } else {
                self.decides_from(k + 1)
            };
            let found = detect_change_points(&recent[start - offset..end - offset], direction, &s);
            for mut change in found {
                change.position += start;
                let repeats = earlier.is_some_and(|end| change.position < end + s.min_segment_len);
                if decides.contains(&change.position) && !repeats {
                    detected.push(change);
                }
            }
        }
        // The commits since the last confirmed change may hold a change too recent to confirm.
        // Its test reads at most `window + min_segment_len` of them, so a segment longer than
        // what was read gives the same answer; its length since the change is restored.
        let settled = detected.last().map_or(0, |c| c.position);
        let from = settled.max(offset);
        let recent_change =
            detect_tail_change(&recent[from - offset..], direction, &s).map(|mut change| {
                change.position += from;
                change.segment_before = change.position - settled;
                change
            });
        Analysis {
            detected,
            recent: recent_change,
        }
    }
}

#[cfg(test)]
mod tests;
