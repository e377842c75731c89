//! Unit and property tests of change-point detection, on seeded synthetic series.

use super::*;
use crate::stats::synthetic::{Rng, noisy, step};

fn detect(series: &[CommitObservation]) -> Vec<ChangePoint> {
    detect_change_points(series, Direction::Lower, &Sensitivity::default())
}

fn values(values: &[f64]) -> Vec<CommitObservation> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| CommitObservation::new(i, v))
        .collect()
}

#[test]
fn clean_noisy_series_have_no_change_points() {
    let mut rng = Rng::new(100);
    let mut found = 0;
    for _ in 0..150 {
        let cv = rng.range(0.005, 0.1);
        found += detect(&noisy(&mut rng, 400, 1000.0, cv)).len();
    }
    // 60,000 clean commits; the target is at most one false alarm per 1,000.
    assert!(found <= 6, "{found} false change points");
}

#[test]
fn a_ten_percent_step_at_three_sigma_is_found_where_it_happened() {
    let mut rng = Rng::new(101);
    let mut hits = 0;
    for _ in 0..100 {
        let mut series = noisy(&mut rng, 300, 500.0, 0.10 / 3.0);
        step(&mut series, 150, 0.10);
        let found = detect(&series);
        if let [only] = found.as_slice()
            && only.position.abs_diff(150) <= 3
            && only.kind == VerdictKind::Regression
        {
            hits += 1;
        }
    }
    assert!(hits >= 95, "found exactly the step in {hits}/100 series");
}

#[test]
fn the_evidence_describes_the_step() {
    let mut rng = Rng::new(102);
    let mut series = noisy(&mut rng, 200, 100.0, 0.01);
    step(&mut series, 120, 0.10);
    let found = detect(&series);
    assert_eq!(found.len(), 1, "{found:?}");
    let c = &found[0];
    assert_eq!(c.position, 120);
    assert!(
        (c.before - 100.0).abs() < 1.0 && (c.after - 110.0).abs() < 1.0,
        "{c:?}"
    );
    assert!((c.change_pct - 10.0).abs() < 1.0);
    assert!(
        c.ci_low_pct < 10.0 && 10.0 < c.ci_high_pct && c.ci_low_pct > 8.0,
        "{c:?}"
    );
    assert!(c.p_value < 1e-10);
    assert!((c.noise_pct - 1.41).abs() < 0.4, "{c:?}");
    assert_eq!((c.segment_before, c.segment_after), (120, 80));
    assert_eq!((c.evidence_before, c.evidence_after), (50, 50));
}

#[test]
fn spikes_that_revert_are_outliers_not_change_points() {
    let mut rng = Rng::new(103);
    let mut elsewhere = 0;
    for length in 1..=3 {
        for _ in 0..40 {
            let mut series = noisy(&mut rng, 200, 100.0, 0.01);
            let at = 60 + (rng.uniform() * 80.0) as usize;
            let size = if rng.uniform() < 0.5 { 1.5 } else { 0.5 };
            for o in &mut series[at..at + length] {
                o.value *= size;
            }
            let found = detect(&series);
            let near = |c: &&ChangePoint| c.position + 5 >= at && c.position <= at + length + 5;
            assert!(
                !found.iter().any(|c| near(&c)),
                "spike of {length} at {at}: {found:?}"
            );
            elsewhere += found.len();
        }
    }
    // 24,000 commits: an unrelated false alarm is allowed, as in clean series.
    assert!(
        elsewhere <= 2,
        "{elsewhere} false change points away from the spikes"
    );
}

