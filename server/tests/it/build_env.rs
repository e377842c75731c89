//! What a real crate's build needs before its suite's boundary closes, with `kymo serve`'s
//! embedded worker: crates.io dependencies downloaded once per repository (fetched first by
//! the worker when the repository runs without the network), and each commit built with the
//! toolchain it pins.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::{KymoServer, TestRepo, assert_ok};

/// A library whose benchmark (its own harness, printing kymo JSON) uses `itoa`, a small
/// crates.io dev-dependency. `body` is the library's code.
fn crate_files(body: &str) -> Vec<(&'static str, String)> {
    let manifest = "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                    [dev-dependencies]\nitoa = \"1\"\n\n[[bench]]\nname = \"speed\"\nharness = false\n";
    let bench = r#"fn main() {
    let mut buffer = itoa::Buffer::new();
    let start = std::time::Instant::now();
    let sum = tiny::work(std::hint::black_box(100_000));
    let ns = start.elapsed().as_nanos() as u64 + 1;
    // One write, so that stdout cannot land inside the line in the job's log.
    let line = format!("sum {}\n", buffer.format(sum));
    std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes()).unwrap();
    println!("{{\"benchmarks\":[{{\"name\":\"sum\",\"metrics\":[{{\"name\":\"time\",\"unit\":\"ns\",\"direction\":\"lower\",\"value\":{ns}}}]}}]}}");
}
"#;
    vec![
        ("Cargo.toml", manifest.to_owned()),
        ("src/lib.rs", body.to_owned()),
        ("benches/speed.rs", bench.to_owned()),
    ]
}

/// The README's plain `cargo bench` suite.
fn cargo_bench_suite(extra: &str) -> String {
    format!(
        "[[suite]]\nname = \"speed\"\nbuild = \"cargo bench --bench speed --no-run\"\n\
         run = \"cargo bench --bench speed\"\nformat = \"kymo\"\ntimeout = \"5m\"\n{extra}"
    )
}

fn commit(repo: &TestRepo, files: &[(&str, String)], message: &str) -> String {
    let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (*n, c.as_str())).collect();
    repo.commit(&files, message)
}

/// Deletes `gone` from the work tree and the index, then commits `files` with it.
fn commit_without(repo: &TestRepo, gone: &str, files: &[(&str, String)], message: &str) -> String {
    std::fs::remove_file(repo.path().join(gone)).unwrap();
    let git = git2::Repository::open(repo.path()).unwrap();
    let mut index = git.index().unwrap();
    index.remove_path(std::path::Path::new(gone)).unwrap();
    index.write().unwrap();
    commit(repo, files, message)
}

fn job_of<'a>(jobs: &'a [Value], repository: &str, sha: &str) -> &'a Value {
    jobs.iter()
        .find(|j| j["repository"] == repository && j["sha"] == sha && j["reason"] != "confirm")
        .unwrap_or_else(|| panic!("no job for {repository} {sha}: {jobs:#?}"))
}

const SUM: &str = "pub fn work(n: u64) -> u64 { (0..n).sum() }\n";

#[test]
fn a_suite_with_crates_io_dev_dependencies_builds_with_and_without_the_network() {
    let online = TestRepo::new();
    let mut files = crate_files(SUM);
    files.push(("kymo.toml", cargo_bench_suite("")));
    let first = commit(&online, &files, "a crate with a dev-dependency");
    let closed_form = "pub fn work(n: u64) -> u64 { n * (n - 1) / 2 }\n";
    let second = commit(
        &online,
        &[("src/lib.rs", closed_form.to_owned())],
        "closed form",
    );
    let offline = TestRepo::new();
    let only = commit(&offline, &files, "the same crate");

    let server = KymoServer::start(&[]);
    let path = |repo: &TestRepo| repo.path().to_str().unwrap().to_owned();
    assert_ok(&server.kymo(&["repo", "add", "online", &path(&online)]));
    let network_off = [
        "repo",
        "add",
        "offline",
        &path(&offline),
        "--network",
        "off",
    ];
    assert_ok(&server.kymo(&network_off));
    assert_ok(&server.kymo(&["run", "online", "--last", "2"]));
    assert_ok(&server.kymo(&["run", "offline"]));
    let jobs = server.wait_for_jobs(3, Duration::from_secs(600));

    let log = |repository, sha| {
        let job = job_of(&jobs, repository, sha);
        assert_eq!(job["state"], "succeeded", "{job:#}");
        job["log_tail"].as_str().unwrap().to_owned()
    };
    // The commit measured first downloads, the other reuses what it downloaded.
    let (mut downloaded, mut reused) = (log("online", &second), log("online", &first));
    if !downloaded.contains("Downloaded") {
        std::mem::swap(&mut downloaded, &mut reused);
    }
    assert!(downloaded.contains("Downloaded itoa"), "{downloaded}");
    assert!(!reused.contains("Downloaded"), "downloaded again: {reused}");
    assert!(reused.contains("sum 4999950000"), "{reused}");
    let fetched = log("offline", &only);
    assert!(
        fetched.contains("dependency fetch") && fetched.contains("Downloaded itoa"),
        "{fetched}"
    );
    assert!(fetched.contains("sum 4999950000"), "{fetched}");
    let results = server.get_json(&format!("/api/v1/repos/offline/commits/{only}"));
    assert_eq!(results["results"][0]["benchmark"], "sum", "{results:#}");
    // Each repository downloaded into its own cargo home, in the server's data directory.
    for repository in ["online", "offline"] {
        let cache = server
            .dir
            .path()
            .join("kymo-data/homes")
            .join(format!("{repository}.git/.cargo/registry/cache"));
        let crates: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .flatten()
            .flat_map(|index| std::fs::read_dir(index.path()).unwrap().flatten())
            .map(|f| f.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            crates.iter().any(|c| c.starts_with("itoa-1.")),
            "{repository}: {crates:?}"
        );
    }
}

