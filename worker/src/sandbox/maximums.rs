//! The most any suite may hold on this machine, whatever its `kymo.toml` asks: a commit's
//! author chooses the suite's limits, so without a ceiling `memory = "1TiB"` would be granted
//! on a 16 GiB machine. The ceilings come from the machine (below its memory, below the free
//! space where suites write, a process count that leaves the machine's process table room),
//! and the worker's admin may set each one (`--max-suite-memory`, `--max-suite-disk`,
//! `--max-suite-processes`). A request above a ceiling is held to it, and the job log says so.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::settings::{SuiteBoundary, format_size};

/// Ceilings the worker's admin sets; `None` takes the machine's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaximumSettings {
    pub memory: Option<u64>,
    pub disk: Option<u64>,
    pub processes: Option<u32>,
}

/// The ceilings in force on this worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuiteMaximums {
    /// Bytes of memory, all of a suite's processes together.
    pub memory: u64,
    /// Bytes a command may add on disk (and the largest file it may write).
    pub disk: u64,
    /// Processes and threads alive at once.
    pub processes: u32,
}

/// A limit above its ceiling, held to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLimit {
    /// The `kymo.toml` key.
    pub key: &'static str,
    /// What the suite's `kymo.toml` asked for; `None` when it asked nothing and kymo's
    /// default was above the ceiling (which is no news to log).
    pub asked: Option<String>,
    pub granted: String,
}

impl HeldLimit {
    /// One line for the job log, when the suite asked for more than it gets.
    pub fn describe(&self) -> Option<String> {
        let asked = self.asked.as_ref()?;
        Some(format!(
            "`{}` = {asked} in kymo.toml is above this worker's maximum: the suite gets {} (--max-suite-{})",
            self.key, self.granted, self.key
        ))
    }
}

/// Fewest processes a machine's ceiling allows: below it a build cannot run at all.
const MIN_PROCESSES: u32 = 256;
/// Most processes a machine's ceiling allows, however large its process table.
const MAX_PROCESSES: u32 = 8192;

impl SuiteMaximums {
    /// The machine's ceilings, each replaced by the admin's setting where there is one.
    /// `disk_root` is where suites write (the worker's cache directory, made or not yet).
    pub fn of_machine(settings: MaximumSettings, disk_root: &Path) -> Self {
        Self {
            memory: settings
                .memory
                .unwrap_or_else(|| memory_ceiling(total_memory())),
            disk: settings
                .disk
                .unwrap_or_else(|| disk_ceiling(free_space(disk_root))),
            processes: settings.processes.unwrap_or_else(|| {
                process_ceiling(
                    read_number("/proc/sys/kernel/pid_max"),
                    read_number("/proc/sys/kernel/threads-max"),
                )
            }),
        }
    }

    /// `boundary` with every limit above its ceiling lowered to it, and what was lowered. A
    /// limit equal to kymo's default counts as not asked for (a suite that names none gets
    /// the default, or the ceiling where that is lower).
    pub fn hold(&self, boundary: &SuiteBoundary) -> (SuiteBoundary, Vec<HeldLimit>) {
        let default = SuiteBoundary::default();
        let mut held = Vec::new();
        let mut granted = boundary.clone();
        let mut hold = |key, asked: u64, ceiling: u64, default: u64, show: fn(u64) -> String| {
            (asked > ceiling).then(|| {
                held.push(HeldLimit {
                    key,
                    asked: (asked != default).then(|| show(asked)),
                    granted: show(ceiling),
                });
                ceiling
            })
        };
        let count = |n: u64| n.to_string();
        if let Some(memory) = hold(
            "memory",
            boundary.memory,
            self.memory,
            default.memory,
            format_size,
        ) {
            granted.memory = memory;
        }
        if let Some(disk) = hold("disk", boundary.disk, self.disk, default.disk, format_size) {
            granted.disk = disk;
        }
        let processes = (u64::from(boundary.processes), u64::from(self.processes));
        if let Some(ceiling) = hold(
            "processes",
            processes.0,
            processes.1,
            u64::from(default.processes),
            count,
        ) {
            granted.processes = u32::try_from(ceiling).unwrap_or(self.processes);
        }
        (granted, held)
    }

    /// One clause for the startup log.
    pub fn describe(&self) -> String {
        format!(
            "each suite at most {} of memory, {} of disk, {} processes",
            format_size(self.memory),
            format_size(self.disk),
            self.processes
        )
    }
}

/// Three quarters of the machine's memory, in whole MiB: the rest stays for the system, the
/// worker and (embedded) the server, which must keep answering while a suite fills its share.
fn memory_ceiling(total: u64) -> u64 {
    round_down_mib((total / 4 * 3).max(super::settings::MIN_SIZE))
}

