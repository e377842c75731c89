//! Runs one benchmark shell command in its own process group, with a timeout and capped output.
//!
//! The command is untrusted: it may hang, flood its output, or leave background processes
//! behind that keep its pipes open. Whatever it does, [`run_command`] returns within the
//! timeout plus a few seconds of grace, with bounded memory, and the command's whole process
//! group is dead afterwards.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::sandbox::ChildSetup;

/// How long a timed-out command gets between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long the output readers may keep draining after the process group is dead. Only a
/// process that escaped the group (`setsid`) can hold the pipes open that long.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How often readers check whether they should give up on a pipe nobody closes.
const READER_POLL_MS: libc::c_int = 50;
const CHUNK: usize = 64 * 1024;

/// What to run and within which limits.
#[derive(Clone)]
pub struct CommandSpec<'a> {
    /// Shell text, run as `sh -c <command>`.
    pub command: &'a str,
    pub cwd: &'a Path,
    /// Variables added to the worker's own environment, or the whole environment when
    /// `clear_env` is set.
    pub env: &'a [(String, String)],
    pub clear_env: bool,
    /// Applied by the child to itself before it runs the command (the suite's boundary).
    pub child_setup: Option<&'a ChildSetup>,
    /// Checked a few times a second while the command runs; `true` stops it
    /// ([`ExitKind::Stopped`]).
    pub watch: Option<&'a (dyn Fn() -> bool + Sync)>,
    pub timeout: Duration,
    /// Most stdout bytes kept; more ends the command with [`ExitKind::OutputTooLarge`].
    pub stdout_cap: usize,
    /// Size of [`CommandOutcome::log_tail`] in bytes.
    pub log_cap: usize,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    Success,
    /// Exited with this non-zero code.
    Failed(i32),
    /// Killed by this signal (not by us).
    Signaled(i32),
    /// Ran past its timeout and was killed.
    TimedOut,
    /// Wrote more than `stdout_cap` bytes to stdout and was killed.
    OutputTooLarge,
    /// Killed because its `watch` said so.
    Stopped,
}

/// The result of [`run_command`].
#[derive(Debug, Clone)]
pub struct CommandOutcome {
    pub exit: ExitKind,
    /// At most `stdout_cap` bytes of stdout.
    pub stdout: Vec<u8>,
    /// The last `log_cap` bytes of stderr and stdout as they arrived, lossily decoded.
    pub log_tail: String,
    /// From spawn until the command ended or was killed.
    pub duration: Duration,
}

impl ExitKind {
    /// Whether the command succeeded.
    pub fn is_success(self) -> bool {
        self == ExitKind::Success
    }
}

enum Event {
    StdoutOverflow,
    ReaderDone,
}

enum Ending {
    Exited,
    TimedOut,
    TooLarge,
    Stopped,
}

/// How often `watch` is asked.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// Runs `sh -c spec.command` in a new process group with stdin closed, and waits for it
/// within `spec.timeout`. When the command ends, however it ends, its whole process group is
/// killed, so background processes it left behind do not outlive it.
pub fn run_command(spec: &CommandSpec) -> io::Result<CommandOutcome> {
    let start = Instant::now();
    let mut command = Command::new("sh");
    command.arg("-c").arg(spec.command).current_dir(spec.cwd);
    if spec.clear_env {
        command.env_clear();
    }
    command
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(setup) = spec.child_setup {
        let setup = setup.clone();
        // SAFETY: `ChildSetup::apply` makes raw system calls only and does not allocate.
        unsafe { command.pre_exec(move || setup.apply()) };
    }
    let mut child = command.spawn()?;
    let pid = child.id() as libc::pid_t;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");

    let (events, inbox) = mpsc::channel();
    let log = Arc::new(Mutex::new(LogTail::new(spec.log_cap)));
    let stop = Arc::new(AtomicBool::new(false));
    let stdout_reader = {
        let (log, stop, events, cap) = (log.clone(), stop.clone(), events.clone(), spec.stdout_cap);
        thread::spawn(move || read_stdout(stdout, cap, &log, &stop, &events))
    };
    let stderr_reader = {
        let (log, stop, events) = (log.clone(), stop.clone(), events.clone());
        thread::spawn(move || {
            pump(stderr, &stop, |chunk| {
                log.lock().expect("log lock").push(chunk);
                true
            });
            let _ = events.send(Event::ReaderDone);
        })
    };

    let mut readers_done = 0;
    let ending = wait_for_ending(
        pid,
        start + spec.timeout,
        spec.watch,
        &inbox,
        &mut readers_done,
    )?;
    let duration = start.elapsed();
    match ending {
        Ending::TimedOut => {
            kill_group(pid, libc::SIGTERM);
            let grace_end = Instant::now() + KILL_GRACE;
            while !leader_has_exited(pid)? && Instant::now() < grace_end {
                thread::sleep(Duration::from_millis(10));
            }
            kill_group(pid, libc::SIGKILL);
        }
        // The leader is exited but not reaped, so its pid still names our group: no process
        // outside it can be hit.
        Ending::Exited | Ending::TooLarge | Ending::Stopped => kill_group(pid, libc::SIGKILL),
    }
    let status = child.wait()?;

    drain_readers(&inbox, readers_done, &stop);
    let (stdout, overflowed) = stdout_reader.join().expect("stdout reader panicked");
    stderr_reader.join().expect("stderr reader panicked");
    let exit = match ending {
        _ if overflowed => ExitKind::OutputTooLarge,
        Ending::TooLarge => ExitKind::OutputTooLarge,
        Ending::TimedOut => ExitKind::TimedOut,
        Ending::Stopped => ExitKind::Stopped,
        Ending::Exited => match (status.code(), status.signal()) {
            (Some(0), _) => ExitKind::Success,
            (Some(code), _) => ExitKind::Failed(code),
            (None, Some(signal)) => ExitKind::Signaled(signal),
            (None, None) => ExitKind::Failed(-1),
        },
    };
    let log_tail = log.lock().expect("log lock").to_string_lossy();
    Ok(CommandOutcome {
        exit,
        stdout,
        log_tail,
        duration,
    })
}

