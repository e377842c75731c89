//! Evaluation of kymo's verdict statistics against the competitors' methods on labeled
//! synthetic series. Run with `cargo bench -p kymo-core --bench verdicts`; it prints Markdown
//! tables (copied into docs/VERDICTS.md) and exits non-zero if a target is missed.
//!
//! Deterministic: every series comes from a fixed seed, and nothing here or in kymo's
//! statistics uses unseeded randomness.

mod backfill;
mod generator;
mod methods;
mod real;
mod scenarios;
mod scorer;
mod sweep;
mod tcpd;
mod timing;
mod young;

use std::process::ExitCode;

use generator::{LEN, Labeled, Rng, generate};
use methods::{Detection, Method};
use scenarios::{Scenario, scenarios};
use scorer::{MARGIN, Tally, replayed_delay, score};
use tcpd::{TCPD_MARGIN, tcpd_f1};

const SERIES_PER_SCENARIO: usize = 150;

/// Commits after a step that `method` needs before it reports it.
fn delay(method: Method, labeled: &Labeled, event: &generator::Event, found: &Detection) -> usize {
    if method.is_causal() {
        return found.position.saturating_sub(event.start);
    }
    replayed_delay(|prefix| method.detect(prefix), labeled, event)
}

/// The tallies of every method, then of never reporting anything (TCPD's F1 only).
fn evaluate(scenario: &Scenario, index: usize) -> Vec<Tally> {
    let mut tallies = vec![Tally::default(); Method::ALL.len() + 1];
    for i in 0..SERIES_PER_SCENARIO {
        let mut rng = Rng::new(1_000_003 * index as u64 + i as u64);
        let labeled = generate(&mut rng, &scenario.recipe);
        let truth: Vec<usize> = labeled.events.iter().map(|e| e.start).collect();
        tallies[Method::ALL.len()].tcpd_sum += tcpd_f1(&truth, &[]);
        tallies[Method::ALL.len()].series += 1;
        for (m, &method) in Method::ALL.iter().enumerate() {
            let detections = method.detect(&labeled.observations);
            let (mut tally, matched) = score(&labeled.events, &detections, LEN);
            let predicted: Vec<usize> = detections.iter().map(|d| d.position).collect();
            tally.tcpd_sum = tcpd_f1(&truth, &predicted);
            tally.series = 1;
            for (event, found) in labeled.events.iter().zip(&matched) {
                if let (true, Some(found)) = (event.is_step, found) {
                    tally.delays.push(delay(method, &labeled, event, found));
                }
            }
            tallies[m].add(&tally);
        }
    }
    tallies
}

/// `KYMO_VERDICTS_ONLY=NAME`: TCPD's F1 of kymo and of never reporting on the scenarios whose
/// name contains NAME, (NAME `real`) the real series alone, or (NAME `speed`) the timings
/// alone; a quick loop while tuning.
fn quick(only: &str) -> ExitCode {
    if only == "real" {
        real::evaluate();
        return ExitCode::SUCCESS;
    }
    if only == "speed" {
        print_speed(&timing::run(10_000, 31));
        return ExitCode::SUCCESS;
    }
    for (index, scenario) in scenarios().iter().enumerate() {
        if !scenario.name.contains(only) {
            continue;
        }
        let (mut kymo, mut never) = (0.0, 0.0);
        for i in 0..SERIES_PER_SCENARIO {
            let mut rng = Rng::new(1_000_003 * index as u64 + i as u64);
            let labeled = generate(&mut rng, &scenario.recipe);
            let truth: Vec<usize> = labeled.events.iter().map(|e| e.start).collect();
            let found: Vec<usize> = (Method::KymoChangePoints.detect(&labeled.observations))
                .iter()
                .map(|d| d.position)
                .collect();
            let f1 = tcpd_f1(&truth, &found);
            if std::env::var_os("KYMO_VERDICTS_VERBOSE").is_some() && f1 < 1.0 {
                let shapes: Vec<(usize, usize, i64)> = kymo_core::stats::detect_change_points(
                    &labeled.observations,
                    kymo_core::model::Direction::Lower,
                    &kymo_core::stats::Sensitivity::default(),
                )
                .iter()
                .map(|c| (c.position, c.span, c.change_pct.round() as i64))
                .collect();
                println!("  series {i}: truth {truth:?} found {shapes:?} F1 {f1:.3}");
            }
            kymo += f1;
            never += tcpd_f1(&truth, &[]);
        }
        let n = SERIES_PER_SCENARIO as f64;
        println!(
            "{}: kymo {:.3} never {:.3}",
            scenario.name,
            kymo / n,
            never / n
        );
    }
    ExitCode::SUCCESS
}

