//! HdrHistogram payloads inside result documents: decoding them safely and summarising them.
//!
//! The `hdrhistogram` deserializer trusts the lengths and counts it reads: a header claiming a
//! 4 GiB payload makes it allocate 4 GiB before reading (and abort the process if that fails),
//! and crafted counts overflow its arithmetic. Histograms come from outside, so this module checks
//! the header and walks the counts itself before handing the bytes over. For the same reason it
//! refuses V2+DEFLATE: the compressed form hides its payload length until inflated, and
//! inflating it here would need `flate2` as a direct dependency.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use serde::Serialize;

use super::kymo::FormatError;
use crate::results::MAX_HDR_BASE64_BYTES;

/// The largest serialized histogram accepted, once decoded from base64.
pub const MAX_HDR_BYTES: usize = 1024 * 1024;
/// The most histogram buckets the `hdr` metrics of one document may have together. Decoding
/// and reading a histogram costs time in its bucket count, which its header chooses, not in its
/// size: a few bytes can ask for six million buckets.
pub const MAX_HDR_BUCKETS_PER_DOCUMENT: usize = 1 << 27;

/// The cookie of an uncompressed V2 histogram (`V2_COOKIE` in `hdrhistogram`).
const V2_COOKIE: u32 = 0x1c84_9313;
/// The cookie of a V2+DEFLATE histogram (`V2_COMPRESSED_COOKIE` in `hdrhistogram`).
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// Cookie, payload length, normalizing offset, digits, low, high and the int/double ratio.
const V2_HEADER_BYTES: usize = 40;

/// What the server shows for a histogram. Values are in the metric's unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HdrSummary {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
}

/// Decodes a base64 HdrHistogram V2 serialization and summarises it.
pub fn hdr_percentiles(b64: &str) -> Result<HdrSummary, FormatError> {
    let histogram = decode_hdr(b64).map_err(|reason| FormatError::Invalid {
        place: "the histogram".to_string(),
        reason,
    })?;
    Ok(summarize(&histogram))
}

fn summarize(histogram: &Histogram<u64>) -> HdrSummary {
    HdrSummary {
        count: histogram.len(),
        min: histogram.min(),
        max: histogram.max(),
        mean: histogram.mean(),
        p50: histogram.value_at_quantile(0.5),
        p90: histogram.value_at_quantile(0.9),
        p99: histogram.value_at_quantile(0.99),
        p999: histogram.value_at_quantile(0.999),
    }
}

/// The histograms of one document, decoded while their buckets together stay within
/// [`MAX_HDR_BUCKETS_PER_DOCUMENT`].
#[derive(Default)]
pub(crate) struct DocumentHistograms {
    buckets: usize,
}

impl DocumentHistograms {
    /// Decodes one histogram; the error is a reason, to be prefixed with the place.
    pub(crate) fn decode(&mut self, b64: &str) -> Result<Histogram<u64>, String> {
        let histogram = decode_hdr(b64)?;
        self.buckets += histogram.distinct_values();
        if self.buckets > MAX_HDR_BUCKETS_PER_DOCUMENT {
            return Err(format!(
                "hdr histograms so far have more than {MAX_HDR_BUCKETS_PER_DOCUMENT} buckets \
                 together; record fewer significant digits or a narrower range"
            ));
        }
        Ok(histogram)
    }
}

/// Decodes and validates one histogram. The error is a reason, to be prefixed with the place.
fn decode_hdr(b64: &str) -> Result<Histogram<u64>, String> {
    if b64.len() > MAX_HDR_BASE64_BYTES {
        return Err(format!(
            "hdr is {} bytes of base64; at most {MAX_HDR_BASE64_BYTES} are accepted",
            b64.len()
        ));
    }
    let bytes = STANDARD
        .decode(b64)
        .map_err(|e| format!("hdr is not standard padded base64: {e}"))?;
    if bytes.len() > MAX_HDR_BYTES {
        let size = bytes.len();
        return Err(format!(
            "hdr is {size} bytes; at most {MAX_HDR_BYTES} are accepted"
        ));
    }
    check_v2_layout(&bytes)?;
    let histogram: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("hdr is not an HdrHistogram: {e}"))?;
    if histogram.is_empty() {
        return Err("hdr histogram has no recorded values".to_string());
    }
    Ok(histogram)
}

