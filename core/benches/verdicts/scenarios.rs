//! The scenarios of the evaluation: which kinds of series, with which changes.

use crate::generator::Recipe;

/// A named family of labeled series.
pub struct Scenario {
    pub name: &'static str,
    pub recipe: Recipe,
    /// Counted in the "steps ≥ 3σ" target.
    pub three_sigma: bool,
    /// A family with a trend, a seasonal swing or a wandering level (scored for the
    /// "beats every other method" target by TCPD's F1 against never reporting instead).
    pub smooth: bool,
}

const NONE: (usize, usize) = (0, 0);

pub fn scenarios() -> Vec<Scenario> {
    let base = Recipe {
        steps: NONE,
        min_snr: 0.0,
        spikes: NONE,
        drifts: NONE,
        bimodal: false,
        varied_samples: false,
        trend: false,
        season: false,
        walk: false,
    };
    vec![
        Scenario {
            name: "clean",
            recipe: base,
            three_sigma: false,
            smooth: false,
        },
        Scenario {
            name: "clean, bimodal",
            recipe: Recipe {
                bimodal: true,
                ..base
            },
            three_sigma: false,
            smooth: false,
        },
        Scenario {
            name: "steps ≥ 3σ",
            recipe: Recipe {
                steps: (1, 4),
                min_snr: 3.0,
                ..base
            },
            three_sigma: true,
            smooth: false,
        },
        Scenario {
            name: "spikes + steps ≥ 3σ",
            recipe: Recipe {
                steps: (1, 2),
                min_snr: 3.0,
                spikes: (2, 5),
                ..base
            },
            three_sigma: true,
            smooth: false,
        },
        Scenario {
            name: "bimodal + steps ≥ 3σ",
            recipe: Recipe {
                steps: (1, 4),
                min_snr: 3.0,
                bimodal: true,
                ..base
            },
            three_sigma: true,
            smooth: false,
        },
        Scenario {
            name: "1–30 samples + steps ≥ 3σ",
            recipe: Recipe {
                steps: (1, 4),
                min_snr: 3.0,
                varied_samples: true,
                ..base
            },
            three_sigma: true,
            smooth: false,
        },
        Scenario {
            name: "steps 1–50 % (any σ)",
            recipe: Recipe {
                steps: (1, 4),
                ..base
            },
            three_sigma: false,
            smooth: false,
        },
        Scenario {
            name: "slow drifts",
            recipe: Recipe {
                drifts: (1, 2),
                ..base
            },
            three_sigma: false,
            smooth: false,
        },
        Scenario {
            name: "everything",
            recipe: Recipe {
                steps: (1, 3),
                spikes: (0, 3),
                drifts: (0, 1),
                bimodal: false,
                varied_samples: true,
                ..base
            },
            three_sigma: false,
            smooth: false,
        },
        Scenario {
            name: "trending (0–2 steps ≥ 3σ)",
            recipe: Recipe {
                steps: (0, 2),
                min_snr: 3.0,
                trend: true,
                ..base
            },
            three_sigma: false,
            smooth: true,
        },
        Scenario {
            name: "seasonal (0–2 steps ≥ 3σ)",
            recipe: Recipe {
                steps: (0, 2),
                min_snr: 3.0,
                season: true,
                ..base
            },
            three_sigma: false,
            smooth: true,
        },
        Scenario {
            name: "drifting (0–2 steps ≥ 3σ)",
            recipe: Recipe {
                steps: (0, 2),
                min_snr: 3.0,
                walk: true,
                ..base
            },
            three_sigma: false,
            smooth: true,
        },
    ]
}
