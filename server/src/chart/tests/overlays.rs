use super::*;

/// 8 commits at 96 ± 1, then 8 at 101 ± 1: one regression at position 8.
const STEP: [f64; 16] = [
    96.0, 95.0, 97.0, 96.0, 96.5, 95.5, 96.0, 96.0, 101.0, 100.0, 102.0, 101.0, 101.0, 100.5,
    101.5, 101.0,
];

fn circles_cx(svg: &str) -> Vec<i32> {
    let cx = attribute_values(points_group(svg), "cx");
    cx.iter().map(|v| v.parse().unwrap()).collect()
}

/// The lines of `svg` that open an element with `class="{class}"` (each overlay item is one
/// line of markup).
fn lines_of_class<'s>(svg: &'s str, class: &str) -> Vec<&'s str> {
    let needle = format!("class=\"{class}\"");
    svg.lines().filter(|l| l.contains(&needle)).collect()
}

fn parse(value: &str) -> i32 {
    value.parse().unwrap()
}

fn band_around(values: &[f64], half_width: f64) -> Vec<BandPoint> {
    values
        .iter()
        .enumerate()
        .map(|(position, v)| BandPoint {
            position,
            low: v - half_width,
            high: v + half_width,
        })
        .collect()
}

fn step_levels() -> [f64; 16] {
    std::array::from_fn(|i| if i < 8 { 96.0 } else { 101.0 })
}

fn change(position: usize, kind: MarkerKind, label: &str, href: Option<&str>) -> ChangeMarker {
    ChangeMarker {
        position,
        kind,
        label: label.into(),
        href: href.map(Into::into),
    }
}

#[test]
fn a_chart_without_overlays_draws_none() {
    let svg = render(&series(&STEP));
    for class in ["levels", "baseline", "annotations", "changes"] {
        assert!(!svg.contains(&format!("class=\"{class}\"")), "{class}");
    }
    assert!(!svg.contains("<polygon"));
    assert!(svg.contains("aria-label=\"bus/steady/one_subscriber · time in ns: 16 commits\""));
}

#[test]
fn the_noise_band_is_one_faint_area_drawn_before_the_line() {
    let points = series(&STEP);
    let band = band_around(&step_levels(), 2.0);
    let svg = render_trend_svg(&chart(&points).with_band(&band)).unwrap();
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<polygon ").count(), 1);
    let polygon_at = svg
        .find("<polygon opacity=\"0.15\" fill=\"#1F77B4\"")
        .unwrap();
    let line_at = svg.find("stroke=\"#1F77B4\" stroke-width=\"2\"").unwrap();
    assert!(polygon_at < line_at, "band drawn over the line");
}

#[test]
fn the_band_steps_at_the_change_point_like_the_levels() {
    let points = series(&STEP);
    let band = band_around(&step_levels(), 2.0);
    let svg = render_trend_svg(&chart(&points).with_band(&band)).unwrap();
    let outline = attribute_values(&svg, "points")
        .into_iter()
        .find(|p| svg.contains(&format!("fill=\"#1F77B4\" points=\"{p}\"")))
        .unwrap();
    let vertices: Vec<(i32, i32)> = outline
        .split_whitespace()
        .map(|v| {
            let (x, y) = v.split_once(',').unwrap();
            (parse(x), parse(y))
        })
        .collect();
    // Each edge holds its level from the first commit to the change, steps there and holds
    // the new level to the last commit; the commits in between add no vertices.
    let cx = circles_cx(&svg);
    let xs: Vec<i32> = vertices.iter().map(|(x, _)| *x).collect();
    assert_eq!(
        xs,
        [cx[0], cx[8], cx[8], cx[15], cx[15], cx[8], cx[8], cx[0]]
    );
    let ys: Vec<i32> = vertices.iter().map(|(_, y)| *y).collect();
    assert!(
        ys[0] == ys[1] && ys[1] > ys[2] && ys[2] == ys[3],
        "{vertices:?}"
    );
    assert!(
        ys[4] == ys[5] && ys[5] < ys[6] && ys[6] == ys[7],
        "{vertices:?}"
    );
}

