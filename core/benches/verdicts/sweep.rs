//! kymo's change points at other sensitivity settings, to show how the defaults were chosen.

use kymo_core::model::Direction;
use kymo_core::stats::{CommitObservation, Sensitivity};

use crate::generator::{LEN, Rng, generate};
use crate::methods::kymo_detections;
use crate::scenarios::Scenario;
use crate::scorer::{Tally, replayed_delay, score};
use crate::{SERIES_PER_SCENARIO, cell};

/// kymo's change points at other settings, pooled like the summary.
pub fn sweep(scenarios: &[Scenario]) {
    println!("## Sensitivity sweep (kymo change points)\n");
    println!(
        "| min_segment_len | change_point_alpha | F1 all ≥ 3σ | F1 with spikes | F1 all | \
         FA/1k clean | FA/1k all | median delay |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for min_segment_len in [3, 5, 8] {
        for change_point_alpha in [1e-3, 1e-4, 1e-5] {
            let sensitivity = Sensitivity {
                min_segment_len,
                change_point_alpha,
                ..Sensitivity::default()
            };
            let mut pooled = [(); 4].map(|_| Tally::default());
            for (index, scenario) in scenarios.iter().enumerate() {
                for i in 0..SERIES_PER_SCENARIO {
                    let mut rng = Rng::new(1_000_003 * index as u64 + i as u64);
                    let labeled = generate(&mut rng, &scenario.recipe);
                    let detections =
                        kymo_detections(&labeled.observations, Direction::Lower, &sensitivity);
                    let (mut tally, matched) = score(&labeled.events, &detections, LEN);
                    for (event, found) in labeled.events.iter().zip(&matched) {
                        if event.is_step && found.is_some() {
                            let detect = |prefix: &[CommitObservation]| {
                                kymo_detections(prefix, Direction::Lower, &sensitivity)
                            };
                            tally.delays.push(replayed_delay(detect, &labeled, event));
                        }
                    }
                    let picks = [
                        scenario.three_sigma,
                        scenario.recipe.spikes.1 > 0,
                        true,
                        scenario.name.starts_with("clean"),
                    ];
                    for (sum, pick) in pooled.iter_mut().zip(picks) {
                        if pick {
                            sum.add(&tally);
                        }
                    }
                }
            }
            let [three_sigma, spikes, all, clean] = &pooled;
            let default = Sensitivity::default();
            let marker = if (min_segment_len, change_point_alpha)
                == (default.min_segment_len, default.change_point_alpha)
            {
                " (default)"
            } else {
                ""
            };
            println!(
                "| {min_segment_len} | {change_point_alpha:e}{marker} | {} | {} | {} | {:.2} | {:.2} | {} |",
                cell(three_sigma.f1()),
                cell(spikes.f1()),
                cell(all.f1()),
                clean.false_alarms_per_1000(),
                all.false_alarms_per_1000(),
                all.median_delay()
                    .map_or("–".to_owned(), |d| format!("{d:.0}")),
            );
        }
    }
    println!();
}
