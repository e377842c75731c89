//! What a suite holds and sees, read from inside a real suite: no capability in any set,
//! `no_new_privs`, no process but its own; limits above the worker's maximums held to them
//! and said; and a boundary that cannot be made fails the job before anything of it runs.

use std::fs;

use super::maximums::MaximumSettings;
use super::namespaces::NamespaceMode;
use super::settings::SuiteBoundary;
use super::tests::{RESULT, Server, failure, limited};

/// The value of `field` in the `/proc/self/status` lines a suite printed.
fn status_field<'a>(log: &'a str, field: &str) -> &'a str {
    log.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {field} in {log}"))
}

#[test]
fn a_suite_holds_no_capability_and_sees_no_process_but_its_own() {
    let server = Server::new();
    let worker = std::process::id();
    let script = format!(
        "probe() {{ if sh -c \"$2\" >/dev/null 2>&1; then echo \"BREACH $1\" >&2; else echo \"denied $1\" >&2; fi; }}\n\
         grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status >&2\n\
         echo \"processes: $(ls -d /proc/[0-9]* | wc -l)\" >&2\n\
         echo \"first: [$(tr -d '\\0' < /proc/1/cmdline)]\" >&2\n\
         probe 'worker environment' 'cat /proc/{worker}/environ'\n\
         probe 'worker command line' 'cat /proc/{worker}/cmdline'\n\
         probe 'first process environment' 'tr -d \"\\0\" < /proc/1/environ | grep -q .'\n\
         probe 'first process memory' 'head -c 1 /proc/1/mem'\n\
         probe 'first process files' 'readlink /proc/1/fd/0'\n\
         echo '{RESULT}'"
    );
    fs::write(server.dirs.worktree.join("look.sh"), script).unwrap();
    let (result, log) = server.run("sh look.sh", SuiteBoundary::default());
    assert!(result.is_ok(), "{log}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status_field(&log, set), "0000000000000000", "{set}: {log}");
    }
    assert_eq!(status_field(&log, "NoNewPrivs"), "1", "{log}");
    assert!(!log.contains("BREACH"), "{log}");
    // The namespace's first process, sh, and the few commands of the pipeline.
    let processes: usize = status_field(&log, "processes").parse().unwrap();
    assert!(processes <= 6, "{processes} processes in sight: {log}");
    assert!(
        log.contains("first: []"),
        "the first process shows nothing of the worker: {log}"
    );
    // Without the network too: one unshare makes every namespace.
    let (result, log) = server.run("sh look.sh", limited(|b| b.network = false));
    assert!(result.is_ok(), "{log}");
    assert_eq!(status_field(&log, "CapEff"), "0000000000000000", "{log}");
}

#[test]
fn the_exit_of_a_command_in_its_namespace_is_the_exit_the_worker_sees() {
    let server = Server::new();
    let (result, log) = server.run("exit 7", SuiteBoundary::default());
    let message = failure(result);
    assert!(message.contains("exited with status 7"), "{message}\n{log}");
    let (result, log) = server.run("kill -SEGV $$", SuiteBoundary::default());
    let message = failure(result);
    assert!(
        message.contains(&format!("killed by signal {}", libc::SIGSEGV)),
        "{message}\n{log}"
    );
    // Background processes die with the command, whether or not they left its group.
    let marker = server.dirs.tmp.join("survivor");
    let run = format!(
        "setsid sh -c 'sleep 3; echo alive > {}' & echo '{RESULT}'",
        marker.display()
    );
    let (result, log) = server.run(&run, SuiteBoundary::default());
    assert!(result.is_ok(), "{log}");
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert!(!marker.exists(), "a process outlived its suite's namespace");
}

/// A worker whose admin set low ceilings, running suites whose kymo.toml asks for far more:
/// each limit is the worker's, the log says so, and a suite that uses it is stopped naming it.
#[test]
fn requests_above_the_maximums_are_held_to_them_and_said() {
    let maximums = MaximumSettings {
        memory: Some(96 << 20),
        disk: Some(16 << 20),
        processes: Some(48),
    };
    let server = Server::with_maximums(maximums);
    let greedy = |b: &mut SuiteBoundary| {
        b.memory = 1 << 40;
        b.disk = 1 << 40;
        b.processes = 32_768;
    };
    let (result, log) = server.run(&format!("echo '{RESULT}'"), limited(greedy));
    assert!(result.is_ok(), "{log}");
    for line in [
        "`memory` = 1TiB in kymo.toml is above this worker's maximum: the suite gets 96MiB",
        "`disk` = 1TiB in kymo.toml is above this worker's maximum: the suite gets 16MiB",
        "`processes` = 32768 in kymo.toml is above this worker's maximum: the suite gets 48",
    ] {
        assert!(log.contains(line), "{line}\n{log}");
    }

    // The disk watch counts every writer on the filesystem (other tests build crates
    // meanwhile), so the fork bomb and the memory hog run where the disk ceiling is roomy.
    let roomy = Server::with_maximums(MaximumSettings {
        disk: Some(8 << 30),
        ..maximums
    });
    let bomb = "b() { b & b & wait; }; b";
    let (result, log) = roomy.run(bomb, limited(greedy));
    let message = failure(result);
    assert!(
        message.contains("process limit of 48 (this worker's maximum, --max-suite-processes; kymo.toml asked for 32768)"),
        "{message}\n{log}"
    );
    let hog = "awk 'BEGIN { s = \"x\"; while (1) s = s s }'";
    let (result, log) = roomy.run(hog, limited(greedy));
    let message = failure(result);
    assert!(
        message.contains("memory limit of 96MiB") && message.contains("--max-suite-memory"),
        "{message}\n{log}"
    );
    let filler = "head -c 100000000 /dev/zero > big; echo wrote";
    let (result, log) = server.run(filler, limited(greedy));
    let message = failure(result);
    assert!(
        message.contains("disk limit of 16MiB") && message.contains("--max-suite-disk"),
        "{message}\n{log}"
    );
    // Below the ceilings, a suite's own limits are kept and nothing is said.
    let (result, log) = server.run(&format!("echo '{RESULT}'"), limited(|b| b.processes = 20));
    assert!(result.is_ok() && !log.contains("maximum"), "{log}");
}

/// A worker that is not root on a machine without user namespaces can make no namespace:
/// a suite without the network must not run with only Landlock's TCP rule, so its job fails
/// naming the step, and nothing of the suite runs. (As root this is skipped; the run as
/// `nobody` in `the_boundary_holds_for_a_worker_that_is_not_root` takes it.)
#[test]
fn a_boundary_that_cannot_be_made_fails_the_job_before_anything_runs() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return;
    }
    let mut server = Server::new();
    // What the probe finds where user namespaces are disabled.
    server.sandbox.namespaces = NamespaceMode::Unavailable;
    let marker = server.dirs.worktree.join("ran");
    let run = format!("touch '{}'; echo '{RESULT}'", marker.display());
    let (result, log) = server.run(&run, limited(|b| b.network = false));
    let message = failure(result);
    assert!(
        message.contains(
            "its boundary could not be set up (making its own PID, mount and network namespaces"
        ),
        "{message}\n{log}"
    );
    assert!(
        !marker.exists(),
        "the suite ran with less than its boundary"
    );
}
