use super::*;
use crate::format::tests::assert_valid;

fn refused(doc: &str) -> String {
    parse_pytest_benchmark(doc.as_bytes())
        .unwrap_err()
        .to_string()
}

/// A document of one benchmark with the given fields besides its stats.
fn one(fields: &str) -> String {
    format!(r#"{{"benchmarks":[{{"name":"t",{fields}"stats":{{"median":0.5}}}}]}}"#)
}

#[test]
fn golden_json_with_per_round_data() {
    let doc = include_bytes!("../../../tests/data/pytest-benchmark/with_data.json");
    let suite = parse_pytest_benchmark(doc).unwrap();
    assert_valid(&suite);
    let keys: Vec<_> = suite.benchmarks.iter().map(|b| b.key()).collect();
    assert_eq!(
        keys,
        [
            "test_golden.py::test_squares{n=10}",
            "test_golden.py::test_squares{n=1000}",
            "test_golden.py::test_pedantic",
        ]
    );
    let time = &suite.benchmarks[0].metrics[0];
    assert_eq!((time.name.as_str(), time.unit.as_str()), ("time", "ns"));
    assert_eq!(time.direction, Direction::Lower);
    assert_eq!(time.samples.len(), 9);
    // pytest-benchmark's median, 0.001140246999966621 s.
    assert!((time.value - 1_140_246.999_966_621).abs() < 1e-6);
    assert!((time.samples[4] - 1_120_303.999_869_065_6).abs() < 1e-6);
    // pedantic(rounds=4, iterations=2): four per-iteration round times.
    assert_eq!(suite.benchmarks[2].metrics[0].samples.len(), 4);
}

#[test]
fn golden_saved_file_without_data_keeps_the_median() {
    let doc = include_bytes!("../../../tests/data/pytest-benchmark/without_data.json");
    let suite = parse_pytest_benchmark(doc).unwrap();
    assert_valid(&suite);
    assert_eq!(suite.benchmarks.len(), 3);
    for bench in &suite.benchmarks {
        let time = &bench.metrics[0];
        assert!(time.samples.is_empty() && time.value > 0.0, "{bench:?}");
    }
}

#[test]
fn ids_stay_in_the_name_unless_every_value_is_plain() {
    let cases = [
        (
            r#""fullname":"m.py::t[a-1]","param":"a-1","params":{"s":"a","n":1},"#,
            "m.py::t{n=1,s=a}",
        ),
        (
            r#""fullname":"m.py::t[big]","param":"big","params":{"n":64},"#,
            "m.py::t{n=64}",
        ),
        (
            r#""fullname":"m.py::t[x0]","param":"x0","params":{"v":[1,2]},"#,
            "m.py::t[x0]",
        ),
        (
            r#""fullname":"m.py::t[x0]","param":"x0","params":{"v":null},"#,
            "m.py::t[x0]",
        ),
        (
            r#""fullname":"m.py::t[x0]","param":"other","params":{"n":1},"#,
            "m.py::t[x0]",
        ),
        (
            r#""fullname":"m.py::t","param":null,"params":null,"#,
            "m.py::t",
        ),
        (r#""params":{"n":0.5},"param":"0.5","#, "t"),
    ];
    for (fields, key) in cases {
        let suite = parse_pytest_benchmark(one(fields).as_bytes()).unwrap();
        assert_valid(&suite);
        assert_eq!(suite.benchmarks[0].key(), key, "for {fields}");
    }
}

#[test]
fn malformed_documents_name_their_place() {
    let cases = [
        (r#"{"benchmarks":[]}"#.to_string(), "the output: no benchmark results found"),
        (
            r#"{"benchmarks":[{"name":"t"}]}"#.to_string(),
            "benchmarks[0] (line 1, column 27): missing field `stats`",
        ),
        (
            r#"{"benchmarks":[{"name":"t","stats":{"median":null}}]}"#.to_string(),
            "benchmarks[0].stats.median (line 1, column 49): invalid type: null, expected f64",
        ),
        (
            r#"{"benchmarks":[{"name":"t","stats":{"median":1,"data":[1,NaN]}}]}"#.to_string(),
            "benchmarks[0].stats.data[1] (line 1, column 58): NaN is not a JSON number; \
             values must be finite",
        ),
        (
            r#"{"benchmarks":[{"name":"t","stats":{"median":-1e-3}}]}"#.to_string(),
            "benchmarks[0]: stats.median is -0.001; it must be a finite number, not negative",
        ),
        (
            r#"{"benchmarks":[{"name":"t","stats":{"median":1,"data":[-1]}}]}"#.to_string(),
            "benchmarks[0]: a value of stats.data is -1; it must be a finite number, \
             not negative",
        ),
        (
            r#"{"benchmarks":[{"name":"t","stats":[1]}]}"#.to_string(),
            "benchmarks[0].stats (line 1, column 35): invalid type: sequence, expected an object",
        ),
        (
            one(r#""params":{"n":1,"n":2},"#),
            "benchmarks[0].params.n (line 1, column 46): the key \"n\" appears twice",
        ),
        (
            r#"{"benchmarks":[{"name":"t","stats":{"median":1}},{"name":"t","stats":{"median":2}}]}"#
                .to_string(),
            "benchmarks[1] (\"t\"): benchmark \"t\" was already found at benchmarks[0] (\"t\")",
        ),
        (
            r#"{"benchmarks":[{"name":"t","stats":{"median":1}}"#.to_string(),
            "benchmarks[0] (line 1, column 48): not valid JSON: EOF while parsing a list",
        ),
    ];
    for (doc, expected) in cases {
        assert_eq!(refused(&doc), expected, "for {doc}");
    }
}

#[test]
fn hostile_documents_are_refused_early() {
    let deep = one(&format!(r#""extra_info":{}"#, "[".repeat(100)));
    assert!(refused(&deep).ends_with("nested deeper than 64 levels"));
    let data = vec!["0.1"; MAX_SAMPLES_PER_METRIC + 1].join(",");
    let many =
        format!(r#"{{"benchmarks":[{{"name":"t","stats":{{"median":1,"data":[{data}]}}}}]}}"#);
    let message = refused(&many);
    assert!(
        message.starts_with("benchmarks[0].stats.data (line 1, column"),
        "{message}"
    );
    assert!(message.ends_with("the list holds 100001 items; at most 100000 are accepted"));
    let params: Vec<_> = (0..=MAX_PARAMS_PER_BENCHMARK)
        .map(|i| format!(r#""p{i}":1"#))
        .collect();
    let message = refused(&one(&format!(r#""params":{{{}}},"#, params.join(","))));
    assert_eq!(
        message,
        "benchmarks[0].params (line 1, column 291): the object holds 33 entries; \
         at most 32 are accepted"
    );
    let long = one(&format!(r#""fullname":"{}","#, "x".repeat(1 << 20)));
    assert!(refused(&long).len() < 400);
}
