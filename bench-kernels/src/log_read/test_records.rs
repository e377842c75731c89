//! Records the log tests write and read back: each payload starts with its offset.

use super::{RECORD_BYTES, RECORD_HEADER_BYTES};

/// A full-size payload that names its offset in its first eight bytes.
pub fn payload(offset: u64) -> Vec<u8> {
    let mut p = vec![b'.'; RECORD_BYTES - RECORD_HEADER_BYTES];
    p[..8].copy_from_slice(&offset.to_le_bytes());
    p
}

/// The offsets named by the payloads of consecutive records in `bytes`.
pub fn offsets_in(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(RECORD_BYTES)
        .map(|r| u64::from_le_bytes(r[..8].try_into().unwrap()))
        .collect()
}
