//! The variables that say how a suite's Rust code is built, added to the sandbox's allow-listed
//! environment: the toolchain it pinned (`RUSTUP_TOOLCHAIN`), cargo without the network when the
//! suite has none (`CARGO_NET_OFFLINE`), and lints capped when it asks (`cap_lints`). Pure.

use crate::toolchain::PinnedToolchain;

/// What `cap_lints` asks of rustc: the most severe level any lint may reach, so that a lint a
/// newer compiler added (or made deny-by-default) does not fail an old commit's
/// `#![deny(warnings)]`. rustc's own `--cap-lints`, which cargo already passes (as `allow`) for
/// dependencies from a registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapLints {
    /// Lints are still printed, as warnings.
    Warn,
    /// Lints are silent.
    Allow,
}

impl CapLints {
    /// Parses the key's value; the error says what to write instead.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "warn" => Ok(CapLints::Warn),
            "allow" => Ok(CapLints::Allow),
            other => Err(format!(
                "{:?} is not a lint level: use \"warn\" (lints are printed, never fatal) or \
                 \"allow\" (lints are silent)",
                other.chars().take(40).collect::<String>()
            )),
        }
    }

    fn flag(self) -> &'static str {
        match self {
            CapLints::Warn => "--cap-lints=warn",
            CapLints::Allow => "--cap-lints=allow",
        }
    }
}

/// How one suite's code is built, beyond its declared variables.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildSettings<'a> {
    /// The toolchain the suite pinned; `None` builds with the worker's default.
    pub toolchain: Option<&'a PinnedToolchain>,
    /// Cargo must not reach the network (the suite has none): it builds from what the worker
    /// fetched before the boundary closed.
    pub offline: bool,
    pub cap_lints: Option<CapLints>,
}

/// Sets (or replaces) `name` in `env`, keeping one entry per name.
pub fn set_variable(env: &mut Vec<(String, String)>, name: &str, value: String) {
    match env.iter_mut().find(|(key, _)| key == name) {
        Some(entry) => entry.1 = value,
        None => env.push((name.to_owned(), value)),
    }
}

/// Adds the build settings to a command's environment.
///
/// The lint cap goes into `CARGO_BUILD_RUSTFLAGS`, which cargo merges with the repository's
/// own `[build] rustflags`, where `RUSTFLAGS` would replace them (and change what is measured);
/// a suite that declares `RUSTFLAGS` has replaced them already, and gets the cap appended there.
pub fn apply_build_settings(env: &mut Vec<(String, String)>, settings: &BuildSettings) {
    if let Some(pin) = settings.toolchain {
        set_variable(env, "RUSTUP_TOOLCHAIN", pin.name.as_str().to_owned());
    }
    if settings.offline {
        set_variable(env, "CARGO_NET_OFFLINE", "true".to_owned());
    }
    if let Some(cap) = settings.cap_lints {
        let declared = |name: &str| env.iter().any(|(key, _)| key == name);
        let variable = if declared("RUSTFLAGS") {
            "RUSTFLAGS"
        } else {
            "CARGO_BUILD_RUSTFLAGS"
        };
        let flags = match env.iter().find(|(key, _)| key == variable) {
            Some((_, flags)) if !flags.trim().is_empty() => format!("{flags} {}", cap.flag()),
            _ => cap.flag().to_owned(),
        };
        set_variable(env, variable, flags);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolchain::{ToolchainName, ToolchainSource};

    fn value<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
        let mut found = env.iter().filter(|(key, _)| key == name);
        let first = found.next().map(|(_, v)| v.as_str());
        assert!(found.next().is_none(), "{name} is set twice: {env:?}");
        first
    }

    #[test]
    fn lint_levels_are_warn_or_allow() {
        assert_eq!(CapLints::parse("warn"), Ok(CapLints::Warn));
        assert_eq!(CapLints::parse("allow"), Ok(CapLints::Allow));
        for bad in ["deny", "forbid", "Warn", "", "warn --cfg x", "true"] {
            let reason = CapLints::parse(bad).unwrap_err();
            assert!(reason.contains("\"warn\""), "{bad}: {reason}");
        }
    }

    #[test]
    fn nothing_asked_adds_nothing() {
        let mut env = vec![("PATH".to_owned(), "/usr/bin".to_owned())];
        apply_build_settings(&mut env, &BuildSettings::default());
        assert_eq!(env.len(), 1);
    }

    #[test]
    fn a_pinned_toolchain_replaces_the_workers_default() {
        let pin = PinnedToolchain {
            name: ToolchainName::parse("1.95.0").unwrap(),
            source: ToolchainSource::SuiteKey,
        };
        let mut env = vec![("RUSTUP_TOOLCHAIN".to_owned(), "nightly".to_owned())];
        let settings = BuildSettings {
            toolchain: Some(&pin),
            offline: true,
            ..BuildSettings::default()
        };
        apply_build_settings(&mut env, &settings);
        assert_eq!(value(&env, "RUSTUP_TOOLCHAIN"), Some("1.95.0"));
        assert_eq!(value(&env, "CARGO_NET_OFFLINE"), Some("true"));
    }

    #[test]
    fn the_lint_cap_joins_the_flags_cargo_would_use() {
        let capped = |declared: &[(&str, &str)]| {
            let mut env: Vec<(String, String)> = declared
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let settings = BuildSettings {
                cap_lints: Some(CapLints::Warn),
                ..BuildSettings::default()
            };
            apply_build_settings(&mut env, &settings);
            env
        };
        let env = capped(&[]);
        assert_eq!(
            value(&env, "CARGO_BUILD_RUSTFLAGS"),
            Some("--cap-lints=warn")
        );
        assert_eq!(value(&env, "RUSTFLAGS"), None, "config rustflags stay");
        let env = capped(&[("RUSTFLAGS", "-C target-cpu=native")]);
        assert_eq!(
            value(&env, "RUSTFLAGS"),
            Some("-C target-cpu=native --cap-lints=warn")
        );
        assert_eq!(value(&env, "CARGO_BUILD_RUSTFLAGS"), None);
        let env = capped(&[("CARGO_BUILD_RUSTFLAGS", "--cfg fast")]);
        assert_eq!(
            value(&env, "CARGO_BUILD_RUSTFLAGS"),
            Some("--cfg fast --cap-lints=warn")
        );
    }
}
