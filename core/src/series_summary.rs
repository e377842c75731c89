//! Summaries of a series by buckets of history, at several zoom levels: for each bucket of
//! commits, how many were measured, the lowest and highest point, the first and last, and the
//! environments of the runs (where one changed). A chart of a long window draws the extremes
//! of each bucket, so a window of 100,000 commits is drawn from a few hundred summaries
//! instead of 100,000 points, and looks as it would at full detail: each pixel column shows
//! the lowest and highest value of the commits under it.
//!
//! Buckets are aligned on history positions: at level `l` a bucket spans
//! `BASE_SPAN × FANOUT^l` positions, and bucket `b` holds positions `b × span ..= (b + 1) ×
//! span − 1`. A level-0 bucket is summarized from its points, a bucket above from its
//! [`FANOUT`] children: [`summarize`] and [`combine`] are exact (no sums that could round
//! differently), so summaries kept up to date piece by piece equal those of a full read.
//! Pure: the storage (`db::summaries`) and the pages wire these to SQL and charts.

/// Positions a level-0 bucket spans.
pub const BASE_SPAN: i64 = 16;
/// Buckets of one level that make a bucket of the next.
pub const FANOUT: i64 = 4;
/// Levels kept: spans of 16, 64, 256, 1,024, 4,096, 16,384 and 65,536 commits.
pub const LEVELS: u8 = 7;

/// Positions a bucket of `level` spans.
pub fn span(level: u8) -> i64 {
    BASE_SPAN * FANOUT.pow(u32::from(level))
}

/// The bucket of `level` that holds `position`.
pub fn bucket_of(level: u8, position: i64) -> i64 {
    position.div_euclid(span(level))
}

/// The positions a bucket holds.
pub fn positions_of(level: u8, bucket: i64) -> std::ops::RangeInclusive<i64> {
    let span = span(level);
    bucket * span..=bucket * span + span - 1
}

/// A point as summaries see it: its position, value and the environment (an id standing for
/// kernel and toolchain) of the run that measured it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SummaryPoint {
    pub position: i64,
    pub value: f64,
    pub environment: i64,
}

/// A point a summary names: where and what.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Located {
    pub position: i64,
    pub value: f64,
}

/// The first point of a bucket whose run's environment differs from the point before it in
/// the same bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvironmentChange {
    pub position: i64,
    pub from: i64,
    pub to: i64,
}

/// What a bucket of a series holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketSummary {
    pub level: u8,
    pub bucket: i64,
    /// Commits measured in the bucket.
    pub points: i64,
    /// The lowest value (the earliest of equal ones) and the highest (likewise).
    pub low: Located,
    pub high: Located,
    pub first: Located,
    pub last: Located,
    pub first_environment: i64,
    pub last_environment: i64,
    /// The bucket's first change of environment between two of its points, if any.
    pub change: Option<EnvironmentChange>,
}

/// The summary of a level-0 bucket (or of any stretch of points, tagged with `level` and
/// `bucket`) from its points in position order; `None` when there are none.
pub fn summarize(level: u8, bucket: i64, points: &[SummaryPoint]) -> Option<BucketSummary> {
    let (first, last) = (points.first()?, points.last()?);
    let located = |p: &SummaryPoint| Located {
        position: p.position,
        value: p.value,
    };
    let mut low = first;
    let mut high = first;
    for p in points {
        if p.value.total_cmp(&low.value).is_lt() {
            low = p;
        }
        if p.value.total_cmp(&high.value).is_gt() {
            high = p;
        }
    }
    let change = points.windows(2).find_map(|pair| {
        (pair[0].environment != pair[1].environment).then_some(EnvironmentChange {
            position: pair[1].position,
            from: pair[0].environment,
            to: pair[1].environment,
        })
    });
    Some(BucketSummary {
        level,
        bucket,
        points: points.len() as i64,
        low: located(low),
        high: located(high),
        first: located(first),
        last: located(last),
        first_environment: first.environment,
        last_environment: last.environment,
        change,
    })
}

/// The summary of bucket `bucket` of `level` from the summaries of its parts, in position
/// order (its children one level down, or any disjoint stretches that cover it); `None` when
/// there are none. Equal to [`summarize`] of all their points.
pub fn combine(level: u8, bucket: i64, parts: &[BucketSummary]) -> Option<BucketSummary> {
    let (head, tail) = parts.split_first()?;
    let mut out = BucketSummary {
        level,
        bucket,
        ..*head
    };
    for part in tail {
        out.points += part.points;
        if part.low.value.total_cmp(&out.low.value).is_lt() {
            out.low = part.low;
        }
        if part.high.value.total_cmp(&out.high.value).is_gt() {
            out.high = part.high;
        }
        if out.change.is_none() {
            out.change = if out.last_environment != part.first_environment {
                Some(EnvironmentChange {
                    position: part.first.position,
                    from: out.last_environment,
                    to: part.first_environment,
                })
            } else {
                part.change
            };
        }
        out.last = part.last;
        out.last_environment = part.last_environment;
    }
    Some(out)
}

