//! RustLog's read path: a log of segment files holding 100-byte records, each segment
//! with a sparse index (every 100th record). Sealed segments are read through a memory
//! map (or, as the slow variant, like the active one), the active segment through file
//! reads. A fetch returns whole records starting at an offset, up to `max_bytes`.

mod index;
mod log;
mod segment;
mod suite;
#[cfg(test)]
mod test_records;

pub use index::{INDEX_INTERVAL, SparseIndex};
pub use log::SegmentLog;
pub use segment::{Fetched, RECORD_BYTES, RECORD_HEADER_BYTES, Segment};
pub use suite::LogReadSuite;
