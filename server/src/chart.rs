//! Benchmark trend graphs as inline SVG: one series (benchmark × metric × machine) over
//! first-parent history.
//!
//! plotters draws the frame (axes, grid, noise band, value line, whiskers); the points and then
//! the analysis overlays (levels, baseline, annotations, change markers) are appended by hand,
//! because plotters cannot emit the `<a>` and `<title>` elements that make every point and
//! change marker a link with a tooltip. The module is pure: data in, markup out.

mod axis;
mod band;
mod markup;
mod overlay;
mod scale;
mod sparkline;
#[cfg(test)]
mod tests;
mod thin;
mod yaxis;

use std::collections::BTreeSet;

use kymo_core::units::{Scale, significant};
use plotters::coord::types::RangedCoordi64;
use plotters::prelude::*;

pub use band::BandPoint;
use markup::{Placed, assemble, render_no_data, standalone, without_control_chars};
use overlay::Frame;
pub use overlay::{Annotation, Baseline, ChangeMarker, MarkerKind, Segment};
use scale::{AxisFormat, y_range};
pub use sparkline::render_sparkline;
use thin::Thinned;
use yaxis::YAxis;
pub use yaxis::YScale;

/// Smallest accepted chart width in pixels: below it the label areas leave no room to plot.
pub const MIN_WIDTH: u32 = 240;
/// Smallest accepted chart height in pixels, for the same reason as [`MIN_WIDTH`].
pub const MIN_HEIGHT: u32 = 160;
/// Largest accepted width or height in pixels; larger requests are mistakes, not charts.
pub const MAX_SIDE: u32 = 10_000;
/// Width given by [`TrendChart::new`]: a full-width chart on a benchmark page.
pub const DEFAULT_WIDTH: u32 = 960;
/// Height given by [`TrendChart::new`].
pub const DEFAULT_HEIGHT: u32 = 320;

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
    /// Lower end of the samples' spread (the first quartile, or an interval bound), drawn as a
    /// whisker.
    pub low: Option<f64>,
    /// Upper end of the samples' spread (the third quartile, or an interval bound).
    pub high: Option<f64>,
    /// When the commit was made (Unix seconds), written under its sha on the x axis.
    pub committed_at: Option<i64>,
}

/// A trend graph to render: a titled series with its unit, the pixel size of the drawing and
/// what the analysis found in it.
///
/// Start from [`TrendChart::new`] and add the rest with the `with_*` methods (or struct update
/// syntax); every overlay is empty by default.
#[derive(Debug, Clone, Copy)]
pub struct TrendChart<'a> {
    /// Caption drawn above the plot and used as the accessible name.
    pub title: &'a str,
    /// Unit of the values, shown in the y-axis label and in every tooltip.
    pub unit: &'a str,
    /// The series in any order; they are plotted by `position`.
    pub points: &'a [TrendPoint],
    /// Where a point links: this, then the point's sha (`/repos/NAME/commits/`; a page's
    /// thousands of points share it rather than each spelling its own link). Only relative and
    /// http(s) links are emitted.
    pub commit_links: &'a str,
    /// Width of the drawing in pixels (the SVG scales to its container with CSS).
    pub width: u32,
    /// Height of the drawing in pixels.
    pub height: u32,
    /// The noise band, drawn as a faint area behind the line; empty for none.
    pub band: &'a [BandPoint],
    /// Fitted levels, drawn as a step line; empty for none.
    pub segments: &'a [Segment],
    /// Change points, drawn as dashed lines with a linked marker at the top.
    pub changes: &'a [ChangeMarker],
    /// Environment changes, drawn as grey lines with a marker at the bottom.
    pub annotations: &'a [Annotation],
    /// A reference value drawn as a dashed horizontal line.
    pub baseline: Option<Baseline<'a>>,
    /// How values map to heights; a logarithmic axis leaves out values of zero or below.
    pub y_scale: YScale,
    /// Whether the points are the extremes of buckets of history (a window drawn from its
    /// summaries): neighbours are then commits apart with no gap in the measurements between.
    pub summarized: bool,
}

