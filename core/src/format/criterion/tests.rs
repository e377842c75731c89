use std::os::unix::fs::symlink;

use super::*;
use crate::format::tests::{assert_close, assert_valid};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/criterion")
}

fn refused(dir: &Path) -> String {
    parse_criterion_dir(dir).unwrap_err().to_string()
}

/// A directory holding one benchmark `g/f` with the given files.
fn one_benchmark(id: &str, estimates: &str, sample: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("g/f/new");
    fs::create_dir_all(&new).unwrap();
    fs::write(new.join("benchmark.json"), id).unwrap();
    fs::write(new.join("estimates.json"), estimates).unwrap();
    fs::write(new.join("sample.json"), sample).unwrap();
    dir
}

const ID: &str = r#"{"group_id":"g","function_id":"f","value_str":null,"throughput":null}"#;
const ESTIMATES: &str = r#"{"mean":{"point_estimate":2.0},"slope":null}"#;
const SAMPLE: &str = r#"{"iters":[1,2],"times":[2,6]}"#;

#[test]
fn golden_target_criterion_directory() {
    let suite = parse_criterion_dir(&golden_dir()).unwrap();
    assert_valid(&suite);
    let names: Vec<_> = suite.benchmarks.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "checksum/bytes/1024",
            "checksum/bytes/64",
            "checksum/elements",
            "sum_100"
        ]
    );
    let sum = &suite.benchmarks[3];
    let [time] = &sum.metrics[..] else {
        panic!("only a time without throughput: {sum:?}")
    };
    assert_eq!(
        (time.unit.as_str(), time.direction),
        ("ns", Direction::Lower)
    );
    assert_eq!(time.samples.len(), 10);
    // The slope estimate, and the first sample's total time over its iterations.
    assert_close(time.value, 2.2668502013833502);
    assert_eq!(time.samples[0], 10846557.0 / 5082337.0);

    let bytes = &suite.benchmarks[0];
    let [time, throughput] = &bytes.metrics[..] else {
        panic!("time and throughput: {bytes:?}")
    };
    assert_close(time.value, 218.00671958652998);
    assert_eq!(throughput.unit, "B/s");
    assert_eq!(throughput.direction, Direction::Higher);
    assert_close(throughput.value, 1024.0 * 1e9 / 218.00671958652998);
    assert_eq!(throughput.samples.len(), 10);
    assert_eq!(throughput.samples[0], 1024.0 * 1e9 / (15546924.0 / 44617.0));
    assert_eq!(suite.benchmarks[2].metrics[1].unit, "elem/s");
}

#[test]
fn a_subdirectory_holds_its_own_benchmarks() {
    let suite = parse_criterion_dir(&golden_dir().join("checksum/bytes")).unwrap();
    let names: Vec<_> = suite.benchmarks.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["checksum/bytes/1024", "checksum/bytes/64"]);
}

#[test]
fn mean_without_slope_and_both_kinds_of_throughput() {
    let id = ID.replace(
        r#""throughput":null"#,
        r#""throughput":{"ElementsAndBytes":{"elements":2,"bytes":8}}"#,
    );
    let dir = one_benchmark(&id, ESTIMATES, SAMPLE);
    let suite = parse_criterion_dir(dir.path()).unwrap();
    assert_valid(&suite);
    let metrics: Vec<_> = (suite.benchmarks[0].metrics.iter())
        .map(|m| (m.name.as_str(), m.unit.as_str(), m.value, m.samples.clone()))
        .collect();
    assert_eq!(
        metrics,
        [
            ("time", "ns", 2.0, vec![2.0, 3.0]),
            ("throughput", "elem/s", 1e9, vec![1e9, 2e9 / 3.0]),
            ("byte_throughput", "B/s", 4e9, vec![4e9, 8e9 / 3.0]),
        ]
    );
}

