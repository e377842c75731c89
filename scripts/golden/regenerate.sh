#!/usr/bin/env bash
# Regenerates the parsers' golden files under core/tests/data/<format>/ by running the real
# tools on the tiny benchmarks beside this script. Usage: regenerate.sh [FORMAT...]
# (default: all of criterion libtest hyperfine google-benchmark go-bench pytest-benchmark).
#
# Needs: cargo (with crates.io reachable, or criterion 0.8.2 already in the cargo cache),
# hyperfine, g++ with libbenchmark-dev, golang-go, python3 with pytest and pytest-benchmark:
#   apt-get install hyperfine libbenchmark-dev g++ golang-go && pip install pytest pytest-benchmark
#
# Two formats are not produced here: kymo JSON (core/tests/data/kymo/, the native format, kept by
# its parser's tests) and BMF (core/tests/data/bmf/documented.json), written from Bencher's BMF
# reference because no Bencher CLI is packaged for this machine.
#
# Numbers differ on every run; the tests check structure, units and counts, plus values read from
# the committed files, so after regenerating, update the few exact values the tests assert.
# Machine details (host names, absolute paths, commit ids) are scrubbed from what is kept.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../.." && pwd)/core/tests/data
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Rewrites a JSON file in place with a Python expression over `d`, keeping the tool's layout
# close to what it printed (indent 4, key order kept).
scrub_json() {
    python3 - "$1" "$2" <<'PY'
import json, sys
path, expr = sys.argv[1], sys.argv[2]
with open(path) as f:
    d = json.load(f)
exec(expr)
with open(path, "w") as f:
    json.dump(d, f, indent=4)
    f.write("\n")
PY
}

criterion() {
    # A throwaway cargo project: a Cargo.toml inside this workspace would be taken for a member.
    local project=$work/criterion
    mkdir -p "$project/benches"
    cp "$here/criterion_bench.rs" "$project/benches/golden.rs"
    cat >"$project/Cargo.toml" <<'TOML'
[package]
name = "kymo-golden-criterion"
version = "0.0.0"
edition = "2024"
publish = false

[dev-dependencies]
criterion = { version = "=0.8.2", default-features = false }

[[bench]]
name = "golden"
harness = false
TOML
    (cd "$project" && CARGO_TARGET_DIR="$project/target" cargo bench --bench golden -- --noplot)
    # Only what the parser reads: each benchmark's `new/` estimates, samples and ids.
    rm -rf "$data/criterion"
    (cd "$project/target/criterion" && find . -path '*/new/*' \
        \( -name benchmark.json -o -name estimates.json -o -name sample.json \) -print0 |
        while IFS= read -r -d '' file; do
            mkdir -p "$data/criterion/$(dirname "$file")"
            cp "$file" "$data/criterion/$file"
        done)
}

libtest() {
    # `#[bench]` is unstable; RUSTC_BOOTSTRAP=1 lets the stable toolchain's own libtest run it,
    # so the output is the real harness's, not typed by hand.
    local project=$work/libtest
    mkdir -p "$project/benches"
    cp "$here/libtest_bench.rs" "$project/benches/golden.rs"
    cat >"$project/Cargo.toml" <<'TOML'
[package]
name = "kymo-golden-libtest"
version = "0.0.0"
edition = "2024"
publish = false

[[bench]]
name = "golden"
TOML
    mkdir -p "$data/libtest"
    (cd "$project" && RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$project/target" \
        cargo bench --bench golden) >"$data/libtest/cargo_bench.txt"
}

hyperfine_() {
    mkdir -p "$data/hyperfine"
    (cd "$work" && hyperfine --runs 5 --warmup 1 --style none \
        --command-name sleep --export-json "$data/hyperfine/commands.json" \
        'sleep 0.01' 'seq 1000')
    (cd "$work" && hyperfine --runs 3 --style none --shell none \
        --parameter-list n 1000,100000 --export-json "$data/hyperfine/parameters.json" \
        'seq {n}')
}

google_benchmark() {
    g++ -O2 -std=c++17 -o "$work/golden_bench" "$here/google_benchmark.cc" \
        -lbenchmark -lpthread
    mkdir -p "$data/google-benchmark"
    local context='d["context"].update(host_name="golden-host", executable="./golden_bench")'
    "$work/golden_bench" --benchmark_format=json --benchmark_min_time=0.01 \
        >"$data/google-benchmark/plain.json"
    scrub_json "$data/google-benchmark/plain.json" "$context"
    "$work/golden_bench" --benchmark_format=json --benchmark_min_time=0.01 \
        --benchmark_repetitions=3 --benchmark_filter='BM_sum/512' \
        >"$data/google-benchmark/repetitions.json"
    scrub_json "$data/google-benchmark/repetitions.json" "$context"
    "$work/golden_bench" --benchmark_format=json --benchmark_min_time=0.01 \
        --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
        --benchmark_filter='BM_sum/64' >"$data/google-benchmark/aggregates_only.json"
    scrub_json "$data/google-benchmark/aggregates_only.json" "$context"
}

go_bench() {
    mkdir -p "$data/go-bench"
    cp -r "$here/gobench" "$work/gobench"
    (cd "$work/gobench" && GOFLAGS=-mod=mod go test -run '^$' -bench . -benchmem \
        -benchtime 2000x -count 3 -cpu 1,2) >"$data/go-bench/bench.txt"
    # The closing `ok` line carries the package and how long it took; neither matters here.
}

pytest_benchmark() {
    mkdir -p "$data/pytest-benchmark"
    cp -r "$here/pytest_bench" "$work/pytest_bench"
    (cd "$work/pytest_bench" && python3 -m pytest -q -p no:cacheprovider test_golden.py \
        --benchmark-max-time=0.01 --benchmark-min-rounds=3 \
        --benchmark-json="$data/pytest-benchmark/with_data.json" \
        --benchmark-save=golden --benchmark-storage="file://$work/storage")
    # `--benchmark-save` keeps no per-round data unless `--benchmark-save-data` is given.
    cp "$(find "$work/storage" -name '*golden.json' | head -n 1)" \
        "$data/pytest-benchmark/without_data.json"
    local scrub='d["machine_info"] = {"node": "golden-host", "machine": d["machine_info"]["machine"],
    "python_implementation": d["machine_info"]["python_implementation"],
    "python_version": d["machine_info"]["python_version"]}
d["commit_info"] = {}'
    scrub_json "$data/pytest-benchmark/with_data.json" "$scrub"
    scrub_json "$data/pytest-benchmark/without_data.json" "$scrub"
}

formats=("$@")
[ ${#formats[@]} -gt 0 ] || formats=(criterion libtest hyperfine google-benchmark go-bench
    pytest-benchmark)
for format in "${formats[@]}"; do
    echo "== $format" >&2
    case $format in
    criterion) criterion ;;
    libtest) libtest ;;
    hyperfine) hyperfine_ ;;
    google-benchmark) google_benchmark ;;
    go-bench) go_bench ;;
    pytest-benchmark) pytest_benchmark ;;
    *) echo "unknown format: $format" >&2 && exit 2 ;;
    esac
done
