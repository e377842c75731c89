//! The boundary around benchmark commands, which are untrusted code from the tracked
//! repository: an allow-listed environment, a Landlock filesystem boundary (read the system
//! and toolchains, write only the suite's own directories, never kymo's data), optional loss
//! of the network, and limits on processes, memory and disk (cgroups where the worker can make
//! them, resource limits otherwise).
//!
//! [`Sandbox::probe`] finds out once what the kernel can enforce; [`Sandbox::prepare`] builds
//! what one command needs, and [`ChildSetup::apply`] enforces it in the child between fork and
//! exec.

pub mod cgroup;
#[cfg(test)]
mod criterion_count_tests;
#[cfg(test)]
mod instruction_tests;
pub mod landlock;
pub mod limits;
#[cfg(test)]
mod overhead_tests;
mod own_secrets;
pub mod settings;
#[cfg(test)]
mod tests;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use self::cgroup::{CgroupBases, SuiteCgroups, join_cgroup};
use self::landlock::{MIN_ABI, PathRules, build_ruleset, kernel_abi};
use self::limits::{DiskWatch, set_rlimit};
use self::settings::{SuiteBoundary, format_size};

/// How the worker's owner wants suites contained.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// Paths no suite may reach besides the worker's cache directory: the server's database
    /// directory (with its admin token) for the embedded worker.
    pub protected: Vec<PathBuf>,
    /// Run suites even where the kernel cannot enforce the filesystem boundary.
    pub allow_unconfined: bool,
}

/// What this machine can enforce, found once at startup.
#[derive(Debug, Clone)]
pub struct Sandbox {
    config: SandboxConfig,
    landlock_abi: Option<i32>,
    cgroups: CgroupBases,
    cargo_home: PathBuf,
    rustup_home: PathBuf,
    path: String,
}

/// The directories of one repository's suites on this worker.
#[derive(Debug, Clone)]
pub struct SuiteDirs {
    pub worktree: PathBuf,
    pub target: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
}

/// System directories a suite may read (and execute from). Anything else it reads must be
/// one of its own directories or a toolchain.
const SYSTEM_READ: [&str; 13] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix",
    "/proc", "/sys", "/dev",
];
/// Device files a suite may write.
const DEVICES_WRITE: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];
/// The KVM device, which a suite that boots micro-VMs opens read-write (bench-kernels'
/// vm-scale). It reaches no file, socket or process: only the VMs the suite itself makes.
/// Where it is missing or unusable such a suite runs its process fallback.
const KVM_DEVICE: &str = "/dev/kvm";

