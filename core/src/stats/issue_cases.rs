//! The cases real use found wrong (issue 15), as tests of the per-commit verdict: short
//! histories, series with earlier steps, heavy-tailed samples taken under load.

use crate::model::Direction;

use super::noise::{CommitObservation, noise_model};
use super::sensitivity::Sensitivity;
use super::synthetic::Rng;
use super::{VerdictKind, compare};

/// `n` samples around `level` with `cv` normal spread.
fn samples(rng: &mut Rng, n: usize, level: f64, cv: f64) -> Vec<f64> {
    (0..n).map(|_| level * (1.0 + cv * rng.normal())).collect()
}

/// `n` timing samples under load: most near `level`, 15 % slowed by 20–100 %.
fn loaded(rng: &mut Rng, n: usize, level: f64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let slowed = if rng.uniform() < 0.15 {
                1.2 + 0.8 * rng.uniform()
            } else {
                1.0
            };
            level * slowed * (1.0 + 0.02 * rng.normal())
        })
        .collect()
}

/// A history of one commit per level, each with `per_commit` samples of spread `cv`.
fn history(rng: &mut Rng, levels: &[f64], per_commit: usize, cv: f64) -> Vec<CommitObservation> {
    (levels.iter().enumerate())
        .map(|(i, &l)| CommitObservation::from_samples(i, samples(rng, per_commit, l, cv)))
        .collect()
}

/// The server's view of a history: values only.
fn values_only(history: &[CommitObservation]) -> Vec<CommitObservation> {
    (history.iter())
        .map(|o| CommitObservation::new(o.position, o.value))
        .collect()
}

#[test]
fn a_fifty_percent_step_after_five_quiet_commits_is_a_regression_at_once() {
    let s = Sensitivity::default();
    for seed in 0..50 {
        let mut rng = Rng::new(seed);
        let quiet = history(&mut rng, &[100.0; 5], 3, 0.01);
        let noise = noise_model(&values_only(&quiet));
        let head = samples(&mut rng, 3, 150.0, 0.01);
        let v = compare(&quiet[4].samples, &head, Direction::Lower, &noise, &s);
        assert_eq!(v.kind, VerdictKind::Regression, "seed {seed}: {v:?}");
        assert!(v.note.starts_with("short history (4 "), "{v:?}");
        assert!(
            v.threshold_pct.is_finite() && v.threshold_pct < 40.0,
            "{v:?}"
        );
        // And the same code measured again is not a change.
        let again = samples(&mut rng, 3, 100.0, 0.01);
        let v = compare(&quiet[4].samples, &again, Direction::Lower, &noise, &s);
        assert!(!v.kind.is_change(), "seed {seed}: {v:?}");
    }
}

#[test]
fn young_series_call_strong_changes_and_leave_small_ones() {
    let s = Sensitivity::default();
    for commits in 3..=8 {
        let mut rng = Rng::new(commits as u64);
        let quiet = history(&mut rng, &vec![100.0; commits - 1], 10, 0.01);
        let noise = noise_model(&values_only(&quiet));
        let base = &quiet[commits - 2].samples;
        let doubled = samples(&mut rng, 10, 200.0, 0.01);
        let v = compare(base, &doubled, Direction::Lower, &noise, &s);
        assert_eq!(v.kind, VerdictKind::Regression, "{commits} commits: {v:?}");
        let small = samples(&mut rng, 10, 102.0, 0.01);
        let v = compare(base, &small, Direction::Lower, &noise, &s);
        assert!(!v.kind.is_change(), "{commits} commits: {v:?}");
    }
}

/// Ten commits of `encode/hex` before the head: three before a 5× speed-up, seven after,
/// 100 heavy-tailed samples each; the head is 2.3× slower.
fn encode_hex(rng: &mut Rng) -> (Vec<CommitObservation>, Vec<f64>, Vec<f64>) {
    let history: Vec<CommitObservation> = (0..10)
        .map(|i| {
            let level = if i < 3 { 250_000.0 } else { 50_000.0 };
            CommitObservation::from_samples(i, loaded(rng, 100, level))
        })
        .collect();
    let base = history[9].samples.clone();
    let head = loaded(rng, 100, 115_000.0);
    (values_only(&history), base, head)
}

