use super::*;
use crate::stats::VerdictKind;
use crate::stats::synthetic::Rng;

/// A generated history of `len` commits: noise of 0.5–5 %, steps up and down, a slow drift,
/// spikes that revert, and (for every other seed) five samples a commit, so that the
/// recent-change test has samples to rank.
fn history(seed: u64, len: usize) -> Vec<CommitObservation> {
    let mut rng = Rng::new(seed);
    let cv = rng.range(0.005, 0.05);
    let with_samples = seed.is_multiple_of(2);
    let mut level = 1000.0;
    let mut drift_left = 0;
    (0..len)
        .map(|i| {
            if rng.uniform() < 0.02 {
                level *= 1.0 + rng.range(-0.3, 0.3);
            }
            if drift_left == 0 && rng.uniform() < 0.005 {
                drift_left = 30;
            }
            if drift_left > 0 {
                drift_left -= 1;
                level *= 1.004;
            }
            let spike = if rng.uniform() < 0.01 { 1.6 } else { 1.0 };
            let value = level * spike;
            if with_samples {
                let samples = (0..5).map(|_| value * (1.0 + cv * rng.normal())).collect();
                CommitObservation::from_samples(i, samples)
            } else {
                CommitObservation::new(i, value * (1.0 + cv * rng.normal()))
            }
        })
        .collect()
}

/// The incremental step from an analysis of the first `known` points to one of all of
/// `series`, reading only from [`Windows::read_from`] on, as a server would.
fn append(
    windows: Windows,
    before: &Analysis,
    known: usize,
    series: &[CommitObservation],
    sensitivity: &Sensitivity,
) -> (Analysis, usize) {
    let first = windows.first_open(known);
    let offset = windows.read_from(first, series.len(), sensitivity);
    let after = windows.analyse_since(
        &before.detected,
        &series[offset..],
        offset,
        first,
        Direction::Lower,
        sensitivity,
    );
    (after, offset)
}

#[test]
fn the_windows_split_every_history_into_disjoint_decided_stretches() {
    let windows = Windows::new(64);
    assert_eq!((windows.last(0), windows.last(64)), (0, 0));
    assert_eq!(
        (windows.last(65), windows.last(96), windows.last(97)),
        (1, 1, 2)
    );
    for n in 0..400 {
        let last = windows.last(n);
        // The last window reaches the end and is the only one that is not full.
        assert!(windows.start(last) + windows.points() >= n);
        assert!(last == 0 || windows.start(last - 1) + windows.points() < n);
        // Every point is decided by exactly one window, which holds it.
        for p in 0..n {
            let owners: Vec<usize> = (0..=last)
                .filter(|&k| {
                    windows.decides_from(k) <= p && (k == last || p < windows.decides_from(k + 1))
                })
                .collect();
            assert_eq!(owners.len(), 1, "point {p} of {n}");
            let k = owners[0];
            assert!(windows.start(k) <= p && p < windows.start(k) + windows.points());
        }
        // Appending never touches a window that was full.
        let first = windows.first_open(n);
        assert!(first == 0 || windows.start(first - 1) + windows.points() <= n);
        assert!(first <= windows.last(n + 1));
    }
    assert_eq!(Windows::new(7).points(), 8);
}

#[test]
fn a_history_within_one_window_is_analysed_whole() {
    let sensitivity = Sensitivity::default();
    for seed in 0..12 {
        let series = history(seed, 300);
        let mut detected = detect_change_points(&series, Direction::Lower, &sensitivity);
        let settled = detected.last().map_or(0, |c| c.position);
        let recent =
            detect_tail_change(&series[settled..], Direction::Lower, &sensitivity).map(|mut c| {
                c.position += settled;
                c
            });
        let analysis = Windows::new(300).analyse(&series, Direction::Lower, &sensitivity);
        assert_eq!(
            analysis.detected,
            std::mem::take(&mut detected),
            "seed {seed}"
        );
        assert_eq!(analysis.recent, recent, "seed {seed}");
    }
}

