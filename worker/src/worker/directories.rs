//! A repository's directories in the worker's cache: its work trees, target directories,
//! home (with its own cargo home) and temp, made ready for a job.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::sandbox::SuiteDirs;

/// A repository's directories in the cache, created, with a temp directory emptied for this job.
/// One cargo target directory (and one home) per repository keeps rebuilds incremental across
/// commits.
pub(super) fn suite_dirs(
    cache: &Path,
    dir_name: &str,
    tree: &str,
    worktree: PathBuf,
) -> anyhow::Result<SuiteDirs> {
    // The home (cargo's registry) is the repository's; a comparison's two work trees each
    // have their own target directory, so that one side's build never replaces the other's.
    let dirs = SuiteDirs {
        worktree,
        target: cache.join("targets").join(tree),
        home: cache.join("homes").join(dir_name),
        tmp: cache.join("tmp").join(tree),
    };
    let _ = std::fs::remove_dir_all(&dirs.tmp);
    let cargo_home = dirs.cargo_home();
    for dir in [&dirs.target, &dirs.home, &dirs.tmp, &cargo_home] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    forget_cargo_configuration(&cargo_home);
    Ok(dirs)
}

/// Removes the configuration files a suite may have left in the repository's cargo home: cargo
/// reads them for every later build and dependency fetch, so an earlier commit's suite could
/// change how the next ones build, or make the fetch (which has the network) run a program.
/// The downloads stay.
fn forget_cargo_configuration(cargo_home: &Path) {
    for name in ["config", "config.toml", "credentials", "credentials.toml"] {
        let path = cargo_home.join(name);
        if std::fs::remove_file(&path).is_err() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_cargo_home_keeps_downloads_and_forgets_what_a_suite_configured() {
        let cache = tempfile::tempdir().unwrap();
        let worktree = cache.path().join("worktrees/r.git");
        let dirs = suite_dirs(cache.path(), "r.git", "r.git", worktree.clone()).unwrap();
        let cargo_home = dirs.cargo_home();
        assert_eq!(cargo_home, cache.path().join("homes/r.git/.cargo"));
        let crate_file = cargo_home.join("registry/cache/index/itoa-1.0.0.crate");
        std::fs::create_dir_all(crate_file.parent().unwrap()).unwrap();
        std::fs::write(&crate_file, "downloaded").unwrap();
        std::fs::write(tmp_file(&dirs), "left by the last job").unwrap();
        std::fs::write(
            cargo_home.join("config.toml"),
            "[build]\nrustc-wrapper = \"/tmp/evil\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(cargo_home.join("config/nested")).unwrap();
        std::fs::write(cargo_home.join("credentials.toml"), "token").unwrap();

        let again = suite_dirs(cache.path(), "r.git", "r.git", worktree).unwrap();
        assert!(crate_file.is_file(), "downloads stay");
        for gone in ["config.toml", "config", "credentials.toml"] {
            assert!(!cargo_home.join(gone).exists(), "{gone} stayed");
        }
        assert!(!tmp_file(&again).exists(), "the temp directory is emptied");
    }

    fn tmp_file(dirs: &SuiteDirs) -> PathBuf {
        dirs.tmp.join("left")
    }
}