pub fn cell(value: Option<f64>) -> String {
    value.map_or("–".to_owned(), |v| format!("{v:.3}"))
}

fn main() -> ExitCode {
    scorer::self_check();
    tcpd::self_check();
    if let Ok(only) = std::env::var("KYMO_VERDICTS_ONLY") {
        return quick(&only);
    }
    let scenarios = scenarios();
    let results: Vec<Vec<Tally>> = scenarios
        .iter()
        .enumerate()
        .map(|(i, s)| evaluate(s, i))
        .collect();

    println!("# kymo verdicts: evaluation\n");
    println!(
        "{SERIES_PER_SCENARIO} series × {LEN} commits per scenario; margin ±{MARGIN} commits; \
         delays are medians over the steps found.\n"
    );
    for (scenario, tallies) in scenarios.iter().zip(&results) {
        let changes = tallies[0].found + tallies[0].missed;
        println!("## {} ({changes} changes)\n", scenario.name);
        println!("| method | F1 | precision | recall | false alarms / 1k commits | median delay |");
        println!("|---|---|---|---|---|---|");
        for (method, t) in Method::ALL.iter().zip(tallies) {
            println!(
                "| {} | {} | {} | {} | {:.2} | {} |",
                method.name(),
                cell(t.f1()),
                cell(t.precision()),
                cell(t.recall()),
                t.false_alarms_per_1000(),
                t.median_delay()
                    .map_or("–".to_owned(), |d| format!("{d:.0}")),
            );
        }
        println!();
    }

    let pooled = |pick: &dyn Fn(&Scenario) -> bool| -> Vec<Tally> {
        let mut total = vec![Tally::default(); Method::ALL.len()];
        for (scenario, tallies) in scenarios.iter().zip(&results) {
            if pick(scenario) {
                for (sum, t) in total.iter_mut().zip(tallies) {
                    sum.add(t);
                }
            }
        }
        total
    };
    let three_sigma = pooled(&|s| s.three_sigma);
    let clean = pooled(&|s| s.name.starts_with("clean"));
    let all = pooled(&|_| true);

    println!("## Summary (F1 per scenario; false alarms per 1k clean commits)\n");
    let header: Vec<&str> = scenarios.iter().skip(2).map(|s| s.name).collect();
    println!(
        "| method | {} | all ≥ 3σ | all | FA/1k clean |",
        header.join(" | ")
    );
    println!("|---|{}---|---|---|", "---|".repeat(header.len()));
    for (m, method) in Method::ALL.iter().enumerate() {
        let f1s: Vec<String> = results.iter().skip(2).map(|t| cell(t[m].f1())).collect();
        println!(
            "| {} | {} | {} | {} | {:.2} |",
            method.name(),
            f1s.join(" | "),
            cell(three_sigma[m].f1()),
            cell(all[m].f1()),
            clean[m].false_alarms_per_1000(),
        );
    }
    println!();

    println!(
        "## Change points scored as in TCPD (mean F1 over series, margin {TCPD_MARGIN}, \
         the start counted as a change point)\n"
    );
    println!(
        "| method | {} |",
        scenarios
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|".repeat(scenarios.len()));
    let names = Method::ALL
        .iter()
        .map(|m| m.name())
        .chain(["never report anything"]);
    for (m, name) in names.enumerate() {
        let f1s: Vec<String> = results.iter().map(|t| cell(t[m].tcpd())).collect();
        println!("| {name} | {} |", f1s.join(" | "));
    }
    println!();
    let never = Method::ALL.len();
    let beats_never = (scenarios.iter().zip(&results)).all(|(s, t)| {
        let (kymo, never) = (t[0].tcpd().unwrap_or(0.0), t[never].tcpd().unwrap_or(0.0));
        if s.name.starts_with("clean") {
            kymo >= never - 0.005
        } else {
            kymo > never
        }
    });

    let young = young::evaluate();
    let (backfill_recall, backfill_false) = backfill::evaluate();
    let (real_recall, real_false, real_slowdown) = real::evaluate();

    sweep::sweep(&scenarios);

    let speed = timing::run(10_000, 31);
    print_speed(&speed);
    let (analysis, _, _) = speed;

    let kymo = 0;
    let kymo_f1 = three_sigma[kymo].f1().unwrap_or(0.0);
    let kymo_fa = clean[kymo].false_alarms_per_1000();
    let beaten: Vec<&str> = Method::ALL
        .iter()
        .enumerate()
        .skip(1)
        .filter(|&(m, _)| {
            (scenarios.iter().zip(&results))
                .filter(|(s, _)| !s.smooth)
                .all(|(_, t)| t[m].f1().is_none() || t[kymo].f1() > t[m].f1())
                && all[kymo].f1() > all[m].f1()
        })
        .map(|(_, method)| method.name())
        .collect();
    let mut checks = vec![
        (
            format!("F1 on steps ≥ 3σ ≥ 0.95: {kymo_f1:.3}"),
            kymo_f1 >= 0.95,
        ),
        (
            format!("false alarms per 1k clean commits ≤ 1: {kymo_fa:.2}"),
            kymo_fa <= 1.0,
        ),
        (
            format!(
                "kymo change points beat every other method on F1 in every scenario without a \
                 trend, swing or wandering level: {}/{}",
                beaten.len(),
                Method::ALL.len() - 1
            ),
            beaten.len() == Method::ALL.len() - 1,
        ),
        (
            format!(
                "10k-commit analysis < 10 ms: {:.2} ms",
                analysis.median.as_secs_f64() * 1e3
            ),
            analysis.median.as_secs_f64() < 0.010,
        ),
    ];
    checks.push((
        "kymo change points beat never reporting on TCPD's F1 in every family with changes \
         (and lose less than 0.005 on clean ones)"
            .to_owned(),
        beats_never,
    ));
    checks.extend([
        (
            format!(
                "young series of 5–8 commits: steps of 30–100 % flagged at once ≥ 0.9: {:.3}",
                young.large_recall
            ),
            young.large_recall >= 0.9,
        ),
        (
            format!(
                "young series: false findings per 100 unchanged heads ≤ 1: {:.2}; after an \
                 earlier step ≤ 1: {:.2}",
                young.false_per_100, young.false_after_step_per_100
            ),
            young.false_per_100 <= 1.0 && young.false_after_step_per_100 <= 1.0,
        ),
        (
            format!(
                "backfilled young histories: steps of 30–100 % after 3–4 commits found at their \
                 commit ≥ 0.9: {backfill_recall:.3}"
            ),
            backfill_recall >= 0.9,
        ),
        (
            format!(
                "backfilled young histories: false findings per 100 unchanged ≤ 1: \
                 {backfill_false:.2}"
            ),
            backfill_false <= 1.0,
        ),
        (
            format!(
                "real series: the analysis reports the deliberate slowdown at its commit in \
                 every history (recall {real_recall:.3}), false findings per 100 commits ≤ 2: \
                 {real_false:.2}"
            ),
            real_slowdown && real_false <= 2.0,
        ),
    ]);
    println!("## Targets\n");
    for (text, ok) in &checks {
        println!("- [{}] {text}", if *ok { "x" } else { " " });
    }
    if checks.iter().all(|(_, ok)| *ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The speed section: the full analysis of a 10,000-commit series and one per-commit test.
fn print_speed((analysis, per_commit, found): &(timing::Timing, timing::Timing, usize)) {
    println!("## Speed\n");
    println!(
        "noise model + change points on a 10,000-commit series ({found} change points): \
         median {:.2} ms (min {:.2}, max {:.2}, 31 runs; on a CPU: median {})",
        analysis.median.as_secs_f64() * 1e3,
        analysis.min.as_secs_f64() * 1e3,
        analysis.max.as_secs_f64() * 1e3,
        analysis
            .on_cpu_median
            .map_or("unknown".to_owned(), |d| format!(
                "{:.2} ms",
                d.as_secs_f64() * 1e3
            )),
    );
    println!(
        "per-commit test, 30 samples against 30: median {:.1} µs\n",
        per_commit.median.as_secs_f64() * 1e6
    );
}
