//! Running one commit's suites: build, run with repeats, parse, merge repeats into samples.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use kymo_core::format::{FormatName, parse_criterion_dir, parse_output};
use kymo_core::protocol::{BENCH_FILTER_ENV, ONLY_BENCHMARKS_ENV, SuiteUpload, bench_filter};
use kymo_core::results::{SuiteResults, median};

use crate::build_env::{BuildSettings, apply_build_settings, set_variable};
use crate::config::{InstructionCounts, Suite};
use crate::exec::{CommandOutcome, CommandSpec, ExitKind, run_command};
use crate::instructions::criterion::{attach, counting_command, read_counts, runner_script};
use crate::instructions::{command_result, total_instructions, under_callgrind};
use crate::sandbox::settings::SuiteBoundary;
use crate::sandbox::{Sandbox, Stage, SuiteDirs};

/// Limits on what a benchmark command may print.
#[derive(Debug, Clone, Copy)]
pub struct OutputLimits {
    pub stdout_cap: usize,
    pub log_cap: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self {
            stdout_cap: 32 * 1024 * 1024,
            log_cap: 16 * 1024,
        }
    }
}

/// Why a suite failed, with the log tail of the step that failed.
#[derive(Debug)]
pub struct SuiteFailure {
    pub error: String,
    pub log_tail: String,
}

/// Where and how a suite runs.
pub struct SuiteContext<'a> {
    /// The work tree, the cargo target directory (criterion writes there), home and temp.
    pub dirs: &'a SuiteDirs,
    /// The worker's cache: mirrors and every repository's directories, out of the suite's reach.
    pub cache_dir: &'a Path,
    pub commit: &'a str,
    pub sandbox: &'a Sandbox,
    pub limits: OutputLimits,
    /// Set when the job is cancelled: the running command is killed.
    pub cancel: &'a AtomicBool,
    /// Told what the suite is doing, for the queue page.
    pub progress: &'a dyn Fn(String),
    /// The benchmarks a comparison needs of this suite, named to its command in
    /// [`ONLY_BENCHMARKS_ENV`] and [`BENCH_FILTER_ENV`]; empty: all of them.
    pub only_benchmarks: &'a [String],
}

fn describe_exit(step: &str, suite: &Suite, outcome: &CommandOutcome) -> String {
    let what = match outcome.exit {
        ExitKind::Success => return format!("suite {:?}: {step} succeeded", suite.name),
        ExitKind::Failed(code) => format!("exited with status {code}"),
        ExitKind::Signaled(signal) => format!("was killed by signal {signal}"),
        ExitKind::TimedOut => format!(
            "did not finish within its timeout of {}s and was killed",
            suite.timeout.as_secs()
        ),
        ExitKind::OutputTooLarge => "printed more output than kymo keeps and was killed".into(),
        ExitKind::Stopped => "was stopped".into(),
    };
    format!("suite {:?}: the {step} command {what}", suite.name)
}

/// One command of a suite, and where and how it runs.
struct Step<'a> {
    name: &'a str,
    command: &'a str,
    cwd: &'a Path,
    env: Vec<(String, String)>,
    boundary: &'a SuiteBoundary,
}

/// A command of the suite as its `kymo.toml` says: in the work tree, with its declared
/// variables, its build settings and its boundary.
fn run_step(
    ctx: &SuiteContext,
    suite: &Suite,
    step: &str,
    command: &str,
    log: &mut String,
) -> Result<CommandOutcome, SuiteFailure> {
    let mut env = ctx
        .sandbox
        .environment(ctx.dirs, ctx.commit, &suite.boundary);
    let settings = BuildSettings {
        toolchain: suite.toolchain.as_ref(),
        offline: !suite.boundary.network,
        cap_lints: suite.cap_lints,
    };
    apply_build_settings(&mut env, &settings);
    if !ctx.only_benchmarks.is_empty() {
        env.push((
            ONLY_BENCHMARKS_ENV.to_owned(),
            ctx.only_benchmarks.join("\n"),
        ));
        env.push((
            BENCH_FILTER_ENV.to_owned(),
            bench_filter(ctx.only_benchmarks),
        ));
    }
    let step = Step {
        name: step,
        command,
        cwd: &ctx.dirs.worktree,
        env,
        boundary: &suite.boundary,
    };
    run_in_boundary(ctx, suite, &step, log)
}

