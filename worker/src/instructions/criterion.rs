//! A suite's `instructions = "per-benchmark"`: the instructions of one iteration of each
//! criterion benchmark's routine, counted by callgrind with no change to the crate.
//!
//! How: the suite's own `run` command runs once more with cargo's runner
//! (`CARGO_TARGET_<host>_RUNNER`) set to a script of ours, so cargo starts every benchmark
//! executable through it, with cargo's arguments, environment and directory. The script runs
//! a criterion executable's benchmarks (`--list`, with cargo's arguments) one by one, each in
//! a process of its own under callgrind (a filter matching its id alone), in criterion's
//! profiling mode (`--profile-time 1`: criterion's warm-up alone, which calls the routine 1,
//! 2, 4, 8, ... times until a second of routine time has passed, and no analysis); other
//! harnesses (libtest) are not run. Callgrind dumps its counters on entering and on leaving
//! criterion's `Bencher::iter` (and `iter_custom`, `iter_batched`, `iter_batched_ref`, which
//! criterion keeps out of line), so every call has a dump of its own, and the difference
//! between the last two calls (2ⁿ and 2ⁿ⁻¹ iterations) is the cost of 2ⁿ⁻¹ iterations of the
//! routine, without criterion's timing code or the benchmark's setup. A process per
//! benchmark costs valgrind's start-up each time, but needs nothing of criterion's insides
//! beyond those four functions (which benchmark ran is known without them).
//!
//! What it cannot see is what valgrind cannot: the kernel's work in system calls, waiting
//! for I/O, scheduling, cache misses. `iter_batched`'s setup and drops run inside the call and
//! are counted with the routine.

use std::path::{Path, PathBuf};

use kymo_core::format::kymo::MAX_BENCHMARKS;
use kymo_core::model::Direction;
use kymo_core::results::{BenchmarkResult, MetricResult, SuiteResults};

use super::callgrind_dump::{DumpHeader, Trigger, read_header};
use super::{METRIC, shell_quote};

/// Most benchmark executables one count run may start.
pub const MAX_EXECUTABLES: usize = 256;
/// Most dump files read from one executable's run.
pub const MAX_DUMPS: usize = 200_000;
/// Largest `--list` output read, in bytes.
const MAX_LIST_BYTES: u64 = 4 * 1024 * 1024;

/// Criterion's functions that run a routine `iters` times, each call one timed sample.
const ITERATING: [&str; 4] = ["iter", "iter_custom", "iter_batched", "iter_batched_ref"];

/// The callgrind options that write a dump on entering and on leaving every iterating call.
/// Callgrind applies one setting per function when patterns overlap, unless the wildcard one
/// comes first and the exact names after: so entering is matched by a wildcard, leaving by
/// the names legacy symbol mangling gives (`Bencher<M>`, `AsyncBencher<A,M>`). Dumps on
/// leaving are not written for binaries without debug information (cargo's default bench
/// profile); entering dumps always are.
fn dump_options() -> Vec<String> {
    let mut options: Vec<String> = (ITERATING.iter())
        .map(|function| format!("--dump-before=criterion::bencher::*::{function}"))
        .collect();
    for function in ITERATING {
        for bencher in ["Bencher<M>", "AsyncBencher<A,M>"] {
            options.push(format!(
                "--dump-after=criterion::bencher::{bencher}::{function}"
            ));
        }
    }
    options
}

/// The script cargo runs each benchmark executable through. An executable is criterion's when
/// its `--help` names `--profile-time`, or when its parser refuses `--list` with
/// `--profile-time` as options that "cannot be used with" each other: criterion 0.5 parses its
/// arguments with clap built without help, so its `--help` is only "error: unexpected argument
/// found" (a libtest harness calls `--profile-time` unrecognized instead). Each executable gets
/// a new directory under `root` with its list; each of its benchmarks a numbered directory
/// below that, with its id, its dumps and valgrind's log. Only the executable and `--bench` are
/// kept of cargo's arguments in the counted runs: the filter is ours, and criterion's
/// timing options mean nothing to its profiling mode.
pub fn runner_script(root: &Path) -> String {
    let options = dump_options()
        .iter()
        .map(|o| shell_quote(o))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "# Written by kymo for per-benchmark instruction counts: cargo starts each benchmark\n\
         # executable through this script. Criterion's run under callgrind; others do not run.\n\
         out=$(mktemp -d {root}/run.XXXXXX) || exit 1\n\
         if ! {{ \"$1\" --help 2>/dev/null | grep -q -e --profile-time ||\n\
         \x20 \"$1\" --list --profile-time 1 2>&1 | grep -q 'cannot be used with'; }}; then\n\
         \x20 : > \"$out/not-criterion\"\n\
         \x20 exit 0\n\
         fi\n\
         \"$@\" --list > \"$out/list\" || exit 1\n\
         sed -n 's/: bench\\(mark\\)\\{{0,1\\}}$//p' \"$out/list\" > \"$out/ids\"\n\
         n=0\n\
         while IFS= read -r id; do\n\
         \x20 n=$((n + 1))\n\
         \x20 mkdir \"$out/$n\" && printf '%s' \"$id\" > \"$out/$n/id\" || exit 1\n\
         \x20 only=\"^$(printf '%s' \"$id\" | sed 's/[][\\.*+?(){{}}|^$]/\\\\&/g')\\$\"\n\
         \x20 valgrind --tool=callgrind {options} --callgrind-out-file=\"$out/$n/callgrind.out\" \
         --log-file=\"$out/$n/valgrind.log\" \"$1\" --bench \"$only\" --profile-time 1 \
         > \"$out/$n/stdout\" || exit 1\n\
         done < \"$out/ids\"\n",
        root = shell_quote(&root.display().to_string()),
    )
}