impl Sandbox {
    /// Finds out what the kernel offers and where the toolchains are.
    pub fn probe(config: SandboxConfig) -> Self {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| "/root".into());
        let from_env = |name: &str, default: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| home.join(default))
        };
        let cgroups = CgroupBases::probe();
        own_secrets::blank_own_secrets();
        Self {
            landlock_abi: kernel_abi(),
            cgroups,
            cargo_home: from_env("CARGO_HOME", ".cargo"),
            rustup_home: from_env("RUSTUP_HOME", ".rustup"),
            path: std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            config,
        }
    }

    /// Whether the filesystem boundary is enforced on this kernel.
    pub fn is_confined(&self) -> bool {
        self.landlock_abi.is_some_and(|abi| abi >= MIN_ABI)
    }

    /// One paragraph for the startup log: what is enforced, and what is not.
    pub fn describe(&self) -> String {
        let boundary = match self.landlock_abi {
            Some(abi) if abi >= MIN_ABI => format!("filesystem boundary: Landlock ABI {abi}"),
            Some(abi) => {
                format!("NO filesystem boundary: Landlock ABI {abi} is older than {MIN_ABI}")
            }
            None => "NO filesystem boundary: this kernel has no Landlock".into(),
        };
        let processes = match &self.cgroups.pids {
            Some(base) => format!("process limit: cgroup pids.max under {}", base.dir.display()),
            None => "process limit: RLIMIT_NPROC only (no pids cgroup can be made; it does not bind root)".into(),
        };
        let memory = match &self.cgroups.memory {
            Some(base) => format!(
                "memory limit: cgroup {} under {}",
                cgroup::Controller::Memory.limit_files(base.version)[0],
                base.dir.display()
            ),
            None => "memory limit: RLIMIT_DATA per process (no memory cgroup can be made)".into(),
        };
        format!(
            "suite sandbox: {boundary}; {processes}; {memory}; disk: RLIMIT_FSIZE and a watch of space used"
        )
    }

    /// Refuses to run suites without a boundary unless the owner accepted the risk.
    pub fn check_runnable(&self) -> Result<(), String> {
        if self.is_confined() || self.config.allow_unconfined {
            return Ok(());
        }
        Err(format!(
            "this worker refuses to run suites: {}. Benchmark code could read kymo's database and tokens; pass --allow-unconfined-suites to accept that risk",
            self.describe()
        ))
    }

    /// The allow-listed environment of a suite's commands.
    pub fn environment(
        &self,
        dirs: &SuiteDirs,
        commit: &str,
        boundary: &SuiteBoundary,
    ) -> Vec<(String, String)> {
        // Relative entries would resolve in the work tree, where the suite writes.
        let path: Vec<&str> = self
            .path
            .split(':')
            .filter(|p| p.starts_with('/'))
            .collect();
        let mut env = vec![
            ("PATH".to_owned(), path.join(":")),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("HOME".to_owned(), dirs.home.display().to_string()),
            ("TMPDIR".to_owned(), dirs.tmp.display().to_string()),
            (
                "CARGO_HOME".to_owned(),
                self.cargo_home.display().to_string(),
            ),
            (
                "RUSTUP_HOME".to_owned(),
                self.rustup_home.display().to_string(),
            ),
            (
                "CARGO_TARGET_DIR".to_owned(),
                dirs.target.display().to_string(),
            ),
            ("KYMO_COMMIT".to_owned(), commit.to_owned()),
        ];
        env.extend(boundary.env.iter().cloned());
        env
    }

    /// Builds what one command of a suite needs: its ruleset, its cgroup, its disk watch.
    pub fn prepare(
        &self,
        dirs: &SuiteDirs,
        cache_dir: &Path,
        boundary: &SuiteBoundary,
    ) -> io::Result<PreparedCommand> {
        let mut protected = self.config.protected.clone();
        protected.push(cache_dir.to_owned());
        let ruleset = if self.is_confined() {
            let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
            read.extend([self.cargo_home.clone(), self.rustup_home.clone()]);
            read.extend(
                self.path
                    .split(':')
                    .filter(|p| p.starts_with('/'))
                    .map(PathBuf::from),
            );
            read.extend(std::env::current_exe().ok());
            let mut write = vec![
                dirs.worktree.clone(),
                dirs.target.clone(),
                dirs.home.clone(),
                dirs.tmp.clone(),
            ];
            write.extend(DEVICES_WRITE.iter().map(PathBuf::from));
            write.push(PathBuf::from(KVM_DEVICE));
            Some(build_ruleset(
                &PathRules {
                    read,
                    write,
                    protected,
                },
                boundary.network,
            )?)
        } else {
            None
        };
        let cgroups = SuiteCgroups::create(&self.cgroups, boundary.processes, boundary.memory)?;
        let writable = [dirs.worktree.as_path(), &dirs.target, &dirs.home, &dirs.tmp];
        let free_disk = boundary.disk;
        Ok(PreparedCommand {
            setup: ChildSetup {
                ruleset: ruleset.as_ref().map(AsRawFd::as_raw_fd),
                cgroup_procs: cgroups.procs_paths(),
                processes: (!cgroups.limits_processes()).then_some(boundary.processes),
                memory: (!cgroups.limits_memory()).then_some(boundary.memory),
                disk: free_disk,
                network: boundary.network,
            },
            _ruleset: ruleset,
            cgroups,
            disk: DiskWatch::start(&writable),
            boundary: boundary.clone(),
        })
    }
}

/// Capabilities a suite run by root loses at exec: reading other processes' memory and
/// environment, mounting, loading modules, raw devices, changing the network or the clock.
const DROPPED_CAPABILITIES: [libc::c_int; 9] = [
    19, // CAP_SYS_PTRACE
    21, // CAP_SYS_ADMIN
    16, // CAP_SYS_MODULE
    17, // CAP_SYS_RAWIO
    12, // CAP_NET_ADMIN
    25, // CAP_SYS_TIME
    22, // CAP_SYS_BOOT
    2,  // CAP_DAC_READ_SEARCH
    27, // CAP_MKNOD
];

/// What the child applies to itself between fork and exec. Plain values only: applying it
/// must not allocate.
#[derive(Debug, Clone)]
pub struct ChildSetup {
    ruleset: Option<libc::c_int>,
    /// The cgroups to join (none, one, or one per v1 hierarchy).
    cgroup_procs: Vec<CString>,
    /// Resource limits in place of the cgroups that cannot be made.
    processes: Option<u32>,
    memory: Option<u64>,
    disk: u64,
    network: bool,
}

