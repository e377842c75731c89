//! A commit's `kymo.toml` on arbitrary bytes: never a panic; what is accepted is within limits.
#![no_main]

use kymo_worker::config::{MAX_REPEAT, MAX_SUITES, MAX_TIMEOUT, parse_kymo_toml_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(config) = parse_kymo_toml_bytes(data) {
        assert!(!config.suites.is_empty() && config.suites.len() <= MAX_SUITES);
        for suite in &config.suites {
            assert!((1..=MAX_REPEAT).contains(&suite.repeat), "{suite:?}");
            assert!(!suite.timeout.is_zero() && suite.timeout <= MAX_TIMEOUT, "{suite:?}");
        }
    }
});
