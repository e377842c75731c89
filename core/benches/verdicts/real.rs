//! Real recorded series: the `hex` crate from crates.io, versions 0.3.2, 0.4.0, 0.4.2 and
//! 0.4.3 (0.4.1 is yanked) timed on this machine, as found (other builds running) and with
//! two busy loops beside it. `real/record.sh` recorded `real_hex.txt`; see its README.
//!
//! Each history is a run of "commits": ten of each version, then ten with a deliberate
//! slowdown of `encode` (a second pass over half the input) and ten reverting it; and
//! thirty commits of identical code. Three passes as found, three with the busy loops. What changed is known by construction (the slowdown,
//! its revert, identical code) or measured apart: each pair of neighbouring versions was run
//! eight times interleaved, and a version bump counts as a change when the pooled medians
//! differ by more than 10 %, as none below 3 %, and is left unscored in between.

use std::collections::BTreeMap;

use kymo_core::model::Direction;
use kymo_core::stats::{CommitObservation, Sensitivity, detect_change_points, detect_tail_change};

use crate::methods::{Detection, Method};

const DATA: &str = include_str!("real_hex.txt");

/// What a commit changed against its parent.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Label {
    None,
    Change { rise: bool },
    Unscored,
}

/// One real series with its labels (per commit; the first has none).
struct RealSeries {
    observations: Vec<CommitObservation>,
    labels: Vec<Label>,
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// (load, history, benchmark) → per commit (spec, samples), and truth runs per load.
type Runs = BTreeMap<(String, String, String), Vec<(String, Vec<f64>)>>;

fn parse() -> Runs {
    let mut runs = Runs::new();
    for line in DATA
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [load, history, _commit, spec, bench, samples] = fields[..] else {
            panic!("malformed line in real_hex.txt: {line}");
        };
        let samples: Vec<f64> = samples.split(',').map(|s| s.parse().unwrap()).collect();
        runs.entry((load.into(), history.into(), bench.into()))
            .or_default()
            .push((spec.into(), samples));
    }
    runs
}

/// The ratio of pooled medians, new version over old, from the interleaved truth runs.
fn measured_ratio(runs: &Runs, load: &str, bench: &str, old: &str, new: &str) -> Option<f64> {
    let key = (
        load.to_owned(),
        format!("truth-{old}-{new}"),
        bench.to_owned(),
    );
    let runs = runs.get(&key)?;
    let pooled = |version: &str| {
        let mut all: Vec<f64> = (runs.iter())
            .filter(|(spec, _)| spec == version)
            .flat_map(|(_, s)| s.iter().copied())
            .collect();
        median(&mut all)
    };
    Some(pooled(new) / pooled(old))
}

fn label(runs: &Runs, load: &str, bench: &str, old: &str, new: &str, higher: bool) -> Label {
    let flip = |rise: bool| Label::Change {
        rise: rise != higher,
    };
    if old == new {
        return Label::None;
    }
    let (old_version, new_version) = (old.trim_end_matches("+slow"), new.trim_end_matches("+slow"));
    if old_version == new_version {
        // Only the deliberate slowdown changed, and only in encode.
        return if bench == "decode" {
            Label::None
        } else {
            flip(new.ends_with("+slow"))
        };
    }
    match measured_ratio(runs, load, bench, old_version, new_version) {
        Some(r) if (r - 1.0).abs() > 0.10 => flip(r > 1.0),
        Some(r) if (r - 1.0).abs() < 0.03 => Label::None,
        _ => Label::Unscored,
    }
}

/// Every recorded history as series: encode and decode time (ns, lower is better) and
/// encode throughput (bytes/s, higher is better).
fn series() -> Vec<(String, RealSeries, Direction)> {
    let runs = parse();
    let mut all = Vec::new();
    for ((load, history, bench), commits) in &runs {
        if history.starts_with("truth") {
            continue;
        }
        let metrics: &[(&str, bool)] = if bench == "encode" {
            &[("time", false), ("throughput", true)]
        } else {
            &[("time", false)]
        };
        // The interleaved truth runs were recorded once per load ("as-found", "busy").
        let truth_load = load
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .trim_end_matches('-');
        for &(metric, higher) in metrics {
            let direction = if higher {
                Direction::Higher
            } else {
                Direction::Lower
            };
            let observations = (commits.iter().enumerate())
                .map(|(i, (_, samples))| {
                    let samples = if higher {
                        samples.iter().map(|ns| 1024.0 * 1e9 / ns).collect()
                    } else {
                        samples.clone()
                    };
                    CommitObservation::from_run(i, samples, direction)
                })
                .collect();
            let labels = std::iter::once(Label::Unscored)
                .chain(
                    commits
                        .windows(2)
                        .map(|w| label(&runs, truth_load, bench, &w[0].0, &w[1].0, higher)),
                )
                .collect();
            all.push((
                format!("{load} {history} {bench} {metric}"),
                RealSeries {
                    observations,
                    labels,
                },
                direction,
            ));
        }
    }
    all
}

