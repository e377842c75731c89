//! Result-format parsers: each turns one tool's output into [`crate::results::SuiteResults`].

pub mod kymo;
pub mod hdr;
