//! Seeded random numbers and noisy series for the property tests of this module.
//!
//! A few lines of SplitMix64 keep the tests deterministic and kymo-core free of a `rand`
//! dependency; the evaluation harness in `core/benches/verdicts` has its own generator.

use super::noise::CommitObservation;

/// SplitMix64: tiny, fast and good enough for test data.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [low, high).
    pub(crate) fn range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.uniform()
    }

    /// Standard normal (Box-Muller).
    pub(crate) fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// `len` commits around `level` with relative noise `cv` (0.02 = 2 %), single values.
pub(crate) fn noisy(rng: &mut Rng, len: usize, level: f64, cv: f64) -> Vec<CommitObservation> {
    (0..len)
        .map(|i| CommitObservation::new(i, level * (1.0 + cv * rng.normal())))
        .collect()
}

/// Multiplies the values from `start` on by `1 + fraction` (a step of `fraction`).
pub(crate) fn step(series: &mut [CommitObservation], start: usize, fraction: f64) {
    for o in &mut series[start..] {
        o.value *= 1.0 + fraction;
    }
}