#[test]
fn the_band_breaks_where_an_edge_is_not_finite_and_ignores_input_order() {
    let points = series(&STEP);
    let mut band = band_around(&step_levels(), 2.0);
    band[5].high = f64::NAN;
    band[11].low = f64::INFINITY;
    band[13].low = f64::NEG_INFINITY;
    let svg = render_trend_svg(&chart(&points).with_band(&band)).unwrap();
    // Runs 0..=4, 6..=10 and 14..=15; position 12 alone has no width to fill.
    assert_eq!(svg.matches("<polygon ").count(), 3);
    band.reverse();
    let reversed = render_trend_svg(&chart(&points).with_band(&band)).unwrap();
    assert_eq!(svg, reversed);
}

#[test]
fn the_band_widens_the_range_by_at_most_half_the_data_span_each_way() {
    let points = series(&[100.0, 110.0, 105.0]);
    let plain = circles_cy(&render(&points));
    let near = band_around(&[105.0; 3], 8.0);
    let near_cy = circles_cy(&render_trend_svg(&chart(&points).with_band(&near)).unwrap());
    assert!(
        near_cy[0] - near_cy[1] < plain[0] - plain[1],
        "band ignored"
    );
    // The data spans 100 to 110, so the band counts up to 95 to 115 and is cut beyond.
    let reach = band_around(&[105.0; 3], 10.0);
    let far = band_around(&[105.0; 3], 1e6);
    let reach_svg = render_trend_svg(&chart(&points).with_band(&reach)).unwrap();
    // The annotation's line spans the plot's height.
    let annotation = [Annotation {
        position: 0,
        label: String::new(),
    }];
    let far_chart = chart(&points).with_band(&far).with_annotations(&annotation);
    let far_svg = render_trend_svg(&far_chart).unwrap();
    assert_eq!(circles_cy(&reach_svg), circles_cy(&far_svg));
    let line = lines_of_class(&far_svg, "annotation")[0];
    let (top, bottom) = (
        parse(attribute_values(line, "y1")[0]),
        parse(attribute_values(line, "y2")[0]),
    );
    let outline = far_svg
        .lines()
        .find(|l| l.starts_with("<polygon "))
        .unwrap();
    let ys: Vec<i32> = attribute_values(outline, "points")[0]
        .split_whitespace()
        .map(|v| parse(v.split_once(',').unwrap().1))
        .collect();
    // plotters cuts elements at its plotting area, whose last row is one below the range's end.
    let expected = [top, top, bottom + 1, bottom + 1];
    assert_eq!(ys, expected, "not cut at the frame");
}

#[test]
fn segments_draw_a_step_line_through_the_fitted_levels() {
    let points = series(&STEP);
    let segments = [
        Segment {
            from: 8,
            to: 15,
            level: 101.0,
        },
        Segment {
            from: 0,
            to: 7,
            level: 96.0,
        },
    ];
    let svg = render_trend_svg(&chart(&points).with_segments(&segments)).unwrap();
    assert_well_formed(&svg);
    let levels = lines_of_class(&svg, "level");
    assert_eq!(levels.len(), 1, "one joined step line");
    let (cx, cy) = (circles_cx(&svg), circles_cy(&svg));
    // Points 0 and 8 lie exactly on their segment's level.
    let expected = format!(
        "{x0},{y0} {x7},{y0} {x8},{y0} {x8},{y8} {x15},{y8} ",
        x0 = cx[0],
        x7 = cx[7],
        x8 = cx[8],
        x15 = cx[15],
        y0 = cy[0],
        y8 = cy[8],
    );
    assert_eq!(attribute_values(levels[0], "points"), [expected.as_str()]);
    assert!(svg.contains("<g class=\"levels\" fill=\"none\" stroke=\"#444444\""));
}

