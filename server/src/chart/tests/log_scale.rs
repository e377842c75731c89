use super::*;

/// A 50× step with 10 % jitter on each level: linear, the jitter of the low level is flattened.
const BIG_STEP: [f64; 8] = [40.0, 44.0, 40.0, 44.0, 2000.0, 2200.0, 2000.0, 2200.0];

fn render_log(points: &[TrendPoint]) -> String {
    render_trend_svg(&chart(points).with_y_scale(YScale::Log)).expect("renders")
}

#[test]
fn on_a_log_axis_equal_ratios_are_equal_heights_on_both_sides_of_a_big_step() {
    let points = series(&BIG_STEP);
    let log = circles_cy(&render_log(&points));
    let low_jitter = (log[0] - log[1]).abs();
    let high_jitter = (log[4] - log[5]).abs();
    assert!(low_jitter >= 5, "the low level's 10 % is visible: {log:?}");
    assert!(
        (low_jitter - high_jitter).abs() <= 1,
        "10 % is as tall below the step as above it: {log:?}"
    );

    let linear = circles_cy(&render(&points));
    assert!(
        (linear[0] - linear[1]).abs() <= 1,
        "linear, the low level is flat: {linear:?}"
    );
}

#[test]
fn the_log_axis_says_so_and_is_labelled_on_round_values() {
    let svg = render_log(&series(&BIG_STEP));
    assert_well_formed(&svg);
    assert!(svg.contains("log scale"), "the axis says it is logarithmic");
    // 40 ns to 2.2 µs: labels on 1-2-5 multiples, written in the unit that suits them.
    assert!(
        svg.contains("(µs), log scale"),
        "unit and scale in the axis title"
    );
    for label in ["0.05", "0.1", "0.2", "0.5", "1", "2"] {
        let text = format!(">\n{label}\n");
        assert!(svg.contains(&text), "label {label} missing");
    }
}

#[test]
fn values_a_log_axis_cannot_draw_are_left_out() {
    let points = series(&[0.0, -3.0, 10.0, 100.0]);
    let svg = render_log(&points);
    assert_well_formed(&svg);
    assert_eq!(
        circles_cy(&svg).len(),
        2,
        "zero and negative values are not drawn"
    );
    let none = render_log(&series(&[0.0, -1.0]));
    assert!(
        none.contains("no data yet"),
        "nothing drawable: {none:.200}"
    );
}
