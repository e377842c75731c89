//! The gungraun result parser on arbitrary bytes: it must not panic, and what it accepts the server
//! must accept too.
#![no_main]

use kymo_core::format::FormatName;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kymo_fuzz::check_format(FormatName::Gungraun, data));
