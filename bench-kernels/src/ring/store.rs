//! The embedded metrics store: one file, memory-mapped, holding a fixed slab per series.
//!
//! File layout (little endian):
//! - a header page: magic, version, series capacity and count, the tier table, then a
//!   64-byte name per series;
//! - one slab per series: a 64-byte slab header (how far each tier has been consolidated),
//!   then each tier's ring of 16-byte slots `[timestamp_ns u64][value f64]`.
//!
//! A slot is chosen by time (`timestamp / resolution % slots`), so the ring wraps by itself
//! and a slot left from an older lap is recognised by its timestamp. Timestamp 0 marks an
//! empty slot.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use memmap2::MmapMut;

use crate::error::{IoContext, KernelError};
use crate::variants::StoreKind;

const MAGIC: &[u8; 8] = b"KYMORING";
const VERSION: u32 = 1;
const NAME_BYTES: usize = 64;
const SLAB_HEADER_BYTES: usize = 64;
/// Bytes of one slot: an 8-byte timestamp and an 8-byte value.
pub const SLOT_BYTES: usize = 16;
const PAGE: usize = 4096;

/// One resolution of the store: a ring of `slots` points, one per `resolution_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    /// Time one slot covers.
    pub resolution_ns: u64,
    /// Slots in the ring.
    pub slots: u64,
}

const SECOND: u64 = 1_000_000_000;

/// The three tiers rondo's write-up sizes at about 1.1 MB per 16 series: an hour of
/// seconds, ten hours of minutes, ten days of hours.
pub const DEFAULT_TIERS: [Tier; 3] = [
    Tier {
        resolution_ns: SECOND,
        slots: 3600,
    },
    Tier {
        resolution_ns: 60 * SECOND,
        slots: 600,
    },
    Tier {
        resolution_ns: 3600 * SECOND,
        slots: 240,
    },
];

/// A registered series; cheap to copy, valid for the store that returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesHandle(pub(crate) usize);

/// Where `record()` last wrote for one series, so that the common case (another point in
/// the same second) skips the division.
#[derive(Debug, Clone, Copy, Default)]
struct WriteCursor {
    bucket_start: u64,
    bucket_end: u64,
    slot_offset: usize,
}

/// The store. One writer (the VMM's event loop) owns it mutably.
pub struct MetricsStore {
    map: MmapMut,
    file: File,
    kind: StoreKind,
    tiers: Vec<Tier>,
    capacity: usize,
    names: Vec<String>,
    header_bytes: usize,
    slab_bytes: usize,
    cursors: Vec<WriteCursor>,
}

impl MetricsStore {
    /// Creates (or truncates) the store file at `path` for up to `capacity` series.
    pub fn create(
        path: &Path,
        capacity: usize,
        tiers: &[Tier],
        kind: StoreKind,
    ) -> Result<Self, KernelError> {
        let header_bytes = (64 + tiers.len() * 16 + capacity * NAME_BYTES).next_multiple_of(PAGE);
        let slab_bytes = SLAB_HEADER_BYTES
            + tiers
                .iter()
                .map(|t| t.slots as usize * SLOT_BYTES)
                .sum::<usize>();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .io_context("creating the metrics store file")?;
        file.set_len((header_bytes + capacity * slab_bytes) as u64)
            .io_context("sizing the metrics store file")?;
        // SAFETY: the file was just created by us and is only modified through this store.
        let map = unsafe { MmapMut::map_mut(&file) }.io_context("mapping the metrics store")?;
        let mut store = Self {
            map,
            file,
            kind,
            tiers: tiers.to_vec(),
            capacity,
            names: Vec::new(),
            header_bytes,
            slab_bytes,
            cursors: Vec::new(),
        };
        store.write_header();
        Ok(store)
    }

