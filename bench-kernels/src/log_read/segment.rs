//! Segment files: appending, sealing, evicting from the page cache, and fetching.
//!
//! A record is `[offset u64][payload length u32][payload]`, little endian; the suite's
//! payloads make every record 100 bytes. A fetch finds the starting byte through the
//! sparse index and a forward scan, then returns whole records up to `max_bytes` (always at
//! least one, as a consumer must make progress).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::index::SparseIndex;
use crate::error::{IoContext, KernelError};
use crate::variants::SealedReader;

/// Bytes of a record's header.
pub const RECORD_HEADER_BYTES: usize = 12;
/// Bytes of every record the suite writes: header and an 88-byte payload.
pub const RECORD_BYTES: usize = 100;
/// What a file read fetches at a time: the capacity of a default `BufReader`.
const READ_CHUNK: usize = 8 * 1024;

/// One segment file: active (appendable, read through the file) until sealed.
pub struct Segment {
    base_offset: u64,
    path: PathBuf,
    writer: Option<BufWriter<File>>,
    file: File,
    /// Bytes readers may see (appended and flushed).
    visible: u64,
    written: u64,
    next_offset: u64,
    index: SparseIndex,
    map: Option<Mmap>,
    sealed_reader: Option<SealedReader>,
}

fn header_at(bytes: &[u8], at: usize) -> Result<(u64, usize), KernelError> {
    let header = bytes
        .get(at..at + RECORD_HEADER_BYTES)
        .ok_or_else(|| KernelError::Corrupt(format!("truncated record header at byte {at}")))?;
    let offset = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(header[8..].try_into().expect("4 bytes")) as usize;
    Ok((offset, RECORD_HEADER_BYTES + len))
}

/// The size of the record at `at`, read from its length field alone: the copy loop's
/// hot path, kept free of error construction.
#[inline]
fn record_size(bytes: &[u8], at: usize) -> Option<usize> {
    let len = bytes.get(at + 8..at + RECORD_HEADER_BYTES)?;
    Some(RECORD_HEADER_BYTES + u32::from_le_bytes(len.try_into().ok()?) as usize)
}

impl Segment {
    /// Creates an empty active segment whose first record will have `base_offset`.
    pub fn create(dir: &Path, base_offset: u64) -> Result<Self, KernelError> {
        let path = dir.join(format!("{base_offset:020}.log"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .io_context("creating a segment")?;
        let writer = BufWriter::with_capacity(1 << 20, file.try_clone().io_context("segment")?);
        Ok(Self {
            base_offset,
            path,
            writer: Some(writer),
            file,
            visible: 0,
            written: 0,
            next_offset: base_offset,
            index: SparseIndex::default(),
            map: None,
            sealed_reader: None,
        })
    }

    /// Appends a record and returns its offset; readers see it after [`Segment::flush`].
    pub fn append(&mut self, payload: &[u8]) -> Result<u64, KernelError> {
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| KernelError::Corrupt("append to a sealed segment".to_string()))?;
        let offset = self.next_offset;
        writer
            .write_all(&offset.to_le_bytes())
            .and_then(|()| writer.write_all(&(payload.len() as u32).to_le_bytes()))
            .and_then(|()| writer.write_all(payload))
            .io_context("appending a record")?;
        self.index.observe(self.base_offset, offset, self.written);
        self.written += (RECORD_HEADER_BYTES + payload.len()) as u64;
        self.next_offset += 1;
        Ok(offset)
    }

    /// Hands appended records to the operating system, making them readable.
    pub fn flush(&mut self) -> Result<(), KernelError> {
        if let Some(writer) = self.writer.as_mut() {
            writer.flush().io_context("flushing a segment")?;
        }
        self.visible = self.written;
        Ok(())
    }

    /// Makes the segment immutable: flushed, synced, and mapped if `reader` says so.
    pub fn seal(&mut self, reader: SealedReader) -> Result<(), KernelError> {
        self.flush()?;
        self.writer = None;
        self.file
            .sync_all()
            .io_context("syncing a sealed segment")?;
        self.sealed_reader = Some(reader);
        self.remap()
    }

    fn remap(&mut self) -> Result<(), KernelError> {
        self.map = None;
        if self.sealed_reader == Some(SealedReader::Mmap) && self.visible > 0 {
            // SAFETY: a sealed segment is never written again while mapped.
            let map = unsafe { Mmap::map(&self.file) }.io_context("mapping a sealed segment")?;
            self.map = Some(map);
        }
        Ok(())
    }

    /// Evicts the segment from the page cache (`posix_fadvise(DONTNEED)`), unmapping it
    /// first since mapped pages are not evicted, so that the next read goes to the disk.
    pub fn drop_page_cache(&mut self) -> Result<(), KernelError> {
        self.flush()?;
        self.file
            .sync_data()
            .io_context("syncing before eviction")?;
        self.map = None;
        // SAFETY: plain system call on a file descriptor we own.
        let rc =
            unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(KernelError::Io {
                context: "posix_fadvise(DONTNEED)".to_string(),
                source: std::io::Error::from_raw_os_error(rc),
            });
        }
        if self.sealed_reader.is_some() {
            self.remap()?;
        }
        Ok(())
    }