/// Every summary of every level that `points` (one series, in position order) fill: what a
/// full read of the series gives, and what the kept summaries must equal.
pub fn summarize_all(points: &[SummaryPoint]) -> Vec<BucketSummary> {
    let mut out = Vec::new();
    let mut level_rows: Vec<BucketSummary> = points
        .chunk_by(|a, b| bucket_of(0, a.position) == bucket_of(0, b.position))
        .filter_map(|chunk| summarize(0, bucket_of(0, chunk[0].position), chunk))
        .collect();
    for level in 1..LEVELS {
        let next: Vec<BucketSummary> = level_rows
            .chunk_by(|a, b| a.bucket.div_euclid(FANOUT) == b.bucket.div_euclid(FANOUT))
            .filter_map(|chunk| combine(level, chunk[0].bucket.div_euclid(FANOUT), chunk))
            .collect();
        out.append(&mut level_rows);
        level_rows = next;
    }
    out.append(&mut level_rows);
    out
}

/// The pieces that cover positions `from..=to` exactly, coarsest first where they fit: whole
/// buckets of `level` or below (a [`Piece::Bucket`]), and, where no bucket fits inside the
/// range or a level-0 bucket is `dirty` (holds points the summaries do not have yet), the
/// positions to read point by point (a [`Piece::Points`]); in position order. Whole buckets
/// of `level` are at most `(to − from) / span(level) + 1`; the pieces below them lie at the
/// two ends and around the dirty buckets, at most `2 × (FANOUT − 1)` a level for each.
pub fn cover(from: i64, to: i64, level: u8, dirty: &[i64]) -> Vec<Piece> {
    let mut pieces = Vec::new();
    if from > to {
        return pieces;
    }
    for bucket in bucket_of(level, from)..=bucket_of(level, to) {
        cover_bucket(level, bucket, (from, to), dirty, &mut pieces);
    }
    // Neighbouring point ranges (two dirty buckets side by side) become one.
    let mut merged: Vec<Piece> = Vec::with_capacity(pieces.len());
    for piece in pieces {
        match (merged.last_mut(), piece) {
            (Some(Piece::Points(a, b)), Piece::Points(c, d)) if *b + 1 == c => *b = d,
            (_, piece) => merged.push(piece),
        }
    }
    merged
}

/// A part of a covered range: a whole bucket, or positions read point by point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    Bucket { level: u8, bucket: i64 },
    Points(i64, i64),
}

fn cover_bucket(level: u8, bucket: i64, range: (i64, i64), dirty: &[i64], out: &mut Vec<Piece>) {
    let positions = positions_of(level, bucket);
    let (start, end) = (*positions.start(), *positions.end());
    if end < range.0 || start > range.1 {
        return;
    }
    let inside = start >= range.0 && end <= range.1;
    let (first_dirty, last_dirty) = (bucket_of(0, start), bucket_of(0, end));
    let clean = !dirty.iter().any(|d| (first_dirty..=last_dirty).contains(d));
    if inside && clean {
        out.push(Piece::Bucket { level, bucket });
    } else if level == 0 {
        out.push(Piece::Points(start.max(range.0), end.min(range.1)));
    } else {
        for child in bucket * FANOUT..(bucket + 1) * FANOUT {
            cover_bucket(level - 1, child, range, dirty, out);
        }
    }
}

/// The coarsest level whose buckets over a window of `positions` commits are still at least
/// `buckets` (so that a chart of that many pixel buckets loses nothing to the summaries), or
/// `None` when even level 0 is coarser than that: the window is read point by point.
pub fn level_for(positions: i64, buckets: i64) -> Option<u8> {
    (0..LEVELS)
        .rev()
        .find(|&level| positions / span(level) >= buckets)
}

/// The points a chart draws of consecutive `buckets`: the lowest and highest of each in
/// position order (a pixel column shows no more of the commits under it), and the window's
/// first and last point, so that the chart spans the whole window.
pub fn drawn_points(buckets: &[BucketSummary]) -> Vec<Located> {
    let ends = buckets.first().map(|b| b.first).into_iter();
    let mut points: Vec<Located> = (ends.chain(buckets.iter().flat_map(|b| [b.low, b.high])))
        .chain(buckets.last().map(|b| b.last))
        .collect();
    points.sort_by_key(|p| p.position);
    points.dedup_by_key(|p| p.position);
    points
}

#[cfg(test)]
mod tests;
