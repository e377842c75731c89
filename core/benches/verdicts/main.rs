//! Evaluation of kymo's verdict statistics against the competitors' methods on labeled
//! synthetic series. Run with `cargo bench -p kymo-core --bench verdicts`; it prints Markdown
//! tables (copied into docs/VERDICTS.md) and exits non-zero if a target is missed.
//!
//! Deterministic: every series comes from a fixed seed, and nothing here or in kymo's
//! statistics uses unseeded randomness.

mod generator;
mod methods;
mod scenarios;
mod scorer;
mod sweep;
mod timing;

use std::process::ExitCode;

use generator::{LEN, Labeled, Rng, generate};
use methods::{Detection, Method};
use scenarios::{Scenario, scenarios};
use scorer::{MARGIN, Tally, replayed_delay, score};

const SERIES_PER_SCENARIO: usize = 150;

/// Commits after a step that `method` needs before it reports it.
fn delay(method: Method, labeled: &Labeled, event: &generator::Event, found: &Detection) -> usize {
    if method.is_causal() {
        return found.position.saturating_sub(event.start);
    }
    replayed_delay(|prefix| method.detect(prefix), labeled, event)
}

fn evaluate(scenario: &Scenario, index: usize) -> Vec<Tally> {
    let mut tallies = vec![Tally::default(); Method::ALL.len()];
    for i in 0..SERIES_PER_SCENARIO {
        let mut rng = Rng::new(1_000_003 * index as u64 + i as u64);
        let labeled = generate(&mut rng, &scenario.recipe);
        for (m, &method) in Method::ALL.iter().enumerate() {
            let detections = method.detect(&labeled.observations);
            let (mut tally, matched) = score(&labeled.events, &detections, LEN);
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

pub fn cell(value: Option<f64>) -> String {
    value.map_or("–".to_owned(), |v| format!("{v:.3}"))
}

fn main() -> ExitCode {
    scorer::self_check();
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

    sweep::sweep(&scenarios);

    let (analysis, per_commit, found) = timing::run(10_000, 31);
    println!("## Speed\n");
    println!(
        "noise model + change points on a 10,000-commit series ({found} change points): \
         median {:.2} ms (min {:.2}, max {:.2}, 31 runs)",
        analysis.median.as_secs_f64() * 1e3,
        analysis.min.as_secs_f64() * 1e3,
        analysis.max.as_secs_f64() * 1e3,
    );
    println!(
        "per-commit test, 30 samples against 30: median {:.1} µs\n",
        per_commit.median.as_secs_f64() * 1e6
    );

    let kymo = 0;
    let kymo_f1 = three_sigma[kymo].f1().unwrap_or(0.0);
    let kymo_fa = clean[kymo].false_alarms_per_1000();
    let beaten: Vec<&str> = Method::ALL
        .iter()
        .enumerate()
        .skip(1)
        .filter(|&(m, _)| {
            results
                .iter()
                .all(|t| t[m].f1().is_none() || t[kymo].f1() > t[m].f1())
                && all[kymo].f1() > all[m].f1()
        })
        .map(|(_, method)| method.name())
        .collect();
    let checks = [
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
                "kymo change points beat every other method on F1 in every scenario: {}/{}",
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
