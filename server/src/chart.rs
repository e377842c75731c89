//! Benchmark trend graphs as inline SVG: one series (benchmark × metric × machine) over
//! first-parent history.
//!
//! plotters draws the frame (axes, grid, value line, whiskers); the points are then appended by
//! hand, because plotters cannot emit the `<a>` and `<title>` elements that make every point a
//! link to its commit with a tooltip. The module is pure: data in, markup out.

mod markup;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;

use plotters::coord::types::{RangedCoordf64, RangedCoordi64};
use plotters::prelude::*;

use markup::{push_escaped, push_number, push_root_tag, safe_href, without_control_chars};

/// Smallest accepted chart width in pixels: below it the label areas leave no room to plot.
pub const MIN_WIDTH: u32 = 240;
/// Smallest accepted chart height in pixels, for the same reason as [`MIN_WIDTH`].
pub const MIN_HEIGHT: u32 = 160;
/// Largest accepted width or height in pixels; larger requests are mistakes, not charts.
pub const MAX_SIDE: u32 = 10_000;

/// The y range never spans less than this fraction of the values' magnitude, so that sub-percent
/// jitter does not fill the chart like a step, while a 5 % step still fills most of it.
const MIN_RELATIVE_SPAN: f64 = 0.01;
/// Fraction of the data span added above and below, so points never sit on the frame.
const Y_PADDING: f64 = 0.08;
/// Values beyond this magnitude cannot be padded or differenced without overflowing to infinity.
const MAX_MAGNITUDE: f64 = 1e300;
/// Positions beyond 2^52 lose whole-number precision in plotters' `f64` mapping.
const MAX_POSITION: i64 = 1 << 52;

const LINE_COLOR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const GRID_COLOR: RGBColor = RGBColor(0xe4, 0xe4, 0xe4);
const TEXT_COLOR: RGBColor = RGBColor(0x33, 0x33, 0x33);

/// One point of a series: a commit's value for one benchmark × metric × machine.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendPoint {
    /// Index in first-parent history; 0 is the oldest commit shown.
    pub position: usize,
    /// The commit's full hash (40 hex digits).
    pub sha: String,
    /// The value plotted; non-finite values are skipped.
    pub value: f64,
    /// Lower end of the samples' spread (minimum or interval bound), drawn as a whisker.
    pub low: Option<f64>,
    /// Upper end of the samples' spread (maximum or interval bound), drawn as a whisker.
    pub high: Option<f64>,
    /// Link to the commit page; only relative and http(s) links are emitted.
    pub href: String,
}

/// A trend graph to render: a titled series with its unit and the pixel size of the drawing.
#[derive(Debug, Clone, Copy)]
pub struct TrendChart<'a> {
    /// Caption drawn above the plot and used as the accessible name.
    pub title: &'a str,
    /// Unit of the values, shown in the y-axis label and in every tooltip.
    pub unit: &'a str,
    /// The series in any order; they are plotted by `position`.
    pub points: &'a [TrendPoint],
    /// Width of the drawing in pixels (the SVG scales to its container with CSS).
    pub width: u32,
    /// Height of the drawing in pixels.
    pub height: u32,
}

/// Why a trend graph could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// The requested size is too small to hold the axes or absurdly large.
    #[error(
        "chart size {width}x{height} is outside {MIN_WIDTH}x{MIN_HEIGHT} to {MAX_SIDE}x{MAX_SIDE}"
    )]
    InvalidSize {
        /// The requested width.
        width: u32,
        /// The requested height.
        height: u32,
    },
    /// plotters failed while drawing; with an in-memory SVG this indicates a bug.
    #[error("drawing the chart failed: {0}")]
    Draw(String),
}

/// Renders a series as a standalone `<svg>` element to embed inline in an HTML page.
///
/// Each finite point becomes `<a href><title>short sha: value unit</title><circle/></a>`; points
/// whose value is not finite (or beyond ±1e300) are skipped, and a series with none left renders
/// a "no data yet" message. The SVG carries a `viewBox` and `width="100%"`, so it scales with its container.
pub fn render_trend_svg(chart: &TrendChart) -> Result<String, ChartError> {
    let (width, height) = (chart.width, chart.height);
    if !(MIN_WIDTH..=MAX_SIDE).contains(&width) || !(MIN_HEIGHT..=MAX_SIDE).contains(&height) {
        return Err(ChartError::InvalidSize { width, height });
    }
    let mut points: Vec<&TrendPoint> = chart.points.iter().filter(|p| plottable(p.value)).collect();
    if points.is_empty() {
        return Ok(render_no_data(chart));
    }
    if !points.is_sorted_by_key(|p| p.position) {
        points.sort_by_key(|p| p.position);
    }
    render_points(chart, &points)
}

