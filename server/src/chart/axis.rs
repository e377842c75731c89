//! The x axis names commits, not positions: a tick at evenly spread drawn points, labelled with
//! the commit's short sha and, below it, its date. plotters draws the ticks' grid lines (behind
//! the series); the labels are written here, because plotters' labels are single lines.

use kymo_core::clock::utc_date;

use super::markup::{push_escaped, push_int};
use super::overlay::Frame;
use super::{TrendPoint, x_of};

/// Horizontal pixels a two-line label needs (`2026-11-24` at 11 px is about 62, and a gap).
const PIXELS_PER_TICK: i32 = 76;
const TICK_COLOR: &str = "#333333";

/// The drawn points to label: every drawn point when each can have [`PIXELS_PER_TICK`] pixels;
/// otherwise points a fixed number of commits apart, counted back from the newest (so the
/// labels are evenly spaced and the newest commit is always named), each the drawn point
/// nearest to its ideal place.
pub(super) fn tick_points<'p>(
    line: &[&'p TrendPoint],
    (first, last): (i64, i64),
    plot_width: u32,
) -> Vec<&'p TrendPoint> {
    let Some(last_point) = line.last() else {
        return Vec::new();
    };
    let count = (i64::from(plot_width) / i64::from(PIXELS_PER_TICK)).max(2);
    if line.len() as i64 <= count {
        return line.to_vec();
    }
    let step = ((last - first).max(1) + count - 2) / (count - 1);
    let mut ticks: Vec<&TrendPoint> = Vec::with_capacity(count as usize);
    let mut ideal = last;
    while ideal >= first {
        let at = line.partition_point(|p| x_of(p) < ideal);
        let nearest = match (at.checked_sub(1).map(|i| line[i]), line.get(at).copied()) {
            (Some(before), Some(after)) if ideal - x_of(before) <= x_of(after) - ideal => before,
            (_, Some(after)) => after,
            (Some(before), None) => before,
            (None, None) => last_point,
        };
        if ticks.last().is_none_or(|t| t.position != nearest.position) {
            ticks.push(nearest);
        }
        ideal -= step;
    }
    ticks.reverse();
    ticks
}

/// Appends the ticks' labels below the plot: the short sha and, under it, the commit's date.
pub(super) fn push_commit_ticks(out: &mut String, ticks: &[&TrendPoint], frame: &Frame) {
    if ticks.is_empty() {
        return;
    }
    out.push_str("<g class=\"commit-ticks\" font-family=\"sans-serif\" font-size=\"11\" fill=\"");
    out.push_str(TICK_COLOR);
    out.push_str("\" text-anchor=\"middle\">\n");
    for point in ticks {
        let x = (frame.to_px)(x_of(point), frame.y_lo).0;
        out.push_str("<text x=\"");
        push_int(out, x);
        out.push_str("\" y=\"");
        push_int(out, frame.bottom + 16);
        out.push_str("\"><tspan font-family=\"monospace\">");
        push_escaped(out, point.sha.get(..7).unwrap_or(&point.sha));
        out.push_str("</tspan>");
        if let Some(seconds) = point.committed_at {
            out.push_str("<tspan x=\"");
            push_int(out, x);
            out.push_str("\" dy=\"13\" fill=\"#666666\">");
            out.push_str(&utc_date(seconds));
            out.push_str("</tspan>");
        }
        out.push_str("</text>\n");
    }
    out.push_str("</g>\n");
}
