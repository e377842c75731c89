use super::*;

/// A deterministic series: values from a small generator, environments changing now and then.
fn series(positions: impl IntoIterator<Item = i64>, seed: u64) -> Vec<SummaryPoint> {
    let mut state = seed;
    positions
        .into_iter()
        .map(|position| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            SummaryPoint {
                position,
                // Few distinct values, so that ties between extremes happen.
                value: ((state >> 40) % 50) as f64,
                environment: i64::from((state >> 20).is_multiple_of(97)),
            }
        })
        .collect()
}

#[test]
fn a_bucket_names_its_extremes_ends_and_first_change_of_environment() {
    let p = |position, value, environment| SummaryPoint {
        position,
        value,
        environment,
    };
    let points = [
        p(3, 5.0, 1),
        p(4, 2.0, 1),
        p(7, 9.0, 2),
        p(8, 2.0, 3),
        p(9, 9.0, 3),
    ];
    let s = summarize(0, 0, &points).unwrap();
    assert_eq!(s.points, 5);
    assert_eq!(
        (s.low.position, s.high.position),
        (4, 7),
        "the earliest of equals"
    );
    assert_eq!((s.first.position, s.last.position), (3, 9));
    assert_eq!((s.first_environment, s.last_environment), (1, 3));
    let change = EnvironmentChange {
        position: 7,
        from: 1,
        to: 2,
    };
    assert_eq!(s.change, Some(change));
    assert_eq!(summarize(0, 0, &[]), None);
}

#[test]
fn combining_parts_equals_summarizing_their_points() {
    for seed in 0..200 {
        let points = series((0..300).filter(|p| p % (1 + seed as i64 % 5) != 3), seed);
        let whole = summarize(2, 0, &points).unwrap();
        // Cut the points into parts at arbitrary places, as a bucket's children cut them.
        let cuts = [
            0,
            1 + seed as usize % 17,
            60,
            61,
            150 + seed as usize % 40,
            points.len(),
        ];
        let parts: Vec<BucketSummary> = cuts
            .windows(2)
            .filter_map(|w| summarize(1, 0, &points[w[0]..w[1]]))
            .collect();
        assert_eq!(combine(2, 0, &parts), Some(whole), "seed {seed}");
    }
    assert_eq!(combine(1, 0, &[]), None);
}

#[test]
fn every_level_of_a_full_read_counts_every_point_once() {
    let points = series((0..70_000).filter(|p| p % 7 != 0), 42);
    let all = summarize_all(&points);
    for level in 0..LEVELS {
        let rows: Vec<&BucketSummary> = all.iter().filter(|s| s.level == level).collect();
        let counted: i64 = rows.iter().map(|s| s.points).sum();
        assert_eq!(counted, points.len() as i64, "level {level}");
        assert!(
            rows.iter()
                .all(|s| positions_of(level, s.bucket).contains(&s.first.position))
        );
        let lowest = rows
            .iter()
            .map(|s| s.low.value)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(
            lowest,
            points.iter().map(|p| p.value).fold(f64::INFINITY, f64::min)
        );
    }
    let top: Vec<&BucketSummary> = all.iter().filter(|s| s.level == LEVELS - 1).collect();
    assert_eq!(top.len(), 2, "70,000 positions fill two buckets of 65,536");
}

#[test]
fn a_cover_is_exact_disjoint_and_reads_dirty_buckets_point_by_point() {
    let check = |from: i64, to: i64, level: u8, dirty: &[i64]| {
        let pieces = cover(from, to, level, dirty);
        let mut next = from;
        for piece in &pieces {
            let (start, end) = match *piece {
                Piece::Bucket { level, bucket } => {
                    let range = positions_of(level, bucket);
                    assert!(
                        !dirty.iter().any(|d| range.contains(&(d * BASE_SPAN))),
                        "{piece:?} holds a dirty bucket"
                    );
                    (*range.start(), *range.end())
                }
                Piece::Points(start, end) => (start, end),
            };
            assert_eq!(start, next, "pieces of {from}..={to} meet: {pieces:?}");
            next = end + 1;
        }
        assert_eq!(next, to + 1, "{from}..={to} covered");
        pieces
    };
    // A window of 100,000 commits ending at the head of 123,457, drawn at level 2 (256).
    let pieces = check(23_457, 123_456, 2, &[123_400 / BASE_SPAN]);
    let whole = pieces
        .iter()
        .filter(|p| matches!(p, Piece::Bucket { level: 2, .. }))
        .count();
    assert!(whole >= 100_000 / 256 - 2, "{whole} buckets of 256");
    assert!(
        pieces.len() <= 100_000 / 256 + 2 + 4 * 2 * 3,
        "{} pieces",
        pieces.len()
    );
    let points: i64 = pieces
        .iter()
        .map(|p| match p {
            Piece::Points(a, b) => b - a + 1,
            Piece::Bucket { .. } => 0,
        })
        .sum();
    assert!(
        points <= 3 * BASE_SPAN,
        "{points} positions read point by point"
    );
    check(0, 15, 0, &[]);
    check(5, 5, 3, &[0]);
    check(0, 70_000, 6, &[3, 4, 5, 4_000]);
    assert!(cover(10, 9, 0, &[]).is_empty());
}

#[test]
fn the_level_keeps_at_least_the_buckets_asked_for() {
    assert_eq!(level_for(100_000, 292), Some(2));
    assert_eq!(level_for(10_000, 292), Some(0));
    assert_eq!(level_for(4_000, 292), None, "read point by point");
    assert_eq!(level_for(50_000_000, 292), Some(LEVELS - 1));
    for positions in [4_672, 20_000, 100_000, 1_000_000] {
        let level = level_for(positions, 292).unwrap();
        assert!(positions / span(level) >= 292);
        assert!(level == LEVELS - 1 || positions / span(level + 1) < 292);
    }
}

#[test]
fn a_chart_draws_each_bucket_through_its_extremes_between_the_window_s_ends() {
    let points = series(0..1_000, 7);
    let buckets = summarize_all(&points);
    let level0: Vec<BucketSummary> = buckets.iter().filter(|b| b.level == 0).copied().collect();
    let drawn = drawn_points(&level0);
    let positions: Vec<i64> = drawn.iter().map(|p| p.position).collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "in order, once each"
    );
    assert_eq!((positions[0], positions[positions.len() - 1]), (0, 999));
    for b in &level0 {
        assert!(drawn.contains(&b.low) && drawn.contains(&b.high), "{b:?}");
    }
    assert!(drawn.len() <= level0.len() * 2 + 2);
    assert!(drawn_points(&[]).is_empty());
}
