//! Before a checked-out commit's suites run: each suite's toolchain is chosen (its `toolchain`
//! key, else the commit's `rust-toolchain` file) and installed while the worker still can, and
//! the job remembers which compilers it built with, for the run's recorded environment.

use crate::config::KymoToml;
use crate::mirror::Mirror;
use crate::toolchain::{
    MAX_TOOLCHAIN_FILE_BYTES, PinnedToolchain, TOOLCHAIN_FILES, choose_toolchain,
    parse_toolchain_file,
};

use super::{JobControl, Worker};

impl Worker {
    /// Pins each suite of `config` to its toolchain and installs the missing ones. The error
    /// is the failed job's message: which suite, which toolchain, where it was asked, and why it
    /// cannot be used.
    pub(super) fn pin_toolchains(
        &self,
        mirror: &Mirror,
        sha: &str,
        config: &mut KymoToml,
        control: &JobControl,
    ) -> Result<(), String> {
        let commit_file = read_commit_toolchain(mirror, sha);
        for suite in &mut config.suites {
            let from_file = match (&suite.toolchain, &commit_file) {
                (Some(_), _) => None,
                (None, Ok(pin)) => pin.as_ref(),
                (None, Err(problem)) => return Err(problem.clone()),
            };
            suite.toolchain =
                choose_toolchain(suite.toolchain.as_ref().map(|pin| &pin.name), from_file);
            let Some(pin) = &suite.toolchain else {
                control.record_toolchain(&self.environment.toolchain);
                continue;
            };
            control.phase(&format!("toolchain {}", pin.name));
            match self.toolchains.ensure(&pin.name, control.cancelled) {
                Ok(version) => control.record_toolchain(&version),
                Err(reason) => {
                    return Err(format!(
                        "suite {:?}: toolchain {:?} (from {}) is not installed on this worker \
                         and cannot be: {reason}",
                        suite.name,
                        pin.name.as_str(),
                        pin.source
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The commit's toolchain file, as rustup reads it: `rust-toolchain` when both exist. A file
/// that cannot be used is an `Err` with the message, which fails only the suites that use it.
fn read_commit_toolchain(mirror: &Mirror, sha: &str) -> Result<Option<PinnedToolchain>, String> {
    for file in TOOLCHAIN_FILES {
        let unusable = |reason: String| format!("the commit's {file} cannot be used: {reason}");
        let bytes = match mirror.read_file_at(sha, file, MAX_TOOLCHAIN_FILE_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => continue,
            Err(e) => return Err(unusable(e.to_string())),
        };
        return parse_toolchain_file(file, &bytes).map_err(unusable);
    }
    Ok(None)
}
