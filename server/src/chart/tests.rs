mod log_scale;
mod overlays;

use std::time::{Duration, Instant};

use super::markup::{push_escaped, safe_href};
use super::*;

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

fn point(position: usize, value: f64) -> TrendPoint {
    TrendPoint {
        position,
        sha: format!("{position:0>10}{}", &SHA[10..]),
        value,
        low: None,
        high: None,
        committed_at: None,
    }
}

fn series(values: &[f64]) -> Vec<TrendPoint> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| point(i, *v))
        .collect()
}

fn chart(points: &[TrendPoint]) -> TrendChart<'_> {
    TrendChart::new("bus/steady/one_subscriber · time", "ns", points)
        .with_commit_links("/repos/demo/commits/")
        .with_size(800, 320)
}

fn render(points: &[TrendPoint]) -> String {
    render_trend_svg(&chart(points)).expect("renders")
}

/// Checks that `svg` is one well-formed element: tags balance, attributes are quoted, and every
/// `&` starts an entity. Returns the number of elements, so callers can assert on structure.
fn assert_well_formed(svg: &str) -> usize {
    let mut stack: Vec<&str> = Vec::new();
    let mut elements = 0;
    let mut rest = svg.trim();
    assert!(
        rest.starts_with("<svg "),
        "not an svg element: {:.60}",
        rest
    );
    while let Some(open) = rest.find('<') {
        assert_text(&rest[..open]);
        rest = &rest[open + 1..];
        let close = rest.find('>').expect("unterminated tag");
        let tag = &rest[..close];
        rest = &rest[close + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name), "mismatched </{name}>");
            assert!(
                !stack.is_empty() || rest.trim().is_empty(),
                "content after root"
            );
            continue;
        }
        assert!(!stack.is_empty() || elements == 0, "second root element");
        elements += 1;
        let (tag, self_closing) = match tag.strip_suffix('/') {
            Some(tag) => (tag, true),
            None => (tag, false),
        };
        let name_end = tag.find(char::is_whitespace).unwrap_or(tag.len());
        let (name, mut attributes) = tag.split_at(name_end);
        assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()));
        loop {
            attributes = attributes.trim_start();
            if attributes.is_empty() {
                break;
            }
            let (key, value) = attributes.split_once("=\"").expect("attribute not quoted");
            assert!(
                key.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-:".contains(c))
            );
            let end = value.find('"').expect("attribute not closed");
            assert_text(&value[..end]);
            attributes = &value[end + 1..];
        }
        if !self_closing {
            stack.push(name);
        }
    }
    assert_text(rest);
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
    elements
}

fn assert_text(text: &str) {
    assert!(
        !text.contains('<') && !text.contains('>'),
        "raw markup in {text:?}"
    );
    for (i, _) in text.match_indices('&') {
        let entity = &text[i..text[i..].find(';').map_or(text.len(), |e| i + e + 1)];
        assert!(
            ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].contains(&entity),
            "bare & in {text:?}"
        );
    }
}

