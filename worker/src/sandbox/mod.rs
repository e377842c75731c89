//! The boundary around benchmark commands, which are untrusted code from the tracked
//! repository: an allow-listed environment, a Landlock filesystem boundary (read the system
//! and toolchains, write only the suite's own directories, never kymo's data), its own PID
//! namespace and `/proc` (no other process in sight), no capabilities, optional loss of the
//! network, and limits on processes, memory and disk (cgroups where the worker can make them,
//! resource limits otherwise) held to the machine's maximums.
//!
//! [`Sandbox::probe`] finds out once what the kernel can enforce; [`Sandbox::prepare`] builds
//! what one command needs, and [`ChildSetup::apply`] enforces it in the child between fork and
//! exec.

#[cfg(test)]
mod cargo_tests;
pub mod cgroup;
mod child;
#[cfg(test)]
mod criterion_count_tests;
#[cfg(test)]
mod instruction_tests;
#[cfg(test)]
mod isolation_tests;
pub mod landlock;
pub mod limits;
pub mod maximums;
mod namespaces;
#[cfg(test)]
mod overhead_tests;
mod own_secrets;
pub mod settings;
#[cfg(test)]
mod tests;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use self::cgroup::{CgroupBases, SuiteCgroups};
use self::child::StageReport;
pub use self::child::{ChildSetup, Stage};
use self::landlock::{MIN_ABI, PathRules, build_ruleset, kernel_abi};
use self::limits::DiskWatch;
use self::maximums::{HeldLimit, MaximumSettings, SuiteMaximums};
use self::namespaces::{NamespaceMode, Namespaces};
use self::settings::{SuiteBoundary, format_size};

/// How the worker's owner wants suites contained.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// Paths no suite may reach besides the worker's cache directory: the server's database
    /// directory (with its admin token) for the embedded worker.
    pub protected: Vec<PathBuf>,
    /// Run suites even where the kernel cannot enforce the filesystem boundary or give them
    /// their own PID namespace.
    pub allow_unconfined: bool,
    /// The admin's ceilings on what a suite may ask for; the machine's own where unset.
    pub maximums: MaximumSettings,
}

/// What this machine can enforce, found once at startup.
#[derive(Debug, Clone)]
pub struct Sandbox {
    config: SandboxConfig,
    landlock_abi: Option<i32>,
    namespaces: NamespaceMode,
    maximums: SuiteMaximums,
    cgroups: CgroupBases,
    /// The worker's own cargo home: only its `bin` (rustup's proxies, installed subcommands)
    /// is given to suites, never its registry, configuration or credentials.
    cargo_home: PathBuf,
    rustup_home: PathBuf,
    /// The worker's `RUSTUP_TOOLCHAIN`, if it was started with one: the default toolchain of
    /// suites that pin none, so that they build with what the worker records as its toolchain.
    default_toolchain: Option<String>,
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

impl SuiteDirs {
    /// The repository's own cargo home, inside its home: writable, so that cargo downloads
    /// dependencies there once and keeps them for the repository's next commits.
    pub fn cargo_home(&self) -> PathBuf {
        self.home.join(".cargo")
    }
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
    /// Finds out what the kernel offers and where the toolchains are; `cache_dir` is where
    /// suites write (the disk ceiling is below its free space).
    pub fn probe(config: SandboxConfig, cache_dir: &Path) -> Self {
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
            namespaces: namespaces::probe_mode(),
            maximums: SuiteMaximums::of_machine(config.maximums, cache_dir),
            cgroups,
            cargo_home: from_env("CARGO_HOME", ".cargo"),
            rustup_home: from_env("RUSTUP_HOME", ".rustup"),
            default_toolchain: std::env::var("RUSTUP_TOOLCHAIN")
                .ok()
                .filter(|t| !t.is_empty()),
            path: std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            config,
        }
    }

