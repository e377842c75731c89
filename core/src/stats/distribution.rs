//! Normal and Student's t distributions, written out so that kymo-core needs no maths crate.
//!
//! Accuracy is what p-values and thresholds need (relative error around 1e-9 for the normal
//! tail, 1e-12 for the t distribution), including far tails such as p = 1e-12, where a
//! `1 - cdf` formulation would round to zero.

use std::f64::consts::{PI, SQRT_2};

/// Complementary error function with close to full double precision, including far tails.
///
/// Below 2.5 it uses erf's series 2/√π·e^{-x²}·Σ 2ⁿx^{2n+1}/(1·3···(2n+1)), whose terms are
/// all positive (no cancellation); above, the continued fraction
/// erfc x = e^{-x²}/√π · 1/(x + ½/(x + 1/(x + 3/2/(x + ...)))), evaluated backwards.
fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    let inv_sqrt_pi = 1.0 / PI.sqrt();
    if x < 2.5 {
        let mut term = x;
        let mut sum = x;
        let mut n = 0.0;
        while term > sum * 1e-17 {
            n += 1.0;
            term *= 2.0 * x * x / (2.0 * n + 1.0);
            sum += term;
        }
        return 1.0 - 2.0 * inv_sqrt_pi * (-x * x).exp() * sum;
    }
    let mut denominator = x;
    for k in (1..=60).rev() {
        denominator = x + (k as f64 / 2.0) / denominator;
    }
    inv_sqrt_pi * (-x * x).exp() / denominator
}

/// P(Z ≤ x) for a standard normal Z.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / SQRT_2)
}

/// P(Z > x) for a standard normal Z, accurate in the far upper tail.
pub fn normal_sf(x: f64) -> f64 {
    0.5 * erfc(x / SQRT_2)
}

