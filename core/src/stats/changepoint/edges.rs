//! Where a confirmed step starts: the best split of the filtered values, corrected for what
//! the excursion filter does to the first commits of a noisy new level.

use crate::stats::robust::median;
use crate::stats::segmentation::PrefixSums;
use crate::stats::sensitivity::Sensitivity;

/// Where a candidate's step is: the best split of the filtered values, moved back over the
/// commits the excursion filter took for outliers although they sit at the new level.
pub(super) struct StepEdges<'a> {
    pub(super) sums: &'a PrefixSums,
    /// The values in units of their noise, and the same with short excursions suppressed.
    pub(super) standardized: &'a [f64],
    pub(super) filtered: &'a [f64],
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
        split
    }
}