#[test]
fn off_scale_or_overlapping_segments_break_the_step_line() {
    let points = series(&STEP);
    let segment = |from, to, level| Segment { from, to, level };
    let cases: [(&[Segment], usize); 4] = [
        (
            &[
                segment(0, 3, 96.0),
                segment(4, 5, 1e9),
                segment(6, 15, 101.0),
            ],
            2,
        ),
        (
            &[
                segment(0, 3, 96.0),
                segment(4, 5, f64::NAN),
                segment(6, 15, 101.0),
            ],
            2,
        ),
        (&[segment(0, 9, 96.0), segment(8, 15, 101.0)], 2),
        // Outside the commits shown: left out without breaking the line.
        (
            &[
                segment(0, 7, 96.0),
                segment(40, 50, 1e9),
                segment(15, 8, 101.0),
            ],
            1,
        ),
    ];
    for (segments, lines) in cases {
        let svg = render_trend_svg(&chart(&points).with_segments(segments)).unwrap();
        assert_well_formed(&svg);
        assert_eq!(lines_of_class(&svg, "level").len(), lines, "{segments:?}");
    }
}

#[test]
fn change_markers_are_coloured_dashed_lines_at_their_commit() {
    let points = series(&[5.0; 20]);
    let changes = [
        change(
            5,
            MarkerKind::Regression,
            "+12.3 % regression",
            Some("/repos/demo/regressions/7"),
        ),
        change(12, MarkerKind::Improvement, "-4 % improvement", None),
        change(25, MarkerKind::Regression, "beyond the commits shown", None),
    ];
    let svg = render_trend_svg(&chart(&points).with_changes(&changes)).unwrap();
    assert_well_formed(&svg);
    let cx = circles_cx(&svg);
    let regressions = lines_of_class(&svg, "change regression");
    let improvements = lines_of_class(&svg, "change improvement");
    assert_eq!((regressions.len(), improvements.len()), (1, 1));
    let (regression, improvement) = (regressions[0], improvements[0]);
    assert!(regression.contains("stroke=\"#D62728\" fill=\"#D62728\""));
    assert!(improvement.contains("stroke=\"#2CA02C\" fill=\"#2CA02C\""));
    for (markup, x) in [(regression, cx[5]), (improvement, cx[12])] {
        assert_eq!(attribute_values(markup, "x1"), [x.to_string()]);
        assert_eq!(attribute_values(markup, "x2"), [x.to_string()]);
        assert_eq!(attribute_values(markup, "stroke-dasharray").len(), 1);
        let path = attribute_values(markup, "d")[0];
        assert!(path.starts_with(&format!("M{} ", x - 6)), "{path}");
    }
    assert!(
        regression.contains(
            "<a href=\"/repos/demo/regressions/7\"><title>+12.3 % regression</title><path "
        )
    );
    assert!(!improvement.contains("<a "));
    assert!(improvement.contains("<g><title>-4 % improvement</title><path "));
    assert!(!svg.contains("beyond the commits shown"));
    assert!(svg.contains("time in ns: 20 commits, 1 regression, 1 improvement\""));
}

#[test]
fn overlays_lie_over_the_points_but_let_the_pointer_through_their_lines() {
    let points = series(&STEP);
    let segments = [Segment {
        from: 0,
        to: 15,
        level: 98.0,
    }];
    let changes = [change(8, MarkerKind::Regression, "r", Some("/r"))];
    let annotations = [Annotation {
        position: 3,
        label: "a".into(),
    }];
    let chart = chart(&points)
        .with_segments(&segments)
        .with_changes(&changes)
        .with_annotations(&annotations)
        .with_baseline(97.0, "b");
    let svg = render_trend_svg(&chart).unwrap();
    let points_at = svg.find("<g class=\"points\"").unwrap();
    for class in ["levels", "baseline", "annotations", "changes"] {
        let at = svg.find(&format!("<g class=\"{class}\"")).unwrap();
        assert!(at > points_at, "{class} under the points");
    }
    let levels = lines_of_class(&svg, "levels")[0];
    assert!(levels.contains(" pointer-events=\"none\">"));
    // The baseline's, the annotation's and the change's line (plotters' start `<line opacity`).
    let lines: Vec<&str> = svg
        .split("<line x1=")
        .skip(1)
        .map(|l| &l[..l.find("/>").unwrap()])
        .collect();
    assert_eq!(lines.len(), 3);
    assert!(lines.iter().all(|l| l.contains(" pointer-events=\"none\"")));
}