    /// The first offset of this segment.
    pub fn base_offset(&self) -> u64 {
        self.base_offset
    }

    /// The offset the next append gets.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Bytes appended so far.
    pub fn size_bytes(&self) -> u64 {
        self.written
    }

    /// Whether reads go through a memory map.
    pub fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    /// The segment's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whole records from `offset` on, at most `max_bytes` of them (but at least one). A
    /// mapped segment hands out a slice of the map (zero-copy); otherwise the records are
    /// read into `scratch`, which the result then borrows.
    pub fn read<'a>(
        &'a self,
        offset: u64,
        max_bytes: usize,
        scratch: &'a mut Vec<u8>,
    ) -> Result<Fetched<'a>, KernelError> {
        scratch.clear();
        if offset < self.base_offset || offset >= self.next_offset {
            return Ok(Fetched::NOTHING);
        }
        let (from_offset, from_position) =
            self.index.floor(offset).unwrap_or((self.base_offset, 0));
        match &self.map {
            Some(map) => read_mapped(map, from_offset, from_position as usize, offset, max_bytes),
            None => {
                let records =
                    self.read_through_file(from_offset, from_position, offset, max_bytes, scratch)?;
                Ok(Fetched {
                    bytes: scratch,
                    records,
                })
            }
        }
    }

    /// `pread` in `READ_CHUNK` pieces into a buffer allocated for the fetch, as a reader of
    /// a file that is still growing must do.
    fn read_through_file(
        &self,
        mut current: u64,
        mut position: u64,
        wanted: u64,
        max_bytes: usize,
        out: &mut Vec<u8>,
    ) -> Result<u64, KernelError> {
        let mut chunk = vec![0u8; READ_CHUNK];
        let (mut chunk_start, mut chunk_len) = (position, 0usize);
        let mut records = 0;
        while position < self.visible {
            let mut at = (position - chunk_start) as usize;
            if at + RECORD_HEADER_BYTES > chunk_len
                || at + header_at(&chunk[..chunk_len], at)?.1 > chunk_len
            {
                let want = ((self.visible - position) as usize).min(READ_CHUNK);
                let mut filled = 0;
                while filled < want {
                    let n = self
                        .file
                        .read_at(&mut chunk[filled..want], position + filled as u64)
                        .io_context("reading a segment")?;
                    if n == 0 {
                        break;
                    }
                    filled += n;
                }
                (chunk_start, chunk_len, at) = (position, filled, 0);
            }
            let (record_offset, size) = header_at(&chunk[..chunk_len], at)?;
            if record_offset != current || at + size > chunk_len {
                return Err(KernelError::Corrupt(format!(
                    "record at byte {position} has offset {record_offset}, expected {current}"
                )));
            }
            if current >= wanted {
                if records > 0 && out.len() + size > max_bytes {
                    break;
                }
                out.extend_from_slice(&chunk[at..at + size]);
                records += 1;
            }
            position += size as u64;
            current += 1;
        }
        Ok(records)
    }
}

