//! What every fuzz target checks, in one place: a parser of untrusted input returns `Ok` or
//! `Err` on any input, never panics, and results it accepts pass the server's own validation
//! (`results::validate_suites`), so that a worker never uploads what the server refuses.

use kymo_core::format::{FormatName, parse_output};
use kymo_core::protocol::SuiteUpload;
use kymo_core::results::{SuiteResults, validate_suites};

/// Panics (a finding) when accepted results would be refused by the server.
pub fn check_accepted(results: SuiteResults) {
    let upload = SuiteUpload {
        suite: "fuzz".into(),
        results,
    };
    if let Err(reason) = validate_suites(&[upload]) {
        panic!("the parser accepted results the server refuses: {reason}");
    }
}

/// Runs one format's parser on `data`.
pub fn check_format(format: FormatName, data: &[u8]) {
    if let Ok(results) = parse_output(format, data) {
        check_accepted(results);
    }
}
