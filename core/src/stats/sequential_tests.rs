use super::*;
use crate::stats::synthetic::Rng;

/// Rounds of `samples` samples each, the head `change` (0.05: 5 %) slower, every run's
/// level moved by `run_noise` (relative sd) and each sample by 0.5 %.
fn rounds(
    rng: &mut Rng,
    n: usize,
    change: f64,
    run_noise: f64,
    samples: usize,
) -> Vec<(Vec<f64>, Vec<f64>)> {
    let mut run = |level: f64| -> Vec<f64> {
        let level = level * (1.0 + run_noise * rng.normal());
        (0..samples)
            .map(|_| level * (1.0 + 0.005 * rng.normal()))
            .collect()
    };
    (0..n)
        .map(|_| (run(100.0), run(100.0 * (1.0 + change))))
        .collect()
}

/// Rounds as [`rounds`] makes them, with one run in `every` slowed as a whole by 10 to 50 %
/// (a process that landed beside other work): its fast end moves with all its samples.
fn disturbed_rounds(
    rng: &mut Rng,
    n: usize,
    change: f64,
    every: usize,
) -> Vec<(Vec<f64>, Vec<f64>)> {
    let mut all = rounds(rng, n, change, 0.003, 24);
    for (base, head) in &mut all {
        for run in [base, head] {
            if rng.uniform() < 1.0 / every as f64 {
                let slower = rng.range(1.1, 1.5);
                run.iter_mut().for_each(|v| *v *= slower);
            }
        }
    }
    all
}

fn judged(r: &[(Vec<f64>, Vec<f64>)], plan: &SequentialPlan) -> RoundsVerdict {
    judge_rounds(r, Direction::Lower, plan, true)
}

#[test]
fn a_clear_slowdown_is_decided_at_the_first_look() {
    let mut rng = Rng::new(1);
    let all = rounds(&mut rng, 20, 0.40, 0.02, 10);
    let v = judged(&all[..3], &SequentialPlan::adaptive(20));
    assert!(v.decided, "{v:?}");
    assert_eq!(v.verdict.kind, VerdictKind::Regression, "{v:?}");
    assert_eq!(v.rounds, 3);
    assert!((v.verdict.change_pct - 40.0).abs() < 5.0, "{v:?}");
    assert!(v.verdict.ci_low_pct > 0.0, "{v:?}");
    // Mid-way (not finished) the worker sees the same decision at the look after round 3.
    let mid = judge_rounds(
        &all[..3],
        Direction::Lower,
        &SequentialPlan::adaptive(20),
        false,
    );
    assert!(mid.decided);
    // And later rounds do not change a decided verdict: it stands at its look.
    let later = judged(&all, &SequentialPlan::adaptive(20));
    assert_eq!(
        (later.rounds, later.verdict.kind),
        (3, VerdictKind::Regression)
    );
}

#[test]
fn the_same_code_is_unchanged_with_its_power_stated() {
    let mut rng = Rng::new(2);
    let all = rounds(&mut rng, 20, 0.0, 0.005, 10);
    let v = judged(&all, &SequentialPlan::adaptive(20));
    assert!(v.decided, "{v:?}");
    assert_eq!(v.verdict.kind, VerdictKind::NoChange, "{v:?}");
    assert!(v.rounds < 20, "decided early: {v:?}");
    let power = v.verdict.detectable_pct.unwrap();
    assert!(power > 0.5 && power < 4.0, "{v:?}");
    assert!(
        v.verdict.note.contains("would have been seen"),
        "{}",
        v.verdict.note
    );
}

#[test]
fn a_small_change_in_loud_rounds_stays_undecided_and_says_what_it_could_see() {
    let mut rng = Rng::new(3);
    let all = rounds(&mut rng, 8, 0.01, 0.04, 10);
    let mid = judge_rounds(&all, Direction::Lower, &SequentialPlan::adaptive(8), false);
    assert!(!mid.decided, "{mid:?}");
    let v = judged(&all, &SequentialPlan::adaptive(8));
    assert!(!v.decided, "{v:?}");
    assert_eq!(v.verdict.kind, VerdictKind::Inconclusive, "{v:?}");
    assert_eq!(v.rounds, 8);
    let power = v.verdict.detectable_pct.unwrap();
    assert!(power > 2.0, "{v:?}");
    assert!(v.verdict.note.contains(&format!("{power:.1} %")), "{v:?}");
}

#[test]
fn false_alarms_stay_below_alpha_over_all_looks() {
    // 2,000 unchanged comparisons looked at after 3, 4, 6, 8, 11, 15 and 20 rounds (and 27 and
    // 35 of 40), noise of 1 to 5 %: the union bound keeps any false alarm at most 1 %.
    for most in [20, 40] {
        let mut rng = Rng::new(4);
        let plan = SequentialPlan::adaptive(most);
        let mut alarms = 0;
        for trial in 0..2000 {
            let noise = 0.01 + 0.01 * (trial % 5) as f64;
            let all = rounds(&mut rng, most, 0.0, noise, 3);
            if judged(&all, &plan).verdict.kind.is_change() {
                alarms += 1;
            }
        }
        assert!(
            alarms <= 20,
            "{alarms} false alarms in 2000 of {most} rounds"
        );
    }
}

