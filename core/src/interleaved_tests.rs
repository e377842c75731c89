use super::*;
use crate::protocol::Claim;
use crate::results::{BenchmarkResult, MetricResult, SuiteResults};
use crate::stats::VerdictKind;

fn metric(name: &str, samples: Vec<f64>) -> MetricResult {
    MetricResult {
        name: name.into(),
        unit: if name == WORK_METRIC {
            "instructions"
        } else {
            "ns"
        }
        .into(),
        direction: Direction::Lower,
        value: samples[0],
        samples: if samples.len() > 1 { samples } else { vec![] },
        hdr: None,
    }
}

/// One suite of two benchmarks: `parse` (time around `parse`, instructions `work`) and
/// `print` (time around 50).
fn side(parse: f64, work: f64, wobble: f64) -> Vec<SuiteUpload> {
    let around = |level: f64| {
        (0..5)
            .map(|i| level * (1.0 + wobble * (i as f64 - 2.0)))
            .collect()
    };
    vec![SuiteUpload {
        suite: "s".into(),
        results: SuiteResults {
            benchmarks: vec![
                BenchmarkResult {
                    name: "parse".into(),
                    params: Default::default(),
                    metrics: vec![
                        metric("time", around(parse)),
                        metric(WORK_METRIC, vec![work]),
                    ],
                },
                BenchmarkResult {
                    name: "print".into(),
                    params: Default::default(),
                    metrics: vec![metric("time", around(50.0))],
                },
            ],
        },
    }]
}

fn round(i: usize, head_parse: f64, head_work: f64) -> ComparedRound {
    // Each round's level moves by up to 3 % on both sides alike (drift and load).
    let drift = 1.0 + 0.01 * (i % 4) as f64;
    let noise = 1.0 + 0.004 * ((i * 7) % 5) as f64;
    ComparedRound {
        base: side(100.0 * drift, 1_000_000.0, 0.002),
        head: side(head_parse * drift * noise, head_work, 0.002),
    }
}

#[test]
fn each_benchmark_and_metric_both_sides_measured_is_judged_on_its_rounds() {
    let rounds: Vec<_> = (0..3).map(|i| round(i, 140.0, 1_000_000.0)).collect();
    let judged = judge_comparison(&rounds, &SequentialPlan::adaptive(20), &[], true);
    let names: Vec<(&str, &str)> = (judged.iter())
        .map(|m| (m.benchmark.as_str(), m.metric.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("parse", "instructions"),
            ("parse", "time"),
            ("print", "time")
        ]
    );
    let time = &judged[1].judged;
    assert_eq!(time.verdict.kind, VerdictKind::Regression, "{time:?}");
    assert_eq!(time.rounds, 3);
    assert_eq!(judged[0].judged.verdict.kind, VerdictKind::NoChange);
}

#[test]
fn later_rounds_run_only_what_is_undecided_and_a_change_of_work_decides_at_once() {
    // Round 3: `parse` is 40 % slower (decided), `print` unchanged but not yet sure.
    let rounds: Vec<_> = (0..3).map(|i| round(i, 140.0, 1_000_000.0)).collect();
    let judged = judge_comparison(&rounds, &SequentialPlan::adaptive(20), &[], false);
    let open = undecided(&judged, &[]);
    assert!(
        open.iter()
            .all(|s| !s.benchmarks.contains(&"parse".to_owned())),
        "{open:?}"
    );
    // Only 0.5 % slower, but 1 % more instructions: decided by the counts after two rounds.
    let rounds: Vec<_> = (0..2).map(|i| round(i, 100.5, 1_010_000.0)).collect();
    let judged = judge_comparison(&rounds, &SequentialPlan::adaptive(20), &[], false);
    let work = judged.iter().find(|m| m.metric == WORK_METRIC).unwrap();
    assert_eq!(work.judged.verdict.kind, VerdictKind::Regression);
    let open = undecided(&judged, &[]);
    assert_eq!(
        open,
        [SuiteSelection {
            suite: "s".into(),
            benchmarks: vec!["print".into()],
            metrics: vec![],
            claims: Vec::new(),
        }]
    );
    // Everything decided: nothing left to run.
    let same: Vec<_> = (0..20).map(|_| round(0, 100.0, 1_000_000.0)).collect();
    let judged = judge_comparison(&same, &SequentialPlan::adaptive(20), &[], true);
    assert!(undecided(&judged, &[]).is_empty(), "{judged:?}");
}

#[test]
fn a_comparison_that_names_its_deciding_metrics_waits_only_for_them() {
    // After two rounds no time is decided (the first look is after three); the counts of
    // `parse` are (1 % more work).
    let rounds: Vec<_> = (0..2).map(|i| round(i, 140.0, 1_010_000.0)).collect();
    let judged = judge_comparison(&rounds, &SequentialPlan::adaptive(20), &[], false);
    let print = SuiteSelection {
        suite: "s".into(),
        benchmarks: vec!["print".into()],
        metrics: vec![],
        claims: Vec::new(),
    };
    assert_eq!(undecided(&judged, &[]), std::slice::from_ref(&print));
    // A confirmation of the change of counts waits for nothing else.
    let counts = SuiteSelection {
        metrics: vec![WORK_METRIC.into()],
        benchmarks: vec![],
        ..print.clone()
    };
    assert!(undecided(&judged, &[counts]).is_empty(), "{judged:?}");
    // One that waits for `print`'s time waits for `print`.
    let time = SuiteSelection {
        metrics: vec!["time".into()],
        ..print.clone()
    };
    assert_eq!(undecided(&judged, &[time]), [print]);
}

