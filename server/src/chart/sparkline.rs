//! A sparkline: a series' recent values as a small line without axes, for tables.

use std::fmt::Write as _;

/// Width of a sparkline in pixels.
pub const SPARK_WIDTH: u32 = 120;
/// Height of a sparkline in pixels.
pub const SPARK_HEIGHT: u32 = 24;

/// Renders `values` (oldest first; non-finite ones are skipped) as an inline SVG line scaled to
/// their own range, with the newest value as a dot; empty for fewer than two values.
pub fn render_sparkline(values: &[f64], label: &str) -> String {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.len() < 2 {
        return String::new();
    }
    let (lo, hi) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        });
    // A flat series is drawn through the middle rather than divided by zero.
    let span = if hi > lo { hi - lo } else { 1.0 };
    let (w, h, pad) = (f64::from(SPARK_WIDTH), f64::from(SPARK_HEIGHT), 3.0);
    let step = (w - 2.0 * pad) / (finite.len() - 1) as f64;
    let at = |i: usize, v: f64| {
        let y = if hi > lo {
            h - pad - (v - lo) / span * (h - 2.0 * pad)
        } else {
            h / 2.0
        };
        (pad + i as f64 * step, y)
    };
    let mut svg = String::with_capacity(64 + finite.len() * 12);
    let _ = write!(
        svg,
        "<svg class=\"spark\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{SPARK_WIDTH}\" \
         height=\"{SPARK_HEIGHT}\" viewBox=\"0 0 {SPARK_WIDTH} {SPARK_HEIGHT}\" role=\"img\" \
         aria-label=\""
    );
    super::markup::push_escaped(&mut svg, label);
    svg.push_str("\"><polyline fill=\"none\" stroke=\"#1F77B4\" stroke-width=\"1.5\" points=\"");
    for (i, v) in finite.iter().enumerate() {
        let (x, y) = at(i, *v);
        let _ = write!(svg, "{x:.1},{y:.1} ");
    }
    let (x, y) = at(finite.len() - 1, finite[finite.len() - 1]);
    let _ = write!(
        svg,
        "\"/><circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"#1F77B4\"/></svg>"
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparkline_spans_its_own_range_and_marks_the_newest_value() {
        let svg = render_sparkline(&[10.0, 12.0, f64::NAN, 20.0], "time <b>");
        assert!(svg.starts_with("<svg class=\"spark\""));
        assert!(svg.contains("aria-label=\"time &lt;b&gt;\""));
        assert!(
            svg.contains("points=\"3.0,21.0 60.0,17.4 117.0,3.0 \""),
            "{svg}"
        );
        assert!(svg.contains("<circle cx=\"117.0\" cy=\"3.0\""));
    }

    #[test]
    fn too_few_or_flat_values_still_draw_sensibly() {
        assert_eq!(render_sparkline(&[1.0], "x"), "");
        assert_eq!(render_sparkline(&[], "x"), "");
        let flat = render_sparkline(&[5.0, 5.0, 5.0], "x");
        assert!(flat.contains("3.0,12.0 60.0,12.0 117.0,12.0"), "{flat}");
    }
}
