//! Not a check but a measurement: what the boundary costs the benchmarks it runs, one factor
//! at a time. `scripts/sandbox-overhead.sh` builds `kymo-kernels` and runs it:
//!
//! ```text
//! KYMO_KERNELS=target/release/kymo-kernels KYMO_ROUNDS=7 \
//!     cargo test -p kymo-worker --lib kernel_overhead -- --ignored --nocapture
//! ```
//!
//! Each round runs `kymo-kernels --quick --json` once in every mode, in an order rotated per
//! round (so no mode always follows another), through the same [`run_command`] a job uses.
//! The table gives, per kernel, the median over rounds of the outside time, and each mode's
//! median over rounds of its ratio to the outside run of the same round.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::time::Duration;

use super::ChildSetup;
use super::settings::SuiteBoundary;
use super::tests::Server;
use crate::exec::{CommandSpec, run_command};

/// One way of running the kernels: outside, inside, or inside with one factor only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The worker's own environment, no setup in the child.
    Outside,
    /// The allow-listed environment (own HOME, TMPDIR...), no setup in the child.
    Environment,
    /// The child setup with nothing in it: capabilities dropped, no core files.
    Capabilities,
    /// RLIMIT_NPROC, RLIMIT_DATA and RLIMIT_FSIZE, as where no cgroup can be made.
    Rlimits,
    /// The suite's cgroups (pids, memory) only.
    Cgroups,
    /// The Landlock ruleset only.
    Landlock,
    /// Everything a job applies.
    Inside,
}

const MODES: [Mode; 7] = [
    Mode::Outside,
    Mode::Environment,
    Mode::Capabilities,
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
        network: true,
    };
    match mode {
        Mode::Outside | Mode::Environment => None,
        Mode::Capabilities => Some(nothing),
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

/// Time per benchmark (median of its samples, in its unit), keyed by name and parameters.
fn times(json: &[u8]) -> BTreeMap<String, f64> {
    let doc: serde_json::Value = serde_json::from_slice(json).expect("kymo JSON");
    let mut times = BTreeMap::new();
    for bench in doc["benchmarks"].as_array().into_iter().flatten() {
        let Some(time) = bench["metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["name"] == "time")
        else {
            continue;
        };
        let mut values: Vec<f64> = match time["samples"].as_array() {
            Some(samples) => samples.iter().filter_map(|v| v.as_f64()).collect(),
            None => time["value"].as_f64().into_iter().collect(),
        };
        if values.is_empty() {
            continue;
        }
        let params = &bench["params"];
        let key = match params.as_object().filter(|p| !p.is_empty()) {
            Some(_) => format!("{} {params}", bench["name"].as_str().unwrap_or("?")),
            None => bench["name"].as_str().unwrap_or("?").to_owned(),
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

#[test]
#[ignore = "a measurement, run by hand (scripts/sandbox-overhead.sh)"]
fn kernel_overhead() {
    let kernels = std::env::var_os("KYMO_KERNELS").expect("set KYMO_KERNELS");
    let rounds: usize = std::env::var("KYMO_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let server = Server::new();
    fs::copy(kernels, server.dirs.worktree.join("kymo-kernels")).unwrap();
    let boundary = SuiteBoundary::default();
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let confined_env = server.sandbox.environment(&server.dirs, commit, &boundary);
    // time[kernel][mode] = one median per round
    let mut time: BTreeMap<String, BTreeMap<usize, Vec<f64>>> = BTreeMap::new();
    for round in 0..rounds {
        for step in 0..MODES.len() {
            let mode_index = (step + round) % MODES.len();
            let mode = MODES[mode_index];
            let prepared = server
                .sandbox
                .prepare(&server.dirs, &server.data, &boundary)
                .unwrap();
            let setup = setup_for(mode, prepared.child_setup(), &boundary);
            let outside = mode == Mode::Outside;
            let outcome = run_command(&CommandSpec {
                command: "./kymo-kernels --quick --json",
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
            for (kernel, t) in times(&outcome.stdout) {
                time.entry(kernel)
                    .or_default()
                    .entry(mode_index)
                    .or_default()
                    .push(t);
            }
            eprintln!("round {} of {rounds}: {mode:?} done", round + 1);
        }
    }
    let mut table = String::from("| kernel | outside (median) |");
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
