//! Young histories measured after the fact: 6 to 10 commits backfilled at once, so that no
//! step was ever the newest commit. The analysis (change points, which include a step after
//! the first three or four commits) must find a large step at its commit and nothing in an
//! unchanged history.

use kymo_core::model::Direction;
use kymo_core::stats::{CommitObservation, Sensitivity, detect_change_points};

use crate::generator::Rng;
use crate::young::run;

/// Series per case and history length.
const SERIES: usize = 200;

/// What happens in a backfilled history.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Case {
    /// Nothing: any finding is false.
    Clean,
    /// One commit 20–50 % off, then back: any finding is false.
    Spike,
    /// A step of 30–100 % after the first 3 or 4 commits, which lasts to the newest.
    LargeStep,
}

impl Case {
    const ALL: [Case; 3] = [Case::Clean, Case::Spike, Case::LargeStep];

    fn name(self) -> &'static str {
        match self {
            Case::Clean => "clean",
            Case::Spike => "spike of one commit",
            Case::LargeStep => "step of 30–100 % after 3–4 commits",
        }
    }
}

/// Samples per commit of the generated runs.
const SAMPLES: [usize; 5] = [1, 3, 5, 10, 30];

/// Whether the analysis of one backfilled history is right (for a step, a finding at its
/// commit in its direction; otherwise no finding at all), and which of [`SAMPLES`] it had.
fn analysis_right(rng: &mut Rng, case: Case, commits: usize) -> (bool, usize) {
    let level = rng.log_range(1e2, 1e6);
    let cv = rng.log_range(0.005, 0.03);
    let which = rng.below(SAMPLES.len());
    let n = SAMPLES[which];
    let step_at = 3 + rng.below(2);
    let spike_at = 1 + rng.below(commits - 2);
    let rise = rng.coin(0.5);
    let size = rng.range(0.3, 1.0);
    let step = if rise { 1.0 + size } else { 1.0 / (1.0 + size) };
    let series: Vec<CommitObservation> = (0..commits)
        .map(|i| {
            let factor = match case {
                Case::LargeStep if i >= step_at => step,
                Case::Spike if i == spike_at => 1.0 + rng.range(0.2, 0.5),
                _ => 1.0,
            };
            CommitObservation::from_samples(i, run(rng, level * factor, cv, n))
        })
        .collect();
    let found = detect_change_points(&series, Direction::Lower, &Sensitivity::default());
    let right = match case {
        Case::LargeStep => found
            .iter()
            .any(|c| c.position == step_at && (c.after > c.before) == rise),
        _ => found.is_empty(),
    };
    (right, which)
}

/// Prints the backfilled-history table; returns (recall of large steps with 5 or more
/// samples a commit, false findings per 100 unchanged histories).
pub fn evaluate() -> (f64, f64) {
    println!("## Young histories backfilled at once (6–10 commits; the analysis)\n");
    println!(
        "{SERIES} series per case and length; run-to-run noise 0.5–3 %, 1, 3, 5, 10 or 30 \
         samples per commit. Cells: share of histories the analysis gets right (a step found \
         at its commit in its direction; nothing found otherwise).\n"
    );
    println!("| case | 6 | 7 | 8 | 9 | 10 | all |");
    println!("|---|---|---|---|---|---|---|");
    let (mut found, mut falsely) = ((0, 0), (0, 0));
    let mut steps_by_samples = [(0, 0); SAMPLES.len()];
    for (c, case) in Case::ALL.into_iter().enumerate() {
        let mut cells = Vec::new();
        let (mut right, mut total) = (0, 0);
        for commits in 6..=10 {
            let mut rng = Rng::new(91_000 + 1000 * c as u64 + commits as u64);
            let mut hits = 0;
            for _ in 0..SERIES {
                let (right, which) = analysis_right(&mut rng, case, commits);
                hits += usize::from(right);
                if case == Case::LargeStep {
                    steps_by_samples[which].0 += usize::from(right);
                    steps_by_samples[which].1 += 1;
                }
            }
            cells.push(format!("{:.2}", hits as f64 / SERIES as f64));
            right += hits;
            total += SERIES;
        }
        println!(
            "| {} | {} | {:.3} |",
            case.name(),
            cells.join(" | "),
            right as f64 / total as f64
        );
        match case {
            Case::LargeStep => found = (right, total),
            _ => falsely = (falsely.0 + total - right, falsely.1 + total),
        }
    }
    let by_samples: Vec<String> = (SAMPLES.iter().zip(steps_by_samples))
        .map(|(n, (right, total))| format!("{n}: {:.2}", right as f64 / total as f64))
        .collect();
    println!(
        "\nLarge steps found by samples per commit: {}.\n",
        by_samples.join(", ")
    );
    (
        found.0 as f64 / found.1 as f64,
        100.0 * falsely.0 as f64 / falsely.1 as f64,
    )
}