/// The shell command that runs the suite's `run` with cargo's runner for the host set to
/// `sh SCRIPT`. Cargo splits a runner at whitespace, and the path stands in double quotes, so
/// it may hold no whitespace, quote, `$`, backquote or backslash (a comparison's work trees,
/// `NAME.git@base`, are fine).
pub fn counting_command(run: &str, script: &Path) -> Result<String, String> {
    let path = script.display().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+@,:=%~".contains(c);
    if !path.chars().all(plain) {
        return Err(format!(
            "the worker's directory {path:?} has characters that cargo's runner setting cannot \
             hold (spaces, quotes): give the worker a plain path"
        ));
    }
    Ok(format!(
        "kymo_host=$(rustc -vV | sed -n 's/^host: //p')\n\
         if [ -z \"$kymo_host\" ]; then echo 'kymo: rustc -vV names no host, needed for cargo'\\''s runner' >&2; exit 1; fi\n\
         export \"CARGO_TARGET_$(printf %s \"$kymo_host\" | tr 'a-z.-' 'A-Z__')_RUNNER=sh {path}\"\n\
         {run}\n"
    ))
}

/// Each criterion benchmark's instructions per iteration, in run order, and why any
/// benchmark has none.
#[derive(Debug, Default, PartialEq)]
pub struct Counts {
    pub per_iteration: Vec<(String, f64)>,
    pub skipped: Vec<String>,
}

/// Reads what the runner script left under `root`.
pub fn read_counts(root: &Path) -> Result<Counts, String> {
    let runs = numbered_or_named(root, |name| name.starts_with("run."))?;
    if runs.len() > MAX_EXECUTABLES {
        return Err(format!(
            "more than {MAX_EXECUTABLES} benchmark executables ran"
        ));
    }
    let mut counts = Counts::default();
    let mut criterion_runs = 0;
    for run in runs {
        if run.join("not-criterion").exists() {
            continue;
        }
        criterion_runs += 1;
        let listed = list_ids(&read_list(&run.join("list"))?).len();
        if listed + counts.per_iteration.len() + counts.skipped.len() > MAX_BENCHMARKS {
            return Err(format!("more than {MAX_BENCHMARKS} benchmarks"));
        }
        let benchmarks = numbered_or_named(&run, |name| name.parse::<usize>().is_ok())?;
        if benchmarks.len() != listed {
            return Err(format!(
                "{} listed {listed} benchmarks but {} were counted",
                run.display(),
                benchmarks.len()
            ));
        }
        for benchmark in benchmarks {
            let id = read_list(&benchmark.join("id"))?;
            let calls = calls(&read_dumps(&benchmark)?);
            match per_iteration(&calls) {
                Ok(count) => counts.per_iteration.push((id, count)),
                Err(why) => counts.skipped.push(format!("{id}: {why}")),
            }
        }
    }
    if criterion_runs == 0 {
        return Err(
            "no criterion benchmark ran: per-benchmark counts need the suite's `run` \
                    to start criterion benchmarks through cargo (`cargo bench`)"
                .into(),
        );
    }
    Ok(counts)
}

/// The directories in `dir` whose names `wanted` accepts, in order (numbers by value).
fn numbered_or_named(dir: &Path, wanted: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut found: Vec<(usize, PathBuf)> = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() && wanted(&name) {
            found.push((name.parse().unwrap_or(0), path));
        }
        if found.len() > MAX_BENCHMARKS {
            return Err(format!("{} holds too many directories", dir.display()));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, path)| path).collect())
}

