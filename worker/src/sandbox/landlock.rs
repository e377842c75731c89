//! The filesystem and network boundary, enforced by Landlock: an allow-list of paths the suite
//! may read and write. The ruleset is built in the worker (it allocates and opens files) and
//! only enforced in the child between fork and exec, where nothing may allocate.

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

/// The Landlock version the rules are written for. Newer kernels enforce all of it; older ones
/// enforce what they know (see [`MIN_ABI`]).
const TARGET_ABI: ABI = ABI::V6;
/// Below version 3 Landlock cannot stop `truncate(2)`, so a suite could empty the database by
/// its path: kymo does not call that a boundary.
pub const MIN_ABI: i32 = 3;

/// The Landlock ABI version the running kernel offers, or `None` when it has none.
pub fn kernel_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and the VERSION flag the call only returns a number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (version > 0).then_some(version as i32)
}

/// Where a suite may go.
#[derive(Debug, Clone, Default)]
pub struct PathRules {
    /// Readable and executable, with everything beneath them.
    pub read: Vec<PathBuf>,
    /// Readable, writable, with everything beneath them.
    pub write: Vec<PathBuf>,
    /// Never reachable, even when beneath a readable path: the rules are rewritten around them.
    pub protected: Vec<PathBuf>,
}

/// Builds the ruleset for `rules` (and no TCP at all when `network` is false). The returned
/// descriptor is what [`enforce`] takes in the child.
pub fn build_ruleset(rules: &PathRules, network: bool) -> io::Result<OwnedFd> {
    // A protected file that does not exist yet (a database journal) is protected by its name.
    let protected: Vec<PathBuf> = rules
        .protected
        .iter()
        .filter_map(|p| canonical(p).or_else(|| std::path::absolute(p).ok()))
        .collect();
    let read_access = AccessFs::from_read(TARGET_ABI) | AccessFs::IoctlDev;
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(io::Error::other)?
        .scope(Scope::from_all(TARGET_ABI))
        .map_err(io::Error::other)?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET_ABI))
            .map_err(io::Error::other)?;
    }
    let mut created = ruleset.create().map_err(io::Error::other)?;
    let mut add = |path: &Path, access| -> io::Result<()> {
        let Ok(fd) = PathFd::new(path) else {
            return Ok(()); // a path that does not exist needs no rule
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(TARGET_ABI)
        };
        created
            .as_mut()
            .add_rule(PathBeneath::new(fd, access))
            .map_err(io::Error::other)?;
        Ok(())
    };
    for root in &rules.read {
        for path in paths_around(root, &protected) {
            add(&path, read_access)?;
        }
    }
    for path in &rules.write {
        add(path, AccessFs::from_all(TARGET_ABI))?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| io::Error::other("this kernel has no Landlock"))
}

/// Applies the ruleset to the calling process. Runs between fork and exec: raw system calls
/// only, no allocation.
pub fn enforce(ruleset: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system calls with integer arguments.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What [`allow_reading_beneath`] grants: reading files and directories, and executing, as
/// the kernel's bits (the same on every Landlock version).
pub fn read_only_access() -> u64 {
    AccessFs::from_read(TARGET_ABI).bits()
}

/// `struct landlock_path_beneath_attr`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: libc::c_int,
}

/// Adds to `ruleset` a rule letting the suite read beneath `path`, for a directory that came
/// to be after the ruleset was built (a command's own `/proc`, mounted in its namespace: the
/// rule on the machine's `/proc` does not reach through a mount over it). Runs between fork
/// and exec: raw system calls only.
pub fn allow_reading_beneath(
    ruleset: libc::c_int,
    path: &std::ffi::CStr,
    access: u64,
) -> io::Result<()> {
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    // SAFETY: a valid C string; the attribute is ours and outlives the call.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: fd,
        };
        let added = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        );
        let error = io::Error::last_os_error();
        libc::close(fd);
        if added != 0 {
            return Err(error);
        }
    }
    Ok(())
}

fn canonical(path: &Path) -> Option<PathBuf> {
    fs::canonicalize(path).ok()
}

/// `root`, or when a protected path lies beneath it, the entries of `root` around that path,
/// recursively: Landlock only grants, so "all of /etc but /etc/kymo" has to be spelled out as
/// the other entries of /etc. Symbolic links are resolved first, since rules follow them.
pub fn paths_around(root: &Path, protected: &[PathBuf]) -> Vec<PathBuf> {
    let Some(root) = canonical(root) else {
        return Vec::new();
    };
    if protected.iter().any(|p| root.starts_with(p)) {
        return Vec::new();
    }
    if !protected.iter().any(|p| p.starts_with(&root)) {
        return vec![root];
    }
    let Ok(entries) = fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    for entry in entries.flatten() {
        paths.extend(paths_around(&entry.path(), protected));
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_holding_a_protected_path_is_split_around_it() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for sub in ["etc/ssl", "etc/kymo/deep", "etc/other"] {
            fs::create_dir_all(base.join(sub)).unwrap();
        }
        fs::write(base.join("etc/hosts"), "").unwrap();
        std::os::unix::fs::symlink(base.join("etc/kymo"), base.join("etc/alias")).unwrap();
        let protected = vec![base.join("etc/kymo")];
        let mut paths = paths_around(&base.join("etc"), &protected);
        paths.sort();
        let expected: Vec<PathBuf> = ["etc/hosts", "etc/other", "etc/ssl"]
            .iter()
            .map(|p| base.join(p))
            .collect();
        assert_eq!(
            paths, expected,
            "the symlink to the protected path is dropped too"
        );
        assert!(paths_around(&base.join("etc/kymo/deep"), &protected).is_empty());
        assert_eq!(
            paths_around(&base.join("etc/ssl"), &protected),
            vec![base.join("etc/ssl")]
        );
        assert!(paths_around(&base.join("missing"), &protected).is_empty());
    }

    #[test]
    fn the_kernel_reports_a_landlock_version_or_none() {
        if let Some(abi) = kernel_abi() {
            assert!(abi >= 1);
        }
    }
}
