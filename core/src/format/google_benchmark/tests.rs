use super::*;
use crate::format::tests::{assert_close, assert_valid, metric_shapes};

fn refused(doc: &str) -> String {
    parse_google_benchmark(doc.as_bytes())
        .unwrap_err()
        .to_string()
}

fn names(suite: &SuiteResults) -> Vec<&str> {
    suite.benchmarks.iter().map(|b| b.name.as_str()).collect()
}

#[test]
fn golden_plain_run_leaves_out_the_failed_benchmark() {
    let doc = include_bytes!("../../../tests/data/google-benchmark/plain.json");
    let suite = parse_google_benchmark(doc).unwrap();
    assert_valid(&suite);
    assert_eq!(
        names(&suite),
        [
            "BM_sum/64",
            "BM_sum/512",
            "BM_increment/real_time/threads:2"
        ]
    );
    let sum = &suite.benchmarks[0];
    let metrics = metric_shapes(sum);
    assert_eq!(
        metrics,
        [
            ("time", "ns", Direction::Lower, 1),
            ("cpu_time", "ns", Direction::Lower, 1),
            ("bytes_per_second", "B/s", Direction::Higher, 1),
            ("items_per_second", "items/s", Direction::Higher, 1),
        ]
    );
    assert_close(sum.metrics[0].value, 31.211119353166907);
    assert_close(sum.metrics[3].value, 2622988671.9596148);
    // Without SetBytesProcessed there is no rate.
    assert_eq!(suite.benchmarks[2].metrics.len(), 2);
}

#[test]
fn golden_repetitions_are_samples_and_aggregates_are_not_counted_again() {
    let doc = include_bytes!("../../../tests/data/google-benchmark/repetitions.json");
    let suite = parse_google_benchmark(doc).unwrap();
    assert_valid(&suite);
    assert_eq!(names(&suite), ["BM_sum/512"]);
    for bench in &suite.benchmarks {
        assert!(
            bench.metrics.iter().all(|m| m.samples.len() == 3),
            "{bench:?}"
        );
    }
    let time = &suite.benchmarks[0].metrics[0];
    let expected = [243.08504594752708, 298.24835110756214, 295.51319796228813];
    assert_eq!(time.samples.len(), expected.len());
    for (&sample, expected) in time.samples.iter().zip(expected) {
        assert_close(sample, expected);
    }
    // The median of the samples is the tool's own median aggregate.
    assert_close(time.value, 295.51319796228813);
}

#[test]
fn golden_aggregates_only_use_the_median_row() {
    let doc = include_bytes!("../../../tests/data/google-benchmark/aggregates_only.json");
    let suite = parse_google_benchmark(doc).unwrap();
    assert_valid(&suite);
    assert_eq!(names(&suite), ["BM_sum/64"]);
    let time = &suite.benchmarks[0].metrics[0];
    assert_close(time.value, 33.69823908987398);
    assert_eq!(time.samples.len(), 1);
}

#[test]
fn time_units_are_converted_to_ns_and_big_o_rows_are_no_benchmark() {
    let doc = r#"{"benchmarks":[
        {"name":"BM_a","run_type":"iteration","real_time":1.5,"cpu_time":1,"time_unit":"us"},
        {"name":"BM_b","run_type":"iteration","real_time":2,"cpu_time":2,"time_unit":"ms"},
        {"name":"BM_c","real_time":3,"cpu_time":3,"time_unit":"s"},
        {"name":"BM_a_BigO","run_name":"BM_a_fam","run_type":"aggregate",
         "aggregate_name":"BigO","cpu_coefficient":1,"big_o":"N"}]}"#;
    let suite = parse_google_benchmark(doc.as_bytes()).unwrap();
    assert_valid(&suite);
    let times: Vec<_> = suite
        .benchmarks
        .iter()
        .map(|b| b.metrics[0].value)
        .collect();
    assert_eq!(times, [1500.0, 2e6, 3e9]);
}

#[test]
fn only_failed_benchmarks_is_an_error_naming_the_first() {
    let doc = r#"{"benchmarks":[{"name":"BM_x","error_occurred":true,
        "error_message":"no input file","real_time":0,"cpu_time":0}]}"#;
    assert_eq!(
        refused(doc),
        "benchmarks[0]: every benchmark failed, the first with \"no input file\""
    );
}

#[test]
fn malformed_documents_name_their_place() {
    let cases = [
        (
            r#"{"benchmarks":[]}"#,
            "the output: no benchmark results found",
        ),
        (
            r#"{"context":{}}"#,
            "the document (line 1, column 14): missing field `benchmarks`",
        ),
        (
            r#"{"benchmarks":[{"name":"a","real_time":"fast"}]}"#,
            "benchmarks[0].real_time (line 1, column 45): invalid type: string \"fast\", \
             expected f64",
        ),
        (
            r#"{"benchmarks":[{"name":"a","real_time":1,"cpu_time":1,"time_unit":"min"}]}"#,
            "benchmarks[0]: time_unit is \"min\"; expected ns, us, ms or s",
        ),
        (
            r#"{"benchmarks":[{"name":"a","cpu_time":1}]}"#,
            "benchmarks[0]: has no real_time",
        ),
        (
            r#"{"benchmarks":[{"name":"a","real_time":-1,"cpu_time":1}]}"#,
            "benchmarks[0]: time is -1; it must be a finite number, not negative",
        ),
        (
            r#"{"benchmarks":[{"name":"a","real_time":1e999}]}"#,
            "benchmarks[0].real_time (line 1, column 44): number out of range; \
             values must be finite",
        ),
        (
            r#"{"benchmarks":[{"name":"a","run_type":"warmup","real_time":1}]}"#,
            "benchmarks[0]: run_type is \"warmup\"; expected iteration or aggregate",
        ),
        (
            r#"{"benchmarks":[{"name":"a","real_time":1,"cpu_time":1,"#,
            "benchmarks[0].cpu_time (line 1, column 54): not valid JSON: EOF while parsing a value",
        ),
        (
            r#"{"benchmarks":[{"name":"a","real_time":1,"cpu_time":Infinity}]}"#,
            "benchmarks[0].cpu_time (line 1, column 53): Infinity is not a JSON number; \
             values must be finite",
        ),
    ];
    for (doc, expected) in cases {
        assert_eq!(refused(doc), expected, "for {doc}");
    }
}

#[test]
fn hostile_documents_are_refused_early() {
    let deep = format!(r#"{{"context":{}"#, "{\"a\":".repeat(100));
    let message = refused(&deep);
    assert!(
        message.ends_with("nested deeper than 64 levels"),
        "{message}"
    );
    let row = r#"{"name":"a","real_time":1,"cpu_time":1}"#;
    let rows = vec![row; MAX_ROWS + 1].join(",");
    let message = refused(&format!(r#"{{"benchmarks":[{rows}]}}"#));
    assert_eq!(
        message,
        "benchmarks (line 1, column 4000055): the list holds 100001 items; \
         at most 100000 are accepted"
    );
    let name = format!(
        r#"{{"benchmarks":[{{"name":"{}","real_time":1}}]}}"#,
        "n".repeat(1 << 20)
    );
    assert!(refused(&name).len() < 400);
}
