//! Downsampling: each coarser tier holds the average of the finer tier's points over its
//! bucket. It runs as maintenance beside the event loop, never inside `record()`, which is
//! why `record()` stays a plain store.

use super::store::{MetricsStore, SeriesHandle};

impl MetricsStore {
    /// Writes every completed bucket of every coarser tier up to `now_ns` (buckets still
    /// open are left for a later call) and returns how many buckets it wrote. Call it at
    /// least once per span of a finer tier, or that tier's oldest points are overwritten
    /// before they are consolidated.
    pub fn consolidate(&mut self, now_ns: u64) -> usize {
        let mut written = 0;
        for series in 0..self.series_count() {
            for tier in 1..self.tiers().len() {
                written += self.consolidate_tier(series, tier, now_ns);
            }
        }
        written
    }

    fn consolidate_tier(&mut self, series: usize, tier: usize, now_ns: u64) -> usize {
        let target = self.tiers()[tier];
        let source = self.tiers()[tier - 1];
        let end = now_ns / target.resolution_ns * target.resolution_ns;
        let source_span = source.resolution_ns * source.slots;
        let retained_from =
            end.saturating_sub(source_span) / target.resolution_ns * target.resolution_ns;
        let start = self.consolidated_until(series, tier).max(retained_from);
        let mut written = 0;
        let mut bucket = start;
        while bucket < end {
            let (sum, count) = (bucket..bucket + target.resolution_ns)
                .step_by(source.resolution_ns as usize)
                .filter_map(|ts| self.point_at(SeriesHandle(series), tier - 1, ts))
                .fold((0.0, 0u32), |(sum, count), v| (sum + v, count + 1));
            if count > 0 && bucket != 0 {
                let offset = self.tier_slot_offset(series, tier, bucket);
                self.write_slot(offset, bucket, sum / f64::from(count));
                written += 1;
            }
            bucket += target.resolution_ns;
        }
        self.set_consolidated_until(series, tier, end.max(start));
        written
    }
}

#[cfg(test)]
mod tests {
    use crate::ring::store::{DEFAULT_TIERS, MetricsStore};
    use crate::variants::StoreKind;

    const SECOND: u64 = 1_000_000_000;
    /// A multiple of an hour, so minute and hour buckets start at round numbers.
    const T0: u64 = 1_699_999_200 * SECOND;

    fn store() -> (tempfile::TempDir, MetricsStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = MetricsStore::create(&dir.path().join("s"), 2, &DEFAULT_TIERS, StoreKind::Mmap)
            .unwrap();
        (dir, s)
    }

    #[test]
    fn minutes_hold_the_average_of_their_seconds() {
        let (_dir, mut s) = store();
        let cpu = s.register("cpu").unwrap();
        for i in 0..150u64 {
            s.record(cpu, T0 + i * SECOND, i as f64).unwrap();
        }
        // At 150 s the third minute is still open: two buckets are complete.
        assert_eq!(s.consolidate(T0 + 150 * SECOND), 2);
        assert_eq!(s.points(cpu, 1), vec![(T0, 29.5), (T0 + 60 * SECOND, 89.5)]);
        // Consolidating again writes nothing new until the minute closes.
        assert_eq!(s.consolidate(T0 + 170 * SECOND), 0);
        assert_eq!(s.consolidate(T0 + 180 * SECOND), 1);
        assert_eq!(s.points(cpu, 1)[2], (T0 + 120 * SECOND, 134.5));
    }

    #[test]
    fn gaps_are_skipped_not_averaged_as_zero() {
        let (_dir, mut s) = store();
        let cpu = s.register("cpu").unwrap();
        s.record(cpu, T0 + 10 * SECOND, 4.0).unwrap();
        s.record(cpu, T0 + 20 * SECOND, 8.0).unwrap();
        s.consolidate(T0 + 60 * SECOND);
        assert_eq!(s.points(cpu, 1), vec![(T0, 6.0)]);
    }

    #[test]
    fn hours_are_built_from_minutes() {
        let (_dir, mut s) = store();
        let cpu = s.register("cpu").unwrap();
        for i in 0..7200u64 {
            s.record(cpu, T0 + i * SECOND, if i < 3600 { 1.0 } else { 3.0 })
                .unwrap();
            if i % 600 == 599 {
                s.consolidate(T0 + (i + 1) * SECOND);
            }
        }
        assert_eq!(s.points(cpu, 1).len(), 120);
        assert_eq!(s.points(cpu, 2), vec![(T0, 1.0), (T0 + 3600 * SECOND, 3.0)]);
    }
}