/// What a fetch returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetched<'a> {
    /// The records, back to back.
    pub bytes: &'a [u8],
    /// How many records `bytes` holds.
    pub records: u64,
}

impl Fetched<'_> {
    /// No record: the offset is outside the segment.
    pub const NOTHING: Fetched<'static> = Fetched {
        bytes: &[],
        records: 0,
    };
}

/// Scans the mapping forward to `wanted`, then delimits whole records in place.
fn read_mapped(
    map: &[u8],
    mut current: u64,
    mut position: usize,
    wanted: u64,
    max_bytes: usize,
) -> Result<Fetched<'_>, KernelError> {
    while current < wanted {
        let (record_offset, size) = header_at(map, position)?;
        if record_offset != current {
            return Err(KernelError::Corrupt(format!(
                "record at byte {position} has offset {record_offset}, expected {current}"
            )));
        }
        position += size;
        current += 1;
    }
    let start = position;
    let mut records = 0;
    while position < map.len() {
        let size = record_size(map, position).ok_or_else(|| {
            KernelError::Corrupt(format!("truncated record header at byte {position}"))
        })?;
        if records > 0 && position - start + size > max_bytes {
            break;
        }
        position += size;
        records += 1;
    }
    Ok(Fetched {
        bytes: &map[start..position],
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_read::test_records::{offsets_in, payload};

    fn segment(dir: &Path, records: u64) -> Segment {
        let mut s = Segment::create(dir, 1000).unwrap();
        for i in 0..records {
            assert_eq!(s.append(&payload(1000 + i)).unwrap(), 1000 + i);
        }
        s.flush().unwrap();
        s
    }

    #[test]
    fn every_offset_is_found_by_every_reader() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = segment(dir.path(), 1234);
        let mut out = Vec::new();
        let mut check = |s: &Segment| {
            for offset in [1000, 1001, 1099, 1100, 1101, 1999, 2233] {
                let fetched = s.read(offset, 250, &mut out).unwrap();
                assert_eq!(fetched.records, 2.min(2234 - offset));
                assert_eq!(offsets_in(fetched.bytes)[0], offset);
                assert_eq!(
                    &fetched.bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + 8],
                    &offset.to_le_bytes()
                );
            }
            assert_eq!(s.read(2234, 250, &mut out).unwrap().records, 0);
            assert_eq!(s.read(999, 250, &mut out).unwrap().records, 0);
        };
        check(&s);
        s.seal(SealedReader::Mmap).unwrap();
        assert!(s.map.is_some());
        check(&s);
        s.drop_page_cache().unwrap();
        check(&s);
    }

    #[test]
    fn max_bytes_returns_whole_records_and_at_least_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = segment(dir.path(), 500);
        for sealed in [false, true] {
            if sealed {
                s.seal(SealedReader::Read).unwrap();
            }
            let mut out = Vec::new();
            assert_eq!(s.read(1000, 10, &mut out).unwrap().records, 1);
            let fetched = s.read(1000, 1024, &mut out).unwrap();
            assert_eq!((fetched.records, fetched.bytes.len()), (10, 1000));
            // Larger than one 8 KiB chunk: the file reader refills across records.
            let fetched = s.read(1010, 100_000, &mut out).unwrap();
            assert_eq!(fetched.records, 490);
            assert_eq!(offsets_in(fetched.bytes), (1010..1500).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_corrupt_header_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = segment(dir.path(), 300);
        s.seal(SealedReader::Mmap).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(s.path())
            .unwrap()
            .write_all_at(&777u64.to_le_bytes(), 100 * 150)
            .unwrap();
        s.remap().unwrap();
        let mut out = Vec::new();
        assert!(matches!(
            s.read(1160, 100, &mut out),
            Err(KernelError::Corrupt(_))
        ));
    }
}
