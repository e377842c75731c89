//! Properties of the statistics checked on generated input (proptest): what must hold for any
//! finite data, not only for the hand-picked series of the unit tests. A failing case is
//! shrunk and printed; add it to the unit tests when it reveals a bug.

use proptest::prelude::*;

use super::mann_whitney::mann_whitney;
use super::robust::median;
use super::{
    CommitObservation, Direction, FAST_END_MIN_SAMPLES, Sensitivity, VerdictKind, compare,
    detect_change_points, noise_model,
};

/// Any finite number, from subnormals to `f64::MAX`, of either sign.
fn any_finite() -> impl Strategy<Value = f64> {
    any::<f64>().prop_filter("finite", |v| v.is_finite())
}

/// Measurement-like numbers: positive, with ties (small integers) mixed in.
fn measurement() -> impl Strategy<Value = f64> {
    prop_oneof![1.0..1e6f64, (1u32..20).prop_map(f64::from)]
}

fn observations(values: &[f64]) -> Vec<CommitObservation> {
    (values.iter().enumerate())
        .map(|(i, v)| CommitObservation::new(i, *v))
        .collect()
}

/// Regression and improvement swap when what is better swaps; the rest stays.
fn mirrored(kind: VerdictKind) -> VerdictKind {
    match kind {
        VerdictKind::Regression => VerdictKind::Improvement,
        VerdictKind::Improvement => VerdictKind::Regression,
        other => other,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mann_whitney_p_is_a_probability_and_symmetric(
        a in prop::collection::vec(measurement(), 0..40),
        b in prop::collection::vec(measurement(), 0..40),
    ) {
        let ab = mann_whitney(&a, &b);
        let ba = mann_whitney(&b, &a);
        prop_assert!((0.0..=1.0).contains(&ab.p_value), "p = {}", ab.p_value);
        prop_assert!((ab.p_value - ba.p_value).abs() < 1e-12, "{} vs {}", ab.p_value, ba.p_value);
        // U counts the pairs where a wins; the two directions share all pairs.
        let pairs = (a.len() * b.len()) as f64;
        prop_assert!((ab.u + ba.u - pairs).abs() < 1e-9);
    }

    #[test]
    fn mann_whitney_depends_only_on_ranks(
        a in prop::collection::vec(0u32..1000, 1..30),
        b in prop::collection::vec(0u32..1000, 1..30),
        shift in -1000i32..1000,
        scale in 1u32..64,
    ) {
        // Integer data, shifted and scaled exactly: the ranks, so U and p, cannot change.
        let plain = |v: &[u32]| v.iter().map(|x| f64::from(*x)).collect::<Vec<_>>();
        let moved = |v: &[u32]| {
            v.iter().map(|x| f64::from(*x) * f64::from(scale) + f64::from(shift)).collect::<Vec<_>>()
        };
        let before = mann_whitney(&plain(&a), &plain(&b));
        let after = mann_whitney(&moved(&a), &moved(&b));
        prop_assert_eq!(before, after);
    }

    #[test]
    fn mann_whitney_never_panics_on_extreme_finite_values(
        a in prop::collection::vec(any_finite(), 0..20),
        b in prop::collection::vec(any_finite(), 0..20),
    ) {
        let test = mann_whitney(&a, &b);
        prop_assert!((0.0..=1.0).contains(&test.p_value), "p = {}", test.p_value);
    }

    #[test]
    fn the_median_lies_between_the_extremes_and_follows_a_shift(
        values in prop::collection::vec(-1e9..1e9f64, 1..50),
        shift in -1e3..1e3f64,
    ) {
        let m = median(&values);
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        prop_assert!(lo <= m && m <= hi);
        let shifted: Vec<f64> = values.iter().map(|v| v + shift).collect();
        prop_assert!((median(&shifted) - (m + shift)).abs() <= 1e-6 * (1.0 + m.abs()));
    }

    #[test]
    fn the_noise_model_is_finite_non_negative_and_scales_with_the_data(
        values in prop::collection::vec(measurement(), 0..80),
        exponent in -20i32..20,
    ) {
        let model = noise_model(&observations(&values));
        for x in [model.level, model.between_commit_sd, model.between_commit_pct] {
            prop_assert!(x.is_finite() && x >= 0.0, "{model:?}");
        }
        // A power of two scales exactly, so the model must scale exactly too.
        let k = 2f64.powi(exponent);
        let scaled: Vec<f64> = values.iter().map(|v| v * k).collect();
        let other = noise_model(&observations(&scaled));
        prop_assert_eq!(other.level, model.level * k);
        // Logarithms of positive series scale up to rounding.
        let expected = model.between_commit_sd * k;
        prop_assert!((other.between_commit_sd - expected).abs() <= 1e-9 * expected, "{other:?}");
        prop_assert_eq!(other.changes, model.changes);
    }

    #[test]
    fn a_constant_series_has_no_change_points(value in any_finite(), n in 0usize..300) {
        let series = observations(&vec![value; n]);
        for direction in [Direction::Lower, Direction::Higher] {
            let found = detect_change_points(&series, direction, &Sensitivity::default());
            prop_assert!(found.is_empty(), "{found:?}");
        }
    }

    #[test]
    fn change_points_are_finite_and_in_range_for_any_finite_series(
        values in prop::collection::vec(any_finite(), 0..200),
    ) {
        let found = detect_change_points(&observations(&values), Direction::Lower, &Sensitivity::default());
        for cp in found {
            prop_assert!(cp.position > 0 && cp.position < values.len(), "{cp:?}");
            prop_assert!((0.0..=1.0).contains(&cp.p_value), "{cp:?}");
            for x in [cp.before, cp.after, cp.change_pct, cp.ci_low_pct, cp.ci_high_pct, cp.noise_pct] {
                prop_assert!(x.is_finite(), "{cp:?}");
            }
        }
    }

    #[test]
    fn change_points_do_not_depend_on_the_unit(
        values in prop::collection::vec(measurement(), 0..150),
        step_at in 0usize..150,
        step in 0.5..3.0f64,
        exponent in -30i32..30,
    ) {
        // Half the series with a step (when it falls inside), so that changes are found too.
        let series: Vec<f64> = values.iter().enumerate()
            .map(|(i, v)| if i >= step_at { v * step } else { *v })
            .collect();
        let k = 2f64.powi(exponent);
        let scaled: Vec<f64> = series.iter().map(|v| v * k).collect();
        let sensitivity = Sensitivity::default();
        let summary = |s: &[f64], d| -> Vec<(usize, VerdictKind)> {
            detect_change_points(&observations(s), d, &sensitivity)
                .into_iter().map(|c| (c.position, c.kind)).collect()
        };
        let plain = summary(&series, Direction::Lower);
        prop_assert_eq!(&plain, &summary(&scaled, Direction::Lower));
        let higher: Vec<_> = summary(&series, Direction::Higher).into_iter()
            .map(|(p, k)| (p, mirrored(k))).collect();
        prop_assert_eq!(plain, higher);
    }

    #[test]
    fn verdicts_do_not_depend_on_the_unit_and_mirror_with_direction(
        history in prop::collection::vec(measurement(), 0..40),
        base in prop::collection::vec(measurement(), 0..20),
        head in prop::collection::vec(measurement(), 0..20),
        exponent in -30i32..30,
    ) {
        let k = 2f64.powi(exponent);
        let times = |v: &[f64]| v.iter().map(|x| x * k).collect::<Vec<_>>();
        let noise = noise_model(&observations(&history));
        let scaled_noise = noise_model(&observations(&times(&history)));
        let s = Sensitivity::default();
        let lower = compare(&base, &head, Direction::Lower, &noise, &s);
        let scaled = compare(&times(&base), &times(&head), Direction::Lower, &scaled_noise, &s);
        let higher = compare(&base, &head, Direction::Higher, &noise, &s);
        prop_assert_eq!(lower.kind, scaled.kind);
        prop_assert!((lower.change_pct - scaled.change_pct).abs() <= 1e-9 * (1.0 + lower.change_pct.abs()));
        // Runs of many samples stand for their better end, which depends on the direction.
        if base.len() < FAST_END_MIN_SAMPLES && head.len() < FAST_END_MIN_SAMPLES {
            prop_assert_eq!(mirrored(lower.kind), higher.kind);
        }
        for x in [lower.change_pct, lower.ci_low_pct, lower.ci_high_pct, lower.noise_pct, lower.threshold_pct] {
            prop_assert!(x.is_finite(), "{lower:?}");
        }
        prop_assert!(lower.p_value.is_none_or(|p| (0.0..=1.0).contains(&p)), "{lower:?}");
    }

    #[test]
    fn verdicts_are_finite_for_any_finite_input(
        base in prop::collection::vec(any_finite(), 0..12),
        head in prop::collection::vec(any_finite(), 0..12),
        history in prop::collection::vec(any_finite(), 0..30),
    ) {
        let noise = noise_model(&observations(&history));
        let v = compare(&base, &head, Direction::Lower, &noise, &Sensitivity::default());
        for x in [v.change_pct, v.ci_low_pct, v.ci_high_pct, v.noise_pct, v.threshold_pct] {
            prop_assert!(x.is_finite(), "{v:?}");
        }
        prop_assert!(v.p_value.is_none_or(|p| (0.0..=1.0).contains(&p)), "{v:?}");
    }
}