impl<'a> TrendChart<'a> {
    /// A chart of `points` at [`DEFAULT_WIDTH`] × [`DEFAULT_HEIGHT`] without overlays.
    pub fn new(title: &'a str, unit: &'a str, points: &'a [TrendPoint]) -> Self {
        Self {
            title,
            unit,
            points,
            commit_links: "",
            width: DEFAULT_WIDTH,
            height: DEFAULT_HEIGHT,
            band: &[],
            segments: &[],
            changes: &[],
            annotations: &[],
            baseline: None,
            y_scale: YScale::Linear,
            summarized: false,
        }
    }

    /// The same chart drawn at `width` × `height` pixels.
    #[must_use]
    pub fn with_size(self, width: u32, height: u32) -> Self {
        Self {
            width,
            height,
            ..self
        }
    }

    /// The same chart with each point linking to `prefix` and its sha.
    #[must_use]
    pub fn with_commit_links(self, prefix: &'a str) -> Self {
        Self {
            commit_links: prefix,
            ..self
        }
    }

    /// The same chart with a noise band.
    #[must_use]
    pub fn with_band(self, band: &'a [BandPoint]) -> Self {
        Self { band, ..self }
    }

    /// The same chart with the fitted levels.
    #[must_use]
    pub fn with_segments(self, segments: &'a [Segment]) -> Self {
        Self { segments, ..self }
    }

    /// The same chart with change markers.
    #[must_use]
    pub fn with_changes(self, changes: &'a [ChangeMarker]) -> Self {
        Self { changes, ..self }
    }

    /// The same chart with environment annotations.
    #[must_use]
    pub fn with_annotations(self, annotations: &'a [Annotation]) -> Self {
        Self {
            annotations,
            ..self
        }
    }

    /// The same chart with its values on a `y_scale` axis.
    #[must_use]
    pub fn with_y_scale(self, y_scale: YScale) -> Self {
        Self { y_scale, ..self }
    }

    /// The same chart, of points that stand for buckets of history when `summarized`.
    #[must_use]
    pub fn drawn_from_summaries(self, summarized: bool) -> Self {
        Self { summarized, ..self }
    }

