//! Resource limits of one suite command: processes through a cgroup's `pids.max` (or
//! `RLIMIT_NPROC` where no cgroup can be made), memory through `RLIMIT_DATA`, the size of any
//! one file through `RLIMIT_FSIZE`, and disk space through a watch of the filesystems it writes.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A cgroup made for one command, holding its processes; removed when dropped.
#[derive(Debug)]
pub struct PidsCgroup {
    dir: PathBuf,
    /// `cgroup.procs` of `dir`, ready for the child to write itself into.
    procs: CString,
}

static NEXT_CGROUP: AtomicU64 = AtomicU64::new(0);

/// The directory of this process's cgroup in a hierarchy with the `pids` controller, where
/// child cgroups can be made: the v1 `pids` hierarchy, or the unified one when it delegates
/// `pids`.
pub fn pids_cgroup_base() -> Option<PathBuf> {
    let membership = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let v1 = controllers.split(',').any(|c| c == "pids");
        if !v1 && !controllers.is_empty() {
            continue;
        }
        let Some(mount) = cgroup_mount(&mounts, v1) else {
            continue;
        };
        let base = mount.join(path.trim_start_matches('/'));
        let usable = v1
            || fs::read_to_string(base.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"));
        if usable && base.is_dir() {
            return Some(base);
        }
    }
    None
}

/// The mount point of the v1 `pids` hierarchy, or of the unified (v2) one.
fn cgroup_mount(mountinfo: &str, v1_pids: bool) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount_point = left.split(' ').nth(4)?;
        let mut right = right.split(' ');
        let (fstype, options) = (right.next()?, right.nth(1).unwrap_or(""));
        let wanted = if v1_pids {
            fstype == "cgroup" && options.split(',').any(|o| o == "pids")
        } else {
            fstype == "cgroup2"
        };
        wanted.then(|| PathBuf::from(mount_point))
    })
}

impl PidsCgroup {
    /// Makes a cgroup under `base` allowing at most `max` processes and threads.
    pub fn create(base: &Path, max: u32) -> io::Result<Self> {
        let name = format!(
            "kymo-suite-{}-{}",
            std::process::id(),
            NEXT_CGROUP.fetch_add(1, Ordering::Relaxed)
        );
        let dir = base.join(name);
        fs::create_dir(&dir)?;
        let cgroup = Self {
            procs: CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())?,
            dir,
        };
        fs::write(cgroup.dir.join("pids.max"), max.to_string())?;
        Ok(cgroup)
    }

    /// Path of `cgroup.procs`, for [`join_cgroup`] in the child.
    pub fn procs_path(&self) -> &CString {
        &self.procs
    }

    /// Whether a fork or clone was refused because the group was full.
    pub fn hit_limit(&self) -> bool {
        let events = fs::read_to_string(self.dir.join("pids.events")).unwrap_or_default();
        events
            .lines()
            .filter_map(|l| l.strip_prefix("max "))
            .any(|n| n.trim() != "0")
    }

    /// Kills every process left in the group, including any that left the process group.
    pub fn kill_all(&self) {
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

impl Drop for PidsCgroup {
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

/// Sets one resource limit, soft and hard. Runs between fork and exec.
pub fn set_rlimit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: a valid rlimit passed by reference.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Space used on the filesystems of some directories, to see how much a command adds.
#[derive(Debug)]
pub struct DiskWatch {
    /// One directory per filesystem, with the bytes used there when the command started.
    start: Vec<(CString, u64)>,
}

impl DiskWatch {
    /// Notes the space used now on the filesystems holding `dirs`.
    pub fn start(dirs: &[&Path]) -> Self {
        let mut seen = Vec::new();
        let mut start = Vec::new();
        for dir in dirs {
            let Ok(meta) = fs::metadata(dir) else {
                continue;
            };
            let device = std::os::unix::fs::MetadataExt::dev(&meta);
            if seen.contains(&device) {
                continue;
            }
            seen.push(device);
            let Ok(path) = CString::new(dir.as_os_str().as_bytes()) else {
                continue;
            };
            if let Some(used) = used_bytes(&path) {
                start.push((path, used));
            }
        }
        Self { start }
    }

    /// Bytes added since [`DiskWatch::start`] on all the filesystems together (the command
    /// may have removed as much as it added elsewhere, which counts as nothing).
    pub fn added(&self) -> u64 {
        self.start
            .iter()
            .map(|(path, before)| used_bytes(path).unwrap_or(*before).saturating_sub(*before))
            .sum()
    }
}

fn used_bytes(path: &CString) -> Option<u64> {
    // SAFETY: statvfs is plain data; the call fills it in.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some((stat.f_blocks - stat.f_bfree) * stat.f_frsize)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
24 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn cgroup_mounts_are_found_by_type_and_controller() {
        assert_eq!(
            cgroup_mount(MOUNTINFO, true),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
        assert_eq!(
            cgroup_mount(MOUNTINFO, false),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(cgroup_mount("garbage\n- -\n", true), None);
    }

    #[test]
    fn the_disk_watch_sees_a_file_being_written() {
        let dir = tempfile::tempdir().unwrap();
        let watch = DiskWatch::start(&[dir.path(), dir.path()]);
        assert_eq!(watch.start.len(), 1, "one entry per filesystem");
        fs::write(dir.path().join("big"), vec![1u8; 8 << 20]).unwrap();
        let file = fs::File::open(dir.path().join("big")).unwrap();
        file.sync_all().unwrap();
        assert!(watch.added() >= 4 << 20, "{}", watch.added());
    }
}
