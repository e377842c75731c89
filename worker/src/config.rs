//! A commit's `kymo.toml`: which suites to build and run, and how to read their output.
//!
//! The file comes from the tracked repository, so it is untrusted input: everything is
//! validated here, and every error names the suite and key at fault and says how to fix it,
//! because it ends up in a failed job's log for the repository's authors to read.

use std::collections::HashSet;
use std::time::Duration;

use serde::Deserialize;

use crate::build_env::CapLints;
use crate::sandbox::settings::{RawBoundary, SuiteBoundary};
use crate::toolchain::{PinnedToolchain, ToolchainName, ToolchainSource};

/// Largest `kymo.toml` accepted, in bytes.
pub const KYMO_TOML_MAX_BYTES: usize = 64 * 1024;
/// Most suites one `kymo.toml` may declare.
pub const MAX_SUITES: usize = 32;
/// Longest suite name, in bytes.
pub const MAX_SUITE_NAME_LEN: usize = 64;
/// Longest `run` or `build` command, in bytes.
pub const MAX_COMMAND_LEN: usize = 4096;
/// Most whole-suite repeats.
pub const MAX_REPEAT: u32 = 100;
/// Longest timeout a suite may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(6 * 60 * 60);
/// Timeout of a suite that does not set one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A validated `kymo.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KymoToml {
    /// The suites, in file order; at least one, names unique.
    pub suites: Vec<Suite>,
}

/// One `[[suite]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suite {
    pub name: String,
    /// Shell command run once before the repeats, if any.
    pub build: Option<String>,
    /// Shell command whose stdout holds the results.
    pub run: String,
    pub format: ResultFormat,
    /// Whole-suite repeats; their values become samples.
    pub repeat: u32,
    /// Limit for each build or run command.
    pub timeout: Duration,
    /// Declared variables, network and resource limits of its commands.
    pub boundary: SuiteBoundary,
    /// Whether and how instructions are counted after the timed repeats.
    pub instructions: InstructionCounts,
    /// The toolchain its commands build with: the `toolchain` key when there is one; the
    /// worker fills it in from the commit's `rust-toolchain(.toml)` otherwise (see
    /// `toolchain.rs`). `None`: the worker's default toolchain.
    pub toolchain: Option<PinnedToolchain>,
    /// `cap_lints = "warn"`: no lint fails its build (rustc's `--cap-lints`).
    pub cap_lints: Option<CapLints>,
    /// `concurrent = true`: its metrics do not need a free CPU (instruction counts, memory,
    /// sizes), so it builds and runs at the same time as the job's other concurrent suites,
    /// after the timed ones, which always run alone.
    pub concurrent: bool,
}

/// A suite's `instructions` key: what callgrind counts after the timed repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InstructionCounts {
    /// `false` or absent: nothing.
    #[default]
    Off,
    /// `true`: the whole command once more, every process it starts, as one benchmark named
    /// after the suite; for programs that cannot say where a benchmark starts
    /// (`instructions.rs`).
    Command,
    /// `"per-benchmark"`: one iteration of each criterion benchmark's routine, stored beside
    /// its time (`instructions/criterion.rs`).
    PerBenchmark,
}

/// The output format a suite's `run` command prints: one of kymo-core's parsers.
pub use kymo_core::format::FormatName as ResultFormat;

fn default_format() -> ResultFormat {
    ResultFormat::Kymo
}

