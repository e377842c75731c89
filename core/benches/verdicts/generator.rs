//! Labeled synthetic series: noise of 0.5–10 % (normal or bimodal, single values or samples),
//! steps of 1–50 % up and down, spikes that revert, and slow drifts.
//!
//! Every series is built from a seed, so the whole evaluation is reproducible.

use kymo_core::stats::CommitObservation;

/// xoshiro256** seeded through SplitMix64: small, fast and deterministic.
pub struct Rng([u64; 4]);

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Self([next(), next(), next(), next()])
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.uniform()
    }

    /// Log-uniform in [low, high): as many small values as large ones, per decade.
    pub fn log_range(&mut self, low: f64, high: f64) -> f64 {
        (low.ln() + (high.ln() - low.ln()) * self.uniform()).exp()
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize
    }

    pub fn coin(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Step,
    Spike,
    Drift,
}

/// A labeled change: the level moves over `[start, end)` (one commit for a step) and stays.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub start: usize,
    pub end: usize,
    /// Whether the value goes up (a regression for lower-is-better metrics).
    pub rise: bool,
    pub is_step: bool,
}

/// A synthetic series with its ground truth.
pub struct Labeled {
    pub observations: Vec<CommitObservation>,
    pub events: Vec<Event>,
}

/// What a scenario puts in its series.
#[derive(Debug, Clone, Copy)]
pub struct Recipe {
    pub steps: (usize, usize),
    /// Steps are at least this many noise σ (0: anywhere in 1–50 %).
    pub min_snr: f64,
    pub spikes: (usize, usize),
    pub drifts: (usize, usize),
    pub bimodal: bool,
    /// Samples per commit vary from 1 to 30 within the series.
    pub varied_samples: bool,
    /// A smooth trend: the level moves 20–100 % up or down over the whole series.
    pub trend: bool,
    /// A seasonal swing: a sinusoid of period 20–120 commits and amplitude 0.5–2 σ.
    pub season: bool,
    /// A level that drifts as a random walk (steps of 0.05–0.15 σ per commit).
    pub walk: bool,
}

pub const LEN: usize = 500;
/// Events start no closer than this to each other or to the series' start.
const SPACING: usize = 45;

