//! Cgroups made for one suite command, under the worker's own: `pids.max` bounds its processes
//! and threads, and a memory limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) bounds the
//! memory of all its processes together. On a v1 machine each controller has its own
//! hierarchy, so a command may join two cgroups; on v2 it joins one.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Which cgroup interface a hierarchy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// The controllers kymo limits suites with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Pids,
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Self::Pids => "pids",
            Self::Memory => "memory",
        }
    }

    /// The files that set the limit, in the order they must be written; the ones after the
    /// first may be missing (swap accounting off) and are then skipped.
    pub fn limit_files(self, version: CgroupVersion) -> &'static [&'static str] {
        match (self, version) {
            (Self::Pids, _) => &["pids.max"],
            // With swap the limit would only move the excess to disk: swap counts too.
            (Self::Memory, CgroupVersion::V1) => {
                &["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
            }
            (Self::Memory, CgroupVersion::V2) => &["memory.max", "memory.swap.max"],
        }
    }

    /// The value written into each of [`Controller::limit_files`].
    fn limit_values(self, version: CgroupVersion, limit: u64) -> [String; 2] {
        match (self, version) {
            (Self::Memory, CgroupVersion::V2) => [limit.to_string(), "0".into()],
            _ => [limit.to_string(), limit.to_string()],
        }
    }

    /// The file counting the times the limit was hit, and the key of that count in it.
    pub fn hits_file(self, version: CgroupVersion) -> (&'static str, &'static str) {
        match (self, version) {
            (Self::Pids, _) => ("pids.events", "max"),
            (Self::Memory, CgroupVersion::V1) => ("memory.oom_control", "oom_kill"),
            (Self::Memory, CgroupVersion::V2) => ("memory.events", "oom_kill"),
        }
    }
}

/// Where this process's cgroups of one controller are, and in which interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupBase {
    pub dir: PathBuf,
    pub version: CgroupVersion,
}

static NEXT_CGROUP: AtomicU64 = AtomicU64::new(0);

/// The directory of this process's cgroup in a hierarchy with `controller`, where child
/// cgroups can be made: the v1 hierarchy of that controller, or the unified one when it
/// delegates the controller to its children.
pub fn cgroup_base(controller: Controller) -> Option<CgroupBase> {
    let membership = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    base_in(&membership, &mounts, controller, |dir| {
        fs::read_to_string(dir.join("cgroup.subtree_control")).ok()
    })
}

/// [`cgroup_base`] from the texts of `/proc/self/cgroup` and `/proc/self/mountinfo`;
/// `subtree_control` reads a v2 directory's `cgroup.subtree_control`.
fn base_in(
    membership: &str,
    mountinfo: &str,
    controller: Controller,
    subtree_control: impl Fn(&Path) -> Option<String>,
) -> Option<CgroupBase> {
    let name = controller.name();
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let v1 = controllers.split(',').any(|c| c == name);
        if !v1 && !controllers.is_empty() {
            continue;
        }
        let Some(mount) = cgroup_mount(mountinfo, v1.then_some(name)) else {
            continue;
        };
        let dir = mount.join(path.trim_start_matches('/'));
        if v1 {
            return Some(CgroupBase {
                dir,
                version: CgroupVersion::V1,
            });
        }
        let delegated =
            subtree_control(&dir).is_some_and(|c| c.split_whitespace().any(|c| c == name));
        if delegated {
            return Some(CgroupBase {
                dir,
                version: CgroupVersion::V2,
            });
        }
    }
    None
}

/// The mount point of the v1 hierarchy of `v1_controller`, or of the unified (v2) one.
fn cgroup_mount(mountinfo: &str, v1_controller: Option<&str>) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount_point = left.split(' ').nth(4)?;
        let mut right = right.split(' ');
        let (fstype, options) = (right.next()?, right.nth(1).unwrap_or(""));
        let wanted = match v1_controller {
            Some(name) => fstype == "cgroup" && options.split(',').any(|o| o == name),
            None => fstype == "cgroup2",
        };
        wanted.then(|| PathBuf::from(mount_point))
    })
}

/// One cgroup directory made for one command; its processes are killed and it is removed
/// when dropped.
#[derive(Debug)]
struct Cgroup {
    dir: PathBuf,
    /// `cgroup.procs` of `dir`, ready for the child to write itself into.
    procs: CString,
}

