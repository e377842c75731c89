//! Not a check but a measurement: what the boundary costs the benchmarks it runs, one factor
//! at a time. `scripts/sandbox-overhead.sh` builds `kymo-kernels` and runs it:
//!
//! ```text
//! KYMO_KERNELS=target/release/kymo-kernels KYMO_ROUNDS=7 [KYMO_KERNELS_ARGS='--filter udp'] \
//!     cargo test -p kymo-worker --lib kernel_overhead -- --ignored --nocapture
//! ```
//!
//! Each round runs `kymo-kernels --quick --json` once in every mode, in an order rotated per
//! round (so no mode always follows another), through the same [`run_command`] a job uses.
//! The table gives, per kernel, the median over rounds of the outside time (per million units,
//! for a throughput), and each mode's median over rounds of its ratio to the outside run of the same
//! round: above 1 is slower than outside.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::time::Duration;

use super::ChildSetup;
use super::namespaces::{NamespaceMode, Namespaces};
use super::settings::SuiteBoundary;
use super::tests::Server;
use crate::exec::{CommandSpec, run_command};

/// One way of running the kernels: outside, inside, or inside with one factor only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The worker's own environment, no setup in the child, through [`run_command`].
    Outside,
    /// As `Outside`, spawned by `std::process::Command` instead, its output read at the end.
    Direct,
    /// The allow-listed environment (own HOME, TMPDIR...), no setup in the child.
    Environment,
    /// The child setup with nothing in it: capabilities dropped, no core files.
    Capabilities,
    /// Its own PID and mount namespaces and `/proc` (and the two processes that hold them).
    Namespaces,
    /// RLIMIT_NPROC, RLIMIT_DATA and RLIMIT_FSIZE, as where no cgroup can be made.
    Rlimits,
    /// The suite's cgroups (pids, memory) only.
    Cgroups,
    /// The Landlock ruleset only.
    Landlock,
    /// Everything a job applies.
    Inside,
}

const MODES: [Mode; 9] = [
    Mode::Outside,
    Mode::Direct,
    Mode::Environment,
    Mode::Capabilities,
    Mode::Namespaces,
    Mode::Rlimits,
    Mode::Cgroups,
    Mode::Landlock,
    Mode::Inside,
];

/// The parts of the full setup that `mode` keeps; `None` for no setup at all.
fn setup_for(mode: Mode, full: &ChildSetup, boundary: &SuiteBoundary) -> Option<ChildSetup> {
    let nothing = ChildSetup {
        ruleset: None,
        cgroup_procs: Vec::new(),
        processes: None,
        memory: None,
        disk: libc::RLIM_INFINITY,
        namespaces: Namespaces::new(NamespaceMode::Unavailable, true),
        report: full.report.clone(),
    };
    match mode {
        Mode::Outside | Mode::Direct | Mode::Environment => None,
        Mode::Capabilities => Some(nothing),
        Mode::Namespaces => Some(ChildSetup {
            namespaces: full.namespaces.clone(),
            ..nothing
        }),
        Mode::Rlimits => Some(ChildSetup {
            processes: Some(boundary.processes),
            memory: Some(boundary.memory),
            disk: boundary.disk,
            ..nothing
        }),
        Mode::Cgroups => Some(ChildSetup {
            cgroup_procs: full.cgroup_procs.clone(),
            ..nothing
        }),
        Mode::Landlock => Some(ChildSetup {
            ruleset: full.ruleset,
            ..nothing
        }),
        Mode::Inside => Some(full.clone()),
    }
}