#[test]
fn forty_rounds_find_on_a_busy_machine_what_twenty_leave_undecided() {
    // Runs 6 % apart (beside a CPU hog rounds differed by 5 to 25 %): a 5 % slowdown, 200
    // comparisons judged as the worker stops them, within 20 rounds and within 40.
    let found = |most: usize| {
        let mut rng = Rng::new(7);
        let plan = SequentialPlan::adaptive(most);
        (0..200)
            .filter(|_| {
                let all = rounds(&mut rng, most, 0.05, 0.06, 10);
                judged(&all, &plan).verdict.kind == VerdictKind::Regression
            })
            .count()
    };
    let (twenty, forty) = (found(20), found(40));
    assert!(
        forty >= twenty + 40,
        "{twenty} within 20 rounds, {forty} within 40"
    );
}

#[test]
fn five_percent_is_found_within_twenty_rounds_at_two_percent_noise() {
    let mut rng = Rng::new(5);
    let plan = SequentialPlan::adaptive(20);
    let found = (0..200)
        .filter(|_| {
            let all = rounds(&mut rng, 20, 0.05, 0.02, 10);
            judged(&all, &plan).verdict.kind == VerdictKind::Regression
        })
        .count();
    assert!(found >= 190, "{found} of 200");
}

#[test]
fn a_fixed_plan_looks_once_with_all_of_alpha() {
    let plan = SequentialPlan::fixed(3);
    assert!(!plan.looks_after(3));
    assert_eq!(plan.spent(0.01, 3), 0.01);
    let adaptive = SequentialPlan::adaptive(20);
    assert!(adaptive.looks_after(3) && !adaptive.looks_after(5) && !adaptive.looks_after(20));
    // Spending grows to α at the horizon and never beyond.
    let spent: Vec<f64> = (0..=25).map(|n| adaptive.spent(0.01, n)).collect();
    assert!(spent.windows(2).all(|w| w[0] <= w[1]));
    assert!((spent[20] - 0.01).abs() < 1e-12 && spent[25] == spent[20]);
    // A fixed plan of three rounds still calls a clear slowdown.
    let mut rng = Rng::new(6);
    let all = rounds(&mut rng, 3, 0.3, 0.02, 3);
    assert_eq!(judged(&all, &plan).verdict.kind, VerdictKind::Regression);
}

#[test]
fn one_round_or_none_cannot_tell() {
    let plan = SequentialPlan::adaptive(20);
    let one = judged(&[(vec![1.0, 1.1], vec![2.0, 2.1])], &plan);
    assert!(!one.decided);
    assert_eq!(one.verdict.kind, VerdictKind::Inconclusive);
    assert_eq!(one.verdict.detectable_pct, None);
    let none = judged(&[], &plan);
    assert_eq!(none.verdict.kind, VerdictKind::Inconclusive);
}

#[test]
fn identical_rounds_are_unchanged_and_a_constant_shift_is_a_change() {
    let plan = SequentialPlan::adaptive(20);
    let same: Vec<_> = (0..3).map(|_| (vec![5.0; 4], vec![5.0; 4])).collect();
    let v = judged(&same, &plan);
    assert_eq!((v.verdict.kind, v.decided), (VerdictKind::NoChange, true));
    let shifted: Vec<_> = (0..3).map(|_| (vec![5.0; 4], vec![6.0; 4])).collect();
    assert_eq!(
        judged(&shifted, &plan).verdict.kind,
        VerdictKind::Regression
    );
    // Higher is better: the same shift is an improvement.
    let v = judge_rounds(&shifted, Direction::Higher, &plan, true);
    assert_eq!(v.verdict.kind, VerdictKind::Improvement);
}

#[test]
fn values_around_zero_and_extremes_stay_finite() {
    let plan = SequentialPlan::adaptive(20);
    let around: Vec<_> = (0..4)
        .map(|i| (vec![-1.0 + i as f64 * 0.01], vec![1.0 + i as f64 * 0.02]))
        .collect();
    let v = judged(&around, &plan);
    for x in [
        v.verdict.change_pct,
        v.verdict.ci_low_pct,
        v.verdict.ci_high_pct,
    ] {
        assert!(x.is_finite(), "{v:?}");
    }
    let huge: Vec<_> = (0..4)
        .map(|i| (vec![1e300 * (1.0 + i as f64)], vec![-1e308]))
        .collect();
    let v = judged(&huge, &plan);
    assert!(
        v.verdict.change_pct.is_finite() && v.verdict.noise_pct.is_finite(),
        "{v:?}"
    );
    assert!(
        v.verdict.detectable_pct.is_some_and(f64::is_finite),
        "{v:?}"
    );
}