impl Cgroup {
    fn create(base: &Path) -> io::Result<Self> {
        let name = format!(
            "kymo-suite-{}-{}",
            std::process::id(),
            NEXT_CGROUP.fetch_add(1, Ordering::Relaxed)
        );
        let dir = base.join(name);
        fs::create_dir(&dir)?;
        Ok(Self {
            procs: CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())?,
            dir,
        })
    }

    fn set_limit(
        &self,
        controller: Controller,
        version: CgroupVersion,
        limit: u64,
    ) -> io::Result<()> {
        let files = controller.limit_files(version);
        let values = controller.limit_values(version, limit);
        for (index, (file, value)) in files.iter().zip(values).enumerate() {
            let path = self.dir.join(file);
            match fs::write(&path, value) {
                Err(_) if index > 0 && !path.exists() => {}
                result => result?,
            }
        }
        Ok(())
    }

    fn hits(&self, controller: Controller, version: CgroupVersion) -> u64 {
        let (file, key) = controller.hits_file(version);
        count_in(
            &fs::read_to_string(self.dir.join(file)).unwrap_or_default(),
            key,
        )
    }

    fn kill_all(&self) {
        for _ in 0..50 {
            let procs = fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<libc::pid_t> = procs.lines().filter_map(|l| l.parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                // SAFETY: kill has no memory effects; these pids are in our own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_all();
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        tracing::warn!(cgroup = %self.dir.display(), "cannot remove a suite's cgroup");
    }
}

/// The number after `key` in a flat keyed file (`max 3`, `oom_kill 1`).
fn count_in(text: &str, key: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .filter_map(|n| n.trim().parse::<u64>().ok())
        .sum()
}

/// Where this worker can make cgroups, per controller; found once at startup.
#[derive(Debug, Clone, Default)]
pub struct CgroupBases {
    pub pids: Option<CgroupBase>,
    pub memory: Option<CgroupBase>,
}

impl CgroupBases {
    /// The bases where a cgroup with a limit can really be made, cleared of what workers
    /// killed before they could clean up left there.
    pub fn probe() -> Self {
        let usable = |controller| {
            cgroup_base(controller).filter(|base| {
                remove_leftovers(&base.dir);
                let bases = Self::only(controller, base.clone());
                SuiteCgroups::create(&bases, 64, 64 << 20).is_ok()
            })
        };
        Self {
            pids: usable(Controller::Pids),
            memory: usable(Controller::Memory),
        }
    }

    fn only(controller: Controller, base: CgroupBase) -> Self {
        match controller {
            Controller::Pids => Self {
                pids: Some(base),
                memory: None,
            },
            Controller::Memory => Self {
                pids: None,
                memory: Some(base),
            },
        }
    }
}

/// Removes the cgroups under `base` of workers that no longer run (`kymo-suite-PID-N` of a
/// dead PID: killed before their cleanup ran), with any suite process still in them.
pub fn remove_leftovers(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("kymo-suite-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
            .filter(|pid| *pid > 0)
        else {
            continue;
        };
        // SAFETY: signal 0 sends nothing; it asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        let Ok(procs) = CString::new(entry.path().join("cgroup.procs").as_os_str().as_bytes())
        else {
            continue;
        };
        if gone {
            // Dropping kills what is left in it and removes it.
            drop(Cgroup {
                dir: entry.path(),
                procs,
            });
        }
    }
}

/// The cgroups of one command: one per hierarchy (the same one for both controllers on v2).
#[derive(Debug)]
pub struct SuiteCgroups {
    groups: Vec<Cgroup>,
    /// Index in `groups` and version, per controller.
    pids: Option<(usize, CgroupVersion)>,
    memory: Option<(usize, CgroupVersion)>,
}

impl SuiteCgroups {
    /// Makes the cgroups allowing at most `processes` processes and threads and `memory` bytes
    /// in all, for the controllers `bases` offers.
    pub fn create(bases: &CgroupBases, processes: u32, memory: u64) -> io::Result<Self> {
        let mut cgroups = Self {
            groups: Vec::new(),
            pids: None,
            memory: None,
        };
        let mut bases_made: Vec<PathBuf> = Vec::new();
        let wanted = [
            (Controller::Pids, &bases.pids, u64::from(processes)),
            (Controller::Memory, &bases.memory, memory),
        ];
        for (controller, base, limit) in wanted {
            let Some(base) = base else { continue };
            let index = match bases_made.iter().position(|d| *d == base.dir) {
                Some(index) => index,
                None => {
                    cgroups.groups.push(Cgroup::create(&base.dir)?);
                    bases_made.push(base.dir.clone());
                    cgroups.groups.len() - 1
                }
            };
            cgroups.groups[index].set_limit(controller, base.version, limit)?;
            let slot = match controller {
                Controller::Pids => &mut cgroups.pids,
                Controller::Memory => &mut cgroups.memory,
            };
            *slot = Some((index, base.version));
        }
        Ok(cgroups)
    }

    /// The `cgroup.procs` files the child writes itself into.
    pub fn procs_paths(&self) -> Vec<CString> {
        self.groups.iter().map(|g| g.procs.clone()).collect()
    }

    pub fn limits_processes(&self) -> bool {
        self.pids.is_some()
    }

    pub fn limits_memory(&self) -> bool {
        self.memory.is_some()
    }

    fn hit(&self, controller: Controller) -> bool {
        let slot = match controller {
            Controller::Pids => self.pids,
            Controller::Memory => self.memory,
        };
        slot.is_some_and(|(index, version)| self.groups[index].hits(controller, version) > 0)
    }

    /// Whether a fork or clone was refused because the group was full.
    pub fn hit_process_limit(&self) -> bool {
        self.hit(Controller::Pids)
    }

    /// Whether a process was killed because the group used all its memory.
    pub fn hit_memory_limit(&self) -> bool {
        self.hit(Controller::Memory)
    }

    /// Kills every process left in the groups, including any that left the process group.
    pub fn kill_all(&self) {
        for group in &self.groups {
            group.kill_all();
        }
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`. Runs between
/// fork and exec: raw system calls only.
pub fn join_cgroup(procs: &CString) -> io::Result<()> {
    // SAFETY: `procs` is a valid C string; the buffer is a static byte string.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written != 1 {
            return Err(error);
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
