//! Mann-Whitney U test and the Hodges-Lehmann interval for the shift between two samples.
//!
//! Rank tests make no assumption about the shape of benchmark noise (often skewed or
//! bimodal), which is why both kymo's per-commit test and its change-point confirmation use
//! them. Small samples without ties get the exact distribution of U; others the normal
//! approximation with tie and continuity corrections (the same conventions as R's
//! `wilcox.test` and SciPy's `mannwhitneyu`).

use super::distribution::{normal_quantile, normal_sf};

/// Below this cost (min(m, n) × the smaller tail of U) the exact distribution of U is cheap
/// enough to compute (about 20 µs at the limit). Significant results have a small tail, so
/// they get exact p-values even for large samples; near the centre the normal approximation
/// is accurate anyway.
const EXACT_COST_LIMIT: usize = 10_000;

/// The same for the exact distribution with ties, which costs about 2·N²·min(m, n)².
const EXACT_TIES_COST_LIMIT: usize = 2_000_000;

/// Pairwise differences are capped at this many; larger samples are thinned to evenly spaced
/// order statistics first, which keeps the interval's position and nearly its width.
const MAX_PAIRS: usize = 40_000;

/// The outcome of a two-sided Mann-Whitney U test of `a` against `b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RankTest {
    /// Number of pairs (aᵢ, bⱼ) with aᵢ > bⱼ, ties counting one half.
    pub u: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// Two-sided Mann-Whitney U test; p = 1 when either side is empty.
pub(crate) fn mann_whitney(a: &[f64], b: &[f64]) -> RankTest {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return RankTest {
            u: 0.0,
            p_value: 1.0,
        };
    }
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    pooled.sort_unstable_by(|x, y| x.0.total_cmp(&y.0));

    // Mid-ranks for ties; the tie term corrects the variance.
    let total = pooled.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < total {
        let mut j = i + 1;
        while j < total && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        let mid_rank = (i + j + 1) as f64 / 2.0;
        let group = (j - i) as f64;
        tie_term += group * group * group - group;
        rank_sum_a += mid_rank * pooled[i..j].iter().filter(|x| x.1).count() as f64;
        i = j;
    }
    let (mf, nf) = (m as f64, n as f64);
    let u = rank_sum_a - mf * (mf + 1.0) / 2.0;
    let pairs = mf * nf;

    let tail_u = (u.round() as usize).min(m * n - (u.round() as usize).min(m * n));
    let p_value = if tie_term == 0.0 && m.min(n) * tail_u <= EXACT_COST_LIMIT {
        exact_two_sided(u.round() as usize, m, n)
    } else if tie_term > 0.0 && 2 * total * total * m.min(n) * m.min(n) <= EXACT_TIES_COST_LIMIT {
        exact_two_sided_with_ties(&pooled, m <= n)
    } else {
        let big_n = mf + nf;
        let variance = pairs / 12.0 * ((big_n + 1.0) - tie_term / (big_n * (big_n - 1.0)));
        if variance <= 0.0 {
            1.0
        } else {
            let z = ((u - pairs / 2.0).abs() - 0.5).max(0.0) / variance.sqrt();
            (2.0 * normal_sf(z)).min(1.0)
        }
    };
    RankTest { u, p_value }
}

/// Exact two-sided p-value of U = `u` for sample sizes `m` and `n` without ties.
///
/// The number of orderings with U = k is the coefficient of q^k in the Gaussian binomial
/// [m+n choose m]_q, built by multiplying in (1 − q^{n+i})/(1 − q^i) for i = 1..m. A
/// coefficient depends only on lower ones, so the polynomial is kept only up to the smaller
/// tail of U (small coefficients, exact in f64); the other tail follows by symmetry.
pub(super) fn exact_two_sided(u: usize, m: usize, n: usize) -> f64 {
    let (m, n) = (m.min(n), m.max(n));
    let u = u.min(m * n - u);
    let mut counts = vec![0.0_f64; u + 1];
    counts[0] = 1.0;
    for i in 1..=m {
        let shift = n + i;
        for k in (shift..=u).rev() {
            counts[k] -= counts[k - shift];
        }
        for k in i..=u {
            counts[k] += counts[k - i];
        }
    }
    let total = log_binomial(m + n, m).exp();
    let lower_tail: f64 = counts.iter().sum();
    (2.0 * lower_tail / total).min(1.0)
}