#[test]
fn appending_points_equals_analysing_everything_again_at_every_step() {
    let sensitivity = Sensitivity::default();
    let windows = Windows::new(96);
    let (mut steps, mut read, mut whole, mut changes, mut recent) = (0, 0, 0, 0, 0);
    for seed in 0..12 {
        let series = history(seed, 320);
        let mut rng = Rng::new(seed + 1000);
        let mut known = 20;
        let mut before = windows.analyse(&series[..known], Direction::Lower, &sensitivity);
        while known < series.len() {
            // Mostly one point at a time; now and then a push of several commits.
            let more = if rng.uniform() < 0.8 {
                1
            } else {
                2 + (rng.uniform() * 6.0) as usize
            };
            let n = (known + more).min(series.len());
            let full = windows.analyse(&series[..n], Direction::Lower, &sensitivity);
            let (after, offset) = append(windows, &before, known, &series[..n], &sensitivity);
            assert_eq!(after, full, "seed {seed}: {known} → {n} points");
            steps += 1;
            read += n - offset;
            whole += n;
            changes += full.detected.len();
            recent += usize::from(full.recent.is_some());
            before = after;
            known = n;
        }
    }
    // The series hold real decisions, and the steps re-examined a fraction of the history.
    assert!(steps > 1800, "{steps} steps");
    assert!(
        changes > steps,
        "{changes} change points over {steps} steps"
    );
    assert!(recent > 20, "{recent} recent changes");
    assert!(read * 2 < whole, "read {read} of {whole} points");
}

#[test]
fn windows_that_slide_with_the_history_disagree_with_a_full_analysis() {
    // What the anchoring buys, and proof that the equality above can fail: re-analysing the
    // newest `len` points and keeping the earlier decisions (windows that slide with the
    // history, as last session's trial did) disagrees with analysing everything again.
    let sensitivity = Sensitivity::default();
    let windows = Windows::new(96);
    let mut disagreements = 0;
    for seed in 0..8 {
        let series = history(seed, 420);
        let mut before = windows.analyse(&series[..100], Direction::Lower, &sensitivity);
        for n in 101..=series.len() {
            let kept_below = n - windows.points() / 2;
            let mut sliding: Vec<ChangePoint> = (before.detected.iter())
                .filter(|c| c.position < kept_below)
                .cloned()
                .collect();
            let start = n - windows.points();
            for mut change in
                detect_change_points(&series[start..n], Direction::Lower, &sensitivity)
            {
                change.position += start;
                if change.position >= kept_below {
                    sliding.push(change);
                }
            }
            let full = windows.analyse(&series[..n], Direction::Lower, &sensitivity);
            if sliding != full.detected {
                disagreements += 1;
                break;
            }
            before = Analysis {
                detected: sliding,
                recent: None,
            };
        }
    }
    assert!(disagreements > 0);
}

#[test]
fn a_step_in_a_long_history_is_found_in_its_window_and_kept_as_more_points_arrive() {
    let mut rng = Rng::new(3);
    let mut series: Vec<CommitObservation> = (0..1000)
        .map(|i| CommitObservation::new(i, 100.0 * (1.0 + 0.01 * rng.normal())))
        .collect();
    crate::stats::synthetic::step(&mut series[600..], 0, 0.2);
    let sensitivity = Sensitivity::default();
    let windows = Windows::new(256);
    let found = windows.analyse(&series[..700], Direction::Lower, &sensitivity);
    assert_eq!(found.detected.len(), 1, "{found:#?}");
    assert_eq!(found.detected[0].position, 600);
    assert_eq!(found.detected[0].kind, VerdictKind::Regression);
    // Its window is full now: its evidence reaches further, its decision stays.
    let later = windows.analyse(&series, Direction::Lower, &sensitivity);
    let at: Vec<(usize, VerdictKind)> = (later.detected.iter())
        .map(|c| (c.position, c.kind))
        .collect();
    assert_eq!(at, [(600, VerdictKind::Regression)]);
}