/// Builds one labeled series of `LEN` commits following `recipe`.
pub fn generate(rng: &mut Rng, recipe: &Recipe) -> Labeled {
    let level = rng.log_range(1e2, 1e6);
    let cv = rng.log_range(0.005, 0.10);
    // Part of the variance comes from run to run, the rest from samples within a run.
    let between_share = rng.range(0.3, 1.0);
    let fixed_samples = [1, 5, 10][rng.below(3)];
    let (gap, upper_share) = if recipe.bimodal {
        (rng.range(2.0, 5.0) * cv, rng.range(0.15, 0.5))
    } else {
        (0.0, 0.0)
    };
    let sigma = (cv * cv + upper_share * (1.0 - upper_share) * gap * gap).sqrt();

    // Positions: one per slot of SPACING commits, none in the first slot; a drift takes
    // two slots so that it ends before the next event starts.
    let count = |(low, high): (usize, usize), rng: &mut Rng| low + rng.below(high - low + 1);
    let kinds = [Kind::Step, Kind::Spike, Kind::Drift];
    let counts = [
        count(recipe.steps, rng),
        count(recipe.spikes, rng),
        count(recipe.drifts, rng),
    ];
    let mut free: Vec<usize> = (1..LEN / SPACING - 1).collect();
    let mut factor = vec![1.0; LEN];
    let mut events = Vec::new();
    for (kind, n) in kinds.into_iter().zip(counts) {
        for _ in 0..n {
            let usable: Vec<usize> = free
                .iter()
                .copied()
                .filter(|s| kind != Kind::Drift || free.contains(&(s + 1)))
                .collect();
            if usable.is_empty() {
                break;
            }
            let slot = usable[rng.below(usable.len())];
            free.retain(|&s| s != slot && (kind != Kind::Drift || s != slot + 1));
            let at = slot * SPACING + rng.below(SPACING / 3);
            let rise = rng.coin(0.5);
            match kind {
                Kind::Step => {
                    let low = (recipe.min_snr * sigma).max(0.01);
                    let size = if low >= 0.5 {
                        low
                    } else {
                        rng.log_range(low, 0.5)
                    };
                    let ratio = if rise { 1.0 + size } else { 1.0 - size };
                    factor[at..].iter_mut().for_each(|f| *f *= ratio);
                    events.push(Event {
                        start: at,
                        end: at + 1,
                        rise,
                        is_step: true,
                    });
                }
                Kind::Spike => {
                    let length = 1 + rng.below(3);
                    let size = rng.range(0.05, 0.5).max(4.0 * sigma);
                    let ratio = if rise { 1.0 + size } else { 1.0 / (1.0 + size) };
                    factor[at..at + length].iter_mut().for_each(|f| *f *= ratio);
                }
                Kind::Drift => {
                    let length = 20 + rng.below(41);
                    let total = rng.range(0.10, 0.30);
                    let target = if rise {
                        1.0 + total
                    } else {
                        1.0 / (1.0 + total)
                    };
                    for (i, f) in factor.iter_mut().enumerate().skip(at) {
                        let progress = ((i + 1 - at) as f64 / length as f64).min(1.0);
                        *f *= target.powf(progress);
                    }
                    events.push(Event {
                        start: at,
                        end: at + length,
                        rise,
                        is_step: false,
                    });
                }
            }
        }
    }
    events.sort_by_key(|e| e.start);
    smooth_movements(rng, recipe, sigma, &mut factor);

    let observations = (0..LEN)
        .map(|i| {
            let samples = if recipe.varied_samples {
                1 + rng.below(30)
            } else {
                fixed_samples
            };
            // The within-run spread is set so that a commit's median has the intended share
            // of the noise at the series' usual sample count.
            let median_factor = if fixed_samples <= 2 {
                1.0 / fixed_samples as f64
            } else {
                std::f64::consts::PI / (2.0 * fixed_samples as f64)
            };
            let within = cv * ((1.0 - between_share) / median_factor).sqrt();
            let mode = if rng.coin(upper_share) {
                1.0 + gap
            } else {
                1.0
            };
            let run = level * factor[i] * mode * (1.0 + cv * between_share.sqrt() * rng.normal());
            let values: Vec<f64> = (0..samples)
                .map(|_| run * (1.0 + within * rng.normal()))
                .collect();
            if samples == 1 {
                CommitObservation::new(i, values[0])
            } else {
                CommitObservation::from_samples(i, values)
            }
        })
        .collect();
    Labeled {
        observations,
        events,
    }
}

/// The movements that are no change point: a trend, a seasonal swing, a random-walk drift.
fn smooth_movements(rng: &mut Rng, recipe: &Recipe, sigma: f64, factor: &mut [f64]) {
    if recipe.trend {
        let total = rng.range(0.2, 1.0) * if rng.coin(0.5) { 1.0 } else { -0.5 };
        for (i, f) in factor.iter_mut().enumerate() {
            *f *= 1.0 + total * i as f64 / LEN as f64;
        }
    }
    if recipe.season {
        let period = rng.range(20.0, 120.0);
        let amplitude = rng.range(0.5, 2.0) * sigma;
        let phase = rng.range(0.0, std::f64::consts::TAU);
        for (i, f) in factor.iter_mut().enumerate() {
            *f *= 1.0 + amplitude * (std::f64::consts::TAU * i as f64 / period + phase).sin();
        }
    }
    if recipe.walk {
        let step = rng.range(0.05, 0.15) * sigma;
        let mut level: f64 = 0.0;
        for f in factor.iter_mut() {
            level += step * rng.normal();
            *f *= level.exp();
        }
    }
}
