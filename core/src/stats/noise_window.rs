//! Which history a per-commit verdict's noise model is measured over, and the models worth
//! keeping for a series so that a compare need not read its history again.
//!
//! A verdict at a head commit uses the values of the last [`NOISE_HISTORY`] points of the
//! series before the head (all of its points when the head is off the tracked branch). Two
//! windows answer that for almost every compare: the one before the series' last point (a
//! head that is the series' newest commit) and the one ending at it (a head off the branch,
//! or newer than every point). Positions are history positions on the tracked branch.

use super::noise::{CommitObservation, NoiseModel, noise_model};

/// How many points of history before the head feed a series' noise model.
pub const NOISE_HISTORY: usize = 100;

/// A noise model with the window of history it was measured over: the points with a
/// position below `before_position` (every point when `None`), of which the newest is at
/// `newest_position` (`None` when the window is empty).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseWindow {
    pub newest_position: Option<i64>,
    pub before_position: Option<i64>,
    pub model: NoiseModel,
}

impl NoiseWindow {
    /// Whether a head at `head` (`None`: off the tracked branch) would measure the same
    /// window: no point of the series lies between the window's newest point and the head.
    pub fn holds_for(&self, head: Option<i64>) -> bool {
        match head {
            None => self.before_position.is_none(),
            Some(head) => {
                self.newest_position.is_none_or(|newest| newest < head)
                    && self.before_position.is_none_or(|before| head <= before)
            }
        }
    }
}

/// The noise model of `history` (positions and values, oldest first), as a verdict uses it:
/// from the values alone.
pub fn noise_of_values(history: &[(i64, f64)]) -> NoiseModel {
    let observations: Vec<CommitObservation> = (history.iter())
        .map(|&(position, value)| CommitObservation::new(position as usize, value))
        .collect();
    noise_model(&observations)
}

/// The two windows worth storing for a series whose points (positions and values, oldest
/// first) are `points`: the last [`NOISE_HISTORY`] points before its last point, and the
/// last [`NOISE_HISTORY`] points up to and including it. None without points.
pub fn noise_windows(points: &[(i64, f64)]) -> Vec<NoiseWindow> {
    let Some(&(last, _)) = points.last() else {
        return Vec::new();
    };
    let recent = |end: usize| &points[end.saturating_sub(NOISE_HISTORY)..end];
    let before_last = recent(points.len() - 1);
    let through_last = recent(points.len());
    vec![
        NoiseWindow {
            newest_position: before_last.last().map(|p| p.0),
            before_position: Some(last),
            model: noise_of_values(before_last),
        },
        NoiseWindow {
            newest_position: Some(last),
            before_position: None,
            model: noise_of_values(through_last),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points at every third position with a little deterministic jitter.
    fn points(count: usize) -> Vec<(i64, f64)> {
        (0..count)
            .map(|i| (3 * i as i64, 100.0 + ((i * 7) % 5) as f64))
            .collect()
    }

    #[test]
    fn the_windows_are_the_recent_history_before_and_through_the_last_point() {
        let points = points(250);
        let windows = noise_windows(&points);
        assert_eq!(windows.len(), 2);
        let (before, through) = (windows[0], windows[1]);
        assert_eq!(before.before_position, Some(747));
        assert_eq!(before.newest_position, Some(744));
        assert_eq!(before.model, noise_of_values(&points[149..249]));
        assert_eq!(through.before_position, None);
        assert_eq!(through.newest_position, Some(747));
        assert_eq!(through.model, noise_of_values(&points[150..]));
        assert_eq!(before.model.changes, NOISE_HISTORY - 1);
    }

    #[test]
    fn short_histories_use_every_point_and_empty_ones_store_nothing() {
        assert!(noise_windows(&[]).is_empty());
        let one = noise_windows(&[(5, 1.0)]);
        assert_eq!(one[0].newest_position, None);
        assert_eq!(one[0].model, NoiseModel::unknown());
        assert_eq!(one[1].newest_position, Some(5));
        let ten = points(10);
        assert_eq!(noise_windows(&ten)[0].model, noise_of_values(&ten[..9]));
        assert_eq!(noise_windows(&ten)[1].model, noise_of_values(&ten));
    }

    #[test]
    fn a_window_holds_only_for_heads_that_would_read_the_same_points() {
        let windows = noise_windows(&points(250));
        let (before, through) = (windows[0], windows[1]);
        // The series' newest commit, and any head between it and the point before.
        assert!(before.holds_for(Some(747)));
        assert!(before.holds_for(Some(745)));
        assert!(!before.holds_for(Some(744)), "an older head sees less");
        assert!(
            !before.holds_for(Some(748)),
            "a newer head sees the last point"
        );
        assert!(!before.holds_for(None));
        // Off the branch, or newer than every point.
        assert!(through.holds_for(None));
        assert!(through.holds_for(Some(748)));
        assert!(!through.holds_for(Some(747)));
        // A series with one point: nothing before it, whatever the head.
        let one = noise_windows(&[(5, 1.0)]);
        assert!(one[0].holds_for(Some(0)) && one[0].holds_for(Some(5)));
        assert!(!one[0].holds_for(Some(6)) && !one[0].holds_for(None));
    }
}
