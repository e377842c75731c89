//! What a suite may declare about its boundary in `kymo.toml`: extra environment variables,
//! whether it needs the network, and its limits. Pure validation; nothing here touches the
//! machine.

use std::collections::BTreeMap;

/// Most variables one suite may declare.
pub const MAX_ENV_VARS: usize = 64;
/// Most bytes of one declared variable, name and value together.
pub const MAX_ENV_VAR_BYTES: usize = 4096;
/// Most processes (threads count too) a suite may ask for at once.
pub const MAX_PROCESSES: u32 = 32_768;
/// Largest memory or disk limit a suite may ask for.
pub const MAX_SIZE: u64 = 1 << 40;
/// Smallest memory or disk limit: below it not even a shell starts.
pub const MIN_SIZE: u64 = 1 << 20;

/// Variables the worker sets itself; a suite may not replace them. `RUSTUP_TOOLCHAIN` is the
/// `toolchain` key's, which the worker installs before the boundary closes.
const RESERVED: [&str; 7] = [
    "PATH",
    "HOME",
    "TMPDIR",
    "CARGO_TARGET_DIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
];
/// Variables that change what the dynamic loader or the shell runs before the suite's own code;
/// they could only be used to hide what a suite does, so they are refused.
const LOADER: [&str; 5] = [
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
];

/// A suite's boundary settings, defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteBoundary {
    /// Declared variables, added to the allow-listed environment.
    pub env: Vec<(String, String)>,
    /// Whether the suite may open network connections.
    pub network: bool,
    /// Most processes and threads alive at once.
    pub processes: u32,
    /// Most memory, in bytes: of all the suite's processes together where a memory cgroup can
    /// be made; otherwise of each process (data segment and anonymous mappings).
    pub memory: u64,
    /// Most disk space one command may add under its writable directories, in bytes; also the
    /// largest file it may write.
    pub disk: u64,
}

impl Default for SuiteBoundary {
    fn default() -> Self {
        Self {
            env: Vec::new(),
            network: true,
            processes: 4096,
            memory: 16 << 30,
            disk: 50 << 30,
        }
    }
}

/// The raw keys, as written in `kymo.toml`.
#[derive(Debug, Default)]
pub struct RawBoundary {
    pub env: Option<BTreeMap<String, String>>,
    pub network: Option<bool>,
    pub processes: Option<i64>,
    pub memory: Option<String>,
    pub disk: Option<String>,
}

/// A rejected key: which one and why, for [`crate::config::ConfigError::InvalidBoundary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundaryProblem {
    pub key: &'static str,
    pub reason: String,
}

fn problem(key: &'static str, reason: impl Into<String>) -> BoundaryProblem {
    BoundaryProblem {
        key,
        reason: reason.into(),
    }
}

impl RawBoundary {
    /// Validates the keys and fills in defaults.
    pub fn validate(self) -> Result<SuiteBoundary, BoundaryProblem> {
        let defaults = SuiteBoundary::default();
        let env = validate_env(self.env.unwrap_or_default())?;
        let processes = match self.processes {
            None => defaults.processes,
            Some(n) if (1..=i64::from(MAX_PROCESSES)).contains(&n) => n as u32,
            Some(n) => {
                return Err(problem(
                    "processes",
                    format!("{n} is out of range: use a whole number from 1 to {MAX_PROCESSES}"),
                ));
            }
        };
        let size = |key, value: Option<String>, default| match value {
            None => Ok(default),
            Some(text) => parse_size(&text).map_err(|reason| {
                let shown: String = text.chars().take(40).collect();
                problem(key, format!("{shown:?} is invalid: {reason}"))
            }),
        };
        Ok(SuiteBoundary {
            env,
            network: self.network.unwrap_or(defaults.network),
            processes,
            memory: size("memory", self.memory, defaults.memory)?,
            disk: size("disk", self.disk, defaults.disk)?,
        })
    }
}

fn validate_env(env: BTreeMap<String, String>) -> Result<Vec<(String, String)>, BoundaryProblem> {
    if env.len() > MAX_ENV_VARS {
        return Err(problem(
            "env",
            format!(
                "{} variables; at most {MAX_ENV_VARS} are allowed",
                env.len()
            ),
        ));
    }
    for (name, value) in &env {
        let shown: String = name.chars().take(40).collect();
        let valid_name = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_name {
            return Err(problem(
                "env",
                format!(
                    "{shown:?} is not a variable name: use A-Z a-z 0-9 _, not starting with a digit"
                ),
            ));
        }
        if name.to_ascii_uppercase().starts_with("KYMO_") {
            return Err(problem(
                "env",
                format!("{shown:?}: KYMO_ variables are kymo's own"),
            ));
        }
        if name == "RUSTUP_TOOLCHAIN" {
            return Err(problem(
                "env",
                "RUSTUP_TOOLCHAIN is set by the worker: pin the toolchain with the suite's \
                 `toolchain` key, which the worker installs first",
            ));
        }
        if RESERVED.contains(&name.as_str()) || LOADER.contains(&name.as_str()) {
            return Err(problem(
                "env",
                format!("{shown:?} is set by the worker and cannot be declared"),
            ));
        }
        if name.len() + value.len() > MAX_ENV_VAR_BYTES {
            return Err(problem(
                "env",
                format!("{shown:?} is longer than {MAX_ENV_VAR_BYTES} bytes"),
            ));
        }
        if value.contains('\0') {
            return Err(problem(
                "env",
                format!("{shown:?} contains a NUL character"),
            ));
        }
    }
    Ok(env.into_iter().collect())
}