/// Time per benchmark, keyed by name, parameters and metric: the median of the samples of
/// its first sampled metric (time, or throughput turned into time per million units, so that
/// above 1 is slower for every row). Benchmarks without samples (deterministic simulations) are left
/// out.
fn times(json: &[u8]) -> BTreeMap<String, f64> {
    let doc: serde_json::Value = serde_json::from_slice(json).expect("kymo JSON");
    let mut times = BTreeMap::new();
    for bench in doc["benchmarks"].as_array().into_iter().flatten() {
        let Some(metric) = bench["metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["samples"].is_array())
        else {
            continue;
        };
        let higher = metric["direction"] == "higher";
        let mut values: Vec<f64> = metric["samples"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_f64())
            .map(|v| if higher { 1e6 / v } else { v })
            .collect();
        if values.is_empty() {
            continue;
        }
        let params = &bench["params"];
        let name = bench["name"].as_str().unwrap_or("?");
        let metric = metric["name"].as_str().unwrap_or("?");
        let key = match params.as_object().filter(|p| !p.is_empty()) {
            Some(_) => format!("{name} {params} ({metric})"),
            None => format!("{name} ({metric})"),
        };
        times.insert(key, median(&mut values));
    }
    times
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// `time[kernel][mode]`: one median per round.
type Times = BTreeMap<String, BTreeMap<usize, Vec<f64>>>;

fn record(time: &mut Times, mode_index: usize, json: &[u8]) {
    for (kernel, t) in times(json) {
        time.entry(kernel)
            .or_default()
            .entry(mode_index)
            .or_default()
            .push(t);
    }
}

#[test]
#[ignore = "a measurement, run by hand (scripts/sandbox-overhead.sh)"]
fn kernel_overhead() {
    let kernels = std::env::var_os("KYMO_KERNELS").expect("set KYMO_KERNELS");
    let rounds: usize = std::env::var("KYMO_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    // Extra arguments, such as `--filter ring/write_path`, to look closer at a few kernels.
    let extra = std::env::var("KYMO_KERNELS_ARGS").unwrap_or_default();
    let command = format!("./kymo-kernels --quick --json {extra}");
    let server = Server::new();
    fs::copy(kernels, server.dirs.worktree.join("kymo-kernels")).unwrap();
    let boundary = SuiteBoundary::default();
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let confined_env = server.sandbox.environment(&server.dirs, commit, &boundary);
    let mut time = Times::new();
    for round in 0..rounds {
        for step in 0..MODES.len() {
            let mode_index = (step + round) % MODES.len();
            let mode = MODES[mode_index];
            let prepared = server
                .sandbox
                .prepare(&server.dirs, &server.data, &boundary)
                .unwrap();
            let setup = setup_for(mode, prepared.child_setup(), &boundary);
            let outside = matches!(mode, Mode::Outside | Mode::Direct);
            if mode == Mode::Direct {
                let output = std::process::Command::new("sh")
                    .args(["-c", &command])
                    .current_dir(&server.dirs.worktree)
                    .stderr(std::process::Stdio::null())
                    .output()
                    .unwrap();
                assert!(output.status.success(), "{mode:?}");
                record(&mut time, mode_index, &output.stdout);
                continue;
            }
            let outcome = run_command(&CommandSpec {
                command: &command,
                cwd: &server.dirs.worktree,
                env: if outside { &[] } else { &confined_env },
                clear_env: !outside,
                child_setup: setup.as_ref(),
                watch: None,
                timeout: Duration::from_secs(600),
                stdout_cap: 64 << 20,
                log_cap: 16 << 10,
            })
            .unwrap();
            assert!(outcome.exit.is_success(), "{mode:?}: {}", outcome.log_tail);
            record(&mut time, mode_index, &outcome.stdout);
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }
    let mut table = String::from("| kernel (metric) | outside, median |");
    for mode in &MODES[1..] {
        write!(table, " {mode:?} / outside |").unwrap();
    }
    table.push_str("\n|---|---:|");
    table.push_str(&"---:|".repeat(MODES.len() - 1));
    table.push('\n');
    for (kernel, by_mode) in &time {
        let Some(outside) = by_mode.get(&0) else {
            continue;
        };
        write!(table, "| {kernel} | {:.1} |", median(&mut outside.clone())).unwrap();
        for index in 1..MODES.len() {
            let mut ratios: Vec<f64> = by_mode
                .get(&index)
                .into_iter()
                .flatten()
                .zip(outside)
                .map(|(t, o)| t / o)
                .collect();
            if ratios.is_empty() {
                table.push_str(" - |");
            } else {
                write!(table, " {:.3} |", median(&mut ratios)).unwrap();
            }
        }
        table.push('\n');
    }
    println!("{rounds} rounds\n{table}");
}

/// What starting one command in its own namespaces costs (a fork and a `/proc` mount more than
/// without): `true` run `KYMO_ROUNDS` times (default 101) in each of the capabilities-only,
/// namespaces-only and full setups, interleaved; prints each mode's median wall time.
///
/// ```text
/// KYMO_ROUNDS=201 cargo test -p kymo-worker --lib command_start_cost -- --ignored --nocapture
/// ```
#[test]
#[ignore = "a measurement, run by hand"]
fn command_start_cost() {
    let rounds: usize = std::env::var("KYMO_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(101);
    let server = Server::new();
    let boundary = SuiteBoundary::default();
    let modes = [Mode::Capabilities, Mode::Namespaces, Mode::Inside];
    let mut took: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..rounds {
        for step in 0..modes.len() {
            let index = (step + round) % modes.len();
            let prepared = (server.sandbox)
                .prepare(&server.dirs, &server.data, &boundary)
                .unwrap();
            let setup = setup_for(modes[index], prepared.child_setup(), &boundary);
            let outcome = run_command(&CommandSpec {
                command: "true",
                cwd: &server.dirs.worktree,
                env: &[],
                clear_env: true,
                child_setup: setup.as_ref(),
                watch: None,
                timeout: Duration::from_secs(60),
                stdout_cap: 1 << 20,
                log_cap: 4 << 10,
            })
            .unwrap();
            assert!(outcome.exit.is_success(), "{:?}", modes[index]);
            took[index].push(outcome.duration.as_secs_f64() * 1e3);
        }
    }
    for (mode, times) in modes.iter().zip(&mut took) {
        eprintln!(
            "{mode:?}: median {:.2} ms over {rounds} commands",
            median(times)
        );
    }
}
