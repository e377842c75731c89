//! Fewer points than pixels: a long series is drawn through the lowest and highest point of
//! each few pixel columns, so that its envelope, spikes and steps look as they would at full
//! detail while the drawing stays the same size at 100 or 100,000 commits.
//!
//! Points that something else points at (a change point, an environment change) are always
//! kept, so every marker sits on a drawn point.

use std::collections::BTreeSet;

use super::{TrendPoint, x_of};

/// Pixel columns per bucket when thinning: a linked point every few pixels is as many as a
/// pointer can tell apart.
pub(super) const PIXELS_PER_BUCKET: usize = 3;

/// The points to draw, in position order.
pub(super) struct Thinned<'p> {
    /// Every point the line passes through, with its index in the full series (to tell a gap
    /// in the measurements from points thinned away).
    pub line: Vec<(usize, &'p TrendPoint)>,
    /// The points drawn as linked circles: all of them, or when thinned the more extreme of
    /// each bucket's lowest and highest (a pointer cannot tell two apart a pixel away, and the
    /// page stays the same weight), and every kept point.
    pub linked: Vec<&'p TrendPoint>,
    /// Whether points were dropped; a thinned series has no whiskers.
    pub thinned: bool,
}

/// Whether `points` points are too many for `columns` pixel columns, and get thinned.
pub(super) fn thins(points: usize, columns: usize) -> bool {
    points > buckets(columns) * 2
}

pub(super) fn buckets(columns: usize) -> usize {
    (columns / PIXELS_PER_BUCKET).max(1)
}

/// Keeps all `points` when there are at most `columns` buckets' worth, otherwise the lowest and
/// highest of each bucket (in position order) and every point at a position in `keep`.
pub(super) fn thin<'p>(
    points: &[&'p TrendPoint],
    columns: usize,
    keep: &BTreeSet<i64>,
) -> Thinned<'p> {
    if !thins(points.len(), columns) {
        return Thinned {
            line: points.iter().copied().enumerate().collect(),
            linked: points.to_vec(),
            thinned: false,
        };
    }
    let buckets = buckets(columns);
    let first = x_of(points[0]);
    let span = (x_of(points[points.len() - 1]) - first + 1) as f64;
    let bucket_of = |point: &TrendPoint| {
        (((x_of(point) - first) as f64 / span * buckets as f64) as usize).min(buckets - 1)
    };
    let mut line = Vec::with_capacity(buckets * 2 + keep.len());
    let mut linked = Vec::with_capacity(buckets + keep.len());
    let mut start = 0;
    while start < points.len() {
        let bucket = bucket_of(points[start]);
        let end = start
            + points[start..]
                .iter()
                .position(|p| bucket_of(p) != bucket)
                .unwrap_or(points.len() - start);
        let bucket_points = &points[start..end];
        let by_value =
            |a: &(usize, &&TrendPoint), b: &(usize, &&TrendPoint)| a.1.value.total_cmp(&b.1.value);
        let low = start
            + bucket_points
                .iter()
                .enumerate()
                .min_by(by_value)
                .map_or(0, |(i, _)| i);
        let high = start
            + bucket_points
                .iter()
                .enumerate()
                .max_by(by_value)
                .map_or(0, |(i, _)| i);
        let mean = bucket_points.iter().map(|p| p.value).sum::<f64>() / bucket_points.len() as f64;
        let extreme = if points[high].value - mean >= mean - points[low].value {
            high
        } else {
            low
        };
        for (i, point) in bucket_points
            .iter()
            .enumerate()
            .map(|(i, p)| (start + i, *p))
        {
            let kept = keep.contains(&x_of(point));
            if i == low || i == high || kept {
                line.push((i, point));
            }
            if i == extreme || kept {
                linked.push(point);
            }
        }
        start = end;
    }
    Thinned {
        line,
        linked,
        thinned: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[f64]) -> Vec<TrendPoint> {
        values
            .iter()
            .enumerate()
            .map(|(position, &value)| TrendPoint {
                position,
                sha: format!("{position:040x}"),
                value,
                low: None,
                high: None,
                committed_at: None,
            })
            .collect()
    }

    #[test]
    fn a_short_series_is_drawn_whole() {
        let points = series(&[1.0, 2.0, 3.0]);
        let refs: Vec<&TrendPoint> = points.iter().collect();
        let thinned = thin(&refs, 900, &BTreeSet::new());
        assert!(!thinned.thinned);
        assert_eq!(thinned.line.len(), 3);
    }

    #[test]
    fn a_long_series_keeps_its_extremes_and_marked_points_within_the_pixel_budget() {
        let mut values: Vec<f64> = (0..10_000).map(|i| 100.0 + (i % 7) as f64).collect();
        values[4_321] = 500.0; // a one-commit spike
        values[8_000] = 1.0; // a one-commit dip
        let points = series(&values);
        let refs: Vec<&TrendPoint> = points.iter().collect();
        let keep = BTreeSet::from([6_000, 6_001]);
        let thinned = thin(&refs, 900, &keep);
        assert!(thinned.thinned);
        assert!(thinned.line.len() <= 900 / PIXELS_PER_BUCKET * 2 + keep.len());
        let kept: Vec<usize> = thinned.line.iter().map(|(_, p)| p.position).collect();
        for must in [4_321, 8_000, 6_000, 6_001] {
            assert!(kept.contains(&must), "{must} was thinned away");
        }
        assert!(kept.is_sorted(), "the line runs in history order");
        let indices: Vec<usize> = thinned.line.iter().map(|(i, _)| *i).collect();
        assert_eq!(indices, kept, "indices are those of the full series");
        let linked: Vec<usize> = thinned.linked.iter().map(|p| p.position).collect();
        assert!(linked.len() <= 900 / PIXELS_PER_BUCKET + keep.len());
        for must in [4_321, 8_000, 6_000] {
            assert!(linked.contains(&must), "{must} has no link");
        }
    }
}