#[test]
fn a_change_without_a_label_is_named_by_its_kind() {
    let points = series(&[5.0; 4]);
    let changes = [change(2, MarkerKind::Improvement, "", None)];
    let svg = render_trend_svg(&chart(&points).with_changes(&changes)).unwrap();
    assert!(svg.contains("<title>improvement</title>"));
}

#[test]
fn annotations_are_grey_lines_with_a_marker_at_the_bottom() {
    let points = series(&STEP);
    let annotations = [
        Annotation {
            position: 3,
            label: "toolchain: rustc 1.95 → 1.96".into(),
        },
        Annotation {
            position: 99,
            label: "beyond the commits shown".into(),
        },
    ];
    let svg = render_trend_svg(&chart(&points).with_annotations(&annotations)).unwrap();
    assert_well_formed(&svg);
    let annotations = lines_of_class(&svg, "annotation");
    assert_eq!(annotations.len(), 1);
    let markup = annotations[0];
    assert!(markup.starts_with("<g class=\"annotation\"><title>toolchain: rustc 1.95 → 1.96"));
    assert!(svg.contains("<g class=\"annotations\" stroke=\"#8C8C8C\">"));
    let x = circles_cx(&svg)[3].to_string();
    assert_eq!(attribute_values(markup, "x1"), [x.as_str()]);
    assert_eq!(attribute_values(markup, "cx"), [x.as_str()]);
    assert!(attribute_values(markup, "stroke-dasharray").is_empty());
    let marker_y = parse(attribute_values(markup, "cy")[0]);
    assert!(circles_cy(&svg).iter().all(|&y| y < marker_y));
    assert!(parse(attribute_values(markup, "y2")[0]) > marker_y);
}

#[test]
fn the_baseline_is_a_dashed_line_at_its_value_labelled_at_the_right() {
    let points = series(&[100.0, 110.0, 105.0, 100.0]);
    let svg = render_trend_svg(&chart(&points).with_baseline(105.0, "v1.4.0")).unwrap();
    assert_well_formed(&svg);
    let markup = lines_of_class(&svg, "baseline")[0];
    assert!(markup.contains("<title>v1.4.0: 105 ns</title>"));
    assert!(markup.contains("stroke=\"#9467BD\""));
    let y = circles_cy(&svg)[2].to_string();
    assert_eq!(attribute_values(markup, "y1"), [y.as_str()]);
    assert_eq!(attribute_values(markup, "y2"), [y.as_str()]);
    assert_eq!(attribute_values(markup, "stroke-dasharray").len(), 1);
    let right = parse(attribute_values(markup, "x2")[0]);
    assert!(right > *circles_cx(&svg).last().unwrap());
    assert_eq!(attribute_values(markup, "x")[0], (right - 4).to_string());
    assert_eq!(attribute_values(markup, "text-anchor"), ["end"]);
    assert!(markup.contains(">v1.4.0</text>"));
}

#[test]
fn a_baseline_within_half_the_data_span_widens_the_range() {
    let points = series(&[100.0, 110.0]);
    let plain = circles_cy(&render(&points));
    let svg = render_trend_svg(&chart(&points).with_baseline(114.0, "target")).unwrap();
    let cy = circles_cy(&svg);
    assert!(cy[0] - cy[1] < plain[0] - plain[1]);
    let line_y = parse(attribute_values(lines_of_class(&svg, "baseline")[0], "y1")[0]);
    assert!(line_y < cy[1]);
}