#[test]
fn a_slowdown_after_an_earlier_five_fold_step_is_a_regression() {
    let s = Sensitivity::default();
    let mut rng = Rng::new(15);
    let (history, base, head) = encode_hex(&mut rng);
    let noise = noise_model(&history);
    assert!(noise.between_commit_pct < 20.0, "{noise:?}");
    let v = compare(&base, &head, Direction::Lower, &noise, &s);
    assert_eq!(v.kind, VerdictKind::Regression, "{v:?}");
    assert!(v.p_value.unwrap() < 1e-30, "{v:?}");
    assert!(v.threshold_pct < 100.0, "{v:?}");
    // The same runs as throughput (higher is better) tell the same story.
    let invert = |x: &[f64]| x.iter().map(|t| 1e9 / t).collect::<Vec<f64>>();
    let throughput: Vec<CommitObservation> = (history.iter())
        .map(|o| CommitObservation::new(o.position, 1e9 / o.value))
        .collect();
    let noise = noise_model(&throughput);
    let v = compare(
        &invert(&base),
        &invert(&head),
        Direction::Higher,
        &noise,
        &s,
    );
    assert_eq!(v.kind, VerdictKind::Regression, "{v:?}");
    assert!(v.change_pct < -50.0, "{v:?}");
}

#[test]
fn heavy_tailed_samples_of_unchanged_code_raise_no_alarm() {
    let s = Sensitivity::default();
    let mut alarms = 0;
    for seed in 0..200 {
        let mut rng = Rng::new(1000 + seed);
        let history: Vec<CommitObservation> = (0..12)
            .map(|i| {
                CommitObservation::new(i, crate::stats::robust::median(&loaded(&mut rng, 30, 1e4)))
            })
            .collect();
        let noise = noise_model(&history);
        let base = loaded(&mut rng, 30, 1e4);
        let head = loaded(&mut rng, 30, 1e4);
        if compare(&base, &head, Direction::Lower, &noise, &s)
            .kind
            .is_change()
        {
            alarms += 1;
        }
    }
    assert!(alarms <= 1, "{alarms} false alarms in 200");
}

/// The `hex` crate's 0.3.2 → 0.4.0 encode as recorded by `docs/trials/hex.md`: 75 quiet
/// samples, then 75 samples 2.5× slower whose spread under load is ten times wider, after a
/// history of five quiet commits. The head's wide spread in nanoseconds must not become a
/// threshold in the baseline's units that hides its own change.
#[test]
fn a_slower_run_with_a_wider_spread_is_still_a_regression() {
    let s = Sensitivity::default();
    for seed in 0..20 {
        let mut rng = Rng::new(500 + seed);
        let quiet = history(&mut rng, &[24_800.0; 6], 75, 0.011);
        let noise = noise_model(&values_only(&quiet));
        let head = samples(&mut rng, 75, 61_000.0, 0.10);
        let v = compare(&quiet[5].samples, &head, Direction::Lower, &noise, &s);
        assert_eq!(v.kind, VerdictKind::Regression, "seed {seed}: {v:?}");
        // The same code measured again, under the same load, is no change.
        let again = loaded(&mut rng, 75, 24_800.0);
        let v = compare(&quiet[5].samples, &again, Direction::Lower, &noise, &s);
        assert!(!v.kind.is_change(), "seed {seed}: {v:?}");
    }
}

#[test]
fn instruction_counts_call_a_code_change_after_an_earlier_one_in_a_young_history() {
    // The hex trial on a busy machine: whole-program counts of 0.3.1, its docs commit, 0.3.2
    // (−5.6 %) and its docs commit, then 0.4.0. The time could not tell; the counts can.
    let counts = [
        1_745_663_864.0,
        1_745_668_632.0,
        1_647_296_141.0,
        1_647_282_242.0,
    ];
    let history: Vec<CommitObservation> = (counts.iter().enumerate())
        .map(|(i, &c)| CommitObservation::new(i, c))
        .collect();
    let noise = noise_model(&history);
    let s = Sensitivity::default();
    let judge = |head: f64| compare(&[counts[3]], &[head], Direction::Lower, &noise, &s);
    let v = judge(1_958_990_408.0);
    assert_eq!(v.kind, VerdictKind::Regression, "{v:?}");
    assert!((v.change_pct - 18.9).abs() < 0.1, "{v:?}");
    // A docs-only commit moves the count by a few instructions in a million.
    let v = judge(1_647_285_103.0);
    assert_eq!(v.kind, VerdictKind::NoChange, "{v:?}");
}