    fn write_header(&mut self) {
        let h = &mut self.map[..self.header_bytes];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(self.capacity as u32).to_le_bytes());
        h[16..20].copy_from_slice(&(self.names.len() as u32).to_le_bytes());
        h[20..24].copy_from_slice(&(self.tiers.len() as u32).to_le_bytes());
        for (i, tier) in self.tiers.iter().enumerate() {
            let at = 64 + i * 16;
            h[at..at + 8].copy_from_slice(&tier.resolution_ns.to_le_bytes());
            h[at + 8..at + 16].copy_from_slice(&tier.slots.to_le_bytes());
        }
    }

    /// Registers a series named `name` (at most 64 bytes).
    pub fn register(&mut self, name: &str) -> Result<SeriesHandle, KernelError> {
        if self.names.len() == self.capacity {
            return Err(KernelError::StoreFull {
                capacity: self.capacity,
            });
        }
        let index = self.names.len();
        let at = 64 + self.tiers.len() * 16 + index * NAME_BYTES;
        let bytes = &name.as_bytes()[..name.len().min(NAME_BYTES)];
        self.map[at..at + bytes.len()].copy_from_slice(bytes);
        self.names.push(name.to_string());
        self.cursors.push(WriteCursor::default());
        self.write_header();
        Ok(SeriesHandle(index))
    }

    /// The name `handle` was registered with.
    pub fn name(&self, handle: SeriesHandle) -> &str {
        &self.names[handle.0]
    }

    /// Bytes the store occupies on disk.
    pub fn file_bytes(&self) -> usize {
        self.map.len()
    }

    /// The tier table.
    pub fn tiers(&self) -> &[Tier] {
        &self.tiers
    }

    fn slab_offset(&self, series: usize) -> usize {
        self.header_bytes + series * self.slab_bytes
    }

    fn tier_offset(&self, series: usize, tier: usize) -> usize {
        self.slab_offset(series)
            + SLAB_HEADER_BYTES
            + self.tiers[..tier]
                .iter()
                .map(|t| t.slots as usize * SLOT_BYTES)
                .sum::<usize>()
    }

    /// Byte offset of the tier slot that `timestamp_ns` falls in.
    fn slot_offset(&self, series: usize, tier: usize, timestamp_ns: u64) -> usize {
        let t = self.tiers[tier];
        let index = (timestamp_ns / t.resolution_ns) % t.slots;
        self.tier_offset(series, tier) + index as usize * SLOT_BYTES
    }

    /// Records `value` at `timestamp_ns` (non-zero, nanoseconds) in the finest tier: a
    /// 16-byte store into the mapped slab, or with [`StoreKind::Write`] a `pwrite()`.
    #[inline(always)]
    pub fn record(
        &mut self,
        series: SeriesHandle,
        timestamp_ns: u64,
        value: f64,
    ) -> Result<(), KernelError> {
        let cursor = self.cursors[series.0];
        let offset = if timestamp_ns >= cursor.bucket_start && timestamp_ns < cursor.bucket_end {
            cursor.slot_offset
        } else {
            self.move_cursor(series.0, timestamp_ns)
        };
        let mut slot = [0u8; SLOT_BYTES];
        slot[..8].copy_from_slice(&timestamp_ns.to_le_bytes());
        slot[8..].copy_from_slice(&value.to_bits().to_le_bytes());
        match self.kind {
            StoreKind::Mmap => {
                assert!(offset + SLOT_BYTES <= self.map.len());
                // SAFETY: just checked to lie inside the map, which we borrow mutably. The
                // raw copy lets the compiler emit two plain 8-byte stores.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        slot.as_ptr(),
                        self.map.as_mut_ptr().add(offset),
                        SLOT_BYTES,
                    );
                }
            }
            StoreKind::Write => self.write_through_syscall(&slot, offset)?,
        }
        Ok(())
    }

    /// Kept out of line so that the mmap path of `record()` stays small enough to inline.
    #[inline(never)]
    fn write_through_syscall(&self, slot: &[u8], offset: usize) -> Result<(), KernelError> {
        self.file
            .write_all_at(slot, offset as u64)
            .io_context("writing a record")
    }

    #[cold]
    fn move_cursor(&mut self, series: usize, timestamp_ns: u64) -> usize {
        let resolution = self.tiers[0].resolution_ns;
        let bucket_start = timestamp_ns / resolution * resolution;
        let slot_offset = self.slot_offset(series, 0, timestamp_ns);
        self.cursors[series] = WriteCursor {
            bucket_start,
            bucket_end: bucket_start + resolution,
            slot_offset,
        };
        slot_offset
    }

    /// Records one value per series at the same timestamp, as a VMM does once per tick.
    pub fn record_batch(
        &mut self,
        timestamp_ns: u64,
        points: &[(SeriesHandle, f64)],
    ) -> Result<(), KernelError> {
        for &(series, value) in points {
            self.record(series, timestamp_ns, value)?;
        }
        Ok(())
    }

    pub(crate) fn read_slot(&self, offset: usize) -> (u64, f64) {
        let bytes = &self.map[offset..offset + SLOT_BYTES];
        let ts = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        let value = f64::from_bits(u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes")));
        (ts, value)
    }

    pub(crate) fn write_slot(&mut self, offset: usize, timestamp_ns: u64, value: f64) {
        self.map[offset..offset + 8].copy_from_slice(&timestamp_ns.to_le_bytes());
        self.map[offset + 8..offset + SLOT_BYTES].copy_from_slice(&value.to_bits().to_le_bytes());
    }

    /// The point stored for the slot `timestamp_ns` falls in, if that slot holds this very
    /// bucket (and not an older lap of the ring).
    pub fn point_at(&self, series: SeriesHandle, tier: usize, timestamp_ns: u64) -> Option<f64> {
        let resolution = self.tiers[tier].resolution_ns;
        let bucket = timestamp_ns / resolution;
        let (ts, value) = self.read_slot(self.slot_offset(series.0, tier, timestamp_ns));
        (ts != 0 && ts / resolution == bucket).then_some(value)
    }

    /// Every point a tier holds for `series`, oldest first.
    pub fn points(&self, series: SeriesHandle, tier: usize) -> Vec<(u64, f64)> {
        let base = self.tier_offset(series.0, tier);
        let mut points: Vec<(u64, f64)> = (0..self.tiers[tier].slots as usize)
            .map(|i| self.read_slot(base + i * SLOT_BYTES))
            .filter(|&(ts, _)| ts != 0)
            .collect();
        points.sort_by_key(|&(ts, _)| ts);
        points
    }

    pub(crate) fn consolidated_until(&self, series: usize, tier: usize) -> u64 {
        let at = self.slab_offset(series) + tier * 8;
        u64::from_le_bytes(self.map[at..at + 8].try_into().expect("8 bytes"))
    }

    pub(crate) fn set_consolidated_until(&mut self, series: usize, tier: usize, ts: u64) {
        let at = self.slab_offset(series) + tier * 8;
        self.map[at..at + 8].copy_from_slice(&ts.to_le_bytes());
    }

    pub(crate) fn series_count(&self) -> usize {
        self.names.len()
    }

    pub(crate) fn tier_slot_offset(&self, series: usize, tier: usize, ts: u64) -> usize {
        self.slot_offset(series, tier, ts)
    }

    /// Asks the kernel to write dirty pages back without waiting.
    pub fn flush_async(&self) -> Result<(), KernelError> {
        self.map
            .flush_async()
            .io_context("flushing the metrics store")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000 * SECOND;

    fn store(kind: StoreKind) -> (tempfile::TempDir, MetricsStore) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            MetricsStore::create(&dir.path().join("s.ring"), 4, &DEFAULT_TIERS, kind).unwrap();
        (dir, store)
    }

    #[test]
    fn sixteen_series_take_about_a_megabyte_like_the_write_up() {
        let dir = tempfile::tempdir().unwrap();
        let s = MetricsStore::create(&dir.path().join("s"), 16, &DEFAULT_TIERS, StoreKind::Mmap)
            .unwrap();
        let mb = s.file_bytes() as f64 / 1e6;
        assert!((1.0..1.25).contains(&mb), "{mb} MB");
    }

    #[test]
    fn records_land_in_their_second_and_read_back() {
        for kind in [StoreKind::Mmap, StoreKind::Write] {
            let (_dir, mut s) = store(kind);
            let cpu = s.register("cpu").unwrap();
            let mem = s.register("mem").unwrap();
            s.record(cpu, T0, 1.5).unwrap();
            s.record(cpu, T0 + SECOND, 2.5).unwrap();
            s.record(mem, T0 + SECOND / 2, 9.0).unwrap();
            assert_eq!(s.point_at(cpu, 0, T0), Some(1.5), "{kind}");
            assert_eq!(s.point_at(cpu, 0, T0 + SECOND + 7), Some(2.5), "{kind}");
            assert_eq!(s.point_at(mem, 0, T0), Some(9.0), "{kind}");
            assert_eq!(s.points(cpu, 0), vec![(T0, 1.5), (T0 + SECOND, 2.5)]);
        }
    }

    #[test]
    fn the_ring_wraps_and_an_old_lap_is_not_mistaken_for_the_new_one() {
        let (_dir, mut s) = store(StoreKind::Mmap);
        let cpu = s.register("cpu").unwrap();
        for i in 0..3601u64 {
            s.record(cpu, T0 + i * SECOND, i as f64).unwrap();
        }
        let points = s.points(cpu, 0);
        assert_eq!(points.len(), 3600);
        assert_eq!(points.first().unwrap().1, 1.0);
        assert_eq!(points.last().unwrap().1, 3600.0);
        // The slot of T0 now holds T0 + 3600 s: asking for T0 finds nothing.
        assert_eq!(s.point_at(cpu, 0, T0), None);
        assert_eq!(s.point_at(cpu, 0, T0 + 3600 * SECOND), Some(3600.0));
    }

    #[test]
    fn a_full_store_refuses_another_series() {
        let (_dir, mut s) = store(StoreKind::Mmap);
        for i in 0..4 {
            s.register(&format!("s{i}")).unwrap();
        }
        assert!(matches!(
            s.register("one too many"),
            Err(KernelError::StoreFull { capacity: 4 })
        ));
    }

    #[test]
    fn the_header_describes_the_layout() {
        let (_dir, mut s) = store(StoreKind::Mmap);
        s.register("cpu").unwrap();
        assert_eq!(&s.map[..8], MAGIC);
        assert_eq!(u32::from_le_bytes(s.map[16..20].try_into().unwrap()), 1);
        let at = 64 + 3 * 16;
        assert_eq!(&s.map[at..at + 3], b"cpu");
    }
}
