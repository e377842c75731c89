//! A confidence interval for the difference of two runs' fast ends.
//!
//! A run of many samples stands for a low percentile of them ([`super::location`]), so the
//! interval shown beside a change must be about that percentile too: the Hodges-Lehmann shift
//! interval of the rank test is about the whole distribution, and under load it excluded the
//! change it was shown with (the hex trial: +48.4 % between fast ends, interval +95.9 … +156.5 %
//! between the bulks). Each run's percentile gets the distribution-free interval of order
//! statistics (the number of samples below a quantile is binomial), at half the error rate
//! each, and the difference takes the far ends of the two (Bonferroni): conservative, and
//! correct whatever the shape of the samples.

/// The interval of `head`'s `fraction` quantile minus `base`'s, at `confidence` (e.g. 0.99),
/// always holding `point` (the difference of the interpolated quantiles). Samples need not be
/// sorted; non-finite ones are ignored. None when a side has no finite sample.
pub fn quantile_difference_interval(
    base: &[f64],
    head: &[f64],
    fraction: f64,
    confidence: f64,
    point: f64,
) -> Option<(f64, f64)> {
    let each = 1.0 - (1.0 - confidence) / 2.0;
    let (base_low, base_high) = quantile_interval(base, fraction, each)?;
    let (head_low, head_high) = quantile_interval(head, fraction, each)?;
    let low = head_low - base_high;
    let high = head_high - base_low;
    Some((low.min(point), high.max(point)))
}

/// The order statistics that bracket the `fraction` quantile of `samples` with probability at
/// least `confidence` (or the sample's extremes, when it is too small for that).
fn quantile_interval(samples: &[f64], fraction: f64, confidence: f64) -> Option<(f64, f64)> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_unstable_by(f64::total_cmp);
    let n = sorted.len();
    // An upper quantile is a lower one counted from the top: the binomial sums stay short.
    let fraction = fraction.clamp(0.0, 1.0);
    let from_top = fraction > 0.5;
    let p = if from_top { 1.0 - fraction } else { fraction };
    let tail = (1.0 - confidence) / 2.0;
    let cdf = binomial_cdf_until(n, p, 1.0 - tail);
    let at_most = |k: usize| cdf.get(k).copied().unwrap_or(1.0);
    // The quantile lies beyond the k-th sample from its end (1-based) unless fewer than k
    // samples fall before it: P(B ≤ k - 1). The near end is the largest k with that at most
    // `tail`; the far end the smallest k with P(B ≥ k) = 1 - P(B ≤ k - 1) at most `tail`.
    let near = (1..=n)
        .take_while(|&k| at_most(k - 1) <= tail)
        .last()
        .unwrap_or(1);
    let far = (1..=n).find(|&k| 1.0 - at_most(k - 1) <= tail).unwrap_or(n);
    Some(if from_top {
        (sorted[n - far], sorted[n - near])
    } else {
        (sorted[near - 1], sorted[far - 1])
    })
}

/// P(B ≤ k) for k = 0, 1, … until it reaches `enough` (later values count as 1), B binomial
/// with `n` trials of probability `p`; summed term by term in log space so that thousands of
/// samples do not underflow, and stopped early so that they cost little.
fn binomial_cdf_until(n: usize, p: f64, enough: f64) -> Vec<f64> {
    if p <= 0.0 {
        return vec![1.0];
    }
    let (ln_p, ln_q) = (p.ln(), (1.0 - p).ln());
    let mut ln_choose = 0.0;
    let mut total = 0.0;
    let mut cdf = Vec::new();
    for k in 0..=n {
        if k > 0 {
            ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
        }
        total += (ln_choose + k as f64 * ln_p + (n - k) as f64 * ln_q).exp();
        cdf.push(total.min(1.0));
        if total >= enough {
            break;
        }
    }
    cdf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binomial_cdf_matches_known_values() {
        let cdf = binomial_cdf_until(30, 0.05, 2.0);
        // P(B = 0) = 0.95^30
        assert!((cdf[0] - 0.95f64.powi(30)).abs() < 1e-12);
        assert!((cdf[1] - 0.553_542_4).abs() < 1e-6, "{}", cdf[1]);
        assert!((cdf[30] - 1.0).abs() < 1e-12);
        let large = binomial_cdf_until(5_000, 0.5, 2.0);
        assert!((large[2_500] - 0.505_6).abs() < 1e-3, "{}", large[2_500]);
        assert!(
            binomial_cdf_until(5_000, 0.05, 0.999).len() < 320,
            "stops once enough"
        );
    }

    #[test]
    fn the_interval_of_a_median_brackets_it_by_order_statistics() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let (low, high) = quantile_interval(&samples, 0.5, 0.95).unwrap();
        // The textbook 95 % interval of the median of 100 is the 40th to the 61st.
        assert_eq!((low, high), (40.0, 61.0));
    }

    #[test]
    fn a_loaded_head_gets_an_interval_around_the_change_of_its_fast_end() {
        // Base: 30 samples near 62k ns. Head: its fast end near 92k, two thirds of its samples
        // slowed to 150k by other work, as in the hex trial.
        let base: Vec<f64> = (0..30)
            .map(|i| 62_000.0 + 300.0 * f64::from(i % 7))
            .collect();
        let mut head: Vec<f64> = (0..10).map(|i| 92_000.0 + 200.0 * f64::from(i)).collect();
        head.extend((0..20).map(|i| 150_000.0 + 1_000.0 * f64::from(i)));
        let point = 92_100.0 - 62_000.0;
        let (low, high) = quantile_difference_interval(&base, &head, 0.05, 0.99, point).unwrap();
        assert!(low <= point && point <= high, "{low} {point} {high}");
        assert!(
            low > 25_000.0 && high < 35_000.0,
            "about the fast ends: {low} {high}"
        );
        // With a sixth of the head fast, its 5th percentile may lie in the slow bulk: the
        // interval says so instead of pretending.
        head[5..10].fill(150_000.0);
        let (_, high) = quantile_difference_interval(&base, &head, 0.05, 0.99, point).unwrap();
        assert!(high > 80_000.0, "{high}");
    }

    #[test]
    fn an_upper_quantile_is_the_mirror_of_a_lower_one() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let (low, high) = quantile_interval(&samples, 0.95, 0.95).unwrap();
        let negated: Vec<f64> = samples.iter().map(|v| -v).collect();
        let (nlow, nhigh) = quantile_interval(&negated, 0.05, 0.95).unwrap();
        assert_eq!((low, high), (-nhigh, -nlow));
        assert!(low < 95.0 && 95.0 < high, "{low} {high}");
    }

    #[test]
    fn tiny_or_empty_samples_fall_back_to_their_extremes() {
        assert_eq!(quantile_interval(&[], 0.05, 0.99), None);
        assert_eq!(quantile_interval(&[f64::NAN], 0.05, 0.99), None);
        assert_eq!(
            quantile_interval(&[3.0, 1.0, 2.0], 0.05, 0.99),
            Some((1.0, 3.0))
        );
        let (low, high) = quantile_difference_interval(&[1.0], &[5.0], 0.05, 0.99, 4.0).unwrap();
        assert_eq!((low, high), (4.0, 4.0));
    }
}