/// Parses a size such as `512MiB`, `4GiB`, `1TiB`, `100MB` or `65536` (bytes), between
/// [`MIN_SIZE`] and [`MAX_SIZE`].
pub fn parse_size(text: &str) -> Result<u64, String> {
    const UNITS: [(&str, u64); 9] = [
        ("", 1),
        ("B", 1),
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
        ("TiB", 1 << 40),
        ("KB", 1_000),
        ("MB", 1_000_000),
        ("GB", 1_000_000_000),
    ];
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err("it does not start with a number".into());
    }
    if digits > 15 {
        return Err("the number is too large".into());
    }
    let number: u64 = text[..digits].parse().expect("at most 15 ASCII digits");
    let unit = &text[digits..];
    let Some((_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(format!(
            "unknown unit {unit:?} (use KiB, MiB, GiB, TiB, KB, MB or GB)"
        ));
    };
    let bytes = number.saturating_mul(*scale);
    if bytes < MIN_SIZE {
        return Err("it is smaller than 1MiB".into());
    }
    if bytes > MAX_SIZE {
        return Err("it is larger than 1TiB".into());
    }
    Ok(bytes)
}

/// A size as people read it: `512MiB`, `4GiB`, or bytes when it is not a round number.
pub fn format_size(bytes: u64) -> String {
    for (unit, scale) in [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ] {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> RawBoundary {
        RawBoundary {
            env: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..RawBoundary::default()
        }
    }

    #[test]
    fn defaults_allow_the_network_and_set_every_limit() {
        let boundary = RawBoundary::default().validate().unwrap();
        assert_eq!(boundary, SuiteBoundary::default());
        assert!(boundary.network);
        assert!(boundary.processes > 100 && boundary.memory >= 1 << 30 && boundary.disk >= 1 << 30);
    }

    #[test]
    fn sizes_accept_binary_and_decimal_units() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(format_size(512 << 20), "512MiB");
        assert_eq!(format_size(3 << 30), "3GiB");
        assert_eq!(format_size(1_000_001), "1000001 bytes");
    }

    #[test]
    fn sizes_reject_malformed_tiny_and_huge_values() {
        for bad in [
            "",
            "MiB",
            "1.5GiB",
            "-1GiB",
            "4 GiB",
            "4gib",
            "4G",
            "1KiB",
            "2TiB",
            "99999999999999999999",
            "1EiB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be rejected");
        }
        let raw = RawBoundary {
            memory: Some("lots".into()),
            ..RawBoundary::default()
        };
        assert_eq!(raw.validate().unwrap_err().key, "memory");
    }

    #[test]
    fn processes_must_be_in_range() {
        for (value, ok) in [
            (1, true),
            (32_768, true),
            (0, false),
            (-5, false),
            (32_769, false),
        ] {
            let raw = RawBoundary {
                processes: Some(value),
                ..RawBoundary::default()
            };
            assert_eq!(raw.validate().is_ok(), ok, "{value}");
        }
    }

    #[test]
    fn declared_variables_are_kept_in_name_order() {
        let boundary = env(&[("RUST_LOG", "info"), ("BENCH_SIZE", "large")])
            .validate()
            .unwrap();
        assert_eq!(
            boundary.env,
            vec![
                ("BENCH_SIZE".into(), "large".into()),
                ("RUST_LOG".into(), "info".into())
            ]
        );
    }

    #[test]
    fn kymo_reserved_loader_and_malformed_names_are_refused() {
        let refused = [
            "KYMO_TOKEN",
            "kymo_db",
            "PATH",
            "HOME",
            "CARGO_TARGET_DIR",
            "RUSTUP_TOOLCHAIN",
            "LD_PRELOAD",
            "BASH_ENV",
            "",
            "1ABC",
            "A-B",
            "A B",
            "A=B",
            "ÄB",
        ];
        for name in refused {
            let error = env(&[(name, "x")]).validate().unwrap_err();
            assert_eq!(error.key, "env", "{name:?}");
        }
    }

    #[test]
    fn oversized_and_too_many_variables_are_refused() {
        let long = "x".repeat(MAX_ENV_VAR_BYTES);
        assert!(env(&[("A", &long)]).validate().is_err());
        assert!(env(&[("A", &long[1..])]).validate().is_ok());
        let many: Vec<(String, String)> = (0..=MAX_ENV_VARS)
            .map(|i| (format!("V{i}"), String::new()))
            .collect();
        let raw = RawBoundary {
            env: Some(many.into_iter().collect()),
            ..RawBoundary::default()
        };
        assert!(raw.validate().unwrap_err().reason.contains("at most"));
        assert!(env(&[("A", "x\0y")]).validate().is_err());
    }
}