fn read_list(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    (file.take(MAX_LIST_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_LIST_BYTES {
        return Err(format!("{} is over {MAX_LIST_BYTES} bytes", path.display()));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The benchmark ids of criterion's `--list` output (`ID: benchmark`, or `ID: bench` before
/// criterion 0.5), in order; other lines (a benchmark's own printing) are not ids.
pub fn list_ids(list: &str) -> Vec<String> {
    list.lines()
        .filter_map(|line| {
            (line.strip_suffix(": benchmark")).or_else(|| line.strip_suffix(": bench"))
        })
        .map(str::to_owned)
        .collect()
}

fn read_dumps(run: &Path) -> Result<Vec<DumpHeader>, String> {
    let entries = std::fs::read_dir(run).map_err(|e| format!("{}: {e}", run.display()))?;
    let mut headers = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let is_dump =
            (path.file_name()).is_some_and(|n| n.to_string_lossy().starts_with("callgrind.out"));
        if !is_dump {
            continue;
        }
        if headers.len() == MAX_DUMPS {
            return Err(format!(
                "{} holds more than {MAX_DUMPS} dumps",
                run.display()
            ));
        }
        headers.push(read_header(&path)?);
    }
    if headers.is_empty() {
        let log = std::fs::read_to_string(run.join("valgrind.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        return Err(format!(
            "callgrind wrote no dump (is valgrind installed?): {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    }
    headers.sort_by_key(|h| h.part);
    Ok(headers)
}

/// What the dumps of one benchmark's run tell of its iterating calls, in order (the routine
/// run 1, 2, 4, ... times).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Calls {
    /// Each call's own cost, from the dumps on leaving it.
    Exact(Vec<u64>),
    /// The cost from entering each call to entering the next: the call, and the same
    /// criterion bookkeeping and benchmark setup before each call. Without dumps on leaving,
    /// this is what there is; differences of two cancel what is the same each time.
    WithSetup(Vec<u64>),
}

/// The calls of a benchmark's run from its dumps (in order).
pub fn calls(headers: &[DumpHeader]) -> Calls {
    let exact: Vec<u64> = (headers.iter())
        .filter(|h| matches!(h.trigger, Trigger::After(_)))
        .map(|h| h.instructions)
        .collect();
    if !exact.is_empty() {
        return Calls::Exact(exact);
    }
    let entries = (headers.iter()).filter(|h| matches!(h.trigger, Trigger::Before(_)));
    // The first entering dump holds the start-up; each later one the call before it.
    Calls::WithSetup(entries.skip(1).map(|h| h.instructions).collect())
}

/// Instructions of one iteration from the calls of criterion's warm-up, which ran the
/// routine 1, 2, 4, ... times: the difference of the last two calls over the iterations
/// between them. A single exact call (a routine slower than half a second under callgrind)
/// is taken whole; it holds criterion's few hundred instructions of timing too.
pub fn per_iteration(calls: &Calls) -> Result<f64, String> {
    let costs = match calls {
        Calls::Exact(costs) if costs.len() == 1 => return Ok(costs[0] as f64),
        Calls::Exact(costs) | Calls::WithSetup(costs) => costs,
    };
    let slope = |i: usize| (costs[i] as f64 - costs[i - 1] as f64) / 2f64.powi(i as i32 - 1);
    match costs.len() {
        0 => Err("criterion never entered Bencher::iter (or iter_custom, iter_batched)".into()),
        1 => Err(
            "criterion's one-second warm-up called the routine once only, and without \
                  debug information its setup cannot be told apart from it: \
                  `debug = \"line-tables-only\"` in `[profile.bench]` counts it"
                .into(),
        ),
        n => {
            let last = slope(n - 1);
            if last.is_nan() || last <= 0.0 {
                return Err(format!(
                    "its calls did not grow with their iterations: {costs:?}"
                ));
            }
            // Calls that do not double (a routine that calls `iter` twice, a count that is not
            // 1, 2, 4, ...) give slopes that disagree.
            if n >= 4 && (last - slope(n - 2)).abs() > 0.25 * last {
                return Err(format!(
                    "its calls do not grow as 1, 2, 4, ... iterations would: {costs:?}"
                ));
            }
            Ok(last)
        }
    }
}

/// Adds each count to the benchmark of the same name as the metric `instructions` (a new
/// benchmark when the suite's timed output has none of that name).
pub fn attach(results: &mut SuiteResults, counts: &Counts) -> Result<(), String> {
    for (id, count) in &counts.per_iteration {
        let metric = MetricResult {
            name: METRIC.into(),
            unit: METRIC.into(),
            direction: Direction::Lower,
            value: *count,
            samples: Vec::new(),
            hdr: None,
        };
        let own = (results.benchmarks.iter_mut()).find(|b| &b.name == id && b.params.is_empty());
        match own {
            Some(bench) if bench.metrics.iter().any(|m| m.name == METRIC) => {
                return Err(format!(
                    "benchmark {id:?} has an `{METRIC}` metric already (counted twice, or by \
                     the suite itself)"
                ));
            }
            Some(bench) => bench.metrics.push(metric),
            None => results.benchmarks.push(BenchmarkResult {
                name: id.clone(),
                params: Default::default(),
                metrics: vec![metric],
            }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(part: u64, trigger: Trigger, instructions: u64) -> DumpHeader {
        DumpHeader {
            part,
            trigger,
            instructions,
        }
    }

    fn call(before: bool) -> Trigger {
        let name = "criterion::bencher::Bencher<M>::iter".to_owned();
        if before {
            Trigger::Before(name)
        } else {
            Trigger::After(name)
        }
    }

    #[test]
    fn the_real_warm_up_of_base64_gives_its_exact_cost_per_iteration() {
        // `encode_small_input/encode/3` of base64 0.22.1: calls of 1, 2, 4, 8, 16 iterations.
        let exact = Calls::Exact(vec![871, 1338, 2197, 4081, 7849]);
        assert_eq!(per_iteration(&exact), Ok(471.0));
        assert_eq!(
            per_iteration(&Calls::Exact(vec![5_000_000])),
            Ok(5_000_000.0)
        );
        assert_eq!(per_iteration(&Calls::Exact(vec![1000, 1500])), Ok(500.0));
        // Without debug information (entering dumps only, each holding the call before and
        // the setup of the next): `encode_small_input/encode/3072`, 1 to 2,048 iterations.
        let with_setup = Calls::WithSetup(vec![
            90456, 118727, 175277, 288377, 514577, 966977, 1871777, 3681377, 7300577, 14538977,
            29015777, 57969377,
        ]);
        assert_eq!(per_iteration(&with_setup), Ok(28275.0));
    }

    #[test]
    fn calls_that_do_not_double_are_refused() {
        for bad in [
            &[][..],
            &[1000, 1000],
            &[1000, 900],
            &[100, 200, 100, 200, 100, 200],
            &[10, 20, 40, 80, 100_000],
        ] {
            assert!(
                per_iteration(&Calls::Exact(bad.to_vec())).is_err(),
                "{bad:?}"
            );
            assert!(
                per_iteration(&Calls::WithSetup(bad.to_vec())).is_err(),
                "{bad:?}"
            );
        }
        assert!(
            per_iteration(&Calls::WithSetup(vec![5_000_000])).is_err(),
            "setup and all"
        );
    }

    #[test]
    fn each_call_is_its_dump_on_leaving_or_else_from_one_entry_to_the_next() {
        let mut headers = vec![
            header(1, call(true), 700_000),
            header(2, call(false), 871),
            header(3, call(true), 362),
            header(4, call(false), 1338),
            header(5, Trigger::Other("Program termination".into()), 9),
        ];
        assert_eq!(calls(&headers), Calls::Exact(vec![871, 1338]));
        headers.retain(|h| !matches!(h.trigger, Trigger::After(_)));
        assert_eq!(calls(&headers), Calls::WithSetup(vec![362]));
    }

    #[test]
    fn list_output_of_every_criterion_version_gives_ids_in_order() {
        let list = "group/a/3: benchmark\ng b/1: bench\n\nprinted by main\nlast: benchmark\n";
        assert_eq!(list_ids(list), ["group/a/3", "g b/1", "last"]);
    }

    #[test]
    fn counts_join_their_benchmarks_and_never_replace_a_count() {
        let time = MetricResult::time_ns(1.0, vec![]);
        let mut results = SuiteResults {
            benchmarks: vec![BenchmarkResult {
                name: "g/a".into(),
                params: Default::default(),
                metrics: vec![time],
            }],
        };
        let counts = Counts {
            per_iteration: vec![("g/a".into(), 471.0), ("g/b".into(), 84.0)],
            skipped: vec![],
        };
        attach(&mut results, &counts).unwrap();
        assert_eq!(results.benchmarks.len(), 2);
        assert_eq!(results.benchmarks[0].metrics[1].value, 471.0);
        assert_eq!(results.benchmarks[1].metrics[0].name, METRIC);
        assert!(attach(&mut results, &counts).is_err(), "counted twice");
    }

    #[test]
    fn the_runner_script_quotes_its_directory_and_the_command_needs_a_plain_path() {
        let script = runner_script(Path::new("/t/it's"));
        assert!(
            script.contains(r"mktemp -d '/t/it'\''s'/run.XXXXXX"),
            "{script}"
        );
        assert!(script.contains("--profile-time 1"), "{script}");
        let command = counting_command("cargo bench", Path::new("/w/tmp/runner.sh")).unwrap();
        assert!(
            command.contains("_RUNNER=sh /w/tmp/runner.sh\""),
            "{command}"
        );
        assert!(command.ends_with("cargo bench\n"), "{command}");
        // What a comparison's base and head are checked out under.
        let base = Path::new("/w/tmp/bs58.git@base/kymo-counts/runner.sh");
        assert!(counting_command("cargo bench", base).is_ok());
        for bad in [
            "/w/a b/r.sh",
            "/w/\"/r.sh",
            "/w/$x/r.sh",
            "/w/`x`/r.sh",
            "/w/a\\b/r.sh",
        ] {
            assert!(
                counting_command("cargo bench", Path::new(bad)).is_err(),
                "{bad}"
            );
        }
    }

    fn dump(instructions: u64, part: u64, after: bool) -> String {
        let trigger = if after {
            "--dump-after"
        } else {
            "--dump-before"
        };
        format!(
            "# callgrind format\nversion: 1\npart: {part}\n\
             desc: Trigger: {trigger}=criterion::bencher::Bencher<M>::iter\n\
             events: Ir\nsummary: {instructions}\n"
        )
    }

    #[test]
    fn a_count_run_gives_each_listed_benchmark_its_count_and_says_why_one_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run.abcdef");
        std::fs::create_dir_all(run.join("1")).unwrap();
        std::fs::create_dir_all(run.join("2")).unwrap();
        std::fs::write(run.join("list"), "enc/3: benchmark\ndec/3: benchmark\n").unwrap();
        std::fs::write(run.join("1/id"), "enc/3").unwrap();
        std::fs::write(run.join("2/id"), "dec/3").unwrap();
        for (part, cost) in [871, 1338, 2197, 4081, 7849].into_iter().enumerate() {
            let part = 2 * part as u64 + 2;
            let path = run.join(format!("1/callgrind.out.{part}"));
            std::fs::write(path, dump(cost, part, true)).unwrap();
            let before = run.join(format!("1/callgrind.out.{}", part - 1));
            std::fs::write(before, dump(300, part - 1, false)).unwrap();
        }
        std::fs::write(run.join("2/callgrind.out.1"), dump(5, 1, false)).unwrap();
        let counts = read_counts(dir.path()).unwrap();
        assert_eq!(counts.per_iteration, [("enc/3".to_owned(), 471.0)]);
        assert_eq!(counts.skipped.len(), 1);
        assert!(counts.skipped[0].starts_with("dec/3: "), "{counts:?}");
    }

    #[test]
    fn the_filter_matches_an_id_alone_whatever_characters_it_holds() {
        let script = runner_script(Path::new("/r"));
        let line = script.lines().find(|l| l.contains("only=")).unwrap();
        let id = "g (x)/a.b*c+d?[e]{f}|g^h$i\\j 3";
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("id='{id}'\n{line}\nprintf '%s' \"$only\""))
            .output()
            .unwrap();
        let only = String::from_utf8(output.stdout).unwrap();
        assert_eq!(only, r"^g \(x\)/a\.b\*c\+d\?\[e\]\{f\}\|g\^h\$i\\j 3$");
    }

    #[test]
    fn a_count_run_that_left_nothing_usable_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_counts(dir.path()).is_err(), "nothing ran");
        let skipped = dir.path().join("run.aaaaaa");
        std::fs::create_dir(&skipped).unwrap();
        std::fs::write(skipped.join("not-criterion"), "").unwrap();
        assert!(read_counts(dir.path()).is_err(), "only libtest ran");
        let run = dir.path().join("run.bbbbbb");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("list"), "a: benchmark\n").unwrap();
        assert!(read_counts(dir.path()).is_err(), "listed but not counted");
        std::fs::create_dir(run.join("1")).unwrap();
        std::fs::write(run.join("1/id"), "a").unwrap();
        assert!(read_counts(dir.path()).is_err(), "no dump");
        std::fs::write(run.join("1/callgrind.out.1"), "garbage").unwrap();
        assert!(read_counts(dir.path()).is_err(), "a bad dump");
    }
}