/// Nine tenths of the space free where suites write, in whole MiB, when the worker starts.
fn disk_ceiling(free: u64) -> u64 {
    round_down_mib((free / 10 * 9).max(super::settings::MIN_SIZE))
}

/// An eighth of the machine's process table (pids and threads alike), within
/// [`MIN_PROCESSES`]..=[`MAX_PROCESSES`]: a fork bomb at its ceiling leaves the rest to others.
fn process_ceiling(pid_max: Option<u64>, threads_max: Option<u64>) -> u32 {
    let table = pid_max
        .unwrap_or(32_768)
        .min(threads_max.unwrap_or(u64::MAX));
    let eighth = u32::try_from(table / 8).unwrap_or(u32::MAX);
    eighth.clamp(MIN_PROCESSES, MAX_PROCESSES)
}

fn round_down_mib(bytes: u64) -> u64 {
    bytes / (1 << 20) * (1 << 20)
}

fn total_memory() -> u64 {
    // SAFETY: sysinfo is plain data; the call fills it in.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: a valid, writable sysinfo.
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return 0;
    }
    info.totalram.saturating_mul(u64::from(info.mem_unit))
}

/// Bytes available to an unprivileged writer on the filesystem of `path`, or of its nearest
/// existing ancestor.
fn free_space(path: &Path) -> u64 {
    let existing = path
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    let Ok(c_path) = CString::new(existing.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: statvfs is plain data; the call fills it in.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a writable statvfs.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return 0;
    }
    stat.f_bavail.saturating_mul(stat.f_frsize)
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn the_machine_ceilings_stay_below_its_memory_and_free_space() {
        assert_eq!(memory_ceiling(16 * GIB), 12 * GIB);
        assert_eq!(disk_ceiling(100 * GIB), 90 * GIB);
        assert_eq!(memory_ceiling(0), 1 << 20, "never below what a shell needs");
        let odd = memory_ceiling(23 * GIB + 12_345);
        assert!(odd < 23 * GIB && odd.is_multiple_of(1 << 20), "{odd}");
    }

    #[test]
    fn the_process_ceiling_is_an_eighth_of_the_process_table_within_bounds() {
        assert_eq!(process_ceiling(Some(32_768), Some(192_731)), 4096);
        assert_eq!(process_ceiling(Some(4_194_304), Some(192_731)), 8192);
        assert_eq!(process_ceiling(Some(1000), None), 256);
        assert_eq!(process_ceiling(None, None), 4096);
    }

    #[test]
    fn this_machine_gets_ceilings_below_what_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let maximums = SuiteMaximums::of_machine(MaximumSettings::default(), dir.path());
        assert!(maximums.memory < total_memory(), "{maximums:?}");
        assert!(maximums.disk < free_space(dir.path()), "{maximums:?}");
        let not_made_yet = dir.path().join("cache/not/made");
        assert!(SuiteMaximums::of_machine(MaximumSettings::default(), &not_made_yet).disk > 0);
        let set = MaximumSettings {
            memory: Some(256 << 20),
            disk: None,
            processes: Some(100),
        };
        let admin = SuiteMaximums::of_machine(set, dir.path());
        assert_eq!((admin.memory, admin.processes), (256 << 20, 100));
        assert_eq!(admin.disk, maximums.disk);
    }

    #[test]
    fn a_request_above_a_ceiling_is_held_to_it_and_said() {
        let maximums = SuiteMaximums {
            memory: 8 * GIB,
            disk: 20 * GIB,
            processes: 1024,
        };
        let asked = SuiteBoundary {
            memory: 1 << 40,
            disk: 1 << 40,
            processes: 32_768,
            ..SuiteBoundary::default()
        };
        let (granted, held) = maximums.hold(&asked);
        assert_eq!(
            (granted.memory, granted.disk, granted.processes),
            (8 * GIB, 20 * GIB, 1024)
        );
        let lines: Vec<String> = held.iter().filter_map(HeldLimit::describe).collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("`memory` = 1TiB") && lines[0].contains("gets 8GiB"));
        assert!(lines[2].contains("`processes` = 32768") && lines[2].contains("gets 1024"));

        let modest = SuiteBoundary {
            memory: GIB,
            processes: 64,
            disk: GIB,
            ..SuiteBoundary::default()
        };
        let (granted, held) = maximums.hold(&modest);
        assert_eq!(granted, modest);
        assert!(held.is_empty());

        // kymo's defaults above a ceiling are held to it without a word in the log.
        let small = SuiteMaximums {
            memory: GIB,
            disk: GIB,
            processes: 100,
        };
        let (granted, held) = small.hold(&SuiteBoundary::default());
        assert_eq!(
            (granted.memory, granted.disk, granted.processes),
            (GIB, GIB, 100)
        );
        assert_eq!(held.len(), 3);
        assert!(held.iter().all(|h| h.describe().is_none()), "{held:?}");
    }
}
