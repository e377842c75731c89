//! Real cargo builds inside the real boundary, with a dependency from crates.io: downloaded once
//! into the repository's own cargo home and kept; fetched by the worker first for a suite
//! without the network; never reaching the worker's own cargo home.

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::settings::SuiteBoundary;
use super::tests::{RESULT, Server, write_bench_crate};
use crate::config::{InstructionCounts, ResultFormat, Suite};

/// A library whose benchmark (its own harness) uses `itoa`, a small crates.io dev-dependency.
/// Its stderr line is one write, so it cannot interleave with stdout in the log.
fn write_crate(dir: &Path) {
    let bench = format!(
        "fn main() {{ let mut b = itoa::Buffer::new(); \
         let line = format!(\"sum {{}}\\n\", b.format(tiny::work(1000))); \
         std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes()).unwrap(); println!(\"{{}}\", r#\"{RESULT}\"#); }}\n"
    );
    write_bench_crate(
        dir,
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dev-dependencies]\nitoa = \"1\"\n\n[[bench]]\nname = \"speed\"\nharness = false\n",
        "pub fn work(n: u64) -> u64 { (0..n).sum() }\n",
        ("speed", &bench),
    );
}

/// `cargo bench` as the README's suites run it: build, then run with the bench profile.
fn cargo_suite(boundary: SuiteBoundary) -> Suite {
    Suite {
        name: "tiny".into(),
        build: Some("cargo bench --bench speed --no-run".into()),
        run: "cargo bench --bench speed".into(),
        format: ResultFormat::Kymo,
        repeat: 1,
        timeout: Duration::from_secs(300),
        boundary,
        instructions: InstructionCounts::Off,
        toolchain: None,
        cap_lints: None,
        concurrent: false,
    }
}

fn downloaded_crates(cargo_home: &Path) -> Vec<String> {
    let cache = cargo_home.join("registry/cache");
    let mut names: Vec<String> = fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|index| fs::read_dir(index.path()).into_iter().flatten().flatten())
        .map(|file| file.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_crates_io_dev_dependency_is_downloaded_once_into_the_repositorys_cargo_home() {
    let server = Server::new();
    write_crate(&server.dirs.worktree);
    let suite = cargo_suite(SuiteBoundary::default());
    let (result, log) = server.run_suite(&suite);
    assert!(result.is_ok(), "{log}");
    assert!(log.contains("sum 499500"), "the benchmark ran: {log}");
    let cargo_home = server.dirs.cargo_home();
    let crates = downloaded_crates(&cargo_home);
    assert!(
        crates.iter().any(|c| c.starts_with("itoa-1.")),
        "{crates:?}"
    );
    // The next commit builds from what the first one downloaded.
    fs::write(
        server.dirs.worktree.join("src/lib.rs"),
        "pub fn work(n: u64) -> u64 { n * (n - 1) / 2 }\n",
    )
    .unwrap();
    let (result, log) = server.run_suite(&suite);
    assert!(result.is_ok(), "{log}");
    assert!(!log.contains("Downloaded"), "downloaded again: {log}");
    assert_eq!(downloaded_crates(&cargo_home), crates);
}

/// Without the network, the worker fetches first (with it, outside the work tree, so the
/// commit's `.cargo/config.toml` is not read) and the suite builds offline. The commit's
/// `rustc-wrapper` runs in the build, without the network, and never in the fetch.
#[test]
fn without_the_network_a_suite_builds_from_what_the_worker_fetched_first() {
    let server = Server::new();
    let tree = &server.dirs.worktree;
    write_crate(tree);
    fs::create_dir_all(tree.join(".cargo")).unwrap();
    fs::write(
        tree.join(".cargo/config.toml"),
        "[build]\nrustc-wrapper = \"./wrapper.sh\"\n",
    )
    .unwrap();
    // Records how many network interfaces the wrapper's process sees: 1 (loopback) in the
    // suite's own network namespace, more wherever it had the machine's network.
    fs::write(
        tree.join("wrapper.sh"),
        format!(
            "#!/bin/sh\ngrep -c : /proc/net/dev >> '{}/interfaces'\nexec \"$@\"\n",
            tree.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(tree.join("wrapper.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let offline = SuiteBoundary {
        network: false,
        ..SuiteBoundary::default()
    };
    let (result, log) = server.run_suite(&cargo_suite(offline));
    assert!(result.is_ok(), "{log}");
    assert!(log.contains("dependency fetch"), "{log}");
    assert!(log.contains("sum 499500"), "{log}");
    let crates = downloaded_crates(&server.dirs.cargo_home());
    assert!(
        crates.iter().any(|c| c.starts_with("itoa-1.")),
        "{crates:?}"
    );
    let seen = fs::read_to_string(tree.join("interfaces")).unwrap();
    assert!(
        !seen.is_empty() && seen.lines().all(|count| count == "1"),
        "the commit's wrapper ran with the network: {seen:?}\n{log}"
    );
}

/// A crate that is not fetched cannot be downloaded by the suite itself: cargo is offline, and
/// says so.
#[test]
fn without_the_network_cargo_does_not_try_to_download() {
    let server = Server::new();
    write_crate(&server.dirs.worktree);
    let offline = SuiteBoundary {
        network: false,
        ..SuiteBoundary::default()
    };
    let mut suite = cargo_suite(offline);
    // A second manifest beside the fetched one, whose dependency nobody fetched.
    let other = server.dirs.worktree.join("other");
    fs::create_dir_all(other.join("src")).unwrap();
    fs::write(
        other.join("Cargo.toml"),
        "[package]\nname = \"other\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [workspace]\n\n[dependencies]\nryu = \"1\"\n",
    )
    .unwrap();
    fs::write(other.join("src/lib.rs"), "").unwrap();
    suite.build = Some("cd other && cargo build".into());
    let (result, log) = server.run_suite(&suite);
    let failure = result.expect_err("built without its dependency");
    assert!(
        failure.log_tail.contains("offline") && failure.log_tail.contains("ryu"),
        "{}\n{log}",
        failure.log_tail
    );
}

/// Suites get the worker's `cargo` and installed subcommands (its cargo home's `bin`), never
/// its registry, configuration or credentials.
#[test]
fn the_workers_own_cargo_home_is_out_of_reach_but_its_programs_run() {
    let mut server = Server::new();
    let worker_home = tempfile::tempdir().unwrap();
    let cargo_home = worker_home.path().join("cargo");
    fs::create_dir_all(cargo_home.join("bin")).unwrap();
    fs::write(
        cargo_home.join("credentials.toml"),
        "[registry]\ntoken = \"cio_secret\"\n",
    )
    .unwrap();
    fs::write(
        cargo_home.join("bin/cargo-hello"),
        "#!/bin/sh\necho hello\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(
        cargo_home.join("bin/cargo-hello"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    server.sandbox.cargo_home = cargo_home.clone();
    let run = format!(
        "'{bin}/cargo-hello' >&2 && if cat '{home}/credentials.toml'; then exit 1; fi; \
         echo '{RESULT}'",
        bin = cargo_home.join("bin").display(),
        home = cargo_home.display()
    );
    let mut suite = cargo_suite(SuiteBoundary::default());
    suite.build = None;
    suite.run = run;
    let (result, log) = server.run_suite(&suite);
    assert!(result.is_ok(), "{log}");
    assert!(log.contains("hello"), "{log}");
    assert!(!log.contains("cio_secret"), "{log}");
}
