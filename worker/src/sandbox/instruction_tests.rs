//! `instructions = true` with a real program under the real valgrind, inside the real
//! boundary: the count covers every process the command starts, moves with the work the
//! program does, and repeats exactly.

use std::time::Duration;

use super::settings::SuiteBoundary;
use super::tests::{RESULT, Server};
use crate::config::{InstructionCounts, ResultFormat, Suite};
use crate::instructions::METRIC;

fn counting_suite(loops: u32) -> Suite {
    Suite {
        name: "summing".into(),
        build: None,
        // The shell starts awk: a child process whose work the count must include.
        run: format!("awk 'BEGIN {{ for (i = 0; i < {loops}; i++) s += i }}'; echo '{RESULT}'"),
        format: ResultFormat::Kymo,
        repeat: 2,
        timeout: Duration::from_secs(120),
        boundary: SuiteBoundary::default(),
        instructions: InstructionCounts::Command,
        toolchain: None,
        cap_lints: None,
        concurrent: false,
    }
}

fn count(server: &Server, loops: u32) -> f64 {
    let (result, log) = server.run_suite(&counting_suite(loops));
    let upload = result.unwrap_or_else(|f| panic!("{} | {} | {log}", f.error, f.log_tail));
    let names: Vec<&str> = upload
        .results
        .benchmarks
        .iter()
        .map(|b| b.name.as_str())
        .collect();
    assert_eq!(names, ["b", "summing"], "the suite's own result stays");
    let command = &upload.results.benchmarks[1];
    assert_eq!(command.metrics.len(), 1);
    let metric = &command.metrics[0];
    assert_eq!(
        (metric.name.as_str(), metric.unit.as_str()),
        (METRIC, METRIC)
    );
    assert!(metric.samples.is_empty(), "one count, not one per repeat");
    metric.value
}

#[test]
fn a_commands_instructions_follow_its_work_and_repeat_exactly() {
    let server = Server::new();
    let small = count(&server, 1_000);
    let again = count(&server, 1_000);
    let large = count(&server, 1_000_000);
    // awk spends some tens of instructions per iteration; start-up is a few hundred thousand.
    assert!(large - small > 10_000_000.0, "{small} then {large}");
    let drift = (again - small).abs() / small;
    assert!(drift < 0.001, "{small} then {again}");
}

#[test]
fn a_suite_that_already_has_a_benchmark_named_after_it_is_refused() {
    let server = Server::new();
    let mut suite = counting_suite(1);
    suite.name = "b".into();
    let (result, _) = server.run_suite(&suite);
    let error = result.expect_err("a name clash").error;
    assert!(error.contains("named after the suite"), "{error}");
}