/// Exact two-sided p-value of the rank sum given the observed ties (the permutation
/// distribution conditional on the tie pattern), for small samples where the normal
/// approximation is poor in the tails. `pooled` is sorted, flagged `true` for the first
/// sample; `first_is_smaller` says which sample to enumerate subsets of.
///
/// Doubled mid-ranks are integers, so a subset-sum count over them is exact; the statistic
/// is the distance of the rank sum from its mean, as in R's coin and StatXact.
fn exact_two_sided_with_ties(pooled: &[(f64, bool)], first_is_smaller: bool) -> f64 {
    let total = pooled.len();
    let mut doubled_ranks = Vec::with_capacity(total);
    let mut observed = 0;
    let mut chosen = 0;
    let mut i = 0;
    while i < total {
        let mut j = i + 1;
        while j < total && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        for item in &pooled[i..j] {
            doubled_ranks.push(i + j + 1);
            if item.1 == first_is_smaller {
                observed += i + j + 1;
                chosen += 1;
            }
        }
        i = j;
    }
    let max_sum: usize = doubled_ranks.iter().rev().take(chosen).sum();
    // ways[k][s]: subsets of k items whose doubled ranks sum to s.
    let width = max_sum + 1;
    let mut ways = vec![0.0_f64; (chosen + 1) * width];
    ways[0] = 1.0;
    for (seen, &rank) in doubled_ranks.iter().enumerate() {
        for k in (1..=chosen.min(seen + 1)).rev() {
            let (lower, upper) = ways.split_at_mut(k * width);
            let from = &lower[(k - 1) * width..];
            for s in (rank..width).rev() {
                upper[s] += from[s - rank];
            }
        }
    }
    let counts = &ways[chosen * width..];
    let mean = chosen * (total + 1);
    let distance = observed.abs_diff(mean);
    let all: f64 = counts.iter().sum();
    let extreme: f64 = counts
        .iter()
        .enumerate()
        .filter(|(s, _)| s.abs_diff(mean) >= distance)
        .map(|(_, c)| c)
        .sum();
    (extreme / all).min(1.0)
}

fn log_binomial(n: usize, k: usize) -> f64 {
    (1..=k).map(|i| ((n - k + i) as f64 / i as f64).ln()).sum()
}

/// Two-sided confidence interval at `confidence` for the shift θ with `head ≈ base + θ`
/// (Hodges-Lehmann: order statistics of the pairwise differences picked by U's distribution).
/// Returns (low, high) in the metric's unit; both sides must be non-empty.
pub(crate) fn shift_interval(base: &[f64], head: &[f64], confidence: f64) -> (f64, f64) {
    let base = thinned(base, MAX_PAIRS / head.len().clamp(1, 200));
    let head = thinned(head, MAX_PAIRS / base.len().max(1));
    let (m, n) = (base.len() as f64, head.len() as f64);
    let mut differences: Vec<f64> = head
        .iter()
        .flat_map(|h| base.iter().map(move |b| h - b))
        .collect();
    let count = differences.len();
    if count == 0 {
        return (0.0, 0.0);
    }
    let z = normal_quantile(1.0 - (1.0 - confidence) / 2.0);
    let spread = z * (m * n * (m + n + 1.0) / 12.0).sqrt();
    // Rank (1-based) of the lower bound; too few pairs for the confidence → widest interval.
    let k = ((m * n / 2.0 - spread).floor() as usize).clamp(1, count.div_ceil(2));
    let (_, low, upper_part) = differences.select_nth_unstable_by(k - 1, f64::total_cmp);
    let low = *low;
    let high = if count - k == k - 1 {
        low
    } else {
        let offset = count - k - k;
        *upper_part.select_nth_unstable_by(offset, f64::total_cmp).1
    };
    (low, high)
}