fn run_in_boundary(
    ctx: &SuiteContext,
    suite: &Suite,
    step: &Step,
    log: &mut String,
) -> Result<CommandOutcome, SuiteFailure> {
    let Step {
        name: step,
        command,
        cwd,
        ref env,
        boundary,
    } = *step;
    let cannot_start = |e: std::io::Error| SuiteFailure {
        error: format!(
            "suite {:?}: cannot start the {step} command: {e}",
            suite.name
        ),
        log_tail: String::new(),
    };
    let prepared = ctx
        .sandbox
        .prepare(ctx.dirs, ctx.cache_dir, boundary)
        .map_err(cannot_start)?;
    // Said in the job's log whether the job succeeds or fails (a failure's log is its tail).
    let held: String = (prepared.held_limits().iter())
        .map(|line| format!("suite {}: {line}\n", suite.name))
        .collect();
    if !log.contains(&held) {
        log.push_str(&held);
    }
    let cancelled = || ctx.cancel.load(Ordering::Relaxed);
    let watch = || cancelled() || prepared.disk_exceeded();
    let outcome = run_command(&CommandSpec {
        command,
        cwd,
        env,
        clear_env: true,
        child_setup: Some(prepared.child_setup()),
        watch: Some(&watch),
        timeout: suite.timeout,
        stdout_cap: ctx.limits.stdout_cap,
        log_cap: ctx.limits.log_cap,
    })
    .map_err(|e| match prepared.setup_failure() {
        Some(stage) => boundary_failed(suite, step, stage, &e, &held),
        None => cannot_start(e),
    })?;
    let signal = match outcome.exit {
        ExitKind::Signaled(signal) => Some(signal),
        _ => None,
    };
    let limit = prepared.finish(
        !outcome.exit.is_success(),
        signal,
        outcome.exit == ExitKind::Stopped,
        &outcome.log_tail,
    );
    log.push_str(&format!(
        "$ {command}   # {step} of suite {}, {:.1}s\n{}\n",
        suite.name,
        outcome.duration.as_secs_f64(),
        outcome.log_tail
    ));
    if cancelled() {
        return Err(SuiteFailure {
            error: format!(
                "suite {:?}: the {step} command was killed because the job was cancelled",
                suite.name
            ),
            log_tail: format!("{held}{}", outcome.log_tail),
        });
    }
    if let Some(limit) = limit {
        return Err(SuiteFailure {
            error: format!(
                "suite {:?}: the {step} command hit its {limit} and was stopped",
                suite.name
            ),
            log_tail: format!("{held}{}", outcome.log_tail),
        });
    }
    if outcome.exit != ExitKind::Success {
        return Err(SuiteFailure {
            error: describe_exit(step, suite, &outcome),
            log_tail: format!("{held}{}", outcome.log_tail),
        });
    }
    Ok(outcome)
}

/// A command that did not run because `stage` of its boundary could not be set up: never
/// run with less than the boundary promises, fail the job and say why.
fn boundary_failed(
    suite: &Suite,
    step: &str,
    stage: Stage,
    error: &std::io::Error,
    held: &str,
) -> SuiteFailure {
    SuiteFailure {
        error: format!(
            "suite {:?}: the {step} command did not run: its boundary could not be set up ({}: {error})",
            suite.name,
            stage.describe()
        ),
        log_tail: held.to_owned(),
    }
}