/// What the server reports over a growing history: at every new commit, the change points
/// and the provisional change in the newest commits; every finding ever reported counts.
fn replayed_analysis(series: &[CommitObservation], direction: Direction) -> Vec<Detection> {
    let s = Sensitivity::default();
    let mut found: Vec<Detection> = Vec::new();
    for end in 2..=series.len() {
        let prefix = &series[..end];
        let mut points = detect_change_points(prefix, direction, &s);
        let settled = points.last().map_or(0, |cp| cp.position);
        if let Some(mut recent) = detect_tail_change(&prefix[settled..], direction, &s) {
            recent.position += settled;
            points.push(recent);
        }
        for cp in points {
            let d = Detection {
                position: cp.position,
                rise: cp.after > cp.before,
            };
            if !found
                .iter()
                .any(|f| f.position == d.position && f.rise == d.rise)
            {
                found.push(d);
            }
        }
    }
    found
}

/// Counts of one detector over the real series.
#[derive(Default)]
struct Counts {
    found: usize,
    missed: usize,
    false_findings: usize,
    commits: usize,
}

fn score(counts: &mut Counts, labels: &[Label], detections: &[Detection]) {
    for (i, label) in labels.iter().enumerate().skip(1) {
        let at = detections.iter().find(|d| d.position == i);
        match (label, at) {
            (Label::Unscored, _) => continue,
            (Label::Change { rise }, Some(d)) if d.rise == *rise => counts.found += 1,
            (Label::Change { .. }, Some(_)) => {
                counts.missed += 1;
                counts.false_findings += 1;
            }
            (Label::Change { .. }, None) => counts.missed += 1,
            (Label::None, Some(_)) => counts.false_findings += 1,
            (Label::None, None) => {}
        }
        counts.commits += 1;
    }
}

/// Prints the real-data table; returns the replayed analysis's (recall, false findings per
/// 100 commits) and whether it reported the deliberate slowdown at its commit in every
/// history.
pub fn evaluate() -> (f64, f64, bool) {
    let all = series();
    let changes: usize = (all.iter())
        .map(|(_, s, _)| {
            s.labels
                .iter()
                .filter(|l| matches!(l, Label::Change { .. }))
                .count()
        })
        .sum();
    let commits: usize = all.iter().map(|(_, s, _)| s.observations.len()).sum();
    println!("## Real series (hex 0.3.2 → 0.4.3, a deliberate slowdown, identical code)\n");
    println!(
        "{} series, {commits} commits, {changes} labelled changes; as found and with two busy \
         loops beside the runs; 30 samples per commit. Findings count at their commit.\n",
        all.len()
    );
    println!("| method | precision | recall | false findings / 100 commits |");
    println!("|---|---|---|---|");
    let mut kymo = (0.0, 0.0);
    let mut slowdown_flagged = true;
    let names = Method::ALL
        .iter()
        .map(|m| m.name())
        .chain(["kymo analysis, replayed commit by commit"]);
    for (m, name) in names.enumerate() {
        let mut counts = Counts::default();
        for (_, real, direction) in &all {
            let detections = match Method::ALL.get(m) {
                Some(method) => method.detect_in(&real.observations, *direction),
                None => replayed_analysis(&real.observations, *direction),
            };
            score(&mut counts, &real.labels, &detections);
        }
        let reported = counts.found + counts.false_findings;
        let precision = (reported > 0).then(|| counts.found as f64 / reported as f64);
        let recall = counts.found as f64 / (counts.found + counts.missed).max(1) as f64;
        let per_100 = 100.0 * counts.false_findings as f64 / counts.commits.max(1) as f64;
        println!(
            "| {name} | {} | {recall:.3} | {per_100:.1} |",
            crate::cell(precision)
        );
        if Method::ALL.get(m).is_none() {
            kymo = (recall, per_100);
        }
    }
    println!();
    for (name, real, direction) in &all {
        if !name.contains(" versions encode time") {
            continue;
        }
        // The slowdown is the first rise after the first version bump.
        let slow = (real.labels.iter().enumerate().skip(11))
            .find(|(_, l)| **l == Label::Change { rise: true })
            .map(|(i, _)| i);
        let at = |found: &[Detection]| {
            slow.is_some_and(|i| found.iter().any(|d| d.position == i && d.rise))
        };
        let replayed = replayed_analysis(&real.observations, *direction);
        let analysis = at(&replayed);
        let at_once = at(&Method::KymoPerCommit.detect_in(&real.observations, *direction));
        println!(
            "- {name}: the slowdown at commit {} is {} by the analysis{}",
            slow.map_or("?".to_owned(), |i| i.to_string()),
            if analysis {
                "reported at its commit"
            } else {
                "NOT reported"
            },
            if at_once {
                ", and at once by the per-commit test"
            } else {
                ""
            }
        );
        slowdown_flagged &= analysis;
        if !analysis && std::env::var_os("KYMO_VERDICTS_VERBOSE").is_some() {
            let points =
                detect_change_points(&real.observations, *direction, &Sensitivity::default());
            println!("  replayed: {replayed:?}\n  final: {points:#?}");
        }
    }
    println!();
    (kymo.0, kymo.1, slowdown_flagged)
}