/// Checks what the deserializer would trust: the payload length, the zero runs and the counts.
fn check_v2_layout(bytes: &[u8]) -> Result<(), String> {
    let not_histogram = |why: &str| format!("hdr is not an HdrHistogram V2 serialization: {why}");
    let cookie = read_u32(bytes, 0).ok_or_else(|| not_histogram("too short"))?;
    if cookie == V2_COMPRESSED_COOKIE {
        // See the module comment.
        return Err(
            "hdr is V2+DEFLATE compressed; send the uncompressed V2 serialization".to_string(),
        );
    }
    if cookie != V2_COOKIE {
        return Err(not_histogram("unknown cookie"));
    }
    let payload_len = read_u32(bytes, 4).ok_or_else(|| not_histogram("too short"))? as usize;
    let payload = bytes
        .get(V2_HEADER_BYTES..)
        .ok_or_else(|| not_histogram("header is cut short"))?;
    if payload.len() != payload_len {
        return Err(not_histogram(&format!(
            "header announces {payload_len} bytes of counts, {} follow",
            payload.len()
        )));
    }
    let mut total: u64 = 0;
    let mut rest = payload;
    while !rest.is_empty() {
        let (encoded, used) =
            read_varint(rest).ok_or_else(|| not_histogram("counts are cut short"))?;
        rest = &rest[used..];
        // Zig-zag: negative numbers are runs of empty buckets, others are counts.
        let decoded = ((encoded >> 1) as i64) ^ -((encoded & 1) as i64);
        if decoded == i64::MIN {
            return Err(not_histogram("a run of empty buckets is out of range"));
        }
        if decoded > 0 {
            total = total
                .checked_add(decoded as u64)
                .ok_or_else(|| not_histogram("the total count overflows"))?;
        }
    }
    Ok(())
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let word = bytes.get(at..at + 4)?;
    Some(u32::from_be_bytes(word.try_into().ok()?))
}

