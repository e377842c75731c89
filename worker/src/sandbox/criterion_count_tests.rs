//! `instructions = "per-benchmark"` on a real crate with real criterion benchmarks, built by
//! cargo inside the real boundary and counted by the real valgrind: each benchmark gets the
//! instructions of one iteration of its routine beside its time, they follow the routine's
//! work, repeat exactly, and a libtest harness that `cargo bench` also starts is left alone.

use std::path::Path;
use std::time::Duration;

use super::settings::SuiteBoundary;
use super::tests::{Server, write_bench_crate};
use crate::config::{InstructionCounts, ResultFormat, Suite};
use crate::instructions::METRIC;

/// A crate whose criterion benchmarks (of `criterion`, a version requirement) sum the squares
/// of 1,000 and of 2,000 numbers, the second through `iter_batched` (its setup makes the
/// input); its library has a unit test.
fn write_crate(dir: &Path, criterion: &str) {
    write_bench_crate(
        dir,
        &format!(
            "[package]\nname = \"counted\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dev-dependencies]\ncriterion = {{ version = \"{criterion}\", default-features = false, \
             features = [\"cargo_bench_support\"] }}\n\n[[bench]]\nname = \"sums\"\nharness = false\n"
        ),
        "pub fn squares(n: u64) -> u64 {\n    let mut total = 0u64;\n    \
         for x in 0..n {\n        total = total.wrapping_add(std::hint::black_box(x * x));\n    }\n    \
         total\n}\n\n#[test]\nfn sums() {\n    assert_eq!(squares(3), 5);\n}\n",
        (
            "sums",
            "use criterion::{criterion_group, criterion_main, BatchSize, Criterion};\n\
         use std::hint::black_box;\nuse std::time::Duration;\n\n\
         fn sums(c: &mut Criterion) {\n    \
         c.bench_function(\"squares/1000\", |b| b.iter(|| counted::squares(black_box(1000))));\n    \
         c.bench_function(\"squares/2000\", |b| {\n        \
         b.iter_batched(|| black_box(2000), counted::squares, BatchSize::SmallInput)\n    });\n}\n\n\
         criterion_group! {\n    name = benches;\n    config = Criterion::default().sample_size(10)\n        \
         .warm_up_time(Duration::from_millis(100)).measurement_time(Duration::from_millis(300));\n    \
         targets = sums\n}\ncriterion_main!(benches);\n",
        ),
    );
}

fn suite() -> Suite {
    Suite {
        name: "sums".into(),
        build: Some("cargo bench --no-run 2>&1".into()),
        run: "cargo bench 2>&1 >&2".into(),
        format: ResultFormat::Criterion,
        repeat: 1,
        timeout: Duration::from_secs(900),
        boundary: SuiteBoundary::default(),
        instructions: InstructionCounts::PerBenchmark,
        toolchain: None,
        cap_lints: None,
        concurrent: false,
    }
}

/// Each benchmark's (time, instructions).
fn counts(server: &Server) -> Vec<(String, f64)> {
    let (result, log) = server.run_suite(&suite());
    let upload = result.unwrap_or_else(|f| panic!("{} | {} | {log}", f.error, f.log_tail));
    let mut counts = Vec::new();
    for bench in &upload.results.benchmarks {
        let metric = |name: &str| bench.metrics.iter().find(|m| m.name == name);
        assert!(metric("time").is_some(), "{bench:?}");
        let count = metric(METRIC).unwrap_or_else(|| panic!("no count: {bench:?} | {log}"));
        assert_eq!(count.unit, METRIC);
        assert!(count.samples.is_empty(), "one count, not samples");
        counts.push((bench.name.clone(), count.value));
    }
    counts.sort_by(|a, b| a.0.cmp(&b.0));
    counts
}

/// Writes the crate with `criterion` into the server's work tree, counts it, and checks that
/// each benchmark's count follows its routine's work; returns the counts.
fn counted_crate(server: &Server, criterion: &str) -> Vec<(String, f64)> {
    write_crate(&server.dirs.worktree, criterion);
    let counted = counts(server);
    let names: Vec<&str> = counted.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["squares/1000", "squares/2000"], "{counted:?}");
    let (one, two) = (counted[0].1, counted[1].1);
    // Twice the numbers, twice the work; the loop is a few instructions a number, so the
    // timing and setup around each iteration are not in the count.
    assert!((1_000.0..20_000.0).contains(&one), "{counted:?}");
    assert!((1.9..2.1).contains(&(two / one)), "{counted:?}");
    counted
}

#[test]
fn unmodified_criterion_benchmarks_get_their_instructions_per_iteration() {
    let server = Server::new();
    let first = counted_crate(&server, "0.8");
    let again = counts(&server);
    for ((name, a), (_, b)) in first.iter().zip(&again) {
        assert!((a - b).abs() / a < 0.001, "{name}: {a} then {b}");
    }
}

/// Criterion 0.5 (the version most published crates' benchmarks use) answers `--help` with
/// "error: unexpected argument found": it is still told from a libtest harness, and counted.
#[test]
fn criterion_0_5_benchmarks_are_counted_though_they_have_no_help() {
    counted_crate(&Server::new(), "=0.5.1");
}
