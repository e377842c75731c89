//! The noise band: a faint area behind the series, drawn by plotters so that the line and the
//! whiskers cover it.

use super::{plottable, x_of_position};

/// Fill of the noise band: the series colour, faint enough for the grid to show through.
pub(super) const BAND_OPACITY: f64 = 0.15;

/// One position of the noise band: the range the series is expected to stay within there,
/// such as the segment's mean ± k·noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandPoint {
    /// Index in first-parent history, as for the series' points.
    pub position: usize,
    /// Lower edge of the band; the band is interrupted where an edge is not finite.
    pub low: f64,
    /// Upper edge of the band.
    pub high: f64,
}

/// The band's lowest and highest edge over the commits shown, or `None` without a band.
pub(super) fn band_extent(band: &[BandPoint], first: i64, last: i64) -> Option<(f64, f64)> {
    band.iter()
        .filter(|b| (first..=last).contains(&x_of_position(b.position)))
        .filter_map(band_edges)
        .reduce(|(lo, hi), (a, b)| (lo.min(a), hi.max(b)))
}

fn band_edges(point: &BandPoint) -> Option<(f64, f64)> {
    (plottable(point.low) && plottable(point.high))
        .then(|| (point.low.min(point.high), point.low.max(point.high)))
}

/// The band as closed outlines in data coordinates, one per unbroken run of at least two
/// positions among the commits shown. Edges beyond the y range need no clamping: plotters
/// truncates every element's pixels to the plotting area, so they are cut at the frame.
///
/// Each position's edges hold until the next position, like the step line of the levels, so a
/// band built from segments jumps at the change point instead of slanting towards it.
pub(super) fn band_polygons(band: &[BandPoint], (first, last): (i64, i64)) -> Vec<Vec<(i64, f64)>> {
    let shown = first..=last;
    let mut sorted: Vec<&BandPoint> = band
        .iter()
        .filter(|b| shown.contains(&x_of_position(b.position)))
        .collect();
    if !sorted.is_sorted_by_key(|b| b.position) {
        sorted.sort_by_key(|b| b.position);
    }
    let mut polygons = Vec::new();
    for run in sorted.split(|b| band_edges(b).is_none()) {
        if run.len() < 2 {
            continue;
        }
        let edges: Vec<(i64, f64, f64)> = run
            .iter()
            .filter_map(|b| band_edges(b).map(|(lo, hi)| (x_of_position(b.position), lo, hi)))
            .collect();
        let mut outline = steps(edges.iter().map(|&(x, _, hi)| (x, hi)));
        let mut lower = steps(edges.iter().map(|&(x, lo, _)| (x, lo)));
        lower.reverse();
        outline.append(&mut lower);
        polygons.push(outline);
    }
    polygons
}

/// The vertices of a step line through `points`: each value holds until the next point.
fn steps(points: impl Iterator<Item = (i64, f64)>) -> Vec<(i64, f64)> {
    let mut vertices: Vec<(i64, f64)> = Vec::new();
    for (x, y) in points {
        if let Some(&(_, previous)) = vertices.last()
            && previous != y
        {
            push_vertex(&mut vertices, (x, previous));
        }
        push_vertex(&mut vertices, (x, y));
    }
    vertices
}

/// Appends a vertex, dropping the last one when it lies between its neighbours on a horizontal
/// run: a band built from segments then costs a few vertices per segment, not two per commit.
fn push_vertex(vertices: &mut Vec<(i64, f64)>, (x, y): (i64, f64)) {
    match vertices.as_mut_slice() {
        [.., (_, before), (last_x, last)] if *before == y && *last == y => *last_x = x,
        _ => vertices.push((x, y)),
    }
}