/// Measures `suites` (each with the benchmarks asked of it) by `measure`: the timed ones one
/// at a time, in order, then every `concurrent` one at once, each on a thread of its own with
/// a log of its own. The uploads keep the suites' order; the log has the timed suites' part,
/// then each concurrent one's. A timed suite's failure ends the measuring at once; a concurrent
/// one's once they have all ended (the first in the suites' order is returned).
pub fn measure_suites<M>(
    suites: &[(&Suite, &[String])],
    log: &mut String,
    measure: M,
) -> Result<Vec<SuiteUpload>, SuiteFailure>
where
    M: Fn(&Suite, &[String], &mut String) -> Result<SuiteUpload, SuiteFailure> + Sync,
{
    let mut uploads: Vec<Option<Result<SuiteUpload, SuiteFailure>>> =
        suites.iter().map(|_| None).collect();
    let (together, alone): (Vec<_>, Vec<_>) =
        (suites.iter().enumerate()).partition(|(_, (suite, _))| suite.concurrent);
    for (index, (suite, only)) in alone {
        uploads[index] = Some(Ok(measure(suite, only, log)?));
    }
    let measure = &measure;
    let ended: Vec<_> = std::thread::scope(|scope| {
        let running: Vec<_> = (together.into_iter())
            .map(|(index, (suite, only))| {
                scope.spawn(move || {
                    let mut own = String::new();
                    (index, measure(suite, only, &mut own), own)
                })
            })
            .collect();
        (running.into_iter())
            .map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    for (index, measured, own) in ended {
        log.push_str(&own);
        uploads[index] = Some(measured);
    }
    uploads.into_iter().flatten().collect()
}

/// Builds and runs one suite `repeat` times and merges the repeats.
pub fn run_suite(
    ctx: &SuiteContext,
    suite: &Suite,
    log: &mut String,
) -> Result<SuiteUpload, SuiteFailure> {
    build_suite(ctx, suite, log)?;
    measure_suite(ctx, suite, log)
}

/// Runs a suite's build command, if it has one.
pub fn build_suite(
    ctx: &SuiteContext,
    suite: &Suite,
    log: &mut String,
) -> Result<(), SuiteFailure> {
    if !suite.boundary.network && ctx.dirs.worktree.join("Cargo.toml").is_file() {
        (ctx.progress)(format!("fetching the dependencies of suite {}", suite.name));
        fetch_dependencies(ctx, suite, log)?;
    }
    if let Some(build) = &suite.build {
        (ctx.progress)(format!("building suite {}", suite.name));
        run_step(ctx, suite, "build", build, log)?;
    }
    Ok(())
}

/// Downloads the dependencies of the work tree's `Cargo.toml` into the repository's cargo home
/// with the network, for a suite that has none: its commands then build offline from them.
///
/// Only cargo runs here, with the network, so nothing of the commit's may run with it: the
/// command runs outside the work tree (cargo reads no `.cargo/config.toml` of the commit, whose
/// `rustc-wrapper` could run its code), without the suite's declared variables (`RUSTC_WRAPPER`
/// is one), inside the same filesystem boundary and limits as the suite's own commands. Only
/// the host's dependencies are fetched: a build on this machine needs no others.
fn fetch_dependencies(
    ctx: &SuiteContext,
    suite: &Suite,
    log: &mut String,
) -> Result<(), SuiteFailure> {
    let boundary = SuiteBoundary {
        env: Vec::new(),
        network: true,
        ..suite.boundary.clone()
    };
    let mut env = ctx.sandbox.environment(ctx.dirs, ctx.commit, &boundary);
    let settings = BuildSettings {
        toolchain: suite.toolchain.as_ref(),
        ..BuildSettings::default()
    };
    apply_build_settings(&mut env, &settings);
    let manifest = ctx.dirs.worktree.join("Cargo.toml");
    set_variable(&mut env, "KYMO_MANIFEST", manifest.display().to_string());
    let step = Step {
        name: "dependency fetch (with the network, before the suite runs without it)",
        command: FETCH_COMMAND,
        cwd: Path::new("/"),
        env,
        boundary: &boundary,
    };
    run_in_boundary(ctx, suite, &step, log).map(|_| ())
}

/// `cargo fetch` of the manifest named by `KYMO_MANIFEST`, for the host the toolchain builds for.
const FETCH_COMMAND: &str = r#"cargo fetch --manifest-path "$KYMO_MANIFEST" --target "$(rustc -vV | sed -n 's/^host: //p')""#;

/// Runs a built suite `repeat` times and merges the repeats.
pub fn measure_suite(
    ctx: &SuiteContext,
    suite: &Suite,
    log: &mut String,
) -> Result<SuiteUpload, SuiteFailure> {
    let criterion_dir = ctx.dirs.target.join("criterion");
    let mut repeats = Vec::with_capacity(suite.repeat as usize);
    for round in 1..=suite.repeat {
        if suite.format == FormatName::Criterion {
            // criterion keeps results of benchmarks that no longer exist; start clean so that
            // only this run's results are read.
            let _ = std::fs::remove_dir_all(&criterion_dir);
        }
        let step = format!("run (repeat {round}/{})", suite.repeat);
        (ctx.progress)(format!(
            "running suite {}, repeat {round} of {}",
            suite.name, suite.repeat
        ));
        let outcome = run_step(ctx, suite, &step, &suite.run, log)?;
        let parsed = match suite.format {
            FormatName::Criterion => parse_criterion_dir(&criterion_dir),
            format => parse_output(format, &outcome.stdout),
        };
        let parsed = parsed.map_err(|error| SuiteFailure {
            error: format!(
                "suite {:?}: its output is not valid {} output: {error}",
                suite.name,
                suite.format.as_str()
            ),
            log_tail: outcome.log_tail.clone(),
        })?;
        repeats.push(parsed);
    }
    let mut results = merge_repeats(repeats);
    match suite.instructions {
        InstructionCounts::Off => {}
        InstructionCounts::Command => {
            let count = count_instructions(ctx, suite, log)?;
            if results.benchmarks.iter().any(|b| b.key() == suite.name) {
                return Err(SuiteFailure {
                    error: format!(
                        "suite {:?}: `instructions = true` stores the count under a benchmark \
                         named after the suite, and the suite's output already has one",
                        suite.name
                    ),
                    log_tail: String::new(),
                });
            }
            results.benchmarks.push(command_result(&suite.name, count));
        }
        InstructionCounts::PerBenchmark => count_per_benchmark(ctx, suite, &mut results, log)?,
    }
    Ok(SuiteUpload {
        suite: suite.name.clone(),
        results,
    })
}

/// Runs the suite's command once more with cargo's runner set to count each criterion
/// benchmark's instructions per iteration, and adds them to `results`.
fn count_per_benchmark(
    ctx: &SuiteContext,
    suite: &Suite,
    results: &mut SuiteResults,
    log: &mut String,
) -> Result<(), SuiteFailure> {
    let root = ctx.dirs.tmp.join("kymo-counts");
    let fail = |error: String| SuiteFailure {
        error: format!(
            "suite {:?}: counting instructions per benchmark: {error}",
            suite.name
        ),
        log_tail: String::new(),
    };
    let runs = root.join("runs");
    let script = root.join("runner.sh");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&runs).map_err(|e| fail(e.to_string()))?;
    std::fs::write(&script, runner_script(&runs)).map_err(|e| fail(e.to_string()))?;
    let command = counting_command(&suite.run, &script).map_err(fail)?;
    (ctx.progress)(format!("counting the instructions of suite {}", suite.name));
    run_step(ctx, suite, "instruction count", &command, log)?;
    let counts = read_counts(&runs).map_err(fail);
    let _ = std::fs::remove_dir_all(&root);
    let counts = counts?;
    for skipped in &counts.skipped {
        log.push_str(&format!("no instruction count for {skipped}\n"));
    }
    attach(results, &counts).map_err(fail)
}

/// Runs the suite's command once more under callgrind and returns the instructions that all
/// its processes executed.
fn count_instructions(
    ctx: &SuiteContext,
    suite: &Suite,
    log: &mut String,
) -> Result<u64, SuiteFailure> {
    // A directory of the suite's own: concurrent suites count at the same time.
    let logs = ctx.dirs.tmp.join("kymo-instructions").join(&suite.name);
    let fail = |error: String| SuiteFailure {
        error: format!("suite {:?}: counting instructions: {error}", suite.name),
        log_tail: String::new(),
    };
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).map_err(|e| fail(e.to_string()))?;
    (ctx.progress)(format!("counting the instructions of suite {}", suite.name));
    let command = under_callgrind(&suite.run, &logs);
    run_step(ctx, suite, "instruction count", &command, log)?;
    let total = total_instructions(&logs).map_err(fail);
    let _ = std::fs::remove_dir_all(&logs);
    total
}

