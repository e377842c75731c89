//! The namespaces a suite runs in. Its own PID namespace, with its own `/proc` mounted in its
//! own mount namespace, so that it sees no process but its own: not the worker's or the
//! server's environment (`/proc/PID/environ` of a process of the same user is readable by
//! design), nor their command lines, nor anyone else's. A network namespace when it runs
//! without the network. A worker that is not root makes them inside a user namespace that maps
//! only its own user and group, so files keep their owners and the suite stays that user.
//!
//! The command's process calls `unshare`; its next child is the namespace's first process
//! (pid 1). That one mounts the new `/proc`, forks the process that goes on to exec the
//! command, reaps what is orphaned to it, and passes the command's wait status back up; the
//! first process then ends the same way, so the worker sees the command's own exit. When the
//! namespace's first process exits, the kernel kills everything left in the namespace.
//!
//! Everything here runs between fork and exec: raw system calls on values prepared beforehand.

use std::io;

use super::child::{Stage, StageReport};

/// How this machine makes a suite's namespaces, found once at startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceMode {
    /// The worker may make namespaces itself (root).
    Privileged,
    /// Inside a user namespace that maps the worker's user (a worker that is not root).
    InUserNamespace,
    /// Neither works: suites share the worker's view of processes.
    Unavailable,
}

/// The namespaces of one command.
#[derive(Debug, Clone)]
pub struct Namespaces {
    /// `CLONE_NEW*` flags for `unshare`; 0: none.
    flags: libc::c_int,
    /// `/proc/self/uid_map` and `gid_map` lines when a user namespace is made.
    user_maps: Option<(Vec<u8>, Vec<u8>)>,
    /// The worker's argument and environment strings, which the namespace's first process
    /// (a fork of the worker that never execs) blanks in its copy.
    worker_text: [Option<(usize, usize)>; 2],
}

impl Namespaces {
    /// The namespaces for a command in `mode`: its own processes when the mode allows, and no
    /// network when `network` is false.
    pub fn new(mode: NamespaceMode, network: bool) -> Self {
        let mut flags = 0;
        if mode != NamespaceMode::Unavailable {
            flags |= libc::CLONE_NEWPID | libc::CLONE_NEWNS;
        }
        if !network {
            flags |= libc::CLONE_NEWNET;
        }
        let user_maps = match mode {
            NamespaceMode::InUserNamespace => {
                flags |= libc::CLONE_NEWUSER;
                // SAFETY: getuid and getgid have no preconditions.
                let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
                Some((
                    format!("{uid} {uid} 1").into_bytes(),
                    format!("{gid} {gid} 1").into_bytes(),
                ))
            }
            // Without a user namespace only root can make a network namespace; try as root
            // and fail the job if it cannot be made.
            _ => None,
        };
        Self {
            flags,
            user_maps,
            worker_text: super::own_secrets::text_areas(),
        }
    }

    /// Whether the command gets its own PID namespace.
    pub fn own_processes(&self) -> bool {
        self.flags & libc::CLONE_NEWPID != 0
    }

    /// Enters the namespaces. Returns in the process that goes on to exec the command; the
    /// calling process and the namespace's first process never return from here.
    pub fn enter(&self, report: &StageReport) -> io::Result<()> {
        if self.flags == 0 {
            return Ok(());
        }
        // SAFETY: unshare takes flags only.
        if unsafe { libc::unshare(self.flags) } != 0 {
            return Err(report.failed(Stage::Namespaces));
        }
        if let Some((uid_map, gid_map)) = &self.user_maps {
            // A process may map its own ids into a user namespace it made, once it gave up
            // setgroups (which could otherwise drop a group that denies it access).
            let writes: [(&std::ffi::CStr, &[u8]); 3] = [
                (c"/proc/self/setgroups", b"deny"),
                (c"/proc/self/uid_map", uid_map),
                (c"/proc/self/gid_map", gid_map),
            ];
            for (path, text) in writes {
                write_file(path, text).map_err(|_| report.failed(Stage::UserMap))?;
            }
        }
        if self.own_processes() {
            start_namespace(report, &self.worker_text)?;
        }
        Ok(())
    }
}

/// Finds out how this machine can make a suite's namespaces, by making them for `true`.
pub fn probe_mode() -> NamespaceMode {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let candidates: &[NamespaceMode] = if root {
        &[NamespaceMode::Privileged, NamespaceMode::InUserNamespace]
    } else {
        &[NamespaceMode::InUserNamespace]
    };
    for mode in candidates {
        if works(*mode) {
            return *mode;
        }
    }
    NamespaceMode::Unavailable
}

fn works(mode: NamespaceMode) -> bool {
    use std::os::unix::process::CommandExt;
    let namespaces = Namespaces::new(mode, false);
    let Ok(report) = StageReport::new() else {
        return false;
    };
    let mut command = std::process::Command::new("/bin/sh");
    command
        .args(["-c", "test -r /proc/1/status"])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child_report = report.clone();
    // SAFETY: `enter` makes raw system calls only and does not allocate.
    unsafe { command.pre_exec(move || namespaces.enter(&child_report)) };
    command.status().is_ok_and(|status| status.success())
}