/// `rustc --version` of an installed toolchain.
fn rustc_version(toolchain: &str) -> String {
    let output = Command::new("rustup")
        .args(["run", toolchain, "rustc", "--version"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "rustup run {toolchain} rustc: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Code of the past: `f32::from(1.0)` falls back to `f32` for its literal, which today's
/// nightly warns about (`float_literal_f32_fallback`) and stable 1.95 accepts silently; the
/// crate's own `#![deny(warnings)]` makes the warning fatal.
const OLD_CODE: &str = "#![deny(warnings)]\n\
    pub fn work(n: u64) -> u64 { let scale = f32::from(1.0); (0..n).sum::<u64>() * scale as u64 }\n";
const FIXED_CODE: &str = "#![deny(warnings)]\n\
    pub fn work(n: u64) -> u64 { let scale = 1.0_f32; (0..n).sum::<u64>() * scale as u64 }\n";

/// The worker's default toolchain is nightly ("today's compiler"); old commits pin stable
/// 1.95.0 with a `rust-toolchain.toml` (stored suites) or a suite's `toolchain` key (their
/// own `kymo.toml`), or cap lints; the newest build with the default. A commit pinning a
/// toolchain that cannot be installed fails, saying which and why.
#[test]
fn old_commits_build_with_the_toolchain_they_pin() {
    let (stable, nightly) = (rustc_version("1.95.0"), rustc_version("nightly"));
    assert_ne!(stable, nightly);
    let repo = TestRepo::new();
    let pin_file = || {
        (
            "rust-toolchain.toml",
            "[toolchain]\nchannel = \"1.95.0\"\n".to_owned(),
        )
    };
    let with = |body: &str, extra: Vec<(&'static str, String)>| {
        let mut files = crate_files(body);
        files.extend(extra);
        files
    };
    let unpinned = commit(&repo, &with(OLD_CODE, vec![]), "old code, nothing pinned");
    let by_file = commit(&repo, &with(OLD_CODE, vec![pin_file()]), "pin 1.95.0");
    let key = vec![("kymo.toml", cargo_bench_suite("toolchain = \"stable\"\n"))];
    let by_key = commit_without(&repo, "rust-toolchain.toml", &key, "pin in kymo.toml");
    let capped = cargo_bench_suite("cap_lints = \"warn\"\n");
    let by_cap = commit(&repo, &[("kymo.toml", capped)], "cap lints instead");
    let fix = with(FIXED_CODE, vec![]);
    let fixed = commit_without(&repo, "kymo.toml", &fix, "fix the literal");
    let newest = commit(&repo, &[("README", "fixed".to_owned())], "docs");
    let missing = "[toolchain]\nchannel = \"1.60.0\"\n".to_owned();
    let uninstallable = commit(&repo, &[("rust-toolchain.toml", missing)], "pin 1.60.0");

    // rustup's download server is a closed local port: nothing is installed from outside, and
    // a toolchain that is not here cannot be installed.
    let server = KymoServer::start_with(&[], |command| {
        command
            .env("RUSTUP_TOOLCHAIN", "nightly")
            .env("RUSTUP_DIST_SERVER", "http://127.0.0.1:9");
    });
    let suites = server.dir.path().join("suites.toml");
    std::fs::write(&suites, cargo_bench_suite("")).unwrap();
    let path = repo.path().to_str().unwrap();
    let args = [
        "repo",
        "add",
        "r",
        path,
        "--suites",
        suites.to_str().unwrap(),
    ];
    assert_ok(&server.kymo(&args));
    // Nothing here is about confirming changes: every job is one commit's build.
    assert_ok(&server.kymo(&["repo", "set", "r", "--confirm", "off"]));
    assert_ok(&server.kymo(&["run", "r", "--last", "7"]));
    let jobs = server.wait_for_jobs(7, Duration::from_secs(900));

    let job = |sha: &str| job_of(&jobs, "r", sha);
    let failed = job(&unpinned);
    assert_eq!(failed["state"], "failed", "{failed:#}");
    let log = failed["log_tail"].as_str().unwrap();
    assert!(log.contains("float_literal_f32_fallback"), "{log}");
    let measured = [
        (&by_file, &stable),
        (&by_key, &stable),
        (&by_cap, &nightly),
        (&fixed, &nightly),
        (&newest, &nightly),
    ];
    for (sha, toolchain) in measured {
        assert_eq!(job(sha)["state"], "succeeded", "{:#}", job(sha));
        let commit = server.get_json(&format!("/api/v1/repos/r/commits/{sha}"));
        assert_eq!(
            &commit["runs"][0]["toolchain"],
            toolchain.as_str(),
            "{commit:#}"
        );
        assert_eq!(commit["results"][0]["benchmark"], "sum", "{commit:#}");
    }
    let error = job(&uninstallable)["error"].as_str().unwrap().to_owned();
    for said in [
        "\"1.60.0\"",
        "rust-toolchain.toml",
        "rustup could not install it",
    ] {
        assert!(error.contains(said), "{said:?} missing: {error}");
    }

    // The trend marks where the compiler changed, between the key's commit and the capped one.
    let (status, page) = server.get("/repos/r/benchmarks/sum");
    assert_eq!(status, 200);
    let change = format!("toolchain {stable} → {nightly}");
    assert!(page.contains(&change), "{change:?} is not on the page");
}
