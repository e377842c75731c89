//! Where a confirmed step starts: the best split of the filtered values, corrected for what
//! the excursion filter does to the first commits of a noisy new level, and for runs whose
//! fast end other work had slowed.

use crate::model::Direction;
use crate::stats::location::best_sample;
use crate::stats::noise::CommitObservation;
use crate::stats::noise::robust_sd;
use crate::stats::robust::median;
use crate::stats::segmentation::PrefixSums;
use crate::stats::sensitivity::Sensitivity;

/// How far past the midpoint between two levels a run's best sample must lie, in robust
/// standard deviations of the best samples of runs of the same code, before it is taken as
/// evidence of which code the run ran.
const BEST_SAMPLE_MARGIN: f64 = 3.0;

/// Where a candidate's step is: the best split of the filtered values, moved back over the
/// commits the excursion filter took for outliers although they sit at the new level, and
/// then to where the runs' best samples change level.
pub(super) struct StepEdges<'a> {
    pub(super) sums: &'a PrefixSums,
    /// The values in units of their noise, and the same with short excursions suppressed.
    pub(super) standardized: &'a [f64],
    pub(super) filtered: &'a [f64],
    /// The observations behind the values, with their samples.
    pub(super) observations: &'a [&'a CommitObservation],
    pub(super) direction: Direction,
}

impl StepEdges<'_> {
    /// The best split for candidate `i` between its neighbours (at most `window` away).
    pub(super) fn refined(&self, splits: &[usize], i: usize, s: &Sensitivity) -> usize {
        let n = self.filtered.len();
        let at = splits[i];
        let previous = if i == 0 { 0 } else { splits[i - 1] };
        let start = previous.max(at.saturating_sub(s.window));
        let end = splits.get(i + 1).copied().unwrap_or(n).min(at + s.window);
        let Some((mut split, _)) = self.sums.best_split(start, end, s.min_segment_len) else {
            return at;
        };
        // The first commits of a new level whose first few commits dip back (a noisy new
        // level) are a minority of their filter windows, which hold the old level too: the
        // filter replaces them and the step appears a commit or two late. A replaced commit
        // just before the split that is closer to the new level than to the old one belongs
        // to the new level.
        let level = |range: std::ops::Range<usize>| median(&self.filtered[range]);
        let after = level(split..end);
        while split > start + s.min_segment_len {
            let before = level(start..split - 1);
            let raw = self.standardized[split - 1];
            let replaced = raw != self.filtered[split - 1];
            if !(replaced && (raw - after).abs() < (raw - before).abs()) {
                break;
            }
            split -= 1;
        }
        self.where_best_samples_change(split, start, end, s.min_segment_len)
    }

    /// Moves `split` to where the runs' best samples change level. Other work slows samples
    /// and never speeds them, so a run's best sample bounds the speed of the code it ran:
    /// - a run just after a slowdown whose best sample lies at the old, faster level ran the
    ///   old code, however slow its fast end (load had slowed 29 of its 30 samples): the step
    ///   is after it;
    /// - a run just before a speed-up whose best sample lies at the new, faster level ran the
    ///   new code, however slow its fast end: the step is at it or before.
    ///
    /// The levels are the medians of the runs' best samples on either side (on the ratio
    /// scale), and "lies at a level" is past their midpoint by [`BEST_SAMPLE_MARGIN`] robust
    /// standard deviations of the best samples around their side's level: a step small
    /// against how much the best samples of one code differ from run to run is left where the
    /// values put it. Runs of fewer than 20 samples, and series that are not positive, are
    /// left alone.
    fn where_best_samples_change(
        &self,
        mut split: usize,
        start: usize,
        end: usize,
        min_len: usize,
    ) -> usize {
        let best: Vec<Option<f64>> = (self.observations[start..end].iter())
            .map(|o| best_sample(&o.samples, self.direction).filter(|&b| b > 0.0))
            .map(|b| b.map(f64::ln))
            .collect();
        let side = |range: std::ops::Range<usize>| -> Vec<f64> {
            best[range.start - start..range.end - start]
                .iter()
                .flatten()
                .copied()
                .collect()
        };
        let (old, new) = (side(start..split), side(split..end));
        if old.len() < min_len || new.len() < min_len {
            return split;
        }
        let (before, after) = (median(&old), median(&new));
        let mut deviations: Vec<f64> = (old.iter().map(|b| b - before))
            .chain(new.iter().map(|b| b - after))
            .collect();
        let margin = BEST_SAMPLE_MARGIN * robust_sd(&mut deviations);
        let midpoint = (before + after) / 2.0;
        if (after - midpoint).abs() <= margin {
            return split;
        }
        // How far run `j`'s best sample lies past the midpoint towards `level`.
        let towards = |j: usize, level: f64| {
            best[j - start].map(|b| (b - midpoint) * (level - midpoint).signum())
        };
        let slower = match self.direction {
            Direction::Lower => after > before,
            Direction::Higher => after < before,
        };
        if slower {
            while split + min_len < end && towards(split, before).is_some_and(|d| d > margin) {
                split += 1;
            }
        } else {
            while split > start + min_len && towards(split - 1, after).is_some_and(|d| d > margin) {
                split -= 1;
            }
        }
        split
    }
}
