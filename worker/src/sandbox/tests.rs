//! Hostile suites against the real boundary: each runs through [`run_suite`] exactly as a job
//! would, on this machine's kernel.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::maximums::MaximumSettings;
use super::settings::SuiteBoundary;
use super::{Sandbox, SandboxConfig, SuiteDirs};
use crate::config::{InstructionCounts, ResultFormat, Suite};
use crate::suite::{OutputLimits, SuiteContext, SuiteFailure, run_suite};
use kymo_core::protocol::SuiteUpload;

pub(super) const RESULT: &str = r#"{"benchmarks":[{"name":"b","metrics":[{"name":"t","unit":"ns","direction":"lower","value":1}]}]}"#;

/// A server's directory as `kymo serve` lays it out: database and admin token side by side,
/// the data directory with mirrors and two repositories' work trees.
pub(super) struct Server {
    _root: tempfile::TempDir,
    root: PathBuf,
    db: PathBuf,
    token: PathBuf,
    pub(super) data: PathBuf,
    pub(super) dirs: SuiteDirs,
    pub(super) sandbox: Sandbox,
}

impl Server {
    pub(super) fn new() -> Self {
        Self::with_maximums(MaximumSettings::default())
    }

    /// A server whose worker holds suites to the ceilings `maximums` sets.
    pub(super) fn with_maximums(maximums: MaximumSettings) -> Self {
        let root_dir = tempfile::tempdir().unwrap();
        let root = root_dir.path().canonicalize().unwrap();
        let db = root.join("kymo.db");
        let token = root.join("kymo.db.admin-token");
        let data = root.join("kymo-data");
        fs::write(&db, "SQLite format 3\0 webhook secrets").unwrap();
        fs::write(&token, "kymo_admin_secret").unwrap();
        fs::create_dir_all(data.join("mirrors/other/objects")).unwrap();
        fs::write(data.join("mirrors/other/HEAD"), "ref: refs/heads/main").unwrap();
        fs::create_dir_all(data.join("worktrees/other")).unwrap();
        fs::write(data.join("worktrees/other/secret.rs"), "other repo").unwrap();
        let dirs = SuiteDirs {
            worktree: data.join("worktrees/mine"),
            target: data.join("targets/mine"),
            home: data.join("homes/mine"),
            tmp: data.join("tmp/mine"),
        };
        for dir in [&dirs.worktree, &dirs.target, &dirs.home, &dirs.tmp] {
            fs::create_dir_all(dir).unwrap();
        }
        let sandbox = Sandbox::probe(
            SandboxConfig {
                protected: vec![db.clone(), token.clone()],
                allow_unconfined: false,
                maximums,
            },
            &data,
        );
        assert!(
            sandbox.is_confined(),
            "these tests need Landlock (ABI 3, Linux 6.2+): {}",
            sandbox.describe()
        );
        Self {
            _root: root_dir,
            root,
            db,
            token,
            data,
            dirs,
            sandbox,
        }
    }

    pub(super) fn run(
        &self,
        run: &str,
        boundary: SuiteBoundary,
    ) -> (Result<SuiteUpload, SuiteFailure>, String) {
        self.run_suite(&Suite {
            name: "s".into(),
            build: None,
            run: run.into(),
            format: ResultFormat::Kymo,
            repeat: 1,
            timeout: Duration::from_secs(60),
            boundary,
            instructions: InstructionCounts::Off,
            toolchain: None,
            cap_lints: None,
            concurrent: false,
        })
    }

    pub(super) fn run_suite(&self, suite: &Suite) -> (Result<SuiteUpload, SuiteFailure>, String) {
        let ctx = SuiteContext {
            dirs: &self.dirs,
            cache_dir: &self.data,
            commit: "0123456789abcdef0123456789abcdef01234567",
            sandbox: &self.sandbox,
            limits: OutputLimits::default(),
            cancel: &AtomicBool::new(false),
            progress: &|_| {},
            only_benchmarks: &[],
        };
        let mut log = String::new();
        let result = run_suite(&ctx, suite, &mut log);
        (result, log)
    }
}

pub(super) fn limited(f: impl FnOnce(&mut SuiteBoundary)) -> SuiteBoundary {
    let mut boundary = SuiteBoundary::default();
    f(&mut boundary);
    boundary
}

pub(super) fn failure(result: Result<SuiteUpload, SuiteFailure>) -> String {
    match result {
        Ok(_) => panic!("the suite should have failed"),
        Err(failure) => format!("{} | {}", failure.error, failure.log_tail),
    }
}