/// The values of attribute `name` in `markup`, in document order.
fn attribute_values<'s>(markup: &'s str, name: &str) -> Vec<&'s str> {
    let needle = format!(" {name}=\"");
    markup
        .match_indices(&needle)
        .map(|(i, _)| {
            let rest = &markup[i + needle.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect()
}

/// The markup of the linked points.
fn points_group(svg: &str) -> &str {
    let start = svg.find("<g class=\"points\"").expect("points group");
    let end = start + svg[start..].find("</g>").expect("points group closed");
    &svg[start..end]
}

fn circles_cy(svg: &str) -> Vec<i32> {
    let cy = attribute_values(points_group(svg), "cy");
    cy.iter().map(|v| v.parse().unwrap()).collect()
}

#[test]
fn every_finite_point_is_one_link_with_a_tooltip() {
    let mut points = series(&[96.1, 95.7, f64::NAN, 97.0, f64::INFINITY, 96.4]);
    points[5].value = f64::NEG_INFINITY;
    let svg = render(&points);
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<a ").count(), 3);
    assert_eq!(svg.matches("<circle ").count(), 3);
    let link = format!("<a href=\"/repos/demo/commits/0000000003{}\">", &SHA[10..]);
    assert!(svg.contains(&format!("{link}<title>0000000003: 97 ns</title>")));
    assert!(svg.contains("<title>0000000001: 95.7 ns</title>"));
}

#[test]
fn the_svg_scales_with_its_container_and_has_an_accessible_name() {
    let svg = render(&series(&[1.0, 2.0]));
    let root = &svg[..svg.find('>').unwrap()];
    assert!(root.contains("viewBox=\"0 0 800 320\""));
    assert!(root.contains("width=\"100%\""));
    assert!(root.contains("role=\"img\""));
    assert!(root.contains("aria-label=\"bus/steady/one_subscriber · time in ns: 2 commits\""));
    assert!(!svg.contains("<?xml"));
    assert!(
        svg.contains(">\nvalue (ns)\n</text>"),
        "y label names the unit"
    );
}

#[test]
fn sizes_are_drawn_in_a_readable_binary_prefix() {
    let mut points = series(&[4_718_592.0, 4_823_449.6, 27_262_976.0]);
    points[0].low = Some(4_194_304.0);
    points[0].high = Some(5_242_880.0);
    let levels = [Segment {
        from: 0,
        to: 1,
        level: 4_718_592.0,
    }];
    let chart = TrendChart::new("vm_scale/vms_3 · rss_per_vm", "B", &points)
        .with_size(800, 320)
        .with_segments(&levels)
        .with_baseline(3_145_728.0, "level before");
    let svg = render_trend_svg(&chart).unwrap();
    assert_well_formed(&svg);
    assert!(
        svg.contains(">\nvalue (MiB)\n</text>"),
        "the axis is in MiB"
    );
    assert!(
        svg.contains("<title>0000000000: 4.5 MiB (middle half 4 to 5 MiB)</title>"),
        "{svg}"
    );
    assert!(svg.contains("<title>0000000002: 26 MiB</title>"), "{svg}");
    assert!(
        svg.contains("level before: 3 MiB"),
        "the baseline is scaled too"
    );
    assert!(!svg.contains("4718592"), "no raw byte counts are drawn");
    let ns = render(&series(&[4_718_592.0, 4_823_449.6]));
    assert!(ns.contains("value (ms)"), "durations in their own steps");
}

#[test]
fn user_strings_are_escaped_everywhere() {
    let mut points = series(&[1.0, 2.0]);
    points[0].sha = "<script>alert('sha')</script>".into();
    points[1].sha = "a&b\u{1}c".into();
    let chart = TrendChart::new("<script>alert(\"title\")</script>", "\"'&<>", &points)
        .with_commit_links("/c/\"><script>alert(1)</script>");
    let svg = render_trend_svg(&chart).unwrap();
    assert_well_formed(&svg);
    assert!(!svg.contains("<script"));
    assert!(svg.contains("&lt;script&gt;alert(&quot;title&quot;)&lt;/script&gt;"));
    assert!(svg.contains(
        "href=\"/c/&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;script&gt;alert(&apos;sha"
    ));
    assert!(svg.contains("<title>&lt;script&gt;al: 1 &quot;&apos;&amp;&lt;&gt;</title>"));
    assert!(svg.contains("<title>a&amp;b\u{fffd}c: 2 "));
}

#[test]
fn links_that_could_run_script_are_neutralised() {
    assert_eq!(safe_href("javascript:alert(1)"), "#");
    assert_eq!(safe_href("JavaScript:alert(1)"), "#");
    assert_eq!(safe_href(" javascript:alert(1)"), "#");
    assert_eq!(safe_href("java\tscript:alert(1)"), "#");
    assert_eq!(safe_href("data:text/html,x"), "#");
    assert_eq!(
        safe_href("/repos/a/commits/b?x=y:z"),
        "/repos/a/commits/b?x=y:z"
    );
    assert_eq!(
        safe_href("https://git.example/c/1"),
        "https://git.example/c/1"
    );
    assert_eq!(safe_href("commits/abc"), "commits/abc");
    let points = series(&[1.0]);
    let chart = chart(&points).with_commit_links("javascript:alert(1)");
    assert!(render_trend_svg(&chart).unwrap().contains("<a href=\"#\">"));
}

#[test]
fn an_empty_series_says_no_data_yet() {
    for points in [vec![], series(&[f64::NAN, f64::INFINITY])] {
        let svg = render(&points);
        assert_well_formed(&svg);
        assert!(svg.contains(">no data yet</text>"));
        assert!(svg.contains("role=\"img\""));
        assert!(!svg.contains("<a "));
    }
}

#[test]
fn absurd_sizes_are_rejected() {
    let points = series(&[1.0]);
    for (width, height) in [
        (0, 300),
        (800, 0),
        (10_001, 300),
        (800, 20_000),
        (u32::MAX, 1),
    ] {
        let chart = TrendChart::new("t", "ns", &points).with_size(width, height);
        let err = render_trend_svg(&chart).unwrap_err();
        assert!(
            matches!(err, ChartError::InvalidSize { .. }),
            "{width}x{height}: {err}"
        );
    }
    for (width, height) in [(MIN_WIDTH, MIN_HEIGHT), (MAX_SIDE, MAX_SIDE)] {
        let chart = TrendChart::new("t", "ns", &points).with_size(width, height);
        assert_well_formed(&render_trend_svg(&chart).unwrap());
    }
}

#[test]
fn degenerate_series_render_valid_svg() {
    let cases: [&[f64]; 8] = [
        &[42.0],
        &[0.0],
        &[7.0; 20],
        &[1e-9, 1.1e-9, 0.9e-9],
        &[1e12, 1.05e12, 1e12],
        &[1e-320, 2e-320],
        &[-5.0, 5.0, 1e300],
        &[1e308, -1e308, 3.0],
    ];
    for values in cases {
        let svg = render(&series(values));
        assert_well_formed(&svg);
        let plottable = values.iter().filter(|v| v.abs() <= 1e300).count();
        assert_eq!(svg.matches("<a ").count(), plottable, "{values:?}");
    }
}

#[test]
fn positions_far_apart_or_huge_do_not_overflow() {
    let mut points = series(&[1.0, 2.0, 3.0]);
    points[1].position = 1 << 40;
    points[2].position = usize::MAX;
    let svg = render(&points);
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<a ").count(), 3);
}

#[test]
fn a_single_point_is_one_commit() {
    let svg = render(&series(&[42.0]));
    assert!(svg.contains("aria-label=\"bus/steady/one_subscriber · time in ns: 1 commit\""));
    assert!(svg.contains("<title>0000000000: 42 ns</title>"));
}

#[test]
fn a_five_percent_step_spans_most_of_the_plot() {
    let svg = render(&series(&[100.0, 100.0, 100.0, 105.0, 105.0, 105.0]));
    let cy = circles_cy(&svg);
    assert!(cy[0] - cy[5] > 320 / 2, "step too flat: {cy:?}");
}

#[test]
fn jitter_below_a_percent_is_not_blown_up() {
    let svg = render(&series(&[1000.0, 1000.1, 999.9, 1000.0]));
    let cy = circles_cy(&svg);
    let spread = cy.iter().max().unwrap() - cy.iter().min().unwrap();
    assert!(spread < 320 / 10, "jitter exaggerated: {cy:?}");
}

#[test]
fn whiskers_are_drawn_and_widen_the_range() {
    let plain = series(&[10.0, 11.0, 10.5]);
    let mut spread = plain.clone();
    spread[1].low = Some(8.0);
    spread[1].high = Some(14.0);
    spread[2].high = Some(f64::NAN);
    let (plain_svg, spread_svg) = (render(&plain), render(&spread));
    assert_well_formed(&spread_svg);
    // One whisker (a vertical line and two caps) and no whisker for a NaN bound.
    let whisker_strokes = |svg: &str| svg.matches("opacity=\"0.45\"").count();
    assert_eq!(whisker_strokes(&plain_svg), 0);
    assert_eq!(whisker_strokes(&spread_svg), 3);
    assert!(spread_svg.contains("<title>0000000001: 11 ns (middle half 8 to 14 ns)</title>"));
    let (plain_cy, spread_cy) = (circles_cy(&plain_svg), circles_cy(&spread_svg));
    assert!(spread_cy[0] - spread_cy[1] < plain_cy[0] - plain_cy[1]);
}

#[test]
fn points_are_plotted_in_history_order_whatever_the_input_order() {
    let sorted = series(&[3.0, 1.0, 4.0, 1.0, 5.0]);
    let reversed: Vec<TrendPoint> = sorted.iter().rev().cloned().collect();
    assert_eq!(render(&sorted), render(&reversed));
}

#[test]
fn axis_labels_tell_neighbouring_ticks_apart() {
    for (lo, hi) in [
        (0.99e12, 1.01e12),
        (0.9e-9, 1.1e-9),
        (95.0, 105.0),
        (-0.6, 0.6),
    ] {
        let format = AxisFormat::for_range(lo, hi, 6);
        let step = (hi - lo) / 6.0;
        let labels: Vec<String> = (0..=6)
            .map(|i| format.format(lo + step * i as f64))
            .collect();
        let mut unique = labels.clone();
        unique.dedup();
        assert_eq!(unique.len(), labels.len(), "{labels:?}");
    }
}

#[test]
fn escaping_leaves_plain_text_untouched() {
    let mut out = String::new();
    push_escaped(&mut out, "plain ascii and ünïcode\t\u{feff}\n");
    assert_eq!(out, "plain ascii and ünïcode\t\u{feff}\n");
    out.clear();
    push_escaped(&mut out, "\0a\u{fffe}b\u{ffff}\u{1f}<");
    assert_eq!(out, "\u{fffd}a\u{fffd}b\u{fffd}\u{fffd}&lt;");
}

fn median_render_time(count: usize, with_overlays: bool) -> Duration {
    let mut points: Vec<TrendPoint> = (0..count)
        .map(|i| {
            point(
                i,
                100.0 + (i % 17) as f64 * 0.3 + if i > count / 2 { 6.0 } else { 0.0 },
            )
        })
        .collect();
    for p in points.iter_mut().step_by(3) {
        (p.low, p.high) = (Some(p.value - 1.0), Some(p.value + 1.0));
    }
    let half = count / 2;
    let level = |i: usize| if i > half { 108.4 } else { 102.4 };
    let band: Vec<BandPoint> = (0..count)
        .map(|position| BandPoint {
            position,
            low: level(position) - 3.0,
            high: level(position) + 3.0,
        })
        .collect();
    let segments = [
        Segment {
            from: 0,
            to: half,
            level: level(0),
        },
        Segment {
            from: half + 1,
            to: count - 1,
            level: level(count),
        },
    ];
    let changes: Vec<ChangeMarker> = (0..10)
        .map(|i| ChangeMarker {
            position: count * i / 10,
            kind: MarkerKind::Regression,
            label: format!("+{i} % regression"),
            href: Some(format!("/repos/demo/regressions/{i}")),
        })
        .collect();
    let annotations: Vec<Annotation> = (0..5)
        .map(|i| Annotation {
            position: count * i / 5 + 3,
            label: format!("toolchain: rustc 1.9{i}"),
        })
        .collect();
    let mut chart = chart(&points);
    if with_overlays {
        chart = chart
            .with_band(&band)
            .with_segments(&segments)
            .with_changes(&changes)
            .with_annotations(&annotations)
            .with_baseline(104.0, "v1.4.0");
    }
    let mut times: Vec<Duration> = (0..15)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(render_trend_svg(&chart).unwrap());
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// Run with `cargo test --release -p kymo-server chart -- --ignored --nocapture`.
#[test]
#[ignore = "timing check; meaningful only in a release build"]
fn ten_thousand_points_render_well_under_thirty_milliseconds() {
    let budget = Duration::from_millis(if cfg!(debug_assertions) { 500 } else { 30 });
    for with_overlays in [false, true] {
        let thousand = median_render_time(1_000, with_overlays);
        let ten_thousand = median_render_time(10_000, with_overlays);
        println!(
            "median render (overlays: {with_overlays}): 1,000 points {thousand:?}, \
             10,000 points {ten_thousand:?}"
        );
        assert!(ten_thousand < budget);
    }
}

#[test]
fn commit_labels_are_evenly_spaced_and_name_the_newest_commit() {
    // 30 commits do not each get a label at 960 pixels: the labelled ones are a fixed number
    // of commits apart, counted back from the newest, with no uneven gap.
    let mut points = series(&[10.0; 30]);
    for point in &mut points {
        point.sha = format!("{:07}{}", point.position, &SHA[7..]);
    }
    let svg = render(&points);
    let xs: Vec<i64> = svg
        .split("<text x=\"")
        .skip(1)
        .filter(|t| t.contains("<tspan font-family=\"monospace\">"))
        .map(|t| t[..t.find('"').unwrap()].parse().unwrap())
        .collect();
    assert!(xs.len() >= 5 && xs.len() < 30, "{xs:?}");
    let gaps: Vec<i64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
    let (narrowest, widest) = (gaps.iter().min().unwrap(), gaps.iter().max().unwrap());
    assert!(widest - narrowest <= 2, "even spacing: {gaps:?}");
    let newest = format!("{:07}", 29);
    assert!(
        svg.contains(&format!("monospace\">{newest}</tspan>")),
        "{svg}"
    );
}

#[test]
fn the_x_axis_names_commits_by_short_sha_and_date() {
    let mut points = series(&[10.0, 11.0, 12.0]);
    for (i, point) in points.iter_mut().enumerate() {
        point.committed_at = Some(1_795_376_640 + i as i64 * 86_400);
    }
    let svg = render(&points);
    assert_well_formed(&svg);
    assert!(
        svg.contains("<tspan font-family=\"monospace\">0000000</tspan>"),
        "{svg}"
    );
    assert!(svg.contains(">2026-11-22</tspan>") && svg.contains(">2026-11-24</tspan>"));
    assert!(
        !svg.contains(">0</text>"),
        "no position numbers on the axis"
    );
    assert!(svg.contains("<title>0000000001, 2026-11-23: 11 ns</title>"));
}

#[test]
fn the_y_axis_is_in_the_unit_that_suits_the_values() {
    let svg = render(&series(&[400_000.0, 410_000.0, 420_000.0]));
    assert!(svg.contains("value (µs)"), "{svg}");
    assert!(svg.contains("\n410\n"), "labels in µs: {svg}");
    assert!(svg.contains("<title>0000000000: 400 µs</title>"));
}

#[test]
fn ten_thousand_commits_draw_no_more_points_than_pixels_and_keep_a_spike() {
    let mut values: Vec<f64> = (0..10_000).map(|i| 100.0 + (i % 13) as f64).collect();
    values[7_777] = 300.0;
    let points = series(&values);
    let svg = render(&points);
    assert_well_formed(&svg);
    let links = svg.matches("<a href=").count();
    assert!(links <= 800 / thin::PIXELS_PER_BUCKET, "{links} links");
    assert!(
        svg.contains(&format!("/repos/demo/commits/0000007777{}\"", &SHA[10..])),
        "the spike is linked"
    );
    assert!(svg.len() < 60_000, "{} bytes", svg.len());
    let small = render(&series(&values[..100]));
    assert!(
        small.matches("<a href=").count() == 100,
        "a short series is drawn whole"
    );
}

#[test]
fn commits_that_were_not_measured_leave_a_faint_gap_in_the_line() {
    let mut points = series(&[10.0, 11.0, 12.0, 11.0, 10.0]);
    points[3].position = 20;
    points[4].position = 21;
    let svg = render(&points);
    assert_well_formed(&svg);
    let solid = svg.matches("stroke-width=\"2\"").count();
    assert_eq!(solid, 2, "two measured runs: {svg}");
    let contiguous = render(&series(&[10.0, 11.0, 12.0, 11.0, 10.0]));
    assert_eq!(contiguous.matches("stroke-width=\"2\"").count(), 1);
}

#[test]
fn the_extremes_of_buckets_of_history_make_one_line_without_gaps() {
    // What a zoomed-out window reads from summaries: a bucket's lowest and highest points,
    // commits apart, with every commit between them measured.
    let points: Vec<TrendPoint> = (0..600)
        .map(|i| point(i * 50 + i % 2 * 17, 10.0 + (i % 2) as f64))
        .collect();
    let summarized = render_trend_svg(&chart(&points).drawn_from_summaries(true)).unwrap();
    assert_well_formed(&summarized);
    assert_eq!(
        summarized.matches("stroke-width=\"2\"").count(),
        1,
        "one line"
    );
    assert_eq!(summarized.matches("opacity=\"0.35\"").count(), 0, "no gaps");
    let raw = render(&points);
    assert!(
        raw.matches("opacity=\"0.35\"").count() > 100,
        "points apart are gaps"
    );
    assert!(
        summarized.len() * 2 < raw.len(),
        "{} against {}",
        summarized.len(),
        raw.len()
    );
}

#[test]
fn an_all_zero_series_has_no_negative_zero_on_its_axis() {
    let svg = render(&series(&[0.0, 0.0, 0.0]));
    assert!(!svg.contains("\n-0.0\n"), "{svg}");
    assert!(svg.contains("\n0.0\n"), "{svg}");
}
