//! Which number stands for a run: the location of its samples that verdicts compare.
//!
//! Timing samples taken beside other work are slowed one way only: a run's median moved from
//! 51k to 85k ns while its fastest samples stayed at 42k, and in the `hex` trial a run had
//! 66 of its 75 samples slowed (median 123k ns, fastest tenth at 63-65k). The median of such a
//! run is the machine's load, not the code's speed; the fast end is the code's speed. With
//! [`FAST_END_MIN_SAMPLES`] samples or more a run stands for the 5th percentile of its samples
//! on the side of better values (the low end for lower-is-better metrics, the high end for
//! higher-is-better ones such as throughput); with fewer, a percentile that far out is the
//! extreme itself, its spread is measured from two or three samples, and the median stands
//! for the run.

use crate::model::Direction;

use super::robust::median;

/// Fewest samples for which a run's location is its fast end rather than its median.
pub const FAST_END_MIN_SAMPLES: usize = 20;

/// How far into the better end of the samples the location sits, in percent.
const FAST_END_PERCENTILE: f64 = 5.0;

/// The location of a run's `samples` (non-finite ones ignored): the 5th percentile on the side
/// of better values with [`FAST_END_MIN_SAMPLES`] or more, the median with fewer; 0 when empty.
pub fn run_location(samples: &[f64], direction: Direction) -> f64 {
    let mut finite: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.len() < FAST_END_MIN_SAMPLES {
        return median(&finite);
    }
    finite.sort_unstable_by(f64::total_cmp);
    percentile_of_sorted(&finite, fast_end_fraction(direction))
}

/// Which quantile of a run's samples its fast end is: the 5th percentile of lower-is-better
/// samples, the 95th of higher-is-better ones.
pub(crate) fn fast_end_fraction(direction: Direction) -> f64 {
    match direction {
        Direction::Lower => FAST_END_PERCENTILE / 100.0,
        Direction::Higher => 1.0 - FAST_END_PERCENTILE / 100.0,
    }
}

/// A stored run's value as verdicts see it: the fast end of its `samples` when it has
/// [`FAST_END_MIN_SAMPLES`] or more, else `value` (what the run reported, e.g. a harness's own
/// estimate when it sent few samples or none).
pub fn run_value(value: f64, samples: &[f64], direction: Direction) -> f64 {
    if samples.len() < FAST_END_MIN_SAMPLES {
        value
    } else {
        run_location(samples, direction)
    }
}

/// The spread of a run's samples near its fast end, as a standard deviation relative to the
/// location: the distance from the 5th to the 25th percentile on the side of better values,
/// which is 0.97 standard deviations of normal samples. None with fewer than
/// [`FAST_END_MIN_SAMPLES`] finite samples or a location that is not positive. Other work slows
/// some samples and widens the spread around the median; the fast end keeps the code's own.
pub(crate) fn fast_end_spread(samples: &[f64], direction: Direction) -> Option<f64> {
    let mut finite: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.len() < FAST_END_MIN_SAMPLES {
        return None;
    }
    finite.sort_unstable_by(f64::total_cmp);
    let (end, inner) = match direction {
        Direction::Lower => (0.05, 0.25),
        Direction::Higher => (0.95, 0.75),
    };
    let location = percentile_of_sorted(&finite, end);
    let width = (percentile_of_sorted(&finite, inner) - location).abs();
    (location > 0.0).then(|| (width / NORMAL_5_TO_25_PERCENTILE / location).min(f64::MAX))
}

/// The best of a run's finite `samples` (the fastest time, the highest throughput), when the
/// run stands for its fast end ([`FAST_END_MIN_SAMPLES`] or more samples). Other work only
/// slows samples, so no run of some code is faster than that code: a run's best sample bounds
/// its code's speed even when load slowed every other sample.
pub(crate) fn best_sample(samples: &[f64], direction: Direction) -> Option<f64> {
    let finite = samples.iter().copied().filter(|v| v.is_finite());
    if finite.clone().count() < FAST_END_MIN_SAMPLES {
        return None;
    }
    match direction {
        Direction::Lower => finite.reduce(f64::min),
        Direction::Higher => finite.reduce(f64::max),
    }
}

/// The distance from the 5th to the 25th percentile of a normal distribution, in standard
/// deviations.
const NORMAL_5_TO_25_PERCENTILE: f64 = 1.644_853_626_951 - 0.674_489_750_196;

/// The `fraction` quantile of sorted, non-empty `values`, interpolated linearly between order
/// statistics (the usual definition 7 of Hyndman and Fan).
fn percentile_of_sorted(values: &[f64], fraction: f64) -> f64 {
    let at = fraction * (values.len() - 1) as f64;
    let below = at.floor() as usize;
    let above = (below + 1).min(values.len() - 1);
    let weight = at - below as f64;
    if weight == 0.0 {
        return values[below];
    }
    let between = values[below] + (values[above] - values[below]) * weight;
    if between.is_finite() {
        between
    } else {
        // The difference overflowed (values of opposite signs near f64::MAX).
        values[below] * (1.0 - weight) + values[above] * weight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_run_stands_for_its_fast_end() {
        // 66 of 75 samples slowed by other work, as in the hex trial's third run.
        let mut samples = vec![123_000.0; 66];
        samples.extend([62_700.0, 63_100.0, 63_300.0, 63_400.0, 63_400.0, 63_600.0]);
        samples.extend([63_900.0, 64_400.0, 65_500.0]);
        let location = run_location(&samples, Direction::Lower);
        assert!((63_300.0..63_500.0).contains(&location), "{location}");
        // Throughput: the high end.
        let throughput: Vec<f64> = samples.iter().map(|ns| 1e9 / ns).collect();
        let location = run_location(&throughput, Direction::Higher);
        assert!(
            (1e9 / 63_500.0..1e9 / 63_300.0).contains(&location),
            "{location}"
        );
    }

    #[test]
    fn the_spread_of_a_loaded_run_is_measured_at_its_fast_end() {
        let mut samples = vec![123_000.0; 50];
        samples.extend((0..25).map(|i| 62_000.0 + 40.0 * f64::from(i)));
        let spread = fast_end_spread(&samples, Direction::Lower).unwrap();
        assert!(spread < 0.01, "{spread}");
        assert_eq!(fast_end_spread(&samples[..19], Direction::Lower), None);
        let negative = vec![-1.0; 20];
        assert_eq!(fast_end_spread(&negative, Direction::Lower), None);
    }

    #[test]
    fn few_samples_stand_for_their_median() {
        assert_eq!(run_location(&[3.0, 1.0, 2.0], Direction::Lower), 2.0);
        assert_eq!(run_location(&[3.0, 1.0, 2.0, 10.0], Direction::Higher), 2.5);
        assert_eq!(run_location(&[], Direction::Lower), 0.0);
        let nineteen: Vec<f64> = (1..=19).map(f64::from).collect();
        assert_eq!(run_location(&nineteen, Direction::Lower), 10.0);
    }

    #[test]
    fn the_percentile_interpolates_and_ignores_non_finite_samples() {
        let mut samples: Vec<f64> = (0..=40).map(f64::from).collect();
        samples.push(f64::NAN);
        samples.push(f64::INFINITY);
        assert_eq!(run_location(&samples, Direction::Lower), 2.0);
        assert_eq!(run_location(&samples, Direction::Higher), 38.0);
        let huge = vec![f64::MAX; 20];
        assert_eq!(run_location(&huge, Direction::Lower), f64::MAX);
    }
}
