//! Installs the toolchains that suites pin, through the worker's own rustup, before the suite's
//! boundary closes: inside it `RUSTUP_HOME` is read-only and the network may be off, so a
//! missing toolchain could not be installed there. Installed toolchains stay in rustup's home
//! (the cache); the worker remembers which it has checked, so a job asks rustup only about
//! toolchains it has not used yet.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::exec::{CommandSpec, ExitKind, run_command};
use crate::toolchain::ToolchainName;

/// Longest a toolchain's installation may take (a download of about 200 MB).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Lines of rustup's output kept in a failed job's message.
const REASON_LINES: usize = 3;

/// The toolchains this worker has installed or found, with what their `rustc --version` says.
#[derive(Debug, Default)]
pub struct Toolchains {
    known: Mutex<HashMap<ToolchainName, String>>,
}

impl Toolchains {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes sure `name` is installed (installing it with rustup if it is not) and returns its
    /// `rustc --version`. The error says why it cannot be used, in words for the job's page.
    pub fn ensure(&self, name: &ToolchainName, cancel: &AtomicBool) -> Result<String, String> {
        if let Some(version) = self.known.lock().expect("toolchains lock").get(name) {
            return Ok(version.clone());
        }
        let version = match rustc_version(name) {
            Ok(version) => version,
            Err(Missing::NoRustup) => {
                return Err(
                    "this worker has no rustup to install it (install rustup, or \
                            remove the pin to build with the worker's own toolchain)"
                        .into(),
                );
            }
            Err(Missing::NotInstalled) => {
                install(name, cancel)?;
                rustc_version(name).map_err(|_| {
                    "rustup installed it, but its rustc does not run (`rustup run NAME rustc \
                     --version` fails)"
                        .to_owned()
                })?
            }
        };
        (self.known.lock().expect("toolchains lock")).insert(name.clone(), version.clone());
        Ok(version)
    }
}

enum Missing {
    NoRustup,
    NotInstalled,
}

/// `rustc --version` of an installed toolchain, asking rustup not to install it on the way.
fn rustc_version(name: &ToolchainName) -> Result<String, Missing> {
    let output = Command::new("rustup")
        .args(["run", name.as_str(), "rustc", "--version"])
        .env("RUSTUP_AUTO_INSTALL", "0")
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .map_err(|_| Missing::NoRustup)?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if output.status.success() && !version.is_empty() {
        Ok(version)
    } else {
        Err(Missing::NotInstalled)
    }
}

/// `rustup toolchain install`, with the minimal profile (the compiler, cargo and the standard
/// library are what a benchmark build needs), stopped when the job is cancelled.
fn install(name: &ToolchainName, cancel: &AtomicBool) -> Result<(), String> {
    // The name is validated (letters, digits, dots and dashes), so it is safe in shell text.
    let command = format!(
        "rustup toolchain install {} --profile minimal --no-self-update",
        name.as_str()
    );
    let watch = || cancel.load(Ordering::Relaxed);
    let outcome = run_command(&CommandSpec {
        command: &command,
        cwd: Path::new("/"),
        env: &[],
        clear_env: false,
        child_setup: None,
        watch: Some(&watch),
        timeout: INSTALL_TIMEOUT,
        stdout_cap: 1 << 20,
        log_cap: 16 * 1024,
    })
    .map_err(|e| format!("rustup could not be started to install it: {e}"))?;
    match outcome.exit {
        ExitKind::Success => Ok(()),
        ExitKind::TimedOut => Err(format!(
            "rustup did not install it within {} minutes",
            INSTALL_TIMEOUT.as_secs() / 60
        )),
        _ => Err(format!(
            "rustup could not install it: {}",
            last_lines(&outcome.log_tail)
        )),
    }
}

/// The last few non-empty lines of rustup's output, where it says what went wrong.
fn last_lines(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let start = lines.len().saturating_sub(REASON_LINES);
    let reason = lines[start..].join(" / ");
    if reason.is_empty() {
        "it printed nothing".to_owned()
    } else {
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_is_the_end_of_rustups_output() {
        let log = "info: syncing channel updates for '1.60.0'\n\nerror: could not download file\nerror: caused by: connection refused\n";
        assert_eq!(
            last_lines(log),
            "info: syncing channel updates for '1.60.0' / error: could not download file / error: caused by: connection refused"
        );
        assert_eq!(last_lines("\n \n"), "it printed nothing");
    }

    /// The toolchain the worker's builds already use is found without installing anything.
    #[test]
    fn an_installed_toolchain_is_found_and_remembered() {
        let stable = ToolchainName::parse("stable").unwrap();
        let toolchains = Toolchains::new();
        let never = AtomicBool::new(false);
        let version = toolchains.ensure(&stable, &never).unwrap();
        assert!(version.starts_with("rustc 1."), "{version}");
        assert_eq!(toolchains.ensure(&stable, &never), Ok(version));
    }
}