/// The x coordinate of a point, capped where an `f64` still counts whole commits exactly.
fn x_of(point: &TrendPoint) -> i64 {
    i64::try_from(point.position).map_or(MAX_POSITION, |x| x.min(MAX_POSITION))
}

/// Whether a value can be placed on a linear axis without overflowing the range arithmetic.
fn plottable(value: f64) -> bool {
    value.is_finite() && value.abs() <= MAX_MAGNITUDE
}

/// The whisker's ends for a point, in ascending order, or `None` when it has no usable bound.
fn whisker(point: &TrendPoint) -> Option<(f64, f64)> {
    let low = point.low.filter(|v| plottable(*v));
    let high = point.high.filter(|v| plottable(*v));
    if low.is_none() && high.is_none() {
        return None;
    }
    let (a, b) = (low.unwrap_or(point.value), high.unwrap_or(point.value));
    Some((a.min(b), a.max(b)))
}

/// The y range: the data (values and whiskers) padded on both sides, never zero-based.
fn y_range(points: &[&TrendPoint]) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for point in points {
        let (a, b) = whisker(point).unwrap_or((point.value, point.value));
        lo = lo.min(a.min(point.value));
        hi = hi.max(b.max(point.value));
    }
    let mid = lo / 2.0 + hi / 2.0;
    let min_span = if mid == 0.0 {
        1.0
    } else {
        mid.abs() * MIN_RELATIVE_SPAN
    };
    let half = (hi - lo).max(min_span) * (0.5 + Y_PADDING);
    (mid - half, mid + half)
}

/// How the y-axis labels are written: enough decimals to tell neighbouring ticks apart.
#[derive(Debug, Clone, Copy)]
struct AxisFormat {
    scientific: bool,
    decimals: usize,
}

impl AxisFormat {
    fn for_range(lo: f64, hi: f64, labels: usize) -> Self {
        let step_exp = ((hi - lo) / labels as f64).log10().floor() as i32;
        let magnitude = lo.abs().max(hi.abs());
        let scientific = !(1e-3..1e7).contains(&magnitude);
        let decimals = if scientific {
            magnitude.log10().floor() as i32 - step_exp
        } else {
            -step_exp
        };
        Self {
            scientific,
            decimals: decimals.clamp(0, 12) as usize,
        }
    }

    fn format(self, value: f64) -> String {
        let decimals = self.decimals;
        if self.scientific {
            format!("{value:.decimals$e}")
        } else {
            format!("{value:.decimals$}")
        }
    }
}

fn render_no_data(chart: &TrendChart) -> String {
    let mut svg = String::with_capacity(512);
    push_root_tag(&mut svg, chart, "no data yet");
    let (x, y) = (chart.width / 2, chart.height / 2);
    let _ = write!(
        svg,
        "<text x=\"{x}\" y=\"{y}\" text-anchor=\"middle\" font-family=\"sans-serif\" \
         font-size=\"14\" fill=\"#666666\">no data yet</text>\n</svg>\n"
    );
    svg
}

/// A point mapped to pixels, ready for its link.
struct Placed<'p> {
    point: &'p TrendPoint,
    x: i32,
    y: i32,
}