fn wait_for_ending(
    pid: libc::pid_t,
    deadline: Instant,
    watch: Option<&(dyn Fn() -> bool + Sync)>,
    inbox: &Receiver<Event>,
    readers_done: &mut usize,
) -> io::Result<Ending> {
    // Short commands should not pay a long poll; long ones should not spin.
    let mut interval = Duration::from_millis(1);
    let mut next_watch = Instant::now() + WATCH_EVERY;
    loop {
        if leader_has_exited(pid)? {
            return Ok(Ending::Exited);
        }
        let now = Instant::now();
        if let Some(watch) = watch.filter(|_| now >= next_watch) {
            if watch() {
                return Ok(Ending::Stopped);
            }
            next_watch = now + WATCH_EVERY;
        }
        if now >= deadline {
            return Ok(Ending::TimedOut);
        }
        match inbox.recv_timeout(interval.min(deadline - now)) {
            Ok(Event::StdoutOverflow) => return Ok(Ending::TooLarge),
            Ok(Event::ReaderDone) => *readers_done += 1,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => unreachable!("the readers hold senders"),
        }
        interval = (interval * 2).min(Duration::from_millis(20));
    }
}

/// Waits for both readers to reach end of file, then tells any that did not to give up.
fn drain_readers(inbox: &Receiver<Event>, mut done: usize, stop: &AtomicBool) {
    let deadline = Instant::now() + DRAIN_GRACE;
    while done < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match inbox.recv_timeout(left) {
            Ok(Event::ReaderDone) => done += 1,
            Ok(Event::StdoutOverflow) => {}
            Err(_) => break,
        }
    }
    stop.store(true, Ordering::Relaxed);
}

fn read_stdout(
    pipe: impl Read + AsRawFd,
    cap: usize,
    log: &Mutex<LogTail>,
    stop: &AtomicBool,
    events: &Sender<Event>,
) -> (Vec<u8>, bool) {
    let mut kept = Vec::with_capacity(cap.min(CHUNK));
    let mut overflowed = false;
    pump(pipe, stop, |chunk| {
        log.lock().expect("log lock").push(chunk);
        let room = cap - kept.len();
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        // Stop reading at once: the group is about to be killed, and the excess is not kept.
        overflowed = chunk.len() > room;
        !overflowed
    });
    if overflowed {
        let _ = events.send(Event::StdoutOverflow);
    }
    let _ = events.send(Event::ReaderDone);
    (kept, overflowed)
}