#[test]
fn a_far_baseline_keeps_the_range_and_is_named_at_the_edge() {
    let points = series(&[100.0, 110.0]);
    let plain = circles_cy(&render(&points));
    for (value, arrow) in [(116.0, "↑"), (1e6, "↑"), (84.0, "↓"), (-1e300, "↓")] {
        let svg = render_trend_svg(&chart(&points).with_baseline(value, "v1")).unwrap();
        assert_well_formed(&svg);
        assert_eq!(circles_cy(&svg), plain, "{value}");
        let markup = lines_of_class(&svg, "baseline")[0];
        assert!(!markup.contains("<line"), "{value}");
        assert!(markup.contains(&format!(">{arrow} v1</text>")), "{value}");
    }
    let svg = render_trend_svg(&chart(&points).with_baseline(f64::NAN, "v1")).unwrap();
    assert!(lines_of_class(&svg, "baseline").is_empty());
}

#[test]
fn a_long_baseline_label_is_shortened_but_whole_in_its_tooltip() {
    let points = series(&[100.0, 110.0]);
    let label = "é".repeat(60);
    let svg = render_trend_svg(&chart(&points).with_baseline(105.0, &label)).unwrap();
    assert!(svg.contains(&format!(">{}…</text>", "é".repeat(48))));
    assert!(svg.contains(&format!("<title>{label}: 105 ns</title>")));
}

#[test]
fn overlay_labels_and_links_are_escaped() {
    let points = series(&STEP);
    let hostile = "<script>alert(\"x\")</script> & 'y'\u{1}";
    let escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &apos;y&apos;\u{fffd}";
    let changes = [
        change(
            8,
            MarkerKind::Regression,
            hostile,
            Some("/r/\"><script>alert(1)</script>"),
        ),
        change(
            4,
            MarkerKind::Improvement,
            hostile,
            Some("javascript:alert(1)"),
        ),
    ];
    let annotations = [Annotation {
        position: 2,
        label: hostile.into(),
    }];
    let chart = chart(&points)
        .with_changes(&changes)
        .with_annotations(&annotations)
        .with_baseline(98.0, hostile);
    let svg = render_trend_svg(&chart).unwrap();
    assert_well_formed(&svg);
    assert!(!svg.contains("<script"));
    assert!(!svg.contains("javascript:"));
    assert!(svg.contains("<a href=\"/r/&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\">"));
    assert!(svg.contains("<a href=\"#\">"));
    assert_eq!(svg.matches(&format!("<title>{escaped}</title>")).count(), 3);
    assert!(svg.contains(&format!("<title>{escaped}: 98 ns</title>")));
    assert!(svg.contains(&format!(">{escaped}</text>")));
}

#[test]
fn everything_together_stays_well_formed_on_degenerate_series() {
    let band = band_around(&[1.0; 3], 0.5);
    let segments = [Segment {
        from: 0,
        to: usize::MAX,
        level: 1.0,
    }];
    let changes = [change(0, MarkerKind::Regression, "r", Some("/x"))];
    let annotations = [Annotation {
        position: usize::MAX,
        label: "far".into(),
    }];
    for values in [&[1.0][..], &[1.0, 1.0, 1.0], &[1e-300, 1e300]] {
        let points = series(values);
        let chart = chart(&points)
            .with_band(&band)
            .with_segments(&segments)
            .with_changes(&changes)
            .with_annotations(&annotations)
            .with_baseline(1.0, "b");
        let svg = render_trend_svg(&chart).unwrap();
        assert_well_formed(&svg);
        assert_eq!(lines_of_class(&svg, "change regression").len(), 1);
    }
    let chart = chart(&[]).with_changes(&changes).with_baseline(1.0, "b");
    assert!(
        render_trend_svg(&chart)
            .unwrap()
            .contains(">no data yet</text>")
    );
}
