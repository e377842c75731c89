//! HdrHistogram V2 decoding: the first byte picks whether the rest is the base64 text a
//! document carries, or raw histogram bytes that are base64-encoded first (so that the fuzzer
//! explores the binary layout, not only base64's alphabet).
#![no_main]

use base64::Engine;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let text = if mode % 2 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        base64::engine::general_purpose::STANDARD.encode(rest)
    };
    if let Ok(summary) = kymo_core::format::hdr::hdr_percentiles(&text) {
        assert!(summary.mean.is_finite(), "{summary:?}");
        assert!(summary.min <= summary.p50 && summary.p50 <= summary.max, "{summary:?}");
    }
});
