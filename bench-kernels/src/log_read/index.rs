//! The sparse offset index: one entry per `INDEX_INTERVAL` records, mapping a record's
//! offset to its byte position in the segment. A lookup lands on the nearest entry at or
//! before the wanted offset; the reader scans forward from there.

/// One index entry every this many records.
pub const INDEX_INTERVAL: u64 = 100;

/// Offsets and byte positions of every `INDEX_INTERVAL`-th record of one segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparseIndex {
    entries: Vec<(u64, u64)>,
}

impl SparseIndex {
    /// Notes that record `offset` starts at byte `position`; only every
    /// `INDEX_INTERVAL`-th record (counted from the segment's base) is kept.
    pub fn observe(&mut self, base_offset: u64, offset: u64, position: u64) {
        if (offset - base_offset).is_multiple_of(INDEX_INTERVAL) {
            self.entries.push((offset, position));
        }
    }

    /// The entry at or before `offset`: where a forward scan for it must start.
    pub fn floor(&self, offset: u64) -> Option<(u64, u64)> {
        let at = self.entries.partition_point(|&(o, _)| o <= offset);
        at.checked_sub(1).map(|i| self.entries[i])
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the index has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_of(records: u64, base: u64) -> SparseIndex {
        let mut index = SparseIndex::default();
        for i in 0..records {
            index.observe(base, base + i, i * 100);
        }
        index
    }

    #[test]
    fn keeps_every_hundredth_record() {
        let index = index_of(1000, 5000);
        assert_eq!(index.len(), 10);
        assert_eq!(index.floor(5000), Some((5000, 0)));
    }

    #[test]
    fn floor_finds_the_entry_at_or_before() {
        let index = index_of(1000, 5000);
        assert_eq!(index.floor(5099), Some((5000, 0)));
        assert_eq!(index.floor(5100), Some((5100, 10_000)));
        assert_eq!(index.floor(5999), Some((5900, 90_000)));
        assert_eq!(index.floor(4999), None);
    }
}
