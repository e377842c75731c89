//! Properties of every result-format parser on generated input (proptest): no input makes a
//! parser panic, and whatever a parser accepts the server accepts too
//! (`results::validate_suites`). The fuzz targets in `fuzz/` explore the same contract for
//! longer; these run in every `cargo test`.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::{FormatName, parse_output};

/// Field names the parsers look for, so that generated documents reach past the first check.
const KEYS: &[&str] = &[
    "benchmarks",
    "name",
    "params",
    "metrics",
    "unit",
    "direction",
    "value",
    "samples",
    "hdr",
    "results",
    "command",
    "mean",
    "times",
    "parameters",
    "stats",
    "median",
    "data",
    "fullname",
    "param",
    "run_name",
    "run_type",
    "aggregate_name",
    "real_time",
    "cpu_time",
    "time_unit",
    "iterations",
    "items_per_second",
    "bytes_per_second",
    "error_occurred",
    "latency",
    "throughput",
    "lower_value",
    "upper_value",
    "type",
    "event",
    "exec_time",
    "ns",
    "lower",
    "higher",
    "iteration",
    "mean_ns",
];

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-1.0),
        Just(1e308),
        Just(5e-324),
        -1e12..1e12f64,
        (0u32..100).prop_map(f64::from),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(KEYS).prop_map(str::to_owned),
        "[ -~]{0,12}",
        Just("\u{0}".to_owned()),
        Just("x".repeat(300)),
    ]
}

/// JSON documents shaped like benchmark output: objects keyed by the names above, nested a few
/// levels, holding numbers, strings, lists and the odd boolean or null.
fn document() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        number().prop_map(Value::from),
        text().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::from),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..8).prop_map(|entries| {
                let map: Map<String, Value> = entries
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect();
                Value::Object(map)
            }),
        ]
    })
}

/// Lines shaped like the text formats (go test -bench, libtest's bencher output).
fn text_lines() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        Just("Benchmark".to_owned()),
        Just("test".to_owned()),
        Just("bench:".to_owned()),
        Just("ns/iter".to_owned()),
        Just("ns/op".to_owned()),
        Just("B/op".to_owned()),
        Just("allocs/op".to_owned()),
        Just("MB/s".to_owned()),
        Just("(+/-".to_owned()),
        Just("...".to_owned()),
        Just("-8".to_owned()),
        number().prop_map(|n| n.to_string()),
        "[A-Za-z0-9/_,.-]{1,10}",
    ];
    prop::collection::vec(prop::collection::vec(word, 0..8), 0..10).prop_map(|lines| {
        (lines.iter())
            .map(|words| words.join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn check_every_format(bytes: &[u8]) -> Result<(), TestCaseError> {
    for format in FormatName::ALL {
        if let Ok(results) = parse_output(format, bytes) {
            let upload = crate::protocol::SuiteUpload {
                suite: "s".into(),
                results,
            };
            let accepted = crate::results::validate_suites(&[upload]);
            prop_assert!(
                accepted.is_ok(),
                "{format} accepted what the server refuses: {accepted:?}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_parser_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check_every_format(&bytes)?;
    }

    #[test]
    fn what_a_parser_accepts_the_server_accepts(doc in document()) {
        check_every_format(doc.to_string().as_bytes())?;
    }

    #[test]
    fn text_formats_accept_only_what_the_server_accepts(text in text_lines()) {
        check_every_format(text.as_bytes())?;
    }
}
