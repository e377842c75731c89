//! The log: sealed segments and one active segment, rolled when a record would not fit.

use std::path::{Path, PathBuf};

use super::segment::{Fetched, RECORD_HEADER_BYTES, Segment};
use crate::error::KernelError;
use crate::variants::SealedReader;

/// A log: sealed segments and one active segment, rolled at `segment_bytes`.
pub struct SegmentLog {
    dir: PathBuf,
    segment_bytes: u64,
    sealed_reader: SealedReader,
    segments: Vec<Segment>,
}

impl SegmentLog {
    /// An empty log in `dir`.
    pub fn create(
        dir: &Path,
        segment_bytes: u64,
        sealed_reader: SealedReader,
    ) -> Result<Self, KernelError> {
        Ok(Self {
            dir: dir.to_path_buf(),
            segment_bytes,
            sealed_reader,
            segments: vec![Segment::create(dir, 0)?],
        })
    }

    /// Appends a record, sealing the active segment first if the record would not fit.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64, KernelError> {
        let active = self
            .segments
            .last_mut()
            .expect("a log has an active segment");
        let size = (RECORD_HEADER_BYTES + payload.len()) as u64;
        if active.size_bytes() > 0 && active.size_bytes() + size > self.segment_bytes {
            active.seal(self.sealed_reader)?;
            let next = active.next_offset();
            self.segments.push(Segment::create(&self.dir, next)?);
        }
        self.segments
            .last_mut()
            .expect("a log has an active segment")
            .append(payload)
    }

    /// Makes every appended record readable.
    pub fn flush(&mut self) -> Result<(), KernelError> {
        self.segments
            .last_mut()
            .expect("a log has an active segment")
            .flush()
    }

    /// Fetches from the segment holding `offset` (a fetch never spans two segments).
    pub fn read<'a>(
        &'a self,
        offset: u64,
        max_bytes: usize,
        scratch: &'a mut Vec<u8>,
    ) -> Result<Fetched<'a>, KernelError> {
        let at = self.segments.partition_point(|s| s.base_offset() <= offset);
        match at.checked_sub(1) {
            Some(i) => self.segments[i].read(offset, max_bytes, scratch),
            None => Ok(Fetched::NOTHING),
        }
    }

    /// The segments, oldest first; the last is active.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_read::test_records::{offsets_in, payload};

    #[test]
    fn the_log_rolls_segments_and_reads_across_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SegmentLog::create(dir.path(), 10_000, SealedReader::Mmap).unwrap();
        for i in 0..350 {
            assert_eq!(log.append(&payload(i)).unwrap(), i);
        }
        log.flush().unwrap();
        assert_eq!(log.segments().len(), 4);
        assert!(log.segments()[0].is_mapped());
        assert!(!log.segments()[3].is_mapped());
        let mut out = Vec::new();
        let mut offset = 0;
        let mut seen = Vec::new();
        loop {
            let fetched = log.read(offset, 4096, &mut out).unwrap();
            if fetched.records == 0 {
                break;
            }
            seen.extend(offsets_in(fetched.bytes));
            offset = *seen.last().unwrap() + 1;
        }
        assert_eq!(seen, (0..350).collect::<Vec<_>>());
    }
}
