//! What the analysis lays over a series: the fitted levels, change points, environment
//! annotations and a baseline (the noise band, drawn behind the series, is in `band`).
//!
//! They are hand-written markup rather than plotters elements, because change markers must be
//! links with tooltips and dashed lines are one attribute here but hundreds of elements in
//! plotters. Whatever lies outside the commits shown is left out rather than pinned to the
//! frame; only an off-scale baseline is still named, at the frame's edge with an arrow, so that
//! its absence from the plot is not taken for its absence.

use kymo_core::units::human;

use super::markup::{push_escaped, push_int, safe_href};
use super::{plottable, x_of_position};

const REGRESSION_COLOR: &str = "#D62728";
const IMPROVEMENT_COLOR: &str = "#2CA02C";
const LEVEL_COLOR: &str = "#444444";
const ANNOTATION_COLOR: &str = "#8C8C8C";
const BASELINE_COLOR: &str = "#9467BD";
/// Visible characters of a baseline label; the full text stays in its tooltip.
const MAX_LABEL_CHARS: usize = 48;

/// Whether a change point made the series worse or better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// Drawn red.
    Regression,
    /// Drawn green.
    Improvement,
}

impl MarkerKind {
    fn class(self) -> &'static str {
        match self {
            Self::Regression => "regression",
            Self::Improvement => "improvement",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Self::Regression => REGRESSION_COLOR,
            Self::Improvement => IMPROVEMENT_COLOR,
        }
    }
}

/// A detected change: a dashed vertical line at the first commit of the new level and a
/// triangle at the top of the plot, linked to the change's page.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeMarker {
    /// Position of the first commit measured at the new level.
    pub position: usize,
    /// Regression or improvement, which sets the colour.
    pub kind: MarkerKind,
    /// Tooltip of the marker, e.g. "+12.3 % regression"; empty means the kind's name.
    pub label: String,
    /// Link to the change's page; only relative and http(s) links are emitted.
    pub href: Option<String>,
}

/// A stretch of history at one fitted level, drawn as a step line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Position of the segment's first commit.
    pub from: usize,
    /// Position of the segment's last commit (inclusive).
    pub to: usize,
    /// The fitted level, e.g. the segment's mean.
    pub level: f64,
}

/// A change of the environment between commits (toolchain, machine, kernel): a thin grey line
/// with an "i" marker at the bottom of the plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// Position of the first commit measured in the new environment.
    pub position: usize,
    /// Tooltip, e.g. "toolchain: rustc 1.95 → 1.96".
    pub label: String,
}

/// A reference value drawn as a horizontal dashed line labelled at the right edge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline<'a> {
    /// The value, in the series' unit.
    pub value: f64,
    /// What the value is, e.g. "v1.4.0"; shown at the right edge and in the tooltip.
    pub label: &'a str,
}

/// The plot's geometry in pixels and the mapping of data onto it, valid while plotters draws.
pub(super) struct Frame<'f> {
    /// First position shown.
    pub first: i64,
    /// Last position shown (inclusive).
    pub last: i64,
    /// Bottom of the y range.
    pub y_lo: f64,
    /// Top of the y range.
    pub y_hi: f64,
    /// Left edge of the plotting area in pixels.
    pub left: i32,
    /// Right edge of the plotting area.
    pub right: i32,
    /// Top edge of the plotting area.
    pub top: i32,
    /// Bottom edge of the plotting area.
    pub bottom: i32,
    /// Maps a position and a value to pixels, exactly as plotters places the points.
    pub to_px: &'f dyn Fn(i64, f64) -> (i32, i32),
}

impl Frame<'_> {
    /// The pixel column of `position`, or `None` when it lies outside the commits shown.
    fn column(&self, position: usize) -> Option<i32> {
        let x = x_of_position(position);
        (self.first..=self.last)
            .contains(&x)
            .then(|| (self.to_px)(x, self.y_lo).0)
    }

    fn row(&self, value: f64) -> i32 {
        (self.to_px)(self.first, value).1
    }
}