#[test]
fn counts_that_repeat_are_no_change_in_work_and_one_percent_more_is_a_finding() {
    let same: Vec<_> = (0..2)
        .map(|_| (vec![1_000_000.0], vec![1_000_000.0]))
        .collect();
    let v = judge_work_rounds(&same);
    assert_eq!((v.verdict.kind, v.decided), (VerdictKind::NoChange, true));
    assert!(
        v.verdict.note.contains("exactly no change in work"),
        "{v:?}"
    );
    let more: Vec<_> = (0..2)
        .map(|i| (vec![1_000_000.0 + i as f64], vec![1_010_000.0 - i as f64]))
        .collect();
    let v = judge_work_rounds(&more);
    assert_eq!(v.verdict.kind, VerdictKind::Regression, "{v:?}");
    assert!((v.verdict.change_pct - 1.0).abs() < 0.01, "{v:?}");
    // Counts of threads that wander by 0.2 %: a 0.3 % difference is within their spread.
    let wandering = vec![
        (vec![1_000_000.0], vec![1_003_000.0]),
        (vec![1_002_000.0], vec![1_001_000.0]),
    ];
    assert_eq!(
        judge_work_rounds(&wandering).verdict.kind,
        VerdictKind::NoChange
    );
    // One round cannot show whether counts repeat.
    let one = judge_work_rounds(&same[..1]);
    assert_eq!(
        (one.verdict.kind, one.decided),
        (VerdictKind::Inconclusive, false)
    );
    let fewer = judge_work_rounds(&[(vec![100.0], vec![90.0]), (vec![100.0], vec![90.0])]);
    assert_eq!(fewer.verdict.kind, VerdictKind::Improvement);
}

#[test]
fn runs_slowed_as_a_whole_neither_hide_a_change_nor_raise_false_alarms() {
    // One run in ten slowed by 10–50 %, rounds otherwise 0.3 % apart. A plain paired t (no
    // trimming) called 227 of these 500 unchanged branches unchanged and found 243 of the 500
    // slowdowns: one such round widens its spread a hundredfold. The 20 % trimmed mean leaves
    // the disturbed rounds out: 486 and 486.
    let mut rng = Rng::new(9);
    let plan = SequentialPlan::adaptive(20);
    let (mut unchanged, mut alarms, mut found) = (0, 0, 0);
    for _ in 0..500 {
        let v = judged(&disturbed_rounds(&mut rng, 20, 0.0, 10), &plan);
        unchanged += usize::from(v.verdict.kind == VerdictKind::NoChange);
        alarms += usize::from(v.verdict.kind.is_change());
        let v = judged(&disturbed_rounds(&mut rng, 20, 0.05, 10), &plan);
        found += usize::from(v.verdict.kind == VerdictKind::Regression);
    }
    assert!(alarms <= 5, "{alarms} false alarms in 500");
    assert!(unchanged >= 475, "{unchanged} of 500 unchanged");
    assert!(found >= 475, "{found} of 500 found");
}

#[test]
fn a_certain_change_smaller_than_identical_builds_differ_by_is_no_finding() {
    // Rounds 0.3 % apart: −2.2 % is certain, as an unchanged branch measured beside a CPU hog
    // for 15 rounds; it is neither a finding nor unchanged. −4 % is a finding.
    let plan = SequentialPlan::adaptive(40);
    let shifted = |change: f64| {
        let mut rng = Rng::new(9);
        judged(&rounds(&mut rng, 15, change, 0.003, 24), &plan)
    };
    let small = shifted(-0.022);
    assert_eq!(small.verdict.kind, VerdictKind::Inconclusive, "{small:?}");
    assert!(
        !small.decided && small.verdict.ci_high_pct < 0.0,
        "{small:?}"
    );
    let change = format!("{:+.1} %", small.verdict.change_pct);
    assert!(
        small.verdict.note.contains(&change)
            && small.verdict.note.contains("smaller than the 3.0 %"),
        "{}",
        small.verdict.note
    );
    let large = shifted(-0.04);
    assert_eq!(large.verdict.kind, VerdictKind::Improvement, "{large:?}");
    assert!(large.rounds < 15, "{large:?}");
    // A confirmation of history's claim of −2.5 % sees it again: the claim's new level held
    // over commits built apart, so the margin is the bar.
    let mut rng = Rng::new(9);
    let claimed = judged(
        &rounds(&mut rng, 15, -0.025, 0.003, 24),
        &plan.refuting(-2.5),
    );
    assert_eq!(
        claimed.verdict.kind,
        VerdictKind::Improvement,
        "{claimed:?}"
    );
}