/// HdrHistogram's LEB128 variant: up to eight 7-bit groups, then a ninth byte used whole.
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(9) {
        if i == 8 {
            return Some((value | (u64::from(byte) << 56), 9));
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};

    use super::*;

    /// A real V2 serialization, base64, of the given values.
    pub(crate) fn hdr_of(values: &[u64]) -> String {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for &v in values {
            histogram.record(v).unwrap();
        }
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(&histogram, &mut bytes)
            .unwrap();
        STANDARD.encode(bytes)
    }

    /// A V2 serialization, base64, of one value recorded in a histogram of the given range and
    /// precision, with its number of buckets.
    fn hdr_with_range(high: u64, sigfig: u8) -> (String, usize) {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, high, sigfig).unwrap();
        histogram.record(high / 2).unwrap();
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(&histogram, &mut bytes)
            .unwrap();
        (STANDARD.encode(bytes), histogram.distinct_values())
    }

    /// A V2 header with the given payload length, followed by `payload`.
    fn v2_with(payload_len: u32, payload: &[u8]) -> String {
        let mut bytes = Vec::new();
        bytes.extend(V2_COOKIE.to_be_bytes());
        bytes.extend(payload_len.to_be_bytes());
        bytes.extend(0u32.to_be_bytes());
        bytes.extend(3u32.to_be_bytes());
        bytes.extend(1u64.to_be_bytes());
        bytes.extend(1_000_000u64.to_be_bytes());
        bytes.extend(1.0f64.to_be_bytes());
        bytes.extend(payload);
        STANDARD.encode(bytes)
    }

    fn rejection(b64: &str) -> String {
        hdr_percentiles(b64).unwrap_err().to_string()
    }

    #[test]
    fn summary_of_a_real_histogram() {
        let summary = hdr_percentiles(&hdr_of(&[100, 200, 300, 400, 500])).unwrap();
        assert_eq!(summary.count, 5);
        assert_eq!((summary.min, summary.max), (100, 500));
        assert_eq!(summary.p50, 300);
        assert_eq!(summary.p999, 500);
        assert!((summary.mean - 300.0).abs() < 1.0, "{}", summary.mean);
    }

    #[test]
    fn our_payload_walk_accepts_what_the_serializer_writes() {
        let values: Vec<u64> = (1..5000).map(|i| i * i).collect();
        let summary = hdr_percentiles(&hdr_of(&values)).unwrap();
        assert_eq!(summary.count, 4999);
    }

    #[test]
    fn rejects_text_that_is_not_base64_or_not_a_histogram() {
        assert!(rejection("not base64!").contains("not standard padded base64"));
        assert!(rejection(&STANDARD.encode(b"hello world")).contains("unknown cookie"));
        assert!(rejection(&STANDARD.encode([0x1c, 0x84])).contains("too short"));
        assert!(rejection(&v2_with(0, &[])).contains("no recorded values"));
    }

    #[test]
    fn rejects_oversized_histograms() {
        let huge = "A".repeat(MAX_HDR_BASE64_BYTES + 4);
        assert!(rejection(&huge).contains("1400004 bytes of base64; at most 1400000"));
        let decoded = STANDARD.encode(vec![0; MAX_HDR_BYTES + 1]);
        assert!(rejection(&decoded).contains("1048577 bytes; at most 1048576"));
    }

    #[test]
    fn a_document_may_hold_only_so_many_buckets() {
        // A few bytes each, but six million buckets to allocate.
        let (hdr, buckets) = hdr_with_range(u64::MAX / 4, 5);
        assert!(hdr.len() < 100 && buckets > 6_000_000, "{buckets}");
        let mut document = DocumentHistograms::default();
        for _ in 0..MAX_HDR_BUCKETS_PER_DOCUMENT / buckets {
            document.decode(&hdr).unwrap();
        }
        let message = document.decode(&hdr).unwrap_err();
        assert!(
            message.contains("more than 134217728 buckets together"),
            "{message}"
        );
    }

    #[test]
    fn rejects_a_header_that_claims_more_payload_than_it_carries() {
        // Handed to the deserializer, this would allocate 4 GiB before failing to read.
        let message = rejection(&v2_with(u32::MAX, &[2]));
        assert!(message.contains("announces 4294967295 bytes"), "{message}");
        assert!(rejection(&v2_with(1, &[2, 2])).contains("1 bytes of counts, 2 follow"));
    }

    #[test]
    fn rejects_hostile_counts_that_would_overflow() {
        // A zero run of i64::MIN: negating it overflows inside the deserializer.
        assert!(rejection(&v2_with(9, &[0xff; 9])).contains("out of range"));
        // Three counts of i64::MAX: their sum overflows the u64 that percentile scans add into.
        let max_count = [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        let payload = [max_count, max_count, max_count].concat();
        assert!(rejection(&v2_with(27, &payload)).contains("total count overflows"));
        // A varint that never ends.
        assert!(rejection(&v2_with(2, &[0x80, 0x80])).contains("cut short"));
    }

    #[test]
    fn rejects_counts_beyond_the_histogram_range() {
        // One count after skipping far more buckets than a 1..1e6 histogram has.
        let payload = [0xff, 0xff, 0xff, 0x7f, 2]; // zig-zag of -2^27, then a count of 1
        let message = rejection(&v2_with(5, &payload));
        assert!(message.contains("not an HdrHistogram"), "{message}");
    }

    #[test]
    fn rejects_deflate_compressed_histograms() {
        let mut histogram = Histogram::<u64>::new(3).unwrap();
        histogram.record(42).unwrap();
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&histogram, &mut bytes)
            .unwrap();
        assert!(rejection(&STANDARD.encode(bytes)).contains("V2+DEFLATE"));
    }
}