/// Why a `kymo.toml` was rejected. The messages are written for the repository's authors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("kymo.toml is {size} bytes; the limit is {max} bytes: shorten it")]
    TooLarge { size: usize, max: usize },
    #[error("kymo.toml is not valid UTF-8 (first bad byte at offset {offset}): save it as UTF-8")]
    NotUtf8 { offset: usize },
    #[error("kymo.toml is not valid: {0}")]
    Syntax(String),
    #[error("kymo.toml declares no suite: add at least one [[suite]] table with `name` and `run`")]
    NoSuites,
    #[error("kymo.toml declares {count} suites; at most {max} are allowed: merge or remove some")]
    TooManySuites { count: usize, max: usize },
    #[error(
        "suite #{index}: name {name:?} is invalid: {reason}; use 1 to 64 characters from A-Z a-z 0-9 _ . -"
    )]
    InvalidName {
        index: usize,
        name: String,
        reason: &'static str,
    },
    #[error("suite {name:?} is declared more than once: give each [[suite]] a unique name")]
    DuplicateName { name: String },
    #[error("suite {suite:?}: `{key}` is empty: give it a shell command{hint}")]
    EmptyCommand {
        suite: String,
        key: &'static str,
        hint: &'static str,
    },
    #[error(
        "suite {suite:?}: `{key}` is {len} bytes; the limit is {max}: move the command into a script"
    )]
    CommandTooLong {
        suite: String,
        key: &'static str,
        len: usize,
        max: usize,
    },
    #[error("suite {suite:?}: `{key}` contains a NUL character: remove it")]
    NulInCommand { suite: String, key: &'static str },
    #[error(
        "suite {suite:?}: `repeat = {value}` is out of range: use a whole number from 1 to {max}"
    )]
    InvalidRepeat { suite: String, value: i64, max: u32 },
    #[error(
        "suite {suite:?}: `timeout = {value:?}` is invalid: {reason}; write it like \"500ms\", \"30s\", \"10m\", \"1h\" or \"1m30s\" (at most 6h)"
    )]
    InvalidTimeout {
        suite: String,
        value: String,
        reason: String,
    },
    #[error(
        "suite {suite:?}: `instructions = {value}` is invalid: use true (the whole command), \"per-benchmark\" (each criterion benchmark, run by `cargo bench`) or false"
    )]
    InvalidInstructions { suite: String, value: String },
    #[error("suite {suite:?}: `{key}` is invalid: {reason} (see the README's kymo.toml section)")]
    InvalidBoundary {
        suite: String,
        key: &'static str,
        reason: String,
    },
    #[error(
        "suite {suite:?}: `concurrent = true` cannot be combined with {what}: {why}; run it alone (remove `concurrent`)"
    )]
    NotConcurrent {
        suite: String,
        what: &'static str,
        why: &'static str,
    },
    #[error("suite {suite:?}: `{key} = {value:?}` is invalid: {reason}")]
    InvalidBuildSetting {
        suite: String,
        key: &'static str,
        value: String,
        reason: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    suite: Vec<RawSuite>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    name: String,
    build: Option<String>,
    run: String,
    #[serde(default = "default_format")]
    format: ResultFormat,
    repeat: Option<i64>,
    timeout: Option<String>,
    env: Option<std::collections::BTreeMap<String, String>>,
    network: Option<bool>,
    processes: Option<i64>,
    memory: Option<String>,
    disk: Option<String>,
    instructions: Option<toml::Value>,
    toolchain: Option<String>,
    cap_lints: Option<String>,
    #[serde(default)]
    concurrent: bool,
}

