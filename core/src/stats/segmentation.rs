//! Candidate change points of a standardized series: short excursions are suppressed, then
//! seeded binary segmentation proposes splits.
//!
//! Seeded binary segmentation (Kovács, Li, Bühlmann & Haubner, 2020) scores a fixed,
//! deterministic set of intervals at every scale with the CUSUM statistic, then keeps the
//! narrowest interval whose best split clears the threshold, discards the intervals that
//! contain it, and repeats. Unlike plain binary segmentation it finds a short plateau (a
//! regression fixed a few dozen commits later) inside a long history, and unlike random
//! (wild) intervals it needs no random numbers. Everything here is O(n log n).

/// Cumulative sums, so that any segment's mean costs O(1).
pub(crate) struct PrefixSums(Vec<f64>);

impl PrefixSums {
    pub(crate) fn new(values: &[f64]) -> Self {
        let mut sums = Vec::with_capacity(values.len() + 1);
        let mut total = 0.0;
        sums.push(total);
        for v in values {
            total += v;
            sums.push(total);
        }
        Self(sums)
    }

    /// The split of `[start, end)` with at least `min_len` values on each side that
    /// maximizes the standardized CUSUM statistic √(l·r/(l+r))·|mean_left − mean_right|
    /// (in units of the values' standard deviation), as (position, statistic).
    pub(crate) fn best_split(
        &self,
        start: usize,
        end: usize,
        min_len: usize,
    ) -> Option<(usize, f64)> {
        if end < start + 2 * min_len {
            return None;
        }
        let total = (end - start) as f64;
        let sum = self.0[end] - self.0[start];
        // The statistic squared is (S_l·r − S_r·l)² / (l·r·(l+r)) with S_r = sum − S_l,
        // i.e. (S_l·(l+r) − sum·l)² / (l·r·(l+r)): one division per split, no square root.
        let mut best = (start + min_len, f64::NEG_INFINITY);
        for split in start + min_len..=end - min_len {
            let left = (split - start) as f64;
            let right = total - left;
            let contrast = (self.0[split] - self.0[start]) * total - sum * left;
            let squared = contrast * contrast / (left * right * total);
            if squared > best.1 {
                best = (split, squared);
            }
        }
        Some((best.0, best.1.sqrt()))
    }
}

/// Replaces every value lying more than `threshold` from the median of its neighbourhood of
/// 2·`min_len` − 1 values (centred where possible) by that median (a Hampel filter).
///
/// A run of fewer than `min_len` unusual values is a minority of such a window, so it is
/// replaced: a spike that reverts never reaches segmentation. A run of `min_len` or more is a
/// majority of the windows of its own points, so steps survive intact, and a new level at the
/// end of the history appears as soon as it is `min_len` commits long.
pub(crate) fn suppress_short_excursions(
    values: &[f64],
    min_len: usize,
    threshold: f64,
) -> Vec<f64> {
    let n = values.len();
    let width = (2 * min_len.saturating_sub(1) + 1).min(n);
    if width == 0 {
        return Vec::new();
    }
    // Near the ends the window keeps its width by shifting inwards, so a short run at the
    // very end is a minority too. The window is kept sorted as it slides.
    let mut window: Vec<f64> = values[..width].to_vec();
    window.sort_unstable_by(f64::total_cmp);
    let mut start = 0;
    let mut filtered = Vec::with_capacity(n);
    for (i, &v) in values.iter().enumerate() {
        let wanted = i.saturating_sub(width / 2).min(n - width);
        while start < wanted {
            let leaving = values[start];
            let at = window
                .binary_search_by(|probe| probe.total_cmp(&leaving))
                .unwrap_or_else(|at| at);
            window.remove(at);
            let entering = values[start + width];
            let at = window
                .binary_search_by(|probe| probe.total_cmp(&entering))
                .unwrap_or_else(|at| at);
            window.insert(at, entering);
            start += 1;
        }
        let local = window[width / 2];
        filtered.push(if (v - local).abs() > threshold {
            local
        } else {
            v
        });
    }
    filtered
}