/// The x with `normal_cdf(x) == p`; ±infinity at 0 and 1, NaN outside [0, 1].
///
/// Acklam's rational approximation refined by one Halley step, which brings it to full
/// double precision.
pub fn normal_quantile(p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) || p.is_nan() {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383_577_518_672_69e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    const P_LOW: f64 = 0.02425;
    let tail = |q: f64| {
        let q = (-2.0 * q.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < P_LOW {
        tail(p)
    } else if p > 1.0 - P_LOW {
        -tail(1.0 - p)
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    // One Halley step on whichever tail is small keeps the relative error tiny.
    let e = if x < 0.0 {
        normal_cdf(x) - p
    } else {
        (1.0 - p) - normal_sf(x)
    };
    let u = e * (2.0 * PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7), accurate to about 1e-15.
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.5203681218851,
        -1259.1392167224028,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507343278686905,
        -0.13857109526572012,
        9.984_369_578_019_572e-6,
        1.5056327351493116e-7,
    ];
    if x < 0.5 {
        return (PI / (PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = G[0];
    for (i, &g) in G.iter().enumerate().skip(1) {
        sum += g / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// Continued fraction for the regularized incomplete beta function (modified Lentz).
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let even = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
        for coefficient in [
            even,
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)),
        ] {
            d = 1.0 + coefficient * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + coefficient / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The continued fraction converges fast only on one side of the mean; use symmetry.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

/// P(T > t) for Student's t with `df` degrees of freedom (df > 0), accurate in the far tail.
pub fn students_t_sf(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if t.is_infinite() {
        return if t > 0.0 { 0.0 } else { 1.0 };
    }
    // Beyond a million degrees of freedom the t and normal distributions agree to 1e-6.
    if df > 1e6 {
        return normal_sf(t);
    }
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    if t > 0.0 { tail } else { 1.0 - tail }
}

/// P(T ≤ t) for Student's t with `df` degrees of freedom.
pub fn students_t_cdf(t: f64, df: f64) -> f64 {
    students_t_sf(-t, df)
}

/// Density of Student's t with `df` degrees of freedom.
fn students_t_pdf(t: f64, df: f64) -> f64 {
    let log_norm = ln_gamma((df + 1.0) / 2.0) - ln_gamma(df / 2.0) - 0.5 * (df * PI).ln();
    (log_norm - (df + 1.0) / 2.0 * (t * t / df).ln_1p()).exp()
}

/// The t with `students_t_cdf(t, df) == p`.
///
/// Newton steps on ln P(T > t), which is smooth and nearly linear in the tail, starting from
/// the normal quantile; a bracket kept around the root falls back to bisection whenever a
/// step would leave it, so it always converges, precisely even for p close to 0 or 1.
pub fn students_t_quantile(p: f64, df: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) || p.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if p == 0.5 {
        return 0.0;
    }
    if p < 0.5 {
        return -students_t_quantile(1.0 - p, df);
    }
    let upper_tail = 1.0 - p;
    if upper_tail == 0.0 {
        return f64::INFINITY;
    }
    let target = upper_tail.ln();
    // Bracket: sf(low) > upper_tail ≥ sf(high).
    let mut low = 0.0;
    let mut high = normal_quantile(p).max(1.0);
    while students_t_sf(high, df) > upper_tail {
        low = high;
        high *= 4.0;
        if high > 1e300 {
            return f64::INFINITY;
        }
    }
    let mut t = normal_quantile(p).clamp(low, high);
    for _ in 0..100 {
        let sf = students_t_sf(t, df);
        if sf > upper_tail {
            low = t;
        } else {
            high = t;
        }
        let step = (sf.ln() - target) * sf / students_t_pdf(t, df);
        if step.abs() <= 1e-14 * t.abs() {
            break;
        }
        let next = t + step;
        t = if next.is_finite() && next > low && next < high {
            next
        } else {
            0.5 * (low + high)
        };
        if high - low <= 1e-14 * high {
            break;
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64, relative: f64) -> bool {
        (actual - expected).abs() <= relative * expected.abs()
    }

    #[test]
    fn normal_tails_match_reference_values() {
        // Reference values: Python's 0.5 * math.erfc(x / sqrt(2)).
        assert!(close(normal_sf(0.0), 0.5, 1e-7));
        assert!(close(normal_sf(1.959963984540054), 0.025, 1e-7));
        assert!(close(normal_sf(3.0), 1.3498980316300946e-3, 1e-7));
        assert!(close(normal_sf(8.0), 6.22096057427178e-16, 1e-6));
        assert!(close(normal_cdf(-5.0), 2.866515718791939e-7, 1e-6));
        assert!(close(normal_cdf(1.0), 0.8413447460685429, 1e-7));
    }

    #[test]
    fn normal_quantile_inverts_the_cdf_in_both_tails() {
        for p in [
            1e-300,
            1e-15,
            1e-6,
            0.001,
            0.025,
            0.3,
            0.5,
            0.9,
            0.999,
            1.0 - 1e-12,
        ] {
            let x = normal_quantile(p);
            let back = if x < 0.0 {
                normal_cdf(x)
            } else {
                1.0 - normal_sf(x)
            };
            assert!(close(back, p, 1e-6), "p={p} x={x} back={back}");
        }
        assert!(close(normal_quantile(0.975), 1.959963984540054, 1e-9));
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert!(normal_quantile(1.5).is_nan());
    }

    #[test]
    fn students_t_matches_tabulated_quantiles() {
        // Textbook t tables (two-sided 95 % and 99 %).
        assert!(close(students_t_quantile(0.975, 1.0), 12.706204736, 1e-8));
        assert!(close(students_t_quantile(0.975, 10.0), 2.228138852, 1e-8));
        assert!(close(students_t_quantile(0.995, 24.0), 2.796939505, 1e-8));
        assert!(close(students_t_quantile(0.99, 63.0), 2.387008, 1e-6));
        assert!(close(students_t_quantile(0.025, 10.0), -2.228138852, 1e-8));
        // With one degree of freedom t is Cauchy: P(T > 1) = 1/4 exactly.
        assert!(close(students_t_sf(1.0, 1.0), 0.25, 1e-12));
        assert!(close(students_t_cdf(0.0, 7.0), 0.5, 1e-12));
    }

    #[test]
    fn students_t_quantile_inverts_the_tail_for_any_df() {
        for df in [1.0, 2.0, 3.7, 10.0, 37.0, 1e5] {
            for tail in [0.3, 0.025, 1e-3, 3.17e-5, 1e-9] {
                let t = students_t_quantile(1.0 - tail, df);
                assert!(
                    close(students_t_sf(t, df), tail, 1e-7),
                    "df {df} tail {tail} t {t}"
                );
            }
        }
    }

    #[test]
    fn students_t_far_tail_keeps_precision() {
        // With two degrees of freedom the tail is 1/2 − t / (2·sqrt(t² + 2)), in closed form.
        let t = 1000.0_f64;
        let exact = 0.5 * (1.0 - t / (t * t + 2.0).sqrt());
        assert!(close(students_t_sf(t, 2.0), exact, 1e-6));
        assert!(students_t_sf(50.0, 30.0) > 0.0);
    }
}