/// Parses and validates the raw bytes of a `kymo.toml`, rejecting oversized or non-UTF-8 files.
pub fn parse_kymo_toml_bytes(bytes: &[u8]) -> Result<KymoToml, ConfigError> {
    check_size(bytes.len())?;
    let text = std::str::from_utf8(bytes).map_err(|e| ConfigError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    parse_kymo_toml(text)
}

/// Parses and validates the text of a `kymo.toml`.
pub fn parse_kymo_toml(text: &str) -> Result<KymoToml, ConfigError> {
    check_size(text.len())?;
    let raw: RawFile = toml::from_str(text).map_err(|e| ConfigError::Syntax(syntax_message(&e)))?;
    if raw.suite.is_empty() {
        return Err(ConfigError::NoSuites);
    }
    if raw.suite.len() > MAX_SUITES {
        return Err(ConfigError::TooManySuites {
            count: raw.suite.len(),
            max: MAX_SUITES,
        });
    }
    let mut seen = HashSet::new();
    let mut suites = Vec::with_capacity(raw.suite.len());
    for (i, raw) in raw.suite.into_iter().enumerate() {
        let suite = validate_suite(i + 1, raw)?;
        if !seen.insert(suite.name.clone()) {
            return Err(ConfigError::DuplicateName { name: suite.name });
        }
        suites.push(suite);
    }
    Ok(KymoToml { suites })
}

fn check_size(size: usize) -> Result<(), ConfigError> {
    if size > KYMO_TOML_MAX_BYTES {
        return Err(ConfigError::TooLarge {
            size,
            max: KYMO_TOML_MAX_BYTES,
        });
    }
    Ok(())
}

/// toml's messages span several lines with a source excerpt; a job log wants them as they are,
/// trimmed of the trailing newline.
fn syntax_message(error: &toml::de::Error) -> String {
    error.to_string().trim_end().to_string()
}

fn validate_suite(index: usize, raw: RawSuite) -> Result<Suite, ConfigError> {
    if let Some(reason) = name_problem(&raw.name) {
        return Err(ConfigError::InvalidName {
            index,
            name: raw.name.chars().take(80).collect(),
            reason,
        });
    }
    let name = raw.name;
    validate_command(&name, "run", &raw.run)?;
    if let Some(build) = &raw.build {
        validate_command(&name, "build", build)?;
    }
    let repeat = match raw.repeat {
        None => 1,
        Some(value) if (1..=i64::from(MAX_REPEAT)).contains(&value) => value as u32,
        Some(value) => {
            return Err(ConfigError::InvalidRepeat {
                suite: name,
                value,
                max: MAX_REPEAT,
            });
        }
    };
    let timeout = match &raw.timeout {
        None => DEFAULT_TIMEOUT,
        Some(value) => parse_duration(value).map_err(|reason| ConfigError::InvalidTimeout {
            suite: name.clone(),
            value: value.chars().take(80).collect(),
            reason,
        })?,
    };
    let boundary = RawBoundary {
        env: raw.env,
        network: raw.network,
        processes: raw.processes,
        memory: raw.memory,
        disk: raw.disk,
    }
    .validate()
    .map_err(|problem| ConfigError::InvalidBoundary {
        suite: name.clone(),
        key: problem.key,
        reason: problem.reason,
    })?;
    let invalid = |key, value: &str, reason| ConfigError::InvalidBuildSetting {
        suite: name.clone(),
        key,
        value: value.chars().take(40).collect(),
        reason,
    };
    let toolchain = match &raw.toolchain {
        None => None,
        Some(value) => Some(PinnedToolchain {
            name: ToolchainName::parse(value)
                .map_err(|reason| invalid("toolchain", value, reason))?,
            source: ToolchainSource::SuiteKey,
        }),
    };
    let cap_lints = match &raw.cap_lints {
        None => None,
        Some(value) => {
            Some(CapLints::parse(value).map_err(|reason| invalid("cap_lints", value, reason))?)
        }
    };
    let instructions = match &raw.instructions {
        None | Some(toml::Value::Boolean(false)) => InstructionCounts::Off,
        Some(toml::Value::Boolean(true)) => InstructionCounts::Command,
        Some(toml::Value::String(mode)) if mode == "per-benchmark" => {
            InstructionCounts::PerBenchmark
        }
        Some(other) => {
            return Err(ConfigError::InvalidInstructions {
                suite: name,
                value: other.to_string().chars().take(80).collect(),
            });
        }
    };
    let shared = match (raw.format, instructions) {
        (ResultFormat::Criterion, _) => Some((
            "`format = \"criterion\"`",
            "criterion writes its results into the target directory that every suite shares",
        )),
        (_, InstructionCounts::PerBenchmark) => Some((
            "`instructions = \"per-benchmark\"`",
            "it counts criterion benchmarks, whose results share the target directory",
        )),
        _ => None,
    };
    if let (true, Some((what, why))) = (raw.concurrent, shared) {
        return Err(ConfigError::NotConcurrent {
            suite: name,
            what,
            why,
        });
    }
    Ok(Suite {
        name,
        build: raw.build,
        run: raw.run,
        format: raw.format,
        repeat,
        timeout,
        boundary,
        instructions,
        toolchain,
        cap_lints,
        concurrent: raw.concurrent,
    })
}

fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_SUITE_NAME_LEN {
        Some("it is longer than 64 characters")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        Some("it contains a character that is not allowed")
    } else {
        None
    }
}