/// Reads `pipe` until end of file, an error, `on_chunk` returning false, or `stop` being set.
/// It polls rather than blocking in `read`, so that a pipe held open by an escaped process
/// cannot keep the thread forever.
fn pump(mut pipe: impl Read + AsRawFd, stop: &AtomicBool, mut on_chunk: impl FnMut(&[u8]) -> bool) {
    let mut buf = vec![0u8; CHUNK];
    while !stop.load(Ordering::Relaxed) {
        let mut fd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, owned by this frame, for the duration of the call.
        let ready = unsafe { libc::poll(&mut fd, 1, READER_POLL_MS) };
        if ready == 0
            || (ready < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted)
        {
            continue;
        }
        match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if !on_chunk(&buf[..n]) {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Whether the group leader has exited, without reaping it: while it is a zombie its pid
/// cannot be reused, so signalling its process group stays safe.
fn leader_has_exited(pid: libc::pid_t) -> io::Result<bool> {
    // SAFETY: siginfo_t is plain data; waitid fills it in or leaves si_pid zero.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: `info` is a valid, writable siginfo_t.
    let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    if rc == -1 {
        let error = io::Error::last_os_error();
        return if error.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(error)
        };
    }
    // SAFETY: waitid with P_PID succeeded, so `info` holds a child-status record (or zeroes).
    Ok(unsafe { info.si_pid() } != 0)
}

fn kill_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill has no memory effects. ESRCH (group already empty) is expected and ignored.
    unsafe { libc::kill(-pgid, signal) };
}

/// The last `cap` bytes of a stream. Memory stays under `2 * cap` plus one chunk: the buffer
/// grows to twice the cap before the old half is dropped, which keeps pushes amortised O(n).
struct LogTail {
    buf: Vec<u8>,
    cap: usize,
}

impl LogTail {
    fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.cap {
            self.buf.clear();
            self.buf.extend_from_slice(&bytes[bytes.len() - self.cap..]);
            return;
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > 2 * self.cap {
            self.buf.drain(..self.buf.len() - self.cap);
        }
    }

    /// The tail as text, starting at a character boundary where the cut split one.
    fn to_string_lossy(&self) -> String {
        let tail = &self.buf[self.buf.len().saturating_sub(self.cap)..];
        let skip = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
            .count();
        String::from_utf8_lossy(&tail[skip..]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    fn run_in(dir: &Path, command: &str, timeout: Duration, stdout_cap: usize) -> CommandOutcome {
        let spec = CommandSpec {
            command,
            cwd: dir,
            env: &[],
            clear_env: false,
            child_setup: None,
            watch: None,
            timeout,
            stdout_cap,
            log_cap: 4096,
        };
        run_command(&spec).expect("command starts")
    }

    fn run(command: &str) -> CommandOutcome {
        let dir = tempfile::tempdir().unwrap();
        run_in(dir.path(), command, Duration::from_secs(20), MIB)
    }

    fn read_pid(dir: &Path) -> libc::pid_t {
        let text = std::fs::read_to_string(dir.join("pid")).expect("the command wrote its pid");
        text.trim().parse().expect("a pid")
    }

    /// Whether `pid` is gone or a zombie, waiting a little for its reaper.
    fn is_dead(pid: libc::pid_t) -> bool {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            // SAFETY: signal 0 only checks for existence.
            let exists = unsafe { libc::kill(pid, 0) } == 0;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'));
            if !exists || zombie {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn success_keeps_stdout_and_logs_both_streams() {
        let outcome = run("echo hello; echo oops >&2");
        assert_eq!(outcome.exit, ExitKind::Success);
        assert_eq!(outcome.stdout, b"hello\n");
        assert!(outcome.log_tail.contains("hello"), "{}", outcome.log_tail);
        assert!(outcome.log_tail.contains("oops"), "{}", outcome.log_tail);
    }

    #[test]
    fn exit_codes_and_signals_are_reported() {
        assert_eq!(run("exit 3").exit, ExitKind::Failed(3));
        assert_eq!(run("kill -9 $$").exit, ExitKind::Signaled(libc::SIGKILL));
        assert!(!run("false").exit.is_success());
    }

    #[test]
    fn stdin_is_closed() {
        assert_eq!(run("cat; echo eof").stdout, b"eof\n");
    }

    #[test]
    fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let timeout = Duration::from_millis(300);
        let outcome = run_in(dir.path(), "sleep 1000 & echo $! > pid; wait", timeout, MIB);
        assert_eq!(outcome.exit, ExitKind::TimedOut);
        assert!(outcome.duration >= timeout && outcome.duration < Duration::from_secs(5));
        assert!(is_dead(read_pid(dir.path())), "the grandchild survived");
    }

    #[test]
    fn timeout_kills_grandchildren_that_ignore_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let command = "sh -c 'trap \"\" TERM; echo $$ > pid; exec sleep 1000' & wait";
        let started = Instant::now();
        let outcome = run_in(dir.path(), command, Duration::from_millis(300), MIB);
        assert_eq!(outcome.exit, ExitKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(6));
        assert!(
            is_dead(read_pid(dir.path())),
            "the grandchild survived SIGKILL"
        );
    }

    #[test]
    fn background_processes_die_when_the_command_ends() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let command = "sleep 1000 & echo $! > pid; echo done";
        let outcome = run_in(dir.path(), command, Duration::from_secs(20), MIB);
        assert_eq!(outcome.exit, ExitKind::Success);
        assert_eq!(outcome.stdout, b"done\n");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(
            is_dead(read_pid(dir.path())),
            "the background process survived"
        );
    }

    #[test]
    fn an_escaped_process_holding_the_pipe_cannot_hang_the_readers() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        // The pid file appears only once the process has left the group, so the group kill
        // cannot catch it first.
        let command = "setsid sh -c 'echo $$ > pid.tmp; mv pid.tmp pid; exec sleep 1000' &
                       while [ ! -e pid ]; do sleep 0.01; done; echo done";
        let outcome = run_in(dir.path(), command, Duration::from_secs(20), MIB);
        let elapsed = started.elapsed();
        let escaped = read_pid(dir.path());
        // SAFETY: signal 0 only checks for existence.
        let still_alive = unsafe { libc::kill(escaped, 0) } == 0;
        // SAFETY: plain kill of the process this test started.
        unsafe { libc::kill(escaped, libc::SIGKILL) };
        assert!(
            still_alive,
            "the process should have escaped the group kill"
        );
        assert_eq!(outcome.exit, ExitKind::Success);
        assert_eq!(outcome.stdout, b"done\n");
        assert!(elapsed >= DRAIN_GRACE && elapsed < DRAIN_GRACE + Duration::from_secs(2));
    }

    #[test]
    fn a_flood_of_stdout_is_cut_off_quickly_with_bounded_memory() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let command = "yes | head -c 100000000";
        let outcome = run_in(dir.path(), command, Duration::from_secs(60), MIB);
        assert_eq!(outcome.exit, ExitKind::OutputTooLarge);
        assert_eq!(outcome.stdout.len(), MIB);
        assert!(outcome.stdout.capacity() <= 2 * MIB);
        assert!(outcome.stdout.starts_with(b"y\ny\n"));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn stdout_of_exactly_the_cap_is_fine_and_one_more_byte_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let timeout = Duration::from_secs(20);
        let exact = run_in(dir.path(), "head -c 100000 /dev/zero", timeout, 100_000);
        assert_eq!(exact.exit, ExitKind::Success);
        assert_eq!(exact.stdout.len(), 100_000);
        let over = run_in(dir.path(), "head -c 100001 /dev/zero", timeout, 100_000);
        assert_eq!(over.exit, ExitKind::OutputTooLarge);
        assert_eq!(over.stdout.len(), 100_000);
    }

    #[test]
    fn log_tail_keeps_only_the_end_of_a_large_stderr() {
        let outcome = run("head -c 5000000 /dev/zero | tr '\\0' x >&2; echo END >&2; exit 1");
        assert_eq!(outcome.exit, ExitKind::Failed(1));
        assert_eq!(outcome.log_tail.len(), 4096);
        assert!(
            outcome.log_tail.ends_with("xxEND\n"),
            "{:?}",
            &outcome.log_tail[4000..]
        );
        assert!(outcome.stdout.is_empty());
    }

    #[test]
    fn env_and_cwd_are_applied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker"), "here").unwrap();
        let env = [("KYMO_TEST_VAR".to_string(), "hi there".to_string())];
        let spec = CommandSpec {
            command: "printf '%s|' \"$KYMO_TEST_VAR\"; cat marker",
            cwd: dir.path(),
            env: &env,
            clear_env: false,
            child_setup: None,
            watch: None,
            timeout: Duration::from_secs(20),
            stdout_cap: MIB,
            log_cap: 4096,
        };
        let outcome = run_command(&spec).unwrap();
        assert_eq!(String::from_utf8_lossy(&outcome.stdout), "hi there|here");
    }

    #[test]
    fn a_missing_cwd_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let spec = CommandSpec {
            command: "true",
            cwd: &dir.path().join("missing"),
            env: &[],
            clear_env: false,
            child_setup: None,
            watch: None,
            timeout: Duration::from_secs(5),
            stdout_cap: MIB,
            log_cap: 4096,
        };
        assert!(run_command(&spec).is_err());
    }

    #[test]
    fn log_tail_keeps_the_last_bytes_at_a_character_boundary() {
        let mut tail = LogTail::new(4);
        tail.push(b"ab");
        tail.push(b"cdef");
        assert_eq!(tail.to_string_lossy(), "cdef");
        for _ in 0..10 {
            tail.push(b"g");
        }
        assert_eq!(tail.to_string_lossy(), "gggg");
        assert!(tail.buf.len() <= 8);
        tail.push("xé".as_bytes());
        tail.push("aé".as_bytes());
        // The last 4 bytes start inside the first é; the stray byte is dropped.
        assert_eq!(tail.to_string_lossy(), "aé");
        let mut empty = LogTail::new(0);
        empty.push(b"abc");
        assert_eq!(empty.to_string_lossy(), "");
    }
}