#[test]
fn a_prying_suite_succeeds_as_a_benchmark_and_fails_at_every_attempt() {
    let server = Server::new();
    let outside = server.root.join("pwned");
    let worker = std::process::id();
    let attempts = [
        ("admin token", format!("cat '{}'", server.token.display())),
        ("database", format!("cat '{}'", server.db.display())),
        (
            "database directory",
            format!("ls '{}'", server.root.display()),
        ),
        (
            "mirror",
            format!("cat '{}/mirrors/other/HEAD'", server.data.display()),
        ),
        (
            "other work tree",
            format!("cat '{}/worktrees/other/secret.rs'", server.data.display()),
        ),
        (
            "worker KYMO_ values",
            format!("tr '\\0' '\\n' < /proc/{worker}/environ | grep '^KYMO_[A-Z_]*=.'"),
        ),
        ("worker memory", format!("head -c 1 /proc/{worker}/mem")),
        ("worker open files", format!("ls -l /proc/{worker}/fd")),
        ("write outside", format!("echo x > '{}'", outside.display())),
        ("write /tmp", "echo x > /tmp/kymo-sandbox-escape-$$".into()),
        (
            "truncate the database",
            format!("truncate -s 0 '{}'", server.db.display()),
        ),
        ("signal the worker", format!("kill -CONT {worker}")),
    ];
    let mut script = String::from(
        "probe() { if sh -c \"$2\" >/dev/null 2>&1; then echo \"BREACH $1\" >&2; else echo \"denied $1\" >&2; fi; }\n",
    );
    for (name, command) in &attempts {
        script.push_str(&format!("probe '{name}' {:?}\n", command));
    }
    script.push_str("echo kept > own.txt && echo kept > \"$HOME/h\" && echo kept > \"$TMPDIR/t\" && echo kept > \"$CARGO_TARGET_DIR/c\" && echo 'own dirs writable' >&2\n");
    script.push_str("env | cut -d= -f1 | sort | tr '\\n' ' ' >&2; echo >&2\n");
    script.push_str(&format!("echo '{RESULT}'\n"));
    fs::write(server.dirs.worktree.join("bench.sh"), script).unwrap();

    let (result, log) = server.run("sh bench.sh", SuiteBoundary::default());
    assert!(result.is_ok(), "{log}");
    assert!(!log.contains("BREACH"), "{log}");
    for (name, _) in &attempts {
        assert!(log.contains(&format!("denied {name}")), "{name}: {log}");
    }
    assert!(log.contains("own dirs writable"), "{log}");
    assert!(!outside.exists());
    assert_eq!(
        fs::read_to_string(&server.db).unwrap().len(),
        32,
        "the database is intact"
    );
    // The worker's own `RUSTUP_TOOLCHAIN` (rustup sets it for what cargo runs, this test
    // too) is the default toolchain of suites that pin none.
    let toolchain = match std::env::var_os("RUSTUP_TOOLCHAIN") {
        Some(_) => " RUSTUP_TOOLCHAIN",
        None => "",
    };
    let names = format!(
        "CARGO_HOME CARGO_TARGET_DIR HOME KYMO_COMMIT LANG PATH PWD RUSTUP_HOME{toolchain} TMPDIR "
    );
    assert!(log.contains(&names), "only allow-listed variables: {log}");
}

#[test]
fn declared_variables_reach_the_suite_and_the_network_can_be_cut() {
    let server = Server::new();
    let script = format!(
        "echo \"var=$BENCH_SIZE\" >&2\n\
         if cat < /dev/null > /dev/tcp/127.0.0.1/1 2>/dev/null; then :; fi\n\
         ip -o link 2>/dev/null | grep -c UP >&2 || true\n\
         echo \"devices: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' ')\" >&2\n\
         echo '{RESULT}'"
    );
    fs::write(server.dirs.worktree.join("net.sh"), script).unwrap();
    let boundary = limited(|b| {
        b.network = false;
        b.env = vec![("BENCH_SIZE".into(), "large".into())];
    });
    let (result, log) = server.run("sh net.sh", boundary);
    assert!(result.is_ok(), "{log}");
    assert!(log.contains("var=large"), "{log}");
    // In a fresh network namespace only the loopback device exists.
    let devices = log
        .lines()
        .find_map(|l| l.strip_prefix("devices: "))
        .unwrap_or_default();
    assert_eq!(devices.trim(), "lo", "{log}");
    let (result, log) = server.run("sh net.sh", SuiteBoundary::default());
    assert!(result.is_ok(), "{log}");
    let devices = log
        .lines()
        .find_map(|l| l.strip_prefix("devices: "))
        .unwrap_or_default();
    assert!(
        devices.split_whitespace().count() > 1 && devices.contains("lo"),
        "the network is there by default: {log}"
    );
}

