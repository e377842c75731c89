//! What a suite's command applies to itself between fork and exec: its cgroups, its resource
//! limits, its namespaces, the loss of every capability, and the Landlock ruleset. Each step
//! either holds or fails the command before it runs: a suite never runs with less of its
//! boundary than the worker promised, and the job's error names the step that failed.
//!
//! Plain values only, built beforehand: nothing here may allocate.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::cgroup::join_cgroup;
use super::landlock;
use super::limits::set_rlimit;
use super::namespaces::Namespaces;

/// The steps of [`ChildSetup::apply`], as reported when one fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    Cgroup = 1,
    Limits,
    Namespaces,
    UserMap,
    ProcMount,
    Fork,
    Capabilities,
    Landlock,
}

impl Stage {
    fn from_byte(byte: u8) -> Option<Self> {
        [
            Self::Cgroup,
            Self::Limits,
            Self::Namespaces,
            Self::UserMap,
            Self::ProcMount,
            Self::Fork,
            Self::Capabilities,
            Self::Landlock,
        ]
        .into_iter()
        .find(|stage| *stage as u8 == byte)
    }

    /// What the step does, for the job's error.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Cgroup => "joining its cgroup",
            Self::Limits => "setting its resource limits",
            Self::Namespaces => "making its own PID, mount and network namespaces",
            Self::UserMap => "mapping the worker's user into its user namespace",
            Self::ProcMount => "mounting its own /proc",
            Self::Fork => "starting its PID namespace",
            Self::Capabilities => "dropping every capability",
            Self::Landlock => "enforcing its Landlock ruleset",
        }
    }
}

/// A pipe on which the child names the step that failed (the spawner learns only the errno).
#[derive(Debug, Clone)]
pub struct StageReport {
    write: libc::c_int,
    read: std::sync::Arc<(OwnedFd, OwnedFd)>,
}

impl StageReport {
    pub fn new() -> io::Result<Self> {
        let mut fds = [-1; 2];
        // SAFETY: a writable array of two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 just opened both; they are ours alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Self {
            write: write.as_raw_fd(),
            read: std::sync::Arc::new((read, write)),
        })
    }

    /// In the child: reports `stage` and returns the error that made it fail (the last one).
    pub fn failed(&self, stage: Stage) -> io::Error {
        let error = io::Error::last_os_error();
        self.failed_with(stage, error)
    }

    /// In the child: reports `stage`, failed with `error`.
    pub fn failed_with(&self, stage: Stage, error: io::Error) -> io::Error {
        let byte = [stage as u8];
        // SAFETY: one byte of ours to a descriptor we hold open.
        unsafe { libc::write(self.write, byte.as_ptr().cast(), 1) };
        error
    }

    /// In the worker, after the command could not start: the step that failed, if one did.
    pub fn failed_stage(&self) -> Option<Stage> {
        let mut byte = [0u8; 1];
        // SAFETY: reading one byte into our own buffer from a non-blocking pipe.
        let n = unsafe { libc::read(self.read.0.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
        (n == 1).then(|| Stage::from_byte(byte[0])).flatten()
    }
}

/// What the child applies to itself between fork and exec.
#[derive(Debug, Clone)]
pub struct ChildSetup {
    pub(super) ruleset: Option<libc::c_int>,
    /// The cgroups to join (none, one, or one per v1 hierarchy).
    pub(super) cgroup_procs: Vec<CString>,
    /// Resource limits in place of the cgroups that cannot be made.
    pub(super) processes: Option<u32>,
    pub(super) memory: Option<u64>,
    pub(super) disk: u64,
    pub(super) namespaces: Namespaces,
    pub(super) report: StageReport,
}

impl ChildSetup {
    /// Enters the cgroups, sets the limits, enters the namespaces, drops every capability and
    /// enforces the ruleset, in the order that keeps each step possible (the namespaces need
    /// capabilities; Landlock last: it forbids the cgroup write and mounts).
    pub fn apply(&self) -> io::Result<()> {
        let report = &self.report;
        for procs in &self.cgroup_procs {
            join_cgroup(procs).map_err(|e| report.failed_with(Stage::Cgroup, e))?;
        }
        for (resource, value) in resource_limits(self.processes, self.memory, self.disk)
            .into_iter()
            .flatten()
        {
            set_rlimit(resource, value).map_err(|e| report.failed_with(Stage::Limits, e))?;
        }
        self.namespaces.enter(report)?;
        drop_capabilities().map_err(|e| report.failed_with(Stage::Capabilities, e))?;
        if let Some(ruleset) = self.ruleset {
            let landlock_failed = |e| report.failed_with(Stage::Landlock, e);
            if self.namespaces.own_processes() {
                let access = landlock::read_only_access();
                landlock::allow_reading_beneath(ruleset, c"/proc", access)
                    .map_err(landlock_failed)?;
            }
            landlock::enforce(ruleset).map_err(landlock_failed)?;
        }
        Ok(())
    }

    /// The step that failed when the command could not start.
    pub fn failed_stage(&self) -> Option<Stage> {
        self.report.failed_stage()
    }
}

/// The resource limits to set, without allocating: the process and memory limits where no
/// cgroup holds them, the largest file, and no core dumps.
fn resource_limits(
    processes: Option<u32>,
    memory: Option<u64>,
    disk: u64,
) -> [Option<(libc::__rlimit_resource_t, u64)>; 4] {
    [
        processes.map(|p| (libc::RLIMIT_NPROC, u64::from(p))),
        memory.map(|m| (libc::RLIMIT_DATA, m)),
        Some((libc::RLIMIT_FSIZE, disk)),
        Some((libc::RLIMIT_CORE, 0)),
    ]
}

/// `struct __user_cap_header_struct` of `capset(2)`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` of `capset(2)`; version 3 takes two (64 capabilities).
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Empties every capability set (bounding, ambient, effective, permitted, inheritable) and
/// sets `no_new_privs`, so that neither the command nor anything it executes holds or regains
/// one: root keeps its user id, not its power.
pub fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl and capset with integer arguments and structures we own.
    unsafe {
        for capability in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) != 0 {
                match io::Error::last_os_error().raw_os_error() {
                    // Past the last capability this kernel knows.
                    Some(libc::EINVAL) => break,
                    // Without CAP_SETPCAP the bounding set cannot shrink; with the other sets
                    // emptied below and `no_new_privs`, no exec regains what it still names.
                    Some(libc::EPERM) => break,
                    _ => return Err(io::Error::last_os_error()),
                }
            }
        }
        let cleared = libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        if cleared != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return Err(io::Error::last_os_error());
        }
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header, none.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
