//! Change points scored as the TCPD benchmark scores them (van den Burg & Williams, "An
//! evaluation of change point detection algorithms", 2020): F1 with a margin of 5 points,
//! where the start of the series counts as a change point in both the truth and the
//! prediction, averaged over series. A method that never reports anything scores 1 on a
//! series without changes and 2/(k + 2) on one with k, so it is the bar to clear.

/// Points a prediction may be from a true change and still count.
pub const TCPD_MARGIN: usize = 5;

/// Matches each true change point with the closest unused prediction within the margin.
fn true_positives(truth: &[usize], predicted: &[usize]) -> usize {
    let mut left: Vec<usize> = predicted.to_vec();
    let mut found = 0;
    for &tau in truth {
        let closest = (left.iter().enumerate())
            .filter(|(_, x)| x.abs_diff(tau) <= TCPD_MARGIN)
            .min_by_key(|(_, x)| (x.abs_diff(tau), **x));
        if let Some((i, _)) = closest {
            left.remove(i);
            found += 1;
        }
    }
    found
}

/// TCPD's F1 of one series with one annotation: precision and recall over the sets of
/// change points with the start (0) added to both.
pub fn tcpd_f1(truth: &[usize], predicted: &[usize]) -> f64 {
    let with_start = |points: &[usize]| {
        let mut all: Vec<usize> = std::iter::once(0).chain(points.iter().copied()).collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    let (truth, predicted) = (with_start(truth), with_start(predicted));
    let found = true_positives(&truth, &predicted) as f64;
    let precision = found / predicted.len() as f64;
    let recall = found / truth.len() as f64;
    if precision + recall == 0.0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    }
}

/// Checks of the definition, run before the evaluation.
pub fn self_check() {
    assert_eq!(tcpd_f1(&[], &[]), 1.0);
    assert_eq!(tcpd_f1(&[100], &[]), 2.0 / 3.0);
    assert_eq!(tcpd_f1(&[100], &[104]), 1.0);
    assert_eq!(tcpd_f1(&[100], &[106]), 2.0 * (0.5 * 0.5) / 1.0);
    assert_eq!(tcpd_f1(&[], &[50, 60]), 0.5);
    // Each true change point takes one prediction: the second near it is a false one.
    assert_eq!(
        tcpd_f1(&[100], &[99, 101]),
        2.0 * (2.0 / 3.0) / (2.0 / 3.0 + 1.0)
    );
}