impl ChildSetup {
    /// Enters the cgroup, sets the limits, leaves the network and enforces the ruleset, in the
    /// order that keeps each step possible (Landlock last: it forbids the cgroup write).
    pub fn apply(&self) -> io::Result<()> {
        for procs in &self.cgroup_procs {
            join_cgroup(procs)?;
        }
        if let Some(processes) = self.processes {
            set_rlimit(libc::RLIMIT_NPROC, u64::from(processes))?;
        }
        if let Some(memory) = self.memory {
            set_rlimit(libc::RLIMIT_DATA, memory)?;
        }
        set_rlimit(libc::RLIMIT_FSIZE, self.disk)?;
        set_rlimit(libc::RLIMIT_CORE, 0)?;
        if !self.network {
            // SAFETY: unshare takes flags only. Without privilege, a user namespace makes
            // the network namespace possible; where neither works, Landlock still cuts TCP.
            unsafe {
                if libc::unshare(libc::CLONE_NEWNET) != 0 {
                    libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET);
                }
            }
        }
        for capability in DROPPED_CAPABILITIES {
            // SAFETY: prctl with integer arguments. Without CAP_SETPCAP (not root) it fails,
            // and there is nothing to drop.
            unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) };
        }
        if let Some(ruleset) = self.ruleset {
            landlock::enforce(ruleset)?;
        }
        Ok(())
    }
}

/// One command's boundary, alive while the command runs.
#[derive(Debug)]
pub struct PreparedCommand {
    setup: ChildSetup,
    /// Kept open until the child has enforced it.
    _ruleset: Option<OwnedFd>,
    cgroups: SuiteCgroups,
    disk: DiskWatch,
    boundary: SuiteBoundary,
}

impl PreparedCommand {
    pub fn child_setup(&self) -> &ChildSetup {
        &self.setup
    }

    /// Whether the command has added more disk space than it may (checked while it runs).
    pub fn disk_exceeded(&self) -> bool {
        self.disk.added() > self.boundary.disk
    }

    /// Ends what the command left behind and names the limit it hit, if it hit one. `log` is
    /// the tail of its output, where allocators report refused memory.
    pub fn finish(
        &self,
        failed: bool,
        signal: Option<i32>,
        stopped: bool,
        log: &str,
    ) -> Option<String> {
        self.cgroups.kill_all();
        let b = &self.boundary;
        // A shell reports a child killed by SIGXFSZ with this text and goes on.
        let file_too_large =
            signal == Some(libc::SIGXFSZ) || log.contains("File size limit exceeded");
        if stopped || self.disk_exceeded() || file_too_large {
            return Some(format!(
                "disk limit of {} (`disk` in kymo.toml)",
                format_size(b.disk)
            ));
        }
        // A refused fork fails the job even when the shell carried on without the process.
        // Without a cgroup only the shells' words tell: dash says "Cannot fork", bash
        // "fork: retry" or "fork: Resource temporarily unavailable", busybox "can't fork".
        const FORK_REFUSED: [&str; 4] = [
            "Cannot fork",
            "fork: retry",
            "fork: Resource temporarily unavailable",
            "can't fork",
        ];
        let rlimit_hit = !self.cgroups.limits_processes()
            && (FORK_REFUSED.iter().any(|s| log.contains(s))
                || (failed && log.contains("Resource temporarily unavailable")));
        if self.cgroups.hit_process_limit() || rlimit_hit {
            return Some(format!(
                "process limit of {} (`processes` in kymo.toml)",
                b.processes
            ));
        }
        // A process the kernel killed for memory fails the job, whatever its parent did next.
        if self.cgroups.hit_memory_limit() {
            return Some(format!(
                "memory limit of {} for all its processes together (`memory` in kymo.toml)",
                format_size(b.memory)
            ));
        }
        if !failed {
            return None;
        }
        const ALLOCATION_FAILED: [&str; 5] = [
            "memory allocation of",
            "Cannot allocate memory",
            "MemoryError",
            "std::bad_alloc",
            "out of memory",
        ];
        if ALLOCATION_FAILED.iter().any(|s| log.contains(s)) {
            return Some(format!(
                "memory limit of {} per process (`memory` in kymo.toml)",
                format_size(b.memory)
            ));
        }
        None
    }
}
