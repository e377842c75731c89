//! Criterion's three files of one benchmark (`benchmark.json`, `estimates.json`, `sample.json`),
//! given as one input split at NUL bytes (JSON never holds a raw NUL).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut files = data.splitn(3, |b| *b == 0);
    let (id, estimates, sample) = (
        files.next().unwrap_or_default(),
        files.next().unwrap_or_default(),
        files.next().unwrap_or_default(),
    );
    if let Ok(results) = kymo_core::format::parse_criterion_files(id, estimates, sample) {
        kymo_fuzz::check_accepted(results);
    }
});