fn render_points(chart: &TrendChart, points: &[&TrendPoint]) -> Result<String, ChartError> {
    let first = x_of(points[0]);
    let last = x_of(points[points.len() - 1]);
    // Integer x keeps the ticks on whole commits; the padding keeps end points off the axes.
    let x_pad = ((last - first) / 50).max(1);
    let x_range = (first - x_pad)..(last + x_pad);
    let (y_lo, y_hi) = y_range(points);
    let y_labels = (chart.height / 50).clamp(3, 10) as usize;
    let x_labels = (chart.width / 60).clamp(4, 15) as usize;
    let y_format = AxisFormat::for_range(y_lo, y_hi, y_labels);
    let y_label_chars = y_format.format(y_lo).len().max(y_format.format(y_hi).len());
    let y_label_area = (y_label_chars as u32 * 7 + 34).clamp(50, 160);
    let title = without_control_chars(chart.title);
    let unit = without_control_chars(chart.unit);
    let y_desc = if unit.is_empty() {
        "value".to_owned()
    } else {
        format!("value ({unit})")
    };

    let mut body = String::with_capacity(8192 + points.len() * 160);
    let (placed, spacing) = {
        let root =
            SVGBackend::with_string(&mut body, (chart.width, chart.height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let mut plot = ChartBuilder::on(&root)
            .caption(
                title.as_ref(),
                ("sans-serif", 17).into_font().color(&TEXT_COLOR),
            )
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(y_label_area)
            .build_cartesian_2d(x_range, y_lo..y_hi)
            .map_err(draw_error)?;
        let x_label = |p: &i64| {
            if (first..=last).contains(p) {
                p.to_string()
            } else {
                String::new()
            }
        };
        let y_label = |v: &f64| y_format.format(*v);
        plot.configure_mesh()
            // One grid line per label: finer lines add noise and hundreds of elements.
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID_COLOR)
            .axis_style(TEXT_COLOR)
            .x_labels(x_labels)
            .y_labels(y_labels)
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .label_style(("sans-serif", 12).into_font().color(&TEXT_COLOR))
            .axis_desc_style(("sans-serif", 13).into_font().color(&TEXT_COLOR))
            .x_desc("commit (oldest → newest)")
            .y_desc(y_desc)
            .draw()
            .map_err(draw_error)?;
        let spacing = if last > first {
            let (from, _) = plot.backend_coord(&(first, y_lo));
            let (to, _) = plot.backend_coord(&(last, y_lo));
            f64::from(to - from) / (last - first) as f64
        } else {
            f64::INFINITY
        };
        draw_series(&mut plot, points, spacing)?;
        let placed: Vec<Placed> = points
            .iter()
            .map(|point| {
                let (x, y) = plot.backend_coord(&(x_of(point), point.value));
                Placed { point, x, y }
            })
            .collect();
        root.present().map_err(draw_error)?;
        (placed, spacing)
    };
    Ok(assemble(chart, &body, &placed, spacing))
}

type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordi64, RangedCoordf64>>;

/// Whiskers first, then the line over them; the linked circles are added later on top.
fn draw_series(plot: &mut Plot, points: &[&TrendPoint], spacing: f64) -> Result<(), ChartError> {
    let whisker_style = LINE_COLOR.mix(0.45).stroke_width(1);
    let ranges = points
        .iter()
        .filter_map(|p| whisker(p).map(|(lo, hi)| (x_of(p), lo, hi)));
    plot.draw_series(
        ranges
            .clone()
            .map(|(x, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], whisker_style)),
    )
    .map_err(draw_error)?;
    // Caps only where commits are far enough apart for them not to merge into a band.
    if spacing >= 8.0 {
        let cap = |end: (i64, f64)| {
            EmptyElement::at(end) + PathElement::new(vec![(-3, 0), (3, 0)], whisker_style)
        };
        plot.draw_series(ranges.flat_map(|(x, lo, hi)| [cap((x, lo)), cap((x, hi))]))
            .map_err(draw_error)?;
    }
    let line = points.iter().map(|p| (x_of(p), p.value));
    plot.draw_series(LineSeries::new(line, LINE_COLOR.stroke_width(2)))
        .map_err(draw_error)?;
    Ok(())
}

/// Replaces plotters' fixed-size root tag with a scalable, labelled one and appends the links.
fn assemble(chart: &TrendChart, body: &str, placed: &[Placed], spacing: f64) -> String {
    // plotters writes `<svg ...>\n` first and `</svg>\n` last; only what lies between is kept.
    let inner_start = body.find(">\n").map_or(0, |i| i + 2);
    let inner_end = body.rfind("</svg>").unwrap_or(body.len()).max(inner_start);
    let link_bytes: usize = placed.iter().map(|p| p.point.href.len() + 120).sum();
    let mut svg = String::with_capacity(body.len() + link_bytes + 512);
    let summary = match placed.len() {
        1 => "1 commit".to_owned(),
        n => format!("{n} commits"),
    };
    push_root_tag(&mut svg, chart, &summary);
    svg.push_str(&body[inner_start..inner_end]);
    let radius = if spacing >= 8.0 {
        "3.5"
    } else if spacing >= 3.0 {
        "2.5"
    } else {
        "1.5"
    };
    svg.push_str("<g class=\"points\" fill=\"#1F77B4\" stroke=\"#FFFFFF\" stroke-width=\"1\">\n");
    for Placed { point, x, y } in placed {
        svg.push_str("<a href=\"");
        push_escaped(&mut svg, safe_href(&point.href));
        svg.push_str("\"><title>");
        push_escaped(&mut svg, point.sha.get(..10).unwrap_or(&point.sha));
        svg.push_str(": ");
        push_number(&mut svg, point.value);
        if !chart.unit.is_empty() {
            svg.push(' ');
            push_escaped(&mut svg, chart.unit);
        }
        if let Some((lo, hi)) = whisker(point) {
            svg.push_str(" (");
            push_number(&mut svg, lo);
            svg.push_str(" to ");
            push_number(&mut svg, hi);
            svg.push(')');
        }
        svg.push_str("</title><circle cx=\"");
        push_int(&mut svg, *x);
        svg.push_str("\" cy=\"");
        push_int(&mut svg, *y);
        svg.push_str("\" r=\"");
        svg.push_str(radius);
        svg.push_str("\"/></a>\n");
    }
    svg.push_str("</g>\n</svg>\n");
    svg
}

fn push_int(out: &mut String, value: i32) {
    let _ = write!(out, "{value}");
}

fn draw_error(error: DrawingAreaErrorKind<std::io::Error>) -> ChartError {
    ChartError::Draw(error.to_string())
}