    /// The same chart with a baseline at `value`, labelled `label`.
    #[must_use]
    pub fn with_baseline(self, value: f64, label: &'a str) -> Self {
        Self {
            baseline: Some(Baseline { value, label }),
            ..self
        }
    }
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
/// Overlays are drawn where they meet the commits shown; those entirely outside are left out.
pub fn render_trend_svg(chart: &TrendChart) -> Result<String, ChartError> {
    let (width, height) = (chart.width, chart.height);
    if !(MIN_WIDTH..=MAX_SIDE).contains(&width) || !(MIN_HEIGHT..=MAX_SIDE).contains(&height) {
        return Err(ChartError::InvalidSize { width, height });
    }
    let mut points: Vec<&TrendPoint> = chart
        .points
        .iter()
        .filter(|p| plottable(p.value) && chart.y_scale.accepts(p.value))
        .collect();
    if points.is_empty() {
        return Ok(render_no_data(chart));
    }
    if !points.is_sorted_by_key(|p| p.position) {
        points.sort_by_key(|p| p.position);
    }
    render_points(chart, &points)
}

/// Renders a series as a standalone SVG document of exactly `width` × `height` pixels with an
/// opaque background, for `<img>` embeds; otherwise as [`render_trend_svg`].
pub fn render_standalone_svg(chart: &TrendChart) -> Result<String, ChartError> {
    Ok(standalone(render_trend_svg(chart)?, chart))
}

/// The x coordinate of a point.
fn x_of(point: &TrendPoint) -> i64 {
    x_of_position(point.position)
}

/// The x coordinate of a position, capped where an `f64` still counts whole commits exactly.
fn x_of_position(position: usize) -> i64 {
    i64::try_from(position).map_or(MAX_POSITION, |x| x.min(MAX_POSITION))
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

/// Margin around the plot, in pixels.
const MARGIN: u32 = 12;

/// Pixel columns a chart `width` wide has for its points, before the y labels' width is known
/// (it depends on the values drawn): the widest usual label area is taken off.
fn plot_columns(width: u32) -> usize {
    width.saturating_sub(2 * MARGIN + 60) as usize
}

/// Whether a chart `width` pixels wide draws `points` points one by one with their spread,
/// rather than thinned to the extremes of each few pixel columns without it: callers need not
/// load the spread of a series that will be thinned.
pub fn drawn_whole(points: usize, width: u32) -> bool {
    !thin::thins(points, plot_columns(width))
}

/// The buckets a chart `width` pixels wide thins a long series into: a summary of a window
/// with at least this many buckets loses nothing the chart would draw.
pub fn pixel_buckets(width: u32) -> usize {
    thin::buckets(plot_columns(width))
}

fn render_points(chart: &TrendChart, points: &[&TrendPoint]) -> Result<String, ChartError> {
    let first = x_of(points[0]);
    let last = x_of(points[points.len() - 1]);
    // Integer x keeps the ticks on whole commits; the padding keeps end points off the axes.
    let x_pad = ((last - first) / 50).max(1);
    let x_range = (first - x_pad)..(last + x_pad);
    let band = band::band_extent(chart.band, first, last);
    let baseline = chart.baseline.map(|b| b.value).filter(|v| plottable(*v));
    let keep: BTreeSet<i64> = chart
        .changes
        .iter()
        .map(|c| c.position)
        .chain(chart.annotations.iter().map(|a| a.position))
        .map(x_of_position)
        .collect();
    let y_labels = (chart.height / 50).clamp(3, 10) as usize;
    // The label width depends on the y range, which depends on what is drawn: estimate the plot
    // width with the widest label area first.
    let thinned = thin::thin(points, plot_columns(chart.width), &keep);
    let line: Vec<&TrendPoint> = thinned.line.iter().map(|(_, p)| *p).collect();
    let (y_lo, y_hi) = y_range(&line, !thinned.thinned, band, baseline, chart.y_scale);
    let scale = Scale::for_values(chart.unit, [y_lo, y_hi]);
    let y_format = AxisFormat::for_range(scale.apply(y_lo), scale.apply(y_hi), y_labels);
    // Logarithmic labels are round values of different magnitudes (0.5, 1, 10, 100): each is
    // written with its own significant digits rather than one count of decimals.
    let y_label = |v: &f64| match chart.y_scale {
        YScale::Linear => y_format.format(scale.apply(*v)),
        YScale::Log => significant(scale.apply(*v), 3),
    };
    let y_label_chars = [y_lo, y_hi]
        .map(|v| y_label(&v).len())
        .into_iter()
        .max()
        .unwrap_or(0);
    let y_label_area = (y_label_chars as u32 * 7 + 34).clamp(50, 160);
    let plot_width = chart.width.saturating_sub(2 * MARGIN + y_label_area);
    let ticks = axis::tick_points(&line, (first, last), plot_width);
    let title = without_control_chars(chart.title);
    let unit = without_control_chars(&scale.unit);
    let y_desc = match (unit.is_empty(), chart.y_scale) {
        (true, YScale::Linear) => "value".to_owned(),
        (true, YScale::Log) => "value, log scale".to_owned(),
        (false, YScale::Linear) => format!("value ({unit})"),
        (false, YScale::Log) => format!("value ({unit}), log scale"),
    };

    let mut body = String::with_capacity(8192 + line.len() * 40);
    let mut overlays = String::new();
    let (placed, spacing) = {
        let root =
            SVGBackend::with_string(&mut body, (chart.width, chart.height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let mut plot = ChartBuilder::on(&root)
            .caption(
                title.as_ref(),
                ("sans-serif", 17).into_font().color(&TEXT_COLOR),
            )
            .margin(MARGIN)
            .x_label_area_size(56)
            .y_label_area_size(y_label_area)
            .build_cartesian_2d(x_range.clone(), YAxis::new(chart.y_scale, y_lo, y_hi))
            .map_err(draw_error)?;
        plot.configure_mesh()
            // One grid line per label: finer lines add noise and hundreds of elements. The x
            // axis names commits, drawn by `axis` rather than as plotters' numbers.
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID_COLOR)
            .axis_style(TEXT_COLOR)
            .disable_x_mesh()
            .x_labels(2)
            .x_label_formatter(&|_| String::new())
            .set_tick_mark_size(LabelAreaPosition::Bottom, 0)
            .y_labels(y_labels)
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
        plot.draw_series(
            ticks
                .iter()
                .map(|p| PathElement::new(vec![(x_of(p), y_lo), (x_of(p), y_hi)], GRID_COLOR)),
        )
        .map_err(draw_error)?;
        draw_band(&mut plot, chart.band, (first, last))?;
        draw_series(&mut plot, &thinned, spacing, chart.summarized)?;
        let to_px = |x: i64, y: f64| plot.backend_coord(&(x, y));
        let (left, top) = to_px(x_range.start, y_hi);
        let (right, bottom) = to_px(x_range.end, y_lo);
        let frame = Frame {
            first,
            last,
            y_lo,
            y_hi,
            left,
            right,
            top,
            bottom,
            to_px: &to_px,
        };
        axis::push_commit_ticks(&mut overlays, &ticks, &frame);
        push_overlays(&mut overlays, chart, &frame);
        let placed: Vec<Placed> = thinned
            .linked
            .iter()
            .map(|point| {
                let (x, y) = plot.backend_coord(&(x_of(point), point.value));
                Placed { point, x, y }
            })
            .collect();
        root.present().map_err(draw_error)?;
        (placed, spacing)
    };
    let changes = overlay::change_counts(chart.changes, first, last);
    Ok(assemble(chart, &body, &overlays, changes, &placed, spacing))
}

/// The hand-written overlays, from the back: levels, baseline, annotations, then changes (whose
/// markers are links, so they stay above the other lines).
fn push_overlays(out: &mut String, chart: &TrendChart, frame: &Frame) {
    overlay::push_segments(out, chart.segments, frame);
    if let Some(baseline) = &chart.baseline {
        overlay::push_baseline(out, baseline, chart.unit, frame);
    }
    overlay::push_annotations(out, chart.annotations, frame);
    overlay::push_changes(out, chart.changes, frame);
}

type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordi64, YAxis>>;

/// The noise band, before anything else so that the series is drawn over it.
fn draw_band(plot: &mut Plot, band: &[BandPoint], shown: (i64, i64)) -> Result<(), ChartError> {
    let style = LINE_COLOR.mix(band::BAND_OPACITY).filled();
    let polygons = band::band_polygons(band, shown);
    plot.draw_series(
        polygons
            .into_iter()
            .map(|outline| Polygon::new(outline, style)),
    )
    .map_err(draw_error)?;
    Ok(())
}

/// Whiskers first (unless the series is thinned: they would merge into a smear), then the line
/// over them: solid between neighbouring commits, thin and faint across commits that were not
/// measured. The linked circles are added later on top.
fn draw_series(
    plot: &mut Plot,
    thinned: &Thinned,
    spacing: f64,
    summarized: bool,
) -> Result<(), ChartError> {
    let whisker_style = LINE_COLOR.mix(0.45).stroke_width(1);
    if !thinned.thinned {
        let ranges = thinned
            .line
            .iter()
            .filter_map(|(_, p)| whisker(p).map(|(lo, hi)| (x_of(p), lo, hi)));
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
    }
    let (runs, gaps) = if summarized {
        let line = thinned.line.iter().map(|(_, p)| (x_of(p), p.value));
        (vec![line.collect()], Vec::new())
    } else {
        split_at_gaps(&thinned.line)
    };
    plot.draw_series(
        gaps.into_iter()
            .map(|(a, b)| PathElement::new(vec![a, b], LINE_COLOR.mix(0.35).stroke_width(1))),
    )
    .map_err(draw_error)?;
    for run in runs {
        plot.draw_series(LineSeries::new(run, LINE_COLOR.stroke_width(2)))
            .map_err(draw_error)?;
    }
    Ok(())
}

/// The line's unbroken runs, and the stretches between them where commits were not measured:
/// two points that were neighbours in the series (nothing thinned away between them) but are
/// more than one commit apart.
#[expect(
    clippy::type_complexity,
    reason = "two lists of coordinates, named at the call"
)]
fn split_at_gaps(
    line: &[(usize, &TrendPoint)],
) -> (Vec<Vec<(i64, f64)>>, Vec<((i64, f64), (i64, f64))>) {
    let mut runs = vec![Vec::new()];
    let mut gaps = Vec::new();
    let mut previous: Option<(usize, (i64, f64))> = None;
    for &(index, point) in line {
        let here = (x_of(point), point.value);
        if let Some((previous_index, there)) = previous
            && index == previous_index + 1
            && here.0 - there.0 > 1
        {
            gaps.push((there, here));
            runs.push(Vec::new());
        }
        runs.last_mut().expect("runs starts non-empty").push(here);
        previous = Some((index, here));
    }
    (runs, gaps)
}

fn draw_error(error: DrawingAreaErrorKind<std::io::Error>) -> ChartError {
    ChartError::Draw(error.to_string())
}