#[test]
fn a_slow_drift_is_one_change_over_a_range_from_where_it_started() {
    let mut rng = Rng::new(104);
    for _ in 0..30 {
        let mut series = noisy(&mut rng, 200, 100.0, 0.02);
        for (i, o) in series.iter_mut().enumerate().skip(80) {
            o.value *= 1.0 + 0.2 * ((i - 80) as f64 / 40.0).min(1.0);
        }
        let found = detect(&series);
        let [drift] = found.as_slice() else {
            panic!("one drift expected: {found:?}");
        };
        // The ramp runs over commits 80..=119 (the first at +0.5 %, the last at +20 %).
        assert!(drift.position.abs_diff(80) <= 5, "{drift:?}");
        assert!(drift.span.abs_diff(40) <= 10, "{drift:?}");
        assert_eq!(drift.method, "seeded-segmentation+mann-whitney+ramp");
        assert_eq!(drift.kind, VerdictKind::Regression);
        // The levels either side of the ramp, not of its halves.
        assert!((drift.change_pct - 20.0).abs() < 2.5, "{drift:?}");
    }
}

#[test]
fn a_step_is_not_reported_as_a_drift() {
    let mut rng = Rng::new(106);
    for _ in 0..50 {
        let cv = rng.range(0.005, 0.05);
        let mut series = noisy(&mut rng, 200, 100.0, cv);
        step(&mut series, 100, 5.0 * cv);
        for c in detect(&series) {
            assert_eq!(c.span, 1, "{c:?}");
        }
    }
}

#[test]
fn direction_flips_regressions_and_improvements() {
    let mut rng = Rng::new(105);
    let mut series = noisy(&mut rng, 100, 100.0, 0.01);
    step(&mut series, 50, -0.2);
    let lower = detect_change_points(&series, Direction::Lower, &Sensitivity::default());
    let higher = detect_change_points(&series, Direction::Higher, &Sensitivity::default());
    assert_eq!(lower[0].kind, VerdictKind::Improvement);
    assert_eq!(higher[0].kind, VerdictKind::Regression);
    assert_eq!(lower[0].position, higher[0].position);
}

#[test]
fn a_regression_fixed_later_gives_two_change_points() {
    let mut rng = Rng::new(106);
    let mut series = noisy(&mut rng, 1000, 100.0, 0.01);
    step(&mut series, 500, 0.05);
    step(&mut series, 530, -0.05 / 1.05);
    let found = detect(&series);
    let positions: Vec<usize> = found.iter().map(|c| c.position).collect();
    assert_eq!(positions.len(), 2, "{found:?}");
    assert!(positions[0].abs_diff(500) <= 2 && positions[1].abs_diff(530) <= 2);
    assert_eq!(found[0].kind, VerdictKind::Regression);
    assert_eq!(found[1].kind, VerdictKind::Improvement);
}

#[test]
fn a_new_level_is_reported_once_it_lasts_min_segment_len_commits() {
    let mut rng = Rng::new(107);
    let mut series = noisy(&mut rng, 100, 100.0, 0.005);
    series.extend((100..104).map(|i| CommitObservation::new(i, 130.0)));
    assert!(
        detect(&series).is_empty(),
        "four commits are not a segment yet"
    );
    series.push(CommitObservation::new(104, 130.0));
    let found = detect(&series);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].position, 100);
}

#[test]
fn bimodal_noise_raises_no_false_alarms() {
    let mut rng = Rng::new(108);
    let mut found = 0;
    for _ in 0..60 {
        let upper = rng.range(0.1, 0.5);
        let gap = rng.range(0.02, 0.08);
        let series: Vec<CommitObservation> = (0..400)
            .map(|i| {
                let mode = if rng.uniform() < upper {
                    1.0 + gap
                } else {
                    1.0
                };
                CommitObservation::new(i, 100.0 * mode * (1.0 + 0.005 * rng.normal()))
            })
            .collect();
        found += detect(&series).len();
    }
    assert!(
        found <= 3,
        "{found} false change points in 24,000 bimodal commits"
    );
}

