//! Suite A of rondo's write-up: an embedded, memory-mapped metrics store whose `record()`
//! is a 16-byte store into a ring slot, against an atomic counter, a `write()` per record
//! and a StatsD-like UDP send; plus series-count scaling and batch recording.

mod baselines;
mod downsample;
mod store;
mod suite;

pub use baselines::{AtomicCounter, UdpStatsdSink, WriteSyscallSink};
pub use store::{DEFAULT_TIERS, MetricsStore, SLOT_BYTES, SeriesHandle, Tier};
pub use suite::RingSuite;