#[test]
fn malformed_files_are_named_with_their_place() {
    let cases = [
        (
            ID.replace(r#""group_id":"g""#, r#""group_id":7"#),
            ESTIMATES,
            SAMPLE,
            "g/f/new/benchmark.json: group_id (line 1, column 13): invalid type: integer `7`, \
             expected a string",
        ),
        (
            ID.replace("null}", r#"{"Kilobytes":3}}"#),
            ESTIMATES,
            SAMPLE,
            "g/f/new/benchmark.json: throughput.Kilobytes (line 1, column 76): unknown variant \
             `Kilobytes`, expected one of `Bits`, `Bytes`, `BytesDecimal`, `Elements`, \
             `ElementsAndBytes`",
        ),
        (
            ID.to_string(),
            r#"{"mean":{"point_estimate":-2}}"#,
            SAMPLE,
            "g/f/new/estimates.json: the estimate is -2; it must be a finite number, \
             not negative",
        ),
        (
            ID.to_string(),
            r#"{"mean":{"point_estimate":2}"#,
            SAMPLE,
            "g/f/new/estimates.json: mean (line 1, column 28): not valid JSON: \
             EOF while parsing an object",
        ),
        (
            ID.to_string(),
            ESTIMATES,
            r#"{"iters":[1],"times":[2,3]}"#,
            "g/f/new/sample.json: has 1 iters but 2 times",
        ),
        (
            ID.to_string(),
            ESTIMATES,
            r#"{"iters":[0,1],"times":[2,3]}"#,
            "g/f/new/sample.json: iters[0] is 0; it must be at least 1",
        ),
        (
            ID.to_string(),
            ESTIMATES,
            r#"{"iters":[1,1],"times":[2,-3]}"#,
            "g/f/new/sample.json: times[1] is -3; it must be a finite number, not negative",
        ),
        (
            ID.to_string(),
            ESTIMATES,
            r#"{"iters":[1],"times":[NaN]}"#,
            "g/f/new/sample.json: times[0] (line 1, column 23): NaN is not a JSON number; \
             values must be finite",
        ),
        (
            ID.to_string(),
            ESTIMATES,
            " \n",
            "g/f/new/sample.json: is empty",
        ),
    ];
    for (id, estimates, sample, expected) in cases {
        let dir = one_benchmark(&id, estimates, sample);
        assert_eq!(refused(dir.path()), expected);
    }
    let latin1 = one_benchmark(ID, ESTIMATES, SAMPLE);
    fs::write(
        latin1.path().join("g/f/new/sample.json"),
        b"{\"iters\xff\":[]}",
    )
    .unwrap();
    assert_eq!(
        refused(latin1.path()),
        "g/f/new/sample.json (line 1, column 8): the file is not UTF-8"
    );
}

#[test]
fn missing_files_and_empty_directories_are_refused() {
    let empty = tempfile::tempdir().unwrap();
    let message = refused(empty.path());
    assert!(
        message
            .ends_with("holds no criterion results (no <benchmark>/new/benchmark.json below it)")
    );
    let dir = one_benchmark(ID, ESTIMATES, SAMPLE);
    fs::remove_file(dir.path().join("g/f/new/sample.json")).unwrap();
    let message = refused(dir.path());
    assert!(
        message.starts_with("g/f/new/sample.json: cannot be read: "),
        "{message}"
    );
    let gone = dir.path().join("no/such/dir");
    assert!(refused(&gone).contains("cannot be read"));
}

#[test]
fn hostile_directories_are_refused_without_following_links() {
    let outside = one_benchmark(ID, ESTIMATES, SAMPLE);
    let dir = tempfile::tempdir().unwrap();
    // A linked benchmark directory is not walked into: nothing is found.
    symlink(outside.path().join("g"), dir.path().join("g")).unwrap();
    assert!(refused(dir.path()).contains("holds no criterion results"));
    // A linked file inside a real benchmark directory is refused.
    let linked = one_benchmark(ID, ESTIMATES, SAMPLE);
    let sample = linked.path().join("g/f/new/sample.json");
    fs::remove_file(&sample).unwrap();
    symlink(outside.path().join("g/f/new/sample.json"), &sample).unwrap();
    assert_eq!(
        refused(linked.path()),
        "g/f/new/sample.json: is not a regular file"
    );
    let big = one_benchmark(ID, ESTIMATES, SAMPLE);
    let huge = vec![b' '; MAX_DOCUMENT_BYTES + 1];
    fs::write(big.path().join("g/f/new/estimates.json"), huge).unwrap();
    assert_eq!(
        refused(big.path()),
        "g/f/new/estimates.json: is more than 33554432 bytes"
    );
    let deep = one_benchmark(ID, ESTIMATES, &format!("{}1", "[".repeat(100)));
    assert!(refused(deep.path()).ends_with("nested deeper than 64 levels"));
    let too_deep = tempfile::tempdir().unwrap();
    let nested = too_deep.path().join("a/b/c/d/e/f/g");
    fs::create_dir_all(nested.join("new")).unwrap();
    fs::write(nested.join("new/benchmark.json"), ID).unwrap();
    assert!(refused(too_deep.path()).contains("holds no criterion results"));
}