/// Counts of the visible change markers, for the chart's accessible name.
pub(super) fn change_counts(changes: &[ChangeMarker], first: i64, last: i64) -> (usize, usize) {
    let visible = changes
        .iter()
        .filter(|c| (first..=last).contains(&x_of_position(c.position)));
    visible.fold((0, 0), |(r, i), c| match c.kind {
        MarkerKind::Regression => (r + 1, i),
        MarkerKind::Improvement => (r, i + 1),
    })
}

/// Appends the step line of the fitted levels: one polyline per run of segments, joined by a
/// vertical step at each later segment's first commit. Segments are clipped to the commits
/// shown; one whose level is off the y range (or not finite) ends the run instead of being
/// pinned to the frame or bridged over, and overlapping segments are not joined.
pub(super) fn push_segments(out: &mut String, segments: &[Segment], frame: &Frame) {
    let mut shown: Vec<(i64, i64, f64)> = segments
        .iter()
        .filter_map(|s| {
            let (a, b) = (x_of_position(s.from), x_of_position(s.to));
            let (from, to) = (a.min(b).max(frame.first), a.max(b).min(frame.last));
            (from <= to).then_some((from, to, s.level))
        })
        .collect();
    if shown.is_empty() {
        return;
    }
    shown.sort_by_key(|&(from, to, _)| (from, to));
    out.push_str("<g class=\"levels\" fill=\"none\" stroke=\"");
    out.push_str(LEVEL_COLOR);
    out.push_str("\" stroke-width=\"1.5\" pointer-events=\"none\">\n");
    // The end and level of the segment the open polyline ends with.
    let mut open: Option<(i64, f64)> = None;
    for (from, to, level) in shown {
        if !(frame.y_lo..=frame.y_hi).contains(&level) {
            if open.take().is_some() {
                out.push_str("\"/>\n");
            }
            continue;
        }
        let (x_from, y) = (frame.to_px)(from, level);
        let x_to = (frame.to_px)(to, level).0;
        match open {
            Some((previous_to, previous_level)) if previous_to < from => {
                push_coords(out, x_from, frame.row(previous_level));
            }
            Some(_) => {
                out.push_str("\"/>\n");
                push_polyline_start(out);
            }
            None => push_polyline_start(out),
        }
        push_coords(out, x_from, y);
        push_coords(out, x_to, y);
        open = Some((to, level));
    }
    if open.is_some() {
        out.push_str("\"/>\n");
    }
    out.push_str("</g>\n");
}

fn push_polyline_start(out: &mut String) {
    out.push_str("<polyline class=\"level\" points=\"");
}

fn push_coords(out: &mut String, x: i32, y: i32) {
    push_int(out, x);
    out.push(',');
    push_int(out, y);
    out.push(' ');
}

/// Appends the baseline: a dashed line labelled at the right edge when the value is on scale,
/// otherwise only the label, at the top or bottom edge with an arrow pointing towards it.
pub(super) fn push_baseline(out: &mut String, baseline: &Baseline, unit: &str, frame: &Frame) {
    if !plottable(baseline.value) {
        return;
    }
    out.push_str("<g class=\"baseline\" fill=\"");
    out.push_str(BASELINE_COLOR);
    out.push_str("\" stroke=\"");
    out.push_str(BASELINE_COLOR);
    out.push_str("\"><title>");
    push_escaped(out, baseline.label);
    out.push_str(": ");
    push_escaped(out, &human(baseline.value, unit));
    out.push_str("</title>");
    let (arrow, label_y) = if baseline.value > frame.y_hi {
        ("↑ ", frame.top + 13)
    } else if baseline.value < frame.y_lo {
        ("↓ ", frame.bottom - 5)
    } else {
        let y = frame.row(baseline.value);
        out.push_str("<line x1=\"");
        push_int(out, frame.left);
        out.push_str("\" y1=\"");
        push_int(out, y);
        out.push_str("\" x2=\"");
        push_int(out, frame.right);
        out.push_str("\" y2=\"");
        push_int(out, y);
        out.push_str("\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\" pointer-events=\"none\"/>");
        // Above the line unless that would leave the plot.
        ("", if y - 17 > frame.top { y - 5 } else { y + 14 })
    };
    out.push_str("<text x=\"");
    push_int(out, frame.right - 4);
    out.push_str("\" y=\"");
    push_int(out, label_y);
    out.push_str(
        "\" text-anchor=\"end\" font-family=\"sans-serif\" font-size=\"11\" stroke=\"#FFFFFF\" \
         stroke-width=\"3\" paint-order=\"stroke\">",
    );
    out.push_str(arrow);
    let shown = match baseline.label.char_indices().nth(MAX_LABEL_CHARS) {
        Some((end, _)) => &baseline.label[..end],
        None => baseline.label,
    };
    push_escaped(out, shown);
    if shown.len() < baseline.label.len() {
        out.push('…');
    }
    out.push_str("</text></g>\n");
}