/// Candidate change points (first index of each new segment, ascending, at least `min_len`
/// apart and from the ends) of `values`, which must be standardized (unit noise).
pub(crate) fn seeded_candidates(values: &[f64], min_len: usize, threshold: f64) -> Vec<usize> {
    let n = values.len();
    if n < 2 * min_len {
        return Vec::new();
    }
    let sums = PrefixSums::new(values);
    let mut over_threshold: Vec<(usize, usize, usize, f64)> = Vec::new();
    for (start, end) in seeded_intervals(n, 2 * min_len) {
        if let Some((split, statistic)) = sums.best_split(start, end, min_len)
            && statistic > threshold
        {
            over_threshold.push((start, end, split, statistic));
        }
    }
    // Narrowest first; among equals the strongest, then the earliest, for determinism.
    over_threshold.sort_by(|a, b| {
        (a.1 - a.0)
            .cmp(&(b.1 - b.0))
            .then(b.3.total_cmp(&a.3))
            .then(a.0.cmp(&b.0))
    });
    let mut accepted: Vec<usize> = Vec::new();
    for (start, end, split, _) in over_threshold {
        if accepted.iter().all(|&c| c <= start || c >= end) {
            accepted.push(split);
        }
    }
    accepted.sort_unstable();
    accepted
}

/// The seeded intervals: at each scale (lengths n, n/2, n/4, … down to `shortest`), evenly
/// spaced intervals overlapping by half, so every position sits well inside one at each scale.
fn seeded_intervals(n: usize, shortest: usize) -> Vec<(usize, usize)> {
    let mut intervals = Vec::new();
    let mut length = n as f64;
    while length.ceil() as usize >= shortest {
        let len = (length.ceil() as usize).min(n);
        let count = 2 * (n as f64 / length).ceil() as usize - 1;
        let shift = if count > 1 {
            (n - len) as f64 / (count - 1) as f64
        } else {
            0.0
        };
        for k in 0..count {
            let start = ((k as f64 * shift).round() as usize).min(n - len);
            intervals.push((start, start + len));
        }
        length /= 2.0;
    }
    intervals.dedup();
    intervals
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::synthetic::Rng;

    fn noise(rng: &mut Rng, n: usize) -> Vec<f64> {
        (0..n).map(|_| rng.normal()).collect()
    }

    #[test]
    fn best_split_finds_a_step() {
        let mut values = vec![0.0; 40];
        for v in &mut values[25..] {
            *v = 1.0;
        }
        let (split, statistic) = PrefixSums::new(&values).best_split(0, 40, 3).unwrap();
        assert_eq!(split, 25);
        assert!((statistic - (25.0 * 15.0 / 40.0f64).sqrt()).abs() < 1e-12);
        assert_eq!(PrefixSums::new(&values).best_split(0, 5, 3), None);
    }

    #[test]
    fn short_excursions_are_suppressed_and_steps_kept() {
        let mut values = vec![0.0; 60];
        values[10] = 50.0;
        values[20] = -40.0;
        values[21] = -40.0;
        for v in &mut values[40..] {
            *v = 10.0;
        }
        let filtered = suppress_short_excursions(&values, 5, 3.0);
        assert_eq!(&filtered[..40], &[0.0; 40]);
        assert_eq!(&filtered[40..], &[10.0; 20]);
        // A new level at the very end survives once it is min_len long, not before.
        let mut tail = vec![0.0; 30];
        tail.extend([10.0; 5]);
        assert_eq!(&suppress_short_excursions(&tail, 5, 3.0)[30..], &[10.0; 5]);
        tail.pop();
        assert_eq!(&suppress_short_excursions(&tail, 5, 3.0)[30..], &[0.0; 4]);
    }

    #[test]
    fn seeded_intervals_cover_every_scale() {
        let intervals = seeded_intervals(100, 10);
        assert_eq!(intervals[0], (0, 100));
        assert!(intervals.iter().all(|&(s, e)| e <= 100 && e - s >= 10));
        // Every position is at least a quarter-length inside some interval of length ≈ 12.5.
        for p in 3..97 {
            assert!(
                intervals
                    .iter()
                    .any(|&(s, e)| e - s <= 13 && s + 3 <= p && p + 3 <= e)
            );
        }
    }

    #[test]
    fn a_short_plateau_in_a_long_history_is_found() {
        // Plain binary segmentation misses this: over the whole history the plateau barely
        // moves either side's mean.
        let mut rng = Rng::new(11);
        let mut values = noise(&mut rng, 2000);
        for v in &mut values[1000..1030] {
            *v += 3.0;
        }
        let found = seeded_candidates(&values, 5, 4.5);
        assert!(found.iter().any(|&c| c.abs_diff(1000) <= 2), "{found:?}");
        assert!(found.iter().any(|&c| c.abs_diff(1030) <= 2), "{found:?}");
    }

    #[test]
    fn pure_noise_yields_few_candidates() {
        let mut rng = Rng::new(12);
        let mut total = 0;
        for _ in 0..20 {
            total += seeded_candidates(&noise(&mut rng, 500), 5, 3.9).len();
        }
        assert!(total <= 5, "{total} candidates in 10,000 noise values");
    }
}