fn validate_command(suite: &str, key: &'static str, command: &str) -> Result<(), ConfigError> {
    if command.trim().is_empty() {
        let hint = if key == "build" {
            ", or remove the key"
        } else {
            ""
        };
        return Err(ConfigError::EmptyCommand {
            suite: suite.to_string(),
            key,
            hint,
        });
    }
    if command.len() > MAX_COMMAND_LEN {
        return Err(ConfigError::CommandTooLong {
            suite: suite.to_string(),
            key,
            len: command.len(),
            max: MAX_COMMAND_LEN,
        });
    }
    if command.contains('\0') {
        return Err(ConfigError::NulInCommand {
            suite: suite.to_string(),
            key,
        });
    }
    Ok(())
}

/// Parses a duration such as `500ms`, `30s`, `10m`, `1h` or `1h30m`: numbers with units
/// `h`, `m`, `s`, `ms`, each unit at most once and largest first. Zero and more than 6 hours
/// are rejected. The error is the reason, for [`ConfigError::InvalidTimeout`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    // Units ordered largest first; a part must use a unit after the previous part's unit.
    const UNITS: [(&str, u64); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];
    if text.is_empty() {
        return Err("it is empty".into());
    }
    let mut rest = text;
    let mut total_ms: u64 = 0;
    let mut next_unit = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("expected a number at {rest:?}"));
        }
        if digits > 9 {
            return Err("the number is too large".into());
        }
        let number: u64 = rest[..digits].parse().expect("at most 9 ASCII digits");
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let Some(position) = UNITS.iter().position(|(name, _)| *name == unit) else {
            return Err(if unit.is_empty() {
                format!("the number {number} has no unit (h, m, s or ms)")
            } else {
                format!("unknown unit {unit:?} (use h, m, s or ms)")
            });
        };
        if position < next_unit {
            return Err("units must appear once each, largest first".into());
        }
        next_unit = position + 1;
        total_ms += number * UNITS[position].1;
    }
    if total_ms == 0 {
        return Err("it must be longer than zero".into());
    }
    let duration = Duration::from_millis(total_ms);
    if duration > MAX_TIMEOUT {
        return Err("it is longer than 6h".into());
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
[[suite]]
name = "kernels"
build = "cargo build --release -p bench-kernels"
run = "target/release/kymo-kernels --json"
format = "google-benchmark"
repeat = 5
timeout = "1m30s"

[[suite]]
name = "cli.startup-2"
run = "hyperfine --export-json - ./x"
"#;

    fn suite(body: &str) -> String {
        format!("[[suite]]\nname = \"s\"\nrun = \"true\"\n{body}\n")
    }

    fn error_of(text: &str) -> ConfigError {
        parse_kymo_toml(text).expect_err("should be rejected")
    }

    #[test]
    fn a_full_file_parses_with_defaults_filled_in() {
        let config = parse_kymo_toml(FULL).unwrap();
        assert_eq!(config.suites.len(), 2);
        let first = &config.suites[0];
        assert_eq!(first.name, "kernels");
        assert_eq!(
            first.build.as_deref(),
            Some("cargo build --release -p bench-kernels")
        );
        assert_eq!(first.format, ResultFormat::GoogleBenchmark);
        assert_eq!(first.repeat, 5);
        assert_eq!(first.timeout, Duration::from_secs(90));
        let second = &config.suites[1];
        assert_eq!(second.build, None);
        assert_eq!(second.format, ResultFormat::Kymo);
        assert_eq!(second.repeat, 1);
        assert_eq!(second.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn a_suite_runs_alone_unless_it_says_it_may_run_concurrently() {
        let concurrent = |text: &str| parse_kymo_toml(&suite(text)).unwrap().suites[0].concurrent;
        assert!(!concurrent(""));
        assert!(!concurrent("concurrent = false"));
        assert!(concurrent("concurrent = true"));
        assert!(concurrent("concurrent = true\ninstructions = true"));
        for bad in [
            "concurrent = 1",
            "concurrent = \"yes\"",
            "concurrent = [true]",
        ] {
            let error = error_of(&suite(bad)).to_string();
            assert!(error.contains("concurrent"), "{bad}: {error}");
        }
        for (shared, what) in [
            ("format = \"criterion\"", "criterion"),
            ("instructions = \"per-benchmark\"", "per-benchmark"),
        ] {
            let error = error_of(&suite(&format!("concurrent = true\n{shared}"))).to_string();
            assert!(error.contains(what) && error.contains("alone"), "{error}");
            assert!(
                parse_kymo_toml(&suite(shared)).is_ok(),
                "{shared} alone is fine"
            );
        }
    }

    #[test]
    fn instruction_counts_are_asked_for_with_a_boolean_or_per_benchmark() {
        let counts = |text: &str| parse_kymo_toml(&suite(text)).unwrap().suites[0].instructions;
        assert_eq!(counts(""), InstructionCounts::Off);
        assert_eq!(counts("instructions = false"), InstructionCounts::Off);
        assert_eq!(counts("instructions = true"), InstructionCounts::Command);
        assert_eq!(
            counts("instructions = \"per-benchmark\""),
            InstructionCounts::PerBenchmark
        );
        let huge = format!("instructions = \"{}\"", "x".repeat(10_000));
        for bad in [
            "instructions = \"yes\"",
            "instructions = \"Per-Benchmark\"",
            "instructions = \"per-benchmark \"",
            "instructions = 1",
            "instructions = [true]",
            "instructions = { per = \"benchmark\" }",
            &huge,
        ] {
            let error = error_of(&suite(bad)).to_string();
            assert!(error.contains("instructions"), "{bad}: {error}");
            assert!(error.len() < 400, "the value is cut short: {error}");
        }
    }

    #[test]
    fn every_format_name_round_trips() {
        for format in ResultFormat::ALL {
            let text = suite(&format!("format = {:?}", format.as_str()));
            assert_eq!(parse_kymo_toml(&text).unwrap().suites[0].format, format);
            assert_eq!(ResultFormat::parse(format.as_str()), Some(format));
        }
        assert_eq!(ResultFormat::parse("GoBench"), None);
        let message = error_of(&suite("format = \"json\"")).to_string();
        assert!(
            message.contains("json") && message.contains("go-bench"),
            "{message}"
        );
    }

    #[test]
    fn durations_accept_units_and_combinations() {
        let ok = [
            ("500ms", 500),
            ("30s", 30_000),
            ("10m", 600_000),
            ("1h", 3_600_000),
            ("1m30s", 90_000),
            ("1h2m3s4ms", 3_723_004),
            ("6h", 21_600_000),
        ];
        for (text, ms) in ok {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_millis(ms)),
                "{text}"
            );
        }
    }

    #[test]
    fn durations_reject_zero_overlong_and_malformed_text() {
        let bad = [
            "",
            "0s",
            "0h0m",
            "6h1ms",
            "7h",
            "10",
            "10 m",
            " 10m",
            "10min",
            "m",
            "-5s",
            "1.5h",
            "30s1m",
            "1m1m",
            "99999999999s",
            "1d",
        ];
        for text in bad {
            assert!(parse_duration(text).is_err(), "{text:?} should be rejected");
        }
        let message = error_of(&suite("timeout = \"0s\"")).to_string();
        assert!(
            message.contains("suite \"s\"") && message.contains("timeout"),
            "{message}"
        );
        assert!(matches!(
            error_of(&suite("timeout = 30")),
            ConfigError::Syntax(_)
        ));
    }

    #[test]
    fn repeat_must_be_between_1_and_100() {
        assert_eq!(
            parse_kymo_toml(&suite("repeat = 100")).unwrap().suites[0].repeat,
            100
        );
        for value in [0, -1, 101, i64::MAX] {
            let error = error_of(&suite(&format!("repeat = {value}")));
            assert_eq!(
                error,
                ConfigError::InvalidRepeat {
                    suite: "s".into(),
                    value,
                    max: MAX_REPEAT
                }
            );
        }
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_name() {
        let message = error_of(&suite("repeats = 3")).to_string();
        assert!(message.contains("repeats"), "{message}");
        let message = error_of("[[suites]]\nname = \"a\"\nrun = \"b\"\n").to_string();
        assert!(message.contains("suites"), "{message}");
    }

    #[test]
    fn missing_and_empty_required_keys_are_explained() {
        let message = error_of("[[suite]]\nname = \"a\"\n").to_string();
        assert!(message.contains("run"), "{message}");
        assert_eq!(error_of(""), ConfigError::NoSuites);
        assert_eq!(error_of("# only a comment\n"), ConfigError::NoSuites);
        let error = error_of("[[suite]]\nname = \"a\"\nrun = \"  \"\n");
        assert!(
            matches!(error, ConfigError::EmptyCommand { key: "run", .. }),
            "{error}"
        );
        let error = error_of(&suite("build = \"\""));
        assert!(error.to_string().contains("remove the key"), "{error}");
    }

    #[test]
    fn names_must_be_unique_and_well_formed() {
        let twice = format!("{}{}", suite(""), suite(""));
        assert_eq!(
            error_of(&twice),
            ConfigError::DuplicateName { name: "s".into() }
        );
        let long = "a".repeat(65);
        for name in [
            "",
            "a b",
            "../etc",
            "a/b",
            "naïve",
            "x\\u0000",
            long.as_str(),
        ] {
            // `name` is written raw between TOML quotes, so `\\u0000` reaches the parser as NUL.
            let text = format!("[[suite]]\nname = \"{name}\"\nrun = \"true\"\n");
            assert!(
                matches!(error_of(&text), ConfigError::InvalidName { index: 1, .. }),
                "{name:?}"
            );
        }
        let ok = "a".repeat(64);
        assert!(parse_kymo_toml(&format!("[[suite]]\nname = \"{ok}\"\nrun = \"x\"\n")).is_ok());
    }

    #[test]
    fn commands_are_bounded_and_free_of_nul() {
        let long = "x".repeat(MAX_COMMAND_LEN + 1);
        let text = format!("[[suite]]\nname = \"a\"\nrun = \"{long}\"\n");
        assert!(matches!(
            error_of(&text),
            ConfigError::CommandTooLong { key: "run", .. }
        ));
        let text = "[[suite]]\nname = \"a\"\nrun = \"true\"\nbuild = \"make\\u0000rm\"\n";
        assert!(matches!(
            error_of(text),
            ConfigError::NulInCommand { key: "build", .. }
        ));
    }

    #[test]
    fn too_many_suites_and_oversized_files_are_rejected() {
        let many: String = (0..=MAX_SUITES)
            .map(|i| format!("[[suite]]\nname = \"s{i}\"\nrun = \"true\"\n"))
            .collect();
        assert_eq!(
            error_of(&many),
            ConfigError::TooManySuites { count: 33, max: 32 }
        );
        let huge = format!("{}# {}\n", suite(""), "x".repeat(KYMO_TOML_MAX_BYTES));
        assert!(matches!(error_of(&huge), ConfigError::TooLarge { .. }));
        let huge_bytes = vec![b' '; KYMO_TOML_MAX_BYTES + 1];
        assert!(matches!(
            parse_kymo_toml_bytes(&huge_bytes),
            Err(ConfigError::TooLarge { .. })
        ));
    }

    #[test]
    fn hostile_and_malformed_input_is_rejected_cleanly() {
        let deep = format!("x = {}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(matches!(error_of(&deep), ConfigError::Syntax(_)));
        assert!(matches!(
            error_of("[[suite]\nname="),
            ConfigError::Syntax(_)
        ));
        assert!(matches!(
            error_of("suite = \"nope\""),
            ConfigError::Syntax(_)
        ));
        assert!(matches!(
            error_of(&suite("name = \"again\"")),
            ConfigError::Syntax(_)
        ));
    }

    #[test]
    fn boundary_keys_parse_and_hostile_values_name_the_suite_and_key() {
        let text = suite(
            "env = { RUST_LOG = \"info\" }\nnetwork = false\nprocesses = 64\nmemory = \"512MiB\"\ndisk = \"2GiB\"",
        );
        let boundary = &parse_kymo_toml(&text).unwrap().suites[0].boundary;
        assert_eq!(boundary.env, vec![("RUST_LOG".into(), "info".into())]);
        assert!(!boundary.network);
        assert_eq!(
            (boundary.processes, boundary.memory, boundary.disk),
            (64, 512 << 20, 2 << 30)
        );
        for (body, key) in [
            ("env = { KYMO_TOKEN = \"x\" }", "env"),
            ("env = { LD_PRELOAD = \"/tmp/x.so\" }", "env"),
            ("processes = 0", "processes"),
            ("memory = \"1EiB\"", "memory"),
            ("disk = \"0\"", "disk"),
        ] {
            let error = error_of(&suite(body));
            assert!(
                matches!(&error, ConfigError::InvalidBoundary { suite, key: k, .. } if suite == "s" && *k == key),
                "{body}: {error}"
            );
        }
        assert!(matches!(
            error_of(&suite("network = \"no\"")),
            ConfigError::Syntax(_)
        ));
        assert!(matches!(
            error_of(&suite("env = { A = 1 }")),
            ConfigError::Syntax(_)
        ));
    }

    #[test]
    fn a_toolchain_and_a_lint_cap_are_build_settings_of_a_suite() {
        let plain = &parse_kymo_toml(&suite("")).unwrap().suites[0];
        assert_eq!((plain.toolchain.as_ref(), plain.cap_lints), (None, None));
        let text = suite("toolchain = \"nightly-2024-01-01\"\ncap_lints = \"warn\"");
        let pinned = &parse_kymo_toml(&text).unwrap().suites[0];
        let pin = pinned.toolchain.as_ref().unwrap();
        assert_eq!(pin.name.as_str(), "nightly-2024-01-01");
        assert_eq!(pin.source, ToolchainSource::SuiteKey);
        assert_eq!(pinned.cap_lints, Some(CapLints::Warn));
        let long = format!("toolchain = \"{}\"", "1".repeat(10_000));
        for (body, key) in [
            ("toolchain = \"--force\"", "toolchain"),
            ("toolchain = \"stable; rm -rf ~\"", "toolchain"),
            ("toolchain = \"../../usr/bin\"", "toolchain"),
            ("toolchain = \"\"", "toolchain"),
            (long.as_str(), "toolchain"),
            ("cap_lints = \"deny\"", "cap_lints"),
            ("cap_lints = \"warn -C opt-level=0\"", "cap_lints"),
        ] {
            let error = error_of(&suite(body));
            assert!(
                matches!(&error, ConfigError::InvalidBuildSetting { suite, key: k, .. } if suite == "s" && *k == key),
                "{body}: {error}"
            );
            assert!(
                error.to_string().len() < 400,
                "the message stays short: {error}"
            );
        }
        for wrong_type in [
            "toolchain = 1.95",
            "cap_lints = true",
            "toolchain = [\"stable\"]",
        ] {
            assert!(
                matches!(error_of(&suite(wrong_type)), ConfigError::Syntax(_)),
                "{wrong_type}"
            );
        }
    }

    #[test]
    fn bytes_must_be_utf8() {
        let mut bytes = suite("").into_bytes();
        assert!(parse_kymo_toml_bytes(&bytes).is_ok());
        bytes.extend_from_slice(b"# \xff\xfe\n");
        let offset = bytes.len() - 3;
        assert_eq!(
            parse_kymo_toml_bytes(&bytes),
            Err(ConfigError::NotUtf8 { offset })
        );
        assert!(
            ConfigError::NotUtf8 { offset }
                .to_string()
                .contains("UTF-8")
        );
    }
}

#[cfg(test)]
mod repository_config {
    use super::*;

    #[test]
    fn kymos_own_kymo_toml_is_valid() {
        let config = parse_kymo_toml(include_str!("../../kymo.toml")).unwrap();
        assert_eq!(config.suites[0].name, "kernels");
        assert_eq!(config.suites[0].repeat, 3);
        let counts = &config.suites[1];
        assert_eq!(counts.name, "kernels-instructions");
        assert!(counts.run.contains("--instructions-only"), "{}", counts.run);
        assert_eq!(counts.repeat, 1, "a count does not vary: one per commit");
        let vm_scale = &config.suites[2];
        assert_eq!(vm_scale.name, "vm-scale");
        assert!(vm_scale.run.contains("vm-scale --json"), "{}", vm_scale.run);
    }
}
