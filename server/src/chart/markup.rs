//! The hand-written parts of the SVG around plotters' drawing: the root tag, the linked points,
//! the "no data" message, and the escaping, links and numbers they are written with.
//!
//! Titles, units, shas and links come from users and uploaded results, so every string that
//! reaches the markup goes through [`push_escaped`], and links through [`safe_href`].

use std::borrow::Cow;
use std::fmt::Write as _;

use kymo_core::clock::push_utc_date;
use kymo_core::units::{Scale, push_significant};

use super::{TrendChart, TrendPoint, whisker};

/// Characters that XML 1.0 forbids even when escaped; browsers reject the whole SVG for one.
fn forbidden_in_xml(c: char) -> bool {
    matches!(
        c,
        '\0'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}'
    )
}

/// Appends `text` escaped for use in XML text or a double- or single-quoted attribute.
pub(super) fn push_escaped(out: &mut String, text: &str) {
    // Byte scan: every character to replace is ASCII except U+FFFE and U+FFFF, which both start
    // with 0xEF, so whole runs of ordinary text are copied at once.
    let bytes = text.as_bytes();
    let mut clean_from = 0;
    let mut i = 0;
    while i < bytes.len() {
        let (replacement, width) = match bytes[i] {
            b'&' => ("&amp;", 1),
            b'<' => ("&lt;", 1),
            b'>' => ("&gt;", 1),
            b'"' => ("&quot;", 1),
            b'\'' => ("&apos;", 1),
            b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            0..=0x1f => ("\u{fffd}", 1),
            0xef if matches!(bytes.get(i + 1..i + 3), Some([0xbf, 0xbe | 0xbf])) => ("\u{fffd}", 3),
            _ => {
                i += 1;
                continue;
            }
        };
        out.push_str(&text[clean_from..i]);
        out.push_str(replacement);
        i += width;
        clean_from = i;
    }
    out.push_str(&text[clean_from..]);
}

/// `text` without the characters XML forbids, for strings handed to plotters (which escapes
/// markup characters itself but passes control characters through).
pub(super) fn without_control_chars(text: &str) -> Cow<'_, str> {
    if text.chars().any(forbidden_in_xml) {
        Cow::Owned(
            text.chars()
                .map(|c| if forbidden_in_xml(c) { '\u{fffd}' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
    }
}

/// The link itself when it is relative or http(s), else `#`: a `javascript:` link inside an
/// inline SVG would run in the dashboard's origin when clicked.
pub(super) fn safe_href(href: &str) -> &str {
    match href.find([':', '/', '?', '#']) {
        Some(i) if href.as_bytes()[i] == b':' => {
            let scheme = &href[..i];
            if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") {
                href
            } else {
                "#"
            }
        }
        _ => href,
    }
}

/// Appends a pixel coordinate.
pub(super) fn push_int(out: &mut String, value: i32) {
    let _ = write!(out, "{value}");
}

/// The root tag's sizing: the width of its container, the height its aspect ratio gives.
const SCALABLE: &str = "width=\"100%\" style=\"height:auto\"";

/// Turns an inline chart into a standalone SVG document for `<img>` embeds (READMEs, pull
/// requests): a fixed pixel size, since an image has no container to scale to, and an opaque
/// background so that it reads on dark pages too.
pub(super) fn standalone(inline: String, chart: &TrendChart) -> String {
    let sized = format!("width=\"{}\" height=\"{}\"", chart.width, chart.height);
    let mut svg = inline.replacen(SCALABLE, &sized, 1);
    let body = svg.find(">\n").map_or(svg.len(), |end| end + 2);
    svg.insert_str(
        body,
        "<rect width=\"100%\" height=\"100%\" fill=\"#FFFFFF\"/>\n",
    );
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{svg}")
}

/// Writes the opening `<svg>` tag: scalable to its container, with an accessible name.
pub(super) fn push_root_tag(out: &mut String, chart: &TrendChart, summary: &str) {
    let (width, height) = (chart.width, chart.height);
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" \
         {SCALABLE} preserveAspectRatio=\"xMidYMid meet\" role=\"img\" aria-label=\""
    );
    push_escaped(out, chart.title);
    if !chart.unit.is_empty() {
        out.push_str(" in ");
        push_escaped(out, chart.unit);
    }
    out.push_str(": ");
    push_escaped(out, summary);
    out.push_str("\">\n");
}

pub(super) fn render_no_data(chart: &TrendChart) -> String {
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
pub(super) struct Placed<'p> {
    pub point: &'p TrendPoint,
    pub x: i32,
    pub y: i32,
}

/// `value` as [`Scale::format`] writes it, the unit escaped (the digits need no escaping).
fn push_value(out: &mut String, scale: &Scale, value: f64) {
    push_significant(out, scale.apply(value), 4);
    if !scale.unit.is_empty() {
        out.push(' ');
        push_escaped(out, &scale.unit);
    }
}

/// Replaces plotters' fixed-size root tag with a scalable, labelled one and appends the links
/// and the overlays, which go on top so that dense points cannot hide them; their lines let
/// the pointer through to the points.
pub(super) fn assemble(
    chart: &TrendChart,
    body: &str,
    overlays: &str,
    (regressions, improvements): (usize, usize),
    placed: &[Placed],
    spacing: f64,
) -> String {
    // plotters writes `<svg ...>\n` first and `</svg>\n` last; only what lies between is kept.
    let inner_start = body.find(">\n").map_or(0, |i| i + 2);
    let inner_end = body.rfind("</svg>").unwrap_or(body.len()).max(inner_start);
    // A prefix that is not a safe link makes every point's link `#`, not `#` and its sha.
    let links = safe_href(chart.commit_links);
    let link_sha = links == chart.commit_links;
    let link_bytes = placed.len() * (links.len() + 160);
    let mut svg = String::with_capacity(body.len() + overlays.len() + link_bytes + 512);
    let mut summary = String::new();
    for (count, noun) in [
        (placed.len(), "commit"),
        (regressions, "regression"),
        (improvements, "improvement"),
    ] {
        if count > 0 {
            let separator = if summary.is_empty() { "" } else { ", " };
            let plural = if count == 1 { "" } else { "s" };
            let _ = write!(summary, "{separator}{count} {noun}{plural}");
        }
    }
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
        push_escaped(&mut svg, links);
        if link_sha {
            push_escaped(&mut svg, &point.sha);
        }
        svg.push_str("\"><title>");
        push_escaped(&mut svg, point.sha.get(..10).unwrap_or(&point.sha));
        if let Some(seconds) = point.committed_at {
            svg.push_str(", ");
            push_utc_date(&mut svg, seconds);
        }
        svg.push_str(": ");
        let scale = Scale::for_magnitude(chart.unit, point.value);
        push_value(&mut svg, &scale, point.value);
        if let Some((lo, hi)) = whisker(point) {
            svg.push_str(" (middle half ");
            push_significant(&mut svg, scale.apply(lo), 4);
            svg.push_str(" to ");
            push_value(&mut svg, &scale, hi);
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
    svg.push_str("</g>\n");
    svg.push_str(overlays);
    svg.push_str("</svg>\n");
    svg
}