#[test]
fn a_benchmark_one_side_lacks_is_not_judged() {
    let mut rounds: Vec<_> = (0..3).map(|i| round(i, 100.0, 1_000_000.0)).collect();
    for r in &mut rounds {
        r.head[0].results.benchmarks[1].name = "renamed".into();
    }
    let judged = judge_comparison(&rounds, &SequentialPlan::adaptive(20), &[], true);
    assert!(judged.iter().all(|m| m.name == "parse"), "{judged:?}");
}

/// A confirmation's selection of `parse`'s time, claiming it changed by `change_pct`.
fn claim(change_pct: f64) -> SuiteSelection {
    SuiteSelection {
        suite: "s".into(),
        benchmarks: vec!["parse".into()],
        metrics: vec!["time".into()],
        claims: vec![Claim {
            benchmark: "parse".into(),
            metric: "time".into(),
            change_pct,
        }],
    }
}

#[test]
fn a_confirmation_stops_once_its_rounds_rule_out_the_change_claimed() {
    // Rounds 3–4 % apart on a benchmark that did not change: ±2 % is out of reach for
    // many rounds, but the +60 % the history's analysis claimed is ruled out at the first look.
    let wobble = [1.04, 0.96, 1.03];
    let noisy = |head: f64| -> Vec<ComparedRound> {
        wobble
            .iter()
            .map(|w| ComparedRound {
                base: side(100.0, 1_000_000.0, 0.002),
                head: side(head * w, 1_000_000.0, 0.002),
            })
            .collect()
    };
    let plan = SequentialPlan::adaptive(9);
    let parse = |judged: Vec<JudgedMetric>| {
        (judged.into_iter())
            .find(|m| m.benchmark == "parse" && m.metric == "time")
            .unwrap()
            .judged
    };
    let unclaimed = parse(judge_comparison(&noisy(100.0), &plan, &[], false));
    assert!(!unclaimed.decided, "{unclaimed:?}");
    let refuted = parse(judge_comparison(
        &noisy(100.0),
        &plan,
        &[claim(60.0)],
        false,
    ));
    assert!(refuted.decided, "{refuted:?}");
    assert_eq!(refuted.verdict.kind, VerdictKind::NoChange);
    assert!(
        refuted.verdict.note.contains("±30.0 %"),
        "{}",
        refuted.verdict.note
    );
    // A change that is there is still found, claimed larger than it is or not.
    for claimed in [60.0, 200.0] {
        let found = parse(judge_comparison(
            &noisy(160.0),
            &plan,
            &[claim(claimed)],
            false,
        ));
        assert_eq!(found.verdict.kind, VerdictKind::Regression, "{found:?}");
    }
    // An improvement's claim refutes by its size too; a claim of +26,000 % gives ±50 %.
    let improvement = parse(judge_comparison(
        &noisy(100.0),
        &plan,
        &[claim(-60.0)],
        false,
    ));
    assert_eq!(improvement.verdict.kind, VerdictKind::NoChange);
    assert_eq!(plan.refuting(26_000.0).margin_pct, 50.0);
    assert_eq!(
        plan.refuting(1.0).margin_pct,
        2.0,
        "never narrower than the plan's"
    );
    assert_eq!(plan.refuting(f64::NAN).margin_pct, 2.0);
}

#[test]
fn two_claims_of_one_series_keep_the_smaller_which_is_harder_to_rule_out() {
    let mut selection = vec![claim(80.0)];
    SuiteSelection::widen(&mut selection, &claim(-30.0));
    SuiteSelection::widen(&mut selection, &claim(50.0));
    assert_eq!(
        SuiteSelection::claim(&selection, "s", "parse", "time"),
        Some(-30.0)
    );
    assert_eq!(
        SuiteSelection::claim(&selection, "s", "print", "time"),
        None
    );
    assert_eq!(
        SuiteSelection::claim(&selection, "t", "parse", "time"),
        None
    );
    // Stored and read back as JSON: an older selection without claims still reads.
    let json = serde_json::to_string(&selection).unwrap();
    assert_eq!(
        serde_json::from_str::<Vec<SuiteSelection>>(&json).unwrap(),
        selection
    );
    let old: Vec<SuiteSelection> = serde_json::from_str(r#"[{"suite":"s"}]"#).unwrap();
    assert!(old[0].claims.is_empty());
    let hostile = r#"[{"suite":"s","claims":[{"benchmark":"parse","metric":"time"}]}]"#;
    assert!(serde_json::from_str::<Vec<SuiteSelection>>(hostile).is_err());
}