#[test]
fn degenerate_inputs_behave() {
    assert!(detect(&[]).is_empty());
    assert!(detect(&values(&[1.0])).is_empty());
    assert!(detect(&values(&[3.0; 500])).is_empty());
    assert!(detect(&values(&[0.0; 50])).is_empty());
    // A deterministic metric (no noise at all) with one step: exactly that step.
    let mut exact = vec![1000.0; 60];
    exact.extend([1100.0; 60]);
    let found = detect(&values(&exact));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].position, found[0].change_pct), (60, 10.0));
    // A change smaller than min_effect_pct is not reported, however certain.
    let mut tiny = vec![1000.0; 60];
    tiny.extend([1001.0; 60]);
    assert!(detect(&values(&tiny)).is_empty());
}

#[test]
fn extreme_magnitudes_and_signs_behave() {
    for level in [1e300, 1e-300, -50.0] {
        let mut rng = Rng::new(109);
        let mut series = noisy(&mut rng, 120, level, 0.01);
        step(&mut series, 60, 0.2);
        let found = detect(&series);
        assert_eq!(found.len(), 1, "level {level}: {found:?}");
        assert_eq!(found[0].position, 60);
        assert!((found[0].change_pct.abs() - 20.0).abs() < 1.5, "{found:?}");
        assert!(found[0].before.is_finite() && found[0].ci_high_pct.is_finite());
    }
    // Alternating extremes: nothing overflows into NaN.
    let wild: Vec<f64> = (0..100)
        .map(|i| if i % 2 == 0 { f64::MAX } else { -f64::MAX })
        .collect();
    for c in detect(&values(&wild)) {
        assert!(c.change_pct.is_finite() && c.noise_pct.is_finite());
    }
    // A series crossing zero: a step from −1 to +1 is reported against |before|.
    let mut rng = Rng::new(110);
    let crossing: Vec<f64> = (0..80)
        .map(|i| if i < 40 { -1.0 } else { 1.0 } + 0.01 * rng.normal())
        .collect();
    let found = detect(&values(&crossing));
    assert_eq!(found.len(), 1);
    assert!((found[0].change_pct - 200.0).abs() < 10.0, "{found:?}");
}

#[test]
fn non_finite_values_are_skipped_and_positions_index_the_input() {
    let mut rng = Rng::new(111);
    let mut series = noisy(&mut rng, 100, 100.0, 0.01);
    step(&mut series, 50, 0.2);
    series.insert(10, CommitObservation::new(999, f64::NAN));
    series.insert(20, CommitObservation::new(999, f64::INFINITY));
    let found = detect(&series);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].position, 52);
}

#[test]
fn results_are_deterministic() {
    let mut rng = Rng::new(112);
    let mut series = noisy(&mut rng, 3000, 100.0, 0.03);
    step(&mut series, 1000, 0.1);
    step(&mut series, 2000, -0.1);
    assert_eq!(detect(&series), detect(&series));
}

#[test]
fn a_smooth_trend_is_not_a_run_of_steps() {
    let mut rng = Rng::new(106);
    let mut reported = 0;
    for _ in 0..20 {
        // 60 % over 800 commits in 1 % noise: once a staircase of dozens of steps.
        let mut series = noisy(&mut rng, 800, 100.0, 0.01);
        for (i, o) in series.iter_mut().enumerate() {
            o.value *= 1.0 + 0.6 * i as f64 / 800.0;
        }
        reported += detect(&series).len();
    }
    assert!(
        reported <= 2,
        "{reported} change points on 20 smooth trends"
    );
}

#[test]
fn a_step_on_a_trend_is_still_found() {
    let mut rng = Rng::new(107);
    for _ in 0..20 {
        let mut series = noisy(&mut rng, 400, 100.0, 0.01);
        for (i, o) in series.iter_mut().enumerate() {
            o.value *= 1.0 + 0.3 * i as f64 / 400.0;
        }
        step(&mut series, 250, 0.15);
        let found = detect(&series);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].position.abs_diff(250) <= 2, "{found:?}");
    }
}