/// Appends the environment annotations: grey lines with an "i" marker at the bottom.
pub(super) fn push_annotations(out: &mut String, annotations: &[Annotation], frame: &Frame) {
    let mut opened = false;
    for annotation in annotations {
        let Some(x) = frame.column(annotation.position) else {
            continue;
        };
        if !opened {
            out.push_str("<g class=\"annotations\" stroke=\"");
            out.push_str(ANNOTATION_COLOR);
            out.push_str("\">\n");
            opened = true;
        }
        out.push_str("<g class=\"annotation\"><title>");
        push_escaped(out, &annotation.label);
        out.push_str("</title>");
        push_vertical(out, x, frame, "");
        let cy = frame.bottom - 9;
        out.push_str("<circle cx=\"");
        push_int(out, x);
        out.push_str("\" cy=\"");
        push_int(out, cy);
        out.push_str("\" r=\"6\" fill=\"#FFFFFF\"/><text x=\"");
        push_int(out, x);
        out.push_str("\" y=\"");
        push_int(out, cy + 4);
        out.push_str(
            "\" text-anchor=\"middle\" font-family=\"serif\" font-size=\"11\" \
             font-weight=\"bold\" stroke=\"none\" fill=\"",
        );
        out.push_str(ANNOTATION_COLOR);
        out.push_str("\">i</text></g>\n");
    }
    if opened {
        out.push_str("</g>\n");
    }
}

/// Appends the change points: a dashed line in the kind's colour and a triangle at the top of
/// the plot carrying the link and the tooltip.
pub(super) fn push_changes(out: &mut String, changes: &[ChangeMarker], frame: &Frame) {
    let mut opened = false;
    for change in changes {
        let Some(x) = frame.column(change.position) else {
            continue;
        };
        if !opened {
            out.push_str("<g class=\"changes\">\n");
            opened = true;
        }
        let color = change.kind.color();
        out.push_str("<g class=\"change ");
        out.push_str(change.kind.class());
        out.push_str("\" stroke=\"");
        out.push_str(color);
        out.push_str("\" fill=\"");
        out.push_str(color);
        out.push_str("\">");
        push_vertical(
            out,
            x,
            frame,
            " stroke-width=\"1.5\" stroke-dasharray=\"5 4\"",
        );
        // The tooltip belongs to the marker, which is the link when there is one.
        match &change.href {
            Some(href) => {
                out.push_str("<a href=\"");
                push_escaped(out, safe_href(href));
                out.push_str("\">");
            }
            None => out.push_str("<g>"),
        }
        out.push_str("<title>");
        if change.label.is_empty() {
            out.push_str(change.kind.class());
        } else {
            push_escaped(out, &change.label);
        }
        out.push_str("</title><path d=\"M");
        push_int(out, x - 6);
        out.push(' ');
        push_int(out, frame.top);
        out.push_str("h12l-6 10z\"/>");
        out.push_str(if change.href.is_some() {
            "</a>"
        } else {
            "</g>"
        });
        out.push_str("</g>\n");
    }
    if opened {
        out.push_str("</g>\n");
    }
}

/// A line across the plot's height at pixel column `x`, with extra attributes; it lets the
/// pointer through to the points beneath.
fn push_vertical(out: &mut String, x: i32, frame: &Frame, attributes: &str) {
    out.push_str("<line x1=\"");
    push_int(out, x);
    out.push_str("\" y1=\"");
    push_int(out, frame.top);
    out.push_str("\" x2=\"");
    push_int(out, x);
    out.push_str("\" y2=\"");
    push_int(out, frame.bottom);
    out.push_str("\" pointer-events=\"none\"");
    out.push_str(attributes);
    out.push_str("/>");
}