/// At most `limit` evenly spaced order statistics of `values` (all of them if few enough).
fn thinned(values: &[f64], limit: usize) -> Vec<f64> {
    let limit = limit.max(2);
    if values.len() <= limit {
        return values.to_vec();
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    (0..limit)
        .map(|i| sorted[(i * (sorted.len() - 1) + (limit - 1) / 2) / (limit - 1)])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64, relative: f64) -> bool {
        (actual - expected).abs() <= relative * expected.abs()
    }

    #[test]
    fn exact_p_values_match_hand_counted_distributions() {
        // [1,2,3] vs [4,5,6]: U = 0, P(U ≤ 0) = 1/C(6,3) = 1/20, two-sided 0.1
        // (SciPy mannwhitneyu(..., method="exact") agrees).
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert_eq!(t.u, 0.0);
        assert!(close(t.p_value, 0.1, 1e-12));
        // Two samples of five, fully separated: 2/C(10,5) = 2/252 = 0.0079365.
        let t = mann_whitney(&[6.0, 7.0, 8.0, 9.0, 10.0], &[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(t.u, 25.0);
        assert!(close(t.p_value, 2.0 / 252.0, 1e-12));
        // [1,3,5] vs [2,4,6,8]: U = 3. Partitions in a 3×4 box give counts 1,1,2,3 for
        // U = 0..3 out of C(7,3) = 35, so P(U ≤ 3) = 7/35 and two-sided p = 0.4.
        let t = mann_whitney(&[1.0, 3.0, 5.0], &[2.0, 4.0, 6.0, 8.0]);
        assert_eq!(t.u, 3.0);
        assert!(close(t.p_value, 0.4, 1e-12));
        // Identical middle: U = mn/2 gives p = 1.
        let t = mann_whitney(&[1.0, 4.0], &[2.0, 3.0]);
        assert_eq!(t.p_value, 1.0);
    }

    #[test]
    fn normal_approximation_matches_hand_computations() {
        // x = 1..=50, y = 26.5..=75.5: pairs with x > y number 1+2+…+24 = 300. No ties,
        // mean 1250, variance 2500·101/12, continuity-corrected z = 949.5/145.057 = 6.54568,
        // p = erfc(z/√2) = 5.92245e-11 (Python math.erfc). 50·50·50 is above the exact limit.
        let x: Vec<f64> = (1..=50).map(f64::from).collect();
        let y: Vec<f64> = (1..=50).map(|i| 25.5 + f64::from(i)).collect();
        let t = mann_whitney(&x, &y);
        assert_eq!(t.u, 300.0);
        assert!(
            close(t.p_value, 5.922449396792085e-11, 1e-6),
            "{}",
            t.p_value
        );
        // With ties, in samples too large for the exact count: 25×1 and 25×2 against 25×2
        // and 25×3. Mid-ranks 13, 50.5 and 88 give U = 312.5; Σ(t³ − t) = 2·15600 + 124950,
        // variance 2500/12·(101 − 156150/9900) = 17755.68, z = 937/133.25 = 7.03193,
        // p = erfc(z/√2) = 2.0378e-12 (R's wilcox.test(exact = FALSE) uses the same formula).
        let a: Vec<f64> = [1.0; 25].into_iter().chain([2.0; 25]).collect();
        let b: Vec<f64> = [2.0; 25].into_iter().chain([3.0; 25]).collect();
        let t = mann_whitney(&a, &b);
        assert_eq!(t.u, 312.5);
        assert!(
            close(t.p_value, 2.037817228566215e-12, 1e-6),
            "{}",
            t.p_value
        );
    }

    #[test]
    fn exact_and_approximate_agree_for_moderate_samples() {
        let a: Vec<f64> = (0..30).map(|i| f64::from(i) * 1.37 % 17.0).collect();
        let b: Vec<f64> = (0..25).map(|i| f64::from(i) * 2.11 % 19.0 + 3.05).collect();
        let exact = mann_whitney(&a, &b).p_value;
        let n = 55.0_f64;
        let u = mann_whitney(&a, &b).u;
        let z = ((u - 375.0).abs() - 0.5) / (750.0 / 12.0 * (n + 1.0)).sqrt();
        let approx = 2.0 * normal_sf(z);
        assert!(
            (exact - approx).abs() < 0.01,
            "exact {exact} approx {approx}"
        );
    }

    #[test]
    fn ties_in_small_samples_get_exact_p_values() {
        // Five tied values above fifty distinct ones: only the top five (and, at the same
        // distance from the mean, the bottom five) are as extreme, so p = 2/C(55,5).
        let low: Vec<f64> = (0..50).map(f64::from).collect();
        let t = mann_whitney(&[100.0; 5], &low);
        assert!(close(t.p_value, 2.0 / 3_478_761.0, 1e-9), "{}", t.p_value);
        // [1,2,2,3] vs [2,3,3,4], enumerated by hand over the C(8,4) = 70 splits of the
        // doubled mid-ranks {2,6,6,6,12,12,12,16}: the first sample's sum is 26 against a
        // mean of 36, and 20 of the 70 splits are at least 10 away, so p = 2/7.
        let t = mann_whitney(&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 3.0, 4.0]);
        assert!(close(t.p_value, 20.0 / 70.0, 1e-12), "{}", t.p_value);
    }

    #[test]
    fn identical_and_empty_samples_are_not_significant() {
        assert_eq!(mann_whitney(&[5.0; 10], &[5.0; 10]).p_value, 1.0);
        assert_eq!(mann_whitney(&[], &[1.0]).p_value, 1.0);
    }

    #[test]
    fn shift_interval_brackets_a_known_shift() {
        let base: Vec<f64> = (0..40).map(|i| 100.0 + f64::from(i % 7)).collect();
        let head: Vec<f64> = base.iter().map(|v| v + 10.0).collect();
        let (low, high) = shift_interval(&base, &head, 0.95);
        assert!(low <= 10.0 && 10.0 <= high, "{low}..{high}");
        assert!(high - low < 4.0);
        let (low, high) = shift_interval(&[1.0], &[3.0], 0.99);
        assert_eq!((low, high), (2.0, 2.0));
    }

    #[test]
    fn shift_interval_thins_huge_samples() {
        let base: Vec<f64> = (0..5000).map(|i| f64::from(i % 101)).collect();
        let head: Vec<f64> = base.iter().map(|v| v + 20.0).collect();
        let (low, high) = shift_interval(&base, &head, 0.99);
        assert!(
            low <= 20.0 && 20.0 <= high && high - low < 20.0,
            "{low}..{high}"
        );
    }
}