/// Merges whole-suite repeats: every repeat's samples (or its single value) become samples
/// of one metric, whose value is their median. Benchmarks keep the first repeat's order.
pub fn merge_repeats(mut repeats: Vec<SuiteResults>) -> SuiteResults {
    if repeats.len() <= 1 {
        return repeats.pop().unwrap_or(SuiteResults { benchmarks: vec![] });
    }
    let mut merged = repeats.remove(0);
    let mut samples: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut add = |results: &SuiteResults| {
        for bench in &results.benchmarks {
            for metric in &bench.metrics {
                let entry = samples
                    .entry((bench.key(), metric.name.clone()))
                    .or_default();
                if metric.samples.is_empty() {
                    entry.push(metric.value);
                } else {
                    entry.extend_from_slice(&metric.samples);
                }
            }
        }
    };
    add(&merged);
    for repeat in &repeats {
        add(repeat);
    }
    for bench in &mut merged.benchmarks {
        let key = bench.key();
        for metric in &mut bench.metrics {
            if let Some(all) = samples.remove(&(key.clone(), metric.name.clone())) {
                metric.value = median(&all).unwrap_or(metric.value);
                metric.samples = all;
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use kymo_core::results::{BenchmarkResult, MetricResult};

    fn one(value: f64, samples: Vec<f64>) -> SuiteResults {
        SuiteResults {
            benchmarks: vec![BenchmarkResult {
                name: "b".into(),
                params: BTreeMap::new(),
                metrics: vec![MetricResult::time_ns(value, samples)],
            }],
        }
    }

    #[test]
    fn repeats_of_single_values_become_samples_with_their_median() {
        let merged = merge_repeats(vec![one(3.0, vec![]), one(1.0, vec![]), one(2.0, vec![])]);
        let metric = &merged.benchmarks[0].metrics[0];
        assert_eq!(metric.samples, vec![3.0, 1.0, 2.0]);
        assert_eq!(metric.value, 2.0);
    }

    #[test]
    fn repeats_of_samples_are_concatenated() {
        let merged = merge_repeats(vec![one(1.5, vec![1.0, 2.0]), one(3.5, vec![3.0, 4.0])]);
        let metric = &merged.benchmarks[0].metrics[0];
        assert_eq!(metric.samples, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(metric.value, 2.5);
    }

    #[test]
    fn a_single_repeat_is_kept_as_it_is() {
        let merged = merge_repeats(vec![one(7.0, vec![])]);
        assert_eq!(merged, one(7.0, vec![]));
    }
}

#[cfg(test)]
mod concurrent {
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::config::parse_kymo_toml;

    /// Suites "timed" and "slow" run alone; "counts" and "memory" may run concurrently.
    fn suites() -> Vec<Suite> {
        let toml = "[[suite]]\nname = \"counts\"\nrun = \"true\"\nconcurrent = true\n\n\
                    [[suite]]\nname = \"timed\"\nrun = \"true\"\n\n\
                    [[suite]]\nname = \"memory\"\nrun = \"true\"\nconcurrent = true\n\n\
                    [[suite]]\nname = \"slow\"\nrun = \"true\"\n";
        parse_kymo_toml(toml).unwrap().suites
    }

    /// Which suites run now, and each start with the suites running when it started, in order.
    #[derive(Default)]
    struct Seen {
        running: Vec<String>,
        starts: Vec<(String, Vec<String>)>,
        ends: Vec<String>,
    }

    /// A measure that records what ran beside what. A concurrent suite waits (up to 10 s) until
    /// every concurrent suite has started, so it ends only once they have met.
    fn measure_recording<'a>(
        seen: &'a (Mutex<Seen>, Condvar),
        fail: &'a [&'a str],
    ) -> impl Fn(&Suite, &[String], &mut String) -> Result<SuiteUpload, SuiteFailure> + Sync + 'a
    {
        move |suite, _, log| {
            let (lock, changed) = seen;
            let mut state = lock.lock().unwrap();
            state.running.push(suite.name.clone());
            let running = state.running.clone();
            state.starts.push((suite.name.clone(), running));
            changed.notify_all();
            let wait = if suite.concurrent { 10_000 } else { 20 };
            let met = |s: &mut Seen| {
                !suite.concurrent
                    || ["counts", "memory"]
                        .iter()
                        .all(|n| s.starts.iter().any(|x| x.0 == *n))
            };
            let (mut state, _) = changed
                .wait_timeout_while(state, Duration::from_millis(wait), |s| !met(s))
                .unwrap();
            state.running.retain(|name| *name != suite.name);
            state.ends.push(suite.name.clone());
            log.push_str(&format!("{} ran\n", suite.name));
            if fail.contains(&suite.name.as_str()) {
                return Err(SuiteFailure {
                    error: format!("{} failed", suite.name),
                    log_tail: String::new(),
                });
            }
            Ok(SuiteUpload {
                suite: suite.name.clone(),
                results: SuiteResults {
                    benchmarks: Vec::new(),
                },
            })
        }
    }

    fn measured(fail: &[&str], log: &mut String) -> (Result<Vec<SuiteUpload>, SuiteFailure>, Seen) {
        let suites = suites();
        let all: Vec<(&Suite, &[String])> = suites.iter().map(|s| (s, &[][..])).collect();
        let seen = (Mutex::new(Seen::default()), Condvar::new());
        let result = measure_suites(&all, log, measure_recording(&seen, fail));
        (result, seen.0.into_inner().unwrap())
    }

    #[test]
    fn timed_suites_run_alone_and_the_concurrent_ones_together_after_them() {
        let mut log = String::new();
        let (uploads, seen) = measured(&[], &mut log);
        let names: Vec<String> = uploads.unwrap().into_iter().map(|u| u.suite).collect();
        assert_eq!(
            names,
            ["counts", "timed", "memory", "slow"],
            "the file's order"
        );
        let order: Vec<&str> = seen.starts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(&order[..2], ["timed", "slow"], "timed suites first");
        assert_eq!(seen.starts[0].1, ["timed"], "a timed suite runs alone");
        assert_eq!(
            seen.ends[0], "timed",
            "and ends before anything else starts"
        );
        assert_eq!(seen.starts[1].1, ["slow"]);
        assert_eq!(seen.ends[1], "slow");
        let mut second = seen.starts[3].1.clone();
        second.sort();
        assert_eq!(second, ["counts", "memory"], "the concurrent ones at once");
        assert_eq!(log.lines().count(), 4, "every suite's log is kept: {log}");
    }

    #[test]
    fn the_first_failure_in_the_files_order_is_reported_once_every_suite_has_ended() {
        let mut log = String::new();
        let (result, _) = measured(&["memory", "counts"], &mut log);
        let failure = result.unwrap_err();
        assert_eq!(
            failure.error, "counts failed",
            "the first in the file's order"
        );
        assert!(
            log.contains("memory ran") && log.contains("counts ran"),
            "{log}"
        );
        let (result, seen) = measured(&["timed"], &mut String::new());
        assert_eq!(result.unwrap_err().error, "timed failed");
        assert_eq!(
            seen.ends,
            ["timed"],
            "a timed suite's failure ends the measuring at once"
        );
    }
}
