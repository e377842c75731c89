//! What the VMM records every tick: 16 series into the embedded store, the way rondo's
//! demo VMM records from its event loop. Counters are cumulative; the recorder stores
//! them as they are and lets downsampling average them.

use std::path::Path;
use std::time::Instant;

use crate::error::KernelError;
use crate::ring::{DEFAULT_TIERS, MetricsStore, SeriesHandle, Tier};
use crate::variants::{SecondsTier, StoreKind};

/// The 16 series every VMM records.
pub const SERIES: [&str; 16] = [
    "vm.exits_total",
    "vm.exits_io_in",
    "vm.exits_io_out",
    "vm.exits_hlt",
    "vm.cpu_bursts",
    "vm.io_ops",
    "vm.phase",
    "vm.tick",
    "vm.wall_ms",
    "vm.run_ns",
    "vm.idle_ns",
    "vm.record_ns",
    "proc.user_ms",
    "proc.system_ms",
    "proc.rss_kb",
    "proc.minor_faults",
];

/// Counters the guest loop keeps up to date.
#[derive(Debug, Clone, Copy, Default)]
pub struct TickCounters {
    /// Every exit (or fallback step).
    pub exits_total: u64,
    /// Port reads (the phase query).
    pub exits_io_in: u64,
    /// Port writes.
    pub exits_io_out: u64,
    /// Halts (idle phase).
    pub exits_hlt: u64,
    /// CPU bursts completed.
    pub cpu_bursts: u64,
    /// Device I/O operations.
    pub io_ops: u64,
    /// The current phase's number.
    pub phase: u64,
    /// Nanoseconds inside the guest.
    pub run_ns: u64,
    /// Nanoseconds idle between ticks.
    pub idle_ns: u64,
}

/// The store's tiers for a span of the one-second tier: rondo's three tiers, with the
/// finest one reaching back an hour or a day.
pub fn tiers_for(seconds: SecondsTier) -> [Tier; 3] {
    let mut tiers = DEFAULT_TIERS;
    tiers[0].slots = match seconds {
        SecondsTier::Hour => 3_600,
        SecondsTier::Day => 86_400,
    };
    tiers
}

/// The store and its series handles.
pub struct TickRecorder {
    store: MetricsStore,
    handles: Vec<SeriesHandle>,
    started: Instant,
    epoch_ns: u64,
    ticks: u64,
    last_record_ns: u64,
}

impl TickRecorder {
    /// Creates the store file for the 16 series with rondo's tiers.
    pub fn create(path: &Path) -> Result<Self, KernelError> {
        Self::create_with(path, SecondsTier::Hour)
    }

    /// Creates the store file for the 16 series, its finest tier spanning `seconds`.
    pub fn create_with(path: &Path, seconds: SecondsTier) -> Result<Self, KernelError> {
        let mut store =
            MetricsStore::create(path, SERIES.len(), &tiers_for(seconds), StoreKind::Mmap)?;
        let handles = SERIES
            .iter()
            .map(|name| store.register(name))
            .collect::<Result<Vec<_>, _>>()?;
        let epoch_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Ok(Self {
            store,
            handles,
            started: Instant::now(),
            epoch_ns,
            ticks: 0,
            last_record_ns: 0,
        })
    }

    /// Records one tick of all 16 series.
    pub fn record_tick(&mut self, counters: &TickCounters) -> Result<(), KernelError> {
        let began = Instant::now();
        let elapsed = self.started.elapsed();
        let usage = resource_usage();
        let values = [
            counters.exits_total as f64,
            counters.exits_io_in as f64,
            counters.exits_io_out as f64,
            counters.exits_hlt as f64,
            counters.cpu_bursts as f64,
            counters.io_ops as f64,
            counters.phase as f64,
            self.ticks as f64,
            elapsed.as_millis() as f64,
            counters.run_ns as f64,
            counters.idle_ns as f64,
            self.last_record_ns as f64,
            usage.user_ms,
            usage.system_ms,
            usage.rss_kb,
            usage.minor_faults,
        ];
        let points: Vec<(SeriesHandle, f64)> = self.handles.iter().copied().zip(values).collect();
        let now_ns = self.epoch_ns + elapsed.as_nanos() as u64;
        self.store.record_batch(now_ns, &points)?;
        // Maintenance runs on the first tick (catching up, as after a restart, which reads
        // the finer tiers back whole) and then once a minute of ticks.
        if self.ticks.is_multiple_of(60) {
            self.store.consolidate(now_ns);
        }
        self.ticks += 1;
        self.last_record_ns = began.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// Consolidates and flushes the store.
    pub fn finish(&mut self) -> Result<(), KernelError> {
        let now_ns = self.epoch_ns + self.started.elapsed().as_nanos() as u64;
        self.store.consolidate(now_ns);
        self.store.flush_async()
    }

    /// Ticks recorded so far.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    /// Tiers per series.
    pub fn tiers(&self) -> usize {
        self.store.tiers().len()
    }

    /// The store file's size.
    pub fn store_bytes(&self) -> usize {
        self.store.file_bytes()
    }
}

struct Usage {
    user_ms: f64,
    system_ms: f64,
    rss_kb: f64,
    minor_faults: f64,
}

fn resource_usage() -> Usage {
    // SAFETY: getrusage fills the struct we hand it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    let rss_kb = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<f64>().ok())
        })
        .map_or(0.0, |pages| pages * 4.0);
    Usage {
        user_ms: ms(usage.ru_utime),
        system_ms: ms(usage.ru_stime),
        rss_kb,
        minor_faults: usage.ru_minflt as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tick_lands_in_all_sixteen_series() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = TickRecorder::create(&dir.path().join("vm.store")).unwrap();
        let counters = TickCounters {
            exits_total: 7,
            ..TickCounters::default()
        };
        r.record_tick(&counters).unwrap();
        r.finish().unwrap();
        assert_eq!(r.ticks(), 1);
        for handle in &r.handles {
            assert_eq!(r.store.points(*handle, 0).len(), 1);
        }
        assert_eq!(r.store.points(r.handles[0], 0)[0].1, 7.0);
    }

    #[test]
    fn a_day_of_seconds_is_twenty_four_hours_of_slots() {
        let dir = tempfile::tempdir().unwrap();
        let hour = TickRecorder::create(&dir.path().join("hour")).unwrap();
        let day = TickRecorder::create_with(&dir.path().join("day"), SecondsTier::Day).unwrap();
        let slots = |r: &TickRecorder| r.store.tiers()[0].slots;
        assert_eq!((slots(&hour), slots(&day)), (3_600, 86_400));
        let ratio = day.store_bytes() as f64 / hour.store_bytes() as f64;
        assert!((15.0..25.0).contains(&ratio), "{ratio}");
    }
}