/// After `unshare(CLONE_NEWPID)`: forks the namespace's first process and waits for it here,
/// outside, to end as it ends. Returns in the process that goes on to exec the command.
fn start_namespace(
    report: &StageReport,
    worker_text: &[Option<(usize, usize)>; 2],
) -> io::Result<()> {
    let mut status_pipe = [-1; 2];
    // SAFETY: a writable array of two descriptors.
    if unsafe { libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(report.failed(Stage::Fork));
    }
    let [status_read, status_write] = status_pipe;
    // SAFETY: fork in the child of a fork, before exec: only raw system calls follow.
    let first = unsafe { libc::fork() };
    if first < 0 {
        return Err(report.failed(Stage::Fork));
    }
    if first > 0 {
        // Outside the namespace: hold nothing open that a reader waits on (the spawner's
        // error pipe, the stage report), and end as the command ends.
        // SAFETY: closing our own descriptors.
        unsafe { libc::close(status_write) };
        close_all_but(status_read);
        let status = wait_for_command(status_read, first);
        end_as(status);
    }
    // The namespace's first process: a copy of the worker that the suite can name (pid 1).
    // It shows none of the worker's command line or environment, and its memory and files are
    // closed to processes without privilege (not dumpable).
    // SAFETY: closing our own descriptor; prctl with integers; the worker's text areas are
    // this process's own copy, which nothing else reads.
    unsafe {
        libc::close(status_read);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        super::own_secrets::blank_areas(worker_text);
    }
    mount_own_proc().map_err(|_| report.failed(Stage::ProcMount))?;
    // SAFETY: as above.
    let command = unsafe { libc::fork() };
    if command < 0 {
        return Err(report.failed(Stage::Fork));
    }
    if command == 0 {
        // SAFETY: closing our own descriptor; the command does not need it.
        unsafe { libc::close(status_write) };
        return Ok(());
    }
    close_all_but(status_write);
    reap_until(command, status_write);
}

/// Mounts a `/proc` of this PID namespace over the old one, in this mount namespace only.
fn mount_own_proc() -> io::Result<()> {
    // SAFETY: mount with static C strings and null data.
    unsafe {
        // Nothing mounted here may propagate back to the machine's mounts.
        if libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// As the namespace's first process: reaps every process orphaned to it until `command` ends,
/// passes its wait status on, and exits (which ends whatever is left in the namespace).
fn reap_until(command: libc::pid_t, status_write: libc::c_int) -> ! {
    loop {
        let mut status = 0;
        // SAFETY: a writable status.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == command {
            let bytes = status.to_ne_bytes();
            // SAFETY: writing four bytes we own; _exit ends this process at once.
            unsafe {
                libc::write(status_write, bytes.as_ptr().cast(), bytes.len());
                libc::_exit(0);
            }
        }
        if pid < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: ending this process.
            unsafe { libc::_exit(127) };
        }
    }
}

/// Outside the namespace: the command's wait status as its first process passed it on, or
/// that process's own when it died first (it failed before starting the command).
fn wait_for_command(status_read: libc::c_int, first: libc::pid_t) -> libc::c_int {
    let mut bytes = [0u8; 4];
    let mut got = 0;
    while got < bytes.len() {
        // SAFETY: reading into the rest of our own buffer.
        let n = unsafe {
            libc::read(
                status_read,
                bytes[got..].as_mut_ptr().cast(),
                bytes.len() - got,
            )
        };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    let mut own = 0;
    // SAFETY: a writable status; retried when interrupted.
    while unsafe { libc::waitpid(first, &mut own, 0) } < 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    if got == bytes.len() {
        libc::c_int::from_ne_bytes(bytes)
    } else {
        own
    }
}

/// Ends this process the way the wait `status` says a process ended: with its exit code, or
/// killed by its signal.
fn end_as(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // SAFETY: restoring the default action and unblocking, then signalling ourselves.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        127
    };
    // SAFETY: ending this process.
    unsafe { libc::_exit(code) }
}

/// Closes every descriptor above standard error except `keep`.
fn close_all_but(keep: libc::c_int) {
    let ranges = [(3, keep - 1), (keep + 1, libc::c_int::MAX)];
    for (first, last) in ranges {
        if first > last {
            continue;
        }
        // SAFETY: close_range takes integers; it closes our own descriptors.
        let closed =
            unsafe { libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32) };
        if closed != 0 {
            for fd in first..=last.min(4096) {
                // SAFETY: as above, one at a time on kernels before 5.9.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// Writes `text` to the file at `path`, whole, in one write.
fn write_file(path: &std::ffi::CStr, text: &[u8]) -> io::Result<()> {
    // SAFETY: a valid C string; the buffer is ours for the length given.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, text.as_ptr().cast(), text.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written != text.len() as isize {
            return Err(error);
        }
    }
    Ok(())
}