#[test]
fn kvm_is_the_one_device_opened_read_write_beyond_the_plain_ones() {
    let server = Server::new();
    let script = format!(
        "if ( exec 3<>/dev/kvm ) 2>/dev/null; then echo 'kvm opened' >&2; else echo 'kvm denied' >&2; fi\n\
         if ( exec 3<>/dev/kmsg ) 2>/dev/null; then echo 'BREACH kmsg' >&2; else echo 'kmsg denied' >&2; fi\n\
         if ( exec 3>/dev/kvm-not-a-device ) 2>/dev/null; then echo 'BREACH create' >&2; fi\n\
         echo '{RESULT}'"
    );
    fs::write(server.dirs.worktree.join("kvm.sh"), script).unwrap();
    let (result, log) = server.run("sh kvm.sh", SuiteBoundary::default());
    assert!(result.is_ok(), "{log}");
    assert!(
        log.contains("kmsg denied") && !log.contains("BREACH"),
        "{log}"
    );
    let usable_outside = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    if usable_outside {
        assert!(log.contains("kvm opened"), "{log}");
    } else {
        assert!(log.contains("kvm denied"), "{log}");
    }
}

#[test]
fn a_fork_bomb_fails_its_job_naming_the_process_limit() {
    let server = Server::new();
    let bomb = "b() { b & b & wait; }; b";
    let (result, log) = server.run(bomb, limited(|b| b.processes = 64));
    let message = failure(result);
    assert!(message.contains("process limit of 64"), "{message}\n{log}");
    let (result, log) = server.run(&format!("echo '{RESULT}'"), SuiteBoundary::default());
    assert!(result.is_ok(), "the next job runs: {log}");
}

#[test]
fn a_memory_hog_fails_its_job_naming_the_memory_limit() {
    let server = Server::new();
    let hog = "awk 'BEGIN { s = \"x\"; while (1) s = s s }'";
    let (result, log) = server.run(hog, limited(|b| b.memory = 64 << 20));
    let message = failure(result);
    assert!(
        message.contains("memory limit of 64MiB"),
        "{message}\n{log}"
    );
}

#[test]
fn a_disk_filler_fails_its_job_naming_the_disk_limit() {
    let server = Server::new();
    let one_file = "head -c 100000000 /dev/zero > big; echo wrote";
    let (result, log) = server.run(one_file, limited(|b| b.disk = 16 << 20));
    let message = failure(result);
    assert!(message.contains("disk limit of 16MiB"), "{message}\n{log}");
    let many_files = "i=0; while [ $i -lt 64 ]; do head -c 4000000 /dev/zero > f$i; sync f$i; i=$((i+1)); done; sleep 5";
    let (result, log) = server.run(many_files, limited(|b| b.disk = 16 << 20));
    let message = failure(result);
    assert!(message.contains("disk limit of 16MiB"), "{message}\n{log}");
    let written = fs::read_dir(&server.dirs.worktree).unwrap().count();
    assert!(
        written < 64,
        "stopped before writing everything ({written} files)"
    );
}

/// The paths a worker that is not root takes: `RLIMIT_NPROC` and `RLIMIT_DATA` in place of
/// cgroups it cannot make, and a network namespace inside a user namespace. Run as root, this
/// runs the hostile-suite tests above again as `nobody`, from a copy of this test binary that
/// `nobody` can reach (cargo may build it under root's home). Run as another user, those tests
/// take these paths already.
#[test]
fn the_boundary_holds_for_a_worker_that_is_not_root() {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return;
    }
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("setpriv (util-linux) runs the tests as nobody");
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("worker-tests");
    fs::copy(std::env::current_exe().unwrap(), &binary).unwrap();
    let tmp = dir.path().join("tmp");
    fs::create_dir(&tmp).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777)).unwrap();
    let output = std::process::Command::new(setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "env",
            "-i",
        ])
        .arg("PATH=/usr/local/bin:/usr/bin:/bin")
        .arg(format!("TMPDIR={}", tmp.display()))
        .arg(format!("HOME={}", tmp.display()))
        .arg(&binary)
        .args([
            "sandbox::tests::a_",
            "sandbox::tests::declared_variables",
            "sandbox::isolation_tests::",
        ])
        .args(["--test-threads", "1"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(report.contains("test result: ok. 9 passed"), "{report}");
}

/// Writes a crate into `dir`: its `Cargo.toml`, `src/lib.rs` and the benchmark `benches/NAME.rs`
/// of `bench` (name, source), for the tests that build real crates inside the boundary.
pub(super) fn write_bench_crate(dir: &Path, manifest: &str, lib: &str, bench: (&str, &str)) {
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::create_dir_all(dir.join("benches")).unwrap();
    fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    fs::write(dir.join("src/lib.rs"), lib).unwrap();
    fs::write(dir.join(format!("benches/{}.rs", bench.0)), bench.1).unwrap();
}
