//! Resource limits of one suite command that need no cgroup (see [`super::cgroup`]):
//! `RLIMIT_NPROC` and `RLIMIT_DATA` where no cgroup can be made, the size of any one file
//! through `RLIMIT_FSIZE`, and disk space through a watch of the filesystems it writes.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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
