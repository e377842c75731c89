//! Properties of the worker's parsers of untrusted input, checked on generated input
//! (proptest): a `kymo.toml` never makes the parser panic and what it accepts is within the
//! documented limits; a timeout is never zero, negative or past the limit; no repository name
//! maps to a directory outside `mirrors/`.

use std::collections::HashSet;
use std::time::Duration;

use proptest::prelude::*;

use crate::config::{MAX_REPEAT, MAX_SUITES, MAX_TIMEOUT, parse_duration, parse_kymo_toml_bytes};
use crate::mirror::mirror_dir_name;

/// Values a suite's keys may take: sane, empty, negative, huge, of the wrong type.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"s\"".to_owned()),
        Just("\"echo 1\"".to_owned()),
        Just("\"kymo\"".to_owned()),
        Just("\"go-bench\"".to_owned()),
        Just("\"-5s\"".to_owned()),
        Just("\"0s\"".to_owned()),
        Just("\"1h30m\"".to_owned()),
        Just("\"7h\"".to_owned()),
        Just("\"99999999999ms\"".to_owned()),
        Just("\"\"".to_owned()),
        Just("-1".to_owned()),
        Just("0".to_owned()),
        Just("101".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("nan".to_owned()),
        Just("inf".to_owned()),
        Just("[1, 2]".to_owned()),
        Just("{ a = 1 }".to_owned()),
        (1i64..200).prop_map(|n| n.to_string()),
        "\"[ -~]{0,16}\"".prop_map(|s| s.replace('\\', "")),
    ]
}

fn suite_table() -> impl Strategy<Value = String> {
    let key = prop::sample::select(
        &[
            "name",
            "build",
            "run",
            "format",
            "repeat",
            "timeout",
            "extra",
            "toolchain",
            "cap_lints",
        ][..],
    );
    prop::collection::vec((key, toml_value()), 0..8).prop_map(|pairs| {
        let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        format!("[[suite]]\n{}\n", body.join("\n"))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn kymo_toml_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_kymo_toml_bytes(&bytes);
    }

    #[test]
    fn an_accepted_kymo_toml_is_within_the_limits(tables in prop::collection::vec(suite_table(), 0..4)) {
        if let Ok(config) = parse_kymo_toml_bytes(tables.concat().as_bytes()) {
            prop_assert!(!config.suites.is_empty() && config.suites.len() <= MAX_SUITES);
            let names: HashSet<&str> = config.suites.iter().map(|s| s.name.as_str()).collect();
            prop_assert_eq!(names.len(), config.suites.len(), "suite names are unique");
            for suite in &config.suites {
                prop_assert!((1..=MAX_REPEAT).contains(&suite.repeat), "{suite:?}");
                prop_assert!(suite.timeout > Duration::ZERO && suite.timeout <= MAX_TIMEOUT, "{suite:?}");
                prop_assert!(!suite.run.trim().is_empty(), "{suite:?}");
            }
        }
    }

    #[test]
    fn a_timeout_is_positive_and_bounded(text in "[-0-9hms ]{0,12}") {
        if let Ok(duration) = parse_duration(&text) {
            prop_assert!(duration > Duration::ZERO && duration <= MAX_TIMEOUT, "{text:?}: {duration:?}");
        }
    }

    #[test]
    fn no_repository_name_leaves_the_mirrors_directory(name in any::<String>(), other in any::<String>()) {
        if let Ok(dir) = mirror_dir_name(&name) {
            prop_assert!(!dir.contains('/') && !dir.contains('\\') && !dir.contains('\0'), "{dir:?}");
            prop_assert!(!dir.starts_with('.'), "{dir:?}");
            if let Ok(other_dir) = mirror_dir_name(&other) {
                prop_assert_eq!(dir == other_dir, name == other, "distinct names share {}", dir);
            }
        }
    }

    #[test]
    fn dotted_names_stay_inside_too(parts in prop::collection::vec(prop::sample::select(&["..", ".", "/", "a", "%2e", "\\"][..]), 1..8)) {
        let name = parts.concat();
        if let Ok(dir) = mirror_dir_name(&name) {
            prop_assert!(!dir.contains('/') && !dir.starts_with('.'), "{name:?} -> {dir:?}");
        }
    }
}