    /// Whether the filesystem boundary is enforced on this kernel and suites get their own
    /// PID namespace.
    pub fn is_confined(&self) -> bool {
        self.landlock_abi.is_some_and(|abi| abi >= MIN_ABI)
            && self.namespaces != NamespaceMode::Unavailable
    }

    /// The ceilings every suite is held to.
    pub fn maximums(&self) -> &SuiteMaximums {
        &self.maximums
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
        let isolation = match self.namespaces {
            NamespaceMode::Privileged => "own PID namespace and /proc",
            NamespaceMode::InUserNamespace => {
                "own PID namespace and /proc, inside a user namespace mapping this user"
            }
            NamespaceMode::Unavailable => {
                "NO PID namespace can be made: suites would see every process of this machine"
            }
        };
        format!(
            "suite sandbox: {boundary}; {isolation}; no capabilities; {processes}; {memory}; disk: RLIMIT_FSIZE and a watch of space used; {}",
            self.maximums.describe()
        )
    }

    /// Refuses to run suites without a boundary unless the owner accepted the risk.
    pub fn check_runnable(&self) -> Result<(), String> {
        if self.is_confined() || self.config.allow_unconfined {
            return Ok(());
        }
        Err(format!(
            "this worker refuses to run suites: {}. Benchmark code could read kymo's database, tokens or the environment of its processes; pass --allow-unconfined-suites to accept that risk",
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
                dirs.cargo_home().display().to_string(),
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
        if let Some(toolchain) = &self.default_toolchain {
            env.push(("RUSTUP_TOOLCHAIN".to_owned(), toolchain.clone()));
        }
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
        // The one place a suite's limits are decided: what it asked, held to the maximums.
        let (granted, held) = self.maximums.hold(boundary);
        let boundary = &granted;
        let mut protected = self.config.protected.clone();
        protected.push(cache_dir.to_owned());
        let ruleset = if self.is_confined() {
            let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
            read.extend([self.cargo_home.join("bin"), self.rustup_home.clone()]);
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
                namespaces: Namespaces::new(self.namespaces, boundary.network),
                report: StageReport::new()?,
            },
            _ruleset: ruleset,
            cgroups,
            disk: DiskWatch::start(&writable),
            boundary: boundary.clone(),
            held,
        })
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
    /// The limits granted: the suite's, held to the maximums.
    boundary: SuiteBoundary,
    /// What was held, for the job log and the messages that name a limit.
    held: Vec<HeldLimit>,
}

impl PreparedCommand {
    pub fn child_setup(&self) -> &ChildSetup {
        &self.setup
    }

    /// One line per limit the suite asked above this worker's maximum.
    pub fn held_limits(&self) -> Vec<String> {
        self.held.iter().filter_map(HeldLimit::describe).collect()
    }

    /// Why the command could not start, when its boundary could not be set up.
    pub fn setup_failure(&self) -> Option<Stage> {
        self.setup.failed_stage()
    }

    /// Where a limit comes from, as the messages that name it say.
    fn origin(&self, key: &str) -> String {
        match self.held.iter().find(|h| h.key == key) {
            Some(HeldLimit {
                asked: Some(asked), ..
            }) => format!("this worker's maximum, --max-suite-{key}; kymo.toml asked for {asked}"),
            Some(_) => format!("this worker's maximum, --max-suite-{key}"),
            None => format!("`{key}` in kymo.toml"),
        }
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
                "disk limit of {} ({})",
                format_size(b.disk),
                self.origin("disk")
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
                "process limit of {} ({})",
                b.processes,
                self.origin("processes")
            ));
        }
        // A process the kernel killed for memory fails the job, whatever its parent did next.
        if self.cgroups.hit_memory_limit() {
            return Some(format!(
                "memory limit of {} for all its processes together ({})",
                format_size(b.memory),
                self.origin("memory")
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
                "memory limit of {} per process ({})",
                format_size(b.memory),
                self.origin("memory")
            ));
        }
        None
    }
}