/// `levels[i]` commits with `n` samples of spread `cv` each.
fn sampled(rng: &mut Rng, levels: &[(f64, f64)], n: usize) -> Vec<CommitObservation> {
    (levels.iter().enumerate())
        .map(|(i, &(level, cv))| {
            let samples = (0..n).map(|_| level * (1.0 + cv * rng.normal())).collect();
            CommitObservation::from_samples(i, samples)
        })
        .collect()
}

#[test]
fn a_clear_step_in_a_short_history_is_found_from_the_samples_beside_it() {
    // The hex crate's 0.4.0 encode (docs/trials/hex.md): six versions at 24.5k ns, eight at
    // 57k, 75 samples each. Six against eight commits cannot reach alpha by ranks of values.
    for seed in 0..20 {
        let mut rng = Rng::new(900 + seed);
        let mut levels = vec![(24_500.0, 0.011); 6];
        levels.extend([(57_000.0, 0.08); 8]);
        let found = detect(&sampled(&mut rng, &levels, 75));
        assert_eq!(found.len(), 1, "seed {seed}: {found:?}");
        assert_eq!(found[0].position, 6);
        assert_eq!(found[0].kind, VerdictKind::Regression);
        assert_eq!(
            found[0].method,
            "seeded-segmentation+samples-beside-the-step"
        );
        // Values alone (an upload of single numbers, each run's own) stay below the evidence
        // needed. (Values that repeat exactly are counts, whose steps are known exactly.)
        let values: Vec<f64> = (levels.iter().enumerate())
            .map(|(i, l)| l.0 * (1.0 + 0.004 * ((i * 7 % 5) as f64 - 2.0)))
            .collect();
        assert!(detect(&self::values(&values)).is_empty());
    }
}

#[test]
fn a_small_separated_step_with_overlapping_samples_is_not_found_from_them() {
    let mut found = 0;
    for seed in 0..50 {
        let mut rng = Rng::new(1900 + seed);
        // Commit values separated by chance, samples that overlap: 2 % against 5 % spread.
        let mut levels = vec![(1000.0, 0.05); 6];
        levels.extend([(1020.0, 0.05); 8]);
        let mut series = sampled(&mut rng, &levels, 30);
        for (i, o) in series.iter_mut().enumerate() {
            o.value = if i < 6 {
                1000.0 + i as f64
            } else {
                1020.0 + i as f64
            };
        }
        found += detect(&series).len();
    }
    assert_eq!(found, 0, "{found} steps called from overlapping samples");
}

#[test]
fn a_step_between_short_quiet_stretches_is_found_whatever_their_chance_autocorrelation() {
    // The day-one test's history: twelve commits near 100, eight near 150, each the median of
    // three samples within ±0.5 %. Found in every seed, not only when the noise happens to
    // have no rank autocorrelation.
    for seed in 0..200 {
        let mut rng = Rng::new(4000 + seed);
        let values: Vec<f64> = (0..20)
            .map(|i| {
                let level = if i < 12 { 100.0 } else { 150.0 };
                level * (1.0 + 0.005 * (2.0 * rng.uniform() - 1.0))
            })
            .collect();
        let found = detect(&self::values(&values));
        assert_eq!(found.len(), 1, "seed {seed}: {found:?}");
        assert_eq!(found[0].position, 12, "seed {seed}");
    }
}

#[test]
fn a_seasonal_swing_is_not_a_run_of_steps() {
    let mut rng = Rng::new(107);
    let mut found = 0;
    for _ in 0..20 {
        let period = rng.range(60.0, 120.0);
        let mut series = noisy(&mut rng, 500, 100.0, 0.01);
        for (i, o) in series.iter_mut().enumerate() {
            o.value *= 1.0 + 0.015 * (std::f64::consts::TAU * i as f64 / period).sin();
        }
        found += detect(&series).len();
    }
    // Without the rule that an oscillation is no change this found 108; with it 58.
    assert!(found <= 70, "{found} change points in 20 seasonal series");
}
