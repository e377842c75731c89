//! One step of a bisection: is the commit in the middle at the old level or the new one?

use super::robust::median;

/// What a bisection learns from a probe commit's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeDecision {
    /// At the old level: the change came later.
    Good,
    /// At the new level: the change is this commit or earlier.
    Bad,
    /// Between the levels or straddling them: measure it again.
    Repeat,
    /// The two ends are at the same level: there is nothing to bisect.
    Undecidable,
}

/// Share of the way from the good level to the bad one beyond which a probe counts as that
/// side, for its median and for the share of its samples on that side.
const CLEAR_SIDE: f64 = 0.7;

/// Classifies a probe from its samples and those of the good and bad ends. A probe that is not
/// clearly on one side is measured again, up to `max_runs` runs; after that it goes to the
/// nearer level.
pub fn classify_probe(
    good: &[f64],
    bad: &[f64],
    probe: &[f64],
    runs: usize,
    max_runs: usize,
) -> ProbeDecision {
    let finite = |v: &[f64]| {
        v.iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect::<Vec<f64>>()
    };
    let (good, bad, probe) = (finite(good), finite(bad), finite(probe));
    if good.is_empty() || bad.is_empty() || probe.is_empty() {
        return ProbeDecision::Undecidable;
    }
    let (good_level, bad_level) = (median(&good), median(&bad));
    let span = bad_level - good_level;
    if span == 0.0 || !span.is_finite() {
        return ProbeDecision::Undecidable;
    }
    // How far along from good (0) to bad (1) a value sits.
    let along = |v: f64| (v - good_level) / span;
    let level = along(median(&probe));
    let bad_share = probe.iter().filter(|v| along(**v) > 0.5).count() as f64 / probe.len() as f64;
    if level >= CLEAR_SIDE && bad_share >= CLEAR_SIDE {
        ProbeDecision::Bad
    } else if level <= 1.0 - CLEAR_SIDE && bad_share <= 1.0 - CLEAR_SIDE {
        ProbeDecision::Good
    } else if runs < max_runs {
        ProbeDecision::Repeat
    } else if level >= 0.5 {
        ProbeDecision::Bad
    } else {
        ProbeDecision::Good
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: [f64; 5] = [100.0, 101.0, 99.0, 100.5, 99.5];
    const BAD: [f64; 5] = [130.0, 131.0, 129.0, 130.5, 129.5];

    #[test]
    fn a_probe_at_either_level_is_decided_at_once() {
        assert_eq!(
            classify_probe(&GOOD, &BAD, &[100.2, 99.8, 101.0], 1, 3),
            ProbeDecision::Good
        );
        assert_eq!(
            classify_probe(&GOOD, &BAD, &[129.0, 131.0, 130.0], 1, 3),
            ProbeDecision::Bad
        );
        // Direction does not matter: an improvement is bisected the same way.
        assert_eq!(
            classify_probe(&BAD, &GOOD, &[100.0], 1, 3),
            ProbeDecision::Bad
        );
    }

    #[test]
    fn an_ambiguous_probe_is_repeated_then_sent_to_the_nearer_level() {
        let between = [112.0, 113.0, 121.0];
        assert_eq!(
            classify_probe(&GOOD, &BAD, &between, 1, 3),
            ProbeDecision::Repeat
        );
        assert_eq!(
            classify_probe(&GOOD, &BAD, &between, 3, 3),
            ProbeDecision::Good
        );
        let straddling = [100.0, 130.0, 131.0, 99.0];
        assert_eq!(
            classify_probe(&GOOD, &BAD, &straddling, 2, 3),
            ProbeDecision::Repeat
        );
    }

    #[test]
    fn equal_ends_or_missing_samples_cannot_be_bisected() {
        assert_eq!(
            classify_probe(&GOOD, &GOOD, &GOOD, 1, 3),
            ProbeDecision::Undecidable
        );
        assert_eq!(
            classify_probe(&GOOD, &BAD, &[], 1, 3),
            ProbeDecision::Undecidable
        );
        assert_eq!(
            classify_probe(&GOOD, &BAD, &[f64::NAN], 1, 3),
            ProbeDecision::Undecidable
        );
    }
}
